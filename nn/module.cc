// nn::Module: registration, names (Note [name prefix]), state dicts, hooks and
// the single/multi-tensor forward bridge (Note [multi-tensor forward]).
#include "nn/module.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "core/autograd_meta.h"

namespace weft::nn {

// ---- registration ----
namespace {
void check_name(const std::string& owner, const std::string& kind, const std::string& name) {
  WEFT_CHECK(!name.empty() && name.find('.') == std::string::npos, owner, ": ", kind, " name '", name,
             "' must be non-empty and contain no '.'");
}

void prepare_parameter(const std::string& owner, const std::string& name, Tensor& t, bool requires_grad) {
  if (!t.defined()) return;
  WEFT_CHECK(t.is_leaf(), owner, ": parameter '", name, "' must be a leaf tensor (detach it first)");
  if (requires_grad) t.requires_grad_(true);
}
}  // namespace

Tensor& Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  check_name(type_name_, "parameter", name);
  for (auto& [n, p] : params_) WEFT_CHECK(n != name, type_name_, ": parameter '", name, "' already registered");
  prepare_parameter(type_name_, name, t, requires_grad);
  params_.emplace_back(name, std::make_unique<Tensor>(std::move(t)));
  return *params_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor t) {
  check_name(type_name_, "buffer", name);
  for (auto& [n, b] : buffers_) WEFT_CHECK(n != name, type_name_, ": buffer '", name, "' already registered");
  buffers_.emplace_back(name, std::make_unique<Tensor>(std::move(t)));
  return *buffers_.back().second;
}

void Module::set_name_prefix(const std::string& prefix) {
  if (!prefix.empty()) {
    size_t start = 0;
    while (true) {
      size_t dot = prefix.find('.', start);
      WEFT_CHECK(dot != start && start != prefix.size(), type_name_, ": name prefix '", prefix,
                 "' must be a dotted path of non-empty names (e.g. \"h\" or \"encoder.layers\")");
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
  }
  name_prefix_ = prefix;
}

std::string Module::root_prefix() const { return name_prefix_.empty() ? "" : name_prefix_ + "."; }

void Module::register_child(const std::string& name, std::shared_ptr<Module> m) {
  check_name(type_name_, "submodule", name);
  WEFT_CHECK(m != nullptr, type_name_, ": submodule '", name, "' is null");
  for (auto& [n, c] : children_) WEFT_CHECK(n != name, type_name_, ": submodule '", name, "' already registered");
  children_.emplace_back(name, std::move(m));
}

namespace {
template <class Entries>
auto find_entry(Entries& entries, const std::string& name) {
  return std::find_if(entries.begin(), entries.end(), [&](const auto& e) { return e.first == name; });
}
}  // namespace

void Module::replace_child(const std::string& name, std::shared_ptr<Module> m) {
  WEFT_CHECK(m != nullptr, type_name_, ": submodule '", name, "' is null");
  auto it = find_entry(children_, name);
  WEFT_CHECK(it != children_.end(), type_name_, ": no submodule '", name, "' to replace");
  it->second = std::move(m);
}

std::shared_ptr<Module> Module::remove_child(const std::string& name) {
  auto it = find_entry(children_, name);
  WEFT_CHECK(it != children_.end(), type_name_, ": no submodule '", name, "' to remove");
  std::shared_ptr<Module> m = std::move(it->second);
  children_.erase(it);
  return m;
}

Tensor* Module::find_parameter(const std::string& name) {
  auto it = find_entry(params_, name);
  return it == params_.end() ? nullptr : it->second.get();
}

const Tensor* Module::find_parameter(const std::string& name) const {
  auto it = find_entry(params_, name);
  return it == params_.end() ? nullptr : it->second.get();
}

Tensor& Module::replace_parameter(const std::string& name, Tensor t, bool requires_grad) {
  Tensor* p = find_parameter(name);
  WEFT_CHECK(p != nullptr, type_name_, ": no parameter '", name, "' to replace");
  prepare_parameter(type_name_, name, t, requires_grad);
  *p = std::move(t);
  return *p;
}

Tensor Module::remove_parameter(const std::string& name) {
  auto it = find_entry(params_, name);
  WEFT_CHECK(it != params_.end(), type_name_, ": no parameter '", name, "' to remove");
  Tensor t = std::move(*it->second);
  params_.erase(it);
  return t;
}

// ---- placement scopes (Note [placement scopes]) ----
namespace {
thread_local int t_placement = -1;
}  // namespace

PlacementScope::PlacementScope(int index) : previous_(t_placement) {
  WEFT_CHECK(index >= 0, "PlacementScope: the index must be non-negative, got ", index);
  t_placement = index;
}
PlacementScope::~PlacementScope() { t_placement = previous_; }
int PlacementScope::current() { return t_placement; }

Module::Module(std::string type_name) : type_name_(std::move(type_name)), placement_(t_placement) {}

// ---- access ----
std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::set<TensorImpl*> seen;  // shared (tied) parameters appear once
  std::function<void(const Module&, const std::string&)> walk = [&](const Module& m, const std::string& prefix) {
    for (auto& [n, p] : m.params_)
      if (p->defined() && seen.insert(p->impl()).second) out.emplace_back(prefix + n, *p);
    if (!recurse) return;
    for (auto& [n, c] : m.children_) walk(*c, prefix + n + ".");
  };
  walk(*this, root_prefix());
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, p] : named_parameters(recurse)) out.push_back(p);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::function<void(const Module&, const std::string&)> walk = [&](const Module& m, const std::string& prefix) {
    for (auto& [n, b] : m.buffers_)
      if (b->defined()) out.emplace_back(prefix + n, *b);
    if (!recurse) return;
    for (auto& [n, c] : m.children_) walk(*c, prefix + n + ".");
  };
  walk(*this, root_prefix());
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, b] : named_buffers(recurse)) out.push_back(b);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const { return children_; }

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (auto& [n, c] : children_) out.push_back(c);
  return out;
}

void Module::collect_named_modules(const std::string& prefix,
                                   std::vector<std::pair<std::string, std::shared_ptr<Module>>>& out) {
  for (auto& [n, c] : children_) {
    std::string name = prefix.empty() ? n : prefix + "." + n;
    out.emplace_back(name, c);
    c->collect_named_modules(name, out);
  }
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules() {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out;
  std::shared_ptr<Module> self;
  try {
    self = shared_from_this();
  } catch (const std::bad_weak_ptr&) {
    self = std::shared_ptr<Module>(this, [](Module*) {});  // not owned by a shared_ptr: non-owning view
  }
  out.emplace_back(name_prefix_, self);
  collect_named_modules(name_prefix_, out);
  return out;
}

int64_t Module::num_parameters(bool trainable_only) const {
  int64_t n = 0;
  for (auto& [name, p] : named_parameters())
    if (!trainable_only || p.requires_grad()) n += p.numel();
  return n;
}

// ---- modes ----
void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

void Module::zero_grad(bool set_to_none) {
  for (auto& p : parameters()) {
    if (set_to_none) {
      p.zero_grad();
      continue;
    }
    Tensor g = p.grad();
    if (g.defined()) {
      NoGradGuard ng;
      g.zero_();
    }
  }
}

void Module::apply(const std::function<void(Module&)>& fn) {
  for (auto& [n, c] : children_) c->apply(fn);
  fn(*this);
}

void Module::to(DType dtype) {
  NoGradGuard ng;
  auto convert = [&](Tensor& t) {
    if (t.defined() && is_floating(t.dtype()) && t.dtype() != dtype) t.impl()->set_data(*t.to(dtype).impl());
  };
  apply([&](Module& m) {
    for (auto& [n, p] : m.params_) {
      convert(*p);
      if (p->grad().defined()) p->set_grad(Tensor());
    }
    for (auto& [n, b] : m.buffers_) convert(*b);
  });
}

void Module::to(Device device) {
  NoGradGuard ng;
  auto move = [&](Tensor& t) {
    if (t.defined() && t.device() != device) t.impl()->set_data(*t.to(device).impl());
  };
  apply([&](Module& m) {
    for (auto& [n, p] : m.params_) {
      move(*p);
      Tensor g = p->grad();
      if (g.defined()) move(g);
    }
    for (auto& [n, b] : m.buffers_) move(*b);
  });
}

// ---- state ----
void Module::collect_state(const std::string& prefix, StateDict& out) const {
  for (auto& [n, p] : params_)
    if (p->defined()) out.insert(prefix + n, p->detach());
  for (auto& [n, b] : buffers_)
    if (b->defined()) out.insert(prefix + n, b->detach());
  for (auto& [n, c] : children_) c->collect_state(prefix + n + ".", out);
}

StateDict Module::state_dict() const {
  StateDict sd;
  collect_state(root_prefix(), sd);
  return sd;
}

Module::LoadResult Module::load_state_dict(const StateDict& sd, bool strict) {
  // Gather this module's slots by full name.
  std::vector<std::pair<std::string, Tensor*>> slots;
  std::function<void(Module&, const std::string&)> walk = [&](Module& m, const std::string& prefix) {
    for (auto& [n, p] : m.params_)
      if (p->defined()) slots.emplace_back(prefix + n, p.get());
    for (auto& [n, b] : m.buffers_)
      if (b->defined()) slots.emplace_back(prefix + n, b.get());
    for (auto& [n, c] : m.children_) walk(*c, prefix + n + ".");
  };
  walk(*this, root_prefix());
  LoadResult res;
  std::vector<std::string> mismatched;
  std::set<std::string> known;
  for (auto& [name, slot] : slots) {
    known.insert(name);
    const Tensor* src = sd.find(name);
    if (!src) {
      res.missing_keys.push_back(name);
      continue;
    }
    if (src->sizes() != slot->sizes())
      mismatched.push_back("'" + name + "': checkpoint shape " + shape_str(src->sizes()) + " vs model shape " +
                           shape_str(slot->sizes()));
  }
  for (auto& [k, v] : sd)
    if (!known.count(k)) res.unexpected_keys.push_back(k);
  bool fail = !mismatched.empty() || (strict && (!res.missing_keys.empty() || !res.unexpected_keys.empty()));
  if (fail) {
    std::ostringstream os;
    os << "load_state_dict: error(s) loading state dict for " << type_name_;
    if (!name_prefix_.empty()) os << " (name prefix '" << name_prefix_ << "')";
    os << ":";
    auto list = [&](const char* what, const std::vector<std::string>& keys) {
      if (keys.empty()) return;
      os << "\n  " << what << ": ";
      for (size_t i = 0; i < keys.size(); ++i)
        os << (i ? ", " : "") << (what[0] == 's' ? "" : "'") << keys[i] << (what[0] == 's' ? "" : "'");
    };
    if (strict) list("missing keys", res.missing_keys);
    if (strict) list("unexpected keys", res.unexpected_keys);
    list("size mismatch", mismatched);
    WEFT_ERROR(os.str());
  }
  NoGradGuard ng;
  for (auto& [name, slot] : slots) {
    const Tensor* src = sd.find(name);
    if (src) slot->copy_(*src);
  }
  return res;
}

// ---- forward and hooks (Note [multi-tensor forward]) ----
RemovableHandle Module::register_forward_pre_hook(ForwardPreHook hook) {
  return pre_hooks_->add(
      [hook = std::move(hook)](Module& m, const Tensors& in) { hook(m, in.empty() ? Tensor() : in[0]); });
}
RemovableHandle Module::register_forward_hook(ForwardHook hook) {
  return hooks_->add([hook = std::move(hook)](Module& m, const Tensors& in, const Tensors& out) {
    hook(m, in.empty() ? Tensor() : in[0], out.empty() ? Tensor() : out[0]);
  });
}
RemovableHandle Module::register_forward_pre_hook_multi(ForwardPreHookMulti hook) {
  return pre_hooks_->add(std::move(hook));
}
RemovableHandle Module::register_forward_hook_multi(ForwardHookMulti hook) { return hooks_->add(std::move(hook)); }

namespace {
// The module whose default forward / forward_multi is bridging to the other
// form on this thread: reaching the other default for the same module means it
// overrides neither.
thread_local const Module* t_bridging = nullptr;

class BridgeGuard {
 public:
  explicit BridgeGuard(const Module* m) : prev_(t_bridging) {
    WEFT_CHECK(t_bridging != m, m->type_name(),
               " overrides neither forward(Tensor) nor forward_multi(Tensors); call its own forward signature");
    t_bridging = m;
  }
  ~BridgeGuard() { t_bridging = prev_; }
  BridgeGuard(const BridgeGuard&) = delete;
  BridgeGuard& operator=(const BridgeGuard&) = delete;

 private:
  const Module* prev_;
};
}  // namespace

Tensor Module::forward(const Tensor& input) {
  BridgeGuard guard(this);
  Tensors out = forward_multi({input});
  WEFT_CHECK(out.size() == 1, type_name_, ": forward_multi returned ", out.size(),
             " tensors where forward(Tensor) returns one; call it as operator()(Tensors) to get them all");
  return out[0];
}

Tensors Module::forward_multi(const Tensors& inputs) {
  WEFT_CHECK(inputs.size() == 1, type_name_, ": forward_multi got ", inputs.size(), " tensors, but ", type_name_,
             " takes one tensor (it overrides forward(Tensor) only; override forward_multi to take several)");
  BridgeGuard guard(this);
  return {forward(inputs[0])};
}

Tensors Module::call_with_hooks(const Tensors& inputs, const std::function<Tensors()>& fn) {
  for (auto& h : pre_hooks_->snapshot()) h(*this, inputs);
  Tensors out = fn();
  for (auto& h : hooks_->snapshot()) h(*this, inputs, out);
  return out;
}

Tensor Module::call_with_hooks(const Tensor& input, const std::function<Tensor()>& fn) {
  if (pre_hooks_->empty() && hooks_->empty()) return fn();
  const Tensors in{input};
  for (auto& h : pre_hooks_->snapshot()) h(*this, in);
  Tensor out = fn();
  if (!hooks_->empty()) {
    const Tensors outs{out};
    for (auto& h : hooks_->snapshot()) h(*this, in, outs);
  }
  return out;
}

Tensor Module::operator()(const Tensor& input) {
  return call_with_hooks(input, [&] { return forward(input); });
}

Tensors Module::operator()(const Tensors& inputs) {
  return call_with_hooks(inputs, [&] { return forward_multi(inputs); });
}

std::string Module::repr_indented(int indent) const {
  std::ostringstream os;
  os << type_name_ << "(" << extra_repr();
  if (!children_.empty()) {
    os << "\n";
    for (auto& [n, c] : children_)
      os << std::string(indent + 2, ' ') << "(" << n << "): " << c->repr_indented(indent + 2) << "\n";
    os << std::string(indent, ' ');
  }
  os << ")";
  return os.str();
}

std::string Module::repr() const { return repr_indented(0); }

}  // namespace weft::nn
