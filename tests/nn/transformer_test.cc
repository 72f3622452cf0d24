// scaled_dot_product_attention with masks and scales, nn::MultiheadAttention's
// PyTorch form (masks, weights, cross-attention) and PyTorch's encoder-decoder
// Transformer and its layers, against PyTorch's values
// (tests/nn/golden/transformer_golden.safetensors, from
// tools/golden/make_transformer_golden.py): outputs, weights and the gradients
// of the inputs and of every parameter, with the modules loaded from PyTorch's
// state dicts under PyTorch's names. Then the relations the golden does not
// cover (is_causal against an explicit mask, unbatched input, the stacks'
// copies, dropout off in eval) and the errors.
#include "nn/transformer.h"

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "core/nn_ops.h"
#include "core/rng.h"
#include "tests/golden.h"
#include "tests/testing.h"

namespace weft {
namespace {

using testing::tensors_near;

const testing::Golden& golden() {
  static const testing::Golden g("tests/nn/golden/transformer_golden.safetensors");
  return g;
}
const Tensor& G(const std::string& key) { return golden()(key); }
Tensor G_or_none(const std::string& key) { return golden().has(key) ? G(key) : Tensor(); }
Tensor leaf(const std::string& key, DType dt = DType::Float32) { return G(key).to(dt).clone().requires_grad_(true); }

// "<case>.sd.<name>" -> {name: tensor}: PyTorch's state dict of the case's module.
nn::StateDict torch_state(const std::string& c) {
  const std::string prefix = c + ".sd.";
  nn::StateDict sd;
  for (const auto& [k, t] : golden().file().tensors)
    if (k.rfind(prefix, 0) == 0) sd.insert(k.substr(prefix.size()), t);
  return sd;
}

// Loads PyTorch's parameters (strictly: every name must match) and checks every
// parameter's gradient after the case has run backward.
void load_torch(nn::Module& m, const std::string& c) {
  nn::StateDict sd = torch_state(c);
  ASSERT_FALSE(sd.empty()) << c;
  m.load_state_dict(sd, /*strict=*/true);
  EXPECT_EQ(m.named_parameters().size(), sd.size()) << c;
}
void expect_param_grads(const nn::Module& m, const std::string& c, double tol) {
  for (const auto& [name, p] : m.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << c << ": " << name;
    EXPECT_TRUE(tensors_near(p.grad(), G(c + ".dsd." + name), tol)) << c << ": " << name;
  }
}

// fn throws weft::Error whose message contains every one of `parts`.
void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const std::string& p : parts)
      EXPECT_NE(what.find(p), std::string::npos) << "missing '" << p << "' in: " << what;
    return;
  }
  ADD_FAILURE() << "expected a weft::Error mentioning '" << parts.front() << "'";
}

// ---- scaled_dot_product_attention ----

void check_sdpa(const std::string& c, const AttentionOptions& o, DType dt) {
  SCOPED_TRACE(c + " in " + std::string(dtype_name(dt)));
  Tensor q = leaf(c + ".q", dt), k = leaf(c + ".k", dt), v = leaf(c + ".v", dt);
  Tensor out = scaled_dot_product_attention(q, k, v, o);
  ASSERT_TRUE(tensors_near(out, G(c + ".out"), 1e-5));
  out.backward(G(c + ".go").to(dt));
  EXPECT_TRUE(tensors_near(q.grad(), G(c + ".dq"), 1e-5));
  EXPECT_TRUE(tensors_near(k.grad(), G(c + ".dk"), 1e-5));
  EXPECT_TRUE(tensors_near(v.grad(), G(c + ".dv"), 1e-5));
}

TEST(ScaledDotProductAttention, MasksAndScalesAgainstPyTorch) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    check_sdpa("sdpa_bool", {.attn_mask = G("sdpa_bool.attn_mask")}, dt);
    check_sdpa("sdpa_float_scale", {.attn_mask = G("sdpa_float_scale.attn_mask"), .scale = 0.3}, dt);
    check_sdpa("sdpa_causal_wide", {.is_causal = true, .scale = 0.5}, dt);
    check_sdpa("sdpa_causal_tall", {.is_causal = true}, dt);
  }
}

TEST(ScaledDotProductAttention, FullyMaskedRowsGiveZerosNotNaN) {
  // sdpa_bool's row 1 and sdpa_float_scale's sample 1 row 2 mask every key.
  Tensor q = leaf("sdpa_bool.q"), k = leaf("sdpa_bool.k"), v = leaf("sdpa_bool.v");
  Tensor out = scaled_dot_product_attention(q, k, v, {.attn_mask = G("sdpa_bool.attn_mask")});
  EXPECT_TRUE(tensors_near(out.select(2, 1), zeros({2, 2, 3}), 0));
  out.sum().backward();
  EXPECT_TRUE(all(isfinite(q.grad())).item<bool>());
  EXPECT_TRUE(tensors_near(q.grad().select(2, 1), zeros({2, 2, 4}), 0));
  Tensor w = scaled_dot_product_attention_weights(q, k, {.attn_mask = G("sdpa_bool.attn_mask")});
  EXPECT_TRUE(tensors_near(w.select(2, 1), zeros({2, 2, 5}), 0));
  EXPECT_TRUE(tensors_near(w.select(2, 0).sum({-1}), ones({2, 2}), 1e-6));
}

TEST(ScaledDotProductAttention, BooleanMaskEqualsItsAdditiveForm) {
  manual_seed(11);
  Tensor q = randn({2, 3, 4, 8}), k = randn({2, 3, 6, 8}), v = randn({2, 3, 6, 5});
  Tensor keep = gt(rand({2, 1, 4, 6}), full({1}, 0.3));
  Tensor add = masked_fill(zeros({2, 1, 4, 6}), logical_not(keep), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(tensors_near(scaled_dot_product_attention(q, k, v, {.attn_mask = keep}),
                           scaled_dot_product_attention(q, k, v, {.attn_mask = add}), 1e-6));
  // A mask that keeps everything equals no mask (the fused kernel), and a causal
  // boolean mask equals is_causal.
  Tensor all_keep = ones({4, 6}, {DType::Bool});
  EXPECT_TRUE(tensors_near(scaled_dot_product_attention(q, k, v, {.attn_mask = all_keep}),
                           scaled_dot_product_attention(q, k, v), 1e-5));
  Tensor causal = tril(ones({4, 6}, {DType::Bool}));
  EXPECT_TRUE(tensors_near(scaled_dot_product_attention(q, k, v, {.attn_mask = causal}),
                           scaled_dot_product_attention(q, k, v, {.is_causal = true}), 1e-5));
}

TEST(ScaledDotProductAttention, MaskedPathDifferentiatesTwice) {
  manual_seed(12);
  const TensorOptions f64{DType::Float64};
  Tensor mask = randn({3, 4}, f64);
  Tensor keep = tensor({1, 0, 1, 1, 1, 1, 0, 1, 0, 1, 1, 0}, {3, 4}).to(DType::Bool);
  for (const Tensor& m : {mask, keep}) {
    EXPECT_TRUE(testing::double_backward_check(
        [&](const std::vector<Tensor>& in) {
          return scaled_dot_product_attention(in[0], in[1], in[2], {.attn_mask = m, .scale = 0.7});
        },
        {randn({1, 2, 3, 5}, f64).requires_grad_(), randn({1, 2, 4, 5}, f64).requires_grad_(),
         randn({1, 2, 4, 3}, f64).requires_grad_()},
        1e-5));
  }
}

TEST(ScaledDotProductAttention, BadMasksAreRefusedByName) {
  Tensor q = randn({1, 2, 3, 4}), k = randn({1, 2, 5, 4}), v = randn({1, 2, 5, 4});
  expect_error(
      [&] {
        scaled_dot_product_attention(q, k, v, {.attn_mask = zeros({3, 4})});
      },
      {"scaled_dot_product_attention", "attn_mask of shape [3, 4]", "[1, 2, 3, 5]"});
  expect_error(
      [&] {
        scaled_dot_product_attention(q, k, v, {.attn_mask = zeros({3, 5}, {DType::Int64})});
      },
      {"scaled_dot_product_attention", "attn_mask must be bool", "int64"});
  expect_error(
      [&] {
        scaled_dot_product_attention(q, k, v, {.attn_mask = zeros({3, 5}), .is_causal = true});
      },
      {"scaled_dot_product_attention", "attn_mask and is_causal exclude each other"});
}

// ---- MultiheadAttention ----

struct MhaCase {
  std::string name;
  int64_t heads;
  nn::MultiheadAttentionOptions options;
  nn::AttentionMasks masks;
};

void check_mha(const MhaCase& mc) {
  const std::string& c = mc.name;
  SCOPED_TRACE(c);
  nn::MultiheadAttention mha(8, mc.heads, mc.options);
  load_torch(mha, c);
  Tensor query = leaf(c + ".query");
  Tensor key = golden().has(c + ".key") ? leaf(c + ".key") : query;
  Tensor value = golden().has(c + ".value") ? leaf(c + ".value") : key;
  nn::AttentionMasks masks = mc.masks;
  masks.key_padding_mask = G_or_none(c + ".key_padding_mask");
  masks.attn_mask = G_or_none(c + ".attn_mask");
  nn::AttentionOutput r = mha.forward(query, key, value, masks);
  ASSERT_TRUE(tensors_near(r.output, G(c + ".out"), 1e-5));
  Tensor loss = (r.output * G(c + ".go")).sum();
  if (masks.need_weights) {
    ASSERT_TRUE(tensors_near(r.weights, G(c + ".w"), 1e-6));
    loss = loss + (r.weights * G(c + ".gw")).sum();
  } else {
    EXPECT_FALSE(r.weights.defined());
  }
  loss.backward();
  EXPECT_TRUE(tensors_near(query.grad(), G(c + ".dquery"), 1e-5));
  if (!key.is_same(query)) {
    EXPECT_TRUE(tensors_near(key.grad(), G(c + ".dkey"), 1e-5));
  }
  if (!value.is_same(key)) {
    EXPECT_TRUE(tensors_near(value.grad(), G(c + ".dvalue"), 1e-5));
  }
  expect_param_grads(mha, c, 2e-5);
}

TEST(MultiheadAttention, PyTorchFormAgainstPyTorch) {
  check_mha({"mha_self_kpm", 2, {.batch_first = true}, {}});
  check_mha({"mha_self_seq_first", 2, {}, {}});
  check_mha({"mha_cross_heads", 2, {.batch_first = true}, {.average_attn_weights = false}});
  check_mha({"mha_cross_kv_bool", 2, {.batch_first = true}, {.need_weights = false}});
  check_mha({"mha_no_bias", 4, {.bias = false, .batch_first = true}, {}});
}

TEST(MultiheadAttention, KdimVdimBiasKvAndZeroAttnAgainstPyTorch) {
  check_mha({"mha_kvdim", 2, {.batch_first = true, .kdim = 5, .vdim = 3}, {}});
  check_mha(
      {"mha_bias_kv_zero_attn", 2, {.add_bias_kv = true, .add_zero_attn = true}, {.average_attn_weights = false}});
  check_mha({"mha_kvdim_bias_kv",
             2,
             {.batch_first = true, .kdim = 5, .vdim = 3, .add_bias_kv = true},
             {.need_weights = false}});
}

TEST(MultiheadAttention, KdimVdimNamesAndTheSelfAttentionCall) {
  manual_seed(4);
  nn::MultiheadAttention mha(8, 2, {.kdim = 5, .vdim = 3});
  std::vector<std::string> names;
  for (const auto& [n, p] : mha.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias",
                                             "out_proj.weight", "out_proj.bias"}));
  EXPECT_FALSE(mha.in_proj_weight.defined());
  EXPECT_EQ(mha.k_proj_weight.sizes(), (Shape{8, 5}));
  EXPECT_WEFT_ERROR(mha.forward(randn({3, 1, 8}), randn({4, 1, 8}), randn({4, 1, 3})),
                    "query, key and value must end in embed_dim, kdim and vdim (8, 5, 3), got [3, 1, 8], [4, 1, 8]");
  EXPECT_WEFT_ERROR(nn::MultiheadAttention(8, 2, {.kdim = -1}), "kdim and vdim must be positive");

  // forward(x) with bias_kv and a zero key takes the full call.
  nn::MultiheadAttention extra(8, 2, {.causal = true, .add_bias_kv = true, .add_zero_attn = true});
  EXPECT_EQ(extra.bias_k.sizes(), (Shape{1, 1, 8}));
  Tensor x = randn({4, 2, 8});
  nn::AttentionOutput full = extra.forward(x, x, x, {.need_weights = true, .is_causal = true});
  EXPECT_TRUE(tensors_near(extra(x), full.output, 1e-6));
  EXPECT_EQ(full.weights.sizes(), (Shape{2, 4, 6}));  // 4 keys, bias_k's and the zero key
  // Causal over the 4 keys; the appended two are seen by every query.
  EXPECT_EQ(full.weights.select(1, 0).select(1, 1).abs().max().item<float>(), 0.0f);
  EXPECT_GT(full.weights.select(1, 0).select(1, 4).min().item<float>(), 0.0f);
}

TEST(MultiheadAttention, PyTorchFormNamesDefaultsAndInit) {
  manual_seed(13);
  nn::MultiheadAttention mha(16, 4);
  std::vector<std::string> names;
  for (const auto& [n, p] : mha.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"}));
  EXPECT_FALSE(mha.batch_first);
  EXPECT_FALSE(mha.causal);
  EXPECT_EQ(mha.qkv, nullptr);
  EXPECT_EQ(mha.proj, mha.out_proj);
  // Xavier-uniform (3E, E): bound sqrt(6 / (E + 3E)); zero biases.
  const double bound = std::sqrt(6.0 / (16 + 48));
  EXPECT_LE(mha.in_proj_weight.abs().max().item<float>(), bound);
  EXPECT_GT(mha.in_proj_weight.abs().max().item<float>(), 0.9 * bound);
  EXPECT_TRUE(tensors_near(mha.in_proj_bias, zeros({48}), 0));
  EXPECT_TRUE(tensors_near(mha.out_proj->bias, zeros({16}), 0));
}

TEST(MultiheadAttention, SelfAttentionForwardEqualsTheFullCall) {
  manual_seed(14);
  for (bool causal : {false, true}) {
    nn::MultiheadAttention mha(8, 2, {.causal = causal});  // sequence-first
    Tensor x = randn({5, 3, 8});
    nn::AttentionOutput full = mha.forward(x, x, x, {.need_weights = false, .is_causal = causal});
    EXPECT_TRUE(tensors_near(mha(x), full.output, 1e-5));
    // key is value: the fused key-value projection; three distinct tensors: three projections
    Tensor y = x.clone(), z = x.clone();
    EXPECT_TRUE(tensors_near(mha.forward(x, y, y, {.is_causal = causal}).output, full.output, 1e-5));
    EXPECT_TRUE(tensors_near(mha.forward(x, y, z, {.is_causal = causal}).output, full.output, 1e-5));
    // is_causal with padding joins an explicit causal mask
    Tensor pad = zeros({3, 5}, {DType::Bool});
    EXPECT_TRUE(
        tensors_near(mha.forward(x, x, x, {.key_padding_mask = pad, .need_weights = false, .is_causal = causal}).output,
                     full.output, 1e-5));
  }
  // The GPT-2 form: forward(query, key, value) on its batch-first layout.
  nn::MultiheadAttention gpt(8, 2, /*causal=*/true);
  Tensor x = randn({2, 5, 8});
  EXPECT_TRUE(tensors_near(gpt.forward(x, x, x, {.is_causal = true}).output, gpt(x), 1e-5));
  EXPECT_FALSE(gpt.in_proj_weight.defined());
  EXPECT_EQ(gpt.named_parameters().size(), 4u);  // qkv.weight, qkv.bias, proj.weight, proj.bias
}

TEST(MultiheadAttention, UnbatchedInputEqualsABatchOfOne) {
  manual_seed(15);
  nn::MultiheadAttention mha(8, 2);
  Tensor q = randn({3, 8}), kv = randn({4, 8});
  Tensor kpm = tensor({0, 1, 0, 0}, {4}).to(DType::Bool);
  Tensor am = randn({2, 3, 4});  // (num_heads, L, S) unbatched
  nn::AttentionOutput one = mha.forward(q, kv, kv, {.key_padding_mask = kpm, .attn_mask = am});
  nn::AttentionOutput batch = mha.forward(q.unsqueeze(1), kv.unsqueeze(1), kv.unsqueeze(1),
                                          {.key_padding_mask = kpm.unsqueeze(0), .attn_mask = am});
  EXPECT_EQ(one.output.sizes(), (Shape{3, 8}));
  EXPECT_EQ(one.weights.sizes(), (Shape{3, 4}));
  EXPECT_TRUE(tensors_near(one.output, batch.output.squeeze(1), 1e-6));
  EXPECT_TRUE(tensors_near(one.weights, batch.weights.squeeze(0), 1e-6));
}

TEST(MultiheadAttention, DropoutOnlyInTraining) {
  manual_seed(16);
  nn::MultiheadAttention mha(8, 2, {.dropout = 0.5, .batch_first = true});
  Tensor x = randn({2, 6, 8});
  Tensor train1 = mha(x), train2 = mha(x);
  EXPECT_FALSE(allclose(train1, train2));
  mha.eval();
  nn::MultiheadAttention plain(8, 2, {.batch_first = true});
  plain.load_state_dict(mha.state_dict());
  EXPECT_TRUE(tensors_near(mha(x), plain(x), 0));
  // the returned weights are the ones applied: rows sum to 1 in eval
  Tensor w = mha.forward(x, x, x).weights;
  EXPECT_TRUE(tensors_near(w.sum({-1}), ones({2, 6}), 1e-6));
}

TEST(MultiheadAttention, BadInputsAreRefusedByName) {
  nn::MultiheadAttention mha(8, 2, {.batch_first = true});
  Tensor q = randn({2, 3, 8}), kv = randn({2, 5, 8});
  expect_error(
      [&] {
        mha.forward(q, randn({2, 5, 6}), kv);
      },
      {"MultiheadAttention", "embed_dim, kdim and vdim (8, 8, 8)", "[2, 5, 6]"});
  expect_error([&] { mha.forward(q, randn({3, 5, 8}), randn({3, 5, 8})); }, {"MultiheadAttention", "batch size"});
  expect_error(
      [&] {
        mha.forward(q, kv, kv, {.attn_mask = zeros({3, 4})});
      },
      {"MultiheadAttention", "attn_mask of shape [3, 4]", "(L, S) = (3, 5)", "(4, 3, 5)"});
  expect_error(
      [&] {
        mha.forward(q, kv, kv, {.key_padding_mask = zeros({2, 3}, {DType::Bool})});
      },
      {"MultiheadAttention", "key_padding_mask of shape [2, 3]", "(N, S) = (2, 5)"});
  expect_error(
      [&] {
        mha.forward(q, kv, kv, {.key_padding_mask = zeros({2, 5}, {DType::Int64})});
      },
      {"MultiheadAttention", "key_padding_mask must be bool", "int64"});
  expect_error([] { nn::MultiheadAttention(10, 3); }, {"MultiheadAttention", "embed_dim 10", "num_heads 3"});
}

// ---- encoder and decoder layers, the stacks, the whole model ----

nn::TransformerLayerOptions small(nn::TransformerLayerOptions o = {}) {
  o.dim_feedforward = 16;
  o.dropout = 0.0;
  return o;
}

void check_outputs_and_grads(nn::Module& m, const std::string& c, const Tensor& out,
                             const std::map<std::string, Tensor>& inputs) {
  ASSERT_TRUE(tensors_near(out, G(c + ".out"), 2e-5));
  out.backward(G(c + ".go"));
  for (const auto& [name, t] : inputs)
    EXPECT_TRUE(tensors_near(t.grad(), G(c + ".d" + name), 5e-5)) << c << ": " << name;
  expect_param_grads(m, c, 1e-4);
}

TEST(TransformerLayers, EncoderLayerAgainstPyTorch) {
  {
    const std::string c = "enc_post_relu";
    nn::TransformerEncoderLayer layer(8, 2, small());
    load_torch(layer, c);
    Tensor src = leaf(c + ".src");
    Tensor out = layer.forward(src, {G(c + ".src_mask"), G(c + ".src_key_padding_mask")});
    check_outputs_and_grads(layer, c, out, {{"src", src}});
  }
  {
    const std::string c = "enc_pre_gelu_bf";
    nn::TransformerEncoderLayer layer(
        8, 2, small({.activation = nn::TransformerActivation::GELU, .batch_first = true, .norm_first = true}));
    load_torch(layer, c);
    Tensor src = leaf(c + ".src");
    check_outputs_and_grads(layer, c, layer(src), {{"src", src}});
  }
}

TEST(TransformerLayers, DecoderLayerAgainstPyTorch) {
  {
    const std::string c = "dec_post_relu";
    nn::TransformerDecoderLayer layer(8, 2, small());
    load_torch(layer, c);
    Tensor tgt = leaf(c + ".tgt"), memory = leaf(c + ".memory");
    Tensor out = layer.forward(
        tgt, memory, {.tgt_mask = G(c + ".tgt_mask"), .memory_key_padding_mask = G(c + ".memory_key_padding_mask")});
    check_outputs_and_grads(layer, c, out, {{"tgt", tgt}, {"memory", memory}});
  }
  {
    const std::string c = "dec_pre_gelu_nobias";
    nn::TransformerDecoderLayer layer(
        8, 2, small({.activation = nn::TransformerActivation::GELU, .norm_first = true, .bias = false}));
    load_torch(layer, c);
    Tensor tgt = leaf(c + ".tgt"), memory = leaf(c + ".memory");
    Tensor out = layer.forward(
        tgt, memory, {.memory_mask = G(c + ".memory_mask"), .tgt_key_padding_mask = G(c + ".tgt_key_padding_mask")});
    check_outputs_and_grads(layer, c, out, {{"tgt", tgt}, {"memory", memory}});
  }
}

TEST(TransformerLayers, TransformerAgainstPyTorch) {
  const std::string c = "transformer";
  nn::Transformer model({.d_model = 8, .nhead = 2, .num_encoder_layers = 2, .num_decoder_layers = 2, .layer = small()});
  load_torch(model, c);
  Tensor src = leaf(c + ".src"), tgt = leaf(c + ".tgt");
  Tensor out = model.forward(src, tgt,
                             {.tgt_mask = G(c + ".tgt_mask"),
                              .src_key_padding_mask = G(c + ".src_key_padding_mask"),
                              .memory_key_padding_mask = G(c + ".memory_key_padding_mask")});
  check_outputs_and_grads(model, c, out, {{"src", src}, {"tgt", tgt}});
}

TEST(TransformerLayers, IsCausalEqualsTheSquareSubsequentMask) {
  manual_seed(17);
  Tensor mask = nn::generate_square_subsequent_mask(4);
  EXPECT_TRUE(
      testing::tensor_near(isinf(mask).to(DType::Float32), {0, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0}, 0));
  EXPECT_TRUE(tensors_near(masked_fill(mask, isinf(mask), 0.0), zeros({4, 4}), 0));
  nn::TransformerDecoderLayer layer(8, 2, small());
  Tensor tgt = randn({4, 3, 8}), memory = randn({5, 3, 8});
  Tensor pad = tensor({0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1}, {3, 4}).to(DType::Bool);
  EXPECT_TRUE(tensors_near(layer.forward(tgt, memory, {.tgt_is_causal = true}),
                           layer.forward(tgt, memory, {.tgt_mask = mask}), 1e-5));
  EXPECT_TRUE(tensors_near(layer.forward(tgt, memory, {.tgt_key_padding_mask = pad, .tgt_is_causal = true}),
                           layer.forward(tgt, memory, {.tgt_mask = mask, .tgt_key_padding_mask = pad}), 1e-5));
  // Changing a later target position leaves the earlier outputs unchanged.
  Tensor tgt2 = tgt.clone();
  {
    NoGradGuard ng;
    Tensor last = tgt2.select(0, 3);
    last.add_(ones_like(last));
  }
  Tensor a = layer.forward(tgt, memory, {.tgt_is_causal = true});
  Tensor b = layer.forward(tgt2, memory, {.tgt_is_causal = true});
  EXPECT_TRUE(tensors_near(a.narrow(0, 0, 3), b.narrow(0, 0, 3), 1e-6));
  EXPECT_FALSE(allclose(a.select(0, 3), b.select(0, 3)));
}

TEST(TransformerLayers, StacksCopyTheirLayerAndTheModelMatchesPyTorchsShape) {
  manual_seed(18);
  nn::TransformerEncoderLayer proto(8, 2, small());
  nn::TransformerEncoder enc(proto, 3, std::make_shared<nn::LayerNorm>(8));
  ASSERT_EQ(enc.layers->size(), 3u);
  const nn::StateDict p = proto.state_dict();
  for (size_t i = 0; i < 3; ++i)
    for (const auto& [name, t] : p)
      EXPECT_TRUE(tensors_near(enc.state_dict()["layers." + std::to_string(i) + "." + name], t, 0));
  // copies, not shared: changing one layer leaves the others
  {
    NoGradGuard ng;
    auto& l0 = static_cast<nn::TransformerEncoderLayer&>(*(*enc.layers)[0]);
    l0.linear1->weight.add_(ones_like(l0.linear1->weight));
  }
  EXPECT_TRUE(tensors_near(enc.state_dict()["layers.1.linear1.weight"], p["linear1.weight"], 0));
  // the whole model has PyTorch's parameter names and sizes
  nn::Transformer model({.d_model = 8, .nhead = 2, .num_encoder_layers = 2, .num_decoder_layers = 2, .layer = small()});
  const nn::StateDict torch = torch_state("transformer");
  const nn::StateDict ours = model.state_dict();
  ASSERT_EQ(ours.size(), torch.size());
  for (const auto& [name, t] : torch) EXPECT_EQ(ours[name].sizes(), t.sizes()) << name;
  // encoder layers are re-initialised by the model (Xavier), so they differ
  EXPECT_FALSE(allclose(ours["encoder.layers.0.linear1.weight"], ours["encoder.layers.1.linear1.weight"]));
}

TEST(TransformerLayers, DropoutOffInEvalAndSequentialUse) {
  manual_seed(19);
  nn::TransformerEncoderLayer layer(8, 2, {.dim_feedforward = 16, .dropout = 0.3});
  nn::TransformerEncoderLayer plain(8, 2, small());
  plain.load_state_dict(layer.state_dict());
  Tensor x = randn({5, 2, 8});
  EXPECT_FALSE(allclose(layer(x), plain(x)));
  layer.eval();
  EXPECT_TRUE(tensors_near(layer(x), plain(x), 0));
  // through the Module interface: forward_multi of the two-input modules
  nn::TransformerDecoderLayer dec(8, 2, small());
  Tensor memory = randn({3, 2, 8});
  EXPECT_TRUE(tensors_near(dec.forward_multi({x, memory})[0], dec.forward(x, memory), 0));
  expect_error([&] { static_cast<nn::Module&>(dec).forward(x); },
               {"TransformerDecoderLayer", "{tgt, memory}", "1 tensors"});
}

TEST(TransformerLayers, BadInputsAreRefusedByName) {
  nn::Transformer model({.d_model = 8, .nhead = 2, .num_encoder_layers = 1, .num_decoder_layers = 1, .layer = small()});
  expect_error(
      [&] {
        model.forward(randn({5, 2, 8}), randn({4, 3, 8}));
      },
      {"Transformer", "same batch size", "[5, 2, 8]", "[4, 3, 8]"});
  expect_error(
      [&] {
        model.forward(randn({5, 2, 6}), randn({4, 2, 8}));
      },
      {"Transformer", "src", "(T, N, 8)", "[5, 2, 6]"});
  expect_error([] { nn::TransformerEncoderLayer(8, 3); }, {"TransformerEncoderLayer", "d_model 8", "nhead 3"});
  expect_error([] { nn::TransformerEncoder(nn::TransformerEncoderLayer(8, 2, small()), 0); },
               {"TransformerEncoder", "num_layers"});
}

}  // namespace
}  // namespace weft
