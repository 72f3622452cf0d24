#include "nn/module.h"

#include <set>
#include <sstream>

#include "core/autograd_meta.h"

namespace weft::nn {

// ---- StateDict ----
void StateDict::insert(const std::string& key, const Tensor& value) {
  for (auto& [k, v] : items_)
    if (k == key) {
      v = value;
      return;
    }
  items_.emplace_back(key, value);
}
bool StateDict::contains(const std::string& key) const { return find(key) != nullptr; }
const Tensor* StateDict::find(const std::string& key) const {
  for (auto& [k, v] : items_)
    if (k == key) return &v;
  return nullptr;
}
const Tensor& StateDict::at(const std::string& key) const {
  const Tensor* t = find(key);
  WEFT_CHECK(t != nullptr, "state dict has no key '", key, "'");
  return *t;
}
std::vector<std::string> StateDict::keys() const {
  std::vector<std::string> out;
  for (auto& [k, v] : items_) out.push_back(k);
  return out;
}

// ---- registration ----
namespace {
void check_name(const std::string& owner, const std::string& kind, const std::string& name) {
  WEFT_CHECK(!name.empty() && name.find('.') == std::string::npos, owner, ": ", kind, " name '", name,
             "' must be non-empty and contain no '.'");
}
}  // namespace

Tensor& Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  check_name(type_name_, "parameter", name);
  for (auto& [n, p] : params_) WEFT_CHECK(n != name, type_name_, ": parameter '", name, "' already registered");
  if (t.defined()) {
    WEFT_CHECK(t.is_leaf(), type_name_, ": parameter '", name, "' must be a leaf tensor (detach it first)");
    if (requires_grad) t.requires_grad_(true);
  }
  params_.emplace_back(name, std::make_unique<Tensor>(std::move(t)));
  return *params_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor t) {
  check_name(type_name_, "buffer", name);
  for (auto& [n, b] : buffers_) WEFT_CHECK(n != name, type_name_, ": buffer '", name, "' already registered");
  buffers_.emplace_back(name, std::make_unique<Tensor>(std::move(t)));
  return *buffers_.back().second;
}

void Module::register_child(const std::string& name, std::shared_ptr<Module> m) {
  check_name(type_name_, "submodule", name);
  WEFT_CHECK(m != nullptr, type_name_, ": submodule '", name, "' is null");
  for (auto& [n, c] : children_) WEFT_CHECK(n != name, type_name_, ": submodule '", name, "' already registered");
  children_.emplace_back(name, std::move(m));
}

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
  walk(*this, "");
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
  walk(*this, "");
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
  out.emplace_back("", self);
  collect_named_modules("", out);
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
  collect_state("", sd);
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
  walk(*this, "");
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
    os << "load_state_dict: error(s) loading state dict for " << type_name_ << ":";
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

// ---- forward and hooks ----
RemovableHandle Module::register_forward_pre_hook(ForwardPreHook hook) { return pre_hooks_->add(std::move(hook)); }
RemovableHandle Module::register_forward_hook(ForwardHook hook) { return hooks_->add(std::move(hook)); }

Tensor Module::forward(const Tensor&) {
  WEFT_ERROR(type_name_, " has no forward(Tensor); call its own forward signature");
}

Tensor Module::call_with_hooks(const Tensor& input, const std::function<Tensor()>& fn) {
  for (auto& h : pre_hooks_->snapshot()) h(*this, input);
  Tensor out = fn();
  for (auto& h : hooks_->snapshot()) h(*this, input, out);
  return out;
}

Tensor Module::operator()(const Tensor& input) {
  return call_with_hooks(input, [&] { return forward(input); });
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
