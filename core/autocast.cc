// Autocast state and casts (see autocast.h for the contract).
#include "core/autocast.h"

#include <array>

#include "core/error.h"
#include "core/ops.h"

namespace weft {
namespace {

struct State {
  bool enabled = false;
  DType dtype = DType::BFloat16;
};

std::array<State, kNumDeviceTypes>& states() {
  thread_local std::array<State, kNumDeviceTypes> s{};
  return s;
}

bool eligible_for_lower(DType d) { return d == DType::Float32 || d == DType::Float16 || d == DType::BFloat16; }

}  // namespace

AutocastGuard::AutocastGuard(DeviceType device, DType dtype, bool enabled) : device_(device) {
  WEFT_CHECK(dtype == DType::BFloat16 || dtype == DType::Float16,
             "AutocastGuard: the autocast dtype must be bfloat16 or float16, got ", dtype);
  State& s = states()[static_cast<int>(device)];
  prev_enabled_ = s.enabled;
  prev_dtype_ = s.dtype;
  s.enabled = enabled;
  if (enabled) s.dtype = dtype;
}

AutocastGuard::~AutocastGuard() {
  State& s = states()[static_cast<int>(device_)];
  s.enabled = prev_enabled_;
  s.dtype = prev_dtype_;
}

namespace autocast {

bool is_enabled(DeviceType device) { return states()[static_cast<int>(device)].enabled; }
DType dtype(DeviceType device) { return states()[static_cast<int>(device)].dtype; }

Tensor lower(const Tensor& t) {
  if (!t.defined()) return t;
  const State& s = states()[static_cast<int>(t.device().type)];
  if (!s.enabled || !eligible_for_lower(t.dtype()) || t.dtype() == s.dtype) return t;
  return to_dtype(t, s.dtype);
}

Tensor upcast(const Tensor& t) {
  if (!t.defined()) return t;
  if (!states()[static_cast<int>(t.device().type)].enabled) return t;
  if (t.dtype() != DType::Float16 && t.dtype() != DType::BFloat16) return t;
  return to_dtype(t, DType::Float32);
}

}  // namespace autocast
}  // namespace weft
