// Helpers for GPU tests: skip without a GPU, poison outputs, compare a CUDA op
// with the CPU kernel on the same inputs.
//
// Contract: WEFT_REQUIRE_GPU() at the top of a test makes it GTEST_SKIP (reported
// as skipped, not passed) when no CUDA GPU is visible, with the driver's reason in
// the skip message (the GPU bundle's run.sh prints it when every test skipped). tolerance(dtype) is the
// relative tolerance used for CUDA-vs-CPU comparisons: float64 1e-10, float32 1e-5,
// bfloat16 2e-2, float16 4e-3 (integers and bool must match exactly).
#pragma once

#include <functional>
#include <vector>

#include <gtest/gtest.h>

#include "core/cuda/allocator.h"
#include "core/cuda/runtime.h"
#include "core/ops.h"
#include "tests/testing.h"

#define WEFT_REQUIRE_GPU()                                                                                \
  do {                                                                                                    \
    if (!::weft::cuda::is_available())                                                                    \
      GTEST_SKIP() << "no CUDA GPU visible (" << ::weft::cuda::unavailable_reason() << "): test skipped"; \
  } while (0)

namespace weft::testing {

inline const Device kGPU{DeviceType::CUDA, 0};

inline double tolerance(DType dt) {
  switch (dt) {
    case DType::Float64: return 1e-10;
    case DType::Float32: return 1e-5;
    case DType::BFloat16: return 2e-2;
    case DType::Float16: return 4e-3;
    default: return 0.0;
  }
}

// Fills `t` (any device) with NaN for floating dtypes and 0x5A-ish garbage
// otherwise, so elements a kernel forgets to write are caught.
inline void poison(Tensor& t) {
  if (is_floating(t.dtype())) fill_(t, std::numeric_limits<double>::quiet_NaN());
  else fill_(t, 77);
}

// Uninitialised-looking output on the GPU: allocated then poisoned.
inline Tensor poisoned_empty(const Shape& s, DType dt) {
  Tensor t = empty(s, {dt, kGPU});
  poison(t);
  return t;
}

// Runs `fn` on CPU inputs and on GPU copies of them; compares every output.
inline ::testing::AssertionResult matches_cpu(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
                                              const std::vector<Tensor>& cpu_inputs, double tol = -1) {
  std::vector<Tensor> gpu_inputs;
  for (const Tensor& t : cpu_inputs) gpu_inputs.push_back(t.to(kGPU));
  std::vector<Tensor> want = fn(cpu_inputs);
  std::vector<Tensor> got = fn(gpu_inputs);
  if (want.size() != got.size()) return ::testing::AssertionFailure() << "output count differs";
  for (size_t i = 0; i < want.size(); ++i) {
    if (!got[i].device().is_cuda())
      return ::testing::AssertionFailure() << "output " << i << " is on " << got[i].device() << ", expected cuda";
    if (got[i].dtype() != want[i].dtype())
      return ::testing::AssertionFailure()
             << "output " << i << " dtype " << got[i].dtype() << " != " << want[i].dtype();
    double t = tol >= 0 ? tol : tolerance(want[i].dtype());
    auto r = tensors_near(got[i], want[i], t);
    if (!r) return ::testing::AssertionFailure() << "output " << i << ": " << r.message();
  }
  return ::testing::AssertionSuccess();
}

}  // namespace weft::testing
