// Adam / AdamW: hyper-parameter checks (PyTorch's messages) and the
// per-parameter update through adam_step_table (optim/kernels.h).
#include "optim/adam.h"

#include "optim/kernels.h"

namespace weft::optim {

OptionMap AdamOptions::to_map() const {
  return {{"lr", lr},
          {"beta1", beta1},
          {"beta2", beta2},
          {"eps", eps},
          {"weight_decay", weight_decay},
          {"amsgrad", amsgrad ? 1.0 : 0.0},
          {"maximize", maximize ? 1.0 : 0.0}};
}

Adam::Adam(std::vector<Tensor> params, const AdamOptions& options)
    : Adam("Adam", false, {ParamGroup(std::move(params))}, options) {}
Adam::Adam(std::vector<ParamGroup> groups, const AdamOptions& defaults)
    : Adam("Adam", false, std::move(groups), defaults) {}
Adam::Adam(const NamedParameters& named_params, const AdamOptions& options)
    : Adam("Adam", false, {ParamGroup(named_params)}, options) {}
Adam::Adam(const char* name, bool decoupled, std::vector<ParamGroup> groups, const AdamOptions& defaults)
    : Optimizer(name, defaults.to_map()), decoupled_(decoupled) {
  set_late_options({{"amsgrad", 0.0}});
  init_groups(std::move(groups));
}

AdamW::AdamW(std::vector<Tensor> params, const AdamWOptions& options)
    : Adam("AdamW", true, {ParamGroup(std::move(params))}, options) {}
AdamW::AdamW(std::vector<ParamGroup> groups, const AdamWOptions& defaults)
    : Adam("AdamW", true, std::move(groups), defaults) {}
AdamW::AdamW(const NamedParameters& named_params, const AdamWOptions& options)
    : Adam("AdamW", true, {ParamGroup(named_params)}, options) {}

void Adam::validate(const OptionMap& o) const {
  detail::check_adam_options(name(), o);
  const double amsgrad = o.at("amsgrad");
  WEFT_CHECK(amsgrad == 0.0 || amsgrad == 1.0, name(), ": amsgrad must be 0 or 1, got ", amsgrad);
}

void Adam::update(ParamGroup& group) {
  AdamStepArgs a;
  a.lr = group.get("lr");
  a.beta1 = group.get("beta1");
  a.beta2 = group.get("beta2");
  a.eps = group.get("eps");
  a.weight_decay = group.get("weight_decay");
  a.decoupled_weight_decay = decoupled_;
  const bool amsgrad = group.get("amsgrad") != 0.0;
  const std::string op = name() + ".step";
  for_each_update(group, op, [&](const Tensor& p, detail::UpdateOperands& ops, ParamState& st, bool first) {
    const Tensor& m = detail::state_buffer(op, st, "exp_avg", p, first);     // (p.shape)
    const Tensor& v = detail::state_buffer(op, st, "exp_avg_sq", p, first);  // (p.shape)
    const Tensor vmax = amsgrad ? detail::state_buffer(op, st, "max_exp_avg_sq", p, first) : Tensor();
    a.step = detail::count_step(st);
    adam_step_table()(p.device(), p.dtype(), ops.param, ops.grad, m, v, vmax, a);
  });
}

}  // namespace weft::optim
