// Custom autograd functions: user-written forward and backward, PyTorch style.
//
//   struct ScaledMul : weft::autograd::Function<ScaledMul> {
//     static Tensor forward(AutogradContext* ctx, const Tensor& a, const Tensor& b, double s) {
//       ctx->save_for_backward({a, b});
//       ctx->saved_data["s"] = s;
//       return a * b * s;
//     }
//     static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> g) {
//       auto saved = ctx->get_saved();
//       double s = std::any_cast<double>(ctx->saved_data["s"]);
//       return {g[0] * saved[1] * s, g[0] * saved[0] * s, Tensor()};
//     }
//   };
//   Tensor y = ScaledMul::apply(a, b, 2.0);
//
// Contract:
// - apply(args...) runs forward under NoGradGuard (forward builds no graph) and,
//   when grad mode is on and a Tensor argument requires grad, records one node
//   whose edges point at the Tensor arguments (in order; std::vector<Tensor>
//   arguments contribute each element). forward returns a Tensor or a
//   std::vector<Tensor>; apply returns the same type.
// - backward gets one gradient per output (zeros where an output got none) and
//   returns one gradient per Tensor input; it may also return one per argument
//   of apply (non-Tensor arguments' entries must be undefined) as in PyTorch.
//   Undefined entries mean "no gradient".
// - save_for_backward stores version-checked aliases (Note [saved tensors]):
//   get_saved() after an in-place write to a saved tensor is an error naming the
//   function. Saved tensors are freed after backward unless retain_graph;
//   backward through the freed node again is the usual "second time" error.
// - mark_non_differentiable(outputs) leaves those outputs without history.
// - saved_data holds any non-tensor values (std::any).
// - Double backward (Note [double backward] in core/autograd_meta.h): a
//   Function whose backward is built of weft ops (no NoGradGuard, no detach,
//   no raw kernels) declares `static constexpr bool differentiable_backward =
//   true;`. Its backward then runs with grad mode on under create_graph, and
//   get_saved() returns the saved inputs and outputs with their history, as
//   PyTorch runs a Function's backward. Without it the gradients it computes
//   refuse a second backward, naming the Function (PyTorch's
//   once_differentiable), so a backward that is not differentiable can never
//   give a silently wrong second derivative.
#pragma once

#include <any>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/autograd_meta.h"
#include "core/tensor.h"

namespace weft::autograd {

class CppNodeBase;
namespace detail {
void finish_custom_function(const std::shared_ptr<CppNodeBase>& node, const std::vector<Tensor>& inputs,
                            std::vector<Tensor>& outputs);
}  // namespace detail

class AutogradContext {
 public:
  void save_for_backward(std::vector<Tensor> tensors);
  // The saved tensors; errors if one was modified in place since saving, or if
  // they were released by a previous backward.
  std::vector<Tensor> get_saved() const;
  void mark_non_differentiable(const std::vector<Tensor>& outputs);
  // needs_input_grad(i): whether Tensor input i requires grad (valid in forward and backward).
  bool needs_input_grad(size_t i) const { return i < needs_input_grad_.size() && needs_input_grad_[i]; }

  std::unordered_map<std::string, std::any> saved_data;

 private:
  template <typename>
  friend struct Function;
  friend class CppNodeBase;
  friend void detail::finish_custom_function(const std::shared_ptr<CppNodeBase>&, const std::vector<Tensor>&,
                                             std::vector<Tensor>&);
  std::string name_;
  std::vector<SavedTensor> saved_;
  std::vector<Tensor> to_save_;  // until apply() knows which are outputs
  bool released_ = false;
  std::vector<bool> needs_input_grad_;
  std::unordered_set<const TensorImpl*> non_differentiable_;
};

// The node a custom function records; subclassed per Function.
class CppNodeBase : public Node {
 public:
  explicit CppNodeBase(std::string name) { ctx_.name_ = std::move(name); }
  std::string name() const override { return ctx_.name_; }
  void release_saved() override {
    ctx_.saved_.clear();
    ctx_.saved_data.clear();
    ctx_.released_ = true;
  }
  AutogradContext* ctx() { return &ctx_; }
  bool supports_double_backward() const override { return differentiable_backward_; }
  std::string double_backward_hint() const override {
    return ". If the Function's backward is built of weft ops, declare `static constexpr bool "
           "differentiable_backward = true;` in it";
  }

 protected:
  // Checks the count of user-returned gradients and drops non-Tensor-argument slots.
  std::vector<Tensor> normalize(std::vector<Tensor>&& grads) const;
  void check_not_released() const;
  AutogradContext ctx_;
  std::vector<bool> arg_is_tensor_;  // per apply() argument slot (after flattening vectors)
  bool differentiable_backward_ = false;
  template <typename>
  friend struct Function;
};

namespace detail {
template <typename T>
using bare_t = std::remove_cv_t<std::remove_reference_t<T>>;

inline void collect_tensors(std::vector<Tensor>&, std::vector<bool>&) {}
template <typename A, typename... Rest>
void collect_tensors(std::vector<Tensor>& out, std::vector<bool>& slots, const A& a, const Rest&... rest) {
  if constexpr (std::is_same_v<bare_t<A>, Tensor>) {
    out.push_back(a);
    slots.push_back(true);
  } else if constexpr (std::is_same_v<bare_t<A>, std::vector<Tensor>>) {
    for (const Tensor& t : a) {
      out.push_back(t);
      slots.push_back(true);
    }
  } else {
    slots.push_back(false);
  }
  collect_tensors(out, slots, rest...);
}
}  // namespace detail

template <typename Derived>
struct Function {
  template <typename... Args>
  static auto apply(Args&&... args) {
    using Result = decltype(Derived::forward(std::declval<AutogradContext*>(), std::forward<Args>(args)...));
    static_assert(std::is_same_v<Result, Tensor> || std::is_same_v<Result, std::vector<Tensor>>,
                  "Function::forward must return Tensor or std::vector<Tensor>");
    auto node = std::make_shared<Node_>(function_name());
    if constexpr (requires { Derived::differentiable_backward; })
      node->differentiable_backward_ = Derived::differentiable_backward;
    std::vector<Tensor> inputs;
    detail::collect_tensors(inputs, node->arg_is_tensor_, args...);
    bool need = any_requires_grad(inputs);
    for (const Tensor& t : inputs) node->ctx_.needs_input_grad_.push_back(need && t.defined() && t.requires_grad());
    Result result;
    {
      NoGradGuard no_grad;
      result = Derived::forward(node->ctx(), std::forward<Args>(args)...);
    }
    if (!need) return result;
    std::vector<Tensor> outputs;
    if constexpr (std::is_same_v<Result, Tensor>) outputs = {result};
    else outputs = std::move(result);
    detail::finish_custom_function(node, inputs, outputs);
    if constexpr (std::is_same_v<Result, Tensor>) return outputs[0];
    else return outputs;
  }

 private:
  static std::string function_name() {
    if constexpr (requires { Derived::name(); }) return std::string(Derived::name());
    else return std::string(typeid(Derived).name()) + "Backward";
  }
  class Node_ final : public CppNodeBase {
   public:
    using CppNodeBase::CppNodeBase;
    std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
      check_not_released();
      return normalize(Derived::backward(&ctx_, std::move(grads)));
    }
    friend struct Function;
  };
};

}  // namespace weft::autograd
