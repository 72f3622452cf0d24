// torch.nn.utils' flat-vector helpers: every parameter's values as one 1-D
// tensor, and back.
//
// Contract: parameters_to_vector concatenates each parameter flattened, in the
// given order (differentiable, as PyTorch's). vector_to_parameters copies
// consecutive slices of `vec` into the parameters in place, without recording
// autograd, and bumps their version counters; `vec` must be 1-D with exactly
// as many elements as the parameters together. All tensors must be on one
// device; errors name the parameter.
#pragma once

#include <vector>

#include "core/ops.h"

namespace weft::nn::utils {

Tensor parameters_to_vector(const std::vector<Tensor>& parameters);
void vector_to_parameters(const Tensor& vec, const std::vector<Tensor>& parameters);

}  // namespace weft::nn::utils
