// Incremental decoding (a key/value cache) and sampling for the GPT example's
// model (examples/gpt/model.h).
//
// Contract:
// - forward_cached(gpt, tokens (B, L), cache) -> logits (B, L, V): the
//   logits of `tokens` at positions cache.length() .. + L - 1 given the
//   earlier positions' keys and values in `cache`, which it extends. They
//   are those of the last L positions of the full forward over the whole
//   sequence (to float rounding: the same kernels on other shapes), in eval
//   mode (no dropout) and without recording autograd. An empty cache runs L
//   tokens as one causal prefill; with a non-empty cache the tokens run one
//   at a time. Positions past the model's context are an error naming them.
//   The cache holds, per block, preallocated (B, H, context, D) keys and
//   values; B is fixed by the first call.
// - Operation counts (multiply-adds of the matrix products, the work that
//   grows with the sequence): KvCache::macs accumulates, per call, every
//   Linear-like product (rows x in x out) and the attention products (query
//   rows x keys x head dim, twice: scores and values). full_forward_macs
//   gives the same count for one uncached forward over T tokens.
// - generate(gpt, prompt, options): continues `prompt` (bytes; an empty
//   prompt starts from "\n") with options.tokens new tokens and returns them
//   as text. Each token is drawn from softmax(logits / temperature) over the
//   top_k most likely tokens (0: all; temperature 0: the most likely one),
//   with a Generator seeded by options.seed (the same text for the same
//   seed). With options.cache the prompt is prefilled once and each new
//   token costs one cached step; when the cache is full (context tokens),
//   it is rebuilt from the last context / 2 tokens, so the cost per token
//   stays bounded (amortised: at most one extra prefill per context / 2
//   tokens). Without the cache every token runs the full forward over the
//   last context tokens (the reference, quadratic). GenerateStats reports
//   the tokens produced and the multiply-adds spent on each.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/rng.h"
#include "examples/gpt/model.h"

namespace weft::examples::gpt {

class KvCache {
 public:
  int64_t length() const { return length_; }
  void clear();
  int64_t macs = 0;  // multiply-adds of the calls so far

 private:
  friend Tensor forward_cached(const nn::Sequential& gpt, const Tensor& tokens, KvCache& cache);
  std::vector<Tensor> k_, v_;  // per block (B, H, context, D)
  int64_t length_ = 0;
};

Tensor forward_cached(const nn::Sequential& gpt, const Tensor& tokens, KvCache& cache);

// Multiply-adds of one full forward over (B, T) tokens.
int64_t full_forward_macs(const nn::Sequential& gpt, int64_t batch, int64_t tokens);

struct SampleOptions {
  int64_t tokens = 200;
  double temperature = 0.8;
  int64_t top_k = 0;  // 0: all tokens
  uint64_t seed = 0;
  bool cache = true;
};

struct GenerateStats {
  // For each new token, the multiply-adds that produced the logits it was
  // drawn from (cached: the prompt's prefill for the first, then one step or
  // a rebuild each; uncached: a full forward each).
  std::vector<int64_t> macs_per_token;
  int64_t rebuilds = 0;  // cache rebuilds when it was full
};

std::string generate(nn::Sequential& gpt, const std::string& prompt, const SampleOptions& options,
                     GenerateStats* stats = nullptr);

// One token from a (V,) logits row by the options' temperature and top-k.
int64_t sample_token(const Tensor& logits, double temperature, int64_t top_k, Generator& gen);

}  // namespace weft::examples::gpt
