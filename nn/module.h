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
// - operator() runs forward pre-hooks, forward, then forward hooks; every hook
//   registration returns a RemovableHandle.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/hooks.h"
#include "core/ops.h"

namespace weft::nn {

// An insertion-ordered name -> tensor map (state dicts).
class StateDict {
 public:
  void insert(const std::string& key, const Tensor& value);
  bool contains(const std::string& key) const;
  const Tensor& at(const std::string& key) const;  // error names the key
  const Tensor* find(const std::string& key) const;
  const std::vector<std::pair<std::string, Tensor>>& items() const { return items_; }
  std::vector<std::string> keys() const;
  size_t size() const { return items_.size(); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<std::pair<std::string, Tensor>> items_;
};

class Module : public std::enable_shared_from_this<Module> {
 public:
  explicit Module(std::string type_name = "Module") : type_name_(std::move(type_name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& type_name() const { return type_name_; }

  // ---- registration ----
  Tensor& register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  Tensor& register_buffer(const std::string& name, Tensor t);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    register_child(name, m);
    return m;
  }

  // ---- access ----
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  std::vector<std::shared_ptr<Module>> children() const;
  // Includes this module (name "") first, then descendants depth first.
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

  // ---- forward and hooks ----
  using ForwardPreHook = std::function<void(Module&, const Tensor& input)>;
  using ForwardHook = std::function<void(Module&, const Tensor& input, const Tensor& output)>;
  RemovableHandle register_forward_pre_hook(ForwardPreHook hook);
  RemovableHandle register_forward_hook(ForwardHook hook);
  // Single-tensor forward; modules with other signatures add their own call.
  virtual Tensor forward(const Tensor& input);
  Tensor operator()(const Tensor& input);

  // Readable tree: "Sequential(\n  (0): Linear(in=784, out=512, bias=true)\n ...)"
  virtual std::string extra_repr() const { return ""; }
  std::string repr() const;

 protected:
  void register_child(const std::string& name, std::shared_ptr<Module> m);
  // Runs hooks around a forward computed by `fn` (for modules whose forward has
  // another signature but still want hooks on the first tensor input).
  Tensor call_with_hooks(const Tensor& input, const std::function<Tensor()>& fn);

 private:
  void collect_named_modules(const std::string& prefix,
                             std::vector<std::pair<std::string, std::shared_ptr<Module>>>& out);
  void collect_state(const std::string& prefix, StateDict& out) const;
  std::string repr_indented(int indent) const;

  std::string type_name_;
  bool training_ = true;
  // Stored as unique_ptr so references returned by register_* stay valid.
  std::vector<std::pair<std::string, std::unique_ptr<Tensor>>> params_;
  std::vector<std::pair<std::string, std::unique_ptr<Tensor>>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  std::shared_ptr<HookList<ForwardPreHook>> pre_hooks_ = std::make_shared<HookList<ForwardPreHook>>();
  std::shared_ptr<HookList<ForwardHook>> hooks_ = std::make_shared<HookList<ForwardHook>>();
};

}  // namespace weft::nn
