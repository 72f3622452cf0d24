// CPU kernels for the optimizer tables in optim/kernels.h.
//
// Each loop is a flat pass over contiguous data split by parallel_for; every
// element's result depends only on that element, so results do not depend on
// the thread count. Expression order mirrors the ATen kernels PyTorch's
// single-tensor optimizers call (see the comments next to each line).
//
// Note [optimizer rounding]: every PyTorch op rounds its result to the
// parameter dtype, and ATen's CPU kernels (compiled with FMA) fuse the
// multiply-add inside one op: add(a, b, alpha) is fma(b, alpha, a), lerp is
// fma(w, end - self, self), addcmul is fma(value * t1, t2, self). These kernels
// spell out those fmas with std::fma and are compiled with -ffp-contract=off
// (optim/BUILD) so the compiler fuses nothing else. On the golden cases float32
// results equal PyTorch's bit for bit except one element of one step (1 ulp).
#include "optim/kernels.h"

#include <cmath>
#include <vector>

#include "core/parallel.h"

namespace weft::optim {

KernelTable<SGDStepFn>& sgd_step_table() {
  static KernelTable<SGDStepFn> t("sgd_step");
  return t;
}
KernelTable<AdamStepFn>& adam_step_table() {
  static KernelTable<AdamStepFn> t("adam_step");
  return t;
}
KernelTable<GradNormFn>& grad_norm_table() {
  static KernelTable<GradNormFn> t("grad_norm");
  return t;
}
KernelTable<ScaleFn>& grad_scale_table() {
  static KernelTable<ScaleFn> t("grad_scale");
  return t;
}

namespace {

constexpr int64_t kOptimGrain = 8192;

template <typename T>
void sgd_step_cpu(const Tensor& param, const Tensor& grad, const Tensor& buf, const SGDStepArgs& a) {
  T* p = param.data_ptr<T>();
  const T* g = grad.data_ptr<T>();
  T* b = buf.defined() ? buf.data_ptr<T>() : nullptr;
  const T wd = static_cast<T>(a.weight_decay), mom = static_cast<T>(a.momentum);
  const T one_minus_damp = static_cast<T>(1.0 - a.dampening), neg_lr = static_cast<T>(-a.lr);
  const bool use_wd = a.weight_decay != 0, use_mom = a.momentum != 0, nesterov = a.nesterov, init = a.init_buffer;
  parallel_for(0, param.numel(), kOptimGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      T d = g[i];
      if (use_wd) d = std::fma(p[i], wd, d);  // grad.add(param, alpha=wd)
      if (use_mom) {
        const T scaled = b[i] * mom;                                  // buf.mul_(mom)
        const T bi = init ? d : std::fma(d, one_minus_damp, scaled);  // .add_(grad, alpha=1-damp)
        b[i] = bi;
        d = nesterov ? std::fma(bi, mom, d) : bi;  // grad.add(buf, alpha=mom) or buf
      }
      p[i] = std::fma(d, neg_lr, p[i]);  // param.add_(grad, alpha=-lr)
    }
  });
}

template <typename T>
void adam_step_cpu(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                   const AdamStepArgs& a) {
  T* p = param.data_ptr<T>();
  const T* g = grad.data_ptr<T>();
  T* m = exp_avg.data_ptr<T>();
  T* v = exp_avg_sq.data_ptr<T>();
  // Python-float arithmetic in PyTorch (double), then rounded to T as ATen does.
  const double bias_correction1 = 1 - std::pow(a.beta1, a.step);
  const double bias_correction2 = 1 - std::pow(a.beta2, a.step);
  const double step_size = a.lr / bias_correction1;
  const double bias_correction2_sqrt = std::pow(bias_correction2, 0.5);
  const T decay = static_cast<T>(1 - a.lr * a.weight_decay);
  const T wd = static_cast<T>(a.weight_decay);
  const T w = static_cast<T>(1 - a.beta1);  // lerp weight
  const T one_minus_w = static_cast<T>(1) - w;
  const bool small_w = std::abs(w) < static_cast<T>(0.5);
  const T beta2 = static_cast<T>(a.beta2), one_minus_beta2 = static_cast<T>(1 - a.beta2);
  const T bc2_sqrt = static_cast<T>(bias_correction2_sqrt), eps = static_cast<T>(a.eps);
  const T neg_step_size = static_cast<T>(-step_size);
  const bool decoupled = a.decoupled_weight_decay, use_wd = a.weight_decay != 0;
  parallel_for(0, param.numel(), kOptimGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      T pi = p[i], gi = g[i];
      if (use_wd) {
        if (decoupled) pi = pi * decay;  // param.mul_(1 - lr * wd)
        else gi = std::fma(pi, wd, gi);  // grad.add(param, alpha=wd)
      }
      T mi = m[i];
      // exp_avg.lerp_(grad, 1 - beta1)
      const T diff = gi - mi;
      mi = small_w ? std::fma(w, diff, mi) : std::fma(-diff, one_minus_w, gi);
      // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
      T vi = v[i] * beta2;
      vi = std::fma(one_minus_beta2 * gi, gi, vi);
      // denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
      T denom = std::sqrt(vi) / bc2_sqrt + eps;
      // param.addcdiv_(exp_avg, denom, value=-step_size)
      p[i] = pi + neg_step_size * mi / denom;
      m[i] = mi;
      v[i] = vi;
    }
  });
}

template <typename T>
double grad_norm_cpu(const Tensor& grad, double p) {
  const T* g = grad.data_ptr<T>();
  const int64_t n = grad.numel();
  constexpr int64_t kBlock = 4096;
  const int64_t nblocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(nblocks, 0.0);
  const bool inf = std::isinf(p), two = p == 2.0, one = p == 1.0;
  parallel_for(0, nblocks, 4, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t s = b * kBlock, e = std::min(n, s + kBlock);
      double acc = 0;
      if (inf) {
        for (int64_t i = s; i < e; ++i) {
          double x = std::abs(static_cast<double>(g[i]));
          acc = (x > acc || std::isnan(x)) ? x : acc;
        }
      } else if (two) {
        for (int64_t i = s; i < e; ++i) acc += static_cast<double>(g[i]) * static_cast<double>(g[i]);
      } else if (one) {
        for (int64_t i = s; i < e; ++i) acc += std::abs(static_cast<double>(g[i]));
      } else {
        for (int64_t i = s; i < e; ++i) acc += std::pow(std::abs(static_cast<double>(g[i])), p);
      }
      partial[b] = acc;
    }
  });
  double total = 0;
  for (double x : partial) total = inf ? ((x > total || std::isnan(x)) ? x : total) : total + x;
  return total;
}

template <typename T>
void grad_scale_cpu(const Tensor& grad, double coef) {
  T* g = grad.data_ptr<T>();
  const T c = static_cast<T>(coef);
  parallel_for(0, grad.numel(), kOptimGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) g[i] = g[i] * c;
  });
}

}  // namespace

// Registered by hand (not WEFT_REGISTER_KERNEL, which instantiates the
// template for every dtype): these kernels exist for float32 and float64 only.
template <typename T>
void register_cpu_kernels() {
  constexpr DType dt = dtype_of<T>;
  sgd_step_table().set(DeviceType::CPU, dt, &sgd_step_cpu<T>);
  adam_step_table().set(DeviceType::CPU, dt, &adam_step_cpu<T>);
  grad_norm_table().set(DeviceType::CPU, dt, &grad_norm_cpu<T>);
  grad_scale_table().set(DeviceType::CPU, dt, &grad_scale_cpu<T>);
}
static detail::Registrar optim_cpu_kernels([] {
  register_cpu_kernels<float>();
  register_cpu_kernels<double>();
});

}  // namespace weft::optim
