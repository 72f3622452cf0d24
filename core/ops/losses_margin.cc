// The margin, ranking and likelihood losses of torch.nn.functional, composed of
// element-wise ops and reductions (contracts in core/nn_ops.h):
// margin_ranking_loss, hinge_embedding_loss, soft_margin_loss,
// cosine_embedding_loss, pairwise_distance, triplet_margin_loss,
// poisson_nll_loss, gaussian_nll_loss, multilabel_soft_margin_loss,
// multi_margin_loss, multilabel_margin_loss and
// triplet_margin_with_distance_loss. Each
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

// ---- multi-class and multi-label hinge losses ----

namespace {

// Checks a hinge loss's input (non-empty (C) or (N, C)) and returns it as (N, C).
Tensor as_frames(const char* op, const Tensor& input) {
  check_floating(op, {input});
  WEFT_CHECK((input.dim() == 1 || input.dim() == 2) && input.numel() > 0, op,
             ": expected a non-empty input of shape (C) or (N, C), got shape ", shape_str(input.sizes()));
  return input.dim() == 2 ? input : input.unsqueeze(0);
}

// `target` as int64 values on the host, after checking it holds integers.
std::vector<int64_t> host_labels(const char* op, const Tensor& target) {
  WEFT_CHECK(target.defined(), op, ": undefined target");
  WEFT_CHECK(!is_floating(target.dtype()) && target.dtype() != DType::Bool, op,
             ": expected an integer target (class indices), got ", target.dtype());
  Tensor t = target.to(DType::Int64).to(kCPU).contiguous();
  return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
}

}  // namespace

Tensor multi_margin_loss(const Tensor& input, const Tensor& target, int64_t p, double margin, const Tensor& weight,
                         Reduction reduction) {
  const char* op = "multi_margin_loss";
  WEFT_CHECK(p == 1 || p == 2, op, ": only p == 1 and p == 2 supported, got ", p);
  const Tensor x = as_frames(op, input);  // (N, C)
  detail::check_devices(op, {input, target, weight});
  const int64_t n = x.size(0), c = x.size(1);
  WEFT_CHECK(target.defined() && target.dim() <= 1 && target.numel() == n, op, ": inconsistent target size, expected ",
             n, " class indices for input shape ", shape_str(input.sizes()), " but got shape ",
             target.defined() ? shape_str(target.sizes()) : std::string("(undefined)"));
  const std::vector<int64_t> labels = host_labels(op, target);
  for (int64_t i = 0; i < n; ++i)
    WEFT_CHECK(labels[i] >= 0 && labels[i] < c, op, ": target ", labels[i], " of sample ", i, " is out of range for ",
               c, " classes");
  if (weight.defined()) {
    WEFT_CHECK(is_floating(weight.dtype()) && weight.dim() == 1 && weight.numel() == c, op,
               ": inconsistent weight size, expected one floating value per class (", c, ") but got shape ",
               shape_str(weight.sizes()), " and dtype ", weight.dtype());
  }
  const Tensor y = target.reshape({n}).to(DType::Int64);  // (N)
  // ATen's order: z = margin - x[y] + x[i]; h = z or z^2 where z > 0; h * weight[y]; the sum over i != y, over C.
  Tensor h = clamp(margin - gather(x, 1, y.unsqueeze(1)) + x, 0.0, std::nullopt);  // (N, C)
  if (p == 2) h = h * h;
  if (weight.defined()) h = h * index_select(weight.detach(), 0, y).unsqueeze(1).to(h.dtype());
  h = masked_fill(h, one_hot(y, c) == 1.0, 0.0);
  Tensor loss = sum(h, {1}) / static_cast<double>(c);  // (N)
  if (target.dim() == 0) loss = loss.reshape({});
  return detail::apply_reduction(loss, reduction);
}

Tensor multilabel_margin_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  const char* op = "multilabel_margin_loss";
  const Tensor x = as_frames(op, input);  // (N, C)
  detail::check_devices(op, {input, target});
  WEFT_CHECK(target.defined() && target.sizes() == input.sizes(), op,
             ": inconsistent target size: ", target.defined() ? shape_str(target.sizes()) : std::string("(undefined)"),
             " for input of size: ", shape_str(input.sizes()));
  const int64_t n = x.size(0), c = x.size(1);
  const std::vector<int64_t> labels = host_labels(op, target);
  for (size_t k = 0; k < labels.size(); ++k)
    WEFT_CHECK(labels[k] >= -1 && labels[k] < c, op, ": target value ", labels[k], " (entry ", k,
               ") is out of range: labels lie in [0, ", c, ") and -1 ends a sample's list");
  // listed (N, C_k): entry k is one of the sample's labels; not_target (N, C_i): class i is not listed.
  std::vector<float> listed(labels.size(), 0.0f), not_target(labels.size(), 1.0f);
  std::vector<int64_t> index(labels.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < c; ++k) {
      const int64_t label = labels[i * c + k];
      if (label < 0) break;
      listed[i * c + k] = 1.0f;
      index[i * c + k] = label;
      not_target[i * c + label] = 0.0f;
    }
  }
  const Tensor listed_t = tensor<float>(listed, {n, c}).to(x.dtype()).to(x.device());
  const Tensor not_target_t = tensor<float>(not_target, {n, c}).to(x.dtype()).to(x.device());
  const Tensor label_x = gather(x, 1, tensor<int64_t>(index, {n, c}).to(x.device()));  // (N, C_k): x[y_k]
  // z = 1 - x[y_k] + x[i] where positive, for listed k and unlisted i; the sum over both, over C.
  const Tensor h = clamp(1.0 - label_x.unsqueeze(2) + x.unsqueeze(1), 0.0, std::nullopt);  // (N, C_k, C_i)
  const Tensor pairs = listed_t.unsqueeze(2) * not_target_t.unsqueeze(1);                  // (N, C_k, C_i)
  Tensor loss = sum(h * pairs, {1, 2}) / static_cast<double>(c);                           // (N)
  if (input.dim() == 1) loss = loss.reshape({});
  return detail::apply_reduction(loss, reduction);
}

Tensor triplet_margin_with_distance_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                                         const DistanceFunction& distance, double margin, bool swap,
                                         Reduction reduction) {
  const char* op = "triplet_margin_with_distance_loss";
  WEFT_CHECK(anchor.defined() && positive.defined() && negative.defined(), op, ": undefined input");
  WEFT_CHECK(margin > 0, op, ": margin must be greater than 0, got ", margin);
  WEFT_CHECK(anchor.dim() == positive.dim() && anchor.dim() == negative.dim(), op,
             ": The anchor, positive, and negative tensors are expected to have the same number of dimensions, but "
             "got: anchor ",
             anchor.dim(), "D, positive ", positive.dim(), "D, and negative ", negative.dim(), "D inputs");
  const DistanceFunction d =
      distance ? distance : [](const Tensor& a, const Tensor& b) { return pairwise_distance(a, b); };
  const Tensor dist_pos = d(anchor, positive);
  Tensor dist_neg = d(anchor, negative);
  if (swap) dist_neg = minimum(dist_neg, d(positive, negative));
  return detail::apply_reduction(clamp(margin + dist_pos - dist_neg, 0.0, std::nullopt), reduction);
}

}  // namespace weft
