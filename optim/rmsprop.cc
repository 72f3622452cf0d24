// RMSprop: hyper-parameter checks (PyTorch's messages) and the per-parameter
// update through rmsprop_step_table (optim/kernels.h).
#include "optim/rmsprop.h"

#include "optim/kernels.h"

namespace weft::optim {

OptionMap RMSpropOptions::to_map() const {
  return {{"lr", lr},
          {"alpha", alpha},
          {"eps", eps},
          {"weight_decay", weight_decay},
          {"momentum", momentum},
          {"centered", centered ? 1.0 : 0.0},
          {"maximize", maximize ? 1.0 : 0.0}};
}

RMSprop::RMSprop(std::vector<Tensor> params, const RMSpropOptions& options) : Optimizer("RMSprop", options.to_map()) {
  init_groups({ParamGroup(std::move(params))});
}

RMSprop::RMSprop(std::vector<ParamGroup> groups, const RMSpropOptions& defaults)
    : Optimizer("RMSprop", defaults.to_map()) {
  init_groups(std::move(groups));
}

RMSprop::RMSprop(const NamedParameters& named_params, const RMSpropOptions& options)
    : Optimizer("RMSprop", options.to_map()) {
  init_groups({ParamGroup(named_params)});
}

void RMSprop::validate(const OptionMap& o) const {
  const double lr = o.at("lr"), alpha = o.at("alpha"), eps = o.at("eps");
  const double wd = o.at("weight_decay"), momentum = o.at("momentum"), centered = o.at("centered");
  WEFT_CHECK(lr >= 0.0, "RMSprop: Invalid learning rate: ", lr);
  WEFT_CHECK(eps >= 0.0, "RMSprop: Invalid epsilon value: ", eps);
  WEFT_CHECK(momentum >= 0.0, "RMSprop: Invalid momentum value: ", momentum);
  WEFT_CHECK(wd >= 0.0, "RMSprop: Invalid weight_decay value: ", wd);
  WEFT_CHECK(alpha >= 0.0, "RMSprop: Invalid alpha value: ", alpha);
  WEFT_CHECK(centered == 0.0 || centered == 1.0, "RMSprop: centered must be 0 or 1, got ", centered);
}

void RMSprop::update(ParamGroup& group) {
  RMSpropStepArgs a;
  a.lr = group.get("lr");
  a.alpha = group.get("alpha");
  a.eps = group.get("eps");
  a.weight_decay = group.get("weight_decay");
  a.momentum = group.get("momentum");
  a.centered = group.get("centered") != 0.0;
  const std::string op = "RMSprop.step";
  for_each_update(group, op, [&](const Tensor& p, detail::UpdateOperands& ops, ParamState& st, bool first) {
    const Tensor& square_avg = detail::state_buffer(op, st, "square_avg", p, first);  // (p.shape)
    const Tensor buf =
        a.momentum != 0 ? detail::state_buffer(op, st, "momentum_buffer", p, first) : Tensor();          // (p.shape)
    const Tensor grad_avg = a.centered ? detail::state_buffer(op, st, "grad_avg", p, first) : Tensor();  // (p.shape)
    detail::count_step(st);
    rmsprop_step_table()(p.device(), p.dtype(), ops.param, ops.grad, square_avg, grad_avg, buf, a);
  });
}

}  // namespace weft::optim
