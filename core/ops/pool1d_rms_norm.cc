// 1-D pooling on the 2-D pooling kernels (a height of 1), and RMS
// normalisation composed of element-wise ops and a mean (so autograd and every
// device come from those ops). Contracts in core/nn_ops.h; errors name the 1-D
// op and the caller's own shapes and arguments.
#include <limits>

#include "core/error.h"
#include "core/nn_ops.h"
#include "core/ops.h"

namespace weft {

namespace {

// The checks of a 1-D pooling op, in its own terms; returns the stride (0 = the kernel size).
int64_t check_pool1d(const char* op, const Tensor& x, int64_t k, int64_t s, int64_t pad, int64_t dil, bool is_max) {
  WEFT_CHECK(x.defined(), op, ": undefined input");
  WEFT_CHECK(x.dim() == 2 || x.dim() == 3, op, ": expected a 2-D (C, L) or 3-D (N, C, L) input, got shape ",
             shape_str(x.sizes()));
  WEFT_CHECK(is_floating(x.dtype()), op, ": expected a floating dtype, got ", x.dtype());
  WEFT_CHECK(k > 0, op, ": kernel_size must be positive, got ", k);
  WEFT_CHECK(s >= 0, op, ": stride must be positive, got ", s);
  WEFT_CHECK(dil > 0, op, ": dilation must be positive, got ", dil);
  WEFT_CHECK(pad >= 0, op, ": padding must be non-negative, got ", pad);
  const int64_t eff = is_max ? (k - 1) * dil + 1 : k;
  WEFT_CHECK(pad <= eff / 2, op, ": padding ", pad, " should be at most half of the ", is_max ? "effective " : "",
             "kernel size ", eff);
  WEFT_CHECK(x.size(-1) > 0, op, ": input shape ", shape_str(x.sizes()), " has an empty length dimension");
  return s == 0 ? k : s;
}

// (C, L) -> (C, 1, L), (N, C, L) -> (N, C, 1, L), and back.
Tensor add_height(const Tensor& x) { return unsqueeze(x, x.dim() - 1); }
Tensor drop_height(const Tensor& y) { return squeeze(y, y.dim() - 2); }

}  // namespace

Tensor max_pool1d(const Tensor& x, int64_t kernel_size, int64_t stride, int64_t padding, int64_t dilation,
                  bool ceil_mode) {
  stride = check_pool1d("max_pool1d", x, kernel_size, stride, padding, dilation, true);
  return drop_height(max_pool2d(add_height(x), {1, kernel_size}, {1, stride}, {0, padding}, {1, dilation}, ceil_mode));
}

Tensor avg_pool1d(const Tensor& x, int64_t kernel_size, int64_t stride, int64_t padding, bool ceil_mode,
                  bool count_include_pad) {
  stride = check_pool1d("avg_pool1d", x, kernel_size, stride, padding, 1, false);
  return drop_height(
      avg_pool2d(add_height(x), {1, kernel_size}, {1, stride}, {0, padding}, ceil_mode, count_include_pad));
}

Tensor adaptive_avg_pool1d(const Tensor& x, int64_t output_size) {
  WEFT_CHECK(x.defined(), "adaptive_avg_pool1d: undefined input");
  WEFT_CHECK(x.dim() == 2 || x.dim() == 3,
             "adaptive_avg_pool1d: expected a 2-D (C, L) or 3-D (N, C, L) input, got shape ", shape_str(x.sizes()));
  WEFT_CHECK(output_size > 0, "adaptive_avg_pool1d: output_size must be positive, got ", output_size);
  WEFT_CHECK(x.size(-1) > 0, "adaptive_avg_pool1d: input shape ", shape_str(x.sizes()),
             " has an empty length dimension");
  return drop_height(adaptive_avg_pool2d(add_height(x), {1, output_size}));
}

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, std::optional<double> eps) {
  WEFT_CHECK(x.defined(), "rms_norm: undefined input");
  WEFT_CHECK(is_floating(x.dtype()), "rms_norm: expected a floating dtype, got ", x.dtype());
  const int64_t nd = static_cast<int64_t>(normalized_shape.size());
  WEFT_CHECK(nd >= 1, "rms_norm: normalized_shape must have at least one dimension");
  bool trailing = x.dim() >= nd;
  for (int64_t i = 0; trailing && i < nd; ++i) trailing = x.size(x.dim() - nd + i) == normalized_shape[i];
  WEFT_CHECK(trailing, "rms_norm: input shape ", shape_str(x.sizes()), " does not end in normalized_shape ",
             shape_str(normalized_shape));
  WEFT_CHECK(!weight.defined() || weight.sizes() == normalized_shape, "rms_norm: weight shape ",
             shape_str(weight.sizes()), " does not match normalized_shape ", shape_str(normalized_shape));
  WEFT_CHECK(!weight.defined() || weight.device() == x.device(), "rms_norm: weight is on ", weight.device(),
             " but the input is on ", x.device());
  const double e = eps.has_value()               ? *eps
                   : x.dtype() == DType::Float64 ? std::numeric_limits<double>::epsilon()
                                                 : std::numeric_limits<float>::epsilon();
  WEFT_CHECK(e >= 0.0, "rms_norm: eps must be non-negative, got ", e);
  // float16 / bfloat16 are normalised in float32 and rounded once at the end, as PyTorch does.
  const bool half = x.dtype() == DType::Float16 || x.dtype() == DType::BFloat16;
  const Tensor xf = half ? x.to(DType::Float32) : x;
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < nd; ++i) dims.push_back(x.dim() - nd + i);
  Tensor y = xf * rsqrt(mean(xf * xf, dims, /*keepdim=*/true) + e);  // (x.shape)
  if (half) y = y.to(x.dtype());
  return weight.defined() ? y * weight : y;
}

}  // namespace weft
