// Shared helpers for the optim tests: the PyTorch golden file written by
// tools/golden/make_optim_golden.py, and fresh copies of its parameters.
#pragma once

#include <map>
#include <string>

#include "io/safetensors.h"
#include "tests/testing.h"

namespace weft::testing {

inline const std::map<std::string, Tensor>& optim_golden() {
  static const std::map<std::string, Tensor> g =
      io::load_safetensors("tests/optim/golden/optim_golden.safetensors").tensors;
  return g;
}

inline const Tensor& golden(const std::string& key) {
  auto it = optim_golden().find(key);
  if (it == optim_golden().end()) throw std::runtime_error("golden file has no tensor " + key);
  return it->second;
}

// A fresh leaf parameter holding golden tensor `key`, converted to `dtype`.
inline Tensor golden_param(const std::string& key, DType dtype = DType::Float32) {
  Tensor p = golden(key).to(dtype).clone();
  p.requires_grad_(true);
  return p;
}

// Largest |a - b| / max(|b|, floor) over the elements.
inline double max_rel_diff(const Tensor& a, const Tensor& b, double floor = 1e-2) {
  auto va = values(a), vb = values(b);
  double worst = 0;
  for (size_t i = 0; i < va.size(); ++i)
    worst = std::max(worst, std::abs(va[i] - vb[i]) / std::max(std::abs(vb[i]), floor));
  return worst;
}

}  // namespace weft::testing
