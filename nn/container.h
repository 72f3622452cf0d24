// Containers: Sequential (indexable, children named "0", "1", ...),
// ModuleList, ModuleDict, ParameterList and ParameterDict (PyTorch's).
//
// ModuleDict and ParameterDict keep their entries in insertion order under
// their keys, which are the entries' names ("heads.cls.weight", "scales.
// alpha"); inserting an existing key replaces the entry in place (PyTorch's
// d[key] = v), pop removes it. ParameterList names its parameters "0", "1",
// .... Tensors given to ParameterList and ParameterDict become parameters:
// leaves that require grad (PyTorch wraps them in nn.Parameter). A key that
// is not there is an error listing the keys there are; keys are non-empty and
// hold no '.'. The containers have no forward: index them.
//
// Sequential passes one tensor, or several (Note [multi-tensor forward] in
// nn/module.h), from each child to the next: (*seq)(x) and (*seq)(Tensors{x,
// mask}) run the same chain, each child called through its operator()(Tensors)
// so its hooks run.
//
// Sequential::slice keeps each child under its name in the original ("3", "4",
// not "0", "1"; PyTorch's seq[3:5] does the same) and the original's name
// prefix, or the one given (Note [name prefix] in nn/module.h). So a slice's
// parameter names, and its state dict keys, are the whole model's:
//   auto stage = gpt->h->slice(3, 5, "h");   // named_parameters(): "h.3.ln1.weight", ...
//   auto stage = Sequential::of_named({{"h", gpt->h->slice(3, 6)}, {"ln_f", gpt->ln_f}});
//                                           // "h.3....", ..., "ln_f.weight", via the child name "h"
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/module.h"

namespace weft::nn {

class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}
  explicit Sequential(std::vector<std::shared_ptr<Module>> modules);
  template <typename... M>
  static std::shared_ptr<Sequential> of(std::shared_ptr<M>... modules) {
    return std::make_shared<Sequential>(std::vector<std::shared_ptr<Module>>{modules...});
  }
  // Children under explicit names, in order (PyTorch's Sequential(OrderedDict)).
  static std::shared_ptr<Sequential> of_named(std::vector<std::pair<std::string, std::shared_ptr<Module>>> modules);
  // Adds a child named one past the largest numeric child name ("0" when there
  // is none): a slice holding "3", "4" names the next one "5".
  void push_back(std::shared_ptr<Module> m);
  // Adds a child under an explicit name (keeps numbering for unnamed ones).
  void push_back(const std::string& name, std::shared_ptr<Module> m);
  Tensor forward(const Tensor& x) override;
  Tensors forward_multi(const Tensors& xs) override;
  size_t size() const { return modules_.size(); }
  // Positional (a slice's [0] is its first child, whatever its name). Negative
  // indices count from the end; out of range is an error naming the size.
  std::shared_ptr<Module> operator[](int64_t index) const;
  // A new Sequential sharing modules [begin, end) under their names here, with
  // this Sequential's name prefix (the pipeline partitioner uses it).
  std::shared_ptr<Sequential> slice(int64_t begin, int64_t end) const;
  // The same with the name prefix `prefix`: this Sequential's path in the whole
  // model ("h" for a GPT's blocks), so the slice's names are the model's.
  std::shared_ptr<Sequential> slice(int64_t begin, int64_t end, const std::string& prefix) const;
  const std::vector<std::shared_ptr<Module>>& modules() const { return modules_; }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
  int64_t next_index_ = 0;  // one past the largest numeric child name
};

class ModuleList : public Module {
 public:
  ModuleList() : Module("ModuleList") {}
  explicit ModuleList(std::vector<std::shared_ptr<Module>> modules);
  void push_back(std::shared_ptr<Module> m);
  void extend(const std::vector<std::shared_ptr<Module>>& modules);
  size_t size() const { return modules_.size(); }
  std::shared_ptr<Module> operator[](int64_t index) const;
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

using NamedModules = std::vector<std::pair<std::string, std::shared_ptr<Module>>>;

class ModuleDict : public Module {
 public:
  ModuleDict() : Module("ModuleDict") {}
  explicit ModuleDict(const NamedModules& modules);
  // Adds `key`, or replaces the module under it in place (PyTorch's d[key] = m).
  void insert(const std::string& key, std::shared_ptr<Module> m);
  void update(const NamedModules& modules);
  std::shared_ptr<Module> operator[](const std::string& key) const;
  // The module under `key` as an M; an error naming the key and the module's
  // type when it is not one.
  template <typename M>
  std::shared_ptr<M> get(const std::string& key) const {
    auto m = std::dynamic_pointer_cast<M>((*this)[key]);
    if (!m) wrong_type(key);
    return m;
  }
  bool contains(const std::string& key) const;
  std::shared_ptr<Module> pop(const std::string& key);
  void clear();
  size_t size() const { return named_children().size(); }
  std::vector<std::string> keys() const;
  NamedModules items() const { return named_children(); }
  std::vector<std::shared_ptr<Module>> values() const { return children(); }

 private:
  [[noreturn]] void wrong_type(const std::string& key) const;
};

class ParameterList : public Module {
 public:
  ParameterList() : Module("ParameterList") {}
  explicit ParameterList(std::vector<Tensor> params);
  // Registers `t` under the next index and returns its handle.
  Tensor& append(Tensor t, bool requires_grad = true);
  void extend(std::vector<Tensor> params);
  // Negative indices count from the end; out of range is an error naming the size.
  Tensor& operator[](int64_t index);
  const Tensor& operator[](int64_t index) const;
  // Replaces the parameter at `index` (PyTorch's l[i] = p); the handle stays.
  Tensor& set(int64_t index, Tensor t, bool requires_grad = true);
  size_t size() const { return size_; }
  std::string extra_repr() const override;

 private:
  size_t size_ = 0;
};

class ParameterDict : public Module {
 public:
  ParameterDict() : Module("ParameterDict") {}
  explicit ParameterDict(const std::vector<std::pair<std::string, Tensor>>& params);
  // Adds `key`, or replaces the parameter under it in place; returns its handle.
  Tensor& insert(const std::string& key, Tensor t, bool requires_grad = true);
  void update(const std::vector<std::pair<std::string, Tensor>>& params);
  Tensor& operator[](const std::string& key);
  const Tensor& operator[](const std::string& key) const;
  bool contains(const std::string& key) const;
  Tensor pop(const std::string& key);
  void clear();
  size_t size() const { return named_parameters(false).size(); }
  std::vector<std::string> keys() const;
  std::string extra_repr() const override;
};

}  // namespace weft::nn
