// Optimizer base: parameter groups, step/zero_grad, flat state dicts
// (Note [optimizer state dict] in optimizer.h).
#include "optim/optimizer.h"

#include <algorithm>
#include <set>
#include <string>
#include <unordered_set>

#include "core/autograd_meta.h"

namespace weft::optim {

ParamGroup::ParamGroup(const NamedParameters& named, OptionMap o) : options(std::move(o)) {
  for (const auto& [name, p] : named) {
    param_names.push_back(name);
    params.push_back(p);
  }
}

double ParamGroup::get(const std::string& key) const {
  auto it = options.find(key);
  WEFT_CHECK(it != options.end(), "param group has no hyper-parameter '", key, "'");
  return it->second;
}

Optimizer::Optimizer(std::string name, OptionMap defaults)
    : name_(std::move(name)), defaults_(std::move(defaults)), late_options_{{"maximize", 0.0}} {
  defaults_.emplace("maximize", 0.0);
}

void Optimizer::set_late_options(const OptionMap& late) {
  for (const auto& [key, value] : late) late_options_[key] = value;
}

void Optimizer::check_options(const OptionMap& options) const {
  const double maximize = options.at("maximize");
  WEFT_CHECK(maximize == 0.0 || maximize == 1.0, name_, ": maximize must be 0 or 1, got ", maximize);
  validate(options);
}

namespace {
// The usual cause of an empty list is model.parameters() of a module whose
// layers were never registered (a child kept as a plain member).
std::string empty_list_hint() {
  return ". The model has no registered parameters: nn::Module::parameters() returns only what was registered, "
         "so a child module kept as a plain member contributes nothing. Register each child in the constructor "
         "with register_module(\"name\", child) and each own tensor with register_parameter(\"name\", tensor)";
}
}  // namespace

void Optimizer::init_groups(std::vector<ParamGroup> groups) {
  WEFT_CHECK(!groups.empty(), name_, ": optimizer got an empty parameter list", empty_list_hint());
  for (auto& g : groups) add_param_group(std::move(g));
}

void Optimizer::add_param_group(ParamGroup group) {
  WEFT_CHECK(!group.params.empty(), name_, ": optimizer got an empty parameter list", empty_list_hint());
  for (const auto& [key, value] : group.options) {
    WEFT_CHECK(defaults_.count(key), name_, ": unknown hyper-parameter '", key, "' in param group (value ", value, ")");
  }
  for (const auto& [key, value] : defaults_) group.options.emplace(key, value);
  check_options(group.options);
  WEFT_CHECK(group.param_names.empty() || group.param_names.size() == group.params.size(), name_, ": the group has ",
             group.params.size(), " parameters but ", group.param_names.size(), " parameter names");
  std::unordered_set<const TensorImpl*> seen;
  std::set<std::string> names;
  for (const auto& g : groups_) {
    for (const auto& p : g.params) seen.insert(p.impl());
    names.insert(g.param_names.begin(), g.param_names.end());
  }
  for (const auto& n : group.param_names) {
    WEFT_CHECK(!n.empty(), name_, ": a parameter name is empty");
    WEFT_CHECK(names.insert(n).second, name_, ": parameter name '", n, "' appears more than once");
  }
  for (size_t i = 0; i < group.params.size(); ++i) {
    const Tensor& p = group.params[i];
    WEFT_CHECK(p.defined(), name_, ": parameter ", i, " of the new group is undefined");
    WEFT_CHECK(p.is_floating_point(), name_, ": can only optimize floating-point tensors, parameter ", i, " has dtype ",
               p.dtype());
    WEFT_CHECK(p.is_leaf(), name_, ": can't optimize a non-leaf Tensor (parameter ", i, ")");
    WEFT_CHECK(seen.insert(p.impl()).second, name_, ": some parameters appear in more than one parameter group");
  }
  groups_.push_back(std::move(group));
}

void Optimizer::step() {
  NoGradGuard no_grad;
  for (auto& g : groups_) update(g);
}

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (auto& g : groups_) {
    for (auto& p : g.params) {
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      if (set_to_none) {
        p.zero_grad();
      } else {
        grad.zero_();
      }
    }
  }
}

const ParamState& Optimizer::state(const Tensor& param) const {
  static const ParamState empty;
  auto it = state_.find(param.impl());
  return it == state_.end() ? empty : it->second;
}

OptimizerStateDict Optimizer::state_dict() const {
  OptimizerStateDict sd;
  int64_t index = 0;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const ParamGroup& g = groups_[gi];
    std::vector<int64_t> ids;
    for (const auto& p : g.params) {
      auto it = state_.find(p.impl());
      if (it != state_.end())
        for (const auto& [name, t] : it->second) sd["state." + std::to_string(index) + "." + name] = t;
      ids.push_back(index++);
    }
    const std::string prefix = "param_groups." + std::to_string(gi) + ".";
    sd[prefix + "params"] = tensor<int64_t>(ids, {static_cast<int64_t>(ids.size())});
    for (const auto& [key, value] : g.options) sd[prefix + key] = scalar_tensor(value, TensorOptions{DType::Float64});
  }
  return sd;
}

namespace {

// Parses "<int>." at the start of `rest`; returns false when it is not there.
bool parse_index(const std::string& rest, int64_t& index, std::string& tail) {
  size_t dot = rest.find('.');
  if (dot == std::string::npos || dot == 0) return false;
  for (size_t i = 0; i < dot; ++i)
    if (rest[i] < '0' || rest[i] > '9') return false;
  if (dot > 12) return false;
  index = std::stoll(rest.substr(0, dot));
  tail = rest.substr(dot + 1);
  return !tail.empty();
}

}  // namespace

void Optimizer::load_state_dict(const OptimizerStateDict& sd) {
  const std::string op = name_ + ".load_state_dict";
  // ---- sort the keys into groups and per-parameter state ----
  std::map<int64_t, std::map<std::string, Tensor>> group_entries;
  std::map<int64_t, std::map<std::string, Tensor>> state_entries;
  for (const auto& [key, t] : sd) {
    int64_t index = 0;
    std::string tail;
    WEFT_CHECK(t.defined(), op, ": entry '", key, "' is an undefined tensor");
    if (key.rfind("param_groups.", 0) == 0 && parse_index(key.substr(13), index, tail)) {
      group_entries[index][tail] = t;
    } else if (key.rfind("state.", 0) == 0 && parse_index(key.substr(6), index, tail)) {
      state_entries[index][tail] = t;
    } else {
      WEFT_ERROR(op, ": unexpected key '", key, "' (expected state.<i>.<name> or param_groups.<g>.<option>)");
    }
  }
  WEFT_CHECK(group_entries.size() == groups_.size() &&
                 (group_entries.empty() || group_entries.rbegin()->first == int64_t(groups_.size()) - 1),
             op, ": loaded state dict has a different number of parameter groups (", group_entries.size(),
             " in the state dict, ", groups_.size(), " in the optimizer)");

  // ---- groups: sizes, parameter numbers, hyper-parameters ----
  std::map<int64_t, const Tensor*> id_to_param;  // saved parameter number -> parameter
  std::vector<OptionMap> new_options(groups_.size());
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const auto& entries = group_entries.at(static_cast<int64_t>(gi));
    const std::string prefix = "param_groups." + std::to_string(gi) + ".";
    auto pit = entries.find("params");
    WEFT_CHECK(pit != entries.end(), op, ": missing '", prefix, "params'");
    const Tensor& ids = pit->second;
    WEFT_CHECK(ids.dtype() == DType::Int64 && ids.dim() == 1, op, ": '", prefix,
               "params' must be a 1-d int64 tensor, got dtype ", ids.dtype(), " shape ", shape_str(ids.sizes()));
    WEFT_CHECK(ids.numel() == static_cast<int64_t>(groups_[gi].params.size()), op,
               ": loaded state dict contains a parameter group that doesn't match the size of optimizer's group ",
               "(group ", gi, ": ", ids.numel(), " parameters in the state dict, ", groups_[gi].params.size(),
               " in the optimizer)");
    Tensor idc = ids.contiguous();
    const int64_t* idp = idc.data_ptr<int64_t>();
    for (int64_t k = 0; k < idc.numel(); ++k) {
      WEFT_CHECK(id_to_param.emplace(idp[k], &groups_[gi].params[k]).second, op, ": parameter number ", idp[k],
                 " appears more than once in param_groups");
    }
    for (const auto& [key, t] : entries) {
      if (key == "params") continue;
      WEFT_CHECK(defaults_.count(key), op, ": unknown hyper-parameter '", prefix, key, "'");
      WEFT_CHECK(t.numel() == 1, op, ": hyper-parameter '", prefix, key, "' must have one element, got shape ",
                 shape_str(t.sizes()));
      new_options[gi][key] = t.item<double>();
    }
    complete_loaded_options(new_options[gi], op, prefix);
    check_options(new_options[gi]);
  }

  // ---- per-parameter state: known names, known parameters, shapes ----
  std::vector<const Tensor*> params;
  std::vector<std::map<std::string, Tensor>> entries_of;
  for (const auto& [index, entries] : state_entries) {
    auto it = id_to_param.find(index);
    WEFT_CHECK(it != id_to_param.end(), op, ": state for parameter ", index,
               " but no parameter group lists that parameter");
    const Tensor& p = *it->second;
    for (const auto& [name, t] : entries)
      check_state_entry(op, "state." + std::to_string(index) + "." + name, name, t, p,
                        "parameter " + std::to_string(index));
    params.push_back(&p);
    entries_of.push_back(entries);
  }

  // ---- everything checked: replace options and state ----
  for (size_t gi = 0; gi < groups_.size(); ++gi) groups_[gi].options = new_options[gi];
  replace_state(params, entries_of);
}

void Optimizer::complete_loaded_options(OptionMap& options, const std::string& op,
                                        const std::string& key_prefix) const {
  for (const auto& [key, value] : late_options_) options.emplace(key, value);
  for (const auto& [key, value] : defaults_)
    WEFT_CHECK(options.count(key), op, ": missing hyper-parameter '", key_prefix, key, "'");
}

void Optimizer::check_state_entry(const std::string& op, const std::string& key, const std::string& name,
                                  const Tensor& t, const Tensor& p, const std::string& who) const {
  const std::vector<std::string> names = state_names();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    WEFT_ERROR(op, ": unexpected state entry '", key, "' for ", name_, " (its state names: ", known, ")");
  }
  if (name == "step") {
    WEFT_CHECK(t.numel() == 1, op, ": '", key, "' must have one element, got shape ", shape_str(t.sizes()));
  } else {
    WEFT_CHECK(t.sizes() == p.sizes(), op, ": '", key, "' has shape ", shape_str(t.sizes()), " but ", who,
               " has shape ", shape_str(p.sizes()));
    WEFT_CHECK(t.is_floating_point(), op, ": '", key, "' has non-floating dtype ", t.dtype());
  }
}

void Optimizer::replace_state(const std::vector<const Tensor*>& params,
                              const std::vector<std::map<std::string, Tensor>>& entries) {
  NoGradGuard no_grad;
  state_.clear();
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = *params[i];
    ParamState& st = state_[p.impl()];
    for (const auto& [name, t] : entries[i]) {
      // Like PyTorch: state follows the parameter's dtype and device; "step" stays a float32 CPU scalar.
      // Always a copy: a conversion that changes nothing, or a reshape, would share the caller's storage, and
      // in-place updates ("step" += 1, exp_avg) would then write into the state dict (and into every other
      // optimizer loaded from it).
      Tensor v = name == "step" ? t.to(TensorOptions{DType::Float32, kCPU}).reshape({}) : t.to(p.options());
      st[name] = v.contiguous().clone();
    }
  }
}

namespace detail {

UpdateOperands prepare_update(const std::string& op, const Tensor& param, const ParamGroup& group) {
  Tensor grad = param.grad();
  WEFT_CHECK(grad.dtype() == param.dtype(), op, ": gradient dtype ", grad.dtype(), " does not match parameter dtype ",
             param.dtype());
  WEFT_CHECK(grad.device() == param.device(), op, ": gradient and parameter are on different devices");
  WEFT_CHECK(grad.sizes() == param.sizes(), op, ": gradient shape ", shape_str(grad.sizes()),
             " does not match parameter shape ", shape_str(param.sizes()));
  Tensor p = param.is_contiguous() ? param : param.contiguous();
  return {p, group.get("maximize") != 0.0 ? neg(grad).contiguous() : grad.contiguous()};
}

double count_step(ParamState& state) {
  auto it = state.find("step");
  if (it == state.end()) it = state.emplace("step", zeros({}, TensorOptions{DType::Float32, kCPU})).first;  // ()
  float* step = it->second.data_ptr<float>();
  *step += 1.0f;
  it->second.bump_version();
  return static_cast<double>(*step);
}

Tensor& state_buffer(const std::string& op, ParamState& state, const char* key, const Tensor& p, bool first,
                     double init) {
  if (first) {
    Tensor t = init == 0.0 ? zeros(p.sizes(), p.options()) : full(p.sizes(), init, p.options());  // (p.shape)
    return state[key] = t;
  }
  auto it = state.find(key);
  WEFT_CHECK(it != state.end(), op, ": parameter of shape ", shape_str(p.sizes()), " has state but no '", key,
             "' (an option that needs it was turned on after the parameter's first step, or the loaded state ",
             "dict lacks it)");
  WEFT_CHECK(it->second.device() == p.device(), op, ": state '", key, "' is on ", it->second.device(),
             " but its parameter is on ", p.device(),
             " (was the module moved after the optimizer created its state? move it first)");
  return it->second;
}

void check_adam_options(const std::string& who, const OptionMap& o) {
  const double lr = o.at("lr"), eps = o.at("eps"), b1 = o.at("beta1"), b2 = o.at("beta2");
  const double wd = o.at("weight_decay");
  WEFT_CHECK(lr >= 0.0, who, ": Invalid learning rate: ", lr);
  WEFT_CHECK(eps >= 0.0, who, ": Invalid epsilon value: ", eps);
  WEFT_CHECK(b1 >= 0.0 && b1 < 1.0, who, ": Invalid beta parameter at index 0: ", b1);
  WEFT_CHECK(b2 >= 0.0 && b2 < 1.0, who, ": Invalid beta parameter at index 1: ", b2);
  WEFT_CHECK(wd >= 0.0, who, ": Invalid weight_decay value: ", wd);
}

void finish_update(const Tensor& param, const UpdateOperands& ops) {
  if (!ops.param.is_same(param)) {
    Tensor p = param;
    p.copy_(ops.param);
  }
  param.bump_version();
}

}  // namespace detail

}  // namespace weft::optim
