// A small language model whose output head uses the token embedding's weight
// (Note [tied parameters]), for the tied-parameter tests in threads and MPI.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/ops.h"
#include "core/rng.h"
#include "nn/nn.h"

namespace weft::parallel::pipe {

constexpr int64_t kVocab = 7, kDim = 5, kSeq = 3;

// logits = x @ weight^T with a weight given at construction (the embedding's
// own tensor for true tying, or a copy).
class TiedHead : public nn::Module {
 public:
  explicit TiedHead(Tensor w) : Module("TiedHead") { weight = register_parameter("weight", std::move(w)); }
  Tensor forward(const Tensor& x) override { return matmul(x, weight.t()); }  // (B, T, D) -> (B, T, V)
  Tensor weight;                                                              // (V, D)
};

// 8 children: Embedding, (Linear, Tanh) x 3, TiedHead. shared: the head uses
// the embedding's tensor; else a copy with the same values.
inline std::shared_ptr<nn::Sequential> make_lm(bool shared, uint64_t seed = 3) {
  manual_seed(seed);
  auto m = std::make_shared<nn::Sequential>();
  auto emb = std::make_shared<nn::Embedding>(kVocab, kDim);
  m->push_back(emb);
  for (int i = 0; i < 3; ++i) {
    m->push_back(std::make_shared<nn::Linear>(kDim, kDim));
    m->push_back(std::make_shared<nn::Tanh>());
  }
  Tensor w = shared ? emb->weight : emb->weight.detach().clone().requires_grad_(true);
  m->push_back(std::make_shared<TiedHead>(w));
  return m;
}

inline const std::vector<std::vector<std::string>> kTied = {{"0.weight", "7.weight"}};

inline Tensor tokens(int64_t rows) { return randint(0, kVocab, {rows, kSeq}, DType::Int64); }

}  // namespace weft::parallel::pipe
