// Inline definitions of Tensor's convenience methods: each forwards to the free
// function of the same name in core/ops.h. Included at the end of core/ops.h.
#pragma once

namespace weft {

inline Tensor Tensor::to(DType d) const { return to_dtype(*this, d); }
inline Tensor Tensor::to(Device d) const { return to_device(*this, d); }
inline Tensor Tensor::to(const TensorOptions& o) const { return to_device(to_dtype(*this, o.dtype), o.device); }
inline Tensor Tensor::clone() const { return weft::clone(*this); }
inline Tensor Tensor::contiguous() const { return weft::contiguous(*this); }
inline Tensor& Tensor::copy_(const Tensor& src) { return weft::copy_(*this, src); }
inline Tensor& Tensor::fill_(const Scalar& v) { return weft::fill_(*this, v); }
inline Tensor& Tensor::zero_() { return weft::zero_(*this); }

inline Tensor Tensor::view(const Shape& s) const { return weft::view(*this, s); }
inline Tensor Tensor::reshape(const Shape& s) const { return weft::reshape(*this, s); }
inline Tensor Tensor::flatten(int64_t a, int64_t b) const { return weft::flatten(*this, a, b); }
inline Tensor Tensor::transpose(int64_t a, int64_t b) const { return weft::transpose(*this, a, b); }
inline Tensor Tensor::t() const { return weft::transpose(*this, 0, dim() < 2 ? 0 : 1); }
inline Tensor Tensor::permute(const std::vector<int64_t>& d) const { return weft::permute(*this, d); }
inline Tensor Tensor::slice(int64_t d, std::optional<int64_t> s, std::optional<int64_t> e, int64_t st) const {
  return weft::slice(*this, d, s, e, st);
}
inline Tensor Tensor::narrow(int64_t d, int64_t s, int64_t l) const { return weft::narrow(*this, d, s, l); }
inline Tensor Tensor::select(int64_t d, int64_t i) const { return weft::select(*this, d, i); }
inline Tensor Tensor::expand(const Shape& s) const { return weft::expand(*this, s); }
inline Tensor Tensor::squeeze() const { return weft::squeeze(*this); }
inline Tensor Tensor::squeeze(int64_t d) const { return weft::squeeze(*this, d); }
inline Tensor Tensor::unsqueeze(int64_t d) const { return weft::unsqueeze(*this, d); }

inline Tensor Tensor::add(const Tensor& o, const Scalar& a) const { return weft::add(*this, o, a); }
inline Tensor Tensor::sub(const Tensor& o, const Scalar& a) const { return weft::sub(*this, o, a); }
inline Tensor Tensor::mul(const Tensor& o) const { return weft::mul(*this, o); }
inline Tensor Tensor::div(const Tensor& o) const { return weft::div(*this, o); }
inline Tensor Tensor::pow(const Tensor& o) const { return weft::pow(*this, o); }
inline Tensor Tensor::pow(const Scalar& e) const { return weft::pow(*this, e); }
inline Tensor Tensor::neg() const { return weft::neg(*this); }
inline Tensor Tensor::exp() const { return weft::exp(*this); }
inline Tensor Tensor::log() const { return weft::log(*this); }
inline Tensor Tensor::sqrt() const { return weft::sqrt(*this); }
inline Tensor Tensor::rsqrt() const { return weft::rsqrt(*this); }
inline Tensor Tensor::abs() const { return weft::abs(*this); }
inline Tensor Tensor::relu() const { return weft::relu(*this); }
inline Tensor Tensor::sigmoid() const { return weft::sigmoid(*this); }
inline Tensor Tensor::tanh() const { return weft::tanh(*this); }
inline Tensor Tensor::sin() const { return weft::sin(*this); }
inline Tensor Tensor::cos() const { return weft::cos(*this); }
inline Tensor Tensor::erf() const { return weft::erf(*this); }
inline Tensor Tensor::log1p() const { return weft::log1p(*this); }
inline Tensor Tensor::expm1() const { return weft::expm1(*this); }
inline Tensor Tensor::reciprocal() const { return weft::reciprocal(*this); }
inline Tensor Tensor::floor() const { return weft::floor(*this); }
inline Tensor Tensor::ceil() const { return weft::ceil(*this); }
inline Tensor Tensor::round() const { return weft::round(*this); }
inline Tensor Tensor::clamp(std::optional<Scalar> lo, std::optional<Scalar> hi) const {
  return weft::clamp(*this, lo, hi);
}
inline Tensor Tensor::matmul(const Tensor& o) const { return weft::matmul(*this, o); }
inline Tensor Tensor::sum() const { return weft::sum(*this); }
inline Tensor Tensor::sum(const std::vector<int64_t>& d, bool k) const { return weft::sum(*this, d, k); }
inline Tensor Tensor::mean() const { return weft::mean(*this); }
inline Tensor Tensor::mean(const std::vector<int64_t>& d, bool k) const { return weft::mean(*this, d, k); }
inline Tensor Tensor::max() const { return weft::max(*this); }
inline Tensor Tensor::min() const { return weft::min(*this); }
inline Tensor Tensor::argmax(std::optional<int64_t> d, bool k) const { return weft::argmax(*this, d, k); }
inline Tensor Tensor::softmax(int64_t d) const { return weft::softmax(*this, d); }
inline Tensor Tensor::log_softmax(int64_t d) const { return weft::log_softmax(*this, d); }
inline Tensor Tensor::masked_fill(const Tensor& m, const Scalar& v) const { return weft::masked_fill(*this, m, v); }

inline Tensor& Tensor::add_(const Tensor& o, const Scalar& a) { return weft::add_(*this, o, a); }
inline Tensor& Tensor::add_(const Scalar& o) { return weft::add_(*this, wrapped_scalar(o, dtype(), device())); }
inline Tensor& Tensor::sub_(const Tensor& o, const Scalar& a) { return weft::sub_(*this, o, a); }
inline Tensor& Tensor::mul_(const Tensor& o) { return weft::mul_(*this, o); }
inline Tensor& Tensor::mul_(const Scalar& o) { return weft::mul_(*this, wrapped_scalar(o, dtype(), device())); }
inline Tensor& Tensor::div_(const Tensor& o) { return weft::div_(*this, o); }
inline Tensor& Tensor::div_(const Scalar& o) { return weft::div_(*this, wrapped_scalar(o, dtype(), device())); }

inline Tensor Tensor::cumsum(int64_t d) const { return weft::cumsum(*this, d); }
inline Tensor Tensor::flip(const std::vector<int64_t>& d) const { return weft::flip(*this, d); }
inline Tensor Tensor::roll(const std::vector<int64_t>& s, const std::vector<int64_t>& d) const {
  return weft::roll(*this, s, d);
}
inline Tensor Tensor::repeat(const std::vector<int64_t>& r) const { return weft::repeat(*this, r); }
inline Tensor Tensor::tile(const std::vector<int64_t>& r) const { return weft::tile(*this, r); }
inline std::vector<Tensor> Tensor::unbind(int64_t d) const { return weft::unbind(*this, d); }
inline std::tuple<Tensor, Tensor> Tensor::sort(int64_t d, bool desc) const { return weft::sort(*this, d, desc); }
inline Tensor Tensor::argsort(int64_t d, bool desc) const { return weft::argsort(*this, d, desc); }
inline std::tuple<Tensor, Tensor> Tensor::topk(int64_t k, int64_t d, bool largest) const {
  return weft::topk(*this, k, d, largest);
}

}  // namespace weft
