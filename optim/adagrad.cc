// Adagrad: hyper-parameter checks (PyTorch's messages) and the per-parameter
// update through adagrad_step_table (optim/kernels.h).
#include "optim/adagrad.h"

#include "optim/kernels.h"

namespace weft::optim {

OptionMap AdagradOptions::to_map() const {
  return {{"lr", lr},
          {"lr_decay", lr_decay},
          {"weight_decay", weight_decay},
          {"initial_accumulator_value", initial_accumulator_value},
          {"eps", eps},
          {"maximize", maximize ? 1.0 : 0.0}};
}

Adagrad::Adagrad(std::vector<Tensor> params, const AdagradOptions& options) : Optimizer("Adagrad", options.to_map()) {
  init_groups({ParamGroup(std::move(params))});
}

Adagrad::Adagrad(std::vector<ParamGroup> groups, const AdagradOptions& defaults)
    : Optimizer("Adagrad", defaults.to_map()) {
  init_groups(std::move(groups));
}

Adagrad::Adagrad(const NamedParameters& named_params, const AdagradOptions& options)
    : Optimizer("Adagrad", options.to_map()) {
  init_groups({ParamGroup(named_params)});
}

void Adagrad::validate(const OptionMap& o) const {
  const double lr = o.at("lr"), lr_decay = o.at("lr_decay"), wd = o.at("weight_decay");
  const double init = o.at("initial_accumulator_value"), eps = o.at("eps");
  WEFT_CHECK(lr >= 0.0, "Adagrad: Invalid learning rate: ", lr);
  WEFT_CHECK(lr_decay >= 0.0, "Adagrad: Invalid lr_decay value: ", lr_decay);
  WEFT_CHECK(wd >= 0.0, "Adagrad: Invalid weight_decay value: ", wd);
  WEFT_CHECK(init >= 0.0, "Adagrad: Invalid initial_accumulator_value value: ", init);
  WEFT_CHECK(eps >= 0.0, "Adagrad: Invalid epsilon value: ", eps);
}

void Adagrad::update(ParamGroup& group) {
  AdagradStepArgs a;
  a.lr = group.get("lr");
  a.lr_decay = group.get("lr_decay");
  a.weight_decay = group.get("weight_decay");
  a.eps = group.get("eps");
  const double init = group.get("initial_accumulator_value");
  const std::string op = "Adagrad.step";
  for_each_update(group, op, [&](const Tensor& p, detail::UpdateOperands& ops, ParamState& st, bool first) {
    const Tensor& sum = detail::state_buffer(op, st, "sum", p, first, init);  // (p.shape)
    a.step = detail::count_step(st);
    adagrad_step_table()(p.device(), p.dtype(), ops.param, ops.grad, sum, a);
  });
}

}  // namespace weft::optim
