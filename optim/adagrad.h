// Adagrad (torch.optim.Adagrad, single-tensor path, dense gradients). Per
// parameter with a gradient g, with step t counted from 1:
//   g += weight_decay * p
//   clr = lr / (1 + (t - 1) * lr_decay)
//   sum += g * g
//   p -= clr * g / (sqrt(sum) + eps)
// Group options: lr, lr_decay, weight_decay, initial_accumulator_value, eps,
// maximize (0 or 1: g = -g first).
// State: step (float32 0-dim, on the CPU) and sum, which starts at the
// group's initial_accumulator_value. PyTorch creates that state when the
// optimizer is built; weft creates it on a parameter's first update, from the
// group's value at that time, so a state dict saved before any step holds no
// sum (loading it gives the same first step).
#pragma once

#include "optim/optimizer.h"

namespace weft::optim {

struct AdagradOptions {
  double lr = 1e-2;
  double lr_decay = 0;
  double weight_decay = 0;
  double initial_accumulator_value = 0;
  double eps = 1e-10;
  bool maximize = false;  // negate the gradients: ascend (PyTorch's maximize)
  OptionMap to_map() const;
};

class Adagrad : public Optimizer {
 public:
  Adagrad(std::vector<Tensor> params, const AdagradOptions& options);
  Adagrad(std::vector<ParamGroup> groups, const AdagradOptions& defaults);
  // From Module::named_parameters(): the optimizer knows the names (Note [optimizer state by name]).
  Adagrad(const NamedParameters& named_params, const AdagradOptions& options);

 protected:
  void validate(const OptionMap& o) const override;
  void update(ParamGroup& group) override;
  std::vector<std::string> state_names() const override { return {"step", "sum"}; }
};

}  // namespace weft::optim
