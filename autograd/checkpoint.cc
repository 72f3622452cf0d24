// Activation checkpointing (autograd/checkpoint.h).
#include "autograd/checkpoint.h"

#include "autograd/engine.h"
#include "core/autograd_meta.h"
#include "core/ops.h"
#include "core/rng.h"

namespace weft::autograd {
namespace {

class CheckpointNode final : public Node {
 public:
  CheckpointNode(CheckpointFn fn, std::vector<Tensor> inputs, bool preserve_rng, GeneratorState rng)
      : fn_(std::move(fn)), preserve_rng_(preserve_rng), rng_(rng) {
    for (const Tensor& t : inputs) {
      saved_.emplace_back(t);
      input_requires_grad_.push_back(t.defined() && t.requires_grad());
    }
  }
  std::string name() const override { return "CheckpointBackward"; }
  void release_saved() override {
    saved_.clear();
    fn_ = nullptr;
  }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    WEFT_CHECK(fn_ != nullptr,
               "Trying to backward through the graph a second time (node CheckpointBackward): "
               "its saved inputs were freed after the first backward. Pass retain_graph=true to the first "
               "backward() if you need to backward twice.");
    // Detached inputs: the recomputed graph stops at them and their .grad
    // collects the gradients this node passes on.
    std::vector<Tensor> detached;
    detached.reserve(saved_.size());
    for (size_t i = 0; i < saved_.size(); ++i) {
      Tensor t = saved_[i].get("CheckpointBackward");
      if (t.defined()) {
        t = t.detach();
        if (input_requires_grad_[i]) t.requires_grad_(true);
      }
      detached.push_back(t);
    }
    std::vector<Tensor> outputs;
    {
      RngStateGuard restore_after;  // the caller's stream continues where it was
      if (preserve_rng_) set_rng_state(rng_);
      EnableGradGuard grad_on;
      outputs = fn_(detached);
    }
    WEFT_CHECK(outputs.size() == grads.size(), "checkpoint: recomputation returned ", outputs.size(),
               " outputs but the first run returned ", grads.size(), "; the function must be deterministic");
    std::vector<Tensor> roots, root_grads;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (!outputs[i].defined() || !grads[i].defined() || !outputs[i].requires_grad()) continue;
      WEFT_CHECK(outputs[i].sizes() == grads[i].sizes(), "checkpoint: recomputed output ", i, " has shape ",
                 shape_str(outputs[i].sizes()), " but the first run gave ", shape_str(grads[i].sizes()));
      roots.push_back(outputs[i]);
      root_grads.push_back(grads[i]);
    }
    if (!roots.empty()) backward(roots, root_grads, /*retain_graph=*/false);
    std::vector<Tensor> input_grads;
    input_grads.reserve(detached.size());
    for (size_t i = 0; i < detached.size(); ++i)
      input_grads.push_back(input_requires_grad_[i] ? detached[i].grad() : Tensor());
    return input_grads;
  }

 private:
  CheckpointFn fn_;
  std::vector<SavedTensor> saved_;
  std::vector<bool> input_requires_grad_;
  bool preserve_rng_;
  GeneratorState rng_;
};

}  // namespace

std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs, bool preserve_rng_state) {
  WEFT_CHECK(fn != nullptr, "checkpoint: the function is empty");
  GeneratorState rng = get_rng_state();
  std::vector<Tensor> outputs;
  {
    NoGradGuard no_grad;
    outputs = fn(inputs);
  }
  if (!GradMode::is_enabled()) return outputs;
  bool any_floating = false;
  for (Tensor& out : outputs) {
    if (!out.defined()) continue;
    // Outputs that alias an input (or carry history from a captured tensor) get
    // a fresh alias so wiring them to the node does not rewrite other history.
    out = out.detach();
    any_floating |= out.is_floating_point();
  }
  if (!any_floating) return outputs;
  auto node = std::make_shared<CheckpointNode>(fn, inputs, preserve_rng_state, rng);
  node->next_edges.reserve(inputs.size());
  for (const Tensor& in : inputs) node->next_edges.push_back(gradient_edge(in));
  set_history(outputs, node);
  return outputs;
}

Tensor checkpoint(const CheckpointFn1& fn, const std::vector<Tensor>& inputs, bool preserve_rng_state) {
  WEFT_CHECK(fn != nullptr, "checkpoint: the function is empty");
  auto outs = checkpoint(CheckpointFn([fn](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in)}; }),
                         inputs, preserve_rng_state);
  return outs[0];
}

}  // namespace weft::autograd
