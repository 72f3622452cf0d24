// Parameter initialisation, PyTorch's formulas (torch.nn.init): every function
// fills `t` in place (under no-grad) from weft's generator and returns it.
#pragma once

#include <string>
#include <utility>

#include "core/ops.h"

namespace weft::nn::init {

enum class Nonlinearity { Linear, ReLU, LeakyReLU, Tanh, Sigmoid };
enum class FanMode { FanIn, FanOut };

double calculate_gain(Nonlinearity nl, double param = 0.01);
// (fan_in, fan_out) of a weight: dim 1 and dim 0 times the receptive field size.
std::pair<int64_t, int64_t> fans(const Tensor& t);

Tensor& uniform_(Tensor& t, double low, double high);
Tensor& normal_(Tensor& t, double mean, double std);
Tensor& constant_(Tensor& t, double value);
Tensor& zeros_(Tensor& t);
Tensor& ones_(Tensor& t);
Tensor& xavier_uniform_(Tensor& t, double gain = 1.0);
Tensor& xavier_normal_(Tensor& t, double gain = 1.0);
Tensor& kaiming_uniform_(Tensor& t, double a = 0.0, FanMode mode = FanMode::FanIn,
                         Nonlinearity nl = Nonlinearity::LeakyReLU);
Tensor& kaiming_normal_(Tensor& t, double a = 0.0, FanMode mode = FanMode::FanIn,
                        Nonlinearity nl = Nonlinearity::LeakyReLU);
// A normal(mean, std) truncated to [a, b], by PyTorch's method: uniform values
// between the bounds' CDFs mapped through the inverse normal CDF (in float64),
// then clamped to [a, b] in t's dtype. Needs std > 0 and a < b.
Tensor& trunc_normal_(Tensor& t, double mean = 0.0, double std = 1.0, double a = -2.0, double b = 2.0);
// A (semi-)orthogonal matrix times gain: t viewed as (size(0), numel / size(0))
// gets orthonormal rows or columns, whichever are fewer, from the QR
// decomposition of a standard-normal matrix with R's diagonal made positive
// (PyTorch's orthogonal_). t needs at least 2 dims.
Tensor& orthogonal_(Tensor& t, double gain = 1.0);

}  // namespace weft::nn::init
