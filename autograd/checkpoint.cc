// Activation checkpointing (autograd/checkpoint.h).
#include "autograd/checkpoint.h"

#include <unordered_set>

#include "autograd/engine.h"
#include "core/autograd_meta.h"
#include "core/ops.h"
#include "core/rng.h"

namespace weft::autograd {
namespace {

class CheckpointNode final : public OpaqueNode {
 public:
  CheckpointNode(CheckpointFn fn, std::vector<Tensor> inputs, bool preserve_rng, GeneratorState rng)
      : fn_(std::move(fn)), preserve_rng_(preserve_rng), rng_(rng) {
    for (const Tensor& t : inputs) {
      saved_.emplace_back(t);
      input_requires_grad_.push_back(t.defined() && t.requires_grad());
    }
  }
  std::string name() const override { return "CheckpointBackward"; }
  bool supports_double_backward() const override { return true; }
  void release_saved() override {
    saved_.clear();
    fn_ = nullptr;
  }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    WEFT_CHECK(fn_ != nullptr,
               "Trying to backward through the graph a second time (node CheckpointBackward): "
               "its saved inputs were freed after the first backward. Pass retain_graph=true to the first "
               "backward() if you need to backward twice.");
    // Under create_graph (Note [double backward]) the recomputation sees the
    // inputs with their history, each through an alias of its own, so the
    // gradients it gives differentiate in the inputs and the incoming
    // gradients. Otherwise it sees detached copies, and its graph stops there.
    const bool graph = GradMode::is_enabled();
    std::vector<Tensor> xs(saved_.size());
    std::unordered_set<const Node*> stops;  // where the recomputed graph meets the inputs
    for (size_t i = 0; i < saved_.size(); ++i) {
      Tensor t = saved_[i].get("CheckpointBackward");
      if (!t.defined() || !input_requires_grad_[i]) {
        xs[i] = t.defined() ? t.detach() : t;
      } else if (graph) {
        xs[i] = make_view(t, t.sizes(), t.strides(), t.storage_offset());
        record_differentiable("AliasBackward", {t}, {xs[i]}, [](const std::vector<Tensor>& g) { return g; });
      } else {
        xs[i] = t.detach().requires_grad_(true);
      }
      if (xs[i].defined() && xs[i].requires_grad()) stops.insert(gradient_edge(xs[i]).node.get());
    }
    std::vector<Tensor> roots, root_grads;
    recompute(xs, grads, roots, root_grads);
    std::vector<Tensor> input_grads(saved_.size());
    if (roots.empty()) return input_grads;
    const bool accumulates = pass_accumulates_grad();
    if (!graph && accumulates) {  // a plain backward: the leaves fn captures accumulate .grad in the nested pass
      backward(roots, root_grads, /*retain_graph=*/false);
      for (size_t i = 0; i < xs.size(); ++i)
        if (input_requires_grad_[i]) input_grads[i] = xs[i].grad();
      return input_grads;
    }
    // Note [opaque nodes] (autograd/engine.h): the leaves fn captures get their
    // gradients through their own accumulator (hooks, then .grad, with history
    // under create_graph) in a backward, or handed to the running grad() where
    // it asks for them.
    std::vector<Tensor> targets;
    std::vector<int> target_of(xs.size(), -1);
    for (size_t i = 0; i < xs.size(); ++i)
      if (input_requires_grad_[i]) {
        target_of[i] = static_cast<int>(targets.size());
        targets.push_back(xs[i]);
      }
    std::vector<std::shared_ptr<AccumulateGrad>> leaves;
    for (auto& acc : captured_leaves(roots, stops))
      if (accumulates || pass_captures(Tensor(acc->leaf()))) leaves.push_back(std::move(acc));
    const size_t n_inputs = targets.size();
    for (const auto& acc : leaves) targets.push_back(Tensor(acc->leaf()));
    if (targets.empty()) return input_grads;
    std::vector<Tensor> gs = grad(roots, targets, root_grads, /*retain_graph=*/graph, /*create_graph=*/graph,
                                  /*allow_unused=*/true);
    for (size_t k = 0; k < leaves.size(); ++k) {
      const Tensor& g = gs[n_inputs + k];
      if (!g.defined()) continue;
      if (accumulates) leaves[k]->accumulate_hooked(g);  // grad() ran its hooks
      else deliver_to_pass(Tensor(leaves[k]->leaf()), g);
    }
    for (size_t i = 0; i < xs.size(); ++i)
      if (target_of[i] >= 0) input_grads[i] = gs[target_of[i]];
    return input_grads;
  }

 private:
  // fn recomputed with grad mode on, as the first run would have been; the
  // outputs that need grad and their gradients go to roots / root_grads.
  void recompute(const std::vector<Tensor>& inputs, const std::vector<Tensor>& grads, std::vector<Tensor>& roots,
                 std::vector<Tensor>& root_grads) {
    std::vector<Tensor> outputs;
    {
      RngStateGuard restore_after;  // the caller's stream continues where it was
      if (preserve_rng_) set_rng_state(rng_);
      EnableGradGuard grad_on;
      outputs = fn_(inputs);
    }
    WEFT_CHECK(outputs.size() == grads.size(), "checkpoint: recomputation returned ", outputs.size(),
               " outputs but the first run returned ", grads.size(), "; the function must be deterministic");
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (!outputs[i].defined() || !grads[i].defined() || !outputs[i].requires_grad()) continue;
      WEFT_CHECK(outputs[i].sizes() == grads[i].sizes(), "checkpoint: recomputed output ", i, " has shape ",
                 shape_str(outputs[i].sizes()), " but the first run gave ", shape_str(grads[i].sizes()));
      roots.push_back(outputs[i]);
      root_grads.push_back(grads[i]);
    }
  }

  // The accumulators of the leaves the recomputed graph reaches from `roots`
  // without passing one of `stops` (the inputs): the parameters fn captures.
  static std::vector<std::shared_ptr<AccumulateGrad>> captured_leaves(const std::vector<Tensor>& roots,
                                                                      const std::unordered_set<const Node*>& stops) {
    std::vector<std::shared_ptr<AccumulateGrad>> leaves;
    std::unordered_set<const Node*> seen(stops.begin(), stops.end());
    std::vector<Node*> stack;
    auto visit = [&](const Edge& e) {
      if (!e.valid() || !seen.insert(e.node.get()).second) return;
      if (auto acc = std::dynamic_pointer_cast<AccumulateGrad>(e.node)) leaves.push_back(std::move(acc));
      else stack.push_back(e.node.get());
    };
    for (const Tensor& r : roots) visit(gradient_edge(r));
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (const Edge& e : n->next_edges) visit(e);
    }
    return leaves;
  }

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
