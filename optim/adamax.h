// Adamax (torch.optim.Adamax, single-tensor path): Adam with the infinity norm
// in place of the second moment. Per parameter with a gradient g, with step t
// counted from 1:
//   g = -g with maximize;  g += weight_decay * p
//   m = lerp(m, g, 1 - beta1);  u = max(beta2 * u, |g| + eps)   (NaN propagating)
//   p -= lr / (1 - beta1^t) * m / u
// Group options: lr, beta1, beta2, eps, weight_decay, maximize.
// State: step (float32 0-dim, on the CPU), exp_avg, exp_inf.
// Composed of tensor ops in PyTorch's order, so it runs on every device.
#pragma once

#include "optim/optimizer.h"

namespace weft::optim {

struct AdamaxOptions {
  double lr = 2e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool maximize = false;
  OptionMap to_map() const;
};

class Adamax : public Optimizer {
 public:
  Adamax(std::vector<Tensor> params, const AdamaxOptions& options);
  Adamax(std::vector<ParamGroup> groups, const AdamaxOptions& defaults);
  // From Module::named_parameters(): the optimizer knows the names (Note [optimizer state by name]).
  Adamax(const NamedParameters& named_params, const AdamaxOptions& options);

 protected:
  void validate(const OptionMap& o) const override;
  void update(ParamGroup& group) override;
  std::vector<std::string> state_names() const override { return {"step", "exp_avg", "exp_inf"}; }
};

}  // namespace weft::optim
