// The activations of torch.nn.functional beyond core/ops.h's: hardtanh,
// relu6, hardsigmoid, hardswish, mish, selu, celu, logsigmoid, softsign, glu
// and prelu (contracts in core/nn_ops.h). Each is composed of element-wise ops
// and where, so autograd and every device come from those ops; the branches are
// chosen so that the gradient at each kink is PyTorch's.
#include "core/error.h"
#include "core/nn_ops.h"
#include "core/ops.h"

namespace weft {

namespace {

void check_float(const char* op, const Tensor& x) {
  WEFT_CHECK(x.defined(), op, ": undefined input");
  WEFT_CHECK(is_floating(x.dtype()), op, ": expected a floating dtype, got ", x.dtype());
}

}  // namespace

Tensor hardtanh(const Tensor& x, double min_val, double max_val) {
  check_float("hardtanh", x);
  WEFT_CHECK(min_val <= max_val, "hardtanh: min_val ", min_val, " is greater than max_val ", max_val);
  // The clamped value outside (min, max) is a constant: no gradient there, nor at the ends (PyTorch's).
  return where(logical_and(x > min_val, x < max_val), x, clamp(x.detach(), min_val, max_val));
}

Tensor relu6(const Tensor& x) {
  check_float("relu6", x);
  return hardtanh(x, 0.0, 6.0);
}

Tensor hardsigmoid(const Tensor& x) {
  check_float("hardsigmoid", x);
  // x / 6 + 1/2 strictly inside (-3, 3); 0 and 1 (constants) outside.
  return where(logical_and(x > -3.0, x < 3.0), x / 6.0 + 0.5, clamp(x.detach() / 6.0 + 0.5, 0.0, 1.0));
}

Tensor hardswish(const Tensor& x) {
  check_float("hardswish", x);
  // x (x + 3) / 6 on (-3, 3), 0 at and below -3, x at and above 3: the gradient is 0 at -3 and 1 at 3,
  // as PyTorch's.
  return where(x < 3.0, where(x > -3.0, x * (x + 3.0) / 6.0, zeros_like(x)), x);  // (NaN: the last branch)
}

Tensor mish(const Tensor& x) {
  check_float("mish", x);
  return x * tanh(softplus(x));
}

Tensor selu(const Tensor& x) {
  check_float("selu", x);
  constexpr double kAlpha = 1.6732632423543772848170429916717;
  constexpr double kScale = 1.0507009873554804934193349852946;
  return elu(x, kAlpha) * kScale;
}

Tensor celu(const Tensor& x, double alpha) {
  check_float("celu", x);
  WEFT_CHECK(alpha != 0.0, "celu: alpha must not be 0");
  // alpha (exp(x / alpha) - 1) at and below 0 (the whole gradient 1 at 0, as elu's)
  return where(x > 0, x, expm1(clamp(x, std::nullopt, 0.0) / alpha) * alpha);
}

Tensor logsigmoid(const Tensor& x) {
  check_float("logsigmoid", x);
  // log(sigmoid(x)) = -softplus(-x): accurate for large |x| either way
  return -softplus(-x);
}

Tensor softsign(const Tensor& x) {
  check_float("softsign", x);
  return x / (abs(x) + 1.0);
}

Tensor glu(const Tensor& x, int64_t dim) {
  check_float("glu", x);
  WEFT_CHECK(x.dim() > 0, "glu: does not support a 0-dim input");
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  WEFT_CHECK(d >= 0 && d < x.dim(), "glu: dim ", dim, " is out of range for an input of shape ", shape_str(x.sizes()));
  WEFT_CHECK(x.size(d) % 2 == 0, "glu: halving dimension must be even, but dimension ", d, " of shape ",
             shape_str(x.sizes()), " is size ", x.size(d));
  std::vector<Tensor> halves = chunk(x, 2, d);
  return halves[0] * sigmoid(halves[1]);
}

Tensor prelu(const Tensor& x, const Tensor& weight) {
  check_float("prelu", x);
  WEFT_CHECK(weight.defined(), "prelu: undefined weight");
  WEFT_CHECK(weight.dim() <= 1, "prelu: weight must be 0-dim or 1-D, got shape ", shape_str(weight.sizes()));
  const int64_t channels = x.dim() >= 2 ? x.size(1) : 1;
  WEFT_CHECK(weight.numel() == 1 || weight.numel() == channels, "prelu: weight has ", weight.numel(),
             " parameters but the input of shape ", shape_str(x.sizes()), " has ", channels,
             " channels (dim 1); use 1 parameter or one per channel");
  WEFT_CHECK(weight.device() == x.device(), "prelu: weight is on ", weight.device(), " but the input is on ",
             x.device());
  Tensor w = weight;
  if (weight.numel() == 1) {
    w = weight.reshape({});
  } else {
    Shape s(static_cast<size_t>(x.dim()), 1);
    s[1] = channels;
    w = weight.reshape(s);  // (1, C, 1, ...): broadcast over dim 1
  }
  // the gradient at 0 is the slope's, as PyTorch's
  return where(x > 0, x, w * x);
}

}  // namespace weft
