// CUDA losses through the public ops (core/nn_ops.h): cross_entropy (ignore_index,
// label smoothing, mean/sum/none, spatial (N, C, d...) inputs, C above and below the
// one-warp-per-row limit), nll_loss, mse_loss and binary_cross_entropy_with_logits
// (pos_weight, broadcast target), forward and backward against the CPU kernels in
// every floating dtype; float64 gradcheck with the op on the GPU; out-of-range
// targets on the GPU raise a weft::Error naming the op and the target.
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "core/nn_ops.h"
#include "tests/cuda/gpu_gradcheck.h"
#include "tests/cuda/gpu_testing.h"

namespace weft {
namespace {
using testing::kGPU;
using testing::matches_cpu;
using testing::rnd;

const DType kFloats[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16};

// int64 class indices in [0, C) of shape `s` (0-d for s = {}, the target of one
// unbatched (C) sample); every `ignore_every`-th entry (if > 0) is set to `ignore`
// instead. Deterministic (LCG), independent of weft's RNG.
Tensor class_targets(const Shape& s, int64_t C, uint64_t seed, int64_t ignore_every = 0, int64_t ignore = -100) {
  std::vector<int64_t> v(numel_of(s));
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 777;
  for (size_t i = 0; i < v.size(); ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = static_cast<int64_t>((x >> 33) % static_cast<uint64_t>(C));
    if (ignore_every > 0 && i % static_cast<size_t>(ignore_every) == 1) v[i] = ignore;
  }
  return reshape(tensor(v, s), s);  // tensor() reads an empty shape as (numel)
}

Shape without_dim1(const Shape& s) {
  Shape t = s;
  t.erase(t.begin() + (s.size() == 1 ? 0 : 1));
  return t;
}

// Loss tolerance: reductions over many rows in 16-bit outputs need a little more room.
double loss_tol(DType dt) { return testing::tolerance(dt) * (dt == DType::Float32 ? 50 : 4); }

TEST(CudaLoss, CrossEntropyForwardBackwardMatchesCpu) {
  WEFT_REQUIRE_GPU();
  const Reduction kReds[] = {Reduction::None, Reduction::Mean, Reduction::Sum};
  for (DType dt : kFloats)
    for (Shape s : {Shape{5}, Shape{7, 5}, Shape{33, 1000}, Shape{4, 3000}, Shape{2, 5, 3, 4}})
      for (Reduction red : kReds)
        for (double ls : {0.0, 0.1})
          for (int64_t ignore : {int64_t(-100), int64_t(2)}) {
            const int64_t C = s.size() == 1 ? s[0] : s[1];
            const Shape ts = without_dim1(s);
            Tensor x = mul(rnd(s, DType::Float64, 1), scalar_tensor(3.0)).to(dt);
            // every 3rd target is ignore_index (-100 is never a class; 2 is a real one)
            Tensor t = class_targets(ts, C, 2, 3, ignore);
            // reduction none on one (C) sample gives a 0-d loss, so a 0-d gradient
            Tensor g = red == Reduction::None ? reshape(rnd(ts, dt, 3), ts) : scalar_tensor(0.7, {dt});
            auto fn = [red, ls, ignore](const std::vector<Tensor>& in) {
              Tensor xx = in[0].detach().requires_grad_(true);
              Tensor y = cross_entropy(xx, in[1], red, ignore, ls);
              y.backward(in[2]);
              return std::vector<Tensor>{y.detach(), xx.grad()};
            };
            EXPECT_TRUE(matches_cpu(fn, {x, t, g}, loss_tol(dt)))
                << dt << " " << shape_str(s) << " reduction " << static_cast<int>(red) << " smoothing " << ls
                << " ignore " << ignore;
          }
}

TEST(CudaLoss, CrossEntropyManyRowsAndNonContiguousLogits) {
  WEFT_REQUIRE_GPU();
  // > 65535 rows (grid-stride loops), and logits that are a transposed view.
  Tensor x = rnd({70000, 3}, DType::Float32, 4);
  Tensor t = class_targets({70000}, 3, 5, 7);
  auto fn = [](const std::vector<Tensor>& in) {
    Tensor xx = in[0].detach().requires_grad_(true);
    Tensor y = cross_entropy(xx, in[1], Reduction::Mean, -100, 0.05);
    y.backward();
    return std::vector<Tensor>{y.detach(), xx.grad()};
  };
  EXPECT_TRUE(matches_cpu(fn, {x, t}, loss_tol(DType::Float32)));
  Tensor xt = rnd({9, 6}, DType::Float32, 6);
  Tensor tt = class_targets({6}, 9, 7);
  auto fnt = [](const std::vector<Tensor>& in) {
    Tensor xx = in[0].detach().requires_grad_(true);
    Tensor y = cross_entropy(xx.transpose(0, 1), in[1], Reduction::Sum);
    y.backward();
    return std::vector<Tensor>{y.detach(), xx.grad()};
  };
  EXPECT_TRUE(matches_cpu(fnt, {xt, tt}, loss_tol(DType::Float32)));
}

TEST(CudaLoss, NllLossForwardBackwardMatchesCpu) {
  WEFT_REQUIRE_GPU();
  for (DType dt : kFloats)
    for (Shape s : {Shape{7, 5}, Shape{3, 4, 6}})
      for (Reduction red : {Reduction::None, Reduction::Mean, Reduction::Sum}) {
        const Shape ts = without_dim1(s);
        Tensor x = rnd(s, dt, 8);
        Tensor t = class_targets(ts, s[1], 9, 4);
        Tensor g = red == Reduction::None ? rnd(ts, dt, 10) : scalar_tensor(1.3, {dt});
        auto fn = [red](const std::vector<Tensor>& in) {
          Tensor xx = in[0].detach().requires_grad_(true);
          Tensor y = nll_loss(xx, in[1], red);
          y.backward(in[2]);
          return std::vector<Tensor>{y.detach(), xx.grad()};
        };
        EXPECT_TRUE(matches_cpu(fn, {x, t, g}, loss_tol(dt))) << dt << " " << shape_str(s);
      }
}

TEST(CudaLoss, MseAndBceWithLogitsMatchCpu) {
  WEFT_REQUIRE_GPU();
  for (DType dt : kFloats)
    for (Shape s : {Shape{1}, Shape{7, 5}, Shape{3, 1000}, Shape{9001}})
      for (Reduction red : {Reduction::None, Reduction::Mean, Reduction::Sum}) {
        const int64_t last = s.back();
        Tensor x = mul(rnd(s, DType::Float64, 11), scalar_tensor(4.0)).to(dt);
        Tensor y = add(mul(rnd(s, DType::Float64, 12), scalar_tensor(0.5)), scalar_tensor(0.5)).to(dt);  // [0, 1)
        Tensor pw = add(rnd({last}, DType::Float64, 13), scalar_tensor(1.5)).to(dt);
        Tensor g = red == Reduction::None ? rnd(s, dt, 14) : scalar_tensor(0.9, {dt});
        auto mse = [red](const std::vector<Tensor>& in) {
          Tensor xx = in[0].detach().requires_grad_(true), yy = in[1].detach().requires_grad_(true);
          Tensor l = mse_loss(xx, yy, red);
          l.backward(in[3]);
          return std::vector<Tensor>{l.detach(), xx.grad(), yy.grad()};
        };
        EXPECT_TRUE(matches_cpu(mse, {x, y, pw, g}, loss_tol(dt))) << "mse " << dt << " " << shape_str(s);
        auto bce = [red](const std::vector<Tensor>& in) {
          Tensor xx = in[0].detach().requires_grad_(true), yy = in[1].detach().requires_grad_(true),
                 pp = in[2].detach().requires_grad_(true);
          Tensor l = binary_cross_entropy_with_logits(xx, yy, red, pp);
          l.backward(in[3]);
          return std::vector<Tensor>{l.detach(), xx.grad(), yy.grad(), pp.grad()};
        };
        EXPECT_TRUE(matches_cpu(bce, {x, y, pw, g}, loss_tol(dt))) << "bce " << dt << " " << shape_str(s);
        auto bce_plain = [red](const std::vector<Tensor>& in) {
          Tensor xx = in[0].detach().requires_grad_(true);
          Tensor l = binary_cross_entropy_with_logits(xx, in[1], red);
          l.backward(in[3]);
          return std::vector<Tensor>{l.detach(), xx.grad()};
        };
        EXPECT_TRUE(matches_cpu(bce_plain, {x, y, pw, g}, loss_tol(dt))) << "bce " << dt << " " << shape_str(s);
      }
  // a target row expanded to the (4, 6) input (mse_loss wants equal shapes)
  Tensor x = rnd({4, 6}, DType::Float32, 15), y = rnd({6}, DType::Float32, 16);
  auto bc = [](const std::vector<Tensor>& in) {
    Tensor xx = in[0].detach().requires_grad_(true), yy = in[1].detach().requires_grad_(true);
    Tensor l = mse_loss(xx, expand(yy, {4, 6}), Reduction::Mean);
    l.backward();
    return std::vector<Tensor>{l.detach(), xx.grad(), yy.grad()};
  };
  EXPECT_TRUE(matches_cpu(bc, {x, y}, loss_tol(DType::Float32)));
}

TEST(CudaLoss, GradcheckFloat64OnGpu) {
  WEFT_REQUIRE_GPU();
  Tensor x = rnd({4, 5}, DType::Float64, 17);
  Tensor t = class_targets({4}, 5, 18, 3).to(kGPU);  // target 1 is ignored
  for (double ls : {0.0, 0.2}) {
    auto r = testing::gpu_gradcheck(
        [t, ls](const std::vector<Tensor>& in) { return cross_entropy(in[0], t, Reduction::Mean, -100, ls); }, {x});
    EXPECT_TRUE(r) << "cross_entropy smoothing " << ls << ": " << r.message;
  }
  Tensor xs = rnd({2, 3, 4}, DType::Float64, 19);
  Tensor ts = class_targets({2, 4}, 3, 20).to(kGPU);
  auto rs = testing::gpu_gradcheck(
      [ts](const std::vector<Tensor>& in) { return cross_entropy(in[0], ts, Reduction::None); }, {xs});
  EXPECT_TRUE(rs) << rs.message;
  auto rn =
      testing::gpu_gradcheck([t](const std::vector<Tensor>& in) { return nll_loss(in[0], t, Reduction::Sum); }, {x});
  EXPECT_TRUE(rn) << rn.message;
  Tensor y = rnd({4, 5}, DType::Float64, 21), pw = add(rnd({5}, DType::Float64, 22), scalar_tensor(1.5));
  auto rm = testing::gpu_gradcheck(
      [](const std::vector<Tensor>& in) { return mse_loss(in[0], in[1], Reduction::Mean); }, {x, y});
  EXPECT_TRUE(rm) << rm.message;
  auto rb = testing::gpu_gradcheck(
      [](const std::vector<Tensor>& in) {
        return binary_cross_entropy_with_logits(in[0], in[1], Reduction::Sum, in[2]);
      },
      {x, y, pw});
  EXPECT_TRUE(rb) << rb.message;
}

TEST(CudaLoss, OutOfRangeTargetOnGpuIsAnError) {
  WEFT_REQUIRE_GPU();
  Tensor x = rnd({3, 5}, DType::Float32, 23).to(kGPU);
  Tensor big = tensor(std::vector<int64_t>{0, 7, 1}, {3}).to(kGPU);
  // Note [deferred index checks]: reported at the next synchronisation (here .cpu())
  EXPECT_WEFT_ERROR(cross_entropy(x, big).cpu(), "cross_entropy: target 7 is out of bounds");
  EXPECT_WEFT_ERROR(nll_loss(x, big).cpu(), "nll_loss: target 7 is out of bounds");
  Tensor neg = tensor(std::vector<int64_t>{0, -1, 1}, {3}).to(kGPU);
  EXPECT_WEFT_ERROR(cross_entropy(x, neg, Reduction::Sum).cpu(), "cross_entropy: target -1 is out of bounds");
  // ignore_index itself is not out of range, and the device is still usable afterwards
  Tensor ok = tensor(std::vector<int64_t>{0, -100, 4}, {3}).to(kGPU);
  EXPECT_TRUE(testing::tensors_near(cross_entropy(x, ok).cpu(), cross_entropy(x.cpu(), ok.cpu()), 1e-5));
}

}  // namespace
}  // namespace weft
