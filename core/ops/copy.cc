// Copies and conversions: copy_ (broadcasting, dtype-converting), fill_, zero_,
// to_dtype, to_device, clone, contiguous. All differentiable.
#include "core/kernels/copy.h"

#include "core/autograd_meta.h"
#include "core/cpu/loops.h"
#include "core/dispatch.h"
#include "core/ops.h"

namespace weft {

CopyKernel& copy_table() {
  static CopyKernel t("copy_");
  return t;
}
FillKernel& fill_table() {
  static FillKernel t("fill_");
  return t;
}

namespace {

template <typename Dst>
void cpu_copy_kernel(const Tensor& dst, const Tensor& src) {
  dispatch(src.dtype(), "copy_", [&](auto tag) {
    using Src = typename decltype(tag)::type;
    cpu::elementwise<Dst, Src>(dst, {src}, [](auto x) { return x; });
  });
}

template <typename T>
void cpu_fill_kernel(const Tensor& dst, const Scalar& value) {
  T v = value.to<T>();
  if (dst.is_contiguous()) {
    T* p = dst.data_ptr<T>();
    parallel_for(0, dst.numel(), kGrainSize, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) p[i] = v;
    });
    return;
  }
  cpu::elementwise<T>(dst, {}, [v]() { return static_cast<opmath_t<T>>(v); });
}

WEFT_REGISTER_KERNEL(copy_table(), DeviceType::CPU, kAllTypes, cpu_copy_kernel);
WEFT_REGISTER_KERNEL(fill_table(), DeviceType::CPU, kAllTypes, cpu_fill_kernel);

}  // namespace

Tensor& copy_(Tensor& dst, const Tensor& src) {
  WEFT_CHECK(dst.defined() && src.defined(), "copy_: undefined tensor");
  check_inplace("copy_", dst, {src});
  Shape b = broadcast_shapes("copy_", dst.sizes(), src.sizes());
  WEFT_CHECK(b == dst.sizes(), "copy_: source shape ", shape_str(src.sizes()),
             " cannot be broadcast to destination shape ", shape_str(dst.sizes()));
  WEFT_CHECK(src.device() == dst.device() || dst.device().is_cpu() || src.device().is_cpu(),
             "copy_: cannot copy between ", src.device(), " and ", dst.device());
  if (dst.impl() != src.impl()) {
    Device dev =
        dst.device().is_cpu() && src.device().is_cpu() ? kCPU : (dst.device().is_cpu() ? src.device() : dst.device());
    copy_table()(dev, dst.dtype(), dst, expand(src.detach(), dst.sizes()));
  }
  Shape src_sizes = src.sizes();
  DType src_dtype = src.dtype();
  Device src_device = src.device();
  record_inplace(
      "CopyBackward", dst, {src},
      [src_sizes, src_dtype, src_device](const std::vector<Tensor>& g) {
        Tensor gs = sum_to(g[0], src_sizes).to(src_dtype).to(src_device);
        return std::vector<Tensor>{zeros_like(g[0]), gs};
      },
      /*differentiable=*/true);
  return dst;
}

Tensor& fill_(Tensor& t, const Scalar& value) {
  check_inplace("fill_", t);
  fill_table()(t.device(), t.dtype(), t, value);
  record_inplace(
      "FillBackward", t, {}, [](const std::vector<Tensor>& g) { return std::vector<Tensor>{zeros_like(g[0])}; },
      /*differentiable=*/true);
  return t;
}

Tensor& zero_(Tensor& t) { return fill_(t, 0); }

Tensor to_dtype(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  Tensor out = empty(t.sizes(), {dtype, t.device()});
  copy_table()(t.device(), dtype, out, t.detach());
  if (is_floating(dtype) && is_floating(t.dtype())) {
    DType src = t.dtype();
    record_differentiable("ToCopyBackward", {t}, {out},
                          [src](const std::vector<Tensor>& g) { return std::vector<Tensor>{g[0].to(src)}; });
  }
  return out;
}

Tensor to_device(const Tensor& t, Device device) {
  if (t.device() == device) return t;
  Tensor out = empty(t.sizes(), {t.dtype(), device});
  Device dev = device.is_cpu() ? t.device() : device;
  copy_table()(dev, t.dtype(), out, t.detach());
  Device src = t.device();
  record_differentiable("ToDeviceBackward", {t}, {out},
                        [src](const std::vector<Tensor>& g) { return std::vector<Tensor>{g[0].to(src)}; });
  return out;
}

Tensor clone(const Tensor& t) {
  Tensor out = empty(t.sizes(), t.options());
  copy_table()(t.device(), t.dtype(), out, t.detach());
  record_differentiable("CloneBackward", {t}, {out}, [](const std::vector<Tensor>& g) { return g; });
  return out;
}

Tensor contiguous(const Tensor& t) { return t.is_contiguous() ? t : clone(t); }

}  // namespace weft
