// RMSprop (torch.optim.RMSprop, single-tensor path). Per parameter with a
// gradient g:
//   g += weight_decay * p
//   v = alpha * v + (1 - alpha) * g * g
//   centered: ga = lerp(ga, g, 1 - alpha); avg = sqrt(v - ga * ga) + eps
//   else:     avg = sqrt(v) + eps
//   momentum: buf = momentum * buf + g / avg; p -= lr * buf
//   else:     p -= lr * g / avg
// Group options: lr, alpha, eps, weight_decay, momentum, centered (0 or 1),
// maximize (0 or 1: g = -g first).
// State: step (float32 0-dim, on the CPU), square_avg, momentum_buffer (when
// momentum != 0) and grad_avg (when centered), all but step zeros at first.
#pragma once

#include "optim/optimizer.h"

namespace weft::optim {

struct RMSpropOptions {
  double lr = 1e-2;
  double alpha = 0.99;
  double eps = 1e-8;
  double weight_decay = 0;
  double momentum = 0;
  bool centered = false;
  bool maximize = false;  // negate the gradients: ascend (PyTorch's maximize)
  OptionMap to_map() const;
};

class RMSprop : public Optimizer {
 public:
  RMSprop(std::vector<Tensor> params, const RMSpropOptions& options);
  RMSprop(std::vector<ParamGroup> groups, const RMSpropOptions& defaults);
  // From Module::named_parameters(): the optimizer knows the names (Note [optimizer state by name]).
  RMSprop(const NamedParameters& named_params, const RMSpropOptions& options);

 protected:
  void validate(const OptionMap& o) const override;
  void update(ParamGroup& group) override;
  std::vector<std::string> state_names() const override {
    return {"step", "square_avg", "momentum_buffer", "grad_avg"};
  }
};

}  // namespace weft::optim
