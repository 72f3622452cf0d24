// The autograd engine: walks the graph recorded by ops (core/autograd_meta.h)
// from the roots back to the leaves.
//
// Contract:
// - Iterative (an explicit ready queue, no recursion): arbitrarily deep graphs
//   cannot overflow the stack. Nodes run once all their consumers have run,
//   newest first (by sequence number) among those ready.
// - Gradients flowing into one node input are summed. Tensor hooks on non-leaf
//   outputs run before the node; leaf hooks and post-accumulate hooks run in
//   AccumulateGrad.
// - Saved tensors are released after a node runs unless retain_graph; running
//   backward again through a released node is an error.
// - Callbacks queued with queue_callback() during backward run once, in order,
//   after the whole graph has run (DDP waits for its buckets there).
// - A backward started while another runs on the same thread (activation
//   checkpointing backprops through its recomputed graph inside a node) runs
//   nested as part of the outer pass; its queued callbacks run at the outer end.
#pragma once

#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "core/autograd_meta.h"
#include "core/tensor.h"

namespace weft::autograd {

// Accumulates d(sum of roots * grads)/d(leaf) into every reachable leaf's .grad.
// A root without a gradient must be a one-element tensor (gradient 1).
// create_graph: the gradients get a history of their own, so they can be
// differentiated again (Note [double backward] in core/autograd_meta.h); .grad
// then holds them with that history. retain_graph defaults to create_graph,
// as in PyTorch.
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads = {},
              std::optional<bool> retain_graph = std::nullopt, bool create_graph = false);
// One root: what Tensor::backward runs (Note [backward engine] in core/autograd_meta.h).
void backward(const Tensor& root, const Tensor& gradient = Tensor(), std::optional<bool> retain_graph = std::nullopt,
              bool create_graph = false);

// Returns d(outputs)/d(inputs) without touching any .grad; PyTorch's
// torch.autograd.grad, arguments in its order. An input the outputs do not
// depend on gets an undefined tensor when allow_unused, else an error.
// create_graph as for backward: the results can be differentiated again
// (Hessian-vector products, gradient penalties, derivatives of a network with
// respect to its input inside a loss).
// Note [grad runs what it needs]: as PyTorch, only the nodes on a path from
// the outputs to an input run; hooks, retained grads and saved tensors of the
// rest are untouched. An input's own grad_fn runs only when another input lies
// below it. This is also what lets a node differentiate its composite forward
// inside a running backward (Note [composite double backward]) without running
// the outer graph below its inputs.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, std::optional<bool> retain_graph = std::nullopt,
                         bool create_graph = false, bool allow_unused = false);

// Note [opaque nodes]: a node that backpropagates a graph of its own, whose
// leaves need not be among its edges: activation checkpointing recomputes a
// segment whose parameters are captured by a closure. grad() runs such a node
// whenever it lies below an output and one of grad()'s inputs is a leaf, since
// it may reach that leaf. Inside its backward the node asks what the running
// pass does: a backward() accumulates into the leaves' .grad (the node runs
// their accumulators); a grad() touches no .grad and returns the gradients of
// its inputs, so the node hands those among its leaves to it.
class OpaqueNode : public Node {};
// Inside a node's backward: whether the running pass accumulates into the
// leaves' .grad (backward(), backward_input/weight) rather than returning
// gradients (grad()). True outside a pass.
bool pass_accumulates_grad();
// Inside a node's backward: whether the running grad() returns a gradient for
// `leaf`, and adding `g` to it.
bool pass_captures(const Tensor& leaf);
void deliver_to_pass(const Tensor& leaf, const Tensor& g);

// The second half of a split backward (Note [split backward] in engine.cc):
// gradients that reached nodes the first half did not run. Move-only.
class DeferredGrads {
 public:
  DeferredGrads() = default;
  DeferredGrads(DeferredGrads&&) = default;
  DeferredGrads& operator=(DeferredGrads&&) = default;
  DeferredGrads(const DeferredGrads&) = delete;
  DeferredGrads& operator=(const DeferredGrads&) = delete;
  bool empty() const { return parts_.empty(); }

 private:
  friend DeferredGrads backward_input(const std::vector<Tensor>&, const std::vector<Tensor>&,
                                      const std::vector<Tensor>&, bool);
  friend void backward_weight(DeferredGrads, bool);
  std::vector<std::pair<Edge, Tensor>> parts_;
};

// A backward split in two (zero-bubble pipelines' B and W): backward_input
// accumulates d(sum of roots * grads)/d(input) into each of `inputs` (leaves
// that require grad) running only the part of the graph that leads to them,
// and returns the gradients that reached the rest; backward_weight runs that
// rest later, so the parameters' gradients accumulate (and their hooks fire)
// then. Together they accumulate exactly what backward(roots, grads) would.
// The graph between the two calls must stay alive and unchanged; each half is
// its own backward pass (end-of-backward callbacks run after each).
DeferredGrads backward_input(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
                             const std::vector<Tensor>& inputs, bool retain_graph = false);
void backward_weight(DeferredGrads deferred, bool retain_graph = false);

// Queues `cb` to run at the end of the backward pass currently executing on
// this thread. Calling it outside backward is an error.
void queue_callback(std::function<void()> cb);

// True while a backward pass runs on this thread.
bool in_backward();

}  // namespace weft::autograd
