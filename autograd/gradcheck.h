// gradcheck: compares autograd's gradients with central finite differences.
//
// Contract: `fn` maps float64 inputs to one output tensor. For a fixed pseudo-
// random projection v of the output, the analytical vector-Jacobian product
// (one backward with grad_output v) is compared with the numerical one,
// ((f(x + eps e_i) - f(x - eps e_i)) . v) / (2 eps) for every input element i.
// Inputs that do not require grad are not perturbed. Inputs may live on any
// device (non-CPU ones are perturbed through a host mirror copied back).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace weft::autograd {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  uint64_t seed = 0;
};

struct GradcheckResult {
  bool ok = true;
  std::string message;  // on failure: which input, which element, both values
  explicit operator bool() const { return ok; }
};

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& opts = {});

// Second derivatives (PyTorch's torch.autograd.gradgradcheck): for a fixed
// pseudo-random projection w of fn's output, the gradients of sum(fn(x) * w)
// with respect to every input that requires grad, built with create_graph
// (Note [double backward] in core/autograd_meta.h) and joined into one flat
// tensor, are gradchecked: their Jacobian, all second derivatives, against
// central differences of them. fn runs with grad mode on.
GradcheckResult gradgradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                              const std::vector<Tensor>& inputs, const GradcheckOptions& opts = {});

}  // namespace weft::autograd
