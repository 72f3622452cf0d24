#include "autograd/engine.h"

#include <optional>
#include <queue>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "core/ops.h"

namespace weft::autograd {
namespace {

struct BackwardState {
  std::vector<std::function<void()>> callbacks;
};
thread_local BackwardState* t_state = nullptr;

struct NodeCompare {
  bool operator()(Node* a, Node* b) const { return a->sequence_nr() < b->sequence_nr(); }
};

Shape expected_shape(const Edge& e) {
  if (auto* acc = dynamic_cast<AccumulateGrad*>(e.node.get())) return acc->leaf()->sizes();
  return e.node->outputs.at(e.input_nr).sizes;
}

// Note [gradient dtype]: a gradient is handed on in the dtype of the tensor it
// is for, as in PyTorch. An op that promotes mixed dtypes (a float32 residual
// plus a bfloat16 linear output under autocast gives float32) returns its output
// gradient's dtype for every operand; the bfloat16 operand's node would otherwise
// receive float32 and multiply it with its saved bfloat16 tensors.
DType expected_dtype(const Edge& e) {
  if (auto* acc = dynamic_cast<AccumulateGrad*>(e.node.get())) return acc->leaf()->dtype();
  return e.node->outputs.at(e.input_nr).dtype;
}

void accumulate(Tensor& slot, const Tensor& g) {
  if (!g.defined()) return;
  if (!slot.defined()) slot = g;
  else slot = add(slot, g);
}

struct Capture {
  Node* node;
  uint32_t input_nr;
};
// The innermost running pass: whether it accumulates into leaves (backward)
// or captures gradients (grad), and what it captures (Note [opaque nodes]).
struct PassContext {
  const std::vector<Capture>* captures = nullptr;
  std::vector<Tensor>* captured = nullptr;
};
thread_local PassContext t_pass;

// Note [split backward]: backward_input runs only the nodes `needed` (those
// with a path to one of the inputs' gradient accumulators); a gradient bound
// for any other node is summed into `deferred` under (node, input) instead, and
// that node does not run. No node downstream of a deferred one is needed (it
// would give the deferred node a path to an input), so backward_weight can run
// the rest later as an ordinary backward whose roots are the deferred (node,
// input) pairs with their summed gradients: a node that got gradients both
// from the first half and from deferred nodes waits for all of them, as in one
// pass. Ops that record their parameter and input gradients as separate nodes
// (Note [parameters first]: linear, conv2d) thus compute weight gradients in
// the second half; an op whose one node computes both runs whole in the first.
// grad() prunes the same way (Note [grad runs what it needs]): `deferred` is
// null, a gradient bound for a node that is not needed is dropped, and
// `passes` names the needed nodes with a path to a target through their edges;
// a target without one only has its gradient captured and does not run.
struct Split {
  const std::unordered_set<Node*>* needed;
  std::vector<std::pair<Edge, Tensor>>* deferred;
  const std::unordered_set<Node*>* passes = nullptr;
  void defer(const Edge& e, const Tensor& g) const {
    if (deferred == nullptr) return;
    for (auto& [edge, sum] : *deferred)
      if (edge.node == e.node && edge.input_nr == e.input_nr) {
        accumulate(sum, g);
        return;
      }
    deferred->emplace_back(e, g);
  }
};

// Runs the graph. When `captures` is non-null, gradients arriving at the given
// (node, input) pairs are stored into `captured` and AccumulateGrad never runs.
// With `split`, only split->needed nodes run (Note [split backward]).
// Note [double backward] (core/autograd_meta.h): the results of a node that
// cannot build the graph of its own gradients get this history, so a later
// backward through them stops with the node's name instead of missing terms.
// Its edges are the node's own (the forward's inputs) and those of the
// gradients it received: a backward that would need the node's derivative
// with respect to either reaches it.
void refuse_second_backward(Node* node, const std::vector<Edge>& grad_edges, std::vector<Tensor>& outputs) {
  const std::string name = node->name(), hint = node->double_backward_hint();
  auto refuse = std::make_shared<FunctionNode>(
      name + "Backward", [name, hint](const std::vector<Tensor>&) -> std::vector<Tensor> {
        WEFT_CHECK(false, "autograd: ", name,
                   " cannot be differentiated twice: its backward is not built of ops that autograd records. A "
                   "gradient computed with create_graph=true went through it and is now being differentiated",
                   hint);
        return {};
      });
  for (const Edge& e : node->next_edges)
    if (e.valid()) refuse->next_edges.push_back(e);
  for (const Edge& e : grad_edges) refuse->next_edges.push_back(e);
  std::vector<Tensor> results;
  for (Tensor& out : outputs)
    if (out.defined() && is_floating(out.dtype())) {
      out = out.detach();
      results.push_back(out);
    }
  if (results.empty()) return;
  // one node for every result: each is output i of it
  set_history(results, refuse);
}

// The hooks registered on the tensors whose gradients `node` receives: a
// leaf's (its accumulator's) or a node's outputs' (Node::pre_hooks), each on
// its own gradient in registration order; a defined result replaces it.
void run_tensor_hooks(Node* node, bool is_acc, std::vector<Tensor>& inputs) {
  auto run = [](const std::shared_ptr<TensorHookList>& hooks, Tensor& g) {
    if (!hooks || !g.defined()) return;
    for (auto& hook : hooks->snapshot()) {
      Tensor r = hook(g);
      if (r.defined()) g = r;
    }
  };
  if (is_acc) {
    const AutogradMeta* meta = static_cast<AccumulateGrad*>(node)->leaf()->autograd_meta();
    if (meta != nullptr && !inputs.empty()) run(meta->hooks, inputs[0]);
    return;
  }
  for (size_t i = 0; i < node->pre_hooks.size() && i < inputs.size(); ++i) run(node->pre_hooks[i], inputs[i]);
}

// retain_grad: the gradients of `node`'s outputs kept in their .grad.
void retain_grads(Node* node, const std::vector<Tensor>& inputs) {
  for (size_t i = 0; i < node->retained.size() && i < inputs.size(); ++i) {
    if (auto impl = node->retained[i].lock()) {
      AutogradMeta& m = impl->ensure_autograd_meta();
      if (inputs[i].defined()) m.grad = m.grad.defined() ? add(m.grad, inputs[i]) : inputs[i].clone();
    }
  }
}

void execute(const std::vector<Edge>& roots, const std::vector<Tensor>& root_grads, bool retain_graph,
             bool create_graph, const std::vector<Capture>* captures, std::vector<Tensor>* captured,
             const Split* split = nullptr) {
  // Backward formulas build no graph unless asked to (Note [double backward]).
  struct PassGuard {
    PassContext prev = t_pass;
    ~PassGuard() { t_pass = prev; }
  } restore_pass;
  t_pass = {captures, captured};
  std::optional<NoGradGuard> no_grad;
  std::optional<EnableGradGuard> with_grad;
  if (create_graph) with_grad.emplace();
  else no_grad.emplace();
  // 1. dependency counts over the reachable graph (iterative DFS)
  std::unordered_map<Node*, int> deps;
  std::unordered_set<Node*> seen;
  std::vector<Node*> stack;
  for (const Edge& r : roots)
    if (seen.insert(r.node.get()).second) stack.push_back(r.node.get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges) {
      if (!e.valid()) continue;
      ++deps[e.node.get()];
      if (seen.insert(e.node.get()).second) stack.push_back(e.node.get());
    }
  }
  // 2. seed input buffers
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  auto buffer_for = [&](Node* n) -> std::vector<Tensor>& {
    auto& b = buffers[n];
    if (b.empty()) b.resize(std::max<size_t>(1, n->outputs.size()));
    return b;
  };
  std::priority_queue<Node*, std::vector<Node*>, NodeCompare> ready;
  std::unordered_set<Node*> queued;
  std::vector<std::shared_ptr<Node>> keep_alive;
  auto is_needed = [&](Node* n) { return split == nullptr || split->needed->count(n) > 0; };
  for (size_t i = 0; i < roots.size(); ++i) {
    keep_alive.push_back(roots[i].node);
    if (!is_needed(roots[i].node.get())) {
      split->defer(roots[i], root_grads[i]);
      continue;
    }
    accumulate(buffer_for(roots[i].node.get())[roots[i].input_nr], root_grads[i]);
  }
  for (const Edge& r : roots)
    if (is_needed(r.node.get()) && deps[r.node.get()] == 0 && queued.insert(r.node.get()).second)
      ready.push(r.node.get());

  // 3. run
  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    std::vector<Tensor> inputs = std::move(buffer_for(node));
    buffers.erase(node);
    const bool is_acc = dynamic_cast<AccumulateGrad*>(node) != nullptr;
    std::vector<Tensor> outputs;
    bool any_defined = false;
    for (auto& g : inputs) any_defined |= g.defined();
    const bool only_captured = split != nullptr && split->passes != nullptr && split->passes->count(node) == 0;
    // Note [tensor hooks before capture]: as PyTorch, the hooks registered on
    // a tensor run on its gradient before grad() captures it, whether or not
    // its node then runs (a leaf's too, though its accumulator does not run
    // in grad()), and the node sees what they returned; a retained gradient
    // (retain_grad) is kept then too.
    bool hooked = false;
    if (captures) {
      for (size_t c = 0; c < captures->size(); ++c) {
        if ((*captures)[c].node != node) continue;
        if (!hooked) {
          run_tensor_hooks(node, is_acc, inputs);
          retain_grads(node, inputs);
        }
        hooked = true;
        accumulate((*captured)[c], inputs[(*captures)[c].input_nr]);
      }
    }
    if (!(is_acc && captures) && !only_captured && any_defined) {
      // tensor hooks on this node's outputs, then retained grads
      if (!hooked && !is_acc) {
        run_tensor_hooks(node, is_acc, inputs);
        retain_grads(node, inputs);
      }
      if (!is_acc) {
        for (size_t i = 0; i < inputs.size(); ++i)
          if (!inputs[i].defined() && i < node->outputs.size())
            inputs[i] = zeros(node->outputs[i].sizes, {node->outputs[i].dtype, node->outputs[i].device});
      }
      BackwardNodeGuard current(node);
      if (create_graph && !is_acc && !node->supports_double_backward()) {
        std::vector<Edge> grad_edges;
        for (const Tensor& g : inputs)
          if (g.defined() && g.requires_grad()) grad_edges.push_back(gradient_edge(g));
        {
          NoGradGuard first_order;
          outputs = node->apply(std::move(inputs));
        }
        refuse_second_backward(node, grad_edges, outputs);
      } else {
        outputs = node->apply(std::move(inputs));
      }
      if (!retain_graph) node->release_saved();
    }
    if (!is_acc) {
      WEFT_INTERNAL_ASSERT(outputs.empty() || outputs.size() == node->next_edges.size(), node->name(), " returned ",
                           outputs.size(), " gradients for ", node->next_edges.size(), " inputs");
    }
    for (size_t j = 0; j < node->next_edges.size(); ++j) {
      const Edge& e = node->next_edges[j];
      if (!e.valid()) continue;
      Node* next = e.node.get();
      if (j < outputs.size() && outputs[j].defined()) {
        Tensor g = outputs[j];
        Shape want = expected_shape(e);
        WEFT_CHECK(g.sizes() == want, "autograd: ", node->name(), " returned a gradient of shape ",
                   shape_str(g.sizes()), " for input ", j, ", expected ", shape_str(want));
        const DType want_dt = expected_dtype(e);
        if (g.dtype() != want_dt && is_floating(want_dt)) g = g.to(want_dt);  // Note [gradient dtype]
        if (!is_needed(next)) {
          split->defer(e, g);
          continue;
        }
        accumulate(buffer_for(next)[e.input_nr], g);
      }
      if (!is_needed(next)) continue;
      if (--deps[next] == 0 && queued.insert(next).second) ready.push(next);
    }
  }
}

// Runs `fn` as one backward pass: end-of-backward callbacks fire afterwards.
template <typename F>
void with_backward_state(F&& fn) {
  // A backward started from inside a running backward (activation checkpointing
  // recomputes and backprops inside a node) is part of the outer pass: callbacks it
  // queues run once, at the end of the outermost backward.
  if (t_state != nullptr) {
    fn();
    return;
  }
  BackwardState state;
  t_state = &state;
  try {
    fn();
  } catch (...) {
    t_state = nullptr;
    throw;
  }
  // callbacks may queue further callbacks; run until none are left
  for (size_t i = 0; i < state.callbacks.size(); ++i) {
    auto cb = state.callbacks[i];
    try {
      cb();
    } catch (...) {
      t_state = nullptr;
      throw;
    }
  }
  t_state = nullptr;
}

// create_graph keeps the given gradients' history (they may be results of an
// earlier create_graph backward); else they are detached.
void make_roots(const char* op, const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool create_graph,
                std::vector<Edge>& edges, std::vector<Tensor>& gs) {
  WEFT_CHECK(grads.empty() || grads.size() == roots.size(), op, ": got ", grads.size(), " gradients for ", roots.size(),
             " tensors");
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    WEFT_CHECK(r.defined(), op, ": tensor ", i, " is undefined");
    Edge e = gradient_edge(r);
    WEFT_CHECK(e.valid(), op, ": element ", i, " of tensors does not require grad and does not have a grad_fn");
    Tensor g = grads.empty() ? Tensor() : grads[i];
    if (!g.defined()) {
      WEFT_CHECK(r.numel() == 1, op, ": grad can be implicitly created only for scalar outputs, got shape ",
                 shape_str(r.sizes()), "; pass an explicit gradient");
      g = ones(r.sizes(), r.options());
    } else {
      WEFT_CHECK(g.sizes() == r.sizes(), op, ": gradient shape ", shape_str(g.sizes()), " does not match tensor shape ",
                 shape_str(r.sizes()));
      g = create_graph ? g.to(r.dtype()) : g.detach().to(r.dtype());
    }
    edges.push_back(e);
    gs.push_back(g);
  }
}

// The nodes reachable from `roots` that have a path to one of `targets`
// (Note [split backward]); iterative post-order DFS. `passes`, when given,
// gets those whose path to a target goes through one of their edges.
std::unordered_set<Node*> nodes_reaching(const std::vector<Edge>& roots, const std::unordered_set<Node*>& targets,
                                         std::unordered_set<Node*>* passes = nullptr) {
  // Note [opaque nodes]: for grad() (with `passes`), one may reach any leaf target
  bool leaf_target = false;
  if (passes != nullptr)
    for (Node* t : targets) leaf_target = leaf_target || dynamic_cast<AccumulateGrad*>(t) != nullptr;
  std::unordered_set<Node*> needed, done;
  std::vector<std::pair<Node*, size_t>> stack;  // (node, next edge to visit)
  for (const Edge& r : roots) {
    if (done.count(r.node.get())) continue;
    stack.emplace_back(r.node.get(), 0);
    done.insert(r.node.get());
    while (!stack.empty()) {
      auto& [n, i] = stack.back();
      if (i < n->next_edges.size()) {
        const Edge& e = n->next_edges[i++];
        if (e.valid() && done.insert(e.node.get()).second) stack.emplace_back(e.node.get(), 0);
        continue;
      }
      bool through = leaf_target && dynamic_cast<OpaqueNode*>(n) != nullptr;
      for (const Edge& e : n->next_edges) through = through || (e.valid() && needed.count(e.node.get()) > 0);
      if (through && passes != nullptr) passes->insert(n);
      if (through || targets.count(n) > 0) needed.insert(n);
      stack.pop_back();
    }
  }
  return needed;
}
}  // namespace

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, std::optional<bool> retain_graph,
              bool create_graph) {
  std::vector<Edge> edges;
  std::vector<Tensor> gs;
  make_roots("backward", roots, grads, create_graph, edges, gs);
  const bool retain = retain_graph.value_or(create_graph);
  with_backward_state([&] { execute(edges, gs, retain, create_graph, nullptr, nullptr); });
}

bool pass_accumulates_grad() { return t_pass.captures == nullptr; }

bool pass_captures(const Tensor& leaf) {
  if (t_pass.captures == nullptr || !leaf.defined() || !leaf.requires_grad()) return false;
  const Edge e = gradient_edge(leaf);
  for (const Capture& c : *t_pass.captures)
    if (c.node == e.node.get() && c.input_nr == e.input_nr) return true;
  return false;
}

void deliver_to_pass(const Tensor& leaf, const Tensor& g) {
  WEFT_INTERNAL_ASSERT(t_pass.captures != nullptr);
  const Edge e = gradient_edge(leaf);
  for (size_t c = 0; c < t_pass.captures->size(); ++c)
    if ((*t_pass.captures)[c].node == e.node.get() && (*t_pass.captures)[c].input_nr == e.input_nr)
      accumulate((*t_pass.captured)[c], g);
}

void backward(const Tensor& root, const Tensor& gradient, std::optional<bool> retain_graph, bool create_graph) {
  backward(std::vector<Tensor>{root}, std::vector<Tensor>{gradient}, retain_graph, create_graph);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, std::optional<bool> retain_graph, bool create_graph,
                         bool allow_unused) {
  std::vector<Edge> edges;
  std::vector<Tensor> gs;
  make_roots("grad", outputs, grad_outputs, create_graph, edges, gs);
  std::vector<Capture> caps;
  std::vector<std::shared_ptr<Node>> keep;
  std::unordered_set<Node*> targets;
  for (size_t i = 0; i < inputs.size(); ++i) {
    WEFT_CHECK(inputs[i].defined() && inputs[i].requires_grad(), "grad: input ", i, " does not require grad");
    Edge e = gradient_edge(inputs[i]);
    keep.push_back(e.node);
    caps.push_back({e.node.get(), e.input_nr});
    targets.insert(e.node.get());
  }
  std::unordered_set<Node*> passes;
  const std::unordered_set<Node*> needed = nodes_reaching(edges, targets, &passes);
  Split prune{&needed, nullptr, &passes};
  std::vector<Tensor> captured(inputs.size());
  const bool retain = retain_graph.value_or(create_graph);
  with_backward_state([&] { execute(edges, gs, retain, create_graph, &caps, &captured, &prune); });
  for (size_t i = 0; i < captured.size(); ++i)
    WEFT_CHECK(allow_unused || captured[i].defined(), "grad: input ", i,
               " was not used in the graph; pass allow_unused=true to get an undefined gradient");
  return captured;
}

DeferredGrads backward_input(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
                             const std::vector<Tensor>& inputs, bool retain_graph) {
  std::vector<Edge> edges;
  std::vector<Tensor> gs;
  make_roots("backward_input", roots, grads, /*create_graph=*/false, edges, gs);
  std::unordered_set<Node*> targets;
  std::vector<std::shared_ptr<Node>> keep;
  for (size_t i = 0; i < inputs.size(); ++i) {
    WEFT_CHECK(inputs[i].defined() && inputs[i].requires_grad() && inputs[i].is_leaf(), "backward_input: input ", i,
               " must be a leaf that requires grad");
    Edge e = gradient_edge(inputs[i]);
    keep.push_back(e.node);
    targets.insert(e.node.get());
  }
  const std::unordered_set<Node*> needed = nodes_reaching(edges, targets);
  DeferredGrads out;
  Split split{&needed, &out.parts_};
  with_backward_state([&] { execute(edges, gs, retain_graph, false, nullptr, nullptr, &split); });
  return out;
}

void backward_weight(DeferredGrads deferred, bool retain_graph) {
  if (deferred.parts_.empty()) return;
  std::vector<Edge> edges;
  std::vector<Tensor> gs;
  for (auto& [e, g] : deferred.parts_) {
    edges.push_back(e);
    gs.push_back(g);
  }
  deferred.parts_.clear();
  with_backward_state([&] { execute(edges, gs, retain_graph, false, nullptr, nullptr); });
}

void queue_callback(std::function<void()> cb) {
  WEFT_CHECK(t_state != nullptr, "queue_callback: can only be called while backward is running");
  t_state->callbacks.push_back(std::move(cb));
}

bool in_backward() { return t_state != nullptr; }

namespace {
// Installs the engine behind Tensor::backward (Note [backward engine] in core/autograd_meta.h).
const bool g_engine_installed = [] {
  set_backward_engine([](const Tensor& root, const Tensor& gradient, std::optional<bool> retain_graph,
                         bool create_graph) { backward(root, gradient, retain_graph, create_graph); });
  set_grad_engine([](const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                     const std::vector<Tensor>& grad_outputs) {
    return grad(outputs, inputs, grad_outputs, /*retain_graph=*/true, /*create_graph=*/true, /*allow_unused=*/true);
  });
  return true;
}();
}  // namespace
}  // namespace weft::autograd
