// nn::StateDict (nn/state_dict.h).
#include "nn/state_dict.h"

#include "core/error.h"

namespace weft::nn {

StateDict::StateDict(std::initializer_list<Item> items) : StateDict(std::vector<Item>(items)) {}

StateDict::StateDict(const std::map<std::string, Tensor>& tensors) {
  for (const auto& [k, v] : tensors) insert(k, v);
}

StateDict::StateDict(const std::vector<Item>& items) {
  for (const auto& [k, v] : items) {
    WEFT_CHECK(!contains(k), "StateDict: key '", k, "' given twice");
    insert(k, v);
  }
}

void StateDict::insert(const std::string& key, const Tensor& value) {
  auto [it, added] = index_.emplace(key, items_.size());
  if (added) items_.emplace_back(key, value);
  else items_[it->second].second = value;
}

bool StateDict::erase(const std::string& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  const size_t pos = it->second;
  items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(pos));
  index_.erase(it);
  for (auto& [k, i] : index_)
    if (i > pos) --i;
  return true;
}

void StateDict::update(const StateDict& other) {
  for (const auto& [k, v] : other) insert(k, v);
}

const Tensor* StateDict::find(const std::string& key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &items_[it->second].second;
}

const Tensor& StateDict::at(const std::string& key) const {
  const Tensor* t = find(key);
  WEFT_CHECK(t != nullptr, "state dict has no key '", key, "' (", items_.size(), " keys)");
  return *t;
}

Tensor& StateDict::at(const std::string& key) { return const_cast<Tensor&>(std::as_const(*this).at(key)); }

std::vector<std::string> StateDict::keys() const {
  std::vector<std::string> out;
  out.reserve(items_.size());
  for (const auto& [k, v] : items_) out.push_back(k);
  return out;
}

std::vector<Tensor> StateDict::values() const {
  std::vector<Tensor> out;
  out.reserve(items_.size());
  for (const auto& [k, v] : items_) out.push_back(v);
  return out;
}

std::map<std::string, Tensor> StateDict::to_map() const { return {items_.begin(), items_.end()}; }

}  // namespace weft::nn
