// Adam / AdamW: hyper-parameter checks (PyTorch's messages) and the
// per-parameter update through adam_step_table (optim/kernels.h).
#include "optim/adam.h"

#include "optim/kernels.h"

namespace weft::optim {

OptionMap AdamOptions::to_map() const {
  return {{"lr", lr}, {"beta1", beta1}, {"beta2", beta2}, {"eps", eps}, {"weight_decay", weight_decay}};
}

Adam::Adam(std::vector<Tensor> params, const AdamOptions& options)
    : Adam("Adam", false, {ParamGroup(std::move(params))}, options) {}
Adam::Adam(std::vector<ParamGroup> groups, const AdamOptions& defaults)
    : Adam("Adam", false, std::move(groups), defaults) {}
Adam::Adam(const NamedParameters& named_params, const AdamOptions& options)
    : Adam("Adam", false, {ParamGroup(named_params)}, options) {}
Adam::Adam(const char* name, bool decoupled, std::vector<ParamGroup> groups, const AdamOptions& defaults)
    : Optimizer(name, defaults.to_map()), decoupled_(decoupled) {
  init_groups(std::move(groups));
}

AdamW::AdamW(std::vector<Tensor> params, const AdamWOptions& options)
    : Adam("AdamW", true, {ParamGroup(std::move(params))}, options) {}
AdamW::AdamW(std::vector<ParamGroup> groups, const AdamWOptions& defaults)
    : Adam("AdamW", true, std::move(groups), defaults) {}
AdamW::AdamW(const NamedParameters& named_params, const AdamWOptions& options)
    : Adam("AdamW", true, {ParamGroup(named_params)}, options) {}

void Adam::validate(const OptionMap& o) const {
  const double lr = o.at("lr"), eps = o.at("eps"), b1 = o.at("beta1"), b2 = o.at("beta2");
  const double wd = o.at("weight_decay");
  WEFT_CHECK(lr >= 0.0, name(), ": Invalid learning rate: ", lr);
  WEFT_CHECK(eps >= 0.0, name(), ": Invalid epsilon value: ", eps);
  WEFT_CHECK(b1 >= 0.0 && b1 < 1.0, name(), ": Invalid beta parameter at index 0: ", b1);
  WEFT_CHECK(b2 >= 0.0 && b2 < 1.0, name(), ": Invalid beta parameter at index 1: ", b2);
  WEFT_CHECK(wd >= 0.0, name(), ": Invalid weight_decay value: ", wd);
}

void Adam::update(ParamGroup& group) {
  AdamStepArgs a;
  a.lr = group.get("lr");
  a.beta1 = group.get("beta1");
  a.beta2 = group.get("beta2");
  a.eps = group.get("eps");
  a.weight_decay = group.get("weight_decay");
  a.decoupled_weight_decay = decoupled_;
  const std::string op = name() + ".step";
  for (Tensor& p : group.params) {
    if (!p.grad().defined()) continue;
    detail::UpdateOperands ops = detail::prepare_update(op, p);
    ParamState& st = mutable_state(p);
    if (!st.count("step")) {
      st["step"] = zeros({}, TensorOptions{DType::Float32, kCPU});  // ()
      st["exp_avg"] = zeros(p.sizes(), p.options());                // (p.shape)
      st["exp_avg_sq"] = zeros(p.sizes(), p.options());             // (p.shape)
    }
    for (const char* key : {"exp_avg", "exp_avg_sq"})
      WEFT_CHECK(st.at(key).device() == p.device(), op, ": state '", key, "' is on ", st.at(key).device(),
                 " but its parameter is on ", p.device(),
                 " (was the module moved after the optimizer created its state? move it first)");
    // step_t += 1, kept as a float32 scalar like PyTorch's.
    float* step = st["step"].data_ptr<float>();
    *step += 1.0f;
    st["step"].bump_version();
    a.step = static_cast<double>(*step);
    adam_step_table()(p.device(), p.dtype(), ops.param, ops.grad, st.at("exp_avg"), st.at("exp_avg_sq"), a);
    detail::finish_update(p, ops);
  }
}

}  // namespace weft::optim
