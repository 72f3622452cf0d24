// The GPT example's model (examples/gpt/model.h): forward and backward
// shapes, parameter counts of tied and untied heads against the formula and
// against a count by hand, the tie (one tensor under two names, listed once,
// both keys in the state dict, tied_groups naming them), causality (a later
// token does not change earlier logits), GPT-2's initialisation scales, a
// gradcheck of the whole model in float64 on a tiny configuration (tied and
// untied), pipeline slices keeping the whole model's names, config errors.
#include "examples/gpt/model.h"

#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "core/autograd_meta.h"
#include "core/ops.h"
#include "core/rng.h"
#include "tests/testing.h"

namespace weft::examples::gpt {
namespace {

GptConfig small(bool tied) {
  GptConfig c;
  c.context = 8;
  c.layers = 2;
  c.heads = 2;
  c.dim = 16;
  c.tied = tied;
  return c;
}

TEST(GptModel, ShapesForwardBackward) {
  manual_seed(1);
  auto m = make_gpt(small(true));
  EXPECT_EQ(m->size(), 5u);  // embedding, 2 blocks, norm, head
  Tensor x = randint(0, 256, {3, 8}, DType::Int64), y = randint(0, 256, {3, 8}, DType::Int64);
  Tensor logits = m->forward(x);
  EXPECT_EQ(logits.sizes(), (Shape{3, 8, 256}));
  Tensor loss = lm_loss(logits, y);
  EXPECT_EQ(loss.dim(), 0);
  EXPECT_NEAR(loss.item<double>(), std::log(256.0), 0.1);  // small init: near uniform
  loss.backward();
  for (auto& [n, p] : m->named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << n;
    EXPECT_EQ(p.grad().sizes(), p.sizes()) << n;
  }
  // Shorter sequences work; longer than the context is an error naming it.
  EXPECT_EQ(m->forward(randint(0, 256, {1, 3}, DType::Int64)).sizes(), (Shape{1, 3, 256}));
  EXPECT_WEFT_ERROR(m->forward(randint(0, 256, {1, 9}, DType::Int64)), "positions 0..8 exceed the context of 8");
}

TEST(GptModel, ParameterCountsTiedAndUntied) {
  for (bool tied : {true, false}) {
    GptConfig c = small(tied);
    auto m = make_gpt(c);
    EXPECT_EQ(m->num_parameters(), parameter_count(c)) << tied;
    // By hand: embeddings 256*16 + 8*16; per block ln 4*16, qkv 16*48+48, proj 16*16+16, mlp 16*64+64 + 64*16+16.
    const int64_t block = 64 + (768 + 48) + (256 + 16) + (1024 + 64) + (1024 + 16);
    EXPECT_EQ(parameter_count(c), 4096 + 128 + 2 * block + 32 + (tied ? 0 : 4096)) << tied;
  }
  EXPECT_EQ(parameter_count(small(false)) - parameter_count(small(true)), 256 * 16);
}

TEST(GptModel, TheTie) {
  GptConfig c = small(true);
  auto m = make_gpt(c);
  EXPECT_EQ(head_of(*m).weight.impl(), embedding_of(*m).tok->weight.impl());
  std::set<std::string> names;
  for (auto& [n, p] : m->named_parameters()) names.insert(n);
  EXPECT_TRUE(names.count("0.tok.weight"));
  EXPECT_FALSE(names.count("4.weight"));  // listed once, under the embedding's name
  auto sd = m->state_dict();
  ASSERT_NE(sd.find("4.weight"), nullptr);
  ASSERT_NE(sd.find("0.tok.weight"), nullptr);
  EXPECT_EQ(tied_groups(c), (std::vector<std::vector<std::string>>{{"0.tok.weight", "4.weight"}}));
  EXPECT_TRUE(tied_groups(small(false)).empty());
  auto u = make_gpt(small(false));
  EXPECT_NE(head_of(*u).weight.impl(), embedding_of(*u).tok->weight.impl());
  // A gradient reaches the tied tensor from both uses.
  Tensor x = randint(0, 256, {2, 8}, DType::Int64);
  lm_loss(m->forward(x), x).backward();
  Tensor g_both = embedding_of(*m).tok->weight.grad().clone();
  Tensor used = zeros({256}, DType::Float64);
  for (double v : testing::values(x)) used.narrow(0, static_cast<int64_t>(v), 1).fill_(1.0);
  double unused_row_norm = 0;  // rows of tokens never seen still get the head's gradient
  for (int64_t r = 0; r < 256; ++r)
    if (used.narrow(0, r, 1).item<double>() == 0) unused_row_norm += g_both.narrow(0, r, 1).abs().sum().item<double>();
  EXPECT_GT(unused_row_norm, 0);
}

TEST(GptModel, Causal) {
  manual_seed(2);
  auto m = make_gpt(small(false));
  Tensor x = randint(0, 256, {1, 8}, DType::Int64);
  Tensor x2 = x.clone();
  x2.narrow(1, 5, 1).fill_(int64_t((x.narrow(1, 5, 1).item<int64_t>() + 1) % 256));
  Tensor a = m->forward(x), b = m->forward(x2);
  EXPECT_TRUE(testing::tensors_near(a.narrow(1, 0, 5), b.narrow(1, 0, 5), 0));
  EXPECT_FALSE(testing::tensors_near(a.narrow(1, 5, 1), b.narrow(1, 5, 1), 1e-6));
}

TEST(GptModel, Gpt2Initialisation) {
  GptConfig c;
  c.layers = 4;
  c.dim = 128;
  c.heads = 4;
  c.tied = false;
  manual_seed(3);
  auto m = make_gpt(c);
  auto stdev = [](const Tensor& t) { return weft::std(t.detach().to(DType::Float64)).item<double>(); };
  EXPECT_NEAR(stdev(embedding_of(*m).tok->weight), 0.02, 0.002);
  EXPECT_NEAR(stdev(embedding_of(*m).pos->weight), 0.01, 0.001);
  EXPECT_NEAR(stdev(block_of(*m, 0).attn->qkv->weight), 0.02, 0.002);
  EXPECT_NEAR(stdev(block_of(*m, 0).attn->proj->weight), 0.02 / std::sqrt(8.0), 0.001);
  EXPECT_NEAR(stdev(head_of(*m).weight), 0.02, 0.002);
  EXPECT_EQ(block_of(*m, 1).attn->qkv->bias.abs().sum().item<double>(), 0);
}

TEST(GptModel, GradcheckTinyFloat64) {
  for (bool tied : {true, false}) {
    GptConfig c;
    c.vocab = 5;
    c.context = 3;
    c.layers = 1;
    c.heads = 2;
    c.dim = 4;
    c.tied = tied;
    manual_seed(4);
    auto m = make_gpt(c);
    m->to(DType::Float64);
    for (auto& p : m->parameters()) {  // larger weights than GPT-2's init, so every path matters
      NoGradGuard ng;
      p.copy_(randn(p.sizes(), {DType::Float64}) * 0.5);
    }
    Tensor x = tensor<int64_t>({0, 3, 4, 2, 1, 3}, {2, 3});
    Tensor y = tensor<int64_t>({3, 4, 0, 1, 1, 2}, {2, 3});
    auto params = m->parameters();
    auto r = autograd::gradcheck([&](const std::vector<Tensor>&) { return lm_loss(m->forward(x), y); }, params);
    EXPECT_TRUE(r.ok) << (tied ? "tied: " : "untied: ") << r.message;
  }
}

TEST(GptModel, SlicesKeepTheWholeModelsNames) {
  GptConfig c = small(true);
  auto m = make_gpt(c);
  auto last = m->slice(3, 5);
  std::set<std::string> names;
  for (auto& [n, p] : last->named_parameters()) names.insert(n);
  EXPECT_TRUE(names.count("3.weight"));  // final norm
  EXPECT_TRUE(names.count("4.weight"));  // the head: on its own stage it is not deduplicated away
}

TEST(GptModel, ConfigErrors) {
  GptConfig c = small(true);
  c.dim = 10;
  c.heads = 4;
  EXPECT_WEFT_ERROR(make_gpt(c), "--dim 10 must be a positive multiple of --heads 4");
  c = small(true);
  c.layers = 0;
  EXPECT_WEFT_ERROR(make_gpt(c), "--layers must be a positive integer, got 0");
  c = small(true);
  c.dropout = 1;
  EXPECT_WEFT_ERROR(make_gpt(c), "--dropout must be in [0, 1), got 1");
  EXPECT_EQ(describe(small(true)), "2 layers, 2 heads, dim 16, context 8, tied head, dropout 0");
}

}  // namespace
}  // namespace weft::examples::gpt
