#include "nn/container.h"

namespace weft::nn {

namespace {
int64_t wrap_index(const char* what, int64_t index, size_t size) {
  int64_t n = static_cast<int64_t>(size);
  WEFT_CHECK(index >= -n && index < n, what, ": index ", index, " is out of range for ", n, " modules");
  return index < 0 ? index + n : index;
}
}  // namespace

Sequential::Sequential(std::vector<std::shared_ptr<Module>> modules) : Module("Sequential") {
  for (auto& m : modules) push_back(std::move(m));
}

void Sequential::push_back(std::shared_ptr<Module> m) { push_back(std::to_string(modules_.size()), std::move(m)); }

void Sequential::push_back(const std::string& name, std::shared_ptr<Module> m) {
  register_child(name, m);
  modules_.push_back(std::move(m));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (auto& m : modules_) h = (*m)(h);
  return h;
}

std::shared_ptr<Module> Sequential::operator[](int64_t index) const {
  return modules_[wrap_index("Sequential", index, modules_.size())];
}

std::shared_ptr<Sequential> Sequential::slice(int64_t begin, int64_t end) const {
  int64_t n = static_cast<int64_t>(modules_.size());
  WEFT_CHECK(0 <= begin && begin <= end && end <= n, "Sequential::slice: [", begin, ", ", end,
             ") is not a valid range of ", n, " modules");
  auto out = std::make_shared<Sequential>();
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
