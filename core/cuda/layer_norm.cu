// CUDA layer_norm forward / backward (core/kernels/norm.h, tables ln_forward_table /
// ln_backward_table).
//
// Contract (matches cpu_ln_forward / cpu_ln_backward in core/ops/norm.cc): x, y, g,
// dx (R, K) contiguous; w, b (K) or undefined; mean, rstd (R) in the stat dtype
// (float32, float64 for float64). Statistics are two-pass (mean, then squared
// deviations) accumulated in double like the CPU; the elementwise math is in the
// compute type S (float, double for float64). Forward and dx: one warp per row for K
// <= 1024, one block per row above. dw / db: a deterministic two-stage column
// reduction (fixed row chunks -> double partials, then each column sums its chunks
// in order), so results do not depend on scheduling.
#include "core/cuda/red_common.cuh"
#include "core/kernels/norm.h"

namespace weft::cuda {
namespace {
using namespace red;

template <typename T, bool kWarp>
__global__ void ln_forward_kernel(T* y, const T* x, const T* w, const T* b, double eps, acc_t<T>* mean, acc_t<T>* rstd,
                                  int64_t R, int64_t K) {
  using S = acc_t<T>;
  const int64_t rows_per_block = kWarp ? blockDim.y : 1;
  const int64_t row0 = kWarp ? threadIdx.y : 0;
  const int lanes = kWarp ? 32 : blockDim.x;
  const int lane = threadIdx.x;
  for (int64_t r = blockIdx.x * rows_per_block + row0; r < R; r += static_cast<int64_t>(gridDim.x) * rows_per_block) {
    const T* p = x + r * K;
    T* q = y + r * K;
    double s = 0;
    for (int64_t i = lane; i < K; i += lanes) s += static_cast<double>(static_cast<S>(load<T>(p + i)));
    s = row_allreduce<kWarp>(s, SumF{}, 0.0);
    const double m = s / static_cast<double>(K);
    double ss = 0;
    for (int64_t i = lane; i < K; i += lanes) {
      double d = static_cast<double>(static_cast<S>(load<T>(p + i))) - m;
      ss += d * d;
    }
    ss = row_allreduce<kWarp>(ss, SumF{}, 0.0);
    const double rs = 1.0 / ::sqrt(ss / static_cast<double>(K) + eps);
    if (lane == 0) {
      mean[r] = static_cast<S>(m);
      rstd[r] = static_cast<S>(rs);
    }
    const S ms = static_cast<S>(m), rss = static_cast<S>(rs);
    for (int64_t i = lane; i < K; i += lanes) {
      S v = (static_cast<S>(load<T>(p + i)) - ms) * rss;
      if (w) v = v * static_cast<S>(load<T>(w + i));
      if (b) v = v + static_cast<S>(load<T>(b + i));
      store<T>(q + i, v);
    }
  }
}

template <typename T, bool kWarp>
__global__ void ln_backward_dx_kernel(T* dx, const T* g, const T* x, const T* w, const acc_t<T>* mean,
                                      const acc_t<T>* rstd, int64_t R, int64_t K) {
  using S = acc_t<T>;
  const int64_t rows_per_block = kWarp ? blockDim.y : 1;
  const int64_t row0 = kWarp ? threadIdx.y : 0;
  const int lanes = kWarp ? 32 : blockDim.x;
  const int lane = threadIdx.x;
  for (int64_t r = blockIdx.x * rows_per_block + row0; r < R; r += static_cast<int64_t>(gridDim.x) * rows_per_block) {
    const T* p = x + r * K;
    const T* q = g + r * K;
    const S m = mean[r], rs = rstd[r];
    double sg = 0, sgx = 0;
    for (int64_t i = lane; i < K; i += lanes) {
      S v = static_cast<S>(load<T>(q + i)) * (w ? static_cast<S>(load<T>(w + i)) : S(1));
      sg += v;
      sgx += static_cast<double>(v) * static_cast<double>((static_cast<S>(load<T>(p + i)) - m) * rs);
    }
    sg = row_allreduce<kWarp>(sg, SumF{}, 0.0);
    sgx = row_allreduce<kWarp>(sgx, SumF{}, 0.0);
    const S a = static_cast<S>(sg / static_cast<double>(K)), bb = static_cast<S>(sgx / static_cast<double>(K));
    T* o = dx + r * K;
    for (int64_t i = lane; i < K; i += lanes) {
      S v = static_cast<S>(load<T>(q + i)) * (w ? static_cast<S>(load<T>(w + i)) : S(1));
      store<T>(o + i, rs * (v - a - (static_cast<S>(load<T>(p + i)) - m) * rs * bb));
    }
  }
}

// Stage 1: partial sums over rows [c * rb, min(R, (c + 1) * rb)) for each column.
template <typename T>
__global__ void ln_backward_wb_partial(double* pw, double* pb, const T* g, const T* x, const acc_t<T>* mean,
                                       const acc_t<T>* rstd, int64_t R, int64_t K, int64_t rb) {
  using S = acc_t<T>;
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t c = blockIdx.y;
  if (i >= K) return;
  const int64_t r0 = c * rb, r1 = r0 + rb < R ? r0 + rb : R;
  double aw = 0, ab = 0;
  for (int64_t r = r0; r < r1; ++r) {
    S gv = static_cast<S>(load<T>(g + r * K + i));
    aw += static_cast<double>(gv * (static_cast<S>(load<T>(x + r * K + i)) - mean[r]) * rstd[r]);
    ab += static_cast<double>(gv);
  }
  pw[c * K + i] = aw;
  pb[c * K + i] = ab;
}

// Stage 2: the chunks' partial sums of each column added up. A block of
// kWbCols x kWbGroups threads takes kWbCols columns (reads coalesced along the
// columns); thread group y sums chunks y, y + kWbGroups, ... in order, then
// group 0 adds the groups' sums in order: a fixed order, so the result does
// not depend on timing. (One thread per column over every chunk left the GPU
// nearly idle: K / 256 blocks, 2.7 ms of a GPT-2 small step.)
constexpr int kWbCols = 32, kWbGroups = 8;

template <typename T>
__global__ void ln_backward_wb_final(T* dw, T* db, const double* pw, const double* pb, int64_t K, int64_t nchunks) {
  __shared__ double sw[kWbGroups][kWbCols], sb[kWbGroups][kWbCols];
  const int64_t i = blockIdx.x * static_cast<int64_t>(kWbCols) + threadIdx.x;
  double aw = 0, ab = 0;
  if (i < K)
    for (int64_t c = threadIdx.y; c < nchunks; c += kWbGroups) {
      aw += pw[c * K + i];
      ab += pb[c * K + i];
    }
  sw[threadIdx.y][threadIdx.x] = aw;
  sb[threadIdx.y][threadIdx.x] = ab;
  __syncthreads();
  if (threadIdx.y != 0 || i >= K) return;
  for (int y = 1; y < kWbGroups; ++y) {
    aw += sw[y][threadIdx.x];
    ab += sb[y][threadIdx.x];
  }
  if (dw) store<T>(dw + i, aw);
  if (db) store<T>(db + i, ab);
}

template <typename T>
const T* ptr_or_null(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.raw_data()) : nullptr;
}

template <typename T>
void cuda_ln_forward(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b, double eps, const Tensor& mean,
                     const Tensor& rstd) {
  using S = acc_t<T>;
  const int64_t R = x.size(0), K = x.size(1);
  if (R == 0) return;
  DeviceGuard guard(y.device().index);
  cudaStream_t stream = stream_for(y);
  T* py = static_cast<T*>(y.raw_data());
  const T* px = static_cast<const T*>(x.raw_data());
  S* pm = static_cast<S*>(mean.raw_data());
  S* pr = static_cast<S*>(rstd.raw_data());
  if (K <= 1024)
    ln_forward_kernel<T, true>
        <<<blocks_for(R, 8), dim3(32, 8), 0, stream>>>(py, px, ptr_or_null<T>(w), ptr_or_null<T>(b), eps, pm, pr, R, K);
  else
    ln_forward_kernel<T, false><<<blocks_for(R, 1), row_threads(K, 1024, 8), 0, stream>>>(
        py, px, ptr_or_null<T>(w), ptr_or_null<T>(b), eps, pm, pr, R, K);
  WEFT_CUDA_KERNEL_CHECK("layer_norm");
}

template <typename T>
void cuda_ln_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& g, const Tensor& x,
                      const Tensor& w, const Tensor& mean, const Tensor& rstd) {
  using S = acc_t<T>;
  const int64_t R = x.size(0), K = x.size(1);
  DeviceGuard guard(x.device().index);
  cudaStream_t stream = stream_for(x);
  const T* pg = static_cast<const T*>(g.raw_data());
  const T* px = static_cast<const T*>(x.raw_data());
  const S* pm = static_cast<const S*>(mean.raw_data());
  const S* pr = static_cast<const S*>(rstd.raw_data());
  if (dx.defined() && R * K > 0) {
    T* pdx = static_cast<T*>(dx.raw_data());
    if (K <= 1024)
      ln_backward_dx_kernel<T, true>
          <<<blocks_for(R, 8), dim3(32, 8), 0, stream>>>(pdx, pg, px, ptr_or_null<T>(w), pm, pr, R, K);
    else
      ln_backward_dx_kernel<T, false>
          <<<blocks_for(R, 1), row_threads(K, 1024, 8), 0, stream>>>(pdx, pg, px, ptr_or_null<T>(w), pm, pr, R, K);
    WEFT_CUDA_KERNEL_CHECK("layer_norm_backward(dx)");
  }
  if ((dw.defined() || db.defined()) && K > 0) {
    const int64_t rb = std::max<int64_t>(16, (R + 255) / 256);
    const int64_t nchunks = std::max<int64_t>(1, (R + rb - 1) / rb);
    Tensor part = empty({2, nchunks, K}, {DType::Float64, x.device()});
    double* pw = static_cast<double*>(part.raw_data());
    double* pb = pw + nchunks * K;
    dim3 grid(static_cast<unsigned>((K + 255) / 256), static_cast<unsigned>(nchunks));
    ln_backward_wb_partial<T><<<grid, 256, 0, stream>>>(pw, pb, pg, px, pm, pr, R, K, rb);
    WEFT_CUDA_KERNEL_CHECK("layer_norm_backward(dw/db partial)");
    T* pdw = dw.defined() ? static_cast<T*>(dw.raw_data()) : nullptr;
    T* pdb = db.defined() ? static_cast<T*>(db.raw_data()) : nullptr;
    ln_backward_wb_final<T>
        <<<blocks_for(K, kWbCols), dim3(kWbCols, kWbGroups), 0, stream>>>(pdw, pdb, pw, pb, K, nchunks);
    WEFT_CUDA_KERNEL_CHECK("layer_norm_backward(dw/db)");
  }
}

WEFT_RED_REGISTER_FLOATING(ln_forward_table(), cuda_ln_forward);
WEFT_RED_REGISTER_FLOATING(ln_backward_table(), cuda_ln_backward);

}  // namespace
}  // namespace weft::cuda
