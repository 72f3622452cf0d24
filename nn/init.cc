#include "nn/init.h"

#include <cmath>

#include "core/autograd_meta.h"

namespace weft::nn::init {

double calculate_gain(Nonlinearity nl, double param) {
  switch (nl) {
    case Nonlinearity::Linear:
    case Nonlinearity::Sigmoid: return 1.0;
    case Nonlinearity::Tanh: return 5.0 / 3.0;
    case Nonlinearity::ReLU: return std::sqrt(2.0);
    case Nonlinearity::LeakyReLU: return std::sqrt(2.0 / (1.0 + param * param));
  }
  return 1.0;
}

std::pair<int64_t, int64_t> fans(const Tensor& t) {
  WEFT_CHECK(t.dim() >= 2,
             "init: fan in and fan out can not be computed for a tensor with fewer than 2 dims "
             "(shape ",
             shape_str(t.sizes()), ")");
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

Tensor& uniform_(Tensor& t, double low, double high) {
  NoGradGuard ng;
  return weft::uniform_(t, low, high);
}
Tensor& normal_(Tensor& t, double mean, double std) {
  NoGradGuard ng;
  return weft::normal_(t, mean, std);
}
Tensor& constant_(Tensor& t, double value) {
  NoGradGuard ng;
  return t.fill_(value);
}
Tensor& zeros_(Tensor& t) { return constant_(t, 0.0); }
Tensor& ones_(Tensor& t) { return constant_(t, 1.0); }

Tensor& xavier_uniform_(Tensor& t, double gain) {
  auto [fi, fo] = fans(t);
  double a = gain * std::sqrt(6.0 / static_cast<double>(fi + fo));
  return init::uniform_(t, -a, a);
}
Tensor& xavier_normal_(Tensor& t, double gain) {
  auto [fi, fo] = fans(t);
  return init::normal_(t, 0.0, gain * std::sqrt(2.0 / static_cast<double>(fi + fo)));
}

namespace {
double kaiming_std(const Tensor& t, double a, FanMode mode, Nonlinearity nl) {
  auto [fi, fo] = fans(t);
  int64_t fan = mode == FanMode::FanIn ? fi : fo;
  WEFT_CHECK(fan > 0, "init: kaiming init of a tensor with zero elements (shape ", shape_str(t.sizes()), ")");
  return calculate_gain(nl, a) / std::sqrt(static_cast<double>(fan));
}
}  // namespace

Tensor& kaiming_uniform_(Tensor& t, double a, FanMode mode, Nonlinearity nl) {
  double bound = std::sqrt(3.0) * kaiming_std(t, a, mode, nl);
  return init::uniform_(t, -bound, bound);
}
Tensor& kaiming_normal_(Tensor& t, double a, FanMode mode, Nonlinearity nl) {
  return init::normal_(t, 0.0, kaiming_std(t, a, mode, nl));
}

}  // namespace weft::nn::init
