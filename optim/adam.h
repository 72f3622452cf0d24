// Adam and AdamW (torch.optim.Adam / AdamW, single-tensor path).
// Per parameter with a gradient g, with step t counted from 1:
//   Adam:  g += weight_decay * p          AdamW: p *= 1 - lr * weight_decay
//   m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
//   amsgrad: vmax = max(vmax, v), used in place of v below
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// Group options: lr, beta1, beta2, eps, weight_decay, amsgrad and maximize (0
// or 1: g = -g first; a state dict saved without either loads it as 0).
// State: step (float32 0-dim, on the CPU, as in PyTorch), exp_avg, exp_avg_sq,
// and max_exp_avg_sq with amsgrad.
#pragma once

#include "optim/optimizer.h"

namespace weft::optim {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool amsgrad = false;
  bool maximize = false;  // negate the gradients: ascend (PyTorch's maximize)
  OptionMap to_map() const;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, const AdamOptions& options);
  Adam(std::vector<ParamGroup> groups, const AdamOptions& defaults);
  // From Module::named_parameters(): the optimizer knows the names (Note [optimizer state by name]).
  Adam(const NamedParameters& named_params, const AdamOptions& options);

 protected:
  Adam(const char* name, bool decoupled, std::vector<ParamGroup> groups, const AdamOptions& defaults);
  void validate(const OptionMap& o) const override;
  void update(ParamGroup& group) override;
  std::vector<std::string> state_names() const override { return {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"}; }

 private:
  bool decoupled_;
};

// AdamW's default weight decay is 1e-2, like PyTorch's.
struct AdamWOptions : AdamOptions {
  AdamWOptions() { weight_decay = 1e-2; }
};

class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, const AdamWOptions& options);
  AdamW(std::vector<ParamGroup> groups, const AdamWOptions& defaults);
  AdamW(const NamedParameters& named_params, const AdamWOptions& options);
};

}  // namespace weft::optim
