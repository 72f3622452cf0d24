// Adadelta: hyper-parameter checks (PyTorch's messages) and its update composed
// of tensor ops, in the order of PyTorch's single-tensor path.
#include "optim/adadelta.h"

#include "core/ops.h"

namespace weft::optim {

OptionMap AdadeltaOptions::to_map() const {
  return {{"lr", lr}, {"rho", rho}, {"eps", eps}, {"weight_decay", weight_decay}, {"maximize", maximize ? 1.0 : 0.0}};
}

Adadelta::Adadelta(std::vector<Tensor> params, const AdadeltaOptions& options)
    : Optimizer("Adadelta", options.to_map()) {
  init_groups({ParamGroup(std::move(params))});
}
Adadelta::Adadelta(std::vector<ParamGroup> groups, const AdadeltaOptions& defaults)
    : Optimizer("Adadelta", defaults.to_map()) {
  init_groups(std::move(groups));
}
Adadelta::Adadelta(const NamedParameters& named_params, const AdadeltaOptions& options)
    : Optimizer("Adadelta", options.to_map()) {
  init_groups({ParamGroup(named_params)});
}

void Adadelta::validate(const OptionMap& o) const {
  const double lr = o.at("lr"), rho = o.at("rho"), eps = o.at("eps"), wd = o.at("weight_decay");
  WEFT_CHECK(lr >= 0.0, name(), ": Invalid learning rate: ", lr);
  WEFT_CHECK(rho >= 0.0 && rho <= 1.0, name(), ": Invalid rho value: ", rho);
  WEFT_CHECK(eps >= 0.0, name(), ": Invalid epsilon value: ", eps);
  WEFT_CHECK(wd >= 0.0, name(), ": Invalid weight_decay value: ", wd);
}

void Adadelta::update(ParamGroup& group) {
  const double lr = group.get("lr"), rho = group.get("rho"), eps = group.get("eps");
  const double wd = group.get("weight_decay");
  const std::string op = name() + ".step";
  for_each_update(group, op, [&](const Tensor& p, detail::UpdateOperands& ops, ParamState& st, bool first) {
    Tensor& v = detail::state_buffer(op, st, "square_avg", p, first);  // (p.shape)
    Tensor& u = detail::state_buffer(op, st, "acc_delta", p, first);   // (p.shape)
    detail::count_step(st);
    const Tensor grad = wd != 0 ? add(ops.grad, ops.param, wd) : ops.grad;
    v.mul_(rho);
    addcmul_(v, grad, grad, 1 - rho);
    Tensor std_dev = v + eps;
    sqrt_(std_dev);
    Tensor delta = u + eps;
    sqrt_(delta);
    delta.div_(std_dev);
    delta.mul_(grad);
    u.mul_(rho);
    addcmul_(u, delta, delta, 1 - rho);
    add_(ops.param, delta, -lr);
  });
}

}  // namespace weft::optim
