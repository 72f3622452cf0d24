#include "core/autograd_meta.h"

#include "core/ops.h"

namespace weft {
namespace {
thread_local bool t_grad_enabled = true;
std::atomic<uint64_t> g_sequence{0};
std::atomic<int64_t> g_live_nodes{0};
}  // namespace

bool GradMode::is_enabled() { return t_grad_enabled; }
void GradMode::set_enabled(bool enabled) { t_grad_enabled = enabled; }

Node::Node() : sequence_nr_(g_sequence.fetch_add(1, std::memory_order_relaxed)) {
  g_live_nodes.fetch_add(1, std::memory_order_relaxed);
}

Node::Node(uint64_t sequence_nr) : sequence_nr_(sequence_nr) { g_live_nodes.fetch_add(1, std::memory_order_relaxed); }

// Note [iterative node destruction]: a graph is a chain of shared_ptr<Node>, so
// letting each ~Node release its next_edges recursively overflows the stack on
// long chains (100k ops). Instead, each destructor moves the children it solely
// owns onto a local stack and releases them one by one after stealing their
// own solely-owned children, so recursion depth stays constant.
Node::~Node() {
  g_live_nodes.fetch_sub(1, std::memory_order_relaxed);
  std::vector<std::shared_ptr<Node>> stack;
  auto steal = [&stack](Node* n) {
    for (Edge& e : n->next_edges)
      if (e.node && e.node.use_count() == 1) stack.push_back(std::move(e.node));
  };
  steal(this);
  while (!stack.empty()) {
    std::shared_ptr<Node> n = std::move(stack.back());
    stack.pop_back();
    steal(n.get());
  }  // each n dies here with no solely-owned children left
}

int64_t Node::live_count() { return g_live_nodes.load(); }

AccumulateGrad::AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : Node(kMaxSequenceNr), leaf_(std::move(leaf)) {}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grads) {
  WEFT_INTERNAL_ASSERT(grads.size() == 1);
  Tensor g = std::move(grads[0]);
  AutogradMeta& meta = leaf_->ensure_autograd_meta();
  if (meta.hooks) {
    for (auto& hook : meta.hooks->snapshot()) {
      Tensor r = hook(g);
      if (r.defined()) g = r;
    }
  }
  if (g.defined()) {
    NoGradGuard no_grad;
    if (!meta.grad.defined()) {
      // Own the buffer: the incoming gradient may alias another tensor. A dense
      // one that nothing else refers to (a fresh result) is adopted, not copied.
      const TensorImpl* gi = g.impl();
      const bool sole = g.impl_ptr().use_count() == 1 && gi->storage().use_count() == 1 && gi->is_contiguous() &&
                        gi->offset() == 0 && gi->storage()->nbytes() == g.numel() * element_size(g.dtype());
      meta.grad = sole ? Tensor(std::make_shared<TensorImpl>(gi->storage(), 0, gi->sizes(), gi->strides(), g.dtype()))
                       : g.clone();
    } else {
      meta.grad.add_(g);
    }
  }
  if (meta.post_accumulate_hooks) {
    Tensor self(leaf_);
    for (auto& hook : meta.post_accumulate_hooks->snapshot()) hook(self);
  }
  return {};
}

std::vector<Tensor> FunctionNode::apply(std::vector<Tensor>&& grads) {
  WEFT_CHECK(backward_ != nullptr, "Trying to backward through the graph a second time (node ", name_,
             "): its saved tensors were freed after the first backward. Pass retain_graph=true to the "
             "first backward() if you need to backward twice.");
  return backward_(grads);
}

SavedTensor::SavedTensor(const Tensor& t) {
  if (!t.defined()) return;
  data_ = t.detach();
  version_ = t.version();
}

Tensor SavedTensor::get(const std::string& node_name) const {
  if (!data_.defined()) return data_;
  WEFT_CHECK(data_.version() == version_, node_name, ": a tensor saved for backward (shape ", shape_str(data_.sizes()),
             ", dtype ", data_.dtype(), ") was modified by an in-place operation: saved at version ", version_,
             ", now at version ", data_.version(), ".");
  return data_;
}

void check_not_stale(const Tensor& t, const char* op) {
  if (!t.defined() || !t.impl()->history_is_stale()) [[likely]]
    return;
  WEFT_ERROR(op, ": a tensor of shape ", shape_str(t.sizes()), " (", t.impl()->is_view() ? "a view" : "not a view",
             ") shares memory with a tensor that an in-place op changed, with autograd recording it, after this one "
             "was made: its gradient would miss that op. Take the view again after the in-place op, or clone() "
             "before it (Note [views after an in-place op])");
}

namespace {
template <typename Tensors>
bool any_requires_grad_of(const Tensors& inputs) {
  if (!GradMode::is_enabled()) return false;
  bool any = false;
  for (const Tensor& t : inputs) {
    check_not_stale(t);
    any = any || (t.defined() && t.requires_grad());
  }
  return any;
}
}  // namespace

bool any_requires_grad(std::initializer_list<Tensor> inputs) { return any_requires_grad_of(inputs); }
bool any_requires_grad(const std::vector<Tensor>& inputs) { return any_requires_grad_of(inputs); }

Edge gradient_edge(const Tensor& t) {
  if (!t.defined()) return {};
  check_not_stale(t);
  AutogradMeta* meta = t.impl()->autograd_meta();
  if (!meta) return {};
  if (meta->grad_fn) return {meta->grad_fn, static_cast<uint32_t>(meta->output_nr)};
  if (!meta->requires_grad) return {};
  std::shared_ptr<Node> acc = meta->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    meta->grad_accumulator = acc;
  }
  return {acc, 0};
}

void set_history(const std::vector<Tensor>& outputs, const std::shared_ptr<Node>& node) {
  node->outputs.clear();
  node->pre_hooks.assign(outputs.size(), nullptr);
  node->retained.assign(outputs.size(), {});
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    if (!out.defined()) {
      node->outputs.push_back({});
      continue;
    }
    node->outputs.push_back({out.sizes(), out.dtype(), out.device()});
    if (!is_floating(out.dtype())) continue;  // integer outputs carry no gradient
    AutogradMeta& meta = out.impl()->ensure_autograd_meta();
    meta.requires_grad = true;
    meta.grad_fn = node;
    meta.output_nr = static_cast<int>(i);
  }
}

void record_function(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                     FunctionNode::Backward backward, bool reusable) {
  if (!any_requires_grad(inputs)) return;
  auto node = std::make_shared<FunctionNode>(name, std::move(backward), reusable);
  node->next_edges.reserve(inputs.size());
  for (const Tensor& in : inputs) node->next_edges.push_back(gradient_edge(in));
  set_history(outputs, node);
}

void record_function_parts(const char* name, const Tensor& output, BackwardPart first, BackwardPart second) {
  const OutputMeta meta{output.sizes(), output.dtype(), output.device()};
  // Created in increasing priority: `second`, then `first` (Node::sequence_nr).
  std::vector<std::shared_ptr<Node>> parts;
  for (BackwardPart* part : {&second, &first}) {
    if (!any_requires_grad(part->inputs)) continue;
    auto node = std::make_shared<FunctionNode>(part->name, std::move(part->backward));
    for (const Tensor& in : part->inputs) node->next_edges.push_back(gradient_edge(in));
    node->outputs = {meta};
    node->pre_hooks.assign(1, nullptr);
    node->retained.assign(1, {});
    parts.push_back(std::move(node));
  }
  if (parts.empty()) return;
  if (parts.size() == 1) {
    set_history({output}, parts[0]);
    return;
  }
  auto fork = std::make_shared<FunctionNode>(name, [](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{g[0], g[0]};
  });
  fork->next_edges = {Edge{parts[1], 0}, Edge{parts[0], 0}};  // `first` first
  set_history({output}, fork);
}

void check_inplace(const char* op, const Tensor& self) {
  if (!GradMode::is_enabled()) return;
  check_not_stale(self, op);
  if (!self.requires_grad()) return;
  WEFT_CHECK(!self.is_leaf(), op, ": a leaf tensor that requires grad (shape ", shape_str(self.sizes()),
             ") cannot be modified in place; wrap the update in NoGradGuard");
  WEFT_CHECK(!self.impl()->is_view(), op,
             ": in-place modification of a view of a tensor that requires grad "
             "(shape ",
             shape_str(self.sizes()), ") is not supported by weft's autograd; use the out-of-place op");
}

void record_inplace(const char* name, Tensor& self, const std::vector<Tensor>& other_inputs,
                    FunctionNode::Backward backward) {
  self.bump_version();
  std::vector<Tensor> inputs;
  inputs.reserve(other_inputs.size() + 1);
  inputs.push_back(self);
  for (const Tensor& t : other_inputs) inputs.push_back(t);
  if (!any_requires_grad(inputs)) return;
  auto node = std::make_shared<FunctionNode>(name, std::move(backward));
  for (const Tensor& in : inputs) node->next_edges.push_back(gradient_edge(in));
  set_history({self}, node);
  // Note [views after an in-place op]: self's history now describes the memory; every other alias's is behind
  self.impl()->set_history_mark(self.impl()->storage()->bump_autograd_writes());
}

}  // namespace weft
