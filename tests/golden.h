// Golden files: safetensors files that a committed script (tools/golden/)
// writes from a real peer such as PyTorch, for tests to compare against.
//
// Contract: a Golden reads its file once; a key it lacks is an error naming
// the file and the key, so a test never compares against nothing. Tests
// usually keep one in a function-local static.
#pragma once

#include <stdexcept>
#include <string>

#include "io/safetensors.h"

namespace weft::testing {

class Golden {
 public:
  explicit Golden(std::string path) : path_(std::move(path)), file_(io::load_safetensors(path_)) {}

  // The tensor stored under `key`.
  const Tensor& operator()(const std::string& key) const { return find(file_.tensors, "tensor", key); }
  bool has(const std::string& key) const { return file_.tensors.count(key) != 0; }
  // A `__metadata__` entry.
  const std::string& meta(const std::string& key) const { return find(file_.metadata, "metadata entry", key); }
  const io::SafetensorsFile& file() const { return file_; }

 private:
  template <typename Map>
  const typename Map::mapped_type& find(const Map& m, const char* what, const std::string& key) const {
    auto it = m.find(key);
    if (it == m.end()) throw std::runtime_error("golden file " + path_ + " has no " + what + " " + key);
    return it->second;
  }
  std::string path_;
  io::SafetensorsFile file_;
};

}  // namespace weft::testing
