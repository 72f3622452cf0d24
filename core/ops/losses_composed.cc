// Losses and distances composed of element-wise ops and reductions (PyTorch
// semantics and defaults): l1_loss, smooth_l1_loss, huber_loss, kl_div,
// binary_cross_entropy, cosine_similarity and normalize.
//
// Contract: like mse_loss, the losses compare input and target element by
// element and refuse shapes that differ (PyTorch would broadcast with a
// warning). Float16/bfloat16 are computed in float32 under autocast
// (core/autocast.h), as mse_loss is. Gradients come from the ops they are made
// of; where PyTorch's backward formula differs only in its own clamping
// (binary_cross_entropy at 0 and 1) that is said beside it.
#include <cmath>
#include <limits>

#include "core/autocast.h"
#include "core/nn_ops.h"
#include "core/ops/elementwise_util.h"

namespace weft {
namespace {

void check_pair(const char* op, const Tensor& input, const Tensor& target) {
  detail::check_pointwise_loss(op, input, target);
  WEFT_CHECK(is_floating(input.dtype()) && is_floating(target.dtype()), op,
             ": expected floating input and target, got ", input.dtype(), " and ", target.dtype());
}

Tensor reduce(const Tensor& loss, Reduction reduction) { return detail::apply_reduction(loss, reduction); }

}  // namespace

Tensor l1_loss(const Tensor& input_in, const Tensor& target_in, Reduction reduction) {
  const Tensor input = autocast::upcast(input_in), target = autocast::upcast(target_in);
  check_pair("l1_loss", input, target);
  return reduce(abs(input - target), reduction);
}

Tensor smooth_l1_loss(const Tensor& input_in, const Tensor& target_in, Reduction reduction, double beta) {
  const Tensor input = autocast::upcast(input_in), target = autocast::upcast(target_in);
  check_pair("smooth_l1_loss", input, target);
  WEFT_CHECK(beta >= 0, "smooth_l1_loss: beta must be non-negative, got ", beta);
  Tensor d = abs(input - target);
  if (beta == 0) return reduce(d, reduction);  // l1
  // 0.5 d^2 / beta below beta, d - 0.5 beta above
  return reduce(where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta), reduction);
}

Tensor huber_loss(const Tensor& input_in, const Tensor& target_in, Reduction reduction, double delta) {
  const Tensor input = autocast::upcast(input_in), target = autocast::upcast(target_in);
  check_pair("huber_loss", input, target);
  WEFT_CHECK(delta > 0, "huber_loss: delta must be positive, got ", delta);
  Tensor d = abs(input - target);
  // 0.5 d^2 below delta, delta (d - 0.5 delta) above
  return reduce(where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta), reduction);
}

Tensor kl_div(const Tensor& input_in, const Tensor& target_in, KlDivReduction reduction, bool log_target) {
  const Tensor input = autocast::upcast(input_in), target = autocast::upcast(target_in);
  check_pair("kl_div", input, target);
  Tensor loss;
  if (log_target) {
    loss = exp(target) * (target - input);
  } else {
    // target log(target), with 0 where target is 0 (PyTorch's xlogy)
    Tensor zero = zeros_like(target);
    Tensor tlogt = where(target == 0, zero, target * log(where(target == 0, ones_like(target), target)));
    loss = tlogt - target * input;
  }
  switch (reduction) {
    case KlDivReduction::None: return loss;
    case KlDivReduction::Mean: return mean(loss);
    case KlDivReduction::Sum: return sum(loss);
    case KlDivReduction::BatchMean:
      return input.dim() == 0 ? sum(loss) : sum(loss) / static_cast<double>(input.size(0));
  }
  return loss;
}

Tensor binary_cross_entropy(const Tensor& input_in, const Tensor& target_in, Reduction reduction,
                            const Tensor& weight_in) {
  const char* op = "binary_cross_entropy";
  const Tensor input = autocast::upcast(input_in), target = autocast::upcast(target_in),
               weight = autocast::upcast(weight_in);
  check_pair(op, input, target);
  if (input.numel() > 0) {
    const double lo = amin(input.detach()).to(DType::Float64).item<double>(),
                 hi = amax(input.detach()).to(DType::Float64).item<double>();
    WEFT_CHECK(lo >= 0 && hi <= 1, op, ": every element of the input must be a probability in [0, 1], got values in [",
               lo, ", ", hi, "] (for logits use binary_cross_entropy_with_logits)");
  }
  // -(t log(x) + (1 - t) log(1 - x)), each log clamped at -100 like PyTorch's
  // (its backward divides by max(x (1 - x), 1e-12) instead: they differ only
  // within 1e-12 of 0 and 1)
  Tensor lx = clamp(log(input), -100.0, std::nullopt), l1x = clamp(log(1 - input), -100.0, std::nullopt);
  Tensor loss = -(target * lx + (1 - target) * l1x);
  if (weight.defined()) loss = loss * weight;
  return reduce(loss, reduction);
}

Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim, double eps) {
  WEFT_CHECK(x1.defined() && x2.defined(), "cosine_similarity: undefined input");
  WEFT_CHECK(is_floating(x1.dtype()) && is_floating(x2.dtype()), "cosine_similarity: expected floating inputs, got ",
             x1.dtype(), " and ", x2.dtype());
  // each side divided by its norm (at least eps) before the dot product, like PyTorch
  Tensor n1 = clamp(norm(x1, 2.0, {dim}, true), eps, std::nullopt);
  Tensor n2 = clamp(norm(x2, 2.0, {dim}, true), eps, std::nullopt);
  return sum((x1 / n1) * (x2 / n2), {dim});
}

Tensor normalize(const Tensor& x, double p, int64_t dim, double eps) {
  WEFT_CHECK(x.defined(), "normalize: undefined input");
  WEFT_CHECK(is_floating(x.dtype()), "normalize: expected a floating input, got ", x.dtype());
  return x / clamp(norm(x, p, {dim}, true), eps, std::nullopt);
}

}  // namespace weft
