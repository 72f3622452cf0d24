// CUDA optimizer kernels (optim/cuda/kernels.cu) against the CPU kernels of
// optim/kernels.cc: k SGD (momentum, dampening, nesterov, weight decay),
// Adam/AdamW (with AMSGrad), RMSprop (centered, momentum) and Adagrad steps on
// the GPU equal k steps on the CPU (float32 1e-6 relative,
// float64 1e-12; the kernels use the same roundings, so they are expected to be
// bit-identical), grad_norm (p = 1, 2, 3, inf, NaN) agrees with the CPU to
// float64 rounding and is run-to-run deterministic, grad_scale is exact.
// Skips without a GPU.
#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "core/ops.h"
#include "optim/kernels.h"
#include "tests/cuda/gpu_testing.h"

namespace weft {
namespace {
using optim::AdagradStepArgs;
using optim::AdamStepArgs;
using optim::RMSpropStepArgs;
using optim::SGDStepArgs;
using testing::kGPU;
using testing::rnd;
using testing::tensors_near;

double step_tol(DType dt) { return dt == DType::Float32 ? 1e-6 : 1e-12; }

// Runs `steps` SGD steps with fresh pseudo-random gradients on both devices.
void check_sgd(DType dt, int64_t n, SGDStepArgs a, int steps) {
  Tensor p_cpu = rnd({n}, dt, 1), b_cpu = zeros({n}, {dt});
  Tensor p_gpu = p_cpu.to(kGPU), b_gpu = b_cpu.to(kGPU);
  bool mom = a.momentum != 0;
  for (int k = 0; k < steps; ++k) {
    Tensor g = rnd({n}, dt, 100 + k);
    a.init_buffer = mom && k == 0;
    optim::sgd_step_table()(kCPU, dt, p_cpu, g, mom ? b_cpu : Tensor(), a);
    optim::sgd_step_table()(kGPU, dt, p_gpu, g.to(kGPU), mom ? b_gpu : Tensor(), a);
  }
  EXPECT_TRUE(tensors_near(p_gpu.cpu(), p_cpu, step_tol(dt))) << dt << " n=" << n;
  if (mom) {
    EXPECT_TRUE(tensors_near(b_gpu.cpu(), b_cpu, step_tol(dt))) << dt << " n=" << n;
  }
}

TEST(CudaOptim, SgdStepsMatchCpu) {
  WEFT_REQUIRE_GPU();
  for (DType dt : {DType::Float32, DType::Float64})
    for (int64_t n : {1, 7, 4099, 300001}) {
      check_sgd(dt, n, {.lr = 0.1}, 3);
      check_sgd(dt, n, {.lr = 0.05, .momentum = 0.9}, 5);
      check_sgd(dt, n, {.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 1e-2}, 5);
      check_sgd(dt, n, {.lr = 0.05, .momentum = 0.8, .weight_decay = 1e-3, .nesterov = true}, 5);
    }
}

void check_adam(DType dt, int64_t n, AdamStepArgs a, int steps, bool amsgrad = false) {
  Tensor p_cpu = rnd({n}, dt, 2), m_cpu = zeros({n}, {dt}), v_cpu = zeros({n}, {dt});
  Tensor vmax_cpu = amsgrad ? zeros({n}, {dt}) : Tensor();
  Tensor p_gpu = p_cpu.to(kGPU), m_gpu = m_cpu.to(kGPU), v_gpu = v_cpu.to(kGPU);
  Tensor vmax_gpu = amsgrad ? vmax_cpu.to(kGPU) : Tensor();
  for (int k = 0; k < steps; ++k) {
    Tensor g = rnd({n}, dt, 200 + k) * (k % 2 ? 0.1 : 1.0);  // shrinking v: the maximum matters
    a.step = k + 1;
    optim::adam_step_table()(kCPU, dt, p_cpu, g, m_cpu, v_cpu, vmax_cpu, a);
    optim::adam_step_table()(kGPU, dt, p_gpu, g.to(kGPU), m_gpu, v_gpu, vmax_gpu, a);
  }
  EXPECT_TRUE(tensors_near(p_gpu.cpu(), p_cpu, step_tol(dt))) << dt << " n=" << n;
  EXPECT_TRUE(tensors_near(m_gpu.cpu(), m_cpu, step_tol(dt))) << dt << " n=" << n;
  EXPECT_TRUE(tensors_near(v_gpu.cpu(), v_cpu, step_tol(dt))) << dt << " n=" << n;
  if (amsgrad) {
    EXPECT_TRUE(tensors_near(vmax_gpu.cpu(), vmax_cpu, step_tol(dt))) << dt << " n=" << n;
  }
}

TEST(CudaOptim, AdamAndAdamWStepsMatchCpu) {
  WEFT_REQUIRE_GPU();
  for (DType dt : {DType::Float32, DType::Float64})
    for (int64_t n : {1, 7, 4099, 300001}) {
      check_adam(dt, n, {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8}, 6);
      check_adam(dt, n, {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.1}, 6);
      check_adam(
          dt, n,
          {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .decoupled_weight_decay = true},
          6);
      // beta1 < 0.5: the lerp takes its other branch
      check_adam(dt, n, {.lr = 1e-2, .beta1 = 0.3, .beta2 = 0.9, .eps = 1e-8}, 4);
      check_adam(dt, n, {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8}, 6, /*amsgrad=*/true);
    }
}

void check_rmsprop(DType dt, int64_t n, RMSpropStepArgs a, int steps) {
  Tensor p_cpu = rnd({n}, dt, 3), sq_cpu = zeros({n}, {dt});
  Tensor ga_cpu = a.centered ? zeros({n}, {dt}) : Tensor(), buf_cpu = a.momentum != 0 ? zeros({n}, {dt}) : Tensor();
  Tensor p_gpu = p_cpu.to(kGPU), sq_gpu = sq_cpu.to(kGPU);
  Tensor ga_gpu = a.centered ? ga_cpu.to(kGPU) : Tensor(), buf_gpu = a.momentum != 0 ? buf_cpu.to(kGPU) : Tensor();
  for (int k = 0; k < steps; ++k) {
    Tensor g = rnd({n}, dt, 300 + k);
    optim::rmsprop_step_table()(kCPU, dt, p_cpu, g, sq_cpu, ga_cpu, buf_cpu, a);
    optim::rmsprop_step_table()(kGPU, dt, p_gpu, g.to(kGPU), sq_gpu, ga_gpu, buf_gpu, a);
  }
  EXPECT_TRUE(tensors_near(p_gpu.cpu(), p_cpu, step_tol(dt))) << dt << " n=" << n;
  EXPECT_TRUE(tensors_near(sq_gpu.cpu(), sq_cpu, step_tol(dt))) << dt << " n=" << n;
  if (a.centered) {
    EXPECT_TRUE(tensors_near(ga_gpu.cpu(), ga_cpu, step_tol(dt))) << dt << " n=" << n;
  }
  if (a.momentum != 0) {
    EXPECT_TRUE(tensors_near(buf_gpu.cpu(), buf_cpu, step_tol(dt))) << dt << " n=" << n;
  }
}

TEST(CudaOptim, RMSpropStepsMatchCpu) {
  WEFT_REQUIRE_GPU();
  for (DType dt : {DType::Float32, DType::Float64})
    for (int64_t n : {1, 7, 4099, 300001}) {
      check_rmsprop(dt, n, {.lr = 1e-2, .alpha = 0.99, .eps = 1e-8}, 5);
      check_rmsprop(dt, n, {.lr = 1e-2, .alpha = 0.9, .eps = 1e-6, .weight_decay = 0.1, .momentum = 0.9}, 5);
      check_rmsprop(dt, n, {.lr = 1e-3, .alpha = 0.99, .eps = 1e-8, .momentum = 0.5, .centered = true}, 5);
      check_rmsprop(dt, n, {.lr = 1e-3, .alpha = 0.3, .eps = 1e-8, .centered = true}, 4);  // the other lerp form
    }
}

void check_adagrad(DType dt, int64_t n, AdagradStepArgs a, double init, int steps) {
  Tensor p_cpu = rnd({n}, dt, 4), s_cpu = full({n}, init, {dt});
  Tensor p_gpu = p_cpu.to(kGPU), s_gpu = s_cpu.to(kGPU);
  for (int k = 0; k < steps; ++k) {
    Tensor g = rnd({n}, dt, 400 + k);
    a.step = k + 1;
    optim::adagrad_step_table()(kCPU, dt, p_cpu, g, s_cpu, a);
    optim::adagrad_step_table()(kGPU, dt, p_gpu, g.to(kGPU), s_gpu, a);
  }
  EXPECT_TRUE(tensors_near(p_gpu.cpu(), p_cpu, step_tol(dt))) << dt << " n=" << n;
  EXPECT_TRUE(tensors_near(s_gpu.cpu(), s_cpu, step_tol(dt))) << dt << " n=" << n;
}

TEST(CudaOptim, AdagradStepsMatchCpu) {
  WEFT_REQUIRE_GPU();
  for (DType dt : {DType::Float32, DType::Float64})
    for (int64_t n : {1, 7, 4099, 300001}) {
      check_adagrad(dt, n, {.lr = 1e-2, .eps = 1e-10}, 0.0, 5);
      check_adagrad(dt, n, {.lr = 0.1, .lr_decay = 0.05, .weight_decay = 0.01, .eps = 1e-8}, 0.1, 5);
    }
}

TEST(CudaOptim, GradNormMatchesCpuAndIsDeterministic) {
  WEFT_REQUIRE_GPU();
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dt : {DType::Float32, DType::Float64})
    for (int64_t n : {1, 7, 4096, 4097, 1000003}) {
      Tensor g = rnd({n}, dt, 5) * 3;
      Tensor gd = g.to(kGPU);
      for (double p : {1.0, 2.0, 3.0, inf}) {
        double want = optim::grad_norm_table()(kCPU, dt, g, p);
        double got = optim::grad_norm_table()(kGPU, dt, gd, p);
        if (std::isinf(p)) {
          EXPECT_EQ(got, want) << dt << " n=" << n;
        } else {
          EXPECT_NEAR(got, want, 1e-12 * std::abs(want)) << dt << " n=" << n << " p=" << p;
        }
        EXPECT_EQ(optim::grad_norm_table()(kGPU, dt, gd, p), got) << "not deterministic";
      }
    }
  // NaN propagates for every p
  Tensor g = rnd({10000}, DType::Float32, 6);
  g.data_ptr<float>()[7777] = std::numeric_limits<float>::quiet_NaN();
  for (double p : {1.0, 2.0, 3.0, inf})
    EXPECT_TRUE(std::isnan(optim::grad_norm_table()(kGPU, DType::Float32, g.to(kGPU), p))) << p;
}

TEST(CudaOptim, GradScaleIsExact) {
  WEFT_REQUIRE_GPU();
  for (DType dt : {DType::Float32, DType::Float64})
    for (int64_t n : {1, 4099, 300001}) {
      Tensor g = rnd({n}, dt, 9);
      Tensor gd = g.to(kGPU);
      optim::grad_scale_table()(kCPU, dt, g, 0.3);
      optim::grad_scale_table()(kGPU, dt, gd, 0.3);
      EXPECT_TRUE(tensors_near(gd.cpu(), g, 0)) << dt << " n=" << n;
    }
}

}  // namespace
}  // namespace weft
