// Optimizer: the base of SGD, Adam, AdamW, RMSprop and Adagrad.
//
// Contract (PyTorch's torch.optim.Optimizer, in C++):
// - Parameters live in parameter groups; each group carries its own
//   hyper-parameters ("lr", "weight_decay" and the optimizer's own, e.g.
//   "momentum", "beta1"). Options a group leaves out take the optimizer's
//   defaults; names the optimizer does not know are an error. A parameter may
//   appear in only one group; parameters must be floating-point leaves.
// - Every optimizer takes "maximize" (0 or 1, default 0; PyTorch's maximize):
//   with 1 the group's gradients are negated before the update (before weight
//   decay), so step() ascends the objective. A state dict saved before the
//   option existed loads with maximize 0.
// - step() updates, without recording autograd, every parameter whose .grad is
//   defined (others are skipped and get no state), and bumps each updated
//   parameter's version counter. zero_grad() drops (or zeroes) the gradients.
// - Per-parameter state (momentum_buffer, exp_avg, exp_avg_sq, step) is created
//   on a parameter's first update.
// - state_dict() is a flat name -> tensor map that io::save_safetensors can
//   write (Note [optimizer state dict]). load_state_dict() checks the number of
//   groups, the number of parameters per group, every state tensor's name and
//   shape, and every hyper-parameter before changing anything.
//
// Note [optimizer state dict]: parameters are numbered 0, 1, ... across groups
// in group order. Keys:
//   "state.<i>.<name>"       state tensor <name> of parameter i (only for
//                            parameters that have state);
//   "param_groups.<g>.params" int64 (n,): the numbers of group g's parameters;
//   "param_groups.<g>.<opt>" float64 0-dim: hyper-parameter <opt> of group g
//                            (booleans such as nesterov are 0 or 1).
// Like PyTorch's, the returned state tensors alias the live state: save or clone
// them before stepping again.
//
// Note [optimizer state by name]: the same state keyed by parameter name
// (state_dict_by_name), so it can be re-split across another partitioning of
// the model: each stage's optimizer loads the entries of its own parameters
// (load_state_dict_by_name) and leaves the rest. Keys:
//   "state.<param name>.<name>"  state tensor <name> of that parameter (only for
//                                parameters that have state);
//   "options.<param name>.<opt>" float64 0-dim: hyper-parameter <opt> of the
//                                group holding that parameter (every parameter).
// Parameter names may contain dots ("h.3.attn.qkv.weight"); state and option
// names do not, so a key splits at its last dot. The names come from the groups
// (an optimizer built from Module::named_parameters()) or are passed in.
// Loading checks, before changing anything, that every parameter of this
// optimizer has all its options, that the parameters of one group were saved
// with equal options (they become the group's), and every state entry's name
// and shape; errors name the parameter. Entries of parameters this optimizer
// does not hold are returned, not loaded. Positional and by-name dicts hold the
// same tensors, so either round-trips through io::save_safetensors.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/ops.h"

namespace weft::optim {

using OptionMap = std::map<std::string, double>;
using ParamState = std::map<std::string, Tensor>;
using OptimizerStateDict = std::map<std::string, Tensor>;

namespace detail {
// Splits "<param name>.<leaf>" of a by-name key (after "state." or "options.")
// at its last dot; false when there is no dot or a side is empty.
bool split_state_key(const std::string& rest, std::string& param, std::string& leaf);
// A hyper-parameter value as error messages print it (17 significant digits).
std::string format_option_value(double v);
}  // namespace detail
// Name/parameter pairs, as Module::named_parameters() returns them.
using NamedParameters = std::vector<std::pair<std::string, Tensor>>;

struct ParamGroup {
  std::vector<Tensor> params;
  OptionMap options;  // hyper-parameters; missing ones take the optimizer's defaults
  // The parameters' names (Note [optimizer state by name]): empty, or one per parameter.
  std::vector<std::string> param_names;
  // The group's lr when the first LR scheduler was made on it (PyTorch's
  // group["initial_lr"]): every later scheduler's base lr (optim/lr_scheduler.h).
  // Not a hyper-parameter: not in `options`, not in the optimizer's state dict.
  std::optional<double> initial_lr;

  ParamGroup() = default;
  ParamGroup(std::vector<Tensor> p, OptionMap o = {}) : params(std::move(p)), options(std::move(o)) {}  // NOLINT
  // From named_parameters(): the group knows its parameters' names.
  ParamGroup(const NamedParameters& named, OptionMap o = {});  // NOLINT(google-explicit-constructor)

  double get(const std::string& key) const;  // error names the key
  double lr() const { return get("lr"); }
  void set_lr(double lr) { options["lr"] = lr; }
  double weight_decay() const { return get("weight_decay"); }
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  const std::string& name() const { return name_; }

  // One update of every parameter that has a gradient.
  void step();
  // set_to_none: drop each .grad (the default, like PyTorch); else zero it in place.
  void zero_grad(bool set_to_none = true);

  void add_param_group(ParamGroup group);
  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  const OptionMap& defaults() const { return defaults_; }

  // The state of a parameter (empty before its first update).
  const ParamState& state(const Tensor& param) const;

  // Virtual for optimizers with state beyond per-parameter tensors (LBFGS's history).
  virtual OptimizerStateDict state_dict() const;
  virtual void load_state_dict(const OptimizerStateDict& sd);

  // ---- by parameter name (Note [optimizer state by name]) ----
  // Every parameter's name, in group order; an error naming the group when a
  // group was built without names.
  std::vector<std::string> param_names() const;
  OptimizerStateDict state_dict_by_name() const;
  // Names looked up by parameter identity, e.g. in model->named_parameters().
  OptimizerStateDict state_dict_by_name(const NamedParameters& names) const;
  // Loads the entries of this optimizer's parameters; returns the keys of
  // parameters it does not hold (another partition's), in key order.
  std::vector<std::string> load_state_dict_by_name(const OptimizerStateDict& sd);
  std::vector<std::string> load_state_dict_by_name(const OptimizerStateDict& sd, const NamedParameters& names);

 protected:
  // `defaults` without "maximize" get maximize 0.
  Optimizer(std::string name, OptionMap defaults);
  // Throws for invalid hyper-parameters (the subclass's checks, PyTorch's messages);
  // the base class has checked its own options ("maximize") first.
  virtual void validate(const OptionMap& options) const = 0;
  // Updates the parameters of one group (grad defined, under NoGradGuard).
  virtual void update(ParamGroup& group) = 0;
  // The state names this optimizer keeps ("step" is 0-dim; the rest have the parameter's shape).
  virtual std::vector<std::string> state_names() const = 0;

  ParamState& mutable_state(const Tensor& param) { return state_[param.impl()]; }
  // Adds hyper-parameters a loaded state dict may lack (they take these values;
  // "maximize" is always one, as 0).
  void set_late_options(const OptionMap& late);
  // Adds the groups, or one group of `params` with the defaults.
  void init_groups(std::vector<ParamGroup> groups);
  // The per-parameter frame of update(): for each parameter of `group` with a
  // gradient, fn(p, ops, state, first) with its operands (detail::prepare_update,
  // errors named `op`), its state and whether this is its first update (the
  // state is empty); fn updates ops.param, then detail::finish_update.
  template <class F>
  void for_each_update(ParamGroup& group, const std::string& op, F&& fn);

 private:
  // The names of all parameters in group order: `names` looked up by identity, else the groups'.
  std::vector<std::string> resolve_names(const char* op, const NamedParameters* names) const;
  OptimizerStateDict state_dict_by_name_impl(const std::vector<std::string>& names) const;
  std::vector<std::string> load_by_name_impl(const OptimizerStateDict& sd, const std::vector<std::string>& names);
  // Checks a loaded state tensor `key` (state `name` of parameter `p`, called `who` in errors).
  void check_state_entry(const std::string& op, const std::string& key, const std::string& name, const Tensor& t,
                         const Tensor& p, const std::string& who) const;
  // Replaces the whole state: entries[i] is the loaded state of `params[i]`.
  void replace_state(const std::vector<const Tensor*>& params,
                     const std::vector<std::map<std::string, Tensor>>& entries);

  // The base class's checks, then the subclass's validate().
  void check_options(const OptionMap& options) const;
  // Fills in late options a loaded group lacks, then requires every default's key.
  void complete_loaded_options(OptionMap& options, const std::string& op, const std::string& key_prefix) const;

  std::string name_;
  OptionMap defaults_;
  OptionMap late_options_;
  std::vector<ParamGroup> groups_;
  std::unordered_map<const TensorImpl*, ParamState> state_;
};

namespace detail {
// One parameter update's operands for a fused kernel: the parameter (itself, or
// a contiguous copy when it is not contiguous) and its gradient made
// contiguous (negated, in a new tensor, for a group with maximize), after
// checking that the gradient's dtype, device and shape match.
struct UpdateOperands {
  Tensor param;  // contiguous
  Tensor grad;   // contiguous
};
UpdateOperands prepare_update(const std::string& op, const Tensor& param, const ParamGroup& group);
// Copies a contiguous working copy back into the parameter and bumps its version.
void finish_update(const Tensor& param, const UpdateOperands& ops);
// Adds 1 to state "step" (a float32 CPU scalar, as in PyTorch; created at 0
// when absent) and returns the new count.
double count_step(ParamState& state);
// State buffer `key` of parameter `p`, created as zeros (filled with `init`)
// on the parameter's first update (`first`); later it must exist and be on the
// parameter's device: errors name the optimizer op and the state.
Tensor& state_buffer(const std::string& op, ParamState& state, const char* key, const Tensor& p, bool first,
                     double init = 0.0);
// The hyper-parameter checks of Adam and its relatives (lr, eps, beta1, beta2,
// weight_decay), with PyTorch's messages prefixed by `who`.
void check_adam_options(const std::string& who, const OptionMap& o);
}  // namespace detail

template <class F>
void Optimizer::for_each_update(ParamGroup& group, const std::string& op, F&& fn) {
  for (Tensor& p : group.params) {
    if (!p.grad().defined()) continue;
    detail::UpdateOperands ops = detail::prepare_update(op, p, group);
    ParamState& st = mutable_state(p);
    fn(p, ops, st, st.empty());
    detail::finish_update(p, ops);
  }
}

}  // namespace weft::optim
