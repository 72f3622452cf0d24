// Gradient clipping by total norm (torch.nn.utils.clip_grad_norm_) and by
// value (clip_grad_value_).
//
// Contract: the total norm is the norm_type-norm of all defined gradients taken
// together (norm_type > 0, or infinity for the max-abs norm), accumulated in
// float64. Every gradient is multiplied by min(1, max_norm / (total + 1e-6)),
// computed in the first gradient's dtype as PyTorch does; undefined gradients
// are skipped. Returns the total norm (before clipping). With
// error_if_nonfinite, a NaN/inf total is an error and nothing is scaled.
#pragma once

#include <limits>
#include <vector>

#include "core/tensor.h"

namespace weft::optim {

inline constexpr double kInfNorm = std::numeric_limits<double>::infinity();

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

// torch.nn.utils.clip_grad_value_: clamps every defined gradient, in place, to
// [-clip_value, clip_value] (NaN gradients stay NaN). clip_value must be >= 0.
void clip_grad_value_(const std::vector<Tensor>& params, double clip_value);

}  // namespace weft::optim
