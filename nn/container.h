// Containers: Sequential (indexable, children named "0", "1", ...) and ModuleList.
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
  void push_back(std::shared_ptr<Module> m);
  size_t size() const { return modules_.size(); }
  std::shared_ptr<Module> operator[](int64_t index) const;
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

}  // namespace weft::nn
