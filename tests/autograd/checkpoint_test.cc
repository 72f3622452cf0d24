// Activation checkpointing: same values and gradients as running the segment
// normally, including dropout inside (same RNG state) and closure parameters.
#include "autograd/checkpoint.h"

#include <vector>

#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "core/rng.h"
#include "tests/testing.h"

namespace weft {
namespace {

using autograd::checkpoint;
using testing::tensors_near;
using testing::values;

struct Params {
  Tensor w1, b1, w2;
  Params() {
    manual_seed(100);
    w1 = randn({4, 5}).requires_grad_(true);
    b1 = randn({5}).requires_grad_(true);
    w2 = randn({4, 5}).requires_grad_(true);
  }
  void zero() {
    for (auto* t : {&w1, &b1, &w2}) t->zero_grad();
  }
};

// A segment with dropout and parameters captured by the closure. (B, 5) -> (B, 5)
std::vector<Tensor> segment(const Params& p, const std::vector<Tensor>& in) {
  Tensor h = dropout(in[0] * p.w1 + p.b1, 0.3);  // (4, 5)
  Tensor k = h * h * p.w2 + in[1];
  return {k, dropout(h, 0.5) - in[1] * in[0]};
}

TEST(Checkpoint, MatchesPlainRunWithDropoutAndClosureParams) {
  Params p;
  manual_seed(7);
  Tensor x = randn({4, 5}).requires_grad_(true);
  Tensor z = randn({4, 5}).requires_grad_(true);

  GeneratorState s = get_rng_state();
  auto plain = segment(p, {x, z});
  Tensor loss = sum(plain[0] * plain[1]);
  loss.backward();
  GeneratorState after_plain = get_rng_state();
  Tensor gx = x.grad(), gz = z.grad(), gw1 = p.w1.grad(), gb1 = p.b1.grad(), gw2 = p.w2.grad();
  x.zero_grad();
  z.zero_grad();
  p.zero();

  set_rng_state(s);
  auto ck = checkpoint([&](const std::vector<Tensor>& in) { return segment(p, in); }, {x, z});
  ASSERT_EQ(ck.size(), 2u);
  EXPECT_TRUE(tensors_near(ck[0], plain[0], 1e-6));
  EXPECT_TRUE(tensors_near(ck[1], plain[1], 1e-6));
  ASSERT_NE(ck[0].grad_fn(), nullptr);
  EXPECT_EQ(ck[0].grad_fn()->name(), "CheckpointBackward");
  sum(ck[0] * ck[1]).backward();
  // backward's recomputation restores the RNG stream it found
  EXPECT_TRUE(get_rng_state() == after_plain);
  EXPECT_TRUE(tensors_near(x.grad(), gx, 1e-5));
  EXPECT_TRUE(tensors_near(z.grad(), gz, 1e-5));
  EXPECT_TRUE(tensors_near(p.w1.grad(), gw1, 1e-5));
  EXPECT_TRUE(tensors_near(p.b1.grad(), gb1, 1e-5));
  EXPECT_TRUE(tensors_near(p.w2.grad(), gw2, 1e-5));
}

TEST(Checkpoint, WithoutPreservedRngStateMasksDiffer) {
  // Sanity check that the test above can fail: without restoring the RNG state,
  // recomputation draws different dropout masks and the gradients differ.
  Params p;
  manual_seed(7);
  Tensor x = randn({4, 5}).requires_grad_(true);
  Tensor z = randn({4, 5}).requires_grad_(true);
  GeneratorState s = get_rng_state();
  auto plain = segment(p, {x, z});
  sum(plain[0] * plain[1]).backward();
  Tensor gw1 = p.w1.grad();
  p.zero();
  set_rng_state(s);
  auto ck = checkpoint([&](const std::vector<Tensor>& in) { return segment(p, in); }, {x, z},
                       /*preserve_rng_state=*/false);
  sum(ck[0] * ck[1]).backward();
  EXPECT_FALSE(tensors_near(p.w1.grad(), gw1, 1e-5));
}

TEST(Checkpoint, ParamsGetGradsWhenInputsDoNotRequireGrad) {
  Params p;
  Tensor x = ones({4, 5});
  auto f = [&](const std::vector<Tensor>& in) { return in[0] * p.w1 * p.w1; };
  Tensor y = checkpoint(autograd::CheckpointFn1(f), {x});
  EXPECT_TRUE(y.requires_grad());
  sum(y).backward();
  Tensor expect = p.w1.detach() * 2.0;
  EXPECT_TRUE(tensors_near(p.w1.grad(), expect, 1e-6));
  EXPECT_FALSE(x.grad().defined());
}

TEST(Checkpoint, NestedAndChainedSegments) {
  Params p;
  Tensor x = randn({4, 5}).requires_grad_(true);
  auto inner = [&](const std::vector<Tensor>& in) { return in[0] * p.w2 + p.b1; };
  auto outer = [&](const std::vector<Tensor>& in) {
    Tensor h = checkpoint(autograd::CheckpointFn1(inner), {in[0] * p.w1});
    return h * h;
  };
  // plain reference
  Tensor ref = inner({x * p.w1});
  sum(ref * ref * 3.0).backward();
  Tensor gx = x.grad(), gw1 = p.w1.grad(), gw2 = p.w2.grad(), gb1 = p.b1.grad();
  x.zero_grad();
  p.zero();
  Tensor y = checkpoint(autograd::CheckpointFn1(outer), {x});
  Tensor y2 = checkpoint(autograd::CheckpointFn1([](const std::vector<Tensor>& in) { return in[0] * 3.0; }), {y});
  sum(y2).backward();
  EXPECT_TRUE(tensors_near(x.grad(), gx, 1e-5));
  EXPECT_TRUE(tensors_near(p.w1.grad(), gw1, 1e-5));
  EXPECT_TRUE(tensors_near(p.w2.grad(), gw2, 1e-5));
  EXPECT_TRUE(tensors_near(p.b1.grad(), gb1, 1e-5));
}

TEST(Checkpoint, Gradcheck) {
  Tensor a = randn({3, 2}, {DType::Float64, kCPU, true});
  Tensor b = randn({3, 2}, {DType::Float64, kCPU, true});
  auto r = autograd::gradcheck(
      [](const std::vector<Tensor>& in) {
        return checkpoint(autograd::CheckpointFn1([](const std::vector<Tensor>& v) { return v[0] * v[1] * v[0]; }), in);
      },
      {a, b});
  EXPECT_TRUE(r) << r.message;
}

TEST(Checkpoint, CallbacksQueuedInsideRunOnceAtOuterEnd) {
  Params p;
  Tensor x = randn({4, 5}).requires_grad_(true);
  int calls = 0, post = 0;
  bool outer_grad_ready = false;
  p.w1.register_post_accumulate_grad_hook([&](const Tensor&) {
    ++post;
    autograd::queue_callback([&] {
      ++calls;
      outer_grad_ready = x.grad().defined();
    });
  });
  Tensor y = checkpoint(autograd::CheckpointFn1([&](const std::vector<Tensor>& in) { return in[0] * p.w1; }), {x});
  sum(y * x).backward();
  EXPECT_EQ(post, 1);
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(outer_grad_ready);
}

TEST(Checkpoint, RetainGraphAndErrors) {
  Tensor x = randn({3}).requires_grad_(true);
  Tensor y = checkpoint(autograd::CheckpointFn1([](const std::vector<Tensor>& in) { return in[0] * in[0]; }), {x});
  Tensor l = sum(y);
  l.backward(Tensor(), true);
  l.backward();
  Tensor expect = x.detach() * 4.0;
  EXPECT_TRUE(tensors_near(x.grad(), expect, 1e-6));
  EXPECT_WEFT_ERROR(l.backward(), "second time");
  // in-place change of a checkpoint input before backward
  Tensor a = randn({3}).requires_grad_(true);
  Tensor h = a * 1.0;
  Tensor out = checkpoint(autograd::CheckpointFn1([](const std::vector<Tensor>& in) { return in[0] * 2.0; }), {h});
  h.add_(ones({3}));
  EXPECT_WEFT_ERROR(sum(out).backward(), "CheckpointBackward");
  // no graph under NoGradGuard
  NoGradGuard guard;
  Tensor n = checkpoint(autograd::CheckpointFn1([](const std::vector<Tensor>& in) { return in[0] * 2.0; }), {x});
  EXPECT_FALSE(n.requires_grad());
}

// Under create_graph (Note [double backward]) the gradients through a
// checkpoint differentiate again and equal those of the plain segment, for the
// input and for a parameter the segment captures; grad() leaves .grad alone.
TEST(Checkpoint, DoubleBackwardMatchesThePlainSegment) {
  Tensor w = testing::rnd({3, 3}, DType::Float64, 1).requires_grad_(true);  // captured
  Tensor x = testing::rnd({2, 3}, DType::Float64, 2).requires_grad_(true);
  int hook_calls = 0;
  w.register_hook([&](const Tensor& g) {
    ++hook_calls;
    return g;
  });
  auto f = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{tanh(matmul(in[0], w)) * in[0]}; };
  auto run = [&](bool ckpt) {
    Tensor xi = x * 1.5;  // an input with history
    return ckpt ? checkpoint(autograd::CheckpointFn(f), {xi})[0] : f({xi})[0];
  };
  for (bool ckpt : {false, true}) {
    SCOPED_TRACE(ckpt ? "checkpointed" : "plain");
    // a gradient penalty through grad(): the second derivative in x and w
    Tensor g = autograd::grad({sum(run(ckpt) * run(ckpt))}, {x}, {}, std::nullopt, true)[0];
    EXPECT_FALSE(w.grad().defined());  // grad() accumulates nothing
    std::vector<Tensor> gg = autograd::grad({sum(g * g)}, {x, w});
    // backward(create_graph): w.grad keeps its history (its hook runs once); differentiate it in x
    hook_calls = 0;
    sum(sin(run(ckpt))).backward(Tensor(), std::nullopt, true);
    EXPECT_EQ(hook_calls, 1);
    ASSERT_TRUE(w.grad().defined());
    EXPECT_TRUE(w.grad().requires_grad());
    Tensor gw = autograd::grad({sum(w.grad() * w.grad())}, {x})[0];
    w.zero_grad();
    x.zero_grad();
    static std::vector<Tensor> want;
    if (!ckpt) {
      want = {gg[0], gg[1], gw};
      continue;
    }
    EXPECT_TRUE(tensors_near(gg[0], want[0], 1e-12));
    EXPECT_TRUE(tensors_near(gg[1], want[1], 1e-12));
    EXPECT_TRUE(tensors_near(gw, want[2], 1e-12));
    want.clear();
  }
}

// grad() through a checkpoint touches no .grad, as without it.
TEST(Checkpoint, GradLeavesCapturedParametersAlone) {
  Params p;
  Tensor x = randn({3, 4}).requires_grad_(true);
  Tensor y = checkpoint(autograd::CheckpointFn([&](const std::vector<Tensor>& in) {
                          return std::vector<Tensor>{tanh(matmul(in[0], p.w1) + p.b1)};
                        }),
                        {x})[0];
  Tensor gx = autograd::grad({sum(y)}, {x})[0];
  EXPECT_FALSE(p.w1.grad().defined());
  EXPECT_FALSE(p.b1.grad().defined());
  Tensor want = autograd::grad({sum(tanh(matmul(x, p.w1) + p.b1))}, {x})[0];
  EXPECT_TRUE(tensors_near(gx, want, 1e-6));
  // Note [opaque nodes]: grad() with respect to parameters only the segment
  // uses reaches them through the checkpoint, as without it
  Tensor y2 = checkpoint(autograd::CheckpointFn([&](const std::vector<Tensor>& in) {
                           return std::vector<Tensor>{tanh(matmul(in[0], p.w1) + p.b1)};
                         }),
                         {x})[0];
  std::vector<Tensor> gp = autograd::grad({sum(y2 * y2)}, {p.w1, p.b1});
  Tensor plain = tanh(matmul(x, p.w1) + p.b1);
  std::vector<Tensor> wantp = autograd::grad({sum(plain * plain)}, {p.w1, p.b1});
  EXPECT_TRUE(tensors_near(gp[0], wantp[0], 1e-6));
  EXPECT_TRUE(tensors_near(gp[1], wantp[1], 1e-6));
  EXPECT_FALSE(p.w1.grad().defined());
}

}  // namespace
}  // namespace weft
