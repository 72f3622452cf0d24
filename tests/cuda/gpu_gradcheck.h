// gpu_gradcheck: autograd::gradcheck of an op run on the GPU.
//
// Contract: gradcheck perturbs its leaves through host pointers, so the leaves
// stay float64 CPU tensors (requires_grad set here); `fn` receives GPU copies
// made with the differentiable Tensor::to(device) and its output is brought back
// with .cpu(), so the forward and backward of the op under test run on the GPU.
#pragma once

#include <functional>
#include <vector>

#include "autograd/gradcheck.h"
#include "tests/cuda/gpu_testing.h"

namespace weft::testing {

inline autograd::GradcheckResult gpu_gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                                               std::vector<Tensor> cpu_leaves,
                                               const autograd::GradcheckOptions& opts = {}) {
  for (Tensor& t : cpu_leaves) t = t.detach().cpu().to(DType::Float64).contiguous().requires_grad_(true);
  return autograd::gradcheck(
      [&fn](const std::vector<Tensor>& in) {
        std::vector<Tensor> g;
        for (const Tensor& t : in) g.push_back(t.to(kGPU));
        Tensor out = fn(g);
        WEFT_CHECK(out.device().is_cuda(), "gpu_gradcheck: fn returned a tensor on ", out.device());
        return out.cpu();
      },
      cpu_leaves, opts);
}

}  // namespace weft::testing
