// Containers: Sequential (indexable, children named "0", "1", ...) and ModuleList.
#pragma once

#include <memory>
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
  void push_back(std::shared_ptr<Module> m);
  // Adds a child under an explicit name (keeps numbering for unnamed ones).
  void push_back(const std::string& name, std::shared_ptr<Module> m);
  Tensor forward(const Tensor& x) override;
  size_t size() const { return modules_.size(); }
  // Negative indices count from the end; out of range is an error naming the size.
  std::shared_ptr<Module> operator[](int64_t index) const;
  // A new Sequential sharing modules [begin, end) (the pipeline partitioner uses it).
  std::shared_ptr<Sequential> slice(int64_t begin, int64_t end) const;
  const std::vector<std::shared_ptr<Module>>& modules() const { return modules_; }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
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
