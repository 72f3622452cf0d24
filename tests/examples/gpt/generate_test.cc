// Incremental decoding (examples/gpt/generate.h): the key/value cache gives
// the full forward's logits (a prefill, then token by token, batch 2; float32
// within 2e-5, float64 within 1e-10), positions past the context are an
// error; generation with and without the cache draws the same text within the
// context; the cost is linear: every cached step costs the same Linear work
// (one row) plus attention over the cached keys (counted multiply-adds), the
// uncached reference a full forward over the window, and total work over N
// tokens grows in proportion to N with the cache; sampling honours
// temperature 0 (argmax), top-k and the seed.
#include "examples/gpt/generate.h"

#include <set>

#include <gtest/gtest.h>

#include "core/autograd_meta.h"
#include "core/ops.h"
#include "core/rng.h"
#include "examples/gpt/corpus.h"
#include "tests/testing.h"

namespace weft::examples::gpt {
namespace {

GptConfig config(bool tied = true) {
  GptConfig c;
  c.context = 16;
  c.layers = 2;
  c.heads = 2;
  c.dim = 16;
  c.tied = tied;
  return c;
}

// Weights larger than GPT-2's init, so the logits differ clearly between positions.
std::shared_ptr<nn::Sequential> model(const GptConfig& c, DType dt = DType::Float32) {
  manual_seed(21);
  auto m = make_gpt(c);
  m->to(dt);
  NoGradGuard ng;
  for (auto& p : m->parameters()) p.copy_(randn(p.sizes(), {dt}) * 0.3);
  m->eval();
  return m;
}

void check_equal_to_full(DType dt, double tol, bool tied) {
  const GptConfig c = config(tied);
  auto m = model(c, dt);
  manual_seed(5);
  Tensor x = randint(0, 256, {2, 16}, DType::Int64);  // (B, T)
  Tensor full;
  {
    NoGradGuard ng;
    full = m->forward(x);  // (2, 16, 256)
  }
  for (int64_t prefill : {1, 5, 16}) {
    KvCache cache;
    std::vector<Tensor> parts{forward_cached(*m, x.narrow(1, 0, prefill), cache)};
    if (prefill < 16) parts.push_back(forward_cached(*m, x.narrow(1, prefill, 16 - prefill), cache));  // one by one
    EXPECT_EQ(cache.length(), 16);
    Tensor got = cat(parts, 1);
    EXPECT_FALSE(got.requires_grad());
    EXPECT_TRUE(testing::tensors_near(got, full, tol)) << "prefill " << prefill;
  }
}

TEST(GptKvCache, EqualsTheFullForward) {
  check_equal_to_full(DType::Float32, 2e-5, true);
  check_equal_to_full(DType::Float32, 2e-5, false);
  check_equal_to_full(DType::Float64, 1e-10, true);
}

TEST(GptKvCache, ContextAndBatchErrors) {
  auto m = model(config());
  KvCache cache;
  forward_cached(*m, randint(0, 256, {1, 10}, DType::Int64), cache);
  EXPECT_WEFT_ERROR(forward_cached(*m, randint(0, 256, {1, 7}, DType::Int64), cache),
                    "positions 10..16 exceed the context of 16 tokens");
  EXPECT_WEFT_ERROR(forward_cached(*m, randint(0, 256, {2, 1}, DType::Int64), cache),
                    "the cache holds 1 sequences, got a batch of 2");
  cache.clear();
  EXPECT_EQ(cache.length(), 0);
  EXPECT_NO_THROW(forward_cached(*m, randint(0, 256, {2, 16}, DType::Int64), cache));
}

TEST(GptKvCache, SameTextWithAndWithoutTheCache) {
  auto m = model(config());
  for (double temperature : {0.0, 1.0}) {
    SampleOptions o;
    o.tokens = 12;  // the prompt (4) and the new tokens stay inside the context (16)
    o.temperature = temperature;
    o.seed = 3;
    const std::string cached = generate(*m, "abcd", o);
    o.cache = false;
    EXPECT_EQ(generate(*m, "abcd", o), cached) << "temperature " << temperature;
    EXPECT_EQ(cached.size(), 12u);
  }
}

TEST(GptKvCache, LinearCost) {
  const GptConfig c = config();
  auto m = model(c);
  const int64_t one_row = full_forward_macs(*m, 1, 1);  // Linear work of one token + attention over one key
  const int64_t per_key = 2 * c.layers * c.dim;         // attention work of one more cached key
  SampleOptions o;
  o.tokens = 64;  // 4x the context: the cache is rebuilt on the way
  o.seed = 1;
  GenerateStats st;
  generate(*m, "x", o, &st);
  ASSERT_EQ(st.macs_per_token.size(), 64u);
  EXPECT_GE(st.rebuilds, 4);
  // A step over a cache of S keys costs one_row + (S - 1) * per_key; a rebuild prefills context / 2 tokens.
  const int64_t rebuild = full_forward_macs(*m, 1, c.context / 2);
  int64_t steps = 0;
  for (size_t i = 1; i < st.macs_per_token.size(); ++i) {
    const int64_t w = st.macs_per_token[i];
    if (w == rebuild) continue;
    ++steps;
    EXPECT_GE(w, one_row + per_key) << i;  // at least one cached key besides its own
    EXPECT_LE(w, one_row + (c.context - 1) * per_key) << i;
    EXPECT_EQ((w - one_row) % per_key, 0) << i;
  }
  EXPECT_GE(steps, 48);
  // Total work is linear in the tokens: twice the tokens, twice the work (within the rebuild phase).
  auto total = [&](int64_t n) {
    SampleOptions p = o;
    p.tokens = n;
    GenerateStats s;
    generate(*m, "x", p, &s);
    int64_t sum = 0;
    for (int64_t w : s.macs_per_token) sum += w;
    return sum;
  };
  const double ratio = static_cast<double>(total(256)) / static_cast<double>(total(128));
  EXPECT_NEAR(ratio, 2.0, 0.05);
  // Without the cache each token runs the window's full forward: a context-long window costs ~context rows.
  o.cache = false;
  GenerateStats ref;
  generate(*m, "x", o, &ref);
  ASSERT_EQ(ref.macs_per_token.size(), 64u);
  EXPECT_EQ(ref.macs_per_token.back(), full_forward_macs(*m, 1, c.context));
  EXPECT_GT(ref.macs_per_token.back(), 10 * (one_row + c.context * per_key));
}

TEST(GptSampling, TemperatureTopKSeed) {
  Tensor logits = tensor<float>({0.0f, 3.0f, 1.0f, 2.9f, -1.0f});
  Generator g(0);
  EXPECT_EQ(sample_token(logits, 0.0, 0, g), 1);
  std::set<int64_t> seen;
  for (int i = 0; i < 200; ++i) seen.insert(sample_token(logits, 1.0, 2, g));
  EXPECT_EQ(seen, (std::set<int64_t>{1, 3}));
  seen.clear();
  for (int i = 0; i < 400; ++i) seen.insert(sample_token(logits, 1.0, 0, g));
  EXPECT_EQ(seen.size(), 5u);
  Generator a(9), b(9);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(sample_token(logits, 1.0, 0, a), sample_token(logits, 1.0, 0, b));
  EXPECT_WEFT_ERROR(sample_token(logits, -1.0, 0, g), "--temperature must be finite and >= 0, got -1");
  EXPECT_WEFT_ERROR(sample_token(logits, 1.0, -2, g), "--top-k must be >= 0");
}

}  // namespace
}  // namespace weft::examples::gpt
