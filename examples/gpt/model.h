// The GPT example's model: GPT-2-style, as an nn::Sequential whose children
// are pipeline-friendly stages, so DistributedModel can split it anywhere:
//
//   "0"        GptEmbedding: token + learned position embedding, dropout   (B, T) int64 -> (B, T, C)
//   "1".."L"   nn::TransformerBlock: pre-norm causal attention and MLP       (B, T, C) -> (B, T, C)
//   "L+1"      nn::LayerNorm (the final norm)                                (B, T, C) -> (B, T, C)
//   "L+2"      GptHead: logits = x W^T, no bias                              (B, T, C) -> (B, T, 256)
//
// Contract:
// - make_gpt(config) initialises as GPT-2 does, from the default generator:
//   linear and token-embedding weights N(0, 0.02), position embeddings
//   N(0, 0.01), biases 0, LayerNorms (1, 0), and the residual projections
//   (attn.proj, mlp.2) N(0, 0.02 / sqrt(2 L)).
// - Tied head (config.tied): the head's weight is the token embedding's tensor
//   itself ("0.tok.weight" and "<L+2>.weight" name one tensor; the model's
//   named_parameters() lists it once). A pipeline stage holding the head in
//   another process holds that process's tensor, a copy: tied_groups(config)
//   names the pair for PipeOptions::tied so the stages' gradients are summed
//   (Note [tied parameters]); it is empty when untied. Untied: the head has
//   its own weight, N(0, 0.02).
// - check_config: every size positive, dim divisible by heads, dropout in
//   [0, 1); errors name the flag.
// - parameter_count(config): what named_parameters() holds, computed from the
//   sizes (tied: the head's weight not counted twice).
// - lm_loss(logits (B, T, V), targets (B, T)): mean cross-entropy over tokens.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/nn.h"

namespace weft::examples::gpt {

struct GptConfig {
  int64_t vocab = 256;
  int64_t context = 128;
  int64_t layers = 4;
  int64_t heads = 4;
  int64_t dim = 128;
  double dropout = 0.0;
  bool tied = true;
};

void check_config(const GptConfig& c);
// "4 layers, 4 heads, dim 192, context 128, tied head, dropout 0"
std::string describe(const GptConfig& c);

class GptEmbedding : public nn::Module {
 public:
  GptEmbedding(int64_t vocab, int64_t context, int64_t dim, double dropout);
  Tensor forward(const Tensor& idx) override { return embed(idx, 0); }  // (B, T) int64 -> (B, T, C)
  // Tokens at positions offset .. offset + T - 1 (for incremental decoding).
  Tensor embed(const Tensor& idx, int64_t offset);
  std::shared_ptr<nn::Embedding> tok;  // weight (V, C)
  std::shared_ptr<nn::Embedding> pos;  // weight (context, C)
  std::shared_ptr<nn::Dropout> drop;
  int64_t context;
};

class GptHead : public nn::Module {
 public:
  explicit GptHead(Tensor weight);  // (V, C); the embedding's for a tied head
  Tensor forward(const Tensor& x) override { return linear(x, weight, Tensor()); }  // (B, T, C) -> (B, T, V)
  Tensor weight;
};

std::shared_ptr<nn::Sequential> make_gpt(const GptConfig& c);
std::vector<std::vector<std::string>> tied_groups(const GptConfig& c);
int64_t parameter_count(const GptConfig& c);

// The model's parts by position (as make_gpt builds them).
GptEmbedding& embedding_of(const nn::Sequential& gpt);
nn::TransformerBlock& block_of(const nn::Sequential& gpt, int64_t i);  // i in [0, layers)
nn::LayerNorm& final_norm_of(const nn::Sequential& gpt);
GptHead& head_of(const nn::Sequential& gpt);

Tensor lm_loss(const Tensor& logits, const Tensor& targets);

}  // namespace weft::examples::gpt
