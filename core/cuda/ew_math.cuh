// Device-side scalar helpers shared by the elementwise CUDA kernels (unary.cu,
// binary.cu, compare.cu, ternary.cu, random.cu); include only from .cu files.
//
// Contract: each helper mirrors the scalar expression of the CPU kernel in
// core/ops/*.cc for the same opmath type M (float for Half/BFloat16), so results
// agree up to the accuracy of the math library (exact for integer, bool, sign,
// comparison and selection ops). math_* pick the float or double CUDA function
// by type (never the __fast intrinsics). *_rn are the unfused IEEE operations:
// nvcc contracts a * b + c into an FMA by default, the host compiler may not,
// so code that must match the CPU bit for bit spells out its rounding.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace weft::cuda {

template <typename M>
__device__ __forceinline__ M math_exp(M x) {
  if constexpr (std::is_same_v<M, float>) return ::expf(x);
  else return ::exp(x);
}
template <typename M>
__device__ __forceinline__ M math_log(M x) {
  if constexpr (std::is_same_v<M, float>) return ::logf(x);
  else return ::log(x);
}
template <typename M>
__device__ __forceinline__ M math_sqrt(M x) {
  if constexpr (std::is_same_v<M, float>) return ::sqrtf(x);
  else return ::sqrt(x);
}
template <typename M>
__device__ __forceinline__ M math_tanh(M x) {
  if constexpr (std::is_same_v<M, float>) return ::tanhf(x);
  else return ::tanh(x);
}
template <typename M>
__device__ __forceinline__ M math_erf(M x) {
  if constexpr (std::is_same_v<M, float>) return ::erff(x);
  else return ::erf(x);
}
template <typename M>
__device__ __forceinline__ M math_cos(M x) {
  if constexpr (std::is_same_v<M, float>) return ::cosf(x);
  else return ::cos(x);
}
template <typename M>
__device__ __forceinline__ M math_sin(M x) {
  if constexpr (std::is_same_v<M, float>) return ::sinf(x);
  else return ::sin(x);
}
template <typename M>
__device__ __forceinline__ M math_log1p(M x) {
  if constexpr (std::is_same_v<M, float>) return ::log1pf(x);
  else return ::log1p(x);
}
template <typename M>
__device__ __forceinline__ M math_expm1(M x) {
  if constexpr (std::is_same_v<M, float>) return ::expm1f(x);
  else return ::expm1(x);
}
// floor, ceil and round (half to even, rint) of floating M; integers are whole already.
template <typename M>
__device__ __forceinline__ M math_floor(M x) {
  if constexpr (std::is_integral_v<M>) return x;
  else if constexpr (std::is_same_v<M, float>) return ::floorf(x);
  else return ::floor(x);
}
template <typename M>
__device__ __forceinline__ M math_ceil(M x) {
  if constexpr (std::is_integral_v<M>) return x;
  else if constexpr (std::is_same_v<M, float>) return ::ceilf(x);
  else return ::ceil(x);
}
template <typename M>
__device__ __forceinline__ M math_round_even(M x) {
  if constexpr (std::is_integral_v<M>) return x;
  else if constexpr (std::is_same_v<M, float>) return ::rintf(x);
  else return ::rint(x);
}
template <typename M>
__device__ __forceinline__ M math_pow(M x, M y) {
  if constexpr (std::is_same_v<M, float>) return ::powf(x, y);
  else return ::pow(x, y);
}

// IEEE round-to-nearest operations that nvcc never fuses.
template <typename M>
__device__ __forceinline__ M mul_rn(M a, M b) {
  if constexpr (std::is_same_v<M, float>) return __fmul_rn(a, b);
  else return __dmul_rn(a, b);
}
template <typename M>
__device__ __forceinline__ M add_rn(M a, M b) {
  if constexpr (std::is_same_v<M, float>) return __fadd_rn(a, b);
  else return __dadd_rn(a, b);
}
template <typename M>
__device__ __forceinline__ M sub_rn(M a, M b) {
  if constexpr (std::is_same_v<M, float>) return __fsub_rn(a, b);
  else return __dsub_rn(a, b);
}
template <typename M>
__device__ __forceinline__ M div_rn(M a, M b) {
  if constexpr (std::is_same_v<M, float>) return __fdiv_rn(a, b);
  else return __ddiv_rn(a, b);
}
template <typename M>
__device__ __forceinline__ M sqrt_rn(M a) {
  if constexpr (std::is_same_v<M, float>) return __fsqrt_rn(a);
  else return __dsqrt_rn(a);
}
template <typename M>
__device__ __forceinline__ M fma_rn(M a, M b, M c) {
  if constexpr (std::is_same_v<M, float>) return __fmaf_rn(a, b, c);
  else return __fma_rn(a, b, c);
}

template <typename M>
__device__ __forceinline__ bool is_nan(M x) {
  if constexpr (std::is_floating_point_v<M>) return x != x;
  else return false;
}

// sign and abs exactly as core/ops/unary.cc (NaN -> 0 for sign; -0 stays -0 for abs).
template <typename M>
__device__ __forceinline__ M sign_of(M x) {
  if constexpr (std::is_same_v<M, bool>) return x;
  else if constexpr (std::is_unsigned_v<M>) return M(x > M(0));
  else return M((M(0) < x) - (x < M(0)));
}
template <typename M>
__device__ __forceinline__ M abs_of(M x) {
  if constexpr (std::is_unsigned_v<M> || std::is_same_v<M, bool>) return x;
  else return x < M(0) ? M(-x) : x;
}

// Integer power by squaring; negative exponents follow PyTorch (1, -1 -> +-1, else 0).
template <typename M>
__device__ __forceinline__ M int_pow(M base, M e) {
  if constexpr (std::is_signed_v<M>) {
    if (e < 0) {
      if (base == 1) return 1;
      if (base == -1) return (e & 1) ? -1 : 1;
      return 0;
    }
  }
  M r = 1;
  while (e) {
    if (e & 1) r = static_cast<M>(r * base);
    base = static_cast<M>(base * base);
    e = static_cast<M>(e >> 1);
  }
  return r;
}

}  // namespace weft::cuda
