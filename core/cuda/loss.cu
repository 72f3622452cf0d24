// CUDA loss kernels (core/kernels/loss.h): cross_entropy / nll_loss forward and
// backward, mse_loss and binary_cross_entropy_with_logits forward and backward.
//
// Contract (matches core/ops/loss.cc): x (R, C) contiguous; target (R) int64 (on the
// GPU: range-checked on the device, a bad target raises weft::Error naming it and C
// at the next synchronisation, Note [deferred index checks]; on the CPU: copied, the
// front end checked it).
// Forward, one warp per row (C <= 1024) or one block per row (e.g. C = 50257): max,
// sum exp(x - max) in S (float, double for float64; the sum of x for label smoothing
// in double), lse = max + log(sum) (the max itself when infinite), loss in double:
// (1 - ls) * (lse - x_t) + ls / C * (C * lse - sum x), 0 where ignored. Backward
// (elementwise over R * C): dx = g_r * scale * (exp(x - lse) - ls / C) - g_r * scale *
// (1 - ls) [c == t], 0 on ignored rows; nll: -g_r * scale at t. Pointwise losses: the
// per-element loss, or (no out) a deterministic double sum (fixed per-block partials
// summed in order by one block) copied to the host `total` (synchronises the stream).
#include "core/cuda/red_common.cuh"
#include "core/kernels/loss.h"

namespace weft::cuda {
namespace {
using namespace red;

template <typename T, bool kWarp>
__global__ void class_loss_kernel(const T* x, const int64_t* tgt, int64_t R, int64_t C, int64_t ignore_index,
                                  double smoothing, bool log_probs, double* loss, acc_t<T>* lse,
                                  unsigned long long* bad) {
  using S = acc_t<T>;
  const int64_t rows_per_block = kWarp ? blockDim.y : 1;
  const int64_t row0 = kWarp ? threadIdx.y : 0;
  const int lanes = kWarp ? 32 : blockDim.x;
  const int lane = threadIdx.x;
  for (int64_t r = blockIdx.x * rows_per_block + row0; r < R; r += static_cast<int64_t>(gridDim.x) * rows_per_block) {
    const T* p = x + r * C;
    const int64_t t = tgt[r];
    const bool ignored = t == ignore_index;
    const bool in_range = t >= 0 && t < C;
    if (!ignored && !in_range && lane == 0 && bad) report_bad_index(bad, t);
    if (log_probs) {
      if (lane == 0) loss[r] = (ignored || !in_range) ? 0.0 : -static_cast<double>(static_cast<S>(load<T>(p + t)));
      continue;
    }
    S mx = neg_inf<S>();
    for (int64_t c = lane; c < C; c += lanes) {
      S v = static_cast<S>(load<T>(p + c));
      mx = v > mx ? v : mx;
    }
    mx = row_allreduce<kWarp>(mx, MaxF{}, neg_inf<S>());
    S s = 0;
    double sx = 0;
    for (int64_t c = lane; c < C; c += lanes) {
      S v = static_cast<S>(load<T>(p + c));
      s += dexp(v - mx);
      sx += static_cast<double>(v);
    }
    s = row_allreduce<kWarp>(s, SumF{}, S(0));
    sx = row_allreduce<kWarp>(sx, SumF{}, 0.0);
    if (lane == 0) {
      const S l = dinf(mx) ? mx : mx + dlog(s);
      lse[r] = l;
      if (ignored || !in_range) {
        loss[r] = 0.0;
      } else {
        const double nll = static_cast<double>(l) - static_cast<double>(static_cast<S>(load<T>(p + t)));
        if (smoothing > 0) {
          const double smooth = static_cast<double>(C) * static_cast<double>(l) - sx;
          loss[r] = (1.0 - smoothing) * nll + smoothing / static_cast<double>(C) * smooth;
        } else {
          loss[r] = nll;
        }
      }
    }
  }
}

template <typename T>
__global__ void class_loss_backward_kernel(T* dx, const T* x, const int64_t* tgt, int64_t R, int64_t C,
                                           int64_t ignore_index, bool log_probs, const acc_t<T>* lse, const double* g,
                                           bool g_scalar, double scale, acc_t<T> off, acc_t<T> on) {
  using S = acc_t<T>;
  const int64_t total = R * C;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / C, c = i % C;
    const int64_t t = tgt[r];
    if (t == ignore_index || t < 0 || t >= C) {
      store<T>(dx + i, S(0));
      continue;
    }
    const S gr = static_cast<S>(g[g_scalar ? 0 : r] * scale);
    if (log_probs) {
      store<T>(dx + i, c == t ? -gr : S(0));
      continue;
    }
    S d = gr * (dexp(static_cast<S>(load<T>(x + i)) - lse[r]) - off);
    if (c == t) {
      // the CPU rounds d to T before subtracting the target term
      store<T>(dx + i, d);
      d = static_cast<S>(load<T>(dx + i)) - gr * on;
    }
    store<T>(dx + i, d);
  }
}

template <typename T>
void cuda_class_loss(const Tensor& x, const Tensor& target, int64_t ignore_index, double smoothing, bool log_probs,
                     const Tensor& loss, const Tensor& lse) {
  using S = acc_t<T>;
  const int64_t R = x.size(0), C = x.size(1);
  if (R == 0) return;
  DeviceGuard guard(x.device().index);
  cudaStream_t stream = stream_for(x);
  const bool on_gpu = target.device() == x.device();
  Tensor tgt = index_on(target, x);
  std::optional<BadIndexFlag> flag;
  if (on_gpu) flag.emplace(x, log_probs ? "nll_loss" : "cross_entropy", "target", C);
  const T* px = static_cast<const T*>(x.raw_data());
  const int64_t* pt = static_cast<const int64_t*>(tgt.raw_data());
  double* pl = static_cast<double*>(loss.raw_data());
  S* plse = log_probs ? nullptr : static_cast<S*>(lse.raw_data());
  unsigned long long* pb = flag ? flag->ptr() : nullptr;
  if (C <= 1024)
    class_loss_kernel<T, true>
        <<<blocks_for(R, 8), dim3(32, 8), 0, stream>>>(px, pt, R, C, ignore_index, smoothing, log_probs, pl, plse, pb);
  else
    class_loss_kernel<T, false><<<blocks_for(R, 1), row_threads(C, 1024, 8), 0, stream>>>(
        px, pt, R, C, ignore_index, smoothing, log_probs, pl, plse, pb);
  WEFT_CUDA_KERNEL_CHECK("cross_entropy");
}

template <typename T>
void cuda_class_loss_backward(const Tensor& dx, const Tensor& x, const Tensor& target, int64_t ignore_index,
                              double smoothing, bool log_probs, const Tensor& lse, const Tensor& g, double scale) {
  using S = acc_t<T>;
  const int64_t R = x.size(0), C = x.size(1);
  if (R * C == 0) return;
  DeviceGuard guard(dx.device().index);
  Tensor tgt = index_on(target, dx);
  Tensor gg = g.device() == dx.device() ? g.contiguous() : g.to(dx.device()).contiguous();
  class_loss_backward_kernel<T><<<blocks_for(R * C, 256), 256, 0, stream_for(dx)>>>(
      static_cast<T*>(dx.raw_data()), static_cast<const T*>(x.raw_data()), static_cast<const int64_t*>(tgt.raw_data()),
      R, C, ignore_index, log_probs, log_probs ? nullptr : static_cast<const S*>(lse.raw_data()),
      static_cast<const double*>(gg.raw_data()), gg.numel() == 1, scale,
      static_cast<S>(smoothing / static_cast<double>(C)), static_cast<S>(1.0 - smoothing));
  WEFT_CUDA_KERNEL_CHECK("cross_entropy_backward");
}

// ---------------------------------------------------------------- pointwise losses
template <typename S>
__device__ __forceinline__ S softplus_neg(S x) {  // log(1 + exp(-x)), stable
  return (-x > S(0) ? -x : S(0)) + dlog1p(dexp(-dabs(x)));
}

template <typename T, bool kBce>
struct PointF {
  using S = acc_t<T>;
  const T* x;
  const T* y;
  const T* pw;
  __device__ __forceinline__ S operator()(int64_t i) const {
    const S a = static_cast<S>(load<T>(x + i)), b = static_cast<S>(load<T>(y + i));
    if constexpr (kBce) {
      const S lw = pw ? S(1) + (static_cast<S>(load<T>(pw + i)) - S(1)) * b : S(1);
      return (S(1) - b) * a + lw * softplus_neg(a);
    } else {
      return (a - b) * (a - b);
    }
  }
};

template <typename T, bool kBce>
__global__ void point_loss_kernel(T* out, PointF<T, kBce> f, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    store<T>(out + i, f(i));
}

constexpr int kSumBlocks = 1024, kSumThreads = 256;
// Block b sums indices b*chunk .. ; the partials are summed in order by point_sum_final.
template <typename T, bool kBce>
__global__ void point_sum_partial(double* part, PointF<T, kBce> f, int64_t n, int64_t chunk) {
  const int64_t b0 = blockIdx.x * chunk, b1 = b0 + chunk < n ? b0 + chunk : n;
  double s = 0;
  for (int64_t i = b0 + threadIdx.x; i < b1; i += blockDim.x) s += static_cast<double>(f(i));
  s = block_reduce(s, SumF{}, 0.0);
  if (threadIdx.x == 0) part[blockIdx.x] = s;
}
__global__ void point_sum_final(double* out, const double* part, int nb) {
  double s = 0;
  for (int i = threadIdx.x; i < nb; i += blockDim.x) s += part[i];
  s = block_reduce(s, SumF{}, 0.0);
  if (threadIdx.x == 0) *out = s;
}

template <typename T, bool kBce>
void cuda_point_loss(const Tensor& out, const Tensor& x, const Tensor& y, const Tensor& pw, double& total) {
  const int64_t n = x.numel();
  total = 0;
  if (n == 0) return;
  DeviceGuard guard(x.device().index);
  cudaStream_t stream = stream_for(x);
  PointF<T, kBce> f{static_cast<const T*>(x.raw_data()), static_cast<const T*>(y.raw_data()),
                    pw.defined() ? static_cast<const T*>(pw.raw_data()) : nullptr};
  if (out.defined()) {
    point_loss_kernel<T, kBce><<<blocks_for(n, 256), 256, 0, stream>>>(static_cast<T*>(out.raw_data()), f, n);
    WEFT_CUDA_KERNEL_CHECK("point loss");
    return;
  }
  const int64_t chunk = std::max<int64_t>(kSumThreads, (n + kSumBlocks - 1) / kSumBlocks);
  const int nb = static_cast<int>((n + chunk - 1) / chunk);
  Tensor part = empty({nb + 1}, {DType::Float64, x.device()});
  double* pp = static_cast<double*>(part.raw_data());
  point_sum_partial<T, kBce><<<nb, kSumThreads, 0, stream>>>(pp + 1, f, n, chunk);
  WEFT_CUDA_KERNEL_CHECK("point loss sum");
  point_sum_final<<<1, kSumThreads, 0, stream>>>(pp, pp + 1, nb);
  WEFT_CUDA_KERNEL_CHECK("point loss sum(final)");
  WEFT_CUDA_CHECK(cudaMemcpyAsync(&total, pp, sizeof(double), cudaMemcpyDeviceToHost, stream));
  WEFT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

template <typename T, bool kBce>
__global__ void point_loss_backward_kernel(T* dx, T* dy, T* dp, const T* x, const T* y, const T* pw, const T* g,
                                           bool gs, acc_t<T> sc, int64_t n) {
  using S = acc_t<T>;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const S gi = static_cast<S>(load<T>(g + (gs ? 0 : i))) * sc;
    const S a = static_cast<S>(load<T>(x + i)), t = static_cast<S>(load<T>(y + i));
    if constexpr (kBce) {
      const S p = pw ? static_cast<S>(load<T>(pw + i)) : S(1);
      const S lw = S(1) + (p - S(1)) * t;
      const S sp = softplus_neg(a);
      const S sig_neg = S(1) / (S(1) + dexp(a));
      if (dx) store<T>(dx + i, gi * ((S(1) - t) - lw * sig_neg));
      if (dy) store<T>(dy + i, gi * (-a + (p - S(1)) * sp));
      if (dp) store<T>(dp + i, gi * t * sp);
    } else {
      const S d = S(2) * (a - t) * gi;
      if (dx) store<T>(dx + i, d);
      if (dy) store<T>(dy + i, -d);
    }
  }
}

template <typename T, bool kBce>
void cuda_point_loss_backward(const Tensor& dx, const Tensor& dy, const Tensor& dpw, const Tensor& x, const Tensor& y,
                              const Tensor& pw, const Tensor& g, double scale) {
  const int64_t n = x.numel();
  if (n == 0) return;
  DeviceGuard guard(x.device().index);
  auto mut = [](const Tensor& t) { return t.defined() ? static_cast<T*>(t.raw_data()) : nullptr; };
  point_loss_backward_kernel<T, kBce><<<blocks_for(n, 256), 256, 0, stream_for(x)>>>(
      mut(dx), mut(dy), mut(dpw), static_cast<const T*>(x.raw_data()), static_cast<const T*>(y.raw_data()),
      pw.defined() ? static_cast<const T*>(pw.raw_data()) : nullptr, static_cast<const T*>(g.raw_data()),
      g.numel() == 1, static_cast<acc_t<T>>(scale), n);
  WEFT_CUDA_KERNEL_CHECK("point loss backward");
}

template <typename T>
void cuda_mse(const Tensor& o, const Tensor& x, const Tensor& y, const Tensor& p, double& s) {
  cuda_point_loss<T, false>(o, x, y, p, s);
}
template <typename T>
void cuda_bce(const Tensor& o, const Tensor& x, const Tensor& y, const Tensor& p, double& s) {
  cuda_point_loss<T, true>(o, x, y, p, s);
}
template <typename T>
void cuda_mse_backward(const Tensor& dx, const Tensor& dy, const Tensor& dp, const Tensor& x, const Tensor& y,
                       const Tensor& p, const Tensor& g, double scale) {
  cuda_point_loss_backward<T, false>(dx, dy, dp, x, y, p, g, scale);
}
template <typename T>
void cuda_bce_backward(const Tensor& dx, const Tensor& dy, const Tensor& dp, const Tensor& x, const Tensor& y,
                       const Tensor& p, const Tensor& g, double scale) {
  cuda_point_loss_backward<T, true>(dx, dy, dp, x, y, p, g, scale);
}

WEFT_RED_REGISTER_FLOATING(class_loss_table(), cuda_class_loss);
WEFT_RED_REGISTER_FLOATING(class_loss_backward_table(), cuda_class_loss_backward);
WEFT_RED_REGISTER_FLOATING(mse_table(), cuda_mse);
WEFT_RED_REGISTER_FLOATING(mse_backward_table(), cuda_mse_backward);
WEFT_RED_REGISTER_FLOATING(bce_table(), cuda_bce);
WEFT_RED_REGISTER_FLOATING(bce_backward_table(), cuda_bce_backward);

}  // namespace
}  // namespace weft::cuda
