// CUDA kernels for the binary elementwise tables (core/kernels/binary.h): add,
// mul, div, pow (tensor and scalar exponent), maximum, minimum and the
// maximum/minimum gradient shares.
//
// Contract: same dtypes and scalar formulas as the CPU kernels in
// core/ops/binary.cc: bool add is `or` and bool mul is `and`; integer pow is
// exact power by squaring with PyTorch's negative-exponent rule; maximum and
// minimum propagate NaN; the gradient share is 1 where the operand wins, 1/2
// on ties, 0 where it loses. Operands arrive expanded to out's shape (any strides).
#include "core/cuda/ew_math.cuh"
#include "core/cuda/loops.cuh"
#include "core/kernels/binary.h"

namespace weft::cuda {
namespace {

template <typename M>
struct AddFn {
  __device__ __forceinline__ M operator()(M x, M y) const {
    if constexpr (std::is_same_v<M, bool>) return x || y;
    else return x + y;
  }
};
template <typename M>
struct AddAlphaFn {
  M alpha;
  __device__ __forceinline__ M operator()(M x, M y) const { return x + alpha * y; }
};
template <typename M>
struct MulFn {
  __device__ __forceinline__ M operator()(M x, M y) const {
    if constexpr (std::is_same_v<M, bool>) return x && y;
    else return x * y;
  }
};
template <typename M>
struct DivFn {
  __device__ __forceinline__ M operator()(M x, M y) const { return x / y; }
};
template <typename M>
struct PowFn {
  __device__ __forceinline__ M operator()(M x, M y) const {
    if constexpr (std::is_integral_v<M>) return int_pow(x, y);
    else return math_pow(x, y);
  }
};
template <typename M>
struct MaximumFn {
  __device__ __forceinline__ M operator()(M x, M y) const { return is_nan(x) ? x : is_nan(y) ? y : (x > y ? x : y); }
};
template <typename M>
struct MinimumFn {
  __device__ __forceinline__ M operator()(M x, M y) const { return is_nan(x) ? x : is_nan(y) ? y : (x < y ? x : y); }
};
template <typename M>
struct MaximumGradFn {
  __device__ __forceinline__ M operator()(M g, M x, M y) const { return x > y ? g : x == y ? g * M(0.5) : M(0); }
};
template <typename M>
struct MinimumGradFn {
  __device__ __forceinline__ M operator()(M g, M x, M y) const { return x < y ? g : x == y ? g * M(0.5) : M(0); }
};

// pow with a scalar exponent.
template <typename M>
struct PowScalarFn {
  M e;
  __device__ __forceinline__ M operator()(M x) const {
    if constexpr (std::is_integral_v<M>) return int_pow(x, e);
    else return math_pow(x, e);
  }
};
template <typename M>
struct SquareFn {
  __device__ __forceinline__ M operator()(M x) const { return x * x; }
};
template <typename M>
struct CubeFn {
  __device__ __forceinline__ M operator()(M x) const { return x * x * x; }
};
template <typename M>
struct SqrtFn {
  __device__ __forceinline__ M operator()(M x) const { return math_sqrt(x); }
};
template <typename M>
struct ReciprocalFn {
  __device__ __forceinline__ M operator()(M x) const { return M(1) / x; }
};

template <typename T>
void cuda_add(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  using M = opmath_t<T>;
  if constexpr (std::is_same_v<T, bool>) {
    elementwise<T, T, T>(out, {a, b}, AddFn<M>{});
  } else {
    M al = alpha.to<M>();
    if (al == M(1)) elementwise<T, T, T>(out, {a, b}, AddFn<M>{});
    else elementwise<T, T, T>(out, {a, b}, AddAlphaFn<M>{al});
  }
}
template <typename T>
void cuda_mul(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar&) {
  elementwise<T, T, T>(out, {a, b}, MulFn<opmath_t<T>>{});
}
template <typename T>
void cuda_div(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar&) {
  if constexpr (in_set(dtype_of<T>, kFloatingTypes)) elementwise<T, T, T>(out, {a, b}, DivFn<opmath_t<T>>{});
}
template <typename T>
void cuda_pow(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar&) {
  if constexpr (in_set(dtype_of<T>, kNumericTypes)) elementwise<T, T, T>(out, {a, b}, PowFn<opmath_t<T>>{});
}
template <typename T>
void cuda_pow_scalar(const Tensor& out, const Tensor& a, const Scalar& es) {
  using M = opmath_t<T>;
  if constexpr (in_set(dtype_of<T>, kNumericTypes)) {
    M e = es.to<M>();
    if constexpr (std::is_integral_v<M>) {
      elementwise<T, T>(out, {a}, PowScalarFn<M>{e});
    } else {
      // the CPU's exact forms for common exponents
      if (e == M(2)) elementwise<T, T>(out, {a}, SquareFn<M>{});
      else if (e == M(3)) elementwise<T, T>(out, {a}, CubeFn<M>{});
      else if (e == M(1)) elementwise<T, T>(out, {a}, Identity{});
      else if (e == M(0.5)) elementwise<T, T>(out, {a}, SqrtFn<M>{});
      else if (e == M(-1)) elementwise<T, T>(out, {a}, ReciprocalFn<M>{});
      else elementwise<T, T>(out, {a}, PowScalarFn<M>{e});
    }
  }
}
template <typename T>
void cuda_maximum(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar&) {
  elementwise<T, T, T>(out, {a, b}, MaximumFn<opmath_t<T>>{});
}
template <typename T>
void cuda_minimum(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar&) {
  elementwise<T, T, T>(out, {a, b}, MinimumFn<opmath_t<T>>{});
}
template <typename T>
void cuda_maximum_backward(const Tensor& out, const Tensor& g, const Tensor& a, const Tensor& b) {
  if constexpr (in_set(dtype_of<T>, kFloatingTypes))
    elementwise<T, T, T, T>(out, {g, a, b}, MaximumGradFn<opmath_t<T>>{});
}
template <typename T>
void cuda_minimum_backward(const Tensor& out, const Tensor& g, const Tensor& a, const Tensor& b) {
  if constexpr (in_set(dtype_of<T>, kFloatingTypes))
    elementwise<T, T, T, T>(out, {g, a, b}, MinimumGradFn<opmath_t<T>>{});
}

WEFT_REGISTER_KERNEL(add_table(), DeviceType::CUDA, kAllTypes, cuda_add);
WEFT_REGISTER_KERNEL(mul_table(), DeviceType::CUDA, kAllTypes, cuda_mul);
WEFT_REGISTER_KERNEL(div_table(), DeviceType::CUDA, kFloatingTypes, cuda_div);
WEFT_REGISTER_KERNEL(pow_table(), DeviceType::CUDA, kNumericTypes, cuda_pow);
WEFT_REGISTER_KERNEL(pow_scalar_table(), DeviceType::CUDA, kNumericTypes, cuda_pow_scalar);
WEFT_REGISTER_KERNEL(maximum_table(), DeviceType::CUDA, kAllTypes, cuda_maximum);
WEFT_REGISTER_KERNEL(minimum_table(), DeviceType::CUDA, kAllTypes, cuda_minimum);
WEFT_REGISTER_KERNEL(maximum_backward_table(), DeviceType::CUDA, kFloatingTypes, cuda_maximum_backward);
WEFT_REGISTER_KERNEL(minimum_backward_table(), DeviceType::CUDA, kFloatingTypes, cuda_minimum_backward);

}  // namespace
}  // namespace weft::cuda
