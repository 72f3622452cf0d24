// CUDA kernels for the optimizer tables in optim/kernels.h: sgd_step,
// adam_step (Adam and AdamW, with AMSGrad), rmsprop_step, adagrad_step,
// grad_norm, grad_scale; float32 and float64.
//
// Contract: the same per-element expressions, operation order and roundings as
// the CPU kernels in optim/kernels.cc (Note [optimizer rounding]): the fmas the
// CPU spells with std::fma are fma_rn here and every other operation is an
// explicit unfused IEEE op (nvcc would otherwise contract a * b + c), so the
// parameter updates equal the CPU's bit for bit. One kernel launch per
// parameter (grad_norm: one per tensor plus one combining launch), on the
// current stream of the parameter's device. grad_norm is deterministic: fixed
// 4096-element chunks, each reduced in a fixed tree order in float64, partials
// combined in a fixed order (not the CPU's sequential order, so it agrees with
// the CPU to float64 rounding, not bit for bit).
#include <cmath>

#include "core/cuda/check.h"
#include "core/cuda/ew_math.cuh"
#include "core/cuda/loops.cuh"
#include "core/cuda/runtime.h"
#include "core/cuda/stream.h"
#include "core/ops.h"
#include "optim/kernels.h"

namespace weft::optim {
namespace {

using cuda::add_rn;
using cuda::div_rn;
using cuda::fma_rn;
using cuda::mul_rn;
using cuda::sqrt_rn;
using cuda::sub_rn;

constexpr int kThreads = 256;

int grid_for(int64_t n) { return cuda::grid_for(n); }

void check_operands(const char* op, const Tensor& param, std::initializer_list<const Tensor*> others) {
  WEFT_CHECK(param.device().is_cuda() && param.is_contiguous(), op, " (cuda): parameter must be a contiguous CUDA ",
             "tensor, got ", param.device());
  for (const Tensor* t : others) {
    if (!t->defined()) continue;
    WEFT_CHECK(t->device() == param.device() && t->dtype() == param.dtype() && t->is_contiguous() &&
                   t->numel() == param.numel(),
               op, " (cuda): operand ", shape_str(t->sizes()), " ", t->dtype(), " on ", t->device(),
               " does not match the parameter ", shape_str(param.sizes()), " ", param.dtype(), " on ", param.device());
  }
}

// ---- SGD ----
template <typename T>
struct SGDConsts {
  T wd, mom, one_minus_damp, neg_lr;
  bool use_wd, use_mom, nesterov, init;
};

template <typename T>
__global__ void sgd_kernel(int64_t n, T* __restrict__ p, const T* __restrict__ g, T* __restrict__ b,
                           const SGDConsts<T> c) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    T d = g[i];
    if (c.use_wd) d = fma_rn(p[i], c.wd, d);  // grad.add(param, alpha=wd)
    if (c.use_mom) {
      T bi;
      if (c.init) {
        bi = d;  // torch.clone(grad)
      } else {
        const T scaled = mul_rn(b[i], c.mom);      // buf.mul_(mom)
        bi = fma_rn(d, c.one_minus_damp, scaled);  // .add_(grad, alpha=1-damp)
      }
      b[i] = bi;
      d = c.nesterov ? fma_rn(bi, c.mom, d) : bi;  // grad.add(buf, alpha=mom) or buf
    }
    p[i] = fma_rn(d, c.neg_lr, p[i]);  // param.add_(grad, alpha=-lr)
  }
}

template <typename T>
void sgd_step_cuda(const Tensor& param, const Tensor& grad, const Tensor& buf, const SGDStepArgs& a) {
  const bool use_mom = a.momentum != 0;
  WEFT_CHECK(!use_mom || buf.defined(), "sgd_step (cuda): momentum ", a.momentum, " needs a momentum buffer");
  check_operands("sgd_step", param, {&grad, &buf});
  const int64_t n = param.numel();
  if (n == 0) return;
  SGDConsts<T> c{static_cast<T>(a.weight_decay), static_cast<T>(a.momentum), static_cast<T>(1.0 - a.dampening),
                 static_cast<T>(-a.lr),          a.weight_decay != 0,        use_mom,
                 use_mom && a.nesterov,          use_mom && a.init_buffer};
  cuda::DeviceGuard guard(param.device().index);
  T* b = use_mom ? static_cast<T*>(buf.raw_data()) : nullptr;
  sgd_kernel<T><<<grid_for(n), kThreads, 0, cuda::stream_for(param)>>>(n, static_cast<T*>(param.raw_data()),
                                                                       static_cast<const T*>(grad.raw_data()), b, c);
  WEFT_CUDA_KERNEL_CHECK("sgd_step");
}

// ---- Adam / AdamW ----
// ATen's lerp(start, end, w), one_minus_w = 1 - w (the CPU's lerp_aten).
template <typename T>
__device__ __forceinline__ T lerp_aten(T start, T end, T w, T one_minus_w, bool small_w) {
  const T diff = sub_rn(end, start);
  return small_w ? fma_rn(w, diff, start) : fma_rn(-diff, one_minus_w, end);
}

template <typename T>
struct AdamConsts {
  T decay, wd, w, one_minus_w, beta2, one_minus_beta2, bc2_sqrt, eps, neg_step_size;
  bool use_wd, decoupled, small_w;
};

template <typename T>
__global__ void adam_kernel(int64_t n, T* __restrict__ p, const T* __restrict__ g, T* __restrict__ m, T* __restrict__ v,
                            T* __restrict__ vmax, const AdamConsts<T> c) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    T pi = p[i], gi = g[i];
    if (c.use_wd && c.decoupled) pi = mul_rn(pi, c.decay);            // param.mul_(1 - lr * wd)
    if (c.use_wd && !c.decoupled) gi = fma_rn(pi, c.wd, gi);          // grad.add(param, alpha=wd)
    const T mi = lerp_aten(m[i], gi, c.w, c.one_minus_w, c.small_w);  // exp_avg.lerp_(grad, 1 - beta1)
    // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    T vi = mul_rn(v[i], c.beta2);
    vi = fma_rn(mul_rn(c.one_minus_beta2, gi), gi, vi);
    T vd = vi;
    if (vmax) {  // torch.maximum(max_exp_avg_sq, exp_avg_sq): NaN propagates
      const T old = vmax[i];
      vd = (old != old || old > vi) ? old : vi;
      vmax[i] = vd;
    }
    // denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)  (max_exp_avg_sq with amsgrad)
    const T denom = add_rn(div_rn(sqrt_rn(vd), c.bc2_sqrt), c.eps);
    // param.addcdiv_(exp_avg, denom, value=-step_size)
    p[i] = add_rn(pi, div_rn(mul_rn(c.neg_step_size, mi), denom));
    m[i] = mi;
    v[i] = vi;
  }
}

template <typename T>
void adam_step_cuda(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                    const Tensor& max_exp_avg_sq, const AdamStepArgs& a) {
  check_operands("adam_step", param, {&grad, &exp_avg, &exp_avg_sq, &max_exp_avg_sq});
  const int64_t n = param.numel();
  if (n == 0) return;
  // Python-float arithmetic in PyTorch (double), then rounded to T (as the CPU kernel).
  const double bias_correction1 = 1 - std::pow(a.beta1, a.step);
  const double bias_correction2 = 1 - std::pow(a.beta2, a.step);
  const double step_size = a.lr / bias_correction1;
  const double bias_correction2_sqrt = std::pow(bias_correction2, 0.5);
  AdamConsts<T> c;
  c.decay = static_cast<T>(1 - a.lr * a.weight_decay);
  c.wd = static_cast<T>(a.weight_decay);
  c.w = static_cast<T>(1 - a.beta1);
  c.one_minus_w = static_cast<T>(1) - c.w;
  c.beta2 = static_cast<T>(a.beta2);
  c.one_minus_beta2 = static_cast<T>(1 - a.beta2);
  c.bc2_sqrt = static_cast<T>(bias_correction2_sqrt);
  c.eps = static_cast<T>(a.eps);
  c.neg_step_size = static_cast<T>(-step_size);
  c.use_wd = a.weight_decay != 0;
  c.decoupled = a.decoupled_weight_decay;
  c.small_w = std::abs(c.w) < static_cast<T>(0.5);
  cuda::DeviceGuard guard(param.device().index);
  adam_kernel<T><<<grid_for(n), kThreads, 0, cuda::stream_for(param)>>>(
      n, static_cast<T*>(param.raw_data()), static_cast<const T*>(grad.raw_data()), static_cast<T*>(exp_avg.raw_data()),
      static_cast<T*>(exp_avg_sq.raw_data()),
      max_exp_avg_sq.defined() ? static_cast<T*>(max_exp_avg_sq.raw_data()) : nullptr, c);
  WEFT_CUDA_KERNEL_CHECK("adam_step");
}

// ---- RMSprop ----
template <typename T>
struct RMSpropConsts {
  T wd, alpha, one_minus_alpha, w, one_minus_w, eps, mom, neg_lr;
  bool use_wd, small_w;
};

// ga is null unless centered, buf null unless momentum != 0.
template <typename T>
__global__ void rmsprop_kernel(int64_t n, T* __restrict__ p, const T* __restrict__ g, T* __restrict__ sq,
                               T* __restrict__ ga, T* __restrict__ buf, const RMSpropConsts<T> c) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    T gi = g[i];
    if (c.use_wd) gi = fma_rn(p[i], c.wd, gi);  // grad.add(param, alpha=wd)
    // square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
    const T si = fma_rn(mul_rn(c.one_minus_alpha, gi), gi, mul_rn(sq[i], c.alpha));
    sq[i] = si;
    T avg;
    if (ga) {
      const T gai = lerp_aten(ga[i], gi, c.w, c.one_minus_w, c.small_w);  // grad_avg.lerp_(grad, 1 - alpha)
      ga[i] = gai;
      avg = sqrt_rn(fma_rn(-gai, gai, si));  // square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
    } else {
      avg = sqrt_rn(si);
    }
    avg = add_rn(avg, c.eps);
    if (buf) {
      const T bi = add_rn(mul_rn(buf[i], c.mom), div_rn(gi, avg));  // buf.mul_(momentum).addcdiv_(grad, avg)
      buf[i] = bi;
      p[i] = fma_rn(bi, c.neg_lr, p[i]);  // param.add_(buf, alpha=-lr)
    } else {
      p[i] = add_rn(p[i], div_rn(mul_rn(c.neg_lr, gi), avg));  // param.addcdiv_(grad, avg, value=-lr)
    }
  }
}

template <typename T>
void rmsprop_step_cuda(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& grad_avg,
                       const Tensor& momentum_buffer, const RMSpropStepArgs& a) {
  WEFT_CHECK(!a.centered || grad_avg.defined(), "rmsprop_step (cuda): centered needs grad_avg");
  WEFT_CHECK(a.momentum == 0 || momentum_buffer.defined(), "rmsprop_step (cuda): momentum ", a.momentum,
             " needs a momentum buffer");
  check_operands("rmsprop_step", param, {&grad, &square_avg, &grad_avg, &momentum_buffer});
  const int64_t n = param.numel();
  if (n == 0) return;
  RMSpropConsts<T> c;
  c.wd = static_cast<T>(a.weight_decay);
  c.alpha = static_cast<T>(a.alpha);
  c.one_minus_alpha = static_cast<T>(1 - a.alpha);
  c.w = c.one_minus_alpha;
  c.one_minus_w = static_cast<T>(1) - c.w;
  c.eps = static_cast<T>(a.eps);
  c.mom = static_cast<T>(a.momentum);
  c.neg_lr = static_cast<T>(-a.lr);
  c.use_wd = a.weight_decay != 0;
  c.small_w = std::abs(c.w) < static_cast<T>(0.5);
  cuda::DeviceGuard guard(param.device().index);
  T* ga = a.centered ? static_cast<T*>(grad_avg.raw_data()) : nullptr;
  T* buf = a.momentum != 0 ? static_cast<T*>(momentum_buffer.raw_data()) : nullptr;
  rmsprop_kernel<T><<<grid_for(n), kThreads, 0, cuda::stream_for(param)>>>(
      n, static_cast<T*>(param.raw_data()), static_cast<const T*>(grad.raw_data()),
      static_cast<T*>(square_avg.raw_data()), ga, buf, c);
  WEFT_CUDA_KERNEL_CHECK("rmsprop_step");
}

// ---- Adagrad ----
template <typename T>
__global__ void adagrad_kernel(int64_t n, T* __restrict__ p, const T* __restrict__ g, T* __restrict__ sum, T wd,
                               bool use_wd, T eps, T neg_clr) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    T gi = g[i];
    if (use_wd) gi = fma_rn(p[i], wd, gi);  // grad.add(param, alpha=wd)
    const T si = fma_rn(gi, gi, sum[i]);    // state_sum.addcmul_(grad, grad, value=1)
    sum[i] = si;
    const T std_i = add_rn(sqrt_rn(si), eps);                 // state_sum.sqrt().add_(eps)
    p[i] = add_rn(p[i], div_rn(mul_rn(neg_clr, gi), std_i));  // param.addcdiv_(grad, std, value=-clr)
  }
}

template <typename T>
void adagrad_step_cuda(const Tensor& param, const Tensor& grad, const Tensor& sum, const AdagradStepArgs& a) {
  check_operands("adagrad_step", param, {&grad, &sum});
  const int64_t n = param.numel();
  if (n == 0) return;
  const double clr = a.lr / (1 + (a.step - 1) * a.lr_decay);  // as the CPU kernel
  cuda::DeviceGuard guard(param.device().index);
  adagrad_kernel<T><<<grid_for(n), kThreads, 0, cuda::stream_for(param)>>>(
      n, static_cast<T*>(param.raw_data()), static_cast<const T*>(grad.raw_data()), static_cast<T*>(sum.raw_data()),
      static_cast<T>(a.weight_decay), a.weight_decay != 0, static_cast<T>(a.eps), static_cast<T>(-clr));
  WEFT_CUDA_KERNEL_CHECK("adagrad_step");
}

// ---- grad_norm ----
enum class NormMode { Inf, One, Two, General };
constexpr int kChunk = 4096;  // elements per CUDA block (kThreads * 16)

__device__ __forceinline__ double max_nan(double a, double b) { return (b > a || b != b) ? b : a; }

template <NormMode kMode>
__device__ __forceinline__ double combine(double a, double b) {
  if constexpr (kMode == NormMode::Inf) return max_nan(a, b);
  else return a + b;
}

// Fixed-order tree reduction of one value per thread (blockDim.x == kThreads).
template <NormMode kMode>
__device__ double block_reduce(double x, double* smem) {
  smem[threadIdx.x] = x;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) smem[threadIdx.x] = combine<kMode>(smem[threadIdx.x], smem[threadIdx.x + s]);
    __syncthreads();
  }
  return smem[0];
}

template <typename T, NormMode kMode>
__global__ void norm_partial_kernel(int64_t n, const T* __restrict__ g, double p, double* __restrict__ partial) {
  __shared__ double smem[kThreads];
  const int64_t start = static_cast<int64_t>(blockIdx.x) * kChunk;
  const int64_t end = start + kChunk < n ? start + kChunk : n;
  double acc = 0;
  for (int64_t i = start + threadIdx.x; i < end; i += kThreads) {
    double x = static_cast<double>(g[i]);
    if constexpr (kMode == NormMode::Inf) acc = max_nan(acc, ::fabs(x));
    else if constexpr (kMode == NormMode::One) acc += ::fabs(x);
    else if constexpr (kMode == NormMode::Two) acc = ::fma(x, x, acc);
    else acc += ::pow(::fabs(x), p);
  }
  double r = block_reduce<kMode>(acc, smem);
  if (threadIdx.x == 0) partial[blockIdx.x] = r;
}

template <NormMode kMode>
__global__ void norm_combine_kernel(int64_t nparts, const double* __restrict__ partial, double* __restrict__ out) {
  __shared__ double smem[kThreads];
  double acc = 0;
  for (int64_t i = threadIdx.x; i < nparts; i += kThreads) acc = combine<kMode>(acc, partial[i]);
  double r = block_reduce<kMode>(acc, smem);
  if (threadIdx.x == 0) *out = r;
}

template <typename T, NormMode kMode>
double norm_launch(const Tensor& grad, double p) {
  const int64_t n = grad.numel();
  const int64_t nparts = (n + kChunk - 1) / kChunk;
  WEFT_CHECK(nparts < (int64_t{1} << 31), "grad_norm (cuda): tensor of ", n, " elements is too large");
  cudaStream_t stream = cuda::stream_for(grad);
  Tensor buf = empty({nparts + 1}, {DType::Float64, grad.device()});
  double* partial = static_cast<double*>(buf.raw_data());
  norm_partial_kernel<T, kMode>
      <<<static_cast<unsigned>(nparts), kThreads, 0, stream>>>(n, static_cast<const T*>(grad.raw_data()), p, partial);
  WEFT_CUDA_KERNEL_CHECK("grad_norm(partial)");
  norm_combine_kernel<kMode><<<1, kThreads, 0, stream>>>(nparts, partial, partial + nparts);
  WEFT_CUDA_KERNEL_CHECK("grad_norm(combine)");
  double result = 0;
  WEFT_CUDA_CHECK(cudaMemcpyAsync(&result, partial + nparts, sizeof(double), cudaMemcpyDeviceToHost, stream));
  WEFT_CUDA_CHECK(cudaStreamSynchronize(stream));
  return result;
}

template <typename T>
double grad_norm_cuda(const Tensor& grad, double p) {
  check_operands("grad_norm", grad, {});
  if (grad.numel() == 0) return 0.0;
  cuda::DeviceGuard guard(grad.device().index);
  if (std::isinf(p)) return norm_launch<T, NormMode::Inf>(grad, p);
  if (p == 1.0) return norm_launch<T, NormMode::One>(grad, p);
  if (p == 2.0) return norm_launch<T, NormMode::Two>(grad, p);
  return norm_launch<T, NormMode::General>(grad, p);
}

// ---- grad_scale ----
template <typename T>
__global__ void scale_kernel(int64_t n, T* __restrict__ g, T c) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    g[i] = mul_rn(g[i], c);
}

template <typename T>
void grad_scale_cuda(const Tensor& grad, double coef) {
  check_operands("grad_scale", grad, {});
  const int64_t n = grad.numel();
  if (n == 0) return;
  cuda::DeviceGuard guard(grad.device().index);
  scale_kernel<T>
      <<<grid_for(n), kThreads, 0, cuda::stream_for(grad)>>>(n, static_cast<T*>(grad.raw_data()), static_cast<T>(coef));
  WEFT_CUDA_KERNEL_CHECK("grad_scale");
}

template <typename T>
void register_cuda_kernels() {
  constexpr DType dt = dtype_of<T>;
  sgd_step_table().set(DeviceType::CUDA, dt, &sgd_step_cuda<T>);
  adam_step_table().set(DeviceType::CUDA, dt, &adam_step_cuda<T>);
  rmsprop_step_table().set(DeviceType::CUDA, dt, &rmsprop_step_cuda<T>);
  adagrad_step_table().set(DeviceType::CUDA, dt, &adagrad_step_cuda<T>);
  grad_norm_table().set(DeviceType::CUDA, dt, &grad_norm_cuda<T>);
  grad_scale_table().set(DeviceType::CUDA, dt, &grad_scale_cuda<T>);
}

detail::Registrar optim_cuda_kernels([] {
  register_cuda_kernels<float>();
  register_cuda_kernels<double>();
});

}  // namespace
}  // namespace weft::optim
