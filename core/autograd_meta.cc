#include "core/autograd_meta.h"

#include <algorithm>
#include <optional>

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
  accumulate_hooked(std::move(g));
  return {};
}

void AccumulateGrad::accumulate_hooked(Tensor g) {
  AutogradMeta& meta = leaf_->ensure_autograd_meta();
  if (g.defined() && GradMode::is_enabled() && g.requires_grad()) {
    // create_graph (Note [double backward]): .grad keeps the gradient's history,
    // summed out of place, as PyTorch does
    meta.grad = meta.grad.defined() ? add(meta.grad, g) : g;
  } else if (g.defined()) {
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
}

namespace {
// Note [composite double backward]: the gradients for `wrt` (indices into the
// composite's inputs) of the composite forward, with their graph.
std::vector<Tensor> differentiate_composite(const std::string& name, const CompositeForward& c,
                                            const std::vector<int>& wrt, const std::vector<Tensor>& grads) {
  GradEngineFn engine = grad_engine();
  WEFT_CHECK(engine != nullptr, "autograd: ", name,
             " is differentiated with create_graph, but no autograd engine is linked into this binary; add a "
             "dependency on //autograd");
  std::vector<Tensor> xs(c.inputs.size());
  for (size_t i = 0; i < xs.size(); ++i)
    if (c.inputs[i].defined()) xs[i] = c.inputs[i].get(name);
  // An alias per input owed a gradient: its own edge, even where two inputs
  // are one tensor (or share a grad_fn output).
  std::vector<Tensor> targets;
  std::vector<int> target_of(xs.size(), -1);
  for (int i : wrt) {
    if (target_of[i] >= 0 || !xs[i].defined() || !xs[i].requires_grad()) continue;
    Tensor a = make_view(xs[i], xs[i].sizes(), xs[i].strides(), xs[i].storage_offset());
    record_differentiable("AliasBackward", {xs[i]}, {a}, [](const std::vector<Tensor>& g) { return g; });
    xs[i] = a;
    target_of[i] = static_cast<int>(targets.size());
    targets.push_back(a);
  }
  std::vector<Tensor> result(wrt.size());
  if (targets.empty()) return result;
  const std::vector<Tensor> ys = c.forward(xs);
  std::vector<Tensor> roots, root_grads;
  for (size_t k = 0; k < ys.size() && k < grads.size(); ++k) {
    if (!ys[k].defined() || !ys[k].requires_grad() || !grads[k].defined()) continue;
    roots.push_back(ys[k]);
    root_grads.push_back(grads[k]);
  }
  if (roots.empty()) return result;
  const std::vector<Tensor> gs = engine(roots, targets, root_grads);
  for (size_t j = 0; j < wrt.size(); ++j)
    if (target_of[wrt[j]] >= 0) result[j] = gs[target_of[wrt[j]]];
  return result;
}
}  // namespace

std::vector<Tensor> FunctionNode::apply(std::vector<Tensor>&& grads) {
  WEFT_CHECK(backward_ != nullptr, "Trying to backward through the graph a second time (node ", name_,
             "): its saved tensors were freed after the first backward. Pass retain_graph=true to the "
             "first backward() if you need to backward twice.");
  if (composite_ != nullptr && GradMode::is_enabled()) return differentiate_composite(name_, *composite_, wrt_, grads);
  return backward_(grads);
}

SavedTensor::SavedTensor(const Tensor& t) {
  if (!t.defined()) return;
  data_ = t.detach();
  version_ = t.version();
  if (!t.requires_grad()) return;  // Note [double backward]
  if (const auto& fn = t.grad_fn()) {
    grad_fn_ = fn;
    output_nr_ = t.output_nr();
  } else {
    leaf_ = t.impl_ptr();
    is_leaf_ = true;
  }
}

SavedTensor SavedTensor::copy_of(const Tensor& t) {
  SavedTensor s(t);
  if (!t.defined()) return s;
  s.data_ = t.detach().clone();
  s.version_ = s.data_.version();
  s.hold_ = s.grad_fn_.lock();
  return s;
}

SavedTensor SavedTensor::output(const Tensor& t, int output_nr) {
  SavedTensor s;
  if (!t.defined()) return s;
  s.data_ = t.detach();
  s.version_ = t.version();
  s.output_nr_ = output_nr;
  s.is_output_ = true;
  return s;
}

namespace {
// data_ as a result of output `nr` of `node`.
Tensor with_history(const Tensor& data, const std::shared_ptr<Node>& node, int nr) {
  Tensor out = data.detach();
  AutogradMeta& meta = out.impl()->ensure_autograd_meta();
  meta.requires_grad = true;
  meta.grad_fn = node;
  meta.output_nr = nr;
  return out;
}
}  // namespace

Tensor SavedTensor::get(const std::string& node_name) const {
  if (!data_.defined()) return data_;
  WEFT_CHECK(data_.version() == version_, node_name, ": a tensor saved for backward (shape ", shape_str(data_.sizes()),
             ", dtype ", data_.dtype(), ") was modified by an in-place operation: saved at version ", version_,
             ", now at version ", data_.version(), ".");
  if (!GradMode::is_enabled() || !is_floating(data_.dtype())) return data_;
  // Note [double backward]: a backward that builds a graph sees the history
  if (is_output_) {
    Node* node = current_backward_node();
    return node == nullptr ? data_ : with_history(data_, node->shared_from_this(), output_nr_);
  }
  if (!is_leaf_ && output_nr_ < 0) return data_;  // saved without history
  auto fn = grad_fn_.lock();
  auto leaf = leaf_.lock();
  WEFT_CHECK(fn != nullptr || leaf != nullptr, node_name, ": the history of a tensor saved for backward (shape ",
             shape_str(data_.sizes()), ") is gone, so its gradient cannot be differentiated again");
  return leaf ? Tensor(leaf) : with_history(data_, fn, output_nr_);
}

namespace {
thread_local Node* t_backward_node = nullptr;
}  // namespace

Node* current_backward_node() { return t_backward_node; }
BackwardNodeGuard::BackwardNodeGuard(Node* node) : prev_(t_backward_node) { t_backward_node = node; }
BackwardNodeGuard::~BackwardNodeGuard() { t_backward_node = prev_; }

// ---- Note [views after an in-place op] ----
namespace {

// A view's place in a buffer laid out as its root: the root is dense (its
// elements cover numel consecutive addresses once each), so a flat buffer of
// root_numel elements holds it at offset 0 with the root's strides, and the
// view at its offset relative to the root's.
struct ViewInRoot {
  Shape root_sizes, root_strides;
  int64_t root_numel = 0;
  Shape sizes, strides;
  int64_t offset = 0;
  bool writable = false;  // no two of the view's elements share an address
  // where the view repeats an element (stride 0, expand), size 1: the part of
  // the root its gradient is summed into; replayable when those do not overlap
  Shape grad_sizes;
  bool replayable = false;
};

// (stride, size) of the dims that take more than one value, by stride.
std::vector<std::pair<int64_t, int64_t>> moving_dims(const Shape& sizes, const Shape& strides) {
  std::vector<std::pair<int64_t, int64_t>> dims;
  for (size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i] > 1) dims.emplace_back(strides[i], sizes[i]);
  std::sort(dims.begin(), dims.end());
  return dims;
}

bool non_overlapping(const Shape& sizes, const Shape& strides) {
  if (numel_of(sizes) == 0) return true;
  int64_t span = 1;  // addresses covered by the dims so far, from the first
  for (auto [stride, size] : moving_dims(sizes, strides)) {
    if (stride < span) return false;
    span += stride * (size - 1);
  }
  return true;
}

bool dense(const Shape& sizes, const Shape& strides) {
  if (numel_of(sizes) == 0) return true;
  int64_t expected = 1;
  for (auto [stride, size] : moving_dims(sizes, strides)) {
    if (stride != expected) return false;
    expected *= size;
  }
  return true;
}

// `root` is the view's tracked root (tracked_root).
std::optional<ViewInRoot> view_in_root(const TensorImpl& view, const TensorImpl& root) {
  if (root.dtype() != view.dtype() || !dense(root.sizes(), root.strides())) return std::nullopt;
  ViewInRoot v{root.sizes(), root.strides(), root.numel(), view.sizes(), view.strides(), view.offset() - root.offset()};
  if (view.numel() > 0) {  // every element of the view inside the root
    int64_t last = v.offset;
    for (size_t i = 0; i < v.sizes.size(); ++i) {
      if (v.strides[i] < 0) return std::nullopt;
      last += v.strides[i] * (v.sizes[i] - 1);
    }
    if (v.offset < 0 || last >= v.root_numel) return std::nullopt;
  }
  v.writable = non_overlapping(v.sizes, v.strides);
  v.grad_sizes = v.sizes;
  for (size_t i = 0; i < v.sizes.size(); ++i)
    if (v.strides[i] == 0 && v.sizes[i] > 1) v.grad_sizes[i] = 1;
  v.replayable = non_overlapping(v.grad_sizes, v.strides);
  return v;
}

Tensor put_part(const ViewInRoot& v, const Shape& sizes, const Tensor& p);

// The elements at the view's place (`sizes`, which do not overlap, with the
// view's strides and offset) of `g`, a tensor shaped as the root. With
// put_part, its adjoint, each is the other's backward, so both differentiate
// to any order (Note [double backward]).
Tensor take_part(const ViewInRoot& v, const Shape& sizes, const Tensor& g) {
  Tensor part;
  {
    NoGradGuard no_grad;
    Tensor buf = zeros({v.root_numel}, g.options());
    Tensor whole = make_view(buf, v.root_sizes, v.root_strides, 0);
    copy_(whole, g);
    part = make_view(buf, sizes, v.strides, v.offset).clone();
  }
  record_differentiable("TakePartBackward", {g}, {part}, [v, sizes](const std::vector<Tensor>& gg) {
    return std::vector<Tensor>{put_part(v, sizes, gg[0])};
  });
  return part;
}

// `p` written into zeros shaped as the root, at the view's place (`sizes`).
Tensor put_part(const ViewInRoot& v, const Shape& sizes, const Tensor& p) {
  Tensor out;
  {
    NoGradGuard no_grad;
    Tensor buf = zeros({v.root_numel}, p.options());
    Tensor at = make_view(buf, sizes, v.strides, v.offset);
    copy_(at, p);
    out = make_view(buf, v.root_sizes, v.root_strides, 0);
  }
  record_differentiable("PutPartBackward", {p}, {out}, [v, sizes](const std::vector<Tensor>& gg) {
    return std::vector<Tensor>{take_part(v, sizes, gg[0])};
  });
  return out;
}

// The root's gradient from the view's: g written into zeros at the view's
// place, summed over the dims where the view repeats an element (expand).
// A backward that builds a graph writes with put_part (Note [double backward]).
Tensor view_grad_to_root(const ViewInRoot& v, const Tensor& g) {
  if (GradMode::is_enabled()) return put_part(v, v.grad_sizes, sum_to(g, v.grad_sizes));
  Tensor buf = zeros({v.root_numel}, g.options());
  Tensor part = make_view(buf, v.grad_sizes, v.strides, v.offset);
  copy_(part, sum_to(g, v.grad_sizes));
  return make_view(buf, v.root_sizes, v.root_strides, 0);
}

// The root of a view that autograd tracks, or null.
const std::shared_ptr<TensorImpl>& tracked_root(const Tensor& t) {
  static const std::shared_ptr<TensorImpl> none;
  const TensorImpl* impl = t.impl();
  return impl->is_view() && impl->view_root() && impl->view_root()->storage() == impl->storage() ? impl->view_root()
                                                                                                 : none;
}

// Gives the view `t` the history "its part of the root", or none where the
// root needs no grad or the view was made with grad mode off. False where
// that cannot be done (t is not such a view, or its root is stale too).
bool rederive_view_history(const Tensor& t) {
  TensorImpl* impl = t.impl();
  const std::shared_ptr<TensorImpl>& root_impl = tracked_root(t);
  if (!root_impl || root_impl->history_is_stale()) return false;
  AutogradMeta* meta = impl->autograd_meta();
  if (meta && meta->requires_grad && !meta->grad_fn) return false;  // a leaf view has a history of its own
  AutogradMeta* root_meta = root_impl->autograd_meta();
  if (impl->view_made_without_grad() || !root_meta || !root_meta->requires_grad) {
    if (meta) {
      meta->grad_fn = nullptr;
      meta->requires_grad = false;
      meta->output_nr = 0;
    }
  } else {
    std::optional<ViewInRoot> v = view_in_root(*impl, *root_impl);
    if (!v || !v->replayable) return false;
    auto node = std::make_shared<FunctionNode>(
        "AsStridedBackward",
        [v = *v](const std::vector<Tensor>& g) { return std::vector<Tensor>{view_grad_to_root(v, g[0])}; },
        /*reusable=*/true, /*differentiable=*/true);
    node->next_edges = {gradient_edge(Tensor(root_impl))};
    set_history({t}, node);
  }
  impl->set_history_mark(impl->storage()->autograd_writes());
  return true;
}

}  // namespace

void refresh_history(const Tensor& t) {
  if (!t.defined() || !t.impl()->history_is_stale()) [[likely]]
    return;
  rederive_view_history(t);
}

void check_not_stale(const Tensor& t, const char* op) {
  if (!t.defined() || !t.impl()->history_is_stale()) [[likely]]
    return;
  if (rederive_view_history(t)) return;
  WEFT_ERROR(op, ": a tensor of shape ", shape_str(t.sizes()), " (", t.impl()->is_view() ? "a view" : "not a view",
             ") shares memory with a tensor that an in-place op changed, with autograd recording it, after this one "
             "was made, and its history cannot be re-derived from that op (",
             t.impl()->is_view() && t.impl()->view_root() ? "it is a leaf, or its root's history is behind too"
                                                          : "it is not a view of the changed tensor's root",
             "): its gradient would miss the op. Take the tensor again after the in-place op, or clone() before it "
             "(Note [views after an in-place op])");
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

namespace {
// Makes `node` the history of `outputs`, with an edge to each of `inputs`.
void attach(const std::shared_ptr<Node>& node, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) {
  node->next_edges.reserve(inputs.size());
  for (const Tensor& in : inputs) node->next_edges.push_back(gradient_edge(in));
  set_history(outputs, node);
}
}  // namespace

void record_function(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                     FunctionNode::Backward backward, bool reusable) {
  if (!any_requires_grad(inputs)) return;
  attach(std::make_shared<FunctionNode>(name, std::move(backward), reusable), inputs, outputs);
}

namespace {
std::shared_ptr<const CompositeForward> make_composite(const std::vector<Tensor>& inputs, Composite forward) {
  auto c = std::make_shared<CompositeForward>();
  c->forward = std::move(forward);
  c->inputs.reserve(inputs.size());
  for (const Tensor& t : inputs) c->inputs.emplace_back(t);
  return c;
}
}  // namespace

void record_function(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                     FunctionNode::Backward backward, Composite composite) {
  if (!any_requires_grad(inputs)) return;
  std::vector<int> wrt(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) wrt[i] = static_cast<int>(i);
  attach(std::make_shared<FunctionNode>(name, std::move(backward), make_composite(inputs, std::move(composite)),
                                        std::move(wrt)),
         inputs, outputs);
}

void record_differentiable(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                           FunctionNode::Backward backward, bool reusable) {
  if (!any_requires_grad(inputs)) return;
  attach(std::make_shared<FunctionNode>(name, std::move(backward), reusable, /*differentiable=*/true), inputs, outputs);
}

void record_function_parts(const char* name, const Tensor& output, BackwardPart first, BackwardPart second,
                           const std::vector<Tensor>& composite_inputs, Composite composite) {
  const OutputMeta meta{output.sizes(), output.dtype(), output.device()};
  std::shared_ptr<const CompositeForward> shared;
  if (composite != nullptr && (any_requires_grad(first.inputs) || any_requires_grad(second.inputs)))
    shared = make_composite(composite_inputs, std::move(composite));
  // Created in increasing priority: `second`, then `first` (Node::sequence_nr).
  std::vector<std::shared_ptr<Node>> parts;
  for (BackwardPart* part : {&second, &first}) {
    if (!any_requires_grad(part->inputs)) continue;
    std::shared_ptr<FunctionNode> node;
    if (shared != nullptr) {
      WEFT_INTERNAL_ASSERT(part->composite_wrt.size() == part->inputs.size(), part->name,
                           ": composite_wrt needs one index per input");
      node = std::make_shared<FunctionNode>(part->name, std::move(part->backward), shared, part->composite_wrt);
    } else {
      node = std::make_shared<FunctionNode>(part->name, std::move(part->backward), /*reusable=*/false,
                                            part->differentiable);
    }
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
  auto fork = std::make_shared<FunctionNode>(
      name,
      [](const std::vector<Tensor>& g) {
        return std::vector<Tensor>{g[0], g[0]};
      },
      /*reusable=*/false,
      /*differentiable=*/true);
  fork->next_edges = {Edge{parts[1], 0}, Edge{parts[0], 0}};  // `first` first
  set_history({output}, fork);
}

// Note [views after an in-place op]: the checks an in-place op on a view
// passes before autograd records it on the view's root. Returns the view's
// place in the root.
static ViewInRoot check_view_writable(const char* op, const Tensor& self, const std::shared_ptr<TensorImpl>& root) {
  WEFT_CHECK(!self.impl()->view_made_without_grad(), op, ": a view (shape ", shape_str(self.sizes()),
             ") made with grad mode off is modified in place with grad mode on by an op that autograd records; its "
             "base would miss the op. Make the view with grad mode on, or clone() it");
  const AutogradMeta* m = root->autograd_meta();
  WEFT_CHECK(!(m && m->requires_grad && !m->grad_fn), op, ": a view (shape ", shape_str(self.sizes()),
             ") of a leaf tensor that requires grad (shape ", shape_str(root->sizes()),
             ") cannot be modified in place; wrap the update in NoGradGuard, or modify a clone of the leaf");
  std::optional<ViewInRoot> v = view_in_root(*self.impl(), *root);
  WEFT_CHECK(v.has_value(), op, ": the tensor a view (shape ", shape_str(self.sizes()),
             ") was taken from is not laid out densely (shape ", shape_str(root->sizes()), ", strides ",
             shape_str(root->strides()), "), so autograd cannot record an in-place op on the view; clone() it");
  WEFT_CHECK(v->writable, op, ": a view (shape ", shape_str(self.sizes()), ", strides ", shape_str(self.strides()),
             ") in which several elements share memory (expand) cannot be modified in place by an op that autograd "
             "records; clone() it first");
  return *v;
}

void check_inplace(const char* op, const Tensor& self, std::initializer_list<Tensor> others) {
  if (!GradMode::is_enabled()) return;
  check_not_stale(self, op);
  const bool self_requires_grad = self.requires_grad();
  if (!self_requires_grad && !any_requires_grad(others)) return;  // autograd will not record the op
  WEFT_CHECK(!(self_requires_grad && self.is_leaf()), op, ": a leaf tensor that requires grad (shape ",
             shape_str(self.sizes()), ") cannot be modified in place; wrap the update in NoGradGuard");
  if (!self.impl()->is_view()) return;
  const std::shared_ptr<TensorImpl>& root = tracked_root(self);
  WEFT_CHECK(root != nullptr || !self_requires_grad, op,
             ": in-place modification of a view of a detached tensor (shape ", shape_str(self.sizes()),
             ") that requires grad is not supported by weft's autograd; use the out-of-place op");
  if (root) check_view_writable(op, self, root);
}

// Note [views after an in-place op]: the in-place op on a view becomes its
// root's history (CopySlices); the view's is then its part of the root's.
static void record_inplace_on_view(const char* name, Tensor& self, const std::vector<Tensor>& other_inputs,
                                   FunctionNode::Backward backward, bool differentiable,
                                   const std::shared_ptr<TensorImpl>& root_impl) {
  const ViewInRoot view = check_view_writable(name, self, root_impl);  // as check_inplace did, before the op
  Tensor root(root_impl);
  auto node = std::make_shared<FunctionNode>(
      "CopySlices",
      [v = view, op = std::move(backward)](const std::vector<Tensor>& g) {
        // g[0]: the root's gradient. The op's backward sees the view's part of it,
        // and its gradient for the view's old value goes back in that place.
        if (GradMode::is_enabled()) {  // the same from recorded ops (Note [double backward])
          Tensor part = take_part(v, v.sizes, g[0]);
          Tensor rest = g[0] - put_part(v, v.sizes, part);
          // The op's result, saved with SavedTensor::output, is the view's
          // part of this node's output: a node of its own, current while the
          // op's backward runs.
          auto view_node = std::make_shared<FunctionNode>(
              "AsStridedBackward",
              [v](const std::vector<Tensor>& gv) { return std::vector<Tensor>{view_grad_to_root(v, gv[0])}; },
              /*reusable=*/true, /*differentiable=*/true);
          Node* copy_slices = current_backward_node();  // this node, run by the engine
          WEFT_INTERNAL_ASSERT(copy_slices != nullptr);
          view_node->next_edges = {Edge{copy_slices->shared_from_this(), 0}};
          view_node->outputs = {OutputMeta{v.sizes, g[0].dtype(), g[0].device()}};
          view_node->pre_hooks.assign(1, nullptr);
          view_node->retained.assign(1, {});
          std::vector<Tensor> grads;
          {
            BackwardNodeGuard current(view_node.get());
            grads = op({part});
          }
          grads[0] = grads[0].defined() ? rest + put_part(v, v.sizes, grads[0]) : rest;
          return grads;
        }
        Tensor buf = zeros({v.root_numel}, g[0].options());
        Tensor root_grad = make_view(buf, v.root_sizes, v.root_strides, 0);
        copy_(root_grad, g[0]);
        Tensor part = make_view(buf, v.sizes, v.strides, v.offset);
        std::vector<Tensor> grads = op({part.clone()});
        if (grads[0].defined()) copy_(part, grads[0]);
        else zero_(part);
        grads[0] = root_grad;
        return grads;
      },
      /*reusable=*/false, differentiable);
  node->next_edges.reserve(other_inputs.size() + 1);
  node->next_edges.push_back(gradient_edge(root));
  for (const Tensor& t : other_inputs) node->next_edges.push_back(gradient_edge(t));
  set_history({root}, node);
  root_impl->set_history_mark(root_impl->storage()->bump_autograd_writes());
  const bool rederived = rederive_view_history(self);  // self is now stale: its part of the root's new history
  WEFT_INTERNAL_ASSERT(rederived);
}

void record_inplace(const char* name, Tensor& self, const std::vector<Tensor>& other_inputs,
                    FunctionNode::Backward backward, bool differentiable) {
  self.bump_version();
  std::vector<Tensor> inputs;
  inputs.reserve(other_inputs.size() + 1);
  inputs.push_back(self);
  for (const Tensor& t : other_inputs) inputs.push_back(t);
  if (!any_requires_grad(inputs)) return;
  if (const auto& root = tracked_root(self))
    return record_inplace_on_view(name, self, other_inputs, std::move(backward), differentiable, root);
  auto node = std::make_shared<FunctionNode>(name, std::move(backward), /*reusable=*/false, differentiable);
  for (const Tensor& in : inputs) node->next_edges.push_back(gradient_edge(in));
  set_history({self}, node);
  // Note [views after an in-place op]: self's history now describes the memory; every other alias's is behind
  self.impl()->set_history_mark(self.impl()->storage()->bump_autograd_writes());
}

}  // namespace weft
