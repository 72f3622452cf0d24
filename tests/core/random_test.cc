// Random ops and the Philox generator: known answers, reproducibility, thread
// independence, distributions, dropout.
#include <algorithm>
#include <cmath>
#include <set>
#include <thread>

#include "autograd/gradcheck.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "tests/testing.h"

namespace weft {
namespace {

using testing::tensor_near;
using testing::values;

// Exact equality of shape and values (reference helper; no library ops).
bool same_values(const Tensor& a, const Tensor& b) { return a.sizes() == b.sizes() && values(a) == values(b); }

TEST(Philox, KnownAnswerVectorsFromRandom123) {
  PhiloxCounter z = philox4x32_10({0, 0, 0, 0}, {0, 0});
  EXPECT_EQ(z[0], 0x6627e8d5u);
  EXPECT_EQ(z[1], 0xe169c58du);
  EXPECT_EQ(z[2], 0xbc57ac4cu);
  EXPECT_EQ(z[3], 0x9b00dbd8u);
  PhiloxCounter f = philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu});
  EXPECT_EQ(f[0], 0x408f276du);
  EXPECT_EQ(f[1], 0x41c83b0eu);
  EXPECT_EQ(f[2], 0xa20bc7c6u);
  EXPECT_EQ(f[3], 0x6d5451fdu);
  // Random123's third vector (pi digits)
  PhiloxCounter p = philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u});
  EXPECT_EQ(p[0], 0xd16cfe09u);
  EXPECT_EQ(p[1], 0x94fdccebu);
  EXPECT_EQ(p[2], 0x5001e420u);
  EXPECT_EQ(p[3], 0x24126ea1u);
}

TEST(Philox, CounterLayoutMatchesNote) {
  // Value v of a draw at offset o is lane v%4 of philox(o/4 + v/4).
  manual_seed(0x123456789abcdefull);
  default_generator().reserve(8);                // offset 8 -> block 2
  Tensor t = randint(0, int64_t{1} << 62, {3});  // 2 values per element
  PhiloxKey key{0x89abcdefu, 0x01234567u};
  PhiloxCounter b2 = philox4x32_10({2, 0, 0, 0}, key), b3 = philox4x32_10({3, 0, 0, 0}, key);
  uint64_t range = uint64_t{1} << 62;
  std::vector<uint64_t> expect = {((uint64_t(b2[0]) << 32) | b2[1]) % range, ((uint64_t(b2[2]) << 32) | b2[3]) % range,
                                  ((uint64_t(b3[0]) << 32) | b3[1]) % range};
  const int64_t* p = t.data_ptr<int64_t>();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(static_cast<uint64_t>(p[i]), expect[i]) << i;
  EXPECT_EQ(default_generator().offset(), 8u + 8u);  // 6 values rounded up to 8
}

TEST(Generator, SameSeedSameNumbers) {
  manual_seed(42);
  Tensor a = rand({1000});
  Tensor b = randn({1000});
  manual_seed(42);
  Tensor a2 = rand({1000});
  Tensor b2 = randn({1000});
  EXPECT_TRUE(same_values(a, a2));
  EXPECT_TRUE(same_values(b, b2));
  manual_seed(43);
  EXPECT_FALSE(same_values(rand({1000}), a));
}

TEST(Generator, ConsecutiveDrawsDiffer) {
  manual_seed(1);
  Tensor a = rand({5});
  Tensor b = rand({5});
  EXPECT_FALSE(same_values(a, b));
  EXPECT_EQ(default_generator().offset(), 16u);  // two draws of 5 values, each rounded to 8
}

TEST(Generator, ThreadCountIndependent) {
  int saved = get_num_threads();
  const Shape shape = {300001};  // well above the parallel grain
  auto draw = [&] {
    manual_seed(7);
    std::vector<Tensor> r;
    r.push_back(rand(shape));
    r.push_back(randn(shape, {DType::Float64}));
    r.push_back(randint(-5, 17, shape));
    r.push_back(dropout(ones(shape), 0.3));
    r.push_back(bernoulli(full(shape, 0.25)));
    r.push_back(randperm(100000));
    return r;
  };
  set_num_threads(1);
  auto one = draw();
  set_num_threads(2);
  auto two = draw();
  set_num_threads(saved);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(same_values(one[i], two[i])) << "draw " << i;
}

TEST(Generator, StateSaveRestore) {
  manual_seed(5);
  rand({3});
  GeneratorState s = get_rng_state();
  Tensor a = randn({64});
  set_rng_state(s);
  Tensor b = randn({64});
  EXPECT_TRUE(same_values(a, b));
  // bytes round trip
  auto bytes = s.to_bytes();
  ASSERT_EQ(bytes.size(), 16u);
  EXPECT_TRUE(GeneratorState::from_bytes(bytes) == s);
  EXPECT_WEFT_ERROR(GeneratorState::from_bytes({1, 2, 3}), "expected 16 bytes");
  {
    RngStateGuard guard;
    rand({100});
    EXPECT_NE(get_rng_state().offset, s.offset + 64 * 2);
  }
  // Guard restored the state just after `b`'s draw.
  EXPECT_EQ(get_rng_state().offset, s.offset + 128);
  // A separate generator object has its own stream.
  Generator g(5);
  EXPECT_EQ(g.get_state().offset, 0u);
  EXPECT_EQ(g.reserve(3).offset, 0u);
  EXPECT_EQ(g.reserve(1).offset, 4u);
  g.manual_seed(9);
  EXPECT_EQ(g.offset(), 0u);
  EXPECT_EQ(g.seed(), 9u);
}

TEST(Generator, ScopeRedirectsThisThreadsDrawsOnly) {
  manual_seed(5);
  const GeneratorState outer = get_rng_state();
  Generator mine(5);
  {
    GeneratorScope scope(mine);
    Tensor a = randn({64});  // from `mine`: the same numbers as the process's generator after manual_seed(5)
    EXPECT_EQ(mine.offset(), 128u);
    Generator inner(7);
    {
      GeneratorScope nested(inner);
      rand({3});
      EXPECT_EQ(inner.offset(), 4u);
      EXPECT_EQ(mine.offset(), 128u);
    }
    set_rng_state({9, 0});  // sets `mine`, restored scope or not
    EXPECT_EQ(mine.seed(), 9u);
    // Another thread still draws from the process's generator.
    std::thread other([&] { EXPECT_TRUE(get_rng_state() == outer); });
    other.join();
    manual_seed(5);
    EXPECT_TRUE(same_values(randn({64}), a));
  }
  EXPECT_TRUE(get_rng_state() == outer) << "the process's generator was not touched inside the scope";
  EXPECT_TRUE(same_values(randn({64}), [] {
    Generator g(5);
    GeneratorScope s(g);
    return randn({64});
  }()));
}

TEST(Generator, ForkSeedsAreDistinctReproducibleAndAdvanceTheParentByOneBlock) {
  Generator a(3), b(3);
  const std::vector<uint64_t> sa = fork_seeds(a, 8);
  EXPECT_EQ(a.offset(), 4u);
  EXPECT_EQ(fork_seeds(b, 8), sa);
  EXPECT_EQ(std::set<uint64_t>(sa.begin(), sa.end()).size(), 8u);
  const std::vector<uint64_t> next = fork_seeds(a, 8);  // the parent's next block
  EXPECT_EQ(a.offset(), 8u);
  for (uint64_t x : next) EXPECT_EQ(std::count(sa.begin(), sa.end(), x), 0) << "a seed repeated across forks";
  Generator c(3);
  const std::vector<uint64_t> three = fork_seeds(c, 3);  // seed i does not depend on n
  EXPECT_EQ(three, std::vector<uint64_t>(sa.begin(), sa.begin() + 3));
  Generator d(4);
  EXPECT_NE(fork_seeds(d, 1)[0], sa[0]) << "the parent's seed must matter";
  EXPECT_WEFT_ERROR(fork_seeds(d, -1), "fork_seeds: n must be >= 0, got -1");
}

TEST(Rand, RangeAndMoments) {
  manual_seed(11);
  for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16}) {
    Tensor t = rand({100000}, {dt});
    EXPECT_EQ(t.dtype(), dt);
    auto v = values(t);
    double mn = *std::min_element(v.begin(), v.end()), mx = *std::max_element(v.begin(), v.end());
    EXPECT_GE(mn, 0.0);
    EXPECT_LT(mx, 1.0);
    double mean = 0;
    for (double x : v) mean += x;
    mean /= v.size();
    // std of the mean of U(0,1) over 1e5 samples is 0.29/316 ~ 9e-4; allow 5 sigma
    // plus the 16-bit types' rounding bias (bf16 has 8 mantissa bits: < 2e-3)
    double tol = (dt == DType::BFloat16 ? 4e-3 : 0.0) + 5e-3;
    EXPECT_NEAR(mean, 0.5, tol) << dt;
  }
  EXPECT_WEFT_ERROR(rand({2}, {DType::Int64}), "rand: expected a floating dtype");
}

TEST(Rand, UniformInPlaceBoundsAndNonContiguous) {
  manual_seed(3);
  Tensor t = zeros({40, 30});
  Tensor tt = t.t();  // non-contiguous view
  uniform_(tt, -2.0, 3.0);
  auto v = values(t);
  for (double x : v) {
    EXPECT_GE(x, -2.0);
    EXPECT_LT(x, 3.0);
  }
  double mean = 0;
  for (double x : v) mean += x;
  EXPECT_NEAR(mean / v.size(), 0.5, 0.15);  // std of mean: 1.44/sqrt(1200) = 0.042
  EXPECT_WEFT_ERROR(uniform_(t, 2.0, 1.0), "expected low <= high");
  Tensor w = ones({3}, {DType::Float32, kCPU, true});
  EXPECT_WEFT_ERROR(uniform_(w), "cannot be modified in place");
}

TEST(Randn, MeanAndStd) {
  manual_seed(1234);
  for (DType dt : {DType::Float32, DType::Float64}) {
    Tensor t = randn({100000}, {dt});
    auto v = values(t);
    double mean = 0, sq = 0;
    for (double x : v) mean += x;
    mean /= v.size();
    for (double x : v) sq += (x - mean) * (x - mean);
    double sd = std::sqrt(sq / (v.size() - 1));
    // mean's std is 1/316 = 0.0032 -> 5 sigma = 0.016; std's std is 1/sqrt(2e5) = 0.0022
    EXPECT_NEAR(mean, 0.0, 0.016) << dt;
    EXPECT_NEAR(sd, 1.0, 0.012) << dt;
    // about 68.3% within one sigma (binomial std 0.0015)
    double within = 0;
    for (double x : v) within += std::abs(x) < 1.0;
    EXPECT_NEAR(within / v.size(), 0.6827, 0.008) << dt;
  }
  Tensor n = empty({50000}, {DType::Float64});
  normal_(n, 3.0, 0.5);
  auto v = values(n);
  double mean = 0;
  for (double x : v) mean += x;
  EXPECT_NEAR(mean / v.size(), 3.0, 0.012);
  EXPECT_WEFT_ERROR(normal_(n, 0.0, -1.0), "expected std >= 0");
}

TEST(Randint, RangeAndCoverage) {
  manual_seed(8);
  for (DType dt : {DType::Int64, DType::Int32, DType::UInt8, DType::Float32}) {
    Tensor t = randint(3, 10, {5000}, {dt});
    EXPECT_EQ(t.dtype(), dt);
    auto v = values(t);
    std::set<double> seen(v.begin(), v.end());
    EXPECT_EQ(seen.size(), 7u) << dt;
    EXPECT_EQ(*seen.begin(), 3.0);
    EXPECT_EQ(*seen.rbegin(), 9.0);
  }
  Tensor neg = randint(-4, -1, {1000});
  for (double x : values(neg)) {
    EXPECT_GE(x, -4);
    EXPECT_LT(x, -1);
  }
  EXPECT_WEFT_ERROR(randint(5, 5, {2}), "expected low < high");
  EXPECT_WEFT_ERROR(randint(0, 2, {2}, {DType::Bool}), "randint has no kernel for cpu/bool");
}

TEST(Randperm, IsAPermutation) {
  manual_seed(99);
  for (int64_t n : {0, 1, 2, 17, 1000}) {
    Tensor p = randperm(n);
    EXPECT_EQ(p.dtype(), DType::Int64);
    ASSERT_EQ(p.numel(), n);
    auto v = values(p);
    std::sort(v.begin(), v.end());
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(v[i], static_cast<double>(i));
  }
  Tensor a = randperm(1000);
  Tensor b = randperm(1000);
  EXPECT_FALSE(same_values(a, b));
  manual_seed(99);
  randperm(0), randperm(1), randperm(2), randperm(17), randperm(1000);
  EXPECT_TRUE(same_values(randperm(1000), a));
  EXPECT_EQ(randperm(5, {DType::Int32}).dtype(), DType::Int32);
  EXPECT_WEFT_ERROR(randperm(-1), "must be non-negative");
}

TEST(Bernoulli, Frequencies) {
  manual_seed(17);
  Tensor p = tensor({0.0f, 1.0f, 0.2f, 0.7f}).unsqueeze(0).expand({20000, 4});  // broadcast view
  Tensor b = bernoulli(p);
  EXPECT_EQ(b.sizes(), (Shape{20000, 4}));
  Tensor col = sum(b, {0});
  auto c = values(col);
  EXPECT_EQ(c[0], 0.0);
  EXPECT_EQ(c[1], 20000.0);
  EXPECT_NEAR(c[2] / 20000.0, 0.2, 0.015);  // std 0.0028
  EXPECT_NEAR(c[3] / 20000.0, 0.7, 0.016);
  for (double x : values(b)) EXPECT_TRUE(x == 0.0 || x == 1.0);
  EXPECT_WEFT_ERROR(bernoulli(ones({2}, {DType::Int64})), "bernoulli: expected a floating");
}

TEST(Dropout, ScalingMaskAndGradient) {
  manual_seed(21);
  Tensor x = full({100000}, 2.0, {DType::Float32, kCPU, true});
  Tensor y = dropout(x, 0.25);
  auto v = values(y);
  int64_t kept = 0;
  for (double e : v) {
    EXPECT_TRUE(e == 0.0 || std::abs(e - 2.0 / 0.75) < 1e-5) << e;
    kept += e != 0.0;
  }
  EXPECT_NEAR(kept / 100000.0, 0.75, 0.007);  // std 0.0014
  // gradient of sum(y * w) is w * mask / (1 - p)
  Tensor w = arange(0, 100000, 1, {DType::Float32}).div(wrapped_scalar(1000.0, DType::Float32, kCPU));
  sum(mul(y, w)).backward();
  auto g = values(x.grad());
  auto wv = values(w);
  for (size_t i = 0; i < v.size(); i += 997) {
    double expect = v[i] == 0.0 ? 0.0 : wv[i] / 0.75;
    EXPECT_NEAR(g[i], expect, 1e-4 * (1 + std::abs(expect))) << i;
  }
}

TEST(Dropout, EdgeCases) {
  Tensor x = randn({10}, {DType::Float32, kCPU, true});
  EXPECT_TRUE(dropout(x, 0.5, /*training=*/false).is_same(x));
  EXPECT_TRUE(dropout(x, 0.0).is_same(x));
  uint64_t before = default_generator().offset();
  Tensor z = dropout(x, 1.0);
  EXPECT_EQ(default_generator().offset(), before);  // p = 1 draws nothing
  EXPECT_TRUE(tensor_near(z, std::vector<double>(10, 0.0)));
  sum(z).backward();
  EXPECT_TRUE(tensor_near(x.grad(), std::vector<double>(10, 0.0)));
  EXPECT_WEFT_ERROR(dropout(x, 1.5), "between 0 and 1");
  EXPECT_WEFT_ERROR(dropout(x, -0.1), "between 0 and 1");
  EXPECT_WEFT_ERROR(dropout(ones({2}, {DType::Int64}), 0.5), "expected a floating tensor");
  // draws advance by numel rounded up to 4 (float32: one value per element)
  before = default_generator().offset();
  dropout(x, 0.5);
  EXPECT_EQ(default_generator().offset(), before + 12);
}

TEST(Dropout, Gradcheck) {
  // With a fixed RNG state, dropout is a fixed linear map: gradcheck it.
  Tensor x = randn({4, 5}, {DType::Float64, kCPU, true});
  GeneratorState s = get_rng_state();
  auto f = [s](const std::vector<Tensor>& in) {
    set_rng_state(s);
    return dropout(in[0], 0.4);
  };
  auto r = autograd::gradcheck(f, {x});
  EXPECT_TRUE(r) << r.message;
}

}  // namespace
}  // namespace weft
