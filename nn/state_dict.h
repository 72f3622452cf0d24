// nn::StateDict: an insertion-ordered name -> tensor map, what Module::state_dict()
// returns and load_state_dict() takes.
//
// Contract: keys are unique and keep their first insertion's position (insert
// replaces the value of an existing key in place). Lookups are by hash. A
// StateDict converts both ways to the std::map that io::save_safetensors takes
// and io::load_safetensors returns, so
//   io::save_safetensors(path, model->state_dict());
//   model->load_state_dict(io::load_safetensors(path).tensors);
// read as in PyTorch. operator[] and at() never insert: a missing key is an
// error naming it (libtorch's OrderedDict does the same); use insert() to add.
#pragma once

#include <initializer_list>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace weft::nn {

class StateDict {
 public:
  using Item = std::pair<std::string, Tensor>;

  StateDict() = default;
  // {{"w", w}, {"b", b}}; a key given twice is an error.
  StateDict(std::initializer_list<Item> items);
  // From a map (io::load_safetensors(path).tensors): the map's (sorted) key order.
  StateDict(const std::map<std::string, Tensor>& tensors);  // NOLINT(google-explicit-constructor)
  // From name/tensor pairs (Module::named_parameters()); a key given twice is an error.
  explicit StateDict(const std::vector<Item>& items);

  // Adds `key`, or replaces its value (keeping its position).
  void insert(const std::string& key, const Tensor& value);
  // Removes `key`; returns whether it was there.
  bool erase(const std::string& key);
  // Inserts every item of `other` (PyTorch's dict.update).
  void update(const StateDict& other);

  bool contains(const std::string& key) const { return index_.count(key) != 0; }
  const Tensor* find(const std::string& key) const;
  const Tensor& at(const std::string& key) const;  // error names the key
  Tensor& at(const std::string& key);
  const Tensor& operator[](const std::string& key) const { return at(key); }
  Tensor& operator[](const std::string& key) { return at(key); }

  const std::vector<Item>& items() const { return items_; }
  std::vector<std::string> keys() const;
  std::vector<Tensor> values() const;
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

  // For io::save_safetensors and other map-taking APIs.
  std::map<std::string, Tensor> to_map() const;
  operator std::map<std::string, Tensor>() const { return to_map(); }  // NOLINT(google-explicit-constructor)

 private:
  std::vector<Item> items_;
  std::unordered_map<std::string, size_t> index_;  // key -> position in items_
};

}  // namespace weft::nn
