// CUDA kernels of the sdpa softmax tables (core/kernels/attention.h).
//
// Contract (matches core/ops/attention.cc): scores, y (rows, S) contiguous, row r is
// query r % L; y = softmax(scale * scores) over keys j < valid (valid = min(S, r % L
// + 1) when causal, else S), zeros elsewhere; math in float (double for float64).
// Backward: dx = scale * y * (g - sum(g * y)) per row. One warp per row for S <=
// 1024, one block per row above.
#include "core/cuda/red_common.cuh"
#include "core/kernels/attention.h"

namespace weft::cuda {
namespace {
using namespace red;

template <typename T, bool kWarp>
__global__ void attn_softmax_kernel(T* y, const T* x, int64_t rows, int64_t K, int64_t L, acc_t<T> sc, bool causal) {
  using S = acc_t<T>;
  const int64_t rows_per_block = kWarp ? blockDim.y : 1;
  const int64_t row0 = kWarp ? threadIdx.y : 0;
  const int lanes = kWarp ? 32 : blockDim.x;
  const int lane = threadIdx.x;
  for (int64_t r = blockIdx.x * rows_per_block + row0; r < rows;
       r += static_cast<int64_t>(gridDim.x) * rows_per_block) {
    const T* p = x + r * K;
    T* q = y + r * K;
    const int64_t valid = causal ? (r % L + 1 < K ? r % L + 1 : K) : K;
    S mx = neg_inf<S>();
    for (int64_t j = lane; j < valid; j += lanes) {
      S v = static_cast<S>(load<T>(p + j)) * sc;
      mx = v > mx ? v : mx;
    }
    mx = row_allreduce<kWarp>(mx, MaxF{}, neg_inf<S>());
    S s = 0;
    for (int64_t j = lane; j < valid; j += lanes) s += dexp(static_cast<S>(load<T>(p + j)) * sc - mx);
    s = row_allreduce<kWarp>(s, SumF{}, S(0));
    const S inv = S(1) / s;
    for (int64_t j = lane; j < K; j += lanes)
      store<T>(q + j, j < valid ? dexp(static_cast<S>(load<T>(p + j)) * sc - mx) * inv : S(0));
  }
}

template <typename T, bool kWarp>
__global__ void attn_softmax_backward_kernel(T* dx, const T* g, const T* y, int64_t rows, int64_t K, acc_t<T> sc) {
  using S = acc_t<T>;
  const int64_t rows_per_block = kWarp ? blockDim.y : 1;
  const int64_t row0 = kWarp ? threadIdx.y : 0;
  const int lanes = kWarp ? 32 : blockDim.x;
  const int lane = threadIdx.x;
  for (int64_t r = blockIdx.x * rows_per_block + row0; r < rows;
       r += static_cast<int64_t>(gridDim.x) * rows_per_block) {
    const T* a = g + r * K;
    const T* q = y + r * K;
    T* d = dx + r * K;
    S dot = 0;
    for (int64_t j = lane; j < K; j += lanes) dot += static_cast<S>(load<T>(a + j)) * static_cast<S>(load<T>(q + j));
    dot = row_allreduce<kWarp>(dot, SumF{}, S(0));
    for (int64_t j = lane; j < K; j += lanes)
      store<T>(d + j, sc * static_cast<S>(load<T>(q + j)) * (static_cast<S>(load<T>(a + j)) - dot));
  }
}

template <typename T>
void cuda_attn_softmax(const Tensor& y, const Tensor& scores, int64_t L, double scale, bool causal) {
  const int64_t rows = scores.size(0), K = scores.size(1);
  if (rows * K == 0) return;
  WEFT_CHECK(L > 0, "scaled_dot_product_attention: L must be positive, got ", L);
  DeviceGuard guard(y.device().index);
  cudaStream_t stream = stream_for(y);
  using S = acc_t<T>;
  T* py = static_cast<T*>(y.raw_data());
  const T* px = static_cast<const T*>(scores.raw_data());
  if (K <= 1024)
    attn_softmax_kernel<T, true><<<blocks_for(rows, 8), dim3(32, 8), 0, stream>>>(py, px, rows, K, L, S(scale), causal);
  else
    attn_softmax_kernel<T, false>
        <<<blocks_for(rows, 1), row_threads(K, 1024, 8), 0, stream>>>(py, px, rows, K, L, S(scale), causal);
  WEFT_CUDA_KERNEL_CHECK("scaled_dot_product_attention softmax");
}

template <typename T>
void cuda_attn_softmax_backward(const Tensor& dx, const Tensor& g, const Tensor& y, double scale) {
  const int64_t rows = y.size(0), K = y.size(1);
  if (rows * K == 0) return;
  DeviceGuard guard(dx.device().index);
  cudaStream_t stream = stream_for(dx);
  using S = acc_t<T>;
  T* pd = static_cast<T*>(dx.raw_data());
  const T* pg = static_cast<const T*>(g.raw_data());
  const T* py = static_cast<const T*>(y.raw_data());
  if (K <= 1024)
    attn_softmax_backward_kernel<T, true>
        <<<blocks_for(rows, 8), dim3(32, 8), 0, stream>>>(pd, pg, py, rows, K, S(scale));
  else
    attn_softmax_backward_kernel<T, false>
        <<<blocks_for(rows, 1), row_threads(K, 1024, 8), 0, stream>>>(pd, pg, py, rows, K, S(scale));
  WEFT_CUDA_KERNEL_CHECK("scaled_dot_product_attention softmax backward");
}

WEFT_RED_REGISTER_FLOATING(attn_softmax_table(), cuda_attn_softmax);
WEFT_RED_REGISTER_FLOATING(attn_softmax_backward_table(), cuda_attn_softmax_backward);

}  // namespace
}  // namespace weft::cuda
