// nn::Module: the base of every layer and model.
//
// Contract:
// - Parameters, buffers and child modules are registered by name; the named_*()
//   accessors return them in registration order with dotted names
//   ("0.weight", "encoder.layers.3.attn.qkv.bias"), like PyTorch.
// - Handles returned by register_parameter/register_buffer share the tensor with
//   the module: load_state_dict copies values into the registered tensors in
//   place, so a layer's member handles stay valid.
// - state_dict() lists parameters then buffers of each module, depth first in
//   registration order. load_state_dict(strict) reports, in one error, every
//   missing key, unexpected key and shape mismatch.
// - Note [name prefix]: a module cut out of a bigger model (a pipeline stage, a
//   Sequential::slice of a GPT's blocks "h") can carry its path in that model,
//   set_name_prefix("h"). named_parameters(), named_buffers(), named_modules(),
//   state_dict() and load_state_dict() called on it put "h." in front of every
//   name, so its names and state dict keys are the whole model's ("h.3.attn.qkv.
//   weight", not "3.attn.qkv.weight") and a partition's state dict is a subset
//   of the whole one. Only the module asked uses its prefix: reached as a child,
//   a module is named by its path from the module asked, as always.
// - operator() runs forward pre-hooks, forward, then forward hooks; every hook
//   registration returns a RemovableHandle.
// - Note [multi-tensor forward]: a module may take and return several tensors
//   (a pipeline stage boundary carrying (activation, mask)): it overrides
//   forward_multi(Tensors) and is called as (*m)(Tensors{...}). The defaults
//   bridge the two forms for one tensor each way: forward_multi({x}) of a module
//   that overrides forward(Tensor) returns {forward(x)}, and forward(x) of one
//   that overrides forward_multi returns its single output; any other count is
//   an error naming the module type and the count. Hooks run on both call
//   forms, in registration order across both kinds: the *_multi hooks see every
//   input and output, the single-tensor hooks the first input and the first
//   output (an undefined Tensor when there is none).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/hooks.h"
#include "core/ops.h"
#include "nn/state_dict.h"

namespace weft::nn {

// Several tensors crossing a module boundary (fairscale's TensorOrTensors).
using Tensors = std::vector<Tensor>;

// Note [placement scopes]: SageMaker's `with smp.partition(i):` in weft. While
// a PlacementScope(i) is open on a thread, every Module constructed on that
// thread records placement() == i (nested scopes: the innermost wins; closing
// one restores the outer). nn gives it no meaning: a pipeline
// (parallel::hybrid::DistributedModel) reads its children's placements as
// their stages.
class PlacementScope {
 public:
  explicit PlacementScope(int index);
  ~PlacementScope();
  PlacementScope(const PlacementScope&) = delete;
  PlacementScope& operator=(const PlacementScope&) = delete;
  // The innermost open scope's index on this thread, or -1.
  static int current();

 private:
  int previous_;
};

class Module : public std::enable_shared_from_this<Module> {
 public:
  explicit Module(std::string type_name = "Module");
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& type_name() const { return type_name_; }
  // Note [placement scopes]: the index of the innermost PlacementScope open on
  // this thread when the module was constructed, or -1.
  int placement() const { return placement_; }

  // ---- registration ----
  Tensor& register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  Tensor& register_buffer(const std::string& name, Tensor t);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    register_child(name, m);
    return m;
  }

  // ---- names (Note [name prefix]) ----
  // This module's dotted path in the model it was cut from ("" for a whole
  // model, "h" for a slice of its blocks); an error unless empty or dotted names.
  void set_name_prefix(const std::string& prefix);
  const std::string& name_prefix() const { return name_prefix_; }

  // ---- access ----
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  std::vector<std::shared_ptr<Module>> children() const;
  // Includes this module first (named by its name prefix, "" by default), then
  // descendants depth first.
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules();
  int64_t num_parameters(bool trainable_only = false) const;

  // ---- modes and utilities ----
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // set_to_none (PyTorch's default) drops .grad; otherwise zeroes it in place.
  void zero_grad(bool set_to_none = true);
  // Calls fn on every module (children first, then this), like PyTorch's apply.
  void apply(const std::function<void(Module&)>& fn);
  // Converts parameters and buffers (floating ones only for a dtype).
  void to(DType dtype);
  void to(Device device);

  // ---- state ----
  StateDict state_dict() const;
  // strict: missing or unexpected keys are errors. Shape mismatches always are.
  // Returns the keys that were missing / unexpected when not strict.
  struct LoadResult {
    std::vector<std::string> missing_keys, unexpected_keys;
  };
  LoadResult load_state_dict(const StateDict& sd, bool strict = true);

  // ---- forward and hooks (Note [multi-tensor forward]) ----
  using ForwardPreHook = std::function<void(Module&, const Tensor& input)>;
  using ForwardHook = std::function<void(Module&, const Tensor& input, const Tensor& output)>;
  using ForwardPreHookMulti = std::function<void(Module&, const Tensors& inputs)>;
  using ForwardHookMulti = std::function<void(Module&, const Tensors& inputs, const Tensors& outputs)>;
  RemovableHandle register_forward_pre_hook(ForwardPreHook hook);
  RemovableHandle register_forward_hook(ForwardHook hook);
  RemovableHandle register_forward_pre_hook_multi(ForwardPreHookMulti hook);
  RemovableHandle register_forward_hook_multi(ForwardHookMulti hook);
  // Single-tensor forward; modules with other signatures add their own call.
  virtual Tensor forward(const Tensor& input);
  // Several tensors in, several out.
  virtual Tensors forward_multi(const Tensors& inputs);
  Tensor operator()(const Tensor& input);
  Tensors operator()(const Tensors& inputs);
  // True when a forward pre-hook or forward hook is registered on this module
  // (not its children): a module fusing its children's forwards checks this.
  bool has_forward_hooks() const { return !pre_hooks_->empty() || !hooks_->empty(); }

  // Readable tree: "Sequential(\n  (0): Linear(in=784, out=512, bias=true)\n ...)"
  virtual std::string extra_repr() const { return ""; }
  std::string repr() const;

 protected:
  void register_child(const std::string& name, std::shared_ptr<Module> m);
  // For the containers (nn/container.h). replace_* keep the entry's position
  // (and replace_parameter the handle register_parameter returned, which then
  // holds the new tensor); replacing or removing a name that is not
  // registered is an error naming it.
  void replace_child(const std::string& name, std::shared_ptr<Module> m);
  std::shared_ptr<Module> remove_child(const std::string& name);
  Tensor& replace_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  Tensor remove_parameter(const std::string& name);
  Tensor* find_parameter(const std::string& name);  // null when absent
  const Tensor* find_parameter(const std::string& name) const;
  // Runs hooks around a forward computed by `fn` (for modules whose forward has
  // another signature but still want hooks on the first tensor input).
  Tensor call_with_hooks(const Tensor& input, const std::function<Tensor()>& fn);
  Tensors call_with_hooks(const Tensors& inputs, const std::function<Tensors()>& fn);

 private:
  // name_prefix_ + "." (or "" without a prefix): where every name starts.
  std::string root_prefix() const;
  void collect_named_modules(const std::string& prefix,
                             std::vector<std::pair<std::string, std::shared_ptr<Module>>>& out);
  void collect_state(const std::string& prefix, StateDict& out) const;
  std::string repr_indented(int indent) const;

  std::string type_name_;
  int placement_ = -1;
  std::string name_prefix_;
  bool training_ = true;
  // Stored as unique_ptr so references returned by register_* stay valid.
  std::vector<std::pair<std::string, std::unique_ptr<Tensor>>> params_;
  std::vector<std::pair<std::string, std::unique_ptr<Tensor>>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  // One list per side for both hook kinds, so they run in registration order.
  std::shared_ptr<HookList<ForwardPreHookMulti>> pre_hooks_ = std::make_shared<HookList<ForwardPreHookMulti>>();
  std::shared_ptr<HookList<ForwardHookMulti>> hooks_ = std::make_shared<HookList<ForwardHookMulti>>();
};

}  // namespace weft::nn
