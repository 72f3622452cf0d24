// Adadelta (torch.optim.Adadelta, single-tensor path). Per parameter with a
// gradient g:
//   g = -g with maximize;  g += weight_decay * p
//   v = rho * v + (1 - rho) * g * g
//   delta = sqrt(u + eps) / sqrt(v + eps) * g
//   u = rho * u + (1 - rho) * delta * delta
//   p -= lr * delta
// Group options: lr (1.0), rho (0.9), eps (1e-6), weight_decay, maximize.
// State: step (float32 0-dim, on the CPU), square_avg (v), acc_delta (u).
// Composed of tensor ops in PyTorch's order, so it runs on every device.
#pragma once

#include "optim/optimizer.h"

namespace weft::optim {

struct AdadeltaOptions {
  double lr = 1.0;
  double rho = 0.9;
  double eps = 1e-6;
  double weight_decay = 0;
  bool maximize = false;
  OptionMap to_map() const;
};

class Adadelta : public Optimizer {
 public:
  Adadelta(std::vector<Tensor> params, const AdadeltaOptions& options);
  Adadelta(std::vector<ParamGroup> groups, const AdadeltaOptions& defaults);
  // From Module::named_parameters(): the optimizer knows the names (Note [optimizer state by name]).
  Adadelta(const NamedParameters& named_params, const AdadeltaOptions& options);

 protected:
  void validate(const OptionMap& o) const override;
  void update(ParamGroup& group) override;
  std::vector<std::string> state_names() const override { return {"step", "square_avg", "acc_delta"}; }
};

}  // namespace weft::optim
