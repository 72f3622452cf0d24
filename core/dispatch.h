// Kernel tables: the one registry through which every op reaches a backend.
//
// Contract: an op owns one KernelTable<Sig> (defined next to the op, in
// core/ops/*.cc, and declared with its kernel signature in core/kernels/*.h,
// listed in core/kernels/INDEX.md). Backends register
// kernels per (device type, dtype) at static-initialisation time with
// WEFT_REGISTER_KERNEL. lookup() of a missing entry throws
// "<op> has no kernel for <device>/<dtype>", never falls through silently.
// Backend libraries are linked with alwayslink so their registrars run.
#pragma once

#include <array>
#include <string>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"

namespace weft {

template <typename Sig>
class KernelTable;

template <typename R, typename... Args>
class KernelTable<R(Args...)> {
 public:
  using Fn = R (*)(Args...);
  explicit KernelTable(const char* op) : op_(op) {}
  const char* name() const { return op_; }

  void set(DeviceType dev, DType dt, Fn fn) { table_[static_cast<int>(dev)][static_cast<int>(dt)] = fn; }
  bool has(DeviceType dev, DType dt) const { return table_[static_cast<int>(dev)][static_cast<int>(dt)] != nullptr; }
  Fn lookup(Device dev, DType dt) const {
    Fn fn = table_[static_cast<int>(dev.type)][static_cast<int>(dt)];
    WEFT_CHECK(fn != nullptr, op_, " has no kernel for ", dev.is_cpu() ? "cpu" : "cuda", "/", dt);
    return fn;
  }
  R operator()(Device dev, DType dt, Args... args) const { return lookup(dev, dt)(args...); }

 private:
  const char* op_;
  std::array<std::array<Fn, kNumDTypes>, kNumDeviceTypes> table_{};
};

// Registers `Kernel<T>` for every T in `Set` (a DTypeSet) on device type `Dev`.
// Usage: WEFT_REGISTER_KERNEL(add_table(), DeviceType::CPU, kAllTypes, add_kernel);
// where add_kernel is a function template whose instantiations match the table.
namespace detail {
// `Set` is a template argument so that only its dtypes' kernels are compiled.
template <uint32_t Set, typename Table, typename F>
void register_each(Table& table, DeviceType dev, F&& make) {
  for (int i = 0; i < kNumDTypes; ++i) {
    DType dt = static_cast<DType>(i);
    if (in_set(dt, Set)) {
      dispatch<Set>(dt, table.name(), [&](auto tag) { table.set(dev, dt, make(tag)); });
    }
  }
}
struct Registrar {
  template <typename F>
  explicit Registrar(F&& f) {
    f();
  }
};
}  // namespace detail

#define WEFT_CONCAT_INNER(a, b) a##b
#define WEFT_CONCAT(a, b) WEFT_CONCAT_INNER(a, b)
#define WEFT_REGISTER_KERNEL(table, dev, set, kernel_template)                    \
  static ::weft::detail::Registrar WEFT_CONCAT(weft_registrar_, __COUNTER__)([] { \
    ::weft::detail::register_each<(set)>((table), (dev), [](auto tag) {           \
      using T_ = typename decltype(tag)::type;                                    \
      return &kernel_template<T_>;                                                \
    });                                                                           \
  })

}  // namespace weft
