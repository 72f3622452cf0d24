// Factories: empty/zeros/ones/full/arange/linspace/eye/tensor/from_blob.
#include <cmath>
#include <cstring>

#include "core/autograd_meta.h"
#include "core/cpu/loops.h"
#include "core/ops.h"

namespace weft {

namespace {

// The bytes of a contiguous tensor of `sizes` and `dtype`; negative sizes and
// more than 2^62 bytes (products that would wrap around) are errors naming `op`.
size_t checked_nbytes(const char* op, const Shape& sizes, DType dtype) {
  for (int64_t s : sizes) WEFT_CHECK(s >= 0, op, ": negative dimension ", s, " in shape ", shape_str(sizes));
  size_t bytes = 0;
  WEFT_CHECK(!__builtin_mul_overflow(static_cast<size_t>(numel_of(sizes)), element_size(dtype), &bytes) &&
                 bytes <= (size_t{1} << 62),
             op, ": shape ", shape_str(sizes), " of ", dtype_name(dtype), " needs more than 2^62 bytes");
  return bytes;
}

}  // namespace

Tensor empty(const Shape& sizes, const TensorOptions& opts) {
  const size_t bytes = checked_nbytes("empty", sizes, opts.dtype);
  auto storage = std::make_shared<StorageImpl>(bytes, opts.device, get_allocator(opts.device));
  Tensor t(std::make_shared<TensorImpl>(std::move(storage), 0, sizes, contiguous_strides(sizes), opts.dtype));
  if (opts.requires_grad) t.requires_grad_(true);
  return t;
}

Tensor full(const Shape& sizes, const Scalar& value, const TensorOptions& opts) {
  TensorOptions o = opts;
  o.requires_grad = false;
  Tensor t = empty(sizes, o);
  fill_(t, value);
  if (opts.requires_grad) t.requires_grad_(true);
  return t;
}

Tensor full(const Shape& sizes, const Scalar& value) { return full(sizes, value, value.default_dtype()); }

Tensor zeros(const Shape& sizes, const TensorOptions& opts) { return full(sizes, 0, opts); }
Tensor ones(const Shape& sizes, const TensorOptions& opts) { return full(sizes, 1, opts); }
Tensor empty_like(const Tensor& t) { return empty(t.sizes(), t.options()); }
Tensor empty_like(const Tensor& t, DType d) { return empty(t.sizes(), t.options().with_dtype(d)); }
Tensor empty_like(const Tensor& t, Device d) { return empty(t.sizes(), t.options().with_device(d)); }
Tensor empty_like(const Tensor& t, const TensorOptions& o) { return empty(t.sizes(), o); }
Tensor zeros_like(const Tensor& t) { return zeros(t.sizes(), t.options()); }
Tensor zeros_like(const Tensor& t, DType d) { return zeros(t.sizes(), t.options().with_dtype(d)); }
Tensor zeros_like(const Tensor& t, Device d) { return zeros(t.sizes(), t.options().with_device(d)); }
Tensor zeros_like(const Tensor& t, const TensorOptions& o) { return zeros(t.sizes(), o); }
Tensor ones_like(const Tensor& t) { return ones(t.sizes(), t.options()); }
Tensor ones_like(const Tensor& t, DType d) { return ones(t.sizes(), t.options().with_dtype(d)); }
Tensor ones_like(const Tensor& t, Device d) { return ones(t.sizes(), t.options().with_device(d)); }
Tensor ones_like(const Tensor& t, const TensorOptions& o) { return ones(t.sizes(), o); }
Tensor full_like(const Tensor& t, const Scalar& v) { return full(t.sizes(), v, t.options()); }
Tensor full_like(const Tensor& t, const Scalar& v, DType d) { return full(t.sizes(), v, t.options().with_dtype(d)); }
Tensor full_like(const Tensor& t, const Scalar& v, Device d) { return full(t.sizes(), v, t.options().with_device(d)); }
Tensor full_like(const Tensor& t, const Scalar& v, const TensorOptions& o) { return full(t.sizes(), v, o); }

Tensor scalar_tensor(const Scalar& value, const TensorOptions& opts) { return full({}, value, opts); }

Tensor wrapped_scalar(const Scalar& value, DType dtype, Device device) {
  Tensor t = full({}, value, {dtype, device});
  t.impl()->set_wrapped_number(true);
  return t;
}

namespace {
// libtorch's arange dtype without options: int64 for integer arguments, else float32.
DType arange_dtype(const Scalar& start, const Scalar& end, const Scalar& step) {
  return start.is_floating() || end.is_floating() || step.is_floating() ? DType::Float32 : DType::Int64;
}
}  // namespace

Tensor arange(const Scalar& end) { return arange(0, end, 1, arange_dtype(0, end, 1)); }
Tensor arange(const Scalar& end, const TensorOptions& opts) { return arange(0, end, 1, opts); }
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step) {
  return arange(start, end, step, arange_dtype(start, end, step));
}
Tensor arange(const Scalar& start, const Scalar& end, const TensorOptions& opts) { return arange(start, end, 1, opts); }

Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, const TensorOptions& opts) {
  double s = start.to_double(), e = end.to_double(), st = step.to_double();
  WEFT_CHECK(st != 0, "arange: step must be nonzero");
  WEFT_CHECK((st > 0 && e >= s) || (st < 0 && e <= s), "arange: upper bound ", e, " and lower bound ", s,
             " inconsistent with step sign ", st);
  const double count = std::ceil((e - s) / st);
  WEFT_CHECK(std::isfinite(count) && count <= 9.0e18, "arange: [", s, ", ", e, ") in steps of ", st, " has ", count,
             " elements, more than an int64 counts");
  const auto n = static_cast<int64_t>(count);
  Tensor t = empty({n}, {opts.dtype, kCPU});
  bool integral = !start.is_floating() && !end.is_floating() && !step.is_floating();
  dispatch<kNumericTypes>(opts.dtype, "arange", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data_ptr<T>();
    for (int64_t i = 0; i < n; ++i) {
      double v = integral ? static_cast<double>(start.to_int() + i * step.to_int()) : s + static_cast<double>(i) * st;
      if constexpr (std::is_integral_v<T>)
        p[i] = integral ? static_cast<T>(start.to_int() + i * step.to_int()) : static_cast<T>(v);
      else if constexpr (std::is_same_v<T, double>) p[i] = v;
      else p[i] = static_cast<T>(static_cast<float>(v));
    }
  });
  Tensor out = opts.device.is_cpu() ? t : t.to(opts.device);
  if (opts.requires_grad) out.requires_grad_(true);
  return out;
}

Tensor linspace(double start, double end, int64_t steps, const TensorOptions& opts) {
  WEFT_CHECK(steps >= 0, "linspace: number of steps must be non-negative, got ", steps);
  Tensor t = empty({steps}, {DType::Float64, kCPU});
  double* p = t.data_ptr<double>();
  double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  int64_t half = steps / 2;
  for (int64_t i = 0; i < steps; ++i)  // symmetric like PyTorch: exact at both ends
    p[i] = i < half ? start + step * static_cast<double>(i) : end - step * static_cast<double>(steps - 1 - i);
  Tensor out = t.to(opts.dtype).to(opts.device);
  if (opts.requires_grad) out.requires_grad_(true);
  return out;
}

Tensor eye(int64_t n, const TensorOptions& opts) {
  WEFT_CHECK(n >= 0, "eye: n must be non-negative, got ", n);
  Tensor t = zeros({n, n}, {opts.dtype, kCPU});
  dispatch(opts.dtype, "eye", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data_ptr<T>();
    for (int64_t i = 0; i < n; ++i) p[i * n + i] = static_cast<T>(1.0f);
  });
  Tensor out = t.to(opts.device);
  if (opts.requires_grad) out.requires_grad_(true);
  return out;
}

template <typename T>
Tensor tensor(const std::vector<T>& values, const Shape& sizes, const TensorOptions& opts) {
  Shape s = sizes.empty() ? Shape{static_cast<int64_t>(values.size())} : sizes;
  WEFT_CHECK(numel_of(s) == static_cast<int64_t>(values.size()), "tensor: ", values.size(),
             " values do not fill shape ", shape_str(s));
  Tensor t = empty(s, {dtype_of<T>, kCPU});
  if constexpr (std::is_same_v<T, bool>) {
    bool* p = t.data_ptr<bool>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  } else if (!values.empty()) {
    std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(T));
  }
  Tensor out = t.to(opts.dtype).to(opts.device);
  if (out.is_same(t) && opts.requires_grad) out.requires_grad_(true);
  else if (opts.requires_grad) out = out.detach().requires_grad_(true);
  return out;
}
template Tensor tensor<float>(const std::vector<float>&, const Shape&, const TensorOptions&);
template Tensor tensor<double>(const std::vector<double>&, const Shape&, const TensorOptions&);
template Tensor tensor<int64_t>(const std::vector<int64_t>&, const Shape&, const TensorOptions&);
template Tensor tensor<int32_t>(const std::vector<int32_t>&, const Shape&, const TensorOptions&);
template Tensor tensor<uint8_t>(const std::vector<uint8_t>&, const Shape&, const TensorOptions&);
template Tensor tensor<bool>(const std::vector<bool>&, const Shape&, const TensorOptions&);
template Tensor tensor<BFloat16>(const std::vector<BFloat16>&, const Shape&, const TensorOptions&);
template Tensor tensor<Half>(const std::vector<Half>&, const Shape&, const TensorOptions&);

Tensor tensor(std::initializer_list<float> values, const Shape& sizes) {
  return tensor(std::vector<float>(values), sizes);
}

Tensor from_blob(void* data, const Shape& sizes, DType dtype, std::function<void(void*)> deleter) {
  const size_t bytes = checked_nbytes("from_blob", sizes, dtype);
  WEFT_CHECK(data != nullptr || bytes == 0, "from_blob: a null data pointer for shape ", shape_str(sizes), " (",
             numel_of(sizes), " elements)");
  auto storage = std::make_shared<StorageImpl>(data, bytes, kCPU, std::move(deleter));
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), 0, sizes, contiguous_strides(sizes), dtype));
}

}  // namespace weft
