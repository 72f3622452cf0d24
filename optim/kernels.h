// Fused optimizer update kernels, one kernel table per optimizer.
//
// Contract: each kernel updates one parameter in place from its gradient and
// its state buffers, with PyTorch's single-tensor (foreach=False) formulas and
// operation order, computing in the parameter's dtype with the hyper-parameters
// rounded to that dtype first (as PyTorch's scalar arguments are), so float32
// results match PyTorch to ~1 ulp. All tensors passed to a kernel are
// contiguous, of the parameter's dtype and device, with the same numel
// (callers in sgd.cc / adam.cc / clip_grad.cc ensure it). Kernels neither
// record autograd nor bump version counters; callers do. CPU kernels exist for
// float32 and float64; the CUDA backend registers into the same tables.
#pragma once

#include "core/dispatch.h"
#include "core/tensor.h"

namespace weft::optim {

struct SGDStepArgs {
  double lr = 0, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
  // First step with momentum: the buffer is set to the (decayed) gradient
  // instead of being blended (torch.clone(grad) in PyTorch).
  bool init_buffer = false;
};
// buf is undefined when momentum == 0.
using SGDStepFn = void(const Tensor& param, const Tensor& grad, const Tensor& buf, const SGDStepArgs& a);
KernelTable<SGDStepFn>& sgd_step_table();

struct AdamStepArgs {
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  bool decoupled_weight_decay = false;  // AdamW: p *= 1 - lr * wd; Adam: g += wd * p
  double step = 1;                      // the step count after incrementing (1 on the first step)
};
// max_exp_avg_sq is defined for AMSGrad only: it keeps the running maximum of
// exp_avg_sq (NaN propagating, as torch.maximum), and the denominator uses it.
using AdamStepFn = void(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                        const Tensor& max_exp_avg_sq, const AdamStepArgs& a);
KernelTable<AdamStepFn>& adam_step_table();

struct RMSpropStepArgs {
  double lr = 0, alpha = 0, eps = 0, weight_decay = 0, momentum = 0;
  bool centered = false;
};
// grad_avg is defined when centered, momentum_buffer when momentum != 0.
using RMSpropStepFn = void(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& grad_avg,
                           const Tensor& momentum_buffer, const RMSpropStepArgs& a);
KernelTable<RMSpropStepFn>& rmsprop_step_table();

struct AdagradStepArgs {
  double lr = 0, lr_decay = 0, weight_decay = 0, eps = 0;
  double step = 1;  // the step count after incrementing (1 on the first step)
};
using AdagradStepFn = void(const Tensor& param, const Tensor& grad, const Tensor& sum, const AdagradStepArgs& a);
KernelTable<AdagradStepFn>& adagrad_step_table();

// Sum of |g|^p over g's elements (p finite), or max |g| (p infinite), in float64.
// Deterministic: partial sums over fixed-size blocks combined in block order.
using GradNormFn = double(const Tensor& g, double p);
KernelTable<GradNormFn>& grad_norm_table();

// g *= coef, with coef rounded to g's dtype.
using ScaleFn = void(const Tensor& g, double coef);
KernelTable<ScaleFn>& grad_scale_table();

}  // namespace weft::optim
