#include "core/ops/elementwise_util.h"

#include "core/autograd_meta.h"

namespace weft::detail {
namespace {
int category(DType d) { return d == DType::Bool ? 0 : is_floating(d) ? 2 : 1; }
}  // namespace

DType result_type(const Tensor& a, const Tensor& b) {
  WEFT_CHECK(a.defined() && b.defined(), "elementwise op: undefined tensor argument");
  bool wa = a.impl()->is_wrapped_number() || (a.dim() == 0 && b.dim() > 0);
  bool wb = b.impl()->is_wrapped_number() || (b.dim() == 0 && a.dim() > 0);
  if (wa == wb) return promote_types(a.dtype(), b.dtype());
  const Tensor& scalar = wa ? a : b;
  const Tensor& tensor = wa ? b : a;
  if (category(scalar.dtype()) > category(tensor.dtype())) {
    if (!scalar.impl()->is_wrapped_number()) return scalar.dtype();
    return category(scalar.dtype()) == 2 ? DType::Float32 : DType::Int64;
  }
  return tensor.dtype();
}

void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  WEFT_CHECK(a.device() == b.device() || a.impl()->is_wrapped_number() || b.impl()->is_wrapped_number(), op,
             ": expected all tensors on the same device, got ", a.device(), " and ", b.device());
}

void check_devices(const char* op, std::initializer_list<std::reference_wrapper<const Tensor>> ts) {
  const Tensor* first = nullptr;
  for (const Tensor& t : ts) {
    if (!t.defined() || t.impl()->is_wrapped_number()) continue;
    if (!first) {
      first = &t;
      continue;
    }
    WEFT_CHECK(t.device() == first->device(), op, ": expected all tensors on the same device, got ", first->device(),
               " and ", t.device());
  }
}

Shape prepare_binary(const char* op, const Tensor& a, const Tensor& b, DType compute, Tensor& a_out, Tensor& b_out) {
  WEFT_CHECK(a.defined() && b.defined(), op, ": undefined tensor argument");
  check_same_device(op, a, b);
  Shape shape = broadcast_shapes(op, a.sizes(), b.sizes());
  Device dev = a.impl()->is_wrapped_number() ? b.device() : a.device();
  NoGradGuard ng;
  a_out = expand(a.detach().to(compute).to(dev), shape);
  b_out = expand(b.detach().to(compute).to(dev), shape);
  return shape;
}

Tensor wrap_scalar(const Scalar& s, const Tensor& like) {
  DType dt = s.default_dtype();
  if (dt == DType::Float32 && is_floating(like.dtype())) dt = like.dtype();
  return wrapped_scalar(s, dt, like.device());
}

void check_pointwise_loss(const char* op, const Tensor& input, const Tensor& target) {
  WEFT_CHECK(input.defined() && target.defined(), op, ": undefined input or target");
  // (a (N, 1) output against an (N) target would broadcast to (N, N) and
  // average the wrong differences without a word)
  WEFT_CHECK(input.sizes() == target.sizes(), op, ": input shape ", shape_str(input.sizes()), " and target shape ",
             shape_str(target.sizes()), " differ; ", op,
             " compares them element by element and does not broadcast (reshape, squeeze or expand one to the "
             "other's shape)");
}

Tensor apply_reduction(const Tensor& loss, Reduction reduction) {
  switch (reduction) {
    case Reduction::None: return loss;
    case Reduction::Mean: return mean(loss);
    case Reduction::Sum: return sum(loss);
  }
  return loss;
}

}  // namespace weft::detail
