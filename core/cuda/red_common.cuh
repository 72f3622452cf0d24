// Shared machinery of the CUDA reduction-family kernels (reduce, reduce_stats,
// softmax, loss, norms, embedding, index, attention softmax); include only from .cu.
//
// Contract:
//  - warp_reduce / block_reduce combine one value per thread with `merge` (any
//    associative, commutative functor; the result is returned to EVERY thread of
//    the block). block_reduce needs blockDim.x a multiple of 32 (<= 1024) and must
//    be reached by all threads of the block (it synchronises).
//  - WEFT_RED_REGISTER_{FLOATING,NUMERIC,ALL}(table, fn) register fn<T> on CUDA for
//    exactly those dtypes. (WEFT_REGISTER_KERNEL instantiates the template for every
//    dtype, which for device code means eight nvcc instantiations per kernel.)
//  - index_on(t, like): the int64 index tensor `t` on `like`'s device, contiguous
//    (front ends may hand CPU-resident, already range-checked indices).
//  - BadIndexFlag: device-side range check for indices that live on the GPU (the
//    host cannot validate them without a copy): kernels call report_bad_index;
//    the error (naming the op, the first offending index seen and the bound) is
//    thrown at the next synchronisation (Note [deferred index checks]).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <optional>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/cuda/check.h"
#include "core/cuda/index_checks.h"
#include "core/cuda/loops.cuh"
#include "core/cuda/runtime.h"
#include "core/cuda/stream.h"
#include "core/dispatch.h"
#include "core/ops.h"

namespace weft::cuda::red {

// float64 stays double; everything else computes in float (PyTorch's acc type).
template <typename T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

inline DType stat_dtype(DType d) { return d == DType::Float64 ? DType::Float64 : DType::Float32; }

// ---- shuffles: arithmetic types directly, structs member-wise ----
template <typename V>
__device__ __forceinline__ V shfl_down(V v, int offset) {
  if constexpr (std::is_same_v<V, bool>)
    return static_cast<bool>(__shfl_down_sync(0xffffffffu, static_cast<int>(v), offset));
  else if constexpr (std::is_same_v<V, uint8_t>)
    return static_cast<uint8_t>(__shfl_down_sync(0xffffffffu, static_cast<unsigned>(v), offset));
  else if constexpr (std::is_arithmetic_v<V>) return __shfl_down_sync(0xffffffffu, v, offset);
  else return V::shfl_down(v, offset);
}

template <typename V, typename Merge>
__device__ __forceinline__ V warp_reduce(V v, const Merge& merge) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = merge(v, shfl_down(v, o));
  return v;  // lane 0 holds the result
}

// Result is returned to all threads. `identity` pads the unused lanes of the last warp.
template <typename V, typename Merge>
__device__ __forceinline__ V block_reduce(V v, const Merge& merge, V identity) {
  __shared__ alignas(16) unsigned char raw[32 * sizeof(V)];
  V* smem = reinterpret_cast<V*>(raw);
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  const int nwarps = (blockDim.x + 31) >> 5;
  v = warp_reduce(v, merge);
  __syncthreads();  // smem may still be read by a previous call
  if (lane == 0) smem[wid] = v;
  __syncthreads();
  if (wid == 0) {
    v = lane < nwarps ? smem[lane] : identity;
    v = warp_reduce(v, merge);
    if (lane == 0) smem[0] = v;
  }
  __syncthreads();
  v = smem[0];
  return v;
}

// Reduction over the threads that share one row: a warp (kWarp, result broadcast from
// lane 0) or the whole block (block_reduce). Every thread gets the result.
template <bool kWarp, typename V, typename Merge>
__device__ __forceinline__ V row_allreduce(V v, const Merge& merge, V identity) {
  if constexpr (kWarp) {
    v = warp_reduce(v, merge);
    return __shfl_sync(0xffffffffu, v, 0);
  } else {
    return block_reduce(v, merge, identity);
  }
}

struct SumF {
  template <typename V>
  __device__ __forceinline__ V operator()(V a, V b) const {
    return a + b;
  }
};
// max ignoring NaN (x > m ? x : m), the comparison the CPU max passes use
struct MaxF {
  template <typename V>
  __device__ __forceinline__ V operator()(V a, V b) const {
    return b > a ? b : a;
  }
};

template <typename V>
__device__ __forceinline__ V neg_inf() {
  if constexpr (std::is_same_v<V, double>) return -__longlong_as_double(0x7ff0000000000000LL);
  else return -__int_as_float(0x7f800000);
}

__device__ __forceinline__ float dexp(float x) { return ::expf(x); }
__device__ __forceinline__ double dexp(double x) { return ::exp(x); }
__device__ __forceinline__ float dlog(float x) { return ::logf(x); }
__device__ __forceinline__ double dlog(double x) { return ::log(x); }
__device__ __forceinline__ float dlog1p(float x) { return ::log1pf(x); }
__device__ __forceinline__ double dlog1p(double x) { return ::log1p(x); }
__device__ __forceinline__ float dabs(float x) { return ::fabsf(x); }
__device__ __forceinline__ double dabs(double x) { return ::fabs(x); }
__device__ __forceinline__ bool dinf(float x) { return ::isinf(x); }
__device__ __forceinline__ bool dinf(double x) { return ::isinf(x); }

// ---- launch helpers ----
inline int blocks_for(int64_t n, int threads, int64_t cap = 65535LL * 16) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  return static_cast<int>(b < cap ? b : cap);
}
// Multiprocessors of `device` (cached).
inline int sm_count(int device) {
  static int cached[64] = {};
  if (device >= 0 && device < 64 && cached[device]) return cached[device];
  int n = 0;
  WEFT_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
  if (device >= 0 && device < 64) cached[device] = n;
  return n;
}
// Threads per block for a row of n elements handled by one block: a power of two in [32, max_threads].
inline int row_threads(int64_t n, int max_threads = 1024, int per_thread = 4) {
  int t = 32;
  while (t < max_threads && static_cast<int64_t>(t) * per_thread < n) t *= 2;
  return t;
}

inline Tensor index_on(const Tensor& t, const Tensor& like) {
  Tensor r = t.device() == like.device() ? t : t.to(like.device());
  return r.is_contiguous() ? r : r.contiguous();
}

// Device-side detection of out-of-range indices that live on the GPU: a slot of
// the device's deferred check log (Note [deferred index checks] in
// core/cuda/index_check_log.h); nothing synchronises here.
class BadIndexFlag {
 public:
  // `op`, `what`: static strings naming the op and the index ("embedding", "index");
  // valid indices are [0, bound).
  BadIndexFlag(const Tensor& like, const char* op, const char* what, int64_t bound)
      : ptr_(index_check_slot(like.device().index, stream_for(like), op, what, bound)) {}
  // slot 0: set to 1 when a bad index was seen; slot 1: one bad value (any of them)
  unsigned long long* ptr() const { return ptr_; }

 private:
  unsigned long long* ptr_;
};
__device__ __forceinline__ void report_bad_index(unsigned long long* flag, int64_t value) {
  if (atomicCAS(flag, 0ull, 1ull) == 0ull) flag[1] = static_cast<unsigned long long>(value);
}

// ---- atomics on weft's element types ----
template <typename T>
__device__ __forceinline__ void atomic_add(T* p, opmath_t<T> v) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int32_t>) {
    atomicAdd(p, static_cast<T>(v));
  } else if constexpr (std::is_same_v<T, int64_t>) {
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));  // two's complement wrap
  } else if constexpr (std::is_same_v<T, Half>) {
    atomicAdd(reinterpret_cast<__half*>(p), __float2half_rn(v));
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    atomicAdd(reinterpret_cast<__nv_bfloat16*>(p), __float2bfloat16_rn(v));
  } else if constexpr (std::is_same_v<T, uint8_t>) {
    // CAS on the aligned 32-bit word that holds the byte
    uintptr_t addr = reinterpret_cast<uintptr_t>(p);
    unsigned int* word = reinterpret_cast<unsigned int*>(addr & ~uintptr_t(3));
    const unsigned shift = static_cast<unsigned>(addr & 3) * 8u;
    unsigned int old = *word, assumed;
    do {
      assumed = old;
      unsigned int byte = ((assumed >> shift) & 0xffu) + static_cast<unsigned int>(v);
      unsigned int next = (assumed & ~(0xffu << shift)) | ((byte & 0xffu) << shift);
      old = atomicCAS(word, assumed, next);
    } while (old != assumed);
  } else {
    static_assert(sizeof(T) == 0, "atomic_add: unsupported type");
  }
}

}  // namespace weft::cuda::red

#define WEFT_RED_SET(table, dt, T, fn) (table).set(::weft::DeviceType::CUDA, ::weft::DType::dt, &fn<T>)
#define WEFT_RED_REGISTER_FLOATING(table, fn)                                         \
  static ::weft::detail::Registrar WEFT_CONCAT(weft_red_registrar_, __COUNTER__)([] { \
    WEFT_RED_SET(table, Float32, float, fn);                                          \
    WEFT_RED_SET(table, Float64, double, fn);                                         \
    WEFT_RED_SET(table, Float16, ::weft::Half, fn);                                   \
    WEFT_RED_SET(table, BFloat16, ::weft::BFloat16, fn);                              \
  })
#define WEFT_RED_REGISTER_NUMERIC(table, fn)                                          \
  static ::weft::detail::Registrar WEFT_CONCAT(weft_red_registrar_, __COUNTER__)([] { \
    WEFT_RED_SET(table, Float32, float, fn);                                          \
    WEFT_RED_SET(table, Float64, double, fn);                                         \
    WEFT_RED_SET(table, Float16, ::weft::Half, fn);                                   \
    WEFT_RED_SET(table, BFloat16, ::weft::BFloat16, fn);                              \
    WEFT_RED_SET(table, Int64, int64_t, fn);                                          \
    WEFT_RED_SET(table, Int32, int32_t, fn);                                          \
    WEFT_RED_SET(table, UInt8, uint8_t, fn);                                          \
  })
#define WEFT_RED_REGISTER_ALL(table, fn)                                              \
  static ::weft::detail::Registrar WEFT_CONCAT(weft_red_registrar_, __COUNTER__)([] { \
    WEFT_RED_SET(table, Float32, float, fn);                                          \
    WEFT_RED_SET(table, Float64, double, fn);                                         \
    WEFT_RED_SET(table, Float16, ::weft::Half, fn);                                   \
    WEFT_RED_SET(table, BFloat16, ::weft::BFloat16, fn);                              \
    WEFT_RED_SET(table, Int64, int64_t, fn);                                          \
    WEFT_RED_SET(table, Int32, int32_t, fn);                                          \
    WEFT_RED_SET(table, UInt8, uint8_t, fn);                                          \
    WEFT_RED_SET(table, Bool, bool, fn);                                              \
  })
