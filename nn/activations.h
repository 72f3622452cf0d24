// The activation layers: each forwards to its functional form (core/ops.h,
// core/nn_ops.h) with PyTorch's defaults; PReLU owns its slopes.
#pragma once

#include <cstdint>

#include "core/nn_ops.h"
#include "nn/module.h"

namespace weft::nn {

class ReLU : public Module {
 public:
  ReLU() : Module("ReLU") {}
  Tensor forward(const Tensor& x) override { return relu(x); }
};
class GELU : public Module {
 public:
  explicit GELU(GeluApproximation approximate = GeluApproximation::None) : Module("GELU"), approximate(approximate) {}
  Tensor forward(const Tensor& x) override { return gelu(x, approximate); }
  GeluApproximation approximate;
};
class SiLU : public Module {
 public:
  SiLU() : Module("SiLU") {}
  Tensor forward(const Tensor& x) override { return silu(x); }
};
class Tanh : public Module {
 public:
  Tanh() : Module("Tanh") {}
  Tensor forward(const Tensor& x) override { return weft::tanh(x); }
};
class Sigmoid : public Module {
 public:
  Sigmoid() : Module("Sigmoid") {}
  Tensor forward(const Tensor& x) override { return sigmoid(x); }
};
class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(double negative_slope = 0.01) : Module("LeakyReLU"), negative_slope(negative_slope) {}
  Tensor forward(const Tensor& x) override { return leaky_relu(x, negative_slope); }
  double negative_slope;
};
class Softplus : public Module {
 public:
  explicit Softplus(double beta = 1.0, double threshold = 20.0)
      : Module("Softplus"), beta(beta), threshold(threshold) {}
  Tensor forward(const Tensor& x) override { return softplus(x, beta, threshold); }
  double beta, threshold;
};
class ELU : public Module {
 public:
  explicit ELU(double alpha = 1.0) : Module("ELU"), alpha(alpha) {}
  Tensor forward(const Tensor& x) override { return elu(x, alpha); }
  double alpha;
};
class Softmax : public Module {
 public:
  explicit Softmax(int64_t dim) : Module("Softmax"), dim(dim) {}
  Tensor forward(const Tensor& x) override { return softmax(x, dim); }
  int64_t dim;
};
class LogSoftmax : public Module {
 public:
  explicit LogSoftmax(int64_t dim) : Module("LogSoftmax"), dim(dim) {}
  Tensor forward(const Tensor& x) override { return log_softmax(x, dim); }
  int64_t dim;
};
class Hardtanh : public Module {
 public:
  explicit Hardtanh(double min_val = -1.0, double max_val = 1.0)
      : Module("Hardtanh"), min_val(min_val), max_val(max_val) {}
  Tensor forward(const Tensor& x) override { return hardtanh(x, min_val, max_val); }
  double min_val, max_val;
};
class ReLU6 : public Module {
 public:
  ReLU6() : Module("ReLU6") {}
  Tensor forward(const Tensor& x) override { return relu6(x); }
};
class Hardsigmoid : public Module {
 public:
  Hardsigmoid() : Module("Hardsigmoid") {}
  Tensor forward(const Tensor& x) override { return hardsigmoid(x); }
};
class Hardswish : public Module {
 public:
  Hardswish() : Module("Hardswish") {}
  Tensor forward(const Tensor& x) override { return hardswish(x); }
};
class Mish : public Module {
 public:
  Mish() : Module("Mish") {}
  Tensor forward(const Tensor& x) override { return mish(x); }
};
class SELU : public Module {
 public:
  SELU() : Module("SELU") {}
  Tensor forward(const Tensor& x) override { return selu(x); }
};
class CELU : public Module {
 public:
  explicit CELU(double alpha = 1.0) : Module("CELU"), alpha(alpha) {}
  Tensor forward(const Tensor& x) override { return celu(x, alpha); }
  double alpha;
};
class LogSigmoid : public Module {
 public:
  LogSigmoid() : Module("LogSigmoid") {}
  Tensor forward(const Tensor& x) override { return logsigmoid(x); }
};
class Softsign : public Module {
 public:
  Softsign() : Module("Softsign") {}
  Tensor forward(const Tensor& x) override { return softsign(x); }
};
class GLU : public Module {
 public:
  explicit GLU(int64_t dim = -1) : Module("GLU"), dim(dim) {}
  Tensor forward(const Tensor& x) override { return glu(x, dim); }
  int64_t dim;
};
// PReLU's slopes: num_parameters of them (1, or the input's channels, dim 1),
// each starting at init (PyTorch's 0.25).
class PReLU : public Module {
 public:
  explicit PReLU(int64_t num_parameters = 1, double init = 0.25);
  Tensor forward(const Tensor& x) override { return prelu(x, weight); }
  Tensor weight;  // (num_parameters)
  int64_t num_parameters;
};

}  // namespace weft::nn
