#include "core/tensor.h"

#include <atomic>

#include "core/autograd_meta.h"
#include "core/ops.h"

namespace weft {

int64_t Tensor::size(int64_t d) const { return sizes()[wrap_dim("size", d, dim())]; }
int64_t Tensor::stride(int64_t d) const { return strides()[wrap_dim("stride", d, dim())]; }

template <typename T>
T Tensor::item() const {
  WEFT_CHECK(numel() == 1, "item(): a tensor with ", numel(), " elements (shape ", shape_str(sizes()),
             ") cannot be converted to a scalar; only one-element tensors can");
  Tensor c = device().is_cpu() ? *this : to(kCPU);
  T out{};
  dispatch(c.dtype(), "item", [&](auto tag) {
    using S = typename decltype(tag)::type;
    S v = *static_cast<const S*>(c.raw_data());
    if constexpr (std::is_same_v<T, bool>) out = static_cast<float>(v) != 0.0f;
    else if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>) out = T(static_cast<float>(v));
    else if constexpr (std::is_same_v<S, BFloat16> || std::is_same_v<S, Half>)
      out = static_cast<T>(static_cast<float>(v));
    else out = static_cast<T>(v);
  });
  return out;
}
template float Tensor::item<float>() const;
template double Tensor::item<double>() const;
template int64_t Tensor::item<int64_t>() const;
template int32_t Tensor::item<int32_t>() const;
template uint8_t Tensor::item<uint8_t>() const;
template bool Tensor::item<bool>() const;
template BFloat16 Tensor::item<BFloat16>() const;
template Half Tensor::item<Half>() const;

Scalar Tensor::item() const {
  if (is_floating(dtype())) return Scalar(item<double>());
  if (dtype() == DType::Bool) return Scalar(item<bool>());
  return Scalar(item<int64_t>());
}

bool Tensor::requires_grad() const {
  refresh_history(*this);
  AutogradMeta* m = checked()->autograd_meta();
  return m != nullptr && m->requires_grad;
}

Tensor& Tensor::requires_grad_(bool value) {
  AutogradMeta& m = checked()->ensure_autograd_meta();
  WEFT_CHECK(m.grad_fn == nullptr || value,
             "requires_grad_(false): only leaf tensors can have requires_grad "
             "changed; use detach() on a non-leaf (grad_fn ",
             m.grad_fn ? m.grad_fn->name() : "", ")");
  WEFT_CHECK(!value || is_floating(dtype()),
             "requires_grad_: only floating point tensors can require "
             "gradients, got dtype ",
             dtype());
  m.requires_grad = value;
  return *this;
}

Tensor Tensor::grad() const {
  AutogradMeta* m = checked()->autograd_meta();
  return m ? m->grad : Tensor();
}

void Tensor::set_grad(const Tensor& g) const {
  if (g.defined()) {
    WEFT_CHECK(g.sizes() == sizes(), "set_grad: gradient shape ", shape_str(g.sizes()), " does not match tensor shape ",
               shape_str(sizes()));
    WEFT_CHECK(g.dtype() == dtype(), "set_grad: gradient dtype ", g.dtype(), " does not match tensor dtype ", dtype());
  }
  checked()->ensure_autograd_meta().grad = g;
}

void Tensor::zero_grad() const {
  if (AutogradMeta* m = checked()->autograd_meta()) m->grad = Tensor();
}

const std::shared_ptr<Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<Node> none;
  refresh_history(*this);
  AutogradMeta* m = checked()->autograd_meta();
  return m ? m->grad_fn : none;
}

int Tensor::output_nr() const {
  AutogradMeta* m = checked()->autograd_meta();
  return m ? m->output_nr : 0;
}

namespace {
std::atomic<BackwardEngineFn> g_backward_engine{nullptr};
std::atomic<GradEngineFn> g_grad_engine{nullptr};
}  // namespace

void set_backward_engine(BackwardEngineFn fn) { g_backward_engine.store(fn); }
BackwardEngineFn backward_engine() { return g_backward_engine.load(); }
void set_grad_engine(GradEngineFn fn) { g_grad_engine.store(fn); }
GradEngineFn grad_engine() { return g_grad_engine.load(); }

// Note [backward engine] in core/autograd_meta.h.
void Tensor::backward(const Tensor& gradient, std::optional<bool> retain_graph, bool create_graph) const {
  BackwardEngineFn engine = backward_engine();
  WEFT_CHECK(engine != nullptr,
             "Tensor::backward: no autograd engine is linked into this binary; add a dependency on //autograd "
             "(it installs the engine; Note [backward engine] in core/autograd_meta.h)");
  engine(*this, gradient, retain_graph, create_graph);
}

bool Tensor::is_leaf() const { return grad_fn() == nullptr; }

void Tensor::retain_grad() const {
  const auto& fn = grad_fn();
  if (!fn) return;  // leaves keep .grad anyway
  fn->retained[output_nr()] = impl_;
}

RemovableHandle Tensor::register_hook(std::function<Tensor(const Tensor&)> hook) const {
  WEFT_CHECK(requires_grad(), "register_hook: cannot register a hook on a tensor that does not require grad");
  AutogradMeta& m = checked()->ensure_autograd_meta();
  if (m.grad_fn) {
    auto& list = m.grad_fn->pre_hooks[m.output_nr];
    if (!list) list = std::make_shared<TensorHookList>();
    return list->add(std::move(hook));
  }
  if (!m.hooks) m.hooks = std::make_shared<TensorHookList>();
  return m.hooks->add(std::move(hook));
}

RemovableHandle Tensor::register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const {
  WEFT_CHECK(requires_grad() && is_leaf(),
             "register_post_accumulate_grad_hook: only leaf tensors that "
             "require grad accumulate gradients");
  AutogradMeta& m = checked()->ensure_autograd_meta();
  if (!m.post_accumulate_hooks) m.post_accumulate_hooks = std::make_shared<HookList<PostAccumulateHook>>();
  return m.post_accumulate_hooks->add(std::move(hook));
}

Tensor Tensor::detach() const {
  const TensorImpl* s = checked();
  auto impl = std::make_shared<TensorImpl>(s->storage(), s->offset(), s->sizes(), s->strides(), s->dtype());
  impl->set_is_view(s->is_view());
  impl->set_history_mark(TensorImpl::kNoHistoryMark);  // outside autograd: never stale
  return Tensor(std::move(impl));
}

Tensor& Tensor::detach_() {
  if (AutogradMeta* m = checked()->autograd_meta()) {
    m->grad_fn = nullptr;
    m->requires_grad = false;
    m->output_nr = 0;
  }
  return *this;
}

Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset) {
  refresh_history(base);  // Note [views after an in-place op]
  const TensorImpl* b = base.impl();
  auto impl = std::make_shared<TensorImpl>(b->storage(), offset, std::move(sizes), std::move(strides), base.dtype());
  impl->set_is_view(true);
  // a view of a stale tensor is stale too; of a detached alias, outside autograd too
  impl->set_history_mark(b->history_mark());
  if (b->history_mark() != TensorImpl::kNoHistoryMark) {
    // With grad mode off, only views of a root inside autograd are tracked: a
    // backward's views of its own buffers stay plain aliases (AccumulateGrad
    // adopts a buffer that nothing else holds).
    std::shared_ptr<TensorImpl> root = b->is_view() ? b->view_root() : base.impl_ptr();
    const bool grad_mode = GradMode::is_enabled();
    const AutogradMeta* root_meta = root ? root->autograd_meta() : nullptr;
    if (root && (grad_mode || (root_meta && root_meta->requires_grad)))
      impl->set_view_root(std::move(root), !grad_mode || b->view_made_without_grad());
  }
  return Tensor(std::move(impl));
}

}  // namespace weft
