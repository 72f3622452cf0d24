// Reducer over plain lists of named parameters (no module, no DDP), with ranks
// as threads (//parallel/comm/inproc): averaged gradients against hand-computed
// means, bucket layout, micro-batch accumulation, unused parameters, deferred
// waits, hooks removed on destruction, sub-groups.
#include "parallel/data/reducer.h"

#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/ops.h"
#include "parallel/comm/inproc/testing.h"
#include "tests/testing.h"

namespace weft::parallel {
namespace {

// Two parameters: a (3,) and b (2, 2), zero-initialised.
struct Params {
  Tensor a = zeros({3}).requires_grad_(true);
  Tensor b = zeros({2, 2}).requires_grad_(true);
  Reducer::NamedTensors named() const { return {{"layer.a", a}, {"layer.b", b}}; }
};

// loss = sum(a * ca) + sum(b * cb): d/da = ca, d/db = cb, constants chosen per
// rank and micro-batch.
void backward(const Params& p, double ca, double cb, bool use_b = true) {
  Tensor loss = sum(mul(p.a, full({3}, ca)));
  if (use_b) loss = add(loss, sum(mul(p.b, full({2, 2}, cb))));
  loss.backward();
}

void expect_all(const Tensor& t, double v, const std::string& what) {
  ASSERT_TRUE(t.defined()) << what;
  Tensor c = t.contiguous();
  for (int64_t i = 0; i < c.numel(); ++i) EXPECT_DOUBLE_EQ(c.data_ptr<float>()[i], v) << what << " at " << i;
}

// Mean over ranks r = 0..n-1 of f(r).
template <typename F>
double mean_over_ranks(int n, F f) {
  double s = 0;
  for (int r = 0; r < n; ++r) s += f(r);
  return s / n;
}

TEST(Reducer, AveragesGradientsOfNamedParameters) {
  for (int n : {2, 4}) {
    run_ranks(n, [n](std::shared_ptr<ProcessGroup> g) {
      Params p;
      Reducer red(p.named(), g);
      const int r = g->rank();
      backward(p, r + 1, 10.0 * r);
      // mean of (r + 1) and of 10 r over the ranks.
      expect_all(p.a.grad(), (n + 1) / 2.0, "a");
      expect_all(p.b.grad(), 10.0 * (n - 1) / 2.0, "b");
      EXPECT_EQ(red.stats().backwards, 1);
      // A second step reduces again (gradients accumulate as usual first).
      p.a.zero_grad();
      p.b.zero_grad();
      backward(p, 2.0 * r, 1);
      expect_all(p.a.grad(), mean_over_ranks(n, [](int q) { return 2.0 * q; }), "a, step 2");
      expect_all(p.b.grad(), 1, "b, step 2");
    });
  }
}

TEST(Reducer, BucketsFollowReverseOrderAndCapsIdenticallyOnEveryRank) {
  std::mutex m;
  std::vector<std::vector<std::vector<std::string>>> layouts;
  run_ranks(4, [&](std::shared_ptr<ProcessGroup> g) {
    // 5 parameters of 1000 float32 (4000 bytes each). First cap 0.005 MB
    // (5242 bytes: one parameter), then 0.01 MB (10485 bytes: two).
    Reducer::NamedTensors ps;
    for (int i = 0; i < 5; ++i) ps.emplace_back("p" + std::to_string(i), zeros({1000}).requires_grad_(true));
    ReducerOptions o;
    o.first_bucket_cap_mb = 0.005;
    o.bucket_cap_mb = 0.01;
    Reducer red(ps, g, o);
    std::lock_guard<std::mutex> l(m);
    layouts.push_back(red.bucket_names());
  });
  const std::vector<std::vector<std::string>> want = {{"p4"}, {"p3", "p2"}, {"p1", "p0"}};
  ASSERT_EQ(layouts.size(), 4u);
  for (auto& l : layouts) EXPECT_EQ(l, want);
}

TEST(Reducer, MicroBatchesAccumulateLocallyAndReduceOnce) {
  const int n = 4, k = 3;
  run_ranks(n, [&](std::shared_ptr<ProcessGroup> g) {
    Params p;
    Reducer red(p.named(), g);
    const int r = g->rank();
    // Micro-batch j of rank r contributes ca = r + j, cb = r * j; only the
    // last backward of the step syncs.
    for (int j = 0; j < k; ++j) {
      red.set_sync(j == k - 1);
      backward(p, r + j, double(r) * j);
    }
    red.set_sync(true);
    EXPECT_EQ(red.stats().backwards, 1);
    EXPECT_EQ(red.stats().reductions, static_cast<int64_t>(red.bucket_names().size()));
    // The mean over ranks of the sum over micro-batches.
    auto sum_a = [&](int q) { return double(q) * k + k * (k - 1) / 2.0; };
    auto sum_b = [&](int q) { return double(q) * k * (k - 1) / 2.0; };
    expect_all(p.a.grad(), mean_over_ranks(n, sum_a), "a");
    expect_all(p.b.grad(), mean_over_ranks(n, sum_b), "b");
  });
}

TEST(Reducer, UnusedParameterIsNamed) {
  run_ranks(2, [](std::shared_ptr<ProcessGroup> g) {
    Params p;
    Reducer red(p.named(), g);
    EXPECT_WEFT_ERROR(backward(p, 1, 1, /*use_b=*/false),
                      "Reducer: 1 parameter(s) received no gradient in this backward: layer.b. Every parameter must "
                      "take part in the loss on every rank; if some parameters are unused in a forward, construct "
                      "the Reducer with ReducerOptions::find_unused_parameters = true");
    // The reducer is usable afterwards.
    p.a.zero_grad();
    backward(p, g->rank(), 3);
    expect_all(p.a.grad(), 0.5, "a");
  });
}

TEST(Reducer, FindUnusedLeavesUnusedGradientsUndefined) {
  const int n = 4;
  run_ranks(n, [&](std::shared_ptr<ProcessGroup> g) {
    Params p;
    ReducerOptions o;
    o.find_unused_parameters = true;
    Reducer red(p.named(), g, o);
    const int r = g->rank();
    backward(p, r, 0, /*use_b=*/false);  // b unused everywhere
    expect_all(p.a.grad(), mean_over_ranks(n, [](int q) { return double(q); }), "a");
    EXPECT_FALSE(p.b.grad().defined());
    // b used on rank 1 only: the others contribute zero.
    p.a.zero_grad();
    backward(p, 1, 8, /*use_b=*/r == 1);
    expect_all(p.b.grad(), 8.0 / n, "b");
  });
}

TEST(Reducer, DeferredWaitsWriteBackOnDemand) {
  run_ranks(2, [](std::shared_ptr<ProcessGroup> g) {
    Params p;
    ReducerOptions o;
    o.wait_at_end = false;
    o.first_bucket_cap_mb = 1e-6;  // one bucket per parameter
    o.bucket_cap_mb = 1e-6;
    Reducer red(p.named(), g, o);
    const int r = g->rank();
    backward(p, 4.0 * r, 2.0 * r);
    EXPECT_TRUE(red.has_pending());
    // Nothing written back yet: the local gradients.
    expect_all(p.b.grad(), 2.0 * r, "b before wait");
    red.wait_param(1);  // b
    expect_all(p.b.grad(), 1.0, "b");
    expect_all(p.a.grad(), 4.0 * r, "a before wait_all");
    EXPECT_WEFT_ERROR(backward(p, 1, 1), "a backward started while the previous step's reductions are still pending");
    red.wait_all();
    EXPECT_FALSE(red.has_pending());
  });
}

TEST(Reducer, HooksAreRemovedWhenTheReducerIsDestroyed) {
  run_ranks(2, [](std::shared_ptr<ProcessGroup> g) {
    Params p;
    { Reducer red(p.named(), g); }
    const int r = g->rank();
    backward(p, r + 1, 0);  // local only: no reduction, no collective
    expect_all(p.a.grad(), r + 1, "a");
  });
}

TEST(Reducer, SubGroupsReduceAmongTheirMembers) {
  run_ranks(4, [](std::shared_ptr<ProcessGroup> g) {
    auto even = g->new_group({0, 2});
    auto odd = g->new_group({1, 3});
    auto mine = even ? even : odd;
    ASSERT_NE(mine, nullptr);
    Params p;
    Reducer red(p.named(), mine);
    const int r = g->rank();
    backward(p, r, r * r);
    // Even ranks: mean of 0 and 2 (a) and of 0 and 4 (b); odd: of 1 and 3, of 1 and 9.
    expect_all(p.a.grad(), r % 2 == 0 ? 1.0 : 2.0, "a");
    expect_all(p.b.grad(), r % 2 == 0 ? 2.0 : 5.0, "b");
  });
}

TEST(Reducer, BadParametersAreNamed) {
  run_ranks(1, [](std::shared_ptr<ProcessGroup> g) {
    EXPECT_WEFT_ERROR(Reducer({{"frozen", zeros({2})}}, g), "Reducer: parameter 'frozen' does not require grad");
    EXPECT_WEFT_ERROR(Reducer({{"ids", zeros({2}, {DType::Int64})}}, g), "parameter 'ids'");
    EXPECT_WEFT_ERROR(Reducer({{"x", Tensor()}}, g), "Reducer: parameter 'x' is undefined");
    ReducerOptions o;
    o.bucket_cap_mb = 0;
    EXPECT_WEFT_ERROR(Reducer({}, g, o), "Reducer: bucket caps must be positive");
    EXPECT_WEFT_ERROR(Reducer({}, nullptr), "Reducer: process group is null");
  });
}

}  // namespace
}  // namespace weft::parallel
