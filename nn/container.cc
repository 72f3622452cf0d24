// Sequential (one- and multi-tensor chains, name-keeping slices), ModuleList,
// ModuleDict, ParameterList and ParameterDict.
#include "nn/container.h"

#include <algorithm>
#include <sstream>

namespace weft::nn {

namespace {
int64_t wrap_index(const char* what, int64_t index, size_t size, const char* noun = "modules") {
  int64_t n = static_cast<int64_t>(size);
  WEFT_CHECK(index >= -n && index < n, what, ": index ", index, " is out of range for ", n, " ", noun);
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

ModuleList::ModuleList(std::vector<std::shared_ptr<Module>> modules) : Module("ModuleList") { extend(modules); }

void ModuleList::extend(const std::vector<std::shared_ptr<Module>>& modules) {
  for (const auto& m : modules) push_back(m);
}

void ModuleList::push_back(std::shared_ptr<Module> m) {
  register_child(std::to_string(modules_.size()), m);
  modules_.push_back(std::move(m));
}

std::shared_ptr<Module> ModuleList::operator[](int64_t index) const {
  return modules_[wrap_index("ModuleList", index, modules_.size())];
}

// ---- ModuleDict ----

namespace {
template <class Named>
std::string key_list(const Named& named) {
  std::ostringstream os;
  for (size_t i = 0; i < named.size(); ++i) os << (i ? ", " : "") << "'" << named[i].first << "'";
  return named.empty() ? "none" : os.str();
}
}  // namespace

ModuleDict::ModuleDict(const NamedModules& modules) : Module("ModuleDict") { update(modules); }

void ModuleDict::insert(const std::string& key, std::shared_ptr<Module> m) {
  if (contains(key)) {
    replace_child(key, std::move(m));
  } else {
    register_child(key, std::move(m));
  }
}

void ModuleDict::update(const NamedModules& modules) {
  for (const auto& [key, m] : modules) insert(key, m);
}

std::shared_ptr<Module> ModuleDict::operator[](const std::string& key) const {
  const NamedModules named = named_children();
  for (const auto& [k, m] : named)
    if (k == key) return m;
  WEFT_ERROR("ModuleDict: no key '", key, "' (keys: ", key_list(named), ")");
}

void ModuleDict::wrong_type(const std::string& key) const {
  WEFT_ERROR("ModuleDict: the module under '", key, "' is a ", (*this)[key]->type_name(), ", not the type asked for");
}

bool ModuleDict::contains(const std::string& key) const {
  for (const auto& [k, m] : named_children())
    if (k == key) return true;
  return false;
}

std::shared_ptr<Module> ModuleDict::pop(const std::string& key) {
  (void)(*this)[key];  // the error lists the keys
  return remove_child(key);
}

void ModuleDict::clear() {
  for (const auto& key : keys()) remove_child(key);
}

std::vector<std::string> ModuleDict::keys() const {
  std::vector<std::string> out;
  for (const auto& [k, m] : named_children()) out.push_back(k);
  return out;
}

// ---- ParameterList ----

namespace {
// "name: [3, 4] Float32" for each parameter, on one line (the repr's parentheses).
std::string describe(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::ostringstream os;
  for (size_t i = 0; i < named.size(); ++i) {
    const Tensor& t = named[i].second;
    os << (i ? ", " : "") << named[i].first << ": " << shape_str(t.sizes()) << " " << t.dtype();
    if (t.device().is_cuda()) os << " on " << t.device();
  }
  return os.str();
}
}  // namespace

ParameterList::ParameterList(std::vector<Tensor> params) : Module("ParameterList") { extend(std::move(params)); }

Tensor& ParameterList::append(Tensor t, bool requires_grad) {
  WEFT_CHECK(t.defined(), "ParameterList: append got an undefined tensor (index ", size_, ")");
  Tensor& p = register_parameter(std::to_string(size_), std::move(t), requires_grad);
  ++size_;
  return p;
}

void ParameterList::extend(std::vector<Tensor> params) {
  for (auto& t : params) append(std::move(t));
}

Tensor& ParameterList::operator[](int64_t index) {
  return *find_parameter(std::to_string(wrap_index("ParameterList", index, size_, "parameters")));
}

const Tensor& ParameterList::operator[](int64_t index) const {
  return *find_parameter(std::to_string(wrap_index("ParameterList", index, size_, "parameters")));
}

Tensor& ParameterList::set(int64_t index, Tensor t, bool requires_grad) {
  const int64_t i = wrap_index("ParameterList", index, size_, "parameters");
  WEFT_CHECK(t.defined(), "ParameterList: set got an undefined tensor (index ", i, ")");
  return replace_parameter(std::to_string(i), std::move(t), requires_grad);
}

std::string ParameterList::extra_repr() const { return describe(named_parameters(false)); }

// ---- ParameterDict ----

ParameterDict::ParameterDict(const std::vector<std::pair<std::string, Tensor>>& params) : Module("ParameterDict") {
  update(params);
}

Tensor& ParameterDict::insert(const std::string& key, Tensor t, bool requires_grad) {
  WEFT_CHECK(t.defined(), "ParameterDict: the tensor for '", key, "' is undefined");
  if (contains(key)) return replace_parameter(key, std::move(t), requires_grad);
  return register_parameter(key, std::move(t), requires_grad);
}

void ParameterDict::update(const std::vector<std::pair<std::string, Tensor>>& params) {
  for (const auto& [key, t] : params) insert(key, t);
}

Tensor& ParameterDict::operator[](const std::string& key) {
  Tensor* p = find_parameter(key);
  WEFT_CHECK(p != nullptr, "ParameterDict: no key '", key, "' (keys: ", key_list(named_parameters(false)), ")");
  return *p;
}

const Tensor& ParameterDict::operator[](const std::string& key) const {
  const Tensor* p = find_parameter(key);
  WEFT_CHECK(p != nullptr, "ParameterDict: no key '", key, "' (keys: ", key_list(named_parameters(false)), ")");
  return *p;
}

bool ParameterDict::contains(const std::string& key) const { return find_parameter(key) != nullptr; }

Tensor ParameterDict::pop(const std::string& key) {
  (void)(*this)[key];  // the error lists the keys
  return remove_parameter(key);
}

void ParameterDict::clear() {
  for (const auto& key : keys()) remove_parameter(key);
}

std::vector<std::string> ParameterDict::keys() const {
  std::vector<std::string> out;
  for (const auto& [k, t] : named_parameters(false)) out.push_back(k);
  return out;
}

std::string ParameterDict::extra_repr() const { return describe(named_parameters(false)); }

}  // namespace weft::nn
