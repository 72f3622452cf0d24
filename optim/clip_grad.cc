// clip_grad_norm_: total norm through grad_norm_table, scaling through
// grad_scale_table (optim/kernels.h); clip_grad_value_ through clamp_.
#include "optim/clip_grad.h"

#include <cmath>

#include "core/autograd_meta.h"
#include "core/ops.h"
#include "optim/kernels.h"

namespace weft::optim {

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type, bool error_if_nonfinite) {
  WEFT_CHECK(norm_type > 0, "clip_grad_norm_: norm_type must be positive or inf, got ", norm_type);
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    WEFT_CHECK(g.is_floating_point(), "clip_grad_norm_: gradient has non-floating dtype ", g.dtype());
    grads.push_back(g);
  }
  if (grads.empty()) return 0.0;
  const bool inf = std::isinf(norm_type);
  double acc = 0;
  for (const Tensor& g : grads) {
    Tensor gc = g.contiguous();
    double part = grad_norm_table()(gc.device(), gc.dtype(), gc, norm_type);
    acc = inf ? ((part > acc || std::isnan(part)) ? part : acc) : acc + part;
  }
  const double total = inf ? acc : (norm_type == 2.0 ? std::sqrt(acc) : std::pow(acc, 1.0 / norm_type));
  WEFT_CHECK(!error_if_nonfinite || std::isfinite(total), "clip_grad_norm_: The total norm of order ", norm_type,
             " for gradients from `parameters` is non-finite, so it cannot be clipped. To disable this error ",
             "and scale the gradients by the non-finite norm anyway, set `error_if_nonfinite=False`");
  // PyTorch: clip_coef = max_norm / (total_norm + 1e-6) on a tensor of the
  // gradients' dtype (computed as reciprocal(total + 1e-6) * max_norm), clamped to 1.
  double coef;
  if (grads[0].dtype() == DType::Float32) {
    const float t = static_cast<float>(total) + static_cast<float>(1e-6);
    float c = (1.0f / t) * static_cast<float>(max_norm);
    coef = c > 1.0f ? 1.0f : c;  // NaN stays NaN, like clamp
  } else {
    const double c = (1.0 / (total + 1e-6)) * max_norm;
    coef = c > 1.0 ? 1.0 : c;
  }
  for (Tensor& g : grads) {
    if (g.is_contiguous()) {
      grad_scale_table()(g.device(), g.dtype(), g, coef);
    } else {
      Tensor gc = g.contiguous();
      grad_scale_table()(gc.device(), gc.dtype(), gc, coef);
      g.copy_(gc);
    }
    g.bump_version();
  }
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  WEFT_CHECK(clip_value >= 0, "clip_grad_value_: clip_value must be >= 0, got ", clip_value);
  NoGradGuard no_grad;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    WEFT_CHECK(g.is_floating_point(), "clip_grad_value_: gradient has non-floating dtype ", g.dtype());
    clamp_(g, -clip_value, clip_value);
  }
}

}  // namespace weft::optim
