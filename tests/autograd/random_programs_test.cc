// Gradients of random compositions of ops against finite differences. Each op
// has a gradcheck of its own; here seeded random programs chain them through
// views (transpose, permute, narrow, slices with steps, expand, reshape),
// broadcasting, reductions with and without keepdim, joins, indexing,
// in-place ops on non-leaf tensors and through views (with views taken before
// them read after), and nn ops (attention, convolution, pooling, losses,
// linear, the fused MLP, embedding) fed non-contiguous views, so that the
// engine's accumulation over shared inputs and every backward's handling of
// strides and broadcast shapes meet in combinations no single op's test makes.
// Smooth ops only (no kinks for finite differences to straddle), values kept
// where every op is defined.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "core/nn_ops.h"
#include "core/ops.h"
#include "tests/mutate.h"
#include "tests/testing.h"

namespace weft {
namespace {

constexpr int kOps = 39;

// One op applied to pool entries; the choice is a function of the seed and the
// pool's shapes only, so every call of the program (gradcheck calls it again
// with perturbed values) makes the same choices.
Tensor step(testing::Mutator& rng, const std::vector<Tensor>& pool, int* op_used) {
  const Tensor& t = pool[rng.below(pool.size())];
  const Tensor& o = pool[rng.below(pool.size())];
  const int64_t nd = t.dim();
  const int64_t d = nd > 0 ? static_cast<int64_t>(rng.below(static_cast<size_t>(nd))) : 0;
  const int op = static_cast<int>(rng.below(kOps));
  *op_used = op;
  // constants in t's dtype, so that a float32 program runs float32 kernels throughout
  auto c = [&](double v) { return scalar_tensor(v, {t.dtype()}); };
  auto cst = [&](const Shape& shape, uint64_t k) { return testing::rnd(shape, t.dtype(), k).reshape(shape); };
  switch (op) {
    case 0: return tanh(t);
    case 1: return sigmoid(mul(t, c(1.5)));
    case 2: return sin(t);
    case 3: return gelu(t, rng.below(2) ? GeluApproximation::Tanh : GeluApproximation::None);
    case 4:
      if (nd > 0) return softmax(t, d);
      break;
    case 5:
      if (nd > 0) return log_softmax(t, d);
      break;
    case 6:
      if (nd > 0 && t.size(-1) > 1) return layer_norm(t, {t.size(-1)});
      break;
    case 7:
      if (nd >= 2) return t.transpose(0, nd - 1);
      break;
    case 8:
      if (nd >= 2) {
        std::vector<int64_t> perm(static_cast<size_t>(nd));
        for (int64_t i = 0; i < nd; ++i) perm[static_cast<size_t>(i)] = (i + 1) % nd;
        return permute(t, perm);
      }
      break;
    case 9:
      if (nd > 0 && t.size(d) > 1) {
        const int64_t start = static_cast<int64_t>(rng.below(static_cast<size_t>(t.size(d) - 1)));
        return slice(t, d, start, t.size(d), 1 + static_cast<int64_t>(rng.below(2)));
      }
      break;
    case 10:
      if (nd < 3) {  // a broadcast view: every element of t used twice
        Shape s = t.unsqueeze(0).sizes();
        s[0] = 2;
        return expand(t.unsqueeze(0), s);
      }
      break;
    case 11: return t.reshape({-1});
    case 12:
      if (nd > 0) return sum(t, {d}, rng.below(2) != 0);
      break;
    case 13:
      if (nd > 0) return mean(t, {d}, true);
      break;
    case 14:
      if (nd > 0) return mul(t, sum(t, {d}, true));  // broadcasting against a reduction of itself
      break;
    case 15:
      if (o.sizes() == t.sizes()) return add(mul(t, o), t);  // two pool entries (shared inputs)
      return mul(t, t);
    case 16: return div(t, add(mul(t, t), c(1.0)));
    case 17: return pow(t, 3);
    case 18:
      if (nd == 2) return matmul(t, t.transpose(0, 1));
      if (nd == 1) return matmul(t, t).reshape({1});
      break;
    case 19:
      if (nd > 0) return cat({t, mul(t, c(-0.5))}, d);
      break;
    case 20:
      if (nd < 3) return stack({t, tanh(t)}, nd > 0 ? d : 0);
      break;
    case 21:
      if (nd > 0 && t.size(d) > 0) {
        std::vector<int64_t> idx;
        for (int i = 0; i < 3; ++i) idx.push_back(static_cast<int64_t>(rng.below(static_cast<size_t>(t.size(d)))));
        return index_select(t, d, tensor(idx));  // repeats: the backward accumulates
      }
      break;
    case 22: {  // in-place on a non-leaf: u = t * 1, then u *= sin(t), u += 0.5
      Tensor u = mul(t, c(1.0));
      u.mul_(sin(t));
      u.add_(c(0.5));
      return u;
    }
    case 23:
      if (nd > 0) return logsumexp(t, {d});
      break;
    // nn ops, fed the pool's (often non-contiguous) tensors; their constants fixed per op
    case 24:
      if (nd == 2 && t.size(0) * t.size(1) >= 2) {  // attention over t's elements: (1, 1, T, 1)
        Tensor x = t.transpose(0, 1).reshape({1, 1, -1, 1});
        return scaled_dot_product_attention(x, mul(x, c(0.7)), tanh(x), rng.below(2) != 0);
      }
      break;
    case 25:
      if (nd == 2 && t.size(0) >= 2 && t.size(1) >= 2)
        return conv2d(t.unsqueeze(0).unsqueeze(0), cst({2, 1, 2, 2}, 25), cst({2}, 26), {1, 1}, {1, 0});
      break;
    case 26:
      if (nd == 2 && t.size(0) >= 2 && t.size(1) >= 2)
        return avg_pool2d(t.transpose(0, 1).unsqueeze(0).unsqueeze(0), {2, 2}, {1, 1}, {1, 1});
      break;
    case 27:
      if (nd == 2) {  // rows of t as logits, fixed targets; and label smoothing
        std::vector<int64_t> target;
        for (int64_t i = 0; i < t.size(0); ++i) target.push_back(i % t.size(1));
        return cross_entropy(t, tensor(target), Reduction::Mean, -100, rng.below(2) ? 0.1 : 0.0);
      }
      break;
    case 28:
      if (nd >= 1) return linear(t, cst({2, t.size(-1)}, 28), cst({2}, 29));
      break;
    case 29:
      if (nd >= 1) return mlp_gelu_tanh(t, cst({3, t.size(-1)}, 30), cst({3}, 31), cst({2, 3}, 32), cst({2}, 33));
      break;
    case 30:
      if (nd == 2) return embedding(tensor(std::vector<int64_t>{0, t.size(0) - 1, 0}), t);  // rows repeated
      break;
    case 31: return binary_cross_entropy_with_logits(t, cst(t.sizes(), 34).abs());
    case 32:
      if (nd > 0 && t.size(d) > 1) return var(t, {d});
      break;
    case 33: return norm(add(t, c(3.0)));  // away from 0, where the norm has a kink
    case 34: {
      Tensor mask = gt(cst(t.sizes(), 35), c(0.0));
      return rng.below(2) ? where(mask, t, mul(t, t)) : masked_fill(t, mask, 0.25);
    }
    case 35:
      if (nd > 0) {
        Shape is = t.sizes();
        std::vector<int64_t> idx;
        for (int64_t i = 0; i < t.numel(); ++i) idx.push_back((i * 7 + 3) % t.size(d));
        return gather(t, d, tensor(idx, is));
      }
      break;
    // Note [views after an in-place op]: in-place ops through views, and views read after one
    case 36:
      if (nd > 0 && t.size(d) > 1) {  // through a strided view of a non-leaf (CopySlices)
        Tensor u = mul(t, c(1.0));
        const int64_t start = static_cast<int64_t>(rng.below(static_cast<size_t>(t.size(d) - 1)));
        Tensor part = slice(u, d, start, t.size(d), 1 + static_cast<int64_t>(rng.below(2)));
        part.mul_(sigmoid(part.clone()));
        part.add_(c(0.5));
        return u;
      }
      break;
    case 37: {  // a view taken before an in-place op on its base, read after it (AsStridedBackward)
      Tensor u = mul(t, c(1.0));
      Tensor v = nd >= 2 ? u.transpose(0, nd - 1) : expand(u.unsqueeze(0), [&] {
        Shape s = u.unsqueeze(0).sizes();
        s[0] = 2;
        return s;
      }());
      u.mul_(sin(t));
      return mul(v, c(1.5));
    }
    case 38:
      if (nd > 0) {  // a buffer that needs no grad, filled slice by slice along d, reversed
        Tensor buf = zeros(t.sizes(), t.options());
        Tensor first = buf.select(d, 0);  // taken before the writes
        for (int64_t i = 0; i < t.size(d); ++i) buf.select(d, i).copy_(tanh(t.select(d, t.size(d) - 1 - i)));
        return add(buf, mul(first.unsqueeze(d), c(0.5)));
      }
      break;
  }
  *op_used = -1;  // the op did not fit the shape
  return tanh(mul(t, c(0.9)));
}

// seed -> leaves' shapes (1 to 3 leaves, 1 to 3 dims of sizes 1 to max_size)
std::vector<Shape> leaf_shapes(uint64_t seed, int64_t max_size = 3) {
  testing::Mutator rng(seed * 7919);
  std::vector<Shape> shapes(1 + rng.below(3));
  for (Shape& s : shapes) {
    s.resize(1 + rng.below(3));
    for (int64_t& e : s) e = 1 + static_cast<int64_t>(rng.below(static_cast<size_t>(max_size)));
  }
  return shapes;
}

// The program of `seed` over `leaves`: 3 to 7 steps, then a weighted sum of
// every tensor it made (so that each step's backward is on the path).
Tensor program(uint64_t seed, const std::vector<Tensor>& leaves, std::vector<int>* ops = nullptr) {
  testing::Mutator rng(seed);
  std::vector<Tensor> pool = leaves;
  const size_t steps = 3 + rng.below(5);
  Tensor total = scalar_tensor(0.0, {leaves[0].dtype()});
  for (size_t i = 0; i < steps; ++i) {
    int op = -1;
    Tensor r = step(rng, pool, &op);
    if (ops) ops->push_back(op);
    pool.push_back(r);
    total = add(total, mul(sum(r), scalar_tensor(0.3 + 0.1 * static_cast<double>(i), {r.dtype()})));
  }
  return total;
}

TEST(RandomPrograms, GradientsMatchFiniteDifferences) {
  std::vector<int> used(kOps, 0);
  int checked = 0;
  for (uint64_t seed = 1; seed <= 500; ++seed) {
    std::vector<Tensor> leaves;
    uint64_t k = 0;
    for (const Shape& s : leaf_shapes(seed)) {
      leaves.push_back(testing::rnd(s, DType::Float64, seed * 31 + k++).requires_grad_());
    }
    std::vector<int> ops;
    program(seed, leaves, &ops);
    for (int op : ops)
      if (op >= 0) ++used[static_cast<size_t>(op)];
    auto r = autograd::gradcheck([seed](const std::vector<Tensor>& in) { return program(seed, in); }, leaves,
                                 {.eps = 1e-6, .atol = 1e-6, .rtol = 1e-4});
    std::string opstr;
    for (int op : ops) opstr += std::to_string(op) + " ";
    EXPECT_TRUE(r.ok) << "seed " << seed << " (ops " << opstr << "): " << r.message;
    ++checked;
  }
  EXPECT_EQ(checked, 500);
  // every op took part somewhere
  for (int op = 0; op < kOps; ++op) EXPECT_GT(used[static_cast<size_t>(op)], 5) << "op " << op;
}

// The same programs in float32 (the CPU's vectorised kernels: AVX-512 GEMMs
// with their epilogues, flash attention, the fused MLP, the convolution
// paths) against float64, on larger shapes (sizes up to 19: vector tails),
// forward and gradients.
TEST(RandomPrograms, Float32MatchesFloat64) {
  double worst_out = 0, worst_grad = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    std::vector<Tensor> l64, l32;
    uint64_t k = 0;
    for (const Shape& s : leaf_shapes(seed, 19)) {
      Tensor x = testing::rnd(s, DType::Float64, seed * 31 + k++);
      l64.push_back(x.clone().requires_grad_());
      l32.push_back(x.to(DType::Float32).requires_grad_());
    }
    std::vector<int> ops;
    Tensor o64, o32;
    try {
      o64 = program(seed, l64);
      o32 = program(seed, l32, &ops);
    } catch (const Error& e) {
      std::string opstr;
      for (int op : ops) opstr += std::to_string(op) + " ";
      FAIL() << "seed " << seed << " (ops so far " << opstr << "): " << e.what();
    }
    ASSERT_EQ(o32.dtype(), DType::Float32) << "seed " << seed;
    o64.backward();
    o32.backward();
    const double ref = o64.item<double>(), err = std::abs(o32.item<double>() - ref) / (1 + std::abs(ref));
    worst_out = std::max(worst_out, err);
    EXPECT_LT(err, 2e-5) << "seed " << seed << ": float32 " << o32.item<double>() << ", float64 " << ref;
    for (size_t i = 0; i < l64.size(); ++i) {
      const Tensor g64 = l64[i].grad(), g32 = l32[i].grad();
      if (!g64.defined()) continue;
      const double scale = 1 + amax(abs(g64)).item<double>();
      const double gerr = amax(abs(sub(g32.to(DType::Float64), g64))).item<double>() / scale;
      worst_grad = std::max(worst_grad, gerr);
      EXPECT_LT(gerr, 5e-4) << "seed " << seed << ", leaf " << i;
    }
  }
  std::printf("largest float32 difference: output %.2e, gradients %.2e (relative)\n", worst_out, worst_grad);
}

}  // namespace
}  // namespace weft
