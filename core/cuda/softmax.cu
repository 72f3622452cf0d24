// CUDA softmax / log_softmax (core/kernels/softmax.h).
//
// Contract (matches core/ops/softmax.cc): ReduceArgs over a contiguous (outer, r,
// inner) block, out in the same layout. Three passes per slice, all in opmath
// (float for 16-bit types, the input type otherwise): max (NaN ignored by the
// comparison, as on the CPU), sum of exp(x - max), then out = exp(x - max) / sum or
// (x - max) - log(sum). A NaN anywhere in a slice makes the sum NaN, so the whole
// slice is NaN; a slice whose max is -inf or +inf gives NaN like the CPU / PyTorch.
// Paths: inner == 1 with r <= 1024 runs one warp per row; longer rows one block per
// row (up to 1024 threads, e.g. 50257-wide GPT-2 logits rows); inner > 1 runs one
// thread per (outer, inner) column, coalesced across inner. Rows of up to 8192
// elements are read once into registers; longer rows and columns are re-read for
// each pass (they stay in L1/L2).
#include "core/cuda/allocator.h"
#include "core/cuda/red_common.cuh"
#include "core/kernels/softmax.h"

namespace weft::cuda {
namespace {
using namespace red;

// kPer > 0: the row is read once into registers (kPer values per thread; the host
// guarantees kPer * lanes >= r) and all three passes work on them. kPer == 0: no
// cache, each pass re-reads the row. Both give bit-identical results: every thread
// visits its elements in the same order (i = lane, lane + lanes, ...) either way.
template <typename T, bool Log, bool kWarp, int kPer>
__global__ void softmax_rows(const T* in, T* out, int64_t outer, int64_t r) {
  using M = opmath_t<T>;
  const int64_t rows_per_block = kWarp ? blockDim.y : 1;
  const int64_t row0 = kWarp ? threadIdx.y : 0;
  const int lanes = kWarp ? 32 : blockDim.x;
  const int lane = threadIdx.x;
  for (int64_t o = blockIdx.x * rows_per_block + row0; o < outer;
       o += static_cast<int64_t>(gridDim.x) * rows_per_block) {
    const T* x = in + o * r;
    T* y = out + o * r;
    if constexpr (kPer > 0) {
      M v[kPer];
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        const int64_t i = lane + static_cast<int64_t>(k) * lanes;
        v[k] = i < r ? static_cast<M>(load<T>(x + i)) : neg_inf<M>();  // -inf never wins the max
      }
      M mx = neg_inf<M>();
#pragma unroll
      for (int k = 0; k < kPer; ++k) mx = v[k] > mx ? v[k] : mx;
      mx = row_allreduce<kWarp>(mx, MaxF{}, neg_inf<M>());
      M s = 0;
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        if (lane + static_cast<int64_t>(k) * lanes < r) {
          if constexpr (Log) {
            s += dexp(v[k] - mx);
          } else {
            v[k] = dexp(v[k] - mx);  // kept for the output pass
            s += v[k];
          }
        }
      }
      s = row_allreduce<kWarp>(s, SumF{}, M(0));
      if constexpr (Log) {
        const M ls = dlog(s);
#pragma unroll
        for (int k = 0; k < kPer; ++k) {
          const int64_t i = lane + static_cast<int64_t>(k) * lanes;
          if (i < r) store<T>(y + i, (v[k] - mx) - ls);
        }
      } else {
        const M inv = M(1) / s;
#pragma unroll
        for (int k = 0; k < kPer; ++k) {
          const int64_t i = lane + static_cast<int64_t>(k) * lanes;
          if (i < r) store<T>(y + i, v[k] * inv);
        }
      }
      continue;
    }
    M mx = neg_inf<M>();
    for (int64_t i = lane; i < r; i += lanes) {
      M v = load<T>(x + i);
      mx = v > mx ? v : mx;
    }
    mx = row_allreduce<kWarp>(mx, MaxF{}, neg_inf<M>());
    M s = 0;
    for (int64_t i = lane; i < r; i += lanes) s += dexp(load<T>(x + i) - mx);
    s = row_allreduce<kWarp>(s, SumF{}, M(0));
    if constexpr (Log) {
      const M ls = dlog(s);
      for (int64_t i = lane; i < r; i += lanes) store<T>(y + i, (load<T>(x + i) - mx) - ls);
    } else {
      const M inv = M(1) / s;
      for (int64_t i = lane; i < r; i += lanes) store<T>(y + i, dexp(load<T>(x + i) - mx) * inv);
    }
  }
}

template <typename T, bool Log>
__global__ void softmax_cols(const T* in, T* out, int64_t outer, int64_t r, int64_t inner) {
  using M = opmath_t<T>;
  const int64_t n = outer * inner;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = t / inner, j = t % inner;
    const T* x = in + o * r * inner + j;
    T* y = out + o * r * inner + j;
    M mx = neg_inf<M>();
    for (int64_t k = 0; k < r; ++k) {
      M v = load<T>(x + k * inner);
      mx = v > mx ? v : mx;
    }
    M s = 0;
    for (int64_t k = 0; k < r; ++k) s += dexp(load<T>(x + k * inner) - mx);
    if constexpr (Log) {
      const M ls = dlog(s);
      for (int64_t k = 0; k < r; ++k) store<T>(y + k * inner, (load<T>(x + k * inner) - mx) - ls);
    } else {
      const M inv = M(1) / s;
      for (int64_t k = 0; k < r; ++k) store<T>(y + k * inner, dexp(load<T>(x + k * inner) - mx) * inv);
    }
  }
}

int device_of_ptr(const void* p) { return device_of_pointer(p, "CUDA softmax"); }

template <typename T, bool Log>
void run_softmax(const ReduceArgs& a) {
  const int64_t outer = a.g.outer, r = a.g.r, inner = a.g.inner;
  if (outer * r * inner == 0) return;
  const int dev = device_of_ptr(a.out);
  DeviceGuard guard(dev);
  cudaStream_t stream = current_stream(dev);
  const T* in = static_cast<const T*>(a.in);
  T* out = static_cast<T*>(a.out);
  if (inner == 1) {
    // One warp per row (r <= 1024, row cached in kPer * 32 registers), one block
    // per row cached in registers (r <= 8192: row_threads(r, 1024, 8) * 8 >= r), or
    // one block per row re-reading it (longer rows).
    const int gw = blocks_for(outer, 8);
    const dim3 bw(32, 8);
    if (r <= 64) {
      softmax_rows<T, Log, true, 2><<<gw, bw, 0, stream>>>(in, out, outer, r);
    } else if (r <= 256) {
      softmax_rows<T, Log, true, 8><<<gw, bw, 0, stream>>>(in, out, outer, r);
    } else if (r <= 1024) {
      softmax_rows<T, Log, true, 32><<<gw, bw, 0, stream>>>(in, out, outer, r);
    } else if (r <= 8192) {
      const int threads = row_threads(r, 1024, 8);
      softmax_rows<T, Log, false, 8><<<blocks_for(outer, 1), threads, 0, stream>>>(in, out, outer, r);
    } else {
      const int threads = row_threads(r, 1024, 8);
      softmax_rows<T, Log, false, 0><<<blocks_for(outer, 1), threads, 0, stream>>>(in, out, outer, r);
    }
    WEFT_CUDA_KERNEL_CHECK(Log ? "log_softmax(rows)" : "softmax(rows)");
    return;
  }
  softmax_cols<T, Log><<<blocks_for(outer * inner, 256), 256, 0, stream>>>(in, out, outer, r, inner);
  WEFT_CUDA_KERNEL_CHECK(Log ? "log_softmax(cols)" : "softmax(cols)");
}

template <typename T>
void cuda_softmax(const ReduceArgs& a) {
  run_softmax<T, false>(a);
}
template <typename T>
void cuda_log_softmax(const ReduceArgs& a) {
  run_softmax<T, true>(a);
}

WEFT_RED_REGISTER_FLOATING(softmax_table(), cuda_softmax);
WEFT_RED_REGISTER_FLOATING(log_softmax_table(), cuda_log_softmax);

}  // namespace
}  // namespace weft::cuda
