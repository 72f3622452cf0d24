// RAdam and Adamax: hyper-parameter checks (PyTorch's messages) and their
// updates composed of tensor ops, in the order of PyTorch's single-tensor path.
#include <cmath>

#include "core/ops.h"
#include "optim/adamax.h"
#include "optim/radam.h"

namespace weft::optim {

// ---- RAdam ----

OptionMap RAdamOptions::to_map() const {
  return {{"lr", lr},
          {"beta1", beta1},
          {"beta2", beta2},
          {"eps", eps},
          {"weight_decay", weight_decay},
          {"decoupled_weight_decay", decoupled_weight_decay ? 1.0 : 0.0},
          {"maximize", maximize ? 1.0 : 0.0}};
}

RAdam::RAdam(std::vector<Tensor> params, const RAdamOptions& options) : Optimizer("RAdam", options.to_map()) {
  init_groups({ParamGroup(std::move(params))});
}
RAdam::RAdam(std::vector<ParamGroup> groups, const RAdamOptions& defaults) : Optimizer("RAdam", defaults.to_map()) {
  init_groups(std::move(groups));
}
RAdam::RAdam(const NamedParameters& named_params, const RAdamOptions& options) : Optimizer("RAdam", options.to_map()) {
  init_groups({ParamGroup(named_params)});
}

void RAdam::validate(const OptionMap& o) const {
  detail::check_adam_options(name(), o);
  const double d = o.at("decoupled_weight_decay");
  WEFT_CHECK(d == 0.0 || d == 1.0, name(), ": decoupled_weight_decay must be 0 or 1, got ", d);
}

void RAdam::update(ParamGroup& group) {
  const double lr = group.get("lr"), b1 = group.get("beta1"), b2 = group.get("beta2"), eps = group.get("eps");
  const double wd = group.get("weight_decay");
  const bool decoupled = group.get("decoupled_weight_decay") != 0.0;
  const std::string op = name() + ".step";
  for_each_update(group, op, [&](const Tensor& p, detail::UpdateOperands& ops, ParamState& st, bool first) {
    Tensor& m = detail::state_buffer(op, st, "exp_avg", p, first);     // (p.shape)
    Tensor& v = detail::state_buffer(op, st, "exp_avg_sq", p, first);  // (p.shape)
    const double t = detail::count_step(st);
    Tensor& param = ops.param;
    Tensor grad = ops.grad;
    if (wd != 0) {
      if (decoupled) param.mul_(1 - lr * wd);
      else grad = add(grad, param, wd);
    }
    lerp_(m, grad, 1 - b1);
    v.mul_(b2);
    addcmul_(v, grad, grad, 1 - b2);
    const double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
    const Tensor corrected = m / bc1;
    const double rho_inf = 2 / (1 - b2) - 1;
    const double rho_t = rho_inf - 2 * t * std::pow(b2, t) / bc2;
    if (rho_t > 5.0) {
      Tensor root = sqrt(v);
      root.add_(eps);
      const Tensor adaptive_lr = std::pow(bc2, 0.5) / root;
      const double rect = std::pow((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t), 0.5);
      add_(param, corrected * lr * adaptive_lr * rect, -1.0);
    } else {
      add_(param, corrected * lr, -1.0);
    }
  });
}

// ---- Adamax ----

OptionMap AdamaxOptions::to_map() const {
  return {{"lr", lr},
          {"beta1", beta1},
          {"beta2", beta2},
          {"eps", eps},
          {"weight_decay", weight_decay},
          {"maximize", maximize ? 1.0 : 0.0}};
}

Adamax::Adamax(std::vector<Tensor> params, const AdamaxOptions& options) : Optimizer("Adamax", options.to_map()) {
  init_groups({ParamGroup(std::move(params))});
}
Adamax::Adamax(std::vector<ParamGroup> groups, const AdamaxOptions& defaults) : Optimizer("Adamax", defaults.to_map()) {
  init_groups(std::move(groups));
}
Adamax::Adamax(const NamedParameters& named_params, const AdamaxOptions& options)
    : Optimizer("Adamax", options.to_map()) {
  init_groups({ParamGroup(named_params)});
}

void Adamax::validate(const OptionMap& o) const { detail::check_adam_options(name(), o); }

void Adamax::update(ParamGroup& group) {
  const double lr = group.get("lr"), b1 = group.get("beta1"), b2 = group.get("beta2"), eps = group.get("eps");
  const double wd = group.get("weight_decay");
  const std::string op = name() + ".step";
  for_each_update(group, op, [&](const Tensor& p, detail::UpdateOperands& ops, ParamState& st, bool first) {
    Tensor& m = detail::state_buffer(op, st, "exp_avg", p, first);  // (p.shape)
    Tensor& u = detail::state_buffer(op, st, "exp_inf", p, first);  // (p.shape)
    const double t = detail::count_step(st);
    Tensor grad = wd != 0 ? add(ops.grad, ops.param, wd) : ops.grad;
    lerp_(m, grad, 1 - b1);
    u.mul_(b2);
    Tensor bound = abs(grad);
    bound.add_(eps);
    u.copy_(maximum(u, bound));
    const double clr = lr / (1 - std::pow(b1, t));
    addcdiv_(ops.param, m, u, -clr);
  });
}

}  // namespace weft::optim
