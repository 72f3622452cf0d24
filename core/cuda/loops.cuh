// GPU elementwise loop machinery shared by every elementwise CUDA kernel (the
// counterpart of core/cpu/loops.h; include only from .cu files).
//
// Contract: cuda::elementwise<Out, In...>(out, {inputs...}, f) computes
// out[idx] = Out(f(opmath(in[idx])...)) for every index of out, on the current
// stream of out's device. All operands must have out's shape (broadcast inputs
// are expand()ed views with stride 0) and live on out's device. f is a
// __device__ callable taking and returning opmath_t values (float for the 16-bit
// types). Operands may be arbitrarily strided: dims are coalesced (at most
// kMaxDims remain); all-float32 contiguous operands take float4 loads; operands
// whose innermost dim is contiguous in all of them (outer dims anything, stride 0
// too) take V elements per thread with vector loads of up to 16 bytes when the
// sizes and addresses allow (inner_vec_kernel); other contiguous operands 4
// scalar elements per thread; everything else an offset-calculator path.
//
// nvcc rule: an extended `__device__` lambda cannot be written inside a generic
// lambda (e.g. the body of dispatch(dtype, ..., [&](auto tag) {...})); use a functor
// struct with a templated `__device__ operator()` there (see Identity below).
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <type_traits>
#include <utility>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/cuda/check.h"
#include "core/cuda/runtime.h"
#include "core/cuda/stream.h"
#include "core/dtype.h"
#include "core/half.h"
#include "core/tensor.h"

namespace weft::cuda {

// ---- device-side loads and stores in opmath ----
template <typename T>
__device__ __forceinline__ opmath_t<T> load(const void* p) {
  if constexpr (std::is_same_v<T, Half>) return __half2float(*static_cast<const __half*>(p));
  else if constexpr (std::is_same_v<T, BFloat16>) return __bfloat162float(*static_cast<const __nv_bfloat16*>(p));
  else return *static_cast<const T*>(p);
}
template <typename T, typename V>
__device__ __forceinline__ void store(void* p, V v) {
  if constexpr (std::is_same_v<T, Half>) *static_cast<__half*>(p) = __float2half_rn(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, BFloat16>)
    *static_cast<__nv_bfloat16*>(p) = __float2bfloat16_rn(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, bool>) *static_cast<bool*>(p) = static_cast<bool>(v);
  // floating to integer through int64, wrapping like the CPU kernels (core/cpu/loops.h to_out)
  else if constexpr (std::is_integral_v<T> && std::is_floating_point_v<V>)
    *static_cast<T*>(p) = static_cast<T>(static_cast<int64_t>(v));
  else *static_cast<T*>(p) = static_cast<T>(v);
}

// x -> x, for conversions inside dispatch lambdas.
struct Identity {
  template <typename X>
  __device__ X operator()(X x) const {
    return x;
  }
};

inline constexpr int kMaxDims = 12;
inline constexpr int kThreads = 256;
inline constexpr int kVec = 4;

// Byte offsets of N operands for a linear index over coalesced dims (innermost first).
template <int N>
struct OffsetCalc {
  int ndim = 0;
  int64_t sizes[kMaxDims];
  int64_t strides[kMaxDims][N];
  __device__ __forceinline__ void get(int64_t linear, int64_t (&off)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = 0; d < ndim; ++d) {
      int64_t i = linear % sizes[d];
      linear /= sizes[d];
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += i * strides[d][k];
    }
  }
};

// Host: coalesces the operands' dims (all have ops[0]'s shape). Returns false
// when more than kMaxDims dims remain.
template <int N>
bool make_offset_calc(const std::array<const Tensor*, N>& ops, OffsetCalc<N>& oc, bool& contiguous) {
  const Shape& shape = ops[0]->sizes();
  int64_t sizes[kMaxDims];
  int64_t strides[kMaxDims][N];
  int nd = 0;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {  // innermost first
    if (shape[d] == 1) continue;
    int64_t st[N];
    for (int k = 0; k < N; ++k) st[k] = ops[k]->strides()[d] * static_cast<int64_t>(ops[k]->element_size());
    if (nd > 0) {
      bool merge = true;
      for (int k = 0; k < N; ++k)
        if (st[k] != strides[nd - 1][k] * sizes[nd - 1]) merge = false;
      if (merge) {
        sizes[nd - 1] *= shape[d];
        continue;
      }
    }
    if (nd == kMaxDims) return false;  // too many dims remain
    sizes[nd] = shape[d];
    for (int k = 0; k < N; ++k) strides[nd][k] = st[k];
    ++nd;
  }
  contiguous = nd <= 1;
  if (nd == 1)
    for (int k = 0; k < N; ++k)
      if (strides[0][k] != static_cast<int64_t>(ops[k]->element_size())) contiguous = false;
  oc.ndim = nd;
  for (int d = 0; d < nd; ++d) {
    oc.sizes[d] = sizes[d];
    for (int k = 0; k < N; ++k) oc.strides[d][k] = strides[d][k];
  }
  return true;
}

template <int N>
struct Ptrs {
  char* p[N];
};

template <typename Out, typename... In, typename F, size_t... I>
__device__ __forceinline__ void apply_at(const Ptrs<sizeof...(In) + 1>& ptrs, const int64_t (&off)[sizeof...(In) + 1],
                                         const F& f, std::index_sequence<I...>) {
  store<Out>(ptrs.p[0] + off[0], f(load<In>(ptrs.p[I + 1] + off[I + 1])...));
}

template <typename F, typename Out, typename... In>
__global__ void strided_kernel(int64_t n, Ptrs<sizeof...(In) + 1> ptrs, OffsetCalc<sizeof...(In) + 1> oc, F f) {
  constexpr int N = sizeof...(In) + 1;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t off[N];
    oc.get(i, off);
    apply_at<Out, In...>(ptrs, off, f, std::make_index_sequence<sizeof...(In)>{});
  }
}

// Contiguous operands: each thread handles kVec consecutive elements.
template <typename Out, typename... In, typename F, size_t... I>
__device__ __forceinline__ void contiguous_at(const Ptrs<sizeof...(In) + 1>& ptrs, int64_t i, const F& f,
                                              std::index_sequence<I...>) {
  store<Out>(ptrs.p[0] + i * sizeof(Out), f(load<In>(ptrs.p[I + 1] + i * sizeof(In))...));
}

template <typename F, typename Out, typename... In>
__global__ void contiguous_kernel(int64_t n, Ptrs<sizeof...(In) + 1> ptrs, F f) {
  using Seq = std::make_index_sequence<sizeof...(In)>;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x * kVec;
  for (int64_t base = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) * kVec; base < n; base += stride) {
    if (base + kVec <= n) {
#pragma unroll
      for (int v = 0; v < kVec; ++v) contiguous_at<Out, In...>(ptrs, base + v, f, Seq{});
    } else {
      for (int64_t i = base; i < n; ++i) contiguous_at<Out, In...>(ptrs, i, f, Seq{});
    }
  }
}

// float32 -> float32 unary/binary fast path with 16-byte loads.
template <typename F, int NIn>
__global__ void vec4_f32_kernel(int64_t n4, float4* out, const float4* a, const float4* b, F f) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n4;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float4 x = a[i], r;
    if constexpr (NIn == 1) {
      r.x = f(x.x), r.y = f(x.y), r.z = f(x.z), r.w = f(x.w);
    } else {
      float4 y = b[i];
      r.x = f(x.x, y.x), r.y = f(x.y, y.y), r.z = f(x.z, y.z), r.w = f(x.w, y.w);
    }
    out[i] = r;
  }
}

// ---- inner-contiguous operands, V elements per thread with vector loads ----
// The path for operands whose innermost (coalesced) dim is contiguous in every
// operand while the outer dims may be anything, stride 0 included: contiguous
// 16-bit tensors, casts, a bias broadcast over rows, a permuted copy whose last
// dim stays innermost. Each thread moves V consecutive elements of every operand
// with one load or store of up to 16 bytes, and computes the outer offsets once
// per V elements.

// V: the most elements per thread for which every operand's V elements fit 16 bytes (at most 8).
template <typename Out, typename... In>
constexpr int vec_width() {
  size_t m = sizeof(Out);
  ((m = sizeof(In) > m ? sizeof(In) : m), ...);
  const size_t v = 16 / m;
  return static_cast<int>(v > 8 ? 8 : (v < 1 ? 1 : v));
}

template <typename T, int V>
struct alignas(sizeof(T) * V) VecOf {
  T v[V];
};

struct alignas(16) RawVec {
  char b[16];
};

template <int V, typename Out, typename... In, typename F, size_t... I>
__device__ __forceinline__ void inner_vec_at(const Ptrs<sizeof...(In) + 1>& ptrs,
                                             const int64_t (&off)[sizeof...(In) + 1], int64_t col, const F& f,
                                             std::index_sequence<I...>) {
  RawVec raw[sizeof...(In) > 0 ? sizeof...(In) : 1];
  ((*reinterpret_cast<VecOf<In, V>*>(&raw[I]) =
        *reinterpret_cast<const VecOf<In, V>*>(ptrs.p[I + 1] + off[I + 1] + col * static_cast<int64_t>(sizeof(In)))),
   ...);
  RawVec r;
#pragma unroll
  for (int j = 0; j < V; ++j) store<Out>(r.b + j * sizeof(Out), f(load<In>(raw[I].b + j * sizeof(In))...));
  *reinterpret_cast<VecOf<Out, V>*>(ptrs.p[0] + off[0] + col * static_cast<int64_t>(sizeof(Out))) =
      *reinterpret_cast<const VecOf<Out, V>*>(&r);
}

// n_vec = numel / V work items; row_vecs = (innermost size) / V per outer row;
// `outer` holds the outer dims only (ndim 0: one contiguous row).
template <typename F, int V, typename Out, typename... In>
__global__ void inner_vec_kernel(int64_t n_vec, int64_t row_vecs, Ptrs<sizeof...(In) + 1> ptrs,
                                 OffsetCalc<sizeof...(In) + 1> outer, F f) {
  constexpr int N = sizeof...(In) + 1;
  using Seq = std::make_index_sequence<sizeof...(In)>;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n_vec;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t off[N];
    int64_t col;
    if (outer.ndim == 0) {
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] = 0;
      col = i * V;
    } else {
      const int64_t row = i / row_vecs;
      col = (i - row * row_vecs) * V;
      outer.get(row, off);
    }
    inner_vec_at<V, Out, In...>(ptrs, off, col, f, Seq{});
  }
}

// Host: whether the operands (coalesced into `oc`) suit inner_vec_kernel with V
// elements per thread; if so, `outer` is `oc` without its innermost dim.
template <int V, int N>
bool inner_vec_plan(const OffsetCalc<N>& oc, const Ptrs<N>& ptrs, const std::array<const Tensor*, N>& ops,
                    OffsetCalc<N>& outer) {
  if (oc.ndim < 1 || oc.sizes[0] % V != 0) return false;
  for (int k = 0; k < N; ++k) {
    const int64_t es = static_cast<int64_t>(ops[k]->element_size());
    if (oc.strides[0][k] != es) return false;                                  // innermost dim contiguous
    if (reinterpret_cast<uintptr_t>(ptrs.p[k]) % (V * es) != 0) return false;  // aligned vectors
    for (int d = 1; d < oc.ndim; ++d)
      if (oc.strides[d][k] % (V * es) != 0) return false;  // every row starts aligned (stride 0 too)
  }
  outer.ndim = oc.ndim - 1;
  for (int d = 1; d < oc.ndim; ++d) {
    outer.sizes[d - 1] = oc.sizes[d];
    for (int k = 0; k < N; ++k) outer.strides[d - 1][k] = oc.strides[d][k];
  }
  return true;
}

inline int grid_for(int64_t work_items) {
  int64_t blocks = (work_items + kThreads - 1) / kThreads;
  if (blocks < 1) blocks = 1;
  // enough blocks to fill the GPU several times over; grid-stride loops do the rest
  const int64_t cap = 65535LL * 8;
  return static_cast<int>(blocks < cap ? blocks : cap);
}

template <typename Out, typename... In, typename F>
void elementwise(const Tensor& out, const std::array<Tensor, sizeof...(In)>& inputs, const F& f) {
  constexpr int N = sizeof...(In) + 1;
  int64_t n = out.numel();
  if (n == 0) return;
  std::array<const Tensor*, N> ops;
  ops[0] = &out;
  for (int k = 0; k + 1 < N; ++k) {
    ops[k + 1] = &inputs[k];
    WEFT_CHECK(inputs[k].device() == out.device(), "CUDA elementwise: operand on ", inputs[k].device(),
               " but output on ", out.device());
  }
  DeviceGuard guard(out.device().index);
  cudaStream_t stream = current_stream(out.device().index);
  Ptrs<N> ptrs;
  for (int k = 0; k < N; ++k) ptrs.p[k] = static_cast<char*>(ops[k]->raw_data());
  OffsetCalc<N> oc;
  bool contiguous = false;
  WEFT_CHECK(make_offset_calc<N>(ops, oc, contiguous), "CUDA elementwise: more than ", kMaxDims,
             " dims remain after coalescing (shape ", shape_str(out.sizes()), ")");
  if (contiguous) {
    constexpr bool all_f32 = std::is_same_v<Out, float> && (std::is_same_v<In, float> && ...);
    if constexpr (all_f32 && (N == 2 || N == 3)) {
      bool aligned = n % 4 == 0;
      for (int k = 0; k < N; ++k) aligned = aligned && reinterpret_cast<uintptr_t>(ptrs.p[k]) % 16 == 0;
      if (aligned) {
        int64_t n4 = n / 4;
        vec4_f32_kernel<F, N - 1><<<grid_for(n4), kThreads, 0, stream>>>(
            n4, reinterpret_cast<float4*>(ptrs.p[0]), reinterpret_cast<const float4*>(ptrs.p[1]),
            reinterpret_cast<const float4*>(ptrs.p[N - 1]), f);
        WEFT_CUDA_KERNEL_CHECK("elementwise(vec4)");
        return;
      }
    }
  }
  constexpr int V = vec_width<Out, In...>();
  if constexpr (V > 1) {
    OffsetCalc<N> outer;
    if (inner_vec_plan<V, N>(oc, ptrs, ops, outer)) {
      const int64_t n_vec = n / V;
      inner_vec_kernel<F, V, Out, In...>
          <<<grid_for(n_vec), kThreads, 0, stream>>>(n_vec, oc.sizes[0] / V, ptrs, outer, f);
      WEFT_CUDA_KERNEL_CHECK("elementwise(inner_vec)");
      return;
    }
  }
  if (contiguous) {
    contiguous_kernel<F, Out, In...><<<grid_for((n + kVec - 1) / kVec), kThreads, 0, stream>>>(n, ptrs, f);
    WEFT_CUDA_KERNEL_CHECK("elementwise(contiguous)");
    return;
  }
  strided_kernel<F, Out, In...><<<grid_for(n), kThreads, 0, stream>>>(n, ptrs, oc, f);
  WEFT_CUDA_KERNEL_CHECK("elementwise(strided)");
}

// Launch helper for hand-written kernels: checks the launch and names the kernel.
inline cudaStream_t stream_for(const Tensor& t) { return current_stream(t.device().index); }

}  // namespace weft::cuda
