// CUDA embedding forward / backward (core/kernels/embedding.h).
//
// Contract: out (n, D), weight (V, D), idx (n) int64, grad_weight (V, D) zero-filled,
// g (n, D); all contiguous. idx may be on the GPU (then it is range-checked on the
// device: a bad index is skipped by the kernel and raises weft::Error naming it and
// V at the next synchronisation, Note [deferred index checks]) or on the CPU (the
// front end has checked it; it is copied to the GPU). The backward gets the indices
// the forward already checked, so it skips bad ones without a flag (no stream
// synchronisation per training step). The backward scatter-adds with
// atomics: float32 / float64 directly into grad_weight; float16 / bfloat16 into a
// float32 buffer converted once at the end (like the CPU, which accumulates 16-bit
// types in float). Atomic order is unspecified, so float results are not bitwise
// deterministic run to run (they agree with the CPU within rounding).
#include <optional>

#include "core/cuda/red_common.cuh"
#include "core/kernels/embedding.h"

namespace weft::cuda {
namespace {
using namespace red;

template <typename T>
__global__ void embedding_kernel(T* out, const T* w, const int64_t* idx, int64_t n, int64_t V, int64_t D,
                                 unsigned long long* bad) {
  const int64_t total = n * D;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = t / D, d = t % D, k = idx[i];
    if (k < 0 || k >= V) {
      if (bad) report_bad_index(bad, k);
      continue;
    }
    out[t] = w[k * D + d];
  }
}

template <typename T, typename A>
__global__ void embedding_backward_kernel(A* acc, const T* g, const int64_t* idx, int64_t n, int64_t V, int64_t D,
                                          unsigned long long* bad) {
  const int64_t total = n * D;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = t / D, d = t % D, k = idx[i];
    if (k < 0 || k >= V) {
      if (bad) report_bad_index(bad, k);
      continue;
    }
    atomicAdd(acc + k * D + d, static_cast<A>(load<T>(g + t)));
  }
}

template <typename T>
__global__ void add_from_float_kernel(T* dst, const float* src, int64_t n) {
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x)
    store<T>(dst + t, load<T>(dst + t) + src[t]);
}

template <typename T>
void cuda_embedding(const Tensor& out, const Tensor& weight, const Tensor& idx_in) {
  const int64_t n = idx_in.numel(), V = weight.size(0), D = weight.size(1);
  if (n * D == 0) return;
  DeviceGuard guard(out.device().index);
  cudaStream_t stream = stream_for(out);
  const bool on_gpu = idx_in.device() == out.device();
  Tensor idx = index_on(idx_in, out);
  std::optional<BadIndexFlag> flag;
  if (on_gpu) flag.emplace(out, "embedding", "index", V);
  embedding_kernel<T><<<blocks_for(n * D, 256), 256, 0, stream>>>(
      static_cast<T*>(out.raw_data()), static_cast<const T*>(weight.raw_data()),
      static_cast<const int64_t*>(idx.raw_data()), n, V, D, flag ? flag->ptr() : nullptr);
  WEFT_CUDA_KERNEL_CHECK("embedding");
}

template <typename T>
void cuda_embedding_backward(const Tensor& grad_weight, const Tensor& g, const Tensor& idx_in) {
  const int64_t n = idx_in.numel(), V = grad_weight.size(0), D = grad_weight.size(1);
  if (n * D == 0) return;
  DeviceGuard guard(grad_weight.device().index);
  cudaStream_t stream = stream_for(grad_weight);
  Tensor idx = index_on(idx_in, grad_weight);  // checked by the forward: no flag, no synchronisation
  const int64_t* pi = static_cast<const int64_t*>(idx.raw_data());
  const T* pg = static_cast<const T*>(g.raw_data());
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    embedding_backward_kernel<T, T>
        <<<blocks_for(n * D, 256), 256, 0, stream>>>(static_cast<T*>(grad_weight.raw_data()), pg, pi, n, V, D, nullptr);
    WEFT_CUDA_KERNEL_CHECK("embedding_backward");
  } else {
    Tensor acc = zeros({V, D}, {DType::Float32, grad_weight.device()});
    embedding_backward_kernel<T, float>
        <<<blocks_for(n * D, 256), 256, 0, stream>>>(static_cast<float*>(acc.raw_data()), pg, pi, n, V, D, nullptr);
    WEFT_CUDA_KERNEL_CHECK("embedding_backward");
    add_from_float_kernel<T><<<blocks_for(V * D, 256), 256, 0, stream>>>(
        static_cast<T*>(grad_weight.raw_data()), static_cast<const float*>(acc.raw_data()), V * D);
    WEFT_CUDA_KERNEL_CHECK("embedding_backward(convert)");
  }
}

// embedding copies rows: registered for the CPU's numeric dtypes
WEFT_RED_REGISTER_NUMERIC(embedding_table(), cuda_embedding);
WEFT_RED_REGISTER_FLOATING(embedding_backward_table(), cuda_embedding_backward);

}  // namespace
}  // namespace weft::cuda
