// The margin, ranking and likelihood losses of torch.nn.functional, composed of
// element-wise ops and reductions (contracts in core/nn_ops.h):
// margin_ranking_loss, hinge_embedding_loss, soft_margin_loss,
// cosine_embedding_loss, pairwise_distance, triplet_margin_loss,
// poisson_nll_loss, gaussian_nll_loss and multilabel_soft_margin_loss. Each
// follows ATen's (or torch.nn.functional's) formula in its order, so values and
// gradients match PyTorch's to rounding; autograd and every device come from
// the ops they are made of.
#include <cmath>
#include <numbers>
#include <string>

#include "core/nn_ops.h"
#include "core/ops/elementwise_util.h"

namespace weft {
namespace {

void check_floating(const char* op, std::initializer_list<std::reference_wrapper<const Tensor>> ts) {
  for (const Tensor& t : ts) {
    WEFT_CHECK(t.defined(), op, ": undefined input");
    WEFT_CHECK(is_floating(t.dtype()), op, ": expected floating inputs, got ", t.dtype());
  }
}

void check_same_shape(const char* op, const char* a_name, const Tensor& a, const char* b_name, const Tensor& b) {
  WEFT_CHECK(a.sizes() == b.sizes(), op, ": ", a_name, " shape ", shape_str(a.sizes()), " and ", b_name, " shape ",
             shape_str(b.sizes()), " differ; the loss compares them element by element");
}

}  // namespace

Tensor margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target, double margin,
                           Reduction reduction) {
  const char* op = "margin_ranking_loss";
  check_floating(op, {input1, input2, target});
  detail::check_devices(op, {input1, input2, target});
  check_same_shape(op, "input1", input1, "input2", input2);
  check_same_shape(op, "input1", input1, "target", target);
  return detail::apply_reduction(clamp(-target * (input1 - input2) + margin, 0.0, std::nullopt), reduction);
}

Tensor hinge_embedding_loss(const Tensor& input, const Tensor& target, double margin, Reduction reduction) {
  const char* op = "hinge_embedding_loss";
  check_floating(op, {input, target});
  detail::check_devices(op, {input, target});
  check_same_shape(op, "input", input, "target", target);
  // max(0, margin - x) where target != 1, plus x where target != -1 (target is 1 or -1)
  const Tensor zero = zeros_like(input);
  const Tensor margin_part = where(logical_not(target == 1.0), clamp(margin - input, 0.0, std::nullopt), zero);
  const Tensor self_part = where(logical_not(target == -1.0), input, zero);
  return detail::apply_reduction(margin_part + self_part, reduction);
}

Tensor soft_margin_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  const char* op = "soft_margin_loss";
  check_floating(op, {input, target});
  detail::check_devices(op, {input, target});
  check_same_shape(op, "input", input, "target", target);
  return detail::apply_reduction(log1p(exp(-input * target)), reduction);
}

Tensor cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target, double margin,
                             Reduction reduction) {
  const char* op = "cosine_embedding_loss";
  check_floating(op, {input1, input2, target});
  detail::check_devices(op, {input1, input2, target});
  const int64_t td = target.dim();
  WEFT_CHECK(td == 1 || td == 0, op, ": 0-D or 1-D target tensor expected, multi-target not supported (target shape ",
             shape_str(target.sizes()), ")");
  WEFT_CHECK(input1.dim() == td + 1 && input2.dim() == td + 1, op, ": a ", td, "-D target expects ", td + 1,
             "-D inputs, but found inputs with shapes ", shape_str(input1.sizes()), " and ", shape_str(input2.sizes()));
  check_same_shape(op, "input1", input1, "input2", input2);
  WEFT_CHECK(td == 0 || target.size(0) == input1.size(0), op, ": target shape ", shape_str(target.sizes()),
             " does not match the batch of input shape ", shape_str(input1.sizes()));
  constexpr double kEpsilon = 1e-12;  // ATen's
  const Tensor prod_sum = sum(input1 * input2, {td});
  const Tensor mag1 = sum(input1 * input1, {td}) + kEpsilon, mag2 = sum(input2 * input2, {td}) + kEpsilon;
  const Tensor cos = prod_sum / sqrt(mag1 * mag2);
  const Tensor zero = zeros_like(cos);
  const Tensor pos = 1.0 - cos, neg = clamp(cos - margin, 0.0, std::nullopt);
  return detail::apply_reduction(where(target == 1.0, pos, zero) + where(target == -1.0, neg, zero), reduction);
}

Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p, double eps, bool keepdim) {
  const char* op = "pairwise_distance";
  check_floating(op, {x1, x2});
  detail::check_devices(op, {x1, x2});
  const int64_t dims = std::max(x1.dim(), x2.dim());
  WEFT_CHECK(dims >= 1, op, ": expected inputs with at least one dim, got shapes ", shape_str(x1.sizes()), " and ",
             shape_str(x2.sizes()));
  return norm(x1 - x2 + eps, p, {dims - 1}, keepdim);
}

Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative, double margin,
                           double p, double eps, bool swap, Reduction reduction) {
  const char* op = "triplet_margin_loss";
  check_floating(op, {anchor, positive, negative});
  detail::check_devices(op, {anchor, positive, negative});
  WEFT_CHECK(anchor.dim() == positive.dim() && anchor.dim() == negative.dim(), op,
             ": the anchor, positive and negative tensors are expected to have the same number of dims, but got "
             "shapes ",
             shape_str(anchor.sizes()), ", ", shape_str(positive.sizes()), " and ", shape_str(negative.sizes()));
  WEFT_CHECK(anchor.dim() == 1 || anchor.dim() == 2, op, ": expected 1-D (D) or 2-D (N, D) inputs, got shape ",
             shape_str(anchor.sizes()));
  WEFT_CHECK(margin > 0, op, ": margin must be greater than 0, got ", margin);
  const Tensor dist_pos = pairwise_distance(anchor, positive, p, eps);
  Tensor dist_neg = pairwise_distance(anchor, negative, p, eps);
  if (swap) dist_neg = minimum(dist_neg, pairwise_distance(positive, negative, p, eps));
  return detail::apply_reduction(clamp(dist_pos - dist_neg + margin, 0.0, std::nullopt), reduction);
}

Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, bool log_input, bool full, double eps,
                        Reduction reduction) {
  const char* op = "poisson_nll_loss";
  check_floating(op, {input, target});
  detail::check_devices(op, {input, target});
  check_same_shape(op, "input", input, "target", target);
  Tensor loss = log_input ? exp(input) - target * input : input - target * log(input + eps);
  if (full) {
    // Stirling's term t log t - t + log(2 pi t) / 2, where the target is above 1
    const Tensor t = target.detach();
    const Tensor stirling = t * log(t) - t + log(t * (2 * std::numbers::pi)) * 0.5;
    loss = loss + masked_fill(stirling, logical_not(t > 1.0), 0.0);
  }
  return detail::apply_reduction(loss, reduction);
}

Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var, bool full, double eps,
                         Reduction reduction) {
  const char* op = "gaussian_nll_loss";
  check_floating(op, {input, target, var});
  detail::check_devices(op, {input, target, var});
  check_same_shape(op, "input", input, "target", target);
  Tensor v = var;
  if (var.sizes() != input.sizes()) {
    const Shape lead(input.sizes().begin(), input.sizes().end() - (input.dim() > 0 ? 1 : 0));
    const bool homoscedastic = input.dim() > 0 && var.sizes() == lead;
    const bool one_per_row = input.dim() > 0 && var.dim() == input.dim() && var.size(-1) == 1 &&
                             Shape(var.sizes().begin(), var.sizes().end() - 1) == lead;
    WEFT_CHECK(homoscedastic || one_per_row, op, ": var of shape ", shape_str(var.sizes()),
               " is of incorrect size for input shape ", shape_str(input.sizes()),
               " (expected the input's shape, the input's shape without its last dim, or that with a last dim of 1)");
    if (homoscedastic) v = unsqueeze(var, -1);
  }
  WEFT_CHECK(eps >= 0, op, ": eps must be non-negative, got ", eps);
  WEFT_CHECK(!any(var.detach() < 0.0).item<bool>(), op, ": var has negative entry/entries");
  // var clamped to eps without the clamp on the tape (PyTorch clamps a clone under no_grad):
  // the gradient reaches var unchanged.
  const Tensor vd = v.detach();
  v = v + (clamp(vd, eps, std::nullopt) - vd);
  const Tensor d = input - target;
  Tensor loss = (log(v) + d * d / v) * 0.5;
  if (full) loss = loss + 0.5 * std::log(2 * std::numbers::pi);
  return detail::apply_reduction(loss, reduction);
}

Tensor multilabel_soft_margin_loss(const Tensor& input, const Tensor& target, const Tensor& weight,
                                   Reduction reduction) {
  const char* op = "multilabel_soft_margin_loss";
  check_floating(op, {input, target});
  detail::check_devices(op, {input, target, weight});
  check_same_shape(op, "input", input, "target", target);
  WEFT_CHECK(input.dim() >= 1, op, ": expected an input of shape (C) or (N, C), got shape ", shape_str(input.sizes()));
  Tensor loss = -(target * logsigmoid(input) + (1.0 - target) * logsigmoid(-input));
  const int64_t class_dim = input.dim() - 1;
  if (weight.defined()) {
    WEFT_CHECK(weight.dim() == 1 && weight.size(0) == input.size(class_dim), op, ": weight shape ",
               shape_str(weight.sizes()), " does not match the ", input.size(class_dim), " classes of input shape ",
               shape_str(input.sizes()));
    loss = loss * weight;
  }
  return detail::apply_reduction(sum(loss, {class_dim}) / static_cast<double>(input.size(class_dim)), reduction);
}

}  // namespace weft
