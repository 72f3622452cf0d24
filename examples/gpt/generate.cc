// Incremental decoding and sampling (contract in generate.h).
#include "examples/gpt/generate.h"

#include <algorithm>
#include <cmath>

#include "core/autograd_meta.h"
#include "core/error.h"
#include "core/rng.h"
#include "examples/gpt/corpus.h"

namespace weft::examples::gpt {
namespace {

struct Dims {
  int64_t layers, heads, dim, context, vocab;
};

Dims dims_of(const nn::Sequential& gpt) {
  WEFT_CHECK(gpt.size() >= 4, "gpt: a model of ", gpt.size(), " children is not one make_gpt built");
  Dims d{};
  d.layers = static_cast<int64_t>(gpt.size()) - 3;
  const auto& attn = *block_of(gpt, 0).attn;
  d.heads = attn.num_heads;
  d.dim = attn.embed_dim;
  d.context = embedding_of(gpt).context;
  d.vocab = head_of(gpt).weight.size(0);
  return d;
}

// Multiply-adds of the Linear-like products for `rows` token rows (blocks and head).
int64_t linear_macs(const Dims& d, int64_t rows) {
  const int64_t C = d.dim;
  return rows * (d.layers * (C * 3 * C + C * C + C * 4 * C + 4 * C * C) + C * d.vocab);
}

// Attention products: `queries` rows against `keys` keys per (batch, head).
int64_t attention_macs(const Dims& d, int64_t batch, int64_t queries, int64_t keys) {
  return 2 * batch * d.heads * queries * keys * (d.dim / d.heads);
}

// One step of `block` on x (B, L, C) at positions [cache_len, cache_len + L),
// with its cached keys/values `k`, `v` (B, H, context, D) filled up to cache_len.
Tensor block_step(nn::TransformerBlock& block, const Tensor& x, Tensor& k, Tensor& v, int64_t cache_len,
                  const Dims& d) {
  const int64_t B = x.size(0), L = x.size(1), C = d.dim, H = d.heads, D = C / H;
  auto& attn = *block.attn;
  Tensor qkv = (*attn.qkv)((*block.ln1)(x));  // (B, L, 3C)
  std::vector<Tensor> parts = split(qkv, C, 2);
  auto heads = [&](const Tensor& t) { return t.reshape({B, L, H, D}).transpose(1, 2); };  // (B, H, L, D)
  k.narrow(2, cache_len, L).copy_(heads(parts[1]));
  v.narrow(2, cache_len, L).copy_(heads(parts[2]));
  const int64_t S = cache_len + L;
  // An empty cache: causal over the L new tokens; one new token sees every cached key.
  Tensor y = scaled_dot_product_attention(heads(parts[0]), k.narrow(2, 0, S), v.narrow(2, 0, S),
                                          /*is_causal=*/cache_len == 0, 0.0, false);  // (B, H, L, D)
  Tensor h = x + (*attn.proj)(y.transpose(1, 2).reshape({B, L, C}));                  // (B, L, C)
  return h + block.mlp_forward((*block.ln2)(h));
}

}  // namespace

void KvCache::clear() {
  k_.clear();
  v_.clear();
  length_ = 0;
}

Tensor forward_cached(const nn::Sequential& gpt, const Tensor& tokens, KvCache& cache) {
  const Dims d = dims_of(gpt);
  WEFT_CHECK(tokens.dim() == 2 && tokens.dtype() == DType::Int64 && tokens.size(1) >= 1,
             "forward_cached: expected int64 tokens (B, L) with L >= 1, got ", tokens.dtype(), " ",
             shape_str(tokens.sizes()));
  const int64_t B = tokens.size(0), L = tokens.size(1);
  WEFT_CHECK(cache.length_ + L <= d.context, "forward_cached: positions ", cache.length_, "..", cache.length_ + L - 1,
             " exceed the context of ", d.context, " tokens");
  if (cache.length_ > 0 && L > 1) {  // one at a time after the prefill
    std::vector<Tensor> outs;
    for (int64_t t = 0; t < L; ++t) outs.push_back(forward_cached(gpt, tokens.narrow(1, t, 1), cache));
    return cat(outs, 1);
  }
  NoGradGuard no_grad;
  if (cache.k_.empty()) {
    const TensorOptions o{head_of(gpt).weight.dtype(), tokens.device()};
    for (int64_t i = 0; i < d.layers; ++i) {
      cache.k_.push_back(zeros({B, d.heads, d.context, d.dim / d.heads}, o));
      cache.v_.push_back(zeros({B, d.heads, d.context, d.dim / d.heads}, o));
    }
  }
  WEFT_CHECK(cache.k_[0].size(0) == B, "forward_cached: the cache holds ", cache.k_[0].size(0),
             " sequences, got a batch of ", B);
  auto& emb = embedding_of(gpt);
  Tensor x =
      add((*emb.tok)(tokens),
          (*emb.pos)(arange(cache.length_, cache.length_ + L, 1, {DType::Int64, tokens.device()})));  // (B, L, C)
  for (int64_t i = 0; i < d.layers; ++i)
    x = block_step(block_of(gpt, i), x, cache.k_[i], cache.v_[i], cache.length_, d);
  Tensor logits = head_of(gpt)(final_norm_of(gpt)(x));  // (B, L, V)
  cache.macs += linear_macs(d, B * L) + d.layers * attention_macs(d, B, L, cache.length_ + L);
  cache.length_ += L;
  return logits;
}

int64_t full_forward_macs(const nn::Sequential& gpt, int64_t batch, int64_t tokens) {
  const Dims d = dims_of(gpt);
  return linear_macs(d, batch * tokens) + d.layers * attention_macs(d, batch, tokens, tokens);
}

int64_t sample_token(const Tensor& logits, double temperature, int64_t top_k, Generator& gen) {
  Tensor row = logits.detach().to(DType::Float64).contiguous();  // (V,)
  const double* p = row.data_ptr<double>();
  const int64_t V = row.numel();
  WEFT_CHECK(V >= 1, "sample_token: empty logits");
  WEFT_CHECK(temperature >= 0 && std::isfinite(temperature), "--temperature must be finite and >= 0, got ",
             temperature);
  WEFT_CHECK(top_k >= 0, "--top-k must be >= 0 (0: every token), got ", top_k);
  if (temperature == 0) return std::max_element(p, p + V) - p;
  std::vector<double> z(p, p + V);
  if (top_k > 0 && top_k < V) {
    std::vector<double> sorted = z;
    std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(), std::greater<double>());
    const double kth = sorted[top_k - 1];
    for (double& v : z)
      if (v < kth) v = -INFINITY;
  }
  const double m = *std::max_element(z.begin(), z.end());
  double total = 0;
  for (double& v : z) total += (v = std::exp((v - m) / temperature));
  PhiloxReader r(gen.reserve(2));
  double u = uniform_double(r.value(0), r.value(1)) * total;
  for (int64_t i = 0; i < V; ++i) {
    if (u < z[i]) return i;
    u -= z[i];
  }
  for (int64_t i = V - 1; i >= 0; --i)  // rounding: the last token with any weight
    if (z[i] > 0) return i;
  return V - 1;
}

std::string generate(nn::Sequential& gpt, const std::string& prompt, const SampleOptions& o, GenerateStats* stats) {
  WEFT_CHECK(o.tokens >= 0, "--sample must be >= 0, got ", o.tokens);
  const Dims d = dims_of(gpt);
  NoGradGuard no_grad;
  Generator gen(o.seed);
  std::string text = prompt.empty() ? std::string("\n") : prompt;
  std::string out;
  GenerateStats local;
  GenerateStats& st = stats ? *stats : local;
  const Device device = head_of(gpt).weight.device();
  auto window = [&](int64_t n) {  // the last n tokens of the text so far
    const size_t len = std::min<size_t>(static_cast<size_t>(n), text.size());
    return encode(text.substr(text.size() - len)).to(device);  // (1, len)
  };
  KvCache cache;
  Tensor logits;  // (V,) for the next token
  if (o.cache && o.tokens > 0) {
    logits = forward_cached(gpt, window(d.context), cache).select(0, 0).select(0, -1);
    st.macs_per_token.push_back(cache.macs);  // the prefill gives the first token's logits
  }
  for (int64_t i = 0; i < o.tokens; ++i) {
    if (!o.cache) {
      Tensor w = window(d.context);
      logits = gpt.forward(w).select(0, 0).select(0, -1);
      st.macs_per_token.push_back(full_forward_macs(gpt, 1, w.size(1)));
    }
    const int64_t next = sample_token(logits, o.temperature, o.top_k, gen);
    text.push_back(static_cast<char>(static_cast<uint8_t>(next)));
    out.push_back(static_cast<char>(static_cast<uint8_t>(next)));
    if (!o.cache || i + 1 == o.tokens) continue;
    const int64_t before = cache.macs;
    if (cache.length() == d.context) {  // full: rebuild from the last context / 2 tokens
      cache.clear();
      ++st.rebuilds;
      logits = forward_cached(gpt, window(std::max<int64_t>(1, d.context / 2)), cache).select(0, 0).select(0, -1);
    } else {
      logits = forward_cached(gpt, full({1, 1}, next, DType::Int64).to(device), cache).select(0, 0).select(0, -1);
    }
    st.macs_per_token.push_back(cache.macs - before);
  }
  return out;
}

}  // namespace weft::examples::gpt
