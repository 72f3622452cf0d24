// Double backward through ops whose first-order backward is a fused kernel
// (Note [composite double backward] in core/autograd_meta.h): norms,
// convolution and transposed convolution, cross-entropy, attention, the fused
// MLP, the LSTM cell, slicing, clamp and dropout. Each is checked two ways:
// the first gradient built as a graph must equal the fused kernel's, and the
// Jacobian of all first gradients with respect to all inputs (the Hessian)
// must match central differences of the first-order gradients. Also: grad()
// runs only the nodes it needs (Note [grad runs what it needs] in
// autograd/engine.h), and two end-to-end uses, a gradient penalty on a
// convolutional critic and a MAML outer step.
#include <functional>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "core/autograd_meta.h"
#include "core/nn_ops.h"
#include "core/rng.h"
#include "tests/testing.h"

namespace weft {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

Tensor param(const Shape& s, uint64_t seed, DType dt = DType::Float64) {
  return testing::rnd(s, dt, seed).requires_grad_(true);
}

// The first gradients of sum(f(in) * w) with respect to every input, joined
// into one flat tensor.
Tensor joined_grads(const Fn& f, const std::vector<Tensor>& in, const Tensor& w, bool create_graph) {
  std::vector<Tensor> gs = autograd::grad({sum(f(in) * w)}, in, {}, std::nullopt, create_graph);
  std::vector<Tensor> flat;
  for (const Tensor& g : gs) flat.push_back(g.reshape({-1}));
  return cat(flat, 0);
}

// Named cases: a function of the inputs, and the inputs.
struct Case {
  const char* name;
  Fn f;
  std::vector<Tensor> in;
};

void check_all(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(testing::double_backward_check(c.f, c.in));  // the check described at the top
  }
}

TEST(CompositeDoubleBackward, Norms) {
  const Tensor rm = testing::rnd({3}, DType::Float64, 21) * 0.5, rv = exp(testing::rnd({3}, DType::Float64, 22));
  const std::vector<Case> cases = {
      {"layer_norm over the last dim, affine",
       [](const std::vector<Tensor>& v) { return layer_norm(v[0], {4}, v[1], v[2]); },
       {param({2, 3, 4}, 1), param({4}, 2), param({4}, 3)}},
      {"layer_norm over two dims, no affine",
       [](const std::vector<Tensor>& v) {
         return layer_norm(v[0] * v[0], {3, 4});
       },
       {param({2, 3, 4}, 4)}},
      {"batch_norm training, affine",
       [](const std::vector<Tensor>& v) {
         return batch_norm(v[0], Tensor(), Tensor(), v[1], v[2], /*training=*/true, 0.1, 1e-5);
       },
       {param({4, 3, 2}, 5), param({3}, 6), param({3}, 7)}},
      {"batch_norm training, (N, C)",
       [](const std::vector<Tensor>& v) {
         return batch_norm(v[0], Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
       },
       {param({5, 3}, 8)}},
      {"batch_norm eval",
       [&](const std::vector<Tensor>& v) {
         return batch_norm(v[0] * v[0], rm, rv, v[1], v[2], false, 0.1, 1e-5) * v[0];
       },
       {param({4, 3, 2}, 9), param({3}, 10), param({3}, 11)}},
      {"layer_norm with one tensor as weight and as bias",
       [](const std::vector<Tensor>& v) { return layer_norm(v[0], {4}, v[1], v[1]) * v[1]; },
       {param({2, 4}, 18), param({4}, 19)}},
      {"group_norm",
       [](const std::vector<Tensor>& v) { return group_norm(v[0], 2, v[1], v[2]); },
       {param({2, 4, 3}, 12), param({4}, 13), param({4}, 14)}},
      {"instance_norm", [](const std::vector<Tensor>& v) { return instance_norm(v[0]); }, {param({2, 3, 4}, 15)}},
      {"rms_norm",
       [](const std::vector<Tensor>& v) { return rms_norm(v[0], {4}, v[1]); },
       {param({3, 4}, 16), param({4}, 17)}},
  };
  check_all(cases);
}

TEST(CompositeDoubleBackward, ClassLosses) {
  const Tensor t = tensor(std::vector<int64_t>{1, 4, 0, 2}, {4});
  const Tensor t_ignored = tensor(std::vector<int64_t>{1, -100, 0, 2}, {4});
  const Tensor t3 = tensor(std::vector<int64_t>{0, 2, 1, 3, 3, 0}, {2, 3});
  const Tensor cw = exp(testing::rnd({5}, DType::Float64, 30));
  const Tensor pw = exp(testing::rnd({5}, DType::Float64, 32)),
               bce_target = sigmoid(testing::rnd({4, 5}, DType::Float64, 33));
  std::vector<Case> cases = {
      {"cross_entropy mean", [&](const std::vector<Tensor>& v) { return cross_entropy(v[0] * v[0], t); }},
      {"cross_entropy mean, an ignored row",
       [&](const std::vector<Tensor>& v) { return cross_entropy(v[0], t_ignored); }},
      {"cross_entropy sum, label smoothing",
       [&](const std::vector<Tensor>& v) { return cross_entropy(v[0], t, Reduction::Sum, -100, 0.2); }},
      {"cross_entropy none",
       [&](const std::vector<Tensor>& v) { return cross_entropy(v[0], t, Reduction::None) * v[0].sum({1}); }},
      {"cross_entropy (N, C, d)",
       [&](const std::vector<Tensor>& v) {
         return cross_entropy(v[0].reshape({2, 5, 2}).narrow(2, 0, 2), t3.narrow(1, 0, 2));
       }},
      {"cross_entropy with class weights",
       [&](const std::vector<Tensor>& v) { return cross_entropy(v[0], t_ignored, Reduction::Mean, -100, 0.1, cw); }},
      {"binary_cross_entropy_with_logits, pos_weight",
       [&](const std::vector<Tensor>& v) {
         return binary_cross_entropy_with_logits(v[0] * 2.0, sigmoid(v[0] * v[0]), Reduction::Mean, pw);
       }},
      {"binary_cross_entropy_with_logits none",
       [&](const std::vector<Tensor>& v) {
         return binary_cross_entropy_with_logits(v[0], bce_target, Reduction::None) * v[0];
       }},
      {"nll_loss of log_softmax", [&](const std::vector<Tensor>& v) { return nll_loss(log_softmax(v[0], 1), t); }},
  };
  for (Case& c : cases) c.in = {param({4, 5}, 31)};  // logits (4, 5)
  check_all(cases);
}

TEST(CompositeDoubleBackward, Convolution) {
  const std::vector<Case> cases = {
      {"conv2d stride, padding, dilation, groups, bias",
       [](const std::vector<Tensor>& v) {
         return tanh(conv2d(v[0], v[1], v[2], {2, 1}, {1, 2}, {2, 1}, 2));
       },
       {param({2, 4, 5, 6}, 40), param({6, 2, 3, 2}, 41), param({6}, 42)}},
      {"conv2d 1x1 without bias, x twice",
       [](const std::vector<Tensor>& v) { return conv2d(v[0], v[1]) * v[0].sum({1}, true); },
       {param({1, 3, 2, 3}, 43), param({3, 3, 1, 1}, 44)}},
      {"conv2d of an unbatched input",
       [](const std::vector<Tensor>& v) {
         return sin(conv2d(v[0], v[1], Tensor(), {1, 1}, {1, 1}));
       },
       {param({2, 3, 3}, 45), param({2, 2, 2, 2}, 46)}},
      {"conv1d",
       [](const std::vector<Tensor>& v) { return sigmoid(conv1d(v[0], v[1], v[2], 2, 1)); },
       {param({2, 2, 7}, 47), param({3, 2, 3}, 48), param({3}, 49)}},
      {"conv_transpose2d stride, padding, output_padding, groups, dilation, bias",
       [](const std::vector<Tensor>& v) {
         return tanh(conv_transpose2d(v[0], v[1], v[2], {2, 1}, {1, 0}, {1, 0}, 2, {1, 2}));
       },
       {param({2, 4, 3, 2}, 50), param({4, 1, 3, 2}, 51), param({2}, 52)}},
      {"conv_transpose2d unbatched, x twice",
       [](const std::vector<Tensor>& v) {
         return conv_transpose2d(v[0], v[1], Tensor(), {2, 2}) * v[0].sum();
       },
       {param({2, 2, 2}, 53), param({2, 3, 2, 2}, 54)}},
      {"conv_transpose1d",
       [](const std::vector<Tensor>& v) { return sin(conv_transpose1d(v[0], v[1], v[2], 2, 1)); },
       {param({1, 3, 4}, 55), param({3, 2, 3}, 56), param({2}, 57)}},
  };
  check_all(cases);
}

TEST(CompositeDoubleBackward, LstmCell) {
  // the fused cell's second derivatives, with respect to both gate inputs and
  // the cell state; the gradients of h and c both reach the loss
  const std::vector<Case> cases = {
      {"h and c",
       [](const std::vector<Tensor>& v) {
         auto [h, c] = lstm_cell(v[0], v[1] * 0.5, v[2]);
         return cat({h * 2.0, c}, 1);
       },
       {param({2, 12}, 58), param({2, 12}, 59), param({2, 3}, 60)}},
      {"two steps sharing the cell state",
       [](const std::vector<Tensor>& v) {
         auto [h1, c1] = lstm_cell(v[0], v[1], v[2]);
         auto [h2, c2] = lstm_cell(v[0] * h1.sum(), v[1], c1);
         return h2 * c2;
       },
       {param({1, 8}, 61), param({1, 8}, 62), param({1, 2}, 63)}},
  };
  check_all(cases);
}

TEST(CompositeDoubleBackward, SlicingClampAttention) {
  const std::vector<Case> cases = {
      {"slice with a step, select, narrow",
       [](const std::vector<Tensor>& v) {
         Tensor s = slice(v[0] * v[0], 1, 1, 4, 2);  // (3, 2)
         return s * select(exp(v[0]), 1, -1).unsqueeze(1) + narrow(v[0], 1, 0, 2);
       },
       {param({3, 4}, 50)}},
      {"diagonal",
       [](const std::vector<Tensor>& v) { return diagonal(v[0] * v[0] * v[0], 1) * sum(v[0]); },
       {param({3, 4}, 51)}},
      {"clamp",
       [](const std::vector<Tensor>& v) { return clamp(v[0] * v[0] * v[0], -0.2, 0.3) * v[0]; },
       {param({2, 5}, 52)}},
      {"attention",
       [](const std::vector<Tensor>& v) { return scaled_dot_product_attention(v[0], v[1], v[2]); },
       {param({1, 2, 3, 4}, 53), param({1, 2, 5, 4}, 54), param({1, 2, 5, 3}, 55)}},
      {"causal attention, q = k",
       [](const std::vector<Tensor>& v) { return scaled_dot_product_attention(v[0], v[0], v[1], /*is_causal=*/true); },
       {param({2, 1, 4, 3}, 56), param({2, 1, 4, 2}, 57)}},
  };
  check_all(cases);
}

TEST(CompositeDoubleBackward, DropoutByHand) {
  manual_seed(3);
  Tensor x = param({40}, 60);
  Tensor y = dropout(x * x, 0.5);  // mask * x^2 / 0.5
  Tensor g = autograd::grad({sum(y)}, {x}, {}, std::nullopt, true)[0];
  Tensor gg = autograd::grad({sum(g)}, {x})[0];  // 2 * mask / 0.5
  std::vector<double> yv = testing::values(y), xv = testing::values(x), want;
  int kept = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    const bool on = yv[i] != 0.0;
    kept += on;
    want.push_back(on ? 4.0 : 0.0);
  }
  EXPECT_GT(kept, 5);
  EXPECT_LT(kept, 35);
  EXPECT_TRUE(testing::tensor_near(gg, want, 1e-12));
}

// The fused float32 kernels (flash attention, the GELU MLP) have no float64
// form, so their double backward is checked against the same model in
// float64, whose path the tests above check against finite differences.
TEST(CompositeDoubleBackward, FusedFloat32KernelsMatchFloat64) {
  struct Float32Case {
    const char* name;
    Fn f;
    std::vector<Shape> shapes;
  };
  const std::vector<Float32Case> cases = {
      {"flash attention",
       [](const std::vector<Tensor>& v) { return scaled_dot_product_attention(v[0], v[1], v[2], true); },
       {{1, 2, 6, 8}, {1, 2, 6, 8}, {1, 2, 6, 8}}},
      {"flash self-attention, one tensor as q, k and v",
       [](const std::vector<Tensor>& v) { return scaled_dot_product_attention(v[0], v[0], v[0]); },
       {{1, 2, 6, 8}}},
      {"mlp_gelu_tanh",
       [](const std::vector<Tensor>& v) { return mlp_gelu_tanh(v[0], v[1], v[2], v[3], v[4]); },
       {{3, 4}, {6, 4}, {6}, {5, 6}, {5}}},
  };
  for (const Float32Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<Tensor> in32, in64;
    uint64_t seed = 70;
    for (const Shape& s : c.shapes) {
      in64.push_back(param(s, seed));
      in32.push_back(testing::rnd(s, DType::Float32, seed++).requires_grad_(true));
    }
    // a Hessian-vector product: d/d(in) of sum(grads * u)
    auto hvp = [&](const std::vector<Tensor>& in, DType dt) {
      const Tensor w = testing::rnd(c.f(in).sizes(), dt, 7);
      Tensor g = joined_grads(c.f, in, w, true);
      const Tensor u = testing::rnd(g.sizes(), dt, 8);
      // a bias enters linearly: its first gradient does not depend on the inputs
      std::vector<Tensor> h = autograd::grad({sum(g * u)}, in, {}, std::nullopt, false, /*allow_unused=*/true);
      std::vector<Tensor> flat;
      for (size_t i = 0; i < h.size(); ++i)
        flat.push_back((h[i].defined() ? h[i] : zeros_like(in[i])).reshape({-1}).to(DType::Float64));
      return cat(flat, 0);
    };
    Tensor h32 = hvp(in32, DType::Float32), h64 = hvp(in64, DType::Float64);
    EXPECT_TRUE(testing::tensors_near(h32, h64, 1e-4));
    EXPECT_GT(max(abs(h64)).item<double>(), 0.05);  // not a trivially zero product
  }
}

// A WGAN-GP gradient penalty on a convolutional critic: (|dD/dx| - 1)^2,
// differentiated with respect to the critic's weights.
TEST(CompositeDoubleBackward, GradientPenaltyOnAConvolutionalCritic) {
  std::vector<Tensor> ps = {param({4, 2, 3, 3}, 80), param({4}, 81), param({4}, 82), param({4}, 83),
                            param({1, 16}, 84)};
  const Tensor x0 = testing::rnd({3, 2, 4, 4}, DType::Float64, 85);
  auto penalty = [&](const std::vector<Tensor>& p) {
    EnableGradGuard grad_mode;
    Tensor x = x0.detach().requires_grad_(true);
    Tensor h = conv2d(x, p[0], p[1], {2, 2}, {1, 1});          // (3, 4, 2, 2)
    h = layer_norm(h.permute({0, 2, 3, 1}), {4}, p[2], p[3]);  // (3, 2, 2, 4)
    Tensor d = linear(gelu(h).reshape({3, 16}), p[4]);         // (3, 1)
    Tensor g = autograd::grad({sum(d)}, {x}, {}, std::nullopt, true)[0];
    Tensor norm = sqrt(sum(g * g, {1, 2, 3}) + 1e-12);
    return mean((norm - 1.0) * (norm - 1.0));
  };
  auto r = autograd::gradcheck(penalty, ps, {.eps = 1e-6, .atol = 1e-7, .rtol = 1e-5});
  EXPECT_TRUE(r.ok) << r.message;
}

// MAML: one inner SGD step on a support batch through a conv + batch norm +
// cross-entropy classifier, and the query loss differentiated with respect to
// the initial weights (second order).
TEST(CompositeDoubleBackward, MamlOuterGradient) {
  std::vector<Tensor> ps = {param({3, 1, 2, 2}, 90), param({3}, 91), param({3}, 92), param({3, 12}, 93)};
  const Tensor xs = testing::rnd({4, 1, 3, 3}, DType::Float64, 94), xq = testing::rnd({4, 1, 3, 3}, DType::Float64, 95);
  const Tensor ys = tensor(std::vector<int64_t>{0, 1, 2, 1}, {4}), yq = tensor(std::vector<int64_t>{2, 0, 1, 1}, {4});
  auto logits = [](const std::vector<Tensor>& p, const Tensor& x) {
    Tensor h = conv2d(x, p[0]);  // (4, 3, 2, 2)
    h = batch_norm(h, Tensor(), Tensor(), p[1], p[2], /*training=*/true, 0.1, 1e-5);
    return linear(tanh(h).reshape({4, 12}), p[3]);  // (4, 3)
  };
  auto outer = [&](const std::vector<Tensor>& p) {
    EnableGradGuard grad_mode;
    std::vector<Tensor> g = autograd::grad({cross_entropy(logits(p, xs), ys)}, p, {}, std::nullopt, true);
    std::vector<Tensor> fast;
    for (size_t i = 0; i < p.size(); ++i) fast.push_back(p[i] - g[i] * 0.5);
    return cross_entropy(logits(fast, xq), yq);
  };
  auto r = autograd::gradcheck(outer, ps, {.eps = 1e-6, .atol = 1e-7, .rtol = 1e-5});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(CompositeDoubleBackward, PoolsEmbeddingIndexingAndReductions) {
  const Tensor idx = tensor(std::vector<int64_t>{2, 0, 2, 1}, {4});
  const Tensor gidx = tensor(std::vector<int64_t>{1, 0, 2, 2, 1, 0}, {3, 2});
  const Tensor idx_no_pad = tensor(std::vector<int64_t>{2, 0, 2, 0}, {4});
  const Tensor mask = gt(testing::rnd({2, 4}, DType::Float64, 140), zeros({2, 4}, DType::Float64));
  const std::vector<Case> cases = {
      {"max_pool2d 2x2 (the index-free kernel)",
       [](const std::vector<Tensor>& v) {
         return max_pool2d(v[0] * v[0] * v[0], {2, 2}) * v[0].narrow(2, 0, 2).slice(3, 0, 16, 2);
       },
       {param({1, 2, 4, 16}, 130)}},
      {"max_pool2d 3x3 stride 2, padding 1",
       [](const std::vector<Tensor>& v) {
         return sin(max_pool2d(v[0] * v[0], {3, 3}, {2, 2}, {1, 1})) * sum(v[0]);
       },
       {param({2, 1, 5, 5}, 131)}},
      {"avg_pool2d",
       [](const std::vector<Tensor>& v) {
         return exp(avg_pool2d(v[0] * v[0], {2, 3}, {1, 2}, {1, 1}));
       },
       {param({1, 2, 4, 5}, 132)}},
      {"adaptive_avg_pool2d",
       [](const std::vector<Tensor>& v) {
         return tanh(adaptive_avg_pool2d(v[0] * v[0], {2, 3})) * sum(v[0]);
       },
       {param({1, 2, 5, 4}, 133)}},
      // the padding row is not looked up: finite differences would see it
      // through the forward, which its zero gradient ignores by definition
      {"embedding with a padding index",
       [&](const std::vector<Tensor>& v) { return tanh(embedding(idx_no_pad, v[0] * v[0], 1)) * sum(v[0]); },
       {param({3, 4}, 134)}},
      {"gather and index_select",
       [&](const std::vector<Tensor>& v) {
         return gather(v[0] * v[0], 1, gidx) * index_select(exp(v[0]), 1, idx.narrow(0, 0, 2));
       },
       {param({3, 3}, 135)}},
      {"scatter_add and index_add",
       [&](const std::vector<Tensor>& v) {
         Tensor s = scatter_add(v[0] * v[0], 1, gidx, v[1] * v[1] * v[1]);               // (3, 3)
         return index_add(sin(s), 0, idx.narrow(0, 0, 3), v[1].narrow(1, 0, 3) * v[0]);  // (3, 3)
       },
       {param({3, 3}, 136), param({3, 4}, 137)}},
      {"masked_fill",
       [&](const std::vector<Tensor>& v) { return masked_fill(v[0] * v[0], mask, 2.0) * v[0]; },
       {param({2, 4}, 138)}},
      {"std, logsumexp, 2-norm and 3-norm",
       [](const std::vector<Tensor>& v) {
         return std(v[0], {1}) * logsumexp(v[0] * v[0], {1}) + norm(v[0], 2.0, {1}) * norm(v[0], 3.0, {1});
       },
       {param({3, 4}, 139)}},
  };
  check_all(cases);
}

TEST(CompositeDoubleBackward, EmbeddingPaddingRowStaysZeroUnderCreateGraph) {
  Tensor w = param({3, 2}, 141);
  const Tensor idx = tensor(std::vector<int64_t>{1, 2, 1}, {3});
  Tensor e = embedding(idx, w * w, 1);                                      // row 1 is padding
  Tensor g = autograd::grad({sum(e * e)}, {w}, {}, std::nullopt, true)[0];  // 4 w^3 per lookup, 0 for row 1
  const std::vector<double> wv = testing::values(w);
  const std::vector<double> want = {0, 0, 0, 0, 4 * wv[4] * wv[4] * wv[4], 4 * wv[5] * wv[5] * wv[5]};
  EXPECT_TRUE(testing::tensor_near(g, want, 1e-12));
  Tensor gg = autograd::grad({sum(g)}, {w})[0];  // 12 w^2, 0 for rows 0 and 1
  EXPECT_TRUE(testing::tensor_near(gg, {0, 0, 0, 0, 12 * wv[4] * wv[4], 12 * wv[5] * wv[5]}, 1e-12));
}

// Note [grad runs what it needs]: grad() runs only the nodes between the
// outputs and the inputs, as PyTorch.
TEST(CompositeDoubleBackward, GradRunsOnlyTheNodesItNeeds) {
  Tensor x = param({3}, 110), w = param({3}, 111);
  Tensor a = x * 2.0;  // below the input y: not needed
  Tensor b = w * 3.0;  // a branch that does not lead to y: not needed
  int a_hook = 0, b_hook = 0;
  a.register_hook([&](const Tensor& g) {
    ++a_hook;
    return g;
  });
  b.register_hook([&](const Tensor& g) {
    ++b_hook;
    return g;
  });
  Tensor y = a * a;
  Tensor loss = sum(y * b);
  Tensor gy = autograd::grad({loss}, {y}, {}, /*retain_graph=*/true)[0];
  EXPECT_TRUE(testing::tensors_near(gy, b.detach(), 1e-12));
  EXPECT_EQ(a_hook, 0);
  EXPECT_EQ(b_hook, 0);
  // with x as the input, a's node is on the path and its hook runs once
  Tensor gx = autograd::grad({loss}, {x})[0];
  EXPECT_TRUE(testing::tensors_near(gx, b.detach() * a.detach() * 4.0, 1e-12));
  EXPECT_EQ(a_hook, 1);
  EXPECT_EQ(b_hook, 0);
  // the input's own node does not run, so it keeps its saved tensors
  Tensor z = exp(x);
  Tensor gz = autograd::grad({sum(z * w)}, {z})[0];
  EXPECT_TRUE(testing::tensors_near(gz, w.detach(), 1e-12));
  EXPECT_TRUE(testing::tensors_near(autograd::grad({sum(z)}, {x})[0], exp(x.detach()), 1e-12));
}

TEST(CompositeDoubleBackward, NoNodeOutlivesTheGraphs) {
  const int64_t before = Node::live_count();
  {
    std::vector<Tensor> ps = {param({2, 1, 2, 2}, 120), param({2}, 121), param({2}, 122)};
    Tensor x = param({2, 1, 3, 3}, 123);
    Tensor h = layer_norm(conv2d(x, ps[0], ps[1]), {2, 2}) * ps[2].view({1, 2, 1, 1});
    Tensor g = autograd::grad({cross_entropy(h.reshape({2, 8}), tensor(std::vector<int64_t>{1, 5}, {2}))}, {x}, {},
                              std::nullopt, true)[0];
    sum(g * g).backward();
  }
  EXPECT_EQ(Node::live_count(), before);
}

}  // namespace
}  // namespace weft
