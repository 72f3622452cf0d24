// Sequential (one- and multi-tensor chains, name-keeping slices) and ModuleList.
#include "nn/container.h"

#include <algorithm>

namespace weft::nn {

namespace {
int64_t wrap_index(const char* what, int64_t index, size_t size) {
  int64_t n = static_cast<int64_t>(size);
  WEFT_CHECK(index >= -n && index < n, what, ": index ", index, " is out of range for ", n, " modules");
  return index < 0 ? index + n : index;
}

// The value of a child name made of digits only (at most 18 of them), else -1.
int64_t numeric_name(const std::string& name) {
  if (name.empty() || name.size() > 18) return -1;
  for (char c : name)
    if (c < '0' || c > '9') return -1;
  return std::stoll(name);
}
}  // namespace

Sequential::Sequential(std::vector<std::shared_ptr<Module>> modules) : Module("Sequential") {
  for (auto& m : modules) push_back(std::move(m));
}

std::shared_ptr<Sequential> Sequential::of_named(std::vector<std::pair<std::string, std::shared_ptr<Module>>> modules) {
  auto out = std::make_shared<Sequential>();
  for (auto& [name, m] : modules) out->push_back(name, std::move(m));
  return out;
}

void Sequential::push_back(std::shared_ptr<Module> m) { push_back(std::to_string(next_index_), std::move(m)); }

void Sequential::push_back(const std::string& name, std::shared_ptr<Module> m) {
  register_child(name, m);
  modules_.push_back(std::move(m));
  next_index_ = std::max(next_index_, numeric_name(name) + 1);
}

Tensor Sequential::forward(const Tensor& x) {
  Tensors out = forward_multi({x});
  WEFT_CHECK(out.size() == 1, "Sequential: its last module returned ", out.size(),
             " tensors where forward(Tensor) returns one; call it as operator()(Tensors) to get them all");
  return out[0];
}

Tensors Sequential::forward_multi(const Tensors& xs) {
  Tensors h = xs;
  for (auto& m : modules_) h = (*m)(h);
  return h;
}

std::shared_ptr<Module> Sequential::operator[](int64_t index) const {
  return modules_[wrap_index("Sequential", index, modules_.size())];
}

std::shared_ptr<Sequential> Sequential::slice(int64_t begin, int64_t end) const {
  return slice(begin, end, name_prefix());
}

std::shared_ptr<Sequential> Sequential::slice(int64_t begin, int64_t end, const std::string& prefix) const {
  int64_t n = static_cast<int64_t>(modules_.size());
  WEFT_CHECK(0 <= begin && begin <= end && end <= n, "Sequential::slice: [", begin, ", ", end,
             ") is not a valid range of ", n, " modules");
  auto out = std::make_shared<Sequential>();
  out->set_name_prefix(prefix);
  auto named = named_children();
  for (int64_t i = begin; i < end; ++i) out->push_back(named[i].first, modules_[i]);
  return out;
}

void ModuleList::push_back(std::shared_ptr<Module> m) {
  register_child(std::to_string(modules_.size()), m);
  modules_.push_back(std::move(m));
}

std::shared_ptr<Module> ModuleList::operator[](int64_t index) const {
  return modules_[wrap_index("ModuleList", index, modules_.size())];
}

}  // namespace weft::nn
