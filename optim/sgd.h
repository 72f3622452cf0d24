// SGD with momentum, dampening, Nesterov momentum and L2 weight decay
// (torch.optim.SGD, single-tensor path). Per parameter with a gradient g:
//   g += weight_decay * p
//   buf = g on the first step, else buf = momentum * buf + (1 - dampening) * g
//   g = nesterov ? g + momentum * buf : buf          (when momentum != 0)
//   p -= lr * g
// Group options: lr, momentum, dampening, weight_decay, nesterov (0 or 1),
// maximize (0 or 1: g = -g first).
// State: momentum_buffer (only when momentum != 0).
#pragma once

#include "optim/optimizer.h"

namespace weft::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  bool maximize = false;  // negate the gradients: ascend (PyTorch's maximize)
  OptionMap to_map() const;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, const SGDOptions& options);
  SGD(std::vector<ParamGroup> groups, const SGDOptions& defaults);
  // From Module::named_parameters(): the optimizer knows the names (Note [optimizer state by name]).
  SGD(const NamedParameters& named_params, const SGDOptions& options);

 protected:
  void validate(const OptionMap& o) const override;
  void update(ParamGroup& group) override;
  std::vector<std::string> state_names() const override { return {"momentum_buffer"}; }
};

}  // namespace weft::optim
