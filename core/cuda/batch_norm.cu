// CUDA batch_norm kernels (core/kernels/norm.h: bn_stats_table, bn_forward_table,
// bn_backward_table).
//
// Contract (matches core/ops/norm.cc): x, y, g, dx (N, C, L) contiguous; w (C) or
// undefined; mean, var, invstd (C) in the stat dtype. Stats: one block per channel,
// two-pass (mean, then squared deviations) in double, biased variance. Forward:
// invstd = 1 / sqrt(var + eps) in double; y = x * (invstd * w) + (b - mean * invstd *
// w) in S. Backward: one block per channel sums g and g * (x - mean) in double, then
// db, dw and the per-channel coefficients dx = a * g + k * x + off (training) or
// a * g (eval), exactly as the CPU. Channels are independent blocks, so results are
// deterministic. When there are too few channels to fill the GPU and N * L is long
// (e.g. 64 channels of a large image batch), each channel's N * L range is split
// into chunks reduced by separate blocks into double partials, merged per channel
// in chunk order by a small kernel (still deterministic; with one chunk per
// channel the order of operations is the single-kernel one).
#include <algorithm>

#include "core/cuda/red_common.cuh"
#include "core/kernels/norm.h"

namespace weft::cuda {
namespace {
using namespace red;

constexpr int kBnThreads = 512;

template <typename T>
__global__ void bn_stats_kernel(const T* x, acc_t<T>* mean, acc_t<T>* var, int64_t N, int64_t C, int64_t L) {
  using S = acc_t<T>;
  const int64_t NL = N * L;
  const double count = static_cast<double>(NL);
  for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    double s = 0;
    for (int64_t k = threadIdx.x; k < NL; k += blockDim.x) {
      const int64_t n = k / L, i = k % L;
      s += static_cast<double>(static_cast<S>(load<T>(x + (n * C + c) * L + i)));
    }
    s = block_reduce(s, SumF{}, 0.0);
    const double m = s / count;
    double ss = 0;
    for (int64_t k = threadIdx.x; k < NL; k += blockDim.x) {
      const int64_t n = k / L, i = k % L;
      const double d = static_cast<double>(static_cast<S>(load<T>(x + (n * C + c) * L + i))) - m;
      ss += d * d;
    }
    ss = block_reduce(ss, SumF{}, 0.0);
    if (threadIdx.x == 0) {
      mean[c] = static_cast<S>(m);
      var[c] = static_cast<S>(ss / count);
    }
  }
}

template <typename T>
__global__ void bn_coef_kernel(const T* w, const T* b, const acc_t<T>* mean, const acc_t<T>* var, double eps,
                               acc_t<T>* invstd, acc_t<T>* scale, acc_t<T>* shift, int64_t C) {
  using S = acc_t<T>;
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < C;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const S is = static_cast<S>(1.0 / ::sqrt(static_cast<double>(var[c]) + eps));
    invstd[c] = is;
    const S wc = w ? static_cast<S>(load<T>(w + c)) : S(1), bc = b ? static_cast<S>(load<T>(b + c)) : S(0);
    scale[c] = is * wc;
    shift[c] = bc - mean[c] * scale[c];
  }
}

// y = x * a[c] (+ x2 * k[c]) + off[c] over (N, C, L); used by forward and dx.
template <typename T>
__global__ void bn_apply_kernel(T* y, const T* x, const acc_t<T>* a, const T* x2, const acc_t<T>* k,
                                const acc_t<T>* off, int64_t total, int64_t C, int64_t L) {
  using S = acc_t<T>;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = (t / L) % C;
    S v = a[c] * static_cast<S>(load<T>(x + t));
    if (x2) v = v + k[c] * static_cast<S>(load<T>(x2 + t));
    store<T>(y + t, v + off[c]);
  }
}

// db, dw and the dx coefficients of channel c from sg = sum g, sgd = sum g * (x - mean).
template <typename T>
__device__ void bn_backward_coefs(int64_t c, double sg, double sgd, double m, double count, const T* w,
                                  const acc_t<T>* invstd, bool training, T* dw, T* db, acc_t<T>* a, acc_t<T>* k,
                                  acc_t<T>* off) {
  using S = acc_t<T>;
  const double is = invstd[c];
  if (db) store<T>(db + c, sg);
  if (dw) store<T>(dw + c, sgd * is);
  const double wc = w ? static_cast<double>(static_cast<S>(load<T>(w + c))) : 1.0;
  a[c] = static_cast<S>(wc * is);
  if (training) {
    const double kk = -wc * is * is * is * sgd / count;
    k[c] = static_cast<S>(kk);
    off[c] = static_cast<S>(-wc * is * sg / count - kk * m);
  } else {
    k[c] = S(0);
    off[c] = S(0);
  }
}

template <typename T>
__global__ void bn_backward_reduce_kernel(const T* g, const T* x, const T* w, const acc_t<T>* mean,
                                          const acc_t<T>* invstd, bool training, T* dw, T* db, acc_t<T>* a, acc_t<T>* k,
                                          acc_t<T>* off, int64_t N, int64_t C, int64_t L) {
  using S = acc_t<T>;
  const int64_t NL = N * L;
  const double count = static_cast<double>(NL);
  for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    const double m = mean[c];
    double sg = 0, sgd = 0;
    for (int64_t q = threadIdx.x; q < NL; q += blockDim.x) {
      const int64_t n = q / L, i = q % L;
      const int64_t at = (n * C + c) * L + i;
      const double gv = static_cast<double>(static_cast<S>(load<T>(g + at)));
      sg += gv;
      sgd += gv * (static_cast<double>(static_cast<S>(load<T>(x + at))) - m);
    }
    sg = block_reduce(sg, SumF{}, 0.0);
    sgd = block_reduce(sgd, SumF{}, 0.0);
    if (threadIdx.x == 0) bn_backward_coefs<T>(c, sg, sgd, m, count, w, invstd, training, dw, db, a, k, off);
  }
}

// ---- chunked path: blocks per (channel, chunk of N * L), double partials ----

// The channel's mean from its nchunks partial sums, summed in chunk order.
__device__ __forceinline__ double bn_chunk_mean(const double* part, int64_t c, int64_t nchunks, double count) {
  double s = 0;
  for (int64_t q = 0; q < nchunks; ++q) s += part[c * nchunks + q];
  return s / count;
}

// kind 0: sum x; kind 1: sum (x - mean)^2 with the mean from sums; into out[c * nchunks + q].
template <typename T>
__global__ void bn_stats_partial_kernel(const T* x, const double* sums, double* out, int kind, int64_t N, int64_t C,
                                        int64_t L, int64_t nchunks, int64_t chunk_len) {
  using S = acc_t<T>;
  const int64_t NL = N * L;
  for (int64_t t = blockIdx.x; t < C * nchunks; t += gridDim.x) {
    const int64_t c = t / nchunks, q = t % nchunks;
    const int64_t b = q * chunk_len, e = b + chunk_len < NL ? b + chunk_len : NL;
    const double m = kind == 1 ? bn_chunk_mean(sums, c, nchunks, static_cast<double>(NL)) : 0.0;
    double s = 0;
    for (int64_t kk = b + threadIdx.x; kk < e; kk += blockDim.x) {
      const int64_t n = kk / L, i = kk % L;
      const double v = static_cast<double>(static_cast<S>(load<T>(x + (n * C + c) * L + i)));
      s += kind == 1 ? (v - m) * (v - m) : v;
    }
    s = block_reduce(s, SumF{}, 0.0);
    if (threadIdx.x == 0) out[t] = s;
  }
}

template <typename T>
__global__ void bn_stats_finish_kernel(const double* sums, const double* sq, acc_t<T>* mean, acc_t<T>* var, int64_t C,
                                       int64_t nchunks, double count) {
  using S = acc_t<T>;
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < C;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double ss = 0;
    for (int64_t q = 0; q < nchunks; ++q) ss += sq[c * nchunks + q];
    mean[c] = static_cast<S>(bn_chunk_mean(sums, c, nchunks, count));
    var[c] = static_cast<S>(ss / count);
  }
}

// sum g and sum g * (x - mean) over a chunk, into part[2 * (c * nchunks + q) + {0, 1}].
template <typename T>
__global__ void bn_backward_partial_kernel(const T* g, const T* x, const acc_t<T>* mean, double* part, int64_t N,
                                           int64_t C, int64_t L, int64_t nchunks, int64_t chunk_len) {
  using S = acc_t<T>;
  const int64_t NL = N * L;
  for (int64_t t = blockIdx.x; t < C * nchunks; t += gridDim.x) {
    const int64_t c = t / nchunks, q = t % nchunks;
    const int64_t b = q * chunk_len, e = b + chunk_len < NL ? b + chunk_len : NL;
    const double m = mean[c];
    double sg = 0, sgd = 0;
    for (int64_t kk = b + threadIdx.x; kk < e; kk += blockDim.x) {
      const int64_t n = kk / L, i = kk % L;
      const int64_t at = (n * C + c) * L + i;
      const double gv = static_cast<double>(static_cast<S>(load<T>(g + at)));
      sg += gv;
      sgd += gv * (static_cast<double>(static_cast<S>(load<T>(x + at))) - m);
    }
    sg = block_reduce(sg, SumF{}, 0.0);
    sgd = block_reduce(sgd, SumF{}, 0.0);
    if (threadIdx.x == 0) {
      part[2 * t] = sg;
      part[2 * t + 1] = sgd;
    }
  }
}

template <typename T>
__global__ void bn_backward_finish_kernel(const double* part, const T* w, const acc_t<T>* mean, const acc_t<T>* invstd,
                                          bool training, T* dw, T* db, acc_t<T>* a, acc_t<T>* k, acc_t<T>* off,
                                          int64_t C, int64_t nchunks, double count) {
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < C;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double sg = 0, sgd = 0;
    for (int64_t q = 0; q < nchunks; ++q) {
      sg += part[2 * (c * nchunks + q)];
      sgd += part[2 * (c * nchunks + q) + 1];
    }
    bn_backward_coefs<T>(c, sg, sgd, static_cast<double>(mean[c]), count, w, invstd, training, dw, db, a, k, off);
  }
}

// Chunks per channel: 1 when the channels alone fill the GPU or N * L is short.
int64_t bn_chunks(int64_t C, int64_t NL, int device) {
  const int64_t target = 4LL * sm_count(device);
  const int64_t min_chunk = 4LL * kBnThreads;  // each thread sums at least 4 elements
  if (C >= target || NL < 2 * min_chunk) return 1;
  return std::max<int64_t>(1, std::min<int64_t>((target + C - 1) / C, NL / min_chunk));
}

template <typename T>
const T* cptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.raw_data()) : nullptr;
}

template <typename T>
void cuda_bn_stats(const Tensor& x, const Tensor& mean, const Tensor& var) {
  using S = acc_t<T>;
  const int64_t N = x.size(0), C = x.size(1), L = x.size(2);
  if (C == 0) return;
  DeviceGuard guard(x.device().index);
  cudaStream_t stream = stream_for(x);
  const int64_t nchunks = bn_chunks(C, N * L, x.device().index);
  if (nchunks == 1) {
    bn_stats_kernel<T><<<blocks_for(C, 1), kBnThreads, 0, stream>>>(static_cast<const T*>(x.raw_data()),
                                                                    static_cast<S*>(mean.raw_data()),
                                                                    static_cast<S*>(var.raw_data()), N, C, L);
    WEFT_CUDA_KERNEL_CHECK("batch_norm_stats");
    return;
  }
  const int64_t chunk_len = (N * L + nchunks - 1) / nchunks;
  Tensor part = empty({2, C * nchunks}, {DType::Float64, x.device()});  // sums, squared deviations
  double* sums = static_cast<double*>(part.raw_data());
  double* sq = sums + C * nchunks;
  const T* px = static_cast<const T*>(x.raw_data());
  bn_stats_partial_kernel<T>
      <<<blocks_for(C * nchunks, 1), kBnThreads, 0, stream>>>(px, sums, sums, 0, N, C, L, nchunks, chunk_len);
  WEFT_CUDA_KERNEL_CHECK("batch_norm_stats(sums)");
  bn_stats_partial_kernel<T>
      <<<blocks_for(C * nchunks, 1), kBnThreads, 0, stream>>>(px, sums, sq, 1, N, C, L, nchunks, chunk_len);
  WEFT_CUDA_KERNEL_CHECK("batch_norm_stats(deviations)");
  bn_stats_finish_kernel<T><<<blocks_for(C, 256), 256, 0, stream>>>(sums, sq, static_cast<S*>(mean.raw_data()),
                                                                    static_cast<S*>(var.raw_data()), C, nchunks,
                                                                    static_cast<double>(N * L));
  WEFT_CUDA_KERNEL_CHECK("batch_norm_stats(finish)");
}

template <typename T>
void cuda_bn_forward(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& mean,
                     const Tensor& var, double eps, const Tensor& invstd) {
  using S = acc_t<T>;
  const int64_t N = x.size(0), C = x.size(1), L = x.size(2);
  if (C == 0) return;
  DeviceGuard guard(y.device().index);
  cudaStream_t stream = stream_for(y);
  Tensor coef = empty({2, C}, {stat_dtype(x.dtype()), y.device()});
  S* scale = static_cast<S*>(coef.raw_data());
  S* shift = scale + C;
  bn_coef_kernel<T><<<blocks_for(C, 256), 256, 0, stream>>>(cptr<T>(w), cptr<T>(b), cptr<S>(mean), cptr<S>(var), eps,
                                                            static_cast<S*>(invstd.raw_data()), scale, shift, C);
  WEFT_CUDA_KERNEL_CHECK("batch_norm(coefficients)");
  const int64_t total = N * C * L;
  if (total == 0) return;
  bn_apply_kernel<T><<<blocks_for(total, 256), 256, 0, stream>>>(static_cast<T*>(y.raw_data()), cptr<T>(x), scale,
                                                                 nullptr, nullptr, shift, total, C, L);
  WEFT_CUDA_KERNEL_CHECK("batch_norm");
}

template <typename T>
void cuda_bn_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& g, const Tensor& x,
                      const Tensor& w, const Tensor& mean, const Tensor& invstd, bool training) {
  using S = acc_t<T>;
  const int64_t N = x.size(0), C = x.size(1), L = x.size(2);
  if (C == 0) return;
  DeviceGuard guard(x.device().index);
  cudaStream_t stream = stream_for(x);
  Tensor coef = empty({3, C}, {stat_dtype(x.dtype()), x.device()});
  S* a = static_cast<S*>(coef.raw_data());
  S* k = a + C;
  S* off = k + C;
  T* pdw = dw.defined() ? static_cast<T*>(dw.raw_data()) : nullptr;
  T* pdb = db.defined() ? static_cast<T*>(db.raw_data()) : nullptr;
  const int64_t nchunks = bn_chunks(C, N * L, x.device().index);
  if (nchunks == 1) {
    bn_backward_reduce_kernel<T><<<blocks_for(C, 1), kBnThreads, 0, stream>>>(
        cptr<T>(g), cptr<T>(x), cptr<T>(w), cptr<S>(mean), cptr<S>(invstd), training, pdw, pdb, a, k, off, N, C, L);
    WEFT_CUDA_KERNEL_CHECK("batch_norm_backward(reduce)");
  } else {
    const int64_t chunk_len = (N * L + nchunks - 1) / nchunks;
    Tensor part = empty({2 * C * nchunks}, {DType::Float64, x.device()});
    double* pp = static_cast<double*>(part.raw_data());
    bn_backward_partial_kernel<T><<<blocks_for(C * nchunks, 1), kBnThreads, 0, stream>>>(
        cptr<T>(g), cptr<T>(x), cptr<S>(mean), pp, N, C, L, nchunks, chunk_len);
    WEFT_CUDA_KERNEL_CHECK("batch_norm_backward(partial)");
    bn_backward_finish_kernel<T><<<blocks_for(C, 256), 256, 0, stream>>>(pp, cptr<T>(w), cptr<S>(mean), cptr<S>(invstd),
                                                                         training, pdw, pdb, a, k, off, C, nchunks,
                                                                         static_cast<double>(N * L));
    WEFT_CUDA_KERNEL_CHECK("batch_norm_backward(finish)");
  }
  const int64_t total = N * C * L;
  if (!dx.defined() || total == 0) return;
  bn_apply_kernel<T><<<blocks_for(total, 256), 256, 0, stream>>>(static_cast<T*>(dx.raw_data()), cptr<T>(g), a,
                                                                 cptr<T>(x), k, off, total, C, L);
  WEFT_CUDA_KERNEL_CHECK("batch_norm_backward(dx)");
}

WEFT_RED_REGISTER_FLOATING(bn_stats_table(), cuda_bn_stats);
WEFT_RED_REGISTER_FLOATING(bn_forward_table(), cuda_bn_forward);
WEFT_RED_REGISTER_FLOATING(bn_backward_table(), cuda_bn_backward);

}  // namespace
}  // namespace weft::cuda
