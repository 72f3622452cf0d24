// SGD: hyper-parameter checks (PyTorch's messages) and the per-parameter
// update through sgd_step_table (optim/kernels.h).
#include "optim/sgd.h"

#include "optim/kernels.h"

namespace weft::optim {

OptionMap SGDOptions::to_map() const {
  return {{"lr", lr},
          {"momentum", momentum},
          {"dampening", dampening},
          {"weight_decay", weight_decay},
          {"nesterov", nesterov ? 1.0 : 0.0},
          {"maximize", maximize ? 1.0 : 0.0}};
}

SGD::SGD(std::vector<Tensor> params, const SGDOptions& options) : Optimizer("SGD", options.to_map()) {
  init_groups({ParamGroup(std::move(params))});
}

SGD::SGD(std::vector<ParamGroup> groups, const SGDOptions& defaults) : Optimizer("SGD", defaults.to_map()) {
  init_groups(std::move(groups));
}

SGD::SGD(const NamedParameters& named_params, const SGDOptions& options) : Optimizer("SGD", options.to_map()) {
  init_groups({ParamGroup(named_params)});
}

void SGD::validate(const OptionMap& o) const {
  const double lr = o.at("lr"), momentum = o.at("momentum"), dampening = o.at("dampening");
  const double wd = o.at("weight_decay"), nesterov = o.at("nesterov");
  WEFT_CHECK(lr >= 0.0, "SGD: Invalid learning rate: ", lr);
  WEFT_CHECK(momentum >= 0.0, "SGD: Invalid momentum value: ", momentum);
  WEFT_CHECK(wd >= 0.0, "SGD: Invalid weight_decay value: ", wd);
  WEFT_CHECK(nesterov == 0.0 || nesterov == 1.0, "SGD: nesterov must be 0 or 1, got ", nesterov);
  WEFT_CHECK(nesterov == 0.0 || (momentum > 0 && dampening == 0), "SGD: Nesterov momentum requires a momentum and ",
             "zero dampening (momentum ", momentum, ", dampening ", dampening, ")");
}

void SGD::update(ParamGroup& group) {
  SGDStepArgs a;
  a.lr = group.get("lr");
  a.momentum = group.get("momentum");
  a.dampening = group.get("dampening");
  a.weight_decay = group.get("weight_decay");
  a.nesterov = group.get("nesterov") != 0.0;
  for (Tensor& p : group.params) {
    if (!p.grad().defined()) continue;
    detail::UpdateOperands ops = detail::prepare_update("SGD.step", p, group);
    Tensor buf;
    a.init_buffer = false;
    if (a.momentum != 0) {
      ParamState& st = mutable_state(p);
      if (!st.count("momentum_buffer")) {
        buf = empty(p.sizes(), p.options());  // (p.shape): set to the gradient by the first step
        st["momentum_buffer"] = buf;
        a.init_buffer = true;
      } else {
        buf = detail::state_buffer("SGD.step", st, "momentum_buffer", p, false);
      }
    }
    sgd_step_table()(p.device(), p.dtype(), ops.param, ops.grad, buf, a);
    detail::finish_update(p, ops);
  }
}

}  // namespace weft::optim
