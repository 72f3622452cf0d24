// matmul/mm/bmm/linear against a naive triple loop written here, plus gradchecks,
// dtype coverage, transposed/non-contiguous inputs and shape errors.
#include "core/kernels/matmul.h"

#include <chrono>
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "core/cpu/gemm.h"
#include "core/cpu/gemm_bf16.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "tests/testing.h"

namespace weft {
namespace {
using testing::rnd;
using testing::tensor_near;
using testing::tensors_near;
using testing::values;

// Naive reference for matmul on >= 2-D operands with broadcast batch dims.
std::vector<double> naive(const Tensor& a, const Tensor& b) {
  Shape ba(a.sizes().begin(), a.sizes().end() - 2), bb(b.sizes().begin(), b.sizes().end() - 2);
  Shape batch = broadcast_shapes("naive", ba, bb);
  int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  Shape ea = batch, eb = batch;
  ea.insert(ea.end(), {M, K});
  eb.insert(eb.end(), {K, N});
  auto va = values(a.expand(ea)), vb = values(b.expand(eb));
  int64_t B = numel_of(batch);
  std::vector<double> out(B * M * N, 0.0);
  for (int64_t x = 0; x < B; ++x)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t p = 0; p < K; ++p) s += va[x * M * K + i * K + p] * vb[x * K * N + p * N + j];
        out[x * M * N + i * N + j] = s;
      }
  return out;
}

TEST(Matmul, TwoDHandComputed) {
  Tensor a = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = tensor({7, 8, 9, 10, 11, 12}, {3, 2});
  Tensor c = mm(a, b);
  EXPECT_EQ(c.sizes(), (Shape{2, 2}));
  EXPECT_TRUE(tensor_near(c, {58, 64, 139, 154}));
  EXPECT_TRUE(tensor_near(matmul(a, b), {58, 64, 139, 154}));
}

TEST(Matmul, VectorCases) {
  Tensor v = tensor({1, 2, 3});
  Tensor w = tensor({4, 5, 6});
  Tensor d = matmul(v, w);
  EXPECT_EQ(d.dim(), 0);
  EXPECT_TRUE(tensor_near(d, {32}));
  Tensor m = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor mv = matmul(m, v);  // (2)
  EXPECT_EQ(mv.sizes(), (Shape{2}));
  EXPECT_TRUE(tensor_near(mv, {14, 32}));
  Tensor vm = matmul(tensor({1, 2}), m);  // (3)
  EXPECT_EQ(vm.sizes(), (Shape{3}));
  EXPECT_TRUE(tensor_near(vm, {9, 12, 15}));
  // batched with vector on either side
  Tensor bm = rnd({4, 2, 3}, DType::Float32);
  Tensor r1 = matmul(bm, v);  // (4, 2)
  EXPECT_EQ(r1.sizes(), (Shape{4, 2}));
  EXPECT_TRUE(tensor_near(r1, naive(bm, v.unsqueeze(1)), 1e-5));
  Tensor r2 = matmul(tensor({1, -1}), bm);  // (4, 3)
  EXPECT_EQ(r2.sizes(), (Shape{4, 3}));
  EXPECT_TRUE(tensor_near(r2, naive(tensor({1, -1}).unsqueeze(0), bm), 1e-5));
}

TEST(Matmul, ShapesVsNaive) {
  std::vector<std::pair<Shape, Shape>> cases = {
      {{5, 7}, {7, 3}},       {{1, 1}, {1, 1}},
      {{65, 130}, {130, 70}}, {{300, 40}, {40, 257}},
      {{3, 5, 7}, {3, 7, 2}}, {{3, 5, 7}, {7, 2}},
      {{5, 7}, {4, 7, 2}},    {{2, 1, 5, 7}, {3, 7, 4}},
      {{1, 4, 6}, {5, 6, 3}}, {{2, 3, 9, 4}, {2, 1, 4, 8}},
      {{4, 0}, {0, 3}},       {{0, 4}, {4, 3}},
  };
  for (auto& [sa, sb] : cases) {
    Tensor a = rnd(sa, DType::Float32, 1), b = rnd(sb, DType::Float32, 2);
    Tensor c = matmul(a, b);
    EXPECT_TRUE(tensor_near(c, naive(a, b), 1e-5)) << shape_str(sa) << " @ " << shape_str(sb);
    Tensor cd = matmul(a.to(DType::Float64), b.to(DType::Float64));
    EXPECT_TRUE(tensor_near(cd, naive(a, b), 1e-12)) << shape_str(sa) << " @ " << shape_str(sb);
  }
  Tensor c = matmul(rnd({2, 1, 5, 7}), rnd({3, 7, 4}));
  EXPECT_EQ(c.sizes(), (Shape{2, 3, 5, 4}));
}

TEST(Matmul, TransposedAndStridedInputs) {
  Tensor a = rnd({70, 90}, DType::Float32, 3), b = rnd({80, 70}, DType::Float32, 4);
  Tensor at = a.t();  // (90, 70) col-major view
  Tensor bt = b.t();  // (70, 80)
  EXPECT_FALSE(at.is_contiguous());
  EXPECT_TRUE(tensor_near(mm(at, bt), naive(at, bt), 1e-5));
  EXPECT_TRUE(tensor_near(mm(at, bt.contiguous()), naive(at, bt), 1e-5));
  EXPECT_TRUE(tensor_near(mm(at.contiguous(), bt), naive(at, bt), 1e-5));
  // every-other-column slice (neither row- nor col-major): copied internally
  Tensor s = rnd({20, 60}, DType::Float32, 5).slice(1, 0, 60, 2);  // (20, 30)
  Tensor w = rnd({30, 10}, DType::Float32, 6);
  EXPECT_TRUE(tensor_near(mm(s, w), naive(s, w), 1e-5));
  // batched transposed view and a row-sliced matrix (leading dim > cols)
  Tensor ba = rnd({3, 6, 5}, DType::Float32, 7).transpose(1, 2);  // (3, 5, 6)
  Tensor bb = rnd({3, 6, 9}, DType::Float32, 8).slice(2, 1, 5);   // (3, 6, 4)
  EXPECT_TRUE(tensor_near(bmm(ba, bb), naive(ba, bb), 1e-5));
  // broadcast (stride-0) rows
  Tensor e = tensor({1, 2, 3}).unsqueeze(0).expand({4, 3});
  EXPECT_TRUE(tensor_near(mm(e, rnd({3, 2}, DType::Float32)), naive(e, rnd({3, 2}, DType::Float32)), 1e-5));
}

TEST(Matmul, Dtypes) {
  Tensor a = rnd({6, 5}, DType::Float32, 9), b = rnd({5, 7}, DType::Float32, 10);
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    Tensor ah = a.to(dt), bh = b.to(dt);
    Tensor c = matmul(ah, bh);
    EXPECT_EQ(c.dtype(), dt);
    double tol = dt == DType::Float16 ? 5e-3 : 3e-2;
    EXPECT_TRUE(tensor_near(c, naive(ah, bh), tol)) << dt;
    Tensor cb = bmm(ah.unsqueeze(0), bh.t().contiguous().t().unsqueeze(0));
    EXPECT_TRUE(tensor_near(cb, naive(ah, bh), tol)) << dt;
  }
  Tensor ia = tensor(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor ib = tensor(std::vector<int64_t>{1, 0, -1, 2, 3, 1}, {3, 2});
  Tensor ic = matmul(ia, ib);
  EXPECT_EQ(ic.dtype(), DType::Int64);
  EXPECT_EQ(values(ic), (std::vector<double>{8, 7, 17, 16}));
  EXPECT_EQ(values(matmul(ia.to(DType::Int32), ib.to(DType::Int32).t().contiguous().t())),
            (std::vector<double>{8, 7, 17, 16}));
  EXPECT_WEFT_ERROR(matmul(ia.to(DType::Bool), ib.to(DType::Bool)), "bool");
}

TEST(Matmul, Errors) {
  EXPECT_WEFT_ERROR(matmul(zeros({2, 3}), zeros({4, 5})), "[2, 3] and [4, 5]");
  EXPECT_WEFT_ERROR(mm(zeros({2, 3}), zeros({4, 5})), "mm: shapes [2, 3] and [4, 5]");
  EXPECT_WEFT_ERROR(matmul(zeros({3}), zeros({4})), "[3] and [4]");
  EXPECT_WEFT_ERROR(matmul(zeros({2, 2, 3}), zeros({2, 4, 5})), "[2, 2, 3] and [2, 4, 5]");
  EXPECT_WEFT_ERROR(matmul(zeros({2, 2, 3}), zeros({3, 3, 5})), "matmul");  // batch 2 vs 3
  EXPECT_WEFT_ERROR(mm(zeros({2, 3, 1}), zeros({1, 5})), "2-D");
  EXPECT_WEFT_ERROR(bmm(zeros({2, 3}), zeros({3, 5})), "3-D");
  EXPECT_WEFT_ERROR(bmm(zeros({2, 2, 3}), zeros({3, 3, 5})), "batch");
  EXPECT_WEFT_ERROR(matmul(zeros({}), zeros({3})), "at least 1");
  EXPECT_WEFT_ERROR(matmul(zeros({2, 3}), zeros({3, 2}, {DType::Float64})), "same dtype");
  EXPECT_WEFT_ERROR(linear(zeros({4, 3}), zeros({5, 2})), "linear: input shape [4, 3]");
  EXPECT_WEFT_ERROR(linear(zeros({4, 3}), zeros({5, 3}), zeros({4})), "bias");
}

TEST(Matmul, Linear) {
  Tensor x = rnd({2, 3, 4}, DType::Float32, 11), w = rnd({5, 4}, DType::Float32, 12),
         bias = rnd({5}, DType::Float32, 13);
  Tensor y = linear(x, w, bias);
  EXPECT_EQ(y.sizes(), (Shape{2, 3, 5}));
  auto ref = naive(x, w.t());
  auto bv = values(bias);
  for (size_t i = 0; i < ref.size(); ++i) ref[i] += bv[i % 5];
  EXPECT_TRUE(tensor_near(y, ref, 1e-5));
  EXPECT_TRUE(tensor_near(linear(x, w), naive(x, w.t()), 1e-5));
  Tensor y1 = linear(tensor({1, 2, 3, 4}), w);  // 1-D input -> (5)
  EXPECT_EQ(y1.sizes(), (Shape{5}));
}

// linear with a bias on the CPU runs the addmm kernel (bias fused into the GEMM,
// core/cpu/gemm.h) for float32/float64 and matmul + add for other dtypes. Against
// a double reference and against matmul(x, W^T) + bias: ragged and 1-column
// outputs, several K blocks (in_f > 256), 1-D, empty and non-contiguous inputs,
// both float32 GEMM paths. The bias is 2 + [-1, 1), so a dropped or doubled bias
// is off by at least 1. Gradients equal those of matmul + add.
TEST(Matmul, LinearFusedBiasVsReference) {
  EXPECT_TRUE(addmm_table().has(DeviceType::CPU, DType::Float32));
  EXPECT_TRUE(addmm_table().has(DeviceType::CPU, DType::Float64));
  struct C {
    Shape x;
    int64_t out_f;
    bool transposed;  // x given as a non-contiguous (transposed) view
  };
  const C cases[] = {{{7, 5}, 3, false},   {{2, 3, 40}, 33, false}, {{33, 300}, 17, false}, {{1, 300}, 1, false},
                     {{29, 70}, 1, false}, {{4}, 5, false},         {{0, 5}, 4, false},     {{3, 0}, 5, false},
                     {{40, 6}, 9, true},   {{3, 2, 40}, 7, true},   {{50, 600}, 300, false}};
  for (bool avx : {true, false}) {
    cpu::set_gemm_f32_avx512(avx);
    for (const C& c : cases)
      for (DType dt : {DType::Float32, DType::Float64}) {
        const int64_t in_f = c.x.back();
        Tensor x = rnd(c.x, dt, 61);
        if (c.transposed) {  // same logical shape, stored with the first two dims swapped
          Shape st = c.x;
          std::swap(st[0], st[1]);
          x = rnd(st, dt, 61).transpose(0, 1);
          EXPECT_FALSE(x.is_contiguous());
        }
        Tensor w = rnd({c.out_f, in_f}, dt, 62), bias = rnd({c.out_f}, dt, 63) + 2.0;
        Tensor y = linear(x, w, bias);
        Shape ys = c.x;
        ys.back() = c.out_f;
        ASSERT_EQ(y.sizes(), ys);
        const int64_t rows = numel_of(Shape(c.x.begin(), c.x.end() - 1));
        auto ref = naive(x.reshape({rows, in_f}), w.t());  // (rows, out_f)
        auto bv = values(bias);
        for (size_t i = 0; i < ref.size(); ++i) ref[i] += bv[i % c.out_f];
        const double tol = dt == DType::Float32 ? 1e-5 * std::max<int64_t>(1, in_f / 40) : 1e-12;
        EXPECT_TRUE(tensor_near(y, ref, tol)) << shape_str(c.x) << " out_f " << c.out_f << " " << dt << " avx " << avx;
        EXPECT_TRUE(tensors_near(y, matmul(x, w.t()) + bias, tol)) << shape_str(c.x) << " " << dt;
      }
  }
  cpu::set_gemm_f32_avx512(true);
  // float16 takes matmul + add
  Tensor x = rnd({6, 5}, DType::Float32, 64), w = rnd({4, 5}, DType::Float32, 65),
         b = rnd({4}, DType::Float32, 66) + 2.0;
  EXPECT_FALSE(addmm_table().has(DeviceType::CPU, DType::Float16));
  Tensor y16 = linear(x.to(DType::Float16), w.to(DType::Float16), b.to(DType::Float16));
  EXPECT_EQ(y16.dtype(), DType::Float16);
  EXPECT_TRUE(tensors_near(y16.to(DType::Float32), linear(x, w, b), 3e-2));
}

// bfloat16 linear with a bias runs addmm: the bias joins the float32 sums and the
// result is rounded once. On the float32 path (operands widened as they are
// packed) that is, bit for bit, the float32 linear of the widened tensors
// rounded to bfloat16, where matmul + add would round twice; on the other paths
// it is within one bfloat16 rounding of it (a float32 summation order of their
// own). Shapes: one and several K blocks, ragged columns, a 3-D input, a
// transposed input. Gradients are those of matmul + add (within bfloat16).
TEST(Matmul, Bfloat16LinearRoundsOnceWithItsBias) {
  EXPECT_TRUE(addmm_table().has(DeviceType::CPU, DType::BFloat16));
  struct C {
    Shape x;
    int64_t out_f;
  };
  for (const C& c : {C{{7, 5}, 3}, C{{2, 9, 40}, 33}, C{{33, 700}, 17}, C{{40, 64}, 130}}) {
    const int64_t in_f = c.x.back();
    Tensor x = rnd(c.x, DType::Float32, 71).to(DType::BFloat16),
           w = rnd({c.out_f, in_f}, DType::Float32, 72).to(DType::BFloat16),
           b = (rnd({c.out_f}, DType::Float32, 73) + 2.0).to(DType::BFloat16);
    Tensor want = linear(x.to(DType::Float32), w.to(DType::Float32), b.to(DType::Float32));
    Tensor y = linear(x, w, b);
    ASSERT_EQ(y.dtype(), DType::BFloat16);
    if (cpu::bf16_gemm_path() == cpu::Bf16GemmPath::kFloat32 && cpu::gemm_f32_uses_avx512()) {
      EXPECT_TRUE(tensors_near(y.to(DType::Float32), want.to(DType::BFloat16).to(DType::Float32), 0.0))
          << shape_str(c.x);
    }
    // within one bfloat16 rounding (2^-8 relative) of the float32 result, whatever the path
    EXPECT_TRUE(tensors_near(y.to(DType::Float32), want, 1.0 / 256)) << shape_str(c.x);
  }
  // a transposed (non-contiguous) input, and gradients against matmul + add
  Tensor xt = rnd({12, 10}, DType::Float32, 74).to(DType::BFloat16).t().requires_grad_();  // (10, 12)
  Tensor w = rnd({6, 12}, DType::Float32, 75).to(DType::BFloat16).requires_grad_();
  Tensor b = (rnd({6}, DType::Float32, 76) + 2.0).to(DType::BFloat16).requires_grad_();
  Tensor y = linear(xt, w, b);
  Tensor g = rnd({10, 6}, DType::Float32, 77).to(DType::BFloat16);
  (y * g).sum().backward();
  Tensor x2 = xt.detach().clone().requires_grad_(), w2 = w.detach().clone().requires_grad_(),
         b2 = b.detach().clone().requires_grad_();
  Tensor y2 = matmul(x2, w2.t()) + b2;
  (y2 * g).sum().backward();
  EXPECT_TRUE(tensors_near(y.to(DType::Float32), y2.to(DType::Float32), 1.0 / 128));
  EXPECT_TRUE(tensors_near(xt.grad().to(DType::Float32), x2.grad().to(DType::Float32), 1.0 / 128));
  EXPECT_TRUE(tensors_near(w.grad().to(DType::Float32), w2.grad().to(DType::Float32), 1.0 / 128));
  EXPECT_TRUE(tensors_near(b.grad().to(DType::Float32), b2.grad().to(DType::Float32), 1.0 / 128));
}

// linear's weight and bias gradients come from one kernel where the device
// registers mm_row_sums (the CPU, float32: the bias gradient summed while the
// weight gradient's GEMM packs g^T): against the same computation in float64,
// with several K blocks (700 rows), a 3-D input, one output, on both float32
// paths, and with only the weight or only the bias requiring grad.
TEST(Matmul, LinearWeightAndBiasGradientsFromOnePass) {
  EXPECT_TRUE(mm_row_sums_table().has(DeviceType::CPU, DType::Float32));
  EXPECT_FALSE(mm_row_sums_table().has(DeviceType::CPU, DType::Float64));
  struct C {
    Shape x;
    int64_t out_f;
  };
  for (bool avx : {true, false}) {
    cpu::set_gemm_f32_avx512(avx);
    for (const C& c : {C{{700, 40}, 70}, C{{3, 5, 33}, 17}, C{{1, 4}, 1}, C{{64, 9}, 300}})
      for (int which = 0; which < 3; ++which) {  // both, weight only, bias only
        const int64_t in_f = c.x.back();
        Shape ys = c.x;
        ys.back() = c.out_f;
        Tensor gy = rnd(ys, DType::Float64, 94);
        auto run = [&](DType dt) {
          Tensor x = rnd(c.x, DType::Float64, 91).to(dt).requires_grad_(),
                 w = rnd({c.out_f, in_f}, DType::Float64, 92).to(dt).requires_grad_(which != 2),
                 b = (rnd({c.out_f}, DType::Float64, 93) + 2.0).to(dt).requires_grad_(which != 1);
          (linear(x, w, b) * gy.to(dt)).sum().backward();
          return std::vector<Tensor>{x.grad(), w.grad(), b.grad()};
        };
        const std::vector<Tensor> got = run(DType::Float32), want = run(DType::Float64);
        const std::string what = shape_str(c.x) + " out_f " + std::to_string(c.out_f) + " case " +
                                 std::to_string(which) + (avx ? " avx512" : " eigen");
        for (int t = 0; t < 3; ++t) {
          ASSERT_EQ(got[t].defined(), want[t].defined()) << what << " grad " << t;
          if (got[t].defined()) {
            EXPECT_TRUE(tensors_near(got[t].to(DType::Float64), want[t], 2e-5 * std::sqrt(double(c.x[0]) + 1)))
                << what << " grad " << t;
          }
        }
      }
  }
  cpu::set_gemm_f32_avx512(true);
}

TEST(Matmul, LinearFusedBiasGradients) {
  for (DType dt : {DType::Float32, DType::Float64})
    for (const Shape& xs : {Shape{9, 300}, Shape{2, 3, 20}, Shape{20}}) {
      const int64_t in_f = xs.back(), out_f = 11;
      Tensor x = rnd(xs, dt, 71).requires_grad_(), w = rnd({out_f, in_f}, dt, 72).requires_grad_(),
             b = (rnd({out_f}, dt, 73) + 2.0).detach().requires_grad_();
      Tensor x0 = x.detach().clone().requires_grad_(), w0 = w.detach().clone().requires_grad_(),
             b0 = b.detach().clone().requires_grad_();
      Shape ys = xs;
      ys.back() = out_f;
      Tensor gy = rnd(ys, dt, 74);
      Tensor y = linear(x, w, b), y0 = matmul(x0, w0.t()) + b0;
      const double tol = dt == DType::Float32 ? 1e-4 : 1e-12;
      EXPECT_TRUE(tensors_near(y, y0, tol));
      (y * gy).sum().backward();
      (y0 * gy).sum().backward();
      EXPECT_TRUE(tensors_near(x.grad(), x0.grad(), tol)) << shape_str(xs) << " " << dt;
      EXPECT_TRUE(tensors_near(w.grad(), w0.grad(), tol)) << shape_str(xs) << " " << dt;
      EXPECT_TRUE(tensors_near(b.grad(), b0.grad(), tol)) << shape_str(xs) << " " << dt;
    }
  // central differences in float64 (the fused forward is what gradcheck perturbs)
  for (const Shape& xs : {Shape{5, 7}, Shape{7}, Shape{2, 2, 7}}) {
    Tensor x = rnd(xs, DType::Float64, 81).requires_grad_(), w = rnd({1, 7}, DType::Float64, 82).requires_grad_(),
           b = rnd({1}, DType::Float64, 83).requires_grad_();
    auto r = autograd::gradcheck([](const std::vector<Tensor>& v) { return linear(v[0], v[1], v[2]); }, {x, w, b});
    EXPECT_TRUE(r.ok) << shape_str(xs) << ": " << r.message;
    Tensor w3 = rnd({3, 7}, DType::Float64, 84).requires_grad_(), b3 = rnd({3}, DType::Float64, 85).requires_grad_();
    r = autograd::gradcheck([](const std::vector<Tensor>& v) { return linear(v[0], v[1], v[2]); }, {x, w3, b3});
    EXPECT_TRUE(r.ok) << shape_str(xs) << ": " << r.message;
  }
}

// Note [grad layout]: the gradient of a 2-D operand stored transposed comes out in
// that layout (so linear's weight.t() passes a contiguous gradient to the weight).
TEST(Matmul, TransposedOperandGradientLayout) {
  Tensor x = rnd({9, 6}, DType::Float32, 51).requires_grad_(), w = rnd({5, 6}, DType::Float32, 52).requires_grad_();
  Tensor gy = rnd({9, 5}, DType::Float32, 53);
  Tensor wt = w.t(), seen_wt;  // (6, 5), strides (1, 6)
  wt.register_hook([&](const Tensor& g) {
    seen_wt = g;
    return Tensor();
  });
  (mm(x, wt) * gy).sum().backward();
  EXPECT_EQ(seen_wt.strides(), wt.strides());
  EXPECT_TRUE(tensor_near(w.grad(), naive(gy.t(), x), 1e-5));  // dW = gy^T x
  EXPECT_TRUE(tensor_near(x.grad(), naive(gy, w), 1e-5));      // dx = gy W
  Tensor a = rnd({6, 9}, DType::Float32, 54).requires_grad_(), b = rnd({6, 5}, DType::Float32, 55).requires_grad_();
  Tensor at = a.t(), seen_at;  // (9, 6), strides (1, 9)
  at.register_hook([&](const Tensor& g) {
    seen_at = g;
    return Tensor();
  });
  (mm(at, b) * gy).sum().backward();
  EXPECT_EQ(seen_at.strides(), at.strides());
  EXPECT_TRUE(tensor_near(a.grad(), naive(b, gy.t()), 1e-5));  // dA = (gy B^T)^T = B gy^T
  EXPECT_TRUE(tensor_near(b.grad(), naive(a, gy), 1e-5));      // dB = at^T gy = a gy
}

TEST(Matmul, Gradcheck) {
  using autograd::gradcheck;
  auto chk = [](const Shape& sa, const Shape& sb) {
    Tensor a = rnd(sa, DType::Float64, 21).requires_grad_(), b = rnd(sb, DType::Float64, 22).requires_grad_();
    auto r = gradcheck([](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); }, {a, b});
    EXPECT_TRUE(r.ok) << shape_str(sa) << " @ " << shape_str(sb) << ": " << r.message;
  };
  chk({3, 4}, {4, 2});
  chk({4}, {4});
  chk({3, 4}, {4});
  chk({4}, {4, 2});
  chk({2, 3, 4}, {4, 2});
  chk({2, 3, 4}, {4});
  chk({2, 1, 3, 4}, {3, 4, 2});  // broadcast batch dims on both sides
  chk({3, 4}, {2, 4, 5});
  Tensor a = rnd({2, 3, 4}).requires_grad_(), b = rnd({2, 4, 5}).requires_grad_();
  EXPECT_TRUE(autograd::gradcheck([](const std::vector<Tensor>& x) { return bmm(x[0], x[1]); }, {a, b}).ok);
  Tensor m1 = rnd({4, 3}).requires_grad_(), m2 = rnd({5, 4}).requires_grad_();
  EXPECT_TRUE(autograd::gradcheck([](const std::vector<Tensor>& x) { return mm(x[0].t(), x[1].t()); }, {m1, m2}).ok);
  Tensor x = rnd({2, 3, 4}).requires_grad_(), w = rnd({5, 4}, DType::Float64, 3).requires_grad_(),
         bias = rnd({5}, DType::Float64, 4).requires_grad_();
  auto r = autograd::gradcheck([](const std::vector<Tensor>& v) { return linear(v[0], v[1], v[2]); }, {x, w, bias});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(Matmul, BackwardBroadcastSumsBatch) {
  Tensor a = ones({3, 2, 2}).requires_grad_();
  Tensor b = ones({2, 2}).requires_grad_();
  matmul(a, b).sum().backward();
  EXPECT_EQ(b.grad().sizes(), (Shape{2, 2}));
  EXPECT_TRUE(tensor_near(b.grad(), {6, 6, 6, 6}));  // 3 batches x 2 rows
  Tensor c = ones({1, 2, 2}).requires_grad_();
  Tensor d = ones({4, 2, 2}).requires_grad_();
  matmul(c, d).sum().backward();
  EXPECT_EQ(c.grad().sizes(), (Shape{1, 2, 2}));
  EXPECT_TRUE(tensor_near(c.grad(), {8, 8, 8, 8}));
}

TEST(Matmul, ThreadCountDoesNotChangeResult) {
  Tensor a = rnd({300, 200}, DType::Float32, 31), b = rnd({200, 150}, DType::Float32, 32);
  Tensor w1 = rnd({40, 300}, DType::Float32, 33), w2 = rnd({300, 900}, DType::Float32, 34);  // wide C
  int prev = get_num_threads();
  set_num_threads(1);
  Tensor c1 = mm(a, b);
  Tensor wide1 = mm(w1, w2);
  Tensor cb1 = matmul(rnd({5, 70, 60}, DType::Float32, 1), rnd({60, 90}, DType::Float32, 2).t().contiguous().t());
  set_num_threads(std::max(2, prev));
  Tensor c2 = mm(a, b);
  Tensor wide2 = mm(w1, w2);
  Tensor cb2 = matmul(rnd({5, 70, 60}, DType::Float32, 1), rnd({60, 90}, DType::Float32, 2).t().contiguous().t());
  set_num_threads(prev);
  EXPECT_EQ(values(c1), values(c2));
  EXPECT_EQ(values(cb1), values(cb2));
  EXPECT_EQ(values(wide1), values(wide2));
  EXPECT_TRUE(tensor_near(wide2, naive(w1, w2), 1e-5));
}

// Throughput report (not a pass/fail threshold: the machine is shared).
TEST(Matmul, Sgemm1024Throughput) {
  Tensor a = rnd({1024, 1024}, DType::Float32, 41), b = rnd({1024, 1024}, DType::Float32, 42);
  Tensor c = mm(a, b);  // warm up
  auto t0 = std::chrono::steady_clock::now();
  int reps = 10;
  for (int i = 0; i < reps; ++i) c = mm(a, b);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double gflops = 2.0 * 1024 * 1024 * 1024 * reps / s / 1e9;
  std::printf("sgemm 1024: %.1f GFLOP/s (%d threads)\n", gflops, get_num_threads());
  // other common shapes (MLP layer and its backward, attention-sized bmm, wide C)
  auto rate = [](const Tensor& x, const Tensor& y, const char* what) {
    Tensor r = matmul(x, y);
    auto s0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 5; ++i) r = matmul(x, y);
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
    double flops = 2.0 * x.numel() / x.size(-1) * x.size(-1) * y.size(-1) * 5;
    std::printf("%s: %.1f GFLOP/s\n", what, flops / sec / 1e9);
  };
  rate(rnd({128, 784}, DType::Float32), rnd({784, 512}, DType::Float32), "mlp fwd 128x784x512");
  rate(rnd({128, 784}, DType::Float32).t(), rnd({128, 512}, DType::Float32), "mlp gradW (transposed) 784x128x512");
  rate(rnd({96, 64, 64}, DType::Float32), rnd({96, 64, 64}, DType::Float32), "bmm 96x64x64x64");
  rate(rnd({32, 1024}, DType::Float32), rnd({1024, 4096}, DType::Float32), "wide 32x1024x4096");
  auto va = values(a.slice(0, 0, 4)), vb = values(b);
  auto vc = values(c.slice(0, 0, 4));
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 1024; j += 97) {
      double r = 0;
      for (int p = 0; p < 1024; ++p) r += va[i * 1024 + p] * vb[p * 1024 + j];
      EXPECT_NEAR(vc[i * 1024 + j], r, 1e-3);
    }
}

}  // namespace
}  // namespace weft
