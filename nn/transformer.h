// Attention and a pre-norm transformer block: enough to build a GPT-2-style model.
#pragma once

#include <memory>

#include "nn/container.h"
#include "nn/layers.h"

namespace weft::nn {

// Multi-head self-attention with a fused qkv projection (GPT-2's c_attn/c_proj).
// forward: (B, T, C) -> (B, T, C); causal masking when `causal`.
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, bool causal = true, double dropout = 0.0, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<Linear> qkv;   // (C) -> (3C)
  std::shared_ptr<Linear> proj;  // (C) -> (C)
  int64_t embed_dim, num_heads;
  bool causal;
  double dropout_p;
};

// x + attn(ln1(x)); then x + mlp(ln2(x)) with mlp = Linear(C, 4C), GELU(tanh), Linear(4C, C), Dropout.
// The MLP runs as one fused op, mlp_gelu_tanh (core/nn_ops.h: the GELU inside the
// GEMMs on the CPU), while mlp still holds those four modules with no forward
// hooks on it or them; otherwise module by module.
class TransformerBlock : public Module {
 public:
  TransformerBlock(int64_t embed_dim, int64_t num_heads, double dropout = 0.0, int64_t mlp_ratio = 4);
  Tensor forward(const Tensor& x) override;  // (B, T, C) -> (B, T, C)
  Tensor mlp_forward(const Tensor& x);       // mlp(x), fused where it can be
  std::shared_ptr<LayerNorm> ln1, ln2;
  std::shared_ptr<MultiheadAttention> attn;
  std::shared_ptr<Sequential> mlp;
};

}  // namespace weft::nn
