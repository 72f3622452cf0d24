// Non-template parts of custom autograd functions (autograd/function.h).
#include "autograd/function.h"

#include "core/ops.h"

namespace weft::autograd {

void AutogradContext::save_for_backward(std::vector<Tensor> tensors) {
  saved_.clear();
  saved_.reserve(tensors.size());
  for (const Tensor& t : tensors) saved_.emplace_back(t);
  to_save_ = std::move(tensors);
}

std::vector<Tensor> AutogradContext::get_saved() const {
  WEFT_CHECK(!released_, "Trying to backward through the graph a second time (node ", name_,
             "): its saved tensors were freed after the first backward. Pass retain_graph=true to the "
             "first backward() if you need to backward twice.");
  std::vector<Tensor> out;
  out.reserve(saved_.size());
  for (const SavedTensor& s : saved_) out.push_back(s.get(name_));
  return out;
}

void AutogradContext::mark_non_differentiable(const std::vector<Tensor>& outputs) {
  for (const Tensor& t : outputs)
    if (t.defined()) non_differentiable_.insert(t.impl());
}

void CppNodeBase::check_not_released() const {
  WEFT_CHECK(!ctx_.released_, "Trying to backward through the graph a second time (node ", ctx_.name_,
             "): its saved tensors were freed after the first backward. Pass retain_graph=true to the "
             "first backward() if you need to backward twice.");
}

std::vector<Tensor> CppNodeBase::normalize(std::vector<Tensor>&& grads) const {
  size_t n_tensors = next_edges.size();
  if (grads.size() == n_tensors) return std::move(grads);
  WEFT_CHECK(grads.size() == arg_is_tensor_.size(), ctx_.name_, ": backward returned ", grads.size(),
             " gradients, expected ", n_tensors, " (one per Tensor input) or ", arg_is_tensor_.size(),
             " (one per argument of apply)");
  std::vector<Tensor> out;
  out.reserve(n_tensors);
  for (size_t i = 0; i < grads.size(); ++i) {
    if (arg_is_tensor_[i]) out.push_back(std::move(grads[i]));
    else
      WEFT_CHECK(!grads[i].defined(), ctx_.name_, ": backward returned a defined gradient for argument ", i,
                 ", which is not a Tensor");
  }
  return out;
}

namespace detail {

void finish_custom_function(const std::shared_ptr<CppNodeBase>& node, const std::vector<Tensor>& inputs,
                            std::vector<Tensor>& outputs) {
  // A saved output comes back, in a backward that builds a graph, as this
  // node's output (Note [double backward]); forward ran without history, so
  // it was saved without any.
  AutogradContext& ctx = *node->ctx();
  for (size_t k = 0; k < ctx.to_save_.size(); ++k)
    for (size_t i = 0; i < outputs.size(); ++i)
      if (ctx.to_save_[k].defined() && outputs[i].defined() && ctx.to_save_[k].is_same(outputs[i]))
        ctx.saved_[k] = SavedTensor::output(outputs[i], static_cast<int>(i));
  ctx.to_save_.clear();
  node->next_edges.reserve(inputs.size());
  for (const Tensor& in : inputs) node->next_edges.push_back(gradient_edge(in));
  auto& non_diff = node->ctx()->non_differentiable_;
  for (Tensor& out : outputs) {
    if (!out.defined()) continue;
    // An output that is an input (or already has history) gets a fresh alias, so
    // wiring it to this node does not rewrite the input's own history.
    bool is_input = false;
    for (const Tensor& in : inputs) is_input |= in.defined() && in.is_same(out);
    bool nd = non_diff.count(out.impl()) > 0;
    if (is_input || out.grad_fn() || out.requires_grad()) out = out.detach();
    if (nd) node->ctx()->non_differentiable_.insert(out.impl());
  }
  set_history(outputs, node);
  for (Tensor& out : outputs) {
    if (out.defined() && non_diff.count(out.impl())) {
      AutogradMeta& m = out.impl()->ensure_autograd_meta();
      m.grad_fn = nullptr;
      m.requires_grad = false;
      m.output_nr = 0;
    }
  }
  node->ctx()->non_differentiable_.clear();
}

}  // namespace detail
}  // namespace weft::autograd
