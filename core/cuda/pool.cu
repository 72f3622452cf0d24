// CUDA 2-D pooling kernels (core/kernels/pool.h): max_pool2d (with int64 flat
// indices h * W + w per plane, the CPU's format, which cuDNN's pooling cannot
// produce), avg_pool2d and adaptive_avg_pool2d, forward and backward, float32 and
// float64 (the front end computes float16/bfloat16 in float32).
//
// Contract (mirrors core/ops/pool.cc exactly): one thread per output element for
// forwards (same window walk and NaN rule as the CPU: the first maximum wins, a
// NaN replaces it). Backwards of avg/adaptive are gathers: one thread per input
// element sums the contributions of the outputs whose window covers it, in the
// CPU's (oh, ow) order, so results are deterministic and match the CPU bit for
// bit in float64. max backward zeroes gx then scatters with atomicAdd (float
// atomics: summation order of overlapping windows is not deterministic).
// All launches: grid-stride loops over int64 indices on the current stream of
// the output's device, under a DeviceGuard.
#include <type_traits>

#include "core/cuda/check.h"
#include "core/cuda/loops.cuh"
#include "core/dispatch.h"
#include "core/kernels/pool.h"

namespace weft::cuda {
namespace {

template <typename T>
constexpr bool kPoolType = std::is_same_v<T, float> || std::is_same_v<T, double>;

template <typename T>
__global__ void max_pool_fwd_kernel(T* __restrict__ out, int64_t* __restrict__ ind, const T* __restrict__ x,
                                    int64_t total, int64_t H, int64_t W, int64_t OH, int64_t OW, Pool2dParams p) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(blockDim.x) * gridDim.x) {
    const int64_t ow = i % OW, oh = (i / OW) % OH, pl = i / (OW * OH);
    const T* xp = x + pl * H * W;
    int64_t hs = oh * p.sH - p.pH, he = min(hs + (p.kH - 1) * p.dH + 1, H);
    while (hs < 0) hs += p.dH;
    int64_t ws = ow * p.sW - p.pW, we = min(ws + (p.kW - 1) * p.dW + 1, W);
    while (ws < 0) ws += p.dW;
    T m = -INFINITY;
    int64_t idx = hs * W + ws;
    for (int64_t h = hs; h < he; h += p.dH)
      for (int64_t w = ws; w < we; w += p.dW) {
        T v = xp[h * W + w];
        bool c = (v > m) | (v != v);
        m = c ? v : m;
        idx = c ? h * W + w : idx;
      }
    out[i] = m;
    ind[i] = idx;
  }
}

template <typename T>
__global__ void max_pool_bwd_kernel(T* __restrict__ gx, const T* __restrict__ go, const int64_t* __restrict__ ind,
                                    int64_t total, int64_t HW, int64_t L) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(blockDim.x) * gridDim.x) {
    const int64_t pl = i / L;
    atomicAdd(gx + pl * HW + ind[i], go[i]);
  }
}

// Window of output o along one axis (pool.cc's avg_span): [start, end) clipped to
// the input, and the padded span used as divisor with count_include_pad.
struct Span {
  int64_t start, end, padded;
};
__device__ __forceinline__ Span avg_span(int64_t o, int64_t s, int64_t pad, int64_t k, int64_t n) {
  int64_t st = o * s - pad, en = min(st + k, n + pad);
  return {max(st, int64_t(0)), min(en, n), en - st};
}
__device__ __forceinline__ int64_t avg_div(const Span& sh, const Span& sw, bool include_pad) {
  return include_pad ? sh.padded * sw.padded : (sh.end - sh.start) * (sw.end - sw.start);
}

template <typename T>
__global__ void avg_pool_fwd_kernel(T* __restrict__ out, const T* __restrict__ x, int64_t total, int64_t H, int64_t W,
                                    int64_t OH, int64_t OW, Pool2dParams p) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(blockDim.x) * gridDim.x) {
    const int64_t ow = i % OW, oh = (i / OW) % OH, pl = i / (OW * OH);
    const T* xp = x + pl * H * W;
    Span sh = avg_span(oh, p.sH, p.pH, p.kH, H), sw = avg_span(ow, p.sW, p.pW, p.kW, W);
    T s = 0;
    for (int64_t h = sh.start; h < sh.end; ++h)
      for (int64_t w = sw.start; w < sw.end; ++w) s += xp[h * W + w];
    const int64_t div = avg_div(sh, sw, p.count_include_pad);
    out[i] = div > 0 ? s / static_cast<T>(div) : T(0);
  }
}

// Outputs o (0 <= o < On) whose window [o s - pad, o s - pad + k) contains input i.
__device__ __forceinline__ void covering(int64_t i, int64_t s, int64_t pad, int64_t k, int64_t On, int64_t& lo,
                                         int64_t& hi) {
  const int64_t num = i + pad - k + 1;
  lo = num <= 0 ? 0 : (num + s - 1) / s;
  hi = min((i + pad) / s, On - 1);
}

template <typename T>
__global__ void avg_pool_bwd_kernel(T* __restrict__ gx, const T* __restrict__ go, int64_t total, int64_t H, int64_t W,
                                    int64_t OH, int64_t OW, Pool2dParams p) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(blockDim.x) * gridDim.x) {
    const int64_t w = i % W, h = (i / W) % H, pl = i / (W * H);
    const T* g = go + pl * OH * OW;
    int64_t oh0, oh1, ow0, ow1;
    covering(h, p.sH, p.pH, p.kH, OH, oh0, oh1);
    covering(w, p.sW, p.pW, p.kW, OW, ow0, ow1);
    T acc = 0;
    for (int64_t oh = oh0; oh <= oh1; ++oh) {
      Span sh = avg_span(oh, p.sH, p.pH, p.kH, H);
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        Span sw = avg_span(ow, p.sW, p.pW, p.kW, W);
        const int64_t div = avg_div(sh, sw, p.count_include_pad);
        if (div <= 0) continue;
        acc += g[oh * OW + ow] / static_cast<T>(div);
      }
    }
    gx[i] = acc;
  }
}

__device__ __forceinline__ int64_t ad_start(int64_t o, int64_t n, int64_t on) { return (o * n) / on; }
__device__ __forceinline__ int64_t ad_end(int64_t o, int64_t n, int64_t on) { return ((o + 1) * n + on - 1) / on; }

template <typename T>
__global__ void adaptive_fwd_kernel(T* __restrict__ out, const T* __restrict__ x, int64_t total, int64_t H, int64_t W,
                                    int64_t OH, int64_t OW) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(blockDim.x) * gridDim.x) {
    const int64_t ow = i % OW, oh = (i / OW) % OH, pl = i / (OW * OH);
    const T* xp = x + pl * H * W;
    const int64_t hs = ad_start(oh, H, OH), he = ad_end(oh, H, OH);
    const int64_t ws = ad_start(ow, W, OW), we = ad_end(ow, W, OW);
    T s = 0;
    for (int64_t h = hs; h < he; ++h)
      for (int64_t w = ws; w < we; ++w) s += xp[h * W + w];
    out[i] = s / static_cast<T>((he - hs) * (we - ws));
  }
}

// Adaptive outputs covering input i: a contiguous range around i * On / n (that one
// always covers i; windows are monotone in o), widened while neighbours still do.
__device__ __forceinline__ void ad_covering(int64_t i, int64_t n, int64_t On, int64_t& lo, int64_t& hi) {
  const int64_t o = (i * On) / n;
  lo = o;
  hi = o;
  while (lo > 0 && ad_end(lo - 1, n, On) > i) --lo;
  while (hi + 1 < On && ad_start(hi + 1, n, On) <= i) ++hi;
}

template <typename T>
__global__ void adaptive_bwd_kernel(T* __restrict__ gx, const T* __restrict__ go, int64_t total, int64_t H, int64_t W,
                                    int64_t OH, int64_t OW) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(blockDim.x) * gridDim.x) {
    const int64_t w = i % W, h = (i / W) % H, pl = i / (W * H);
    const T* g = go + pl * OH * OW;
    int64_t oh0, oh1, ow0, ow1;
    ad_covering(h, H, OH, oh0, oh1);
    ad_covering(w, W, OW, ow0, ow1);
    T acc = 0;
    for (int64_t oh = oh0; oh <= oh1; ++oh) {
      const int64_t hn = ad_end(oh, H, OH) - ad_start(oh, H, OH);
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        const int64_t wn = ad_end(ow, W, OW) - ad_start(ow, W, OW);
        acc += g[oh * OW + ow] / static_cast<T>(hn * wn);
      }
    }
    gx[i] = acc;
  }
}

int blocks_for(int64_t n) { return grid_for(n); }

template <typename T>
void cuda_max_pool2d(const Tensor& out, const Tensor& indices, const Tensor& x, const Pool2dParams& p) {
  if constexpr (!kPoolType<T>) {
    WEFT_CHECK(false, "max_pool2d: no CUDA kernel for dtype ", dtype_of<T>);
  } else {
    const int64_t total = out.numel();
    if (total == 0) return;
    DeviceGuard g(out.device());
    max_pool_fwd_kernel<T><<<blocks_for(total), kThreads, 0, stream_for(out)>>>(
        out.data_ptr<T>(), indices.data_ptr<int64_t>(), x.data_ptr<T>(), total, x.size(1), x.size(2), out.size(1),
        out.size(2), p);
    WEFT_CUDA_KERNEL_CHECK("max_pool2d");
  }
}

template <typename T>
void cuda_max_pool2d_backward(const Tensor& gx, const Tensor& go, const Tensor& indices) {
  if constexpr (!kPoolType<T>) {
    WEFT_CHECK(false, "max_pool2d_backward: no CUDA kernel for dtype ", dtype_of<T>);
  } else {
    if (gx.numel() == 0) return;
    DeviceGuard g(gx.device());
    cudaStream_t stream = stream_for(gx);
    WEFT_CUDA_CHECK(cudaMemsetAsync(gx.raw_data(), 0, gx.nbytes(), stream));
    const int64_t total = go.numel();
    if (total == 0) return;
    max_pool_bwd_kernel<T>
        <<<blocks_for(total), kThreads, 0, stream>>>(gx.data_ptr<T>(), go.data_ptr<T>(), indices.data_ptr<int64_t>(),
                                                     total, gx.size(1) * gx.size(2), go.size(1) * go.size(2));
    WEFT_CUDA_KERNEL_CHECK("max_pool2d_backward");
  }
}

template <typename T>
void cuda_avg_pool2d(const Tensor& out, const Tensor& x, const Pool2dParams& p) {
  if constexpr (!kPoolType<T>) {
    WEFT_CHECK(false, "avg_pool2d: no CUDA kernel for dtype ", dtype_of<T>);
  } else {
    const int64_t total = out.numel();
    if (total == 0) return;
    DeviceGuard g(out.device());
    avg_pool_fwd_kernel<T><<<blocks_for(total), kThreads, 0, stream_for(out)>>>(
        out.data_ptr<T>(), x.data_ptr<T>(), total, x.size(1), x.size(2), out.size(1), out.size(2), p);
    WEFT_CUDA_KERNEL_CHECK("avg_pool2d");
  }
}

template <typename T>
void cuda_avg_pool2d_backward(const Tensor& gx, const Tensor& go, const Pool2dParams& p) {
  if constexpr (!kPoolType<T>) {
    WEFT_CHECK(false, "avg_pool2d_backward: no CUDA kernel for dtype ", dtype_of<T>);
  } else {
    const int64_t total = gx.numel();
    if (total == 0) return;
    DeviceGuard g(gx.device());
    avg_pool_bwd_kernel<T><<<blocks_for(total), kThreads, 0, stream_for(gx)>>>(
        gx.data_ptr<T>(), go.data_ptr<T>(), total, gx.size(1), gx.size(2), go.size(1), go.size(2), p);
    WEFT_CUDA_KERNEL_CHECK("avg_pool2d_backward");
  }
}

template <typename T>
void cuda_adaptive_avg_pool2d(const Tensor& out, const Tensor& x) {
  if constexpr (!kPoolType<T>) {
    WEFT_CHECK(false, "adaptive_avg_pool2d: no CUDA kernel for dtype ", dtype_of<T>);
  } else {
    const int64_t total = out.numel();
    if (total == 0) return;
    DeviceGuard g(out.device());
    adaptive_fwd_kernel<T><<<blocks_for(total), kThreads, 0, stream_for(out)>>>(
        out.data_ptr<T>(), x.data_ptr<T>(), total, x.size(1), x.size(2), out.size(1), out.size(2));
    WEFT_CUDA_KERNEL_CHECK("adaptive_avg_pool2d");
  }
}

template <typename T>
void cuda_adaptive_avg_pool2d_backward(const Tensor& gx, const Tensor& go) {
  if constexpr (!kPoolType<T>) {
    WEFT_CHECK(false, "adaptive_avg_pool2d_backward: no CUDA kernel for dtype ", dtype_of<T>);
  } else {
    const int64_t total = gx.numel();
    if (total == 0) return;
    DeviceGuard g(gx.device());
    adaptive_bwd_kernel<T><<<blocks_for(total), kThreads, 0, stream_for(gx)>>>(
        gx.data_ptr<T>(), go.data_ptr<T>(), total, gx.size(1), gx.size(2), go.size(1), go.size(2));
    WEFT_CUDA_KERNEL_CHECK("adaptive_avg_pool2d_backward");
  }
}

constexpr uint32_t kPoolTypes = (1u << int(DType::Float32)) | (1u << int(DType::Float64));
WEFT_REGISTER_KERNEL(max_pool2d_table(), DeviceType::CUDA, kPoolTypes, cuda_max_pool2d);
WEFT_REGISTER_KERNEL(max_pool2d_backward_table(), DeviceType::CUDA, kPoolTypes, cuda_max_pool2d_backward);
WEFT_REGISTER_KERNEL(avg_pool2d_table(), DeviceType::CUDA, kPoolTypes, cuda_avg_pool2d);
WEFT_REGISTER_KERNEL(avg_pool2d_backward_table(), DeviceType::CUDA, kPoolTypes, cuda_avg_pool2d_backward);
WEFT_REGISTER_KERNEL(adaptive_avg_pool2d_table(), DeviceType::CUDA, kPoolTypes, cuda_adaptive_avg_pool2d);
WEFT_REGISTER_KERNEL(adaptive_avg_pool2d_backward_table(), DeviceType::CUDA, kPoolTypes,
                     cuda_adaptive_avg_pool2d_backward);

}  // namespace
}  // namespace weft::cuda
