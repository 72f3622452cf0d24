// RAdam (torch.optim.RAdam, single-tensor path): Adam whose adaptive step is
// switched on once the variance of its second moment is tractable. Per
// parameter with a gradient g, with step t counted from 1:
//   g = -g with maximize
//   g += weight_decay * p, or p *= 1 - lr * weight_decay with decoupled_weight_decay
//   m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
//   rho_inf = 2 / (1 - beta2) - 1;  rho_t = rho_inf - 2 t beta2^t / (1 - beta2^t)
//   rho_t > 5: p -= m / (1 - beta1^t) * lr * sqrt(1 - beta2^t) / (sqrt(v) + eps) * r_t,
//              r_t = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))
//   else:      p -= m / (1 - beta1^t) * lr
// Group options: lr, beta1, beta2, eps, weight_decay, decoupled_weight_decay (0
// or 1), maximize. State: step (float32 0-dim, on the CPU), exp_avg, exp_avg_sq.
// Composed of tensor ops in PyTorch's order, so it runs on every device.
#pragma once

#include "optim/optimizer.h"

namespace weft::optim {

struct RAdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool decoupled_weight_decay = false;
  bool maximize = false;
  OptionMap to_map() const;
};

class RAdam : public Optimizer {
 public:
  RAdam(std::vector<Tensor> params, const RAdamOptions& options);
  RAdam(std::vector<ParamGroup> groups, const RAdamOptions& defaults);
  // From Module::named_parameters(): the optimizer knows the names (Note [optimizer state by name]).
  RAdam(const NamedParameters& named_params, const RAdamOptions& options);

 protected:
  void validate(const OptionMap& o) const override;
  void update(ParamGroup& group) override;
  std::vector<std::string> state_names() const override { return {"step", "exp_avg", "exp_avg_sq"}; }
};

}  // namespace weft::optim
