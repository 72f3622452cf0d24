// CUDA kernels for the in-place pointwise updates addcmul_, addcdiv_, lerp_
// (core/kernels/ternary.h).
//
// Contract: as the CPU kernels in core/ops/ternary.cc: out = a + v * t1 * t2,
// a + v * t1 / t2, a + w * (t1 - a), in opmath with v/w rounded to it; addcmul_
// for numeric dtypes, addcdiv_ and lerp_ for floating ones. All operands have
// out's shape and dtype (any strides; out may alias a).
#include "core/cuda/loops.cuh"
#include "core/kernels/ternary.h"

namespace weft::cuda {
namespace {

template <typename M>
struct AddcmulFn {
  M v;
  __device__ __forceinline__ M operator()(M x, M y, M z) const { return x + v * y * z; }
};
template <typename M>
struct AddcdivFn {
  M v;
  __device__ __forceinline__ M operator()(M x, M y, M z) const { return x + v * y / z; }
};
template <typename M>
struct LerpFn {
  M w;
  __device__ __forceinline__ M operator()(M x, M e) const { return x + w * (e - x); }
};

template <typename T>
void cuda_addcmul(const Tensor& out, const Tensor& a, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  using M = opmath_t<T>;
  if constexpr (in_set(dtype_of<T>, kNumericTypes))
    elementwise<T, T, T, T>(out, {a, t1, t2}, AddcmulFn<M>{value.to<M>()});
}
template <typename T>
void cuda_addcdiv(const Tensor& out, const Tensor& a, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  using M = opmath_t<T>;
  if constexpr (in_set(dtype_of<T>, kFloatingTypes))
    elementwise<T, T, T, T>(out, {a, t1, t2}, AddcdivFn<M>{value.to<M>()});
}
// t2 is unused (the table signature is shared).
template <typename T>
void cuda_lerp(const Tensor& out, const Tensor& a, const Tensor& end, const Tensor&, const Scalar& weight) {
  using M = opmath_t<T>;
  if constexpr (in_set(dtype_of<T>, kFloatingTypes)) elementwise<T, T, T>(out, {a, end}, LerpFn<M>{weight.to<M>()});
}
WEFT_REGISTER_KERNEL(addcmul_table(), DeviceType::CUDA, kNumericTypes, cuda_addcmul);
WEFT_REGISTER_KERNEL(addcdiv_table(), DeviceType::CUDA, kFloatingTypes, cuda_addcdiv);
WEFT_REGISTER_KERNEL(lerp_table(), DeviceType::CUDA, kFloatingTypes, cuda_lerp);

}  // namespace
}  // namespace weft::cuda
