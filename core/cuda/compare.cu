// CUDA kernels for comparisons, logical ops and where (core/kernels/compare.h).
//
// Contract: as the CPU kernels in core/ops/compare.cc, for every dtype:
// predicates compare opmath values (NaN compares unequal to everything) and
// write bool; logical ops treat nonzero as true; where selects from a and b by
// a bool condition. Operands arrive expanded to out's shape (any strides).
#include "core/cuda/ew_math.cuh"
#include "core/cuda/loops.cuh"
#include "core/kernels/compare.h"

namespace weft::cuda {
namespace {

// WEFT_CUDA_PREDICATE(name, expr): bool `expr` of x, y (opmath type M) for all dtypes.
#define WEFT_CUDA_PREDICATE(name, ...)                                    \
  struct name##_fn {                                                      \
    template <typename M>                                                 \
    __device__ __forceinline__ bool operator()(M x, M y) const {          \
      return __VA_ARGS__;                                                 \
    }                                                                     \
  };                                                                      \
  template <typename T>                                                   \
  void cuda_##name(const Tensor& out, const Tensor& a, const Tensor& b) { \
    elementwise<bool, T, T>(out, {a, b}, name##_fn{});                    \
  }                                                                       \
  WEFT_REGISTER_KERNEL(name##_table(), DeviceType::CUDA, kAllTypes, cuda_##name);

WEFT_CUDA_PREDICATE(eq, x == y)
WEFT_CUDA_PREDICATE(ne, x != y)
WEFT_CUDA_PREDICATE(lt, x < y)
WEFT_CUDA_PREDICATE(le, x <= y)
WEFT_CUDA_PREDICATE(gt, x > y)
WEFT_CUDA_PREDICATE(ge, x >= y)
WEFT_CUDA_PREDICATE(logical_and, (x != M(0)) && (y != M(0)))
WEFT_CUDA_PREDICATE(logical_or, (x != M(0)) || (y != M(0)))
WEFT_CUDA_PREDICATE(logical_xor, (x != M(0)) != (y != M(0)))

struct NotFn {
  template <typename M>
  __device__ __forceinline__ bool operator()(M x) const {
    return x == M(0);
  }
};
struct WhereFn {
  template <typename M>
  __device__ __forceinline__ M operator()(bool c, M x, M y) const {
    return c ? x : y;
  }
};

template <typename T>
void cuda_logical_not(const Tensor& out, const Tensor& a) {
  elementwise<bool, T>(out, {a}, NotFn{});
}
template <typename T>
void cuda_where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  elementwise<T, bool, T, T>(out, {cond, a, b}, WhereFn{});
}
WEFT_REGISTER_KERNEL(logical_not_table(), DeviceType::CUDA, kAllTypes, cuda_logical_not);
WEFT_REGISTER_KERNEL(where_table(), DeviceType::CUDA, kAllTypes, cuda_where);

}  // namespace
}  // namespace weft::cuda
