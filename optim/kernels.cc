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
// (optim/BUILD) so the compiler fuses nothing else. sqrt is IEEE (correctly
// rounded, as CUDA's sqrt_rn); PyTorch's vectorised CPU sqrt is not (1 ulp off
// for about one float32 input in six on an AVX2 build), which shows where an
// update is a large part of the parameter. On the golden cases float32 SGD and
// Adam/AdamW results equal PyTorch's bit for bit except one element of one
// step (1 ulp); RMSprop and Adagrad differ by 1 ulp in a few elements, and
// replaying PyTorch's own sqrt values through these formulas gives its results
// bit for bit (checked for Adagrad).
#include "optim/kernels.h"

#include <cmath>
#include <type_traits>
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
KernelTable<RMSpropStepFn>& rmsprop_step_table() {
  static KernelTable<RMSpropStepFn> t("rmsprop_step");
  return t;
}
KernelTable<AdagradStepFn>& adagrad_step_table() {
  static KernelTable<AdagradStepFn> t("adagrad_step");
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

// Calls f(std::bool_constant<b0>{}, ...) for runtime flags, so each loop body is
// branch-free (the vectoriser needs straight-line code).
template <typename F>
void with_flags(F&& f) {
  f();
}
template <typename F, typename... Bs>
void with_flags(F&& f, bool b, Bs... rest) {
  if (b) {
    with_flags([&](auto... c) { f(std::true_type{}, c...); }, rest...);
  } else {
    with_flags([&](auto... c) { f(std::false_type{}, c...); }, rest...);
  }
}

template <typename T>
struct SGDConsts {
  T wd, mom, one_minus_damp, neg_lr;
};

template <typename T, bool kWd, bool kMom, bool kNesterov, bool kInit>
void sgd_loop(T* __restrict p, const T* __restrict g, T* __restrict b, const SGDConsts<T> c, int64_t begin,
              int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    T d = g[i];
    if constexpr (kWd) d = std::fma(p[i], c.wd, d);  // grad.add(param, alpha=wd)
    if constexpr (kMom) {
      T bi;
      if constexpr (kInit) {
        bi = d;  // torch.clone(grad)
      } else {
        const T scaled = b[i] * c.mom;               // buf.mul_(mom)
        bi = std::fma(d, c.one_minus_damp, scaled);  // .add_(grad, alpha=1-damp)
      }
      b[i] = bi;
      if constexpr (kNesterov) d = std::fma(bi, c.mom, d);  // grad.add(buf, alpha=mom)
      else d = bi;
    }
    p[i] = std::fma(d, c.neg_lr, p[i]);  // param.add_(grad, alpha=-lr)
  }
}

template <typename T>
void sgd_step_cpu(const Tensor& param, const Tensor& grad, const Tensor& buf, const SGDStepArgs& a) {
  T* p = param.data_ptr<T>();
  const T* g = grad.data_ptr<T>();
  T* b = buf.defined() ? buf.data_ptr<T>() : nullptr;
  const SGDConsts<T> c{static_cast<T>(a.weight_decay), static_cast<T>(a.momentum), static_cast<T>(1.0 - a.dampening),
                       static_cast<T>(-a.lr)};
  const bool use_mom = a.momentum != 0;
  with_flags(
      [&](auto wd, auto mom, auto nesterov, auto init) {
        parallel_for(0, param.numel(), kOptimGrain, [&](int64_t begin, int64_t end) {
          sgd_loop<T, decltype(wd)::value, decltype(mom)::value, decltype(nesterov)::value, decltype(init)::value>(
              p, g, b, c, begin, end);
        });
      },
      a.weight_decay != 0, use_mom, use_mom && a.nesterov, use_mom && a.init_buffer);
}

// ATen's lerp(start, end, w) with one_minus_w = 1 - w: the form depends on
// whether |w| < 0.5 (is_lerp_weight_small), chosen once per kernel call.
template <bool kSmallW, typename T>
inline T lerp_aten(T start, T end, T w, T one_minus_w) {
  const T diff = end - start;
  if constexpr (kSmallW) return std::fma(w, diff, start);
  else return std::fma(-diff, one_minus_w, end);
}

template <typename T>
struct AdamConsts {
  T decay, wd, w, one_minus_w, beta2, one_minus_beta2, bc2_sqrt, eps, neg_step_size;
};

template <typename T, bool kWd, bool kDecoupled, bool kSmallW, bool kAmsgrad>
void adam_loop(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v, T* __restrict vmax,
               const AdamConsts<T> c, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    T pi = p[i], gi = g[i];
    if constexpr (kWd && kDecoupled) pi = pi * c.decay;             // param.mul_(1 - lr * wd)
    if constexpr (kWd && !kDecoupled) gi = std::fma(pi, c.wd, gi);  // grad.add(param, alpha=wd)
    const T mi = lerp_aten<kSmallW>(m[i], gi, c.w, c.one_minus_w);  // exp_avg.lerp_(grad, 1 - beta1)
    // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    T vi = v[i] * c.beta2;
    vi = std::fma(c.one_minus_beta2 * gi, gi, vi);
    T vd = vi;
    if constexpr (kAmsgrad) {
      // torch.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq): NaN propagates
      const T old = vmax[i];
      vd = (old != old || old > vi) ? old : vi;
      vmax[i] = vd;
    }
    // denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)  (max_exp_avg_sq with amsgrad)
    const T denom = std::sqrt(vd) / c.bc2_sqrt + c.eps;
    // param.addcdiv_(exp_avg, denom, value=-step_size)
    p[i] = pi + c.neg_step_size * mi / denom;
    m[i] = mi;
    v[i] = vi;
  }
}

template <typename T>
void adam_step_cpu(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                   const Tensor& max_exp_avg_sq, const AdamStepArgs& a) {
  T* p = param.data_ptr<T>();
  const T* g = grad.data_ptr<T>();
  T* m = exp_avg.data_ptr<T>();
  T* v = exp_avg_sq.data_ptr<T>();
  T* vmax = max_exp_avg_sq.defined() ? max_exp_avg_sq.data_ptr<T>() : nullptr;
  // Python-float arithmetic in PyTorch (double), then rounded to T as ATen does.
  const double bias_correction1 = 1 - std::pow(a.beta1, a.step);
  const double bias_correction2 = 1 - std::pow(a.beta2, a.step);
  const double step_size = a.lr / bias_correction1;
  const double bias_correction2_sqrt = std::pow(bias_correction2, 0.5);
  AdamConsts<T> c;
  c.decay = static_cast<T>(1 - a.lr * a.weight_decay);
  c.wd = static_cast<T>(a.weight_decay);
  c.w = static_cast<T>(1 - a.beta1);  // lerp weight
  c.one_minus_w = static_cast<T>(1) - c.w;
  c.beta2 = static_cast<T>(a.beta2);
  c.one_minus_beta2 = static_cast<T>(1 - a.beta2);
  c.bc2_sqrt = static_cast<T>(bias_correction2_sqrt);
  c.eps = static_cast<T>(a.eps);
  c.neg_step_size = static_cast<T>(-step_size);
  const bool small_w = std::abs(c.w) < static_cast<T>(0.5);  // ATen's is_lerp_weight_small
  with_flags(
      [&](auto wd, auto decoupled, auto small, auto ams) {
        parallel_for(0, param.numel(), kOptimGrain, [&](int64_t begin, int64_t end) {
          adam_loop<T, decltype(wd)::value, decltype(decoupled)::value, decltype(small)::value, decltype(ams)::value>(
              p, g, m, v, vmax, c, begin, end);
        });
      },
      a.weight_decay != 0, a.decoupled_weight_decay, small_w, vmax != nullptr);
}

template <typename T>
struct RMSpropConsts {
  T wd, alpha, one_minus_alpha, w, one_minus_w, eps, mom, neg_lr;
};

// torch.optim.RMSprop's single-tensor update, one element at a time.
template <typename T, bool kWd, bool kCentered, bool kSmallW, bool kMom>
void rmsprop_loop(T* __restrict p, const T* __restrict g, T* __restrict sq, T* __restrict ga, T* __restrict buf,
                  const RMSpropConsts<T> c, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    T gi = g[i];
    if constexpr (kWd) gi = std::fma(p[i], c.wd, gi);  // grad.add(param, alpha=wd)
    // square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
    T si = sq[i] * c.alpha;
    si = std::fma(c.one_minus_alpha * gi, gi, si);
    sq[i] = si;
    T avg;
    if constexpr (kCentered) {
      const T gai = lerp_aten<kSmallW>(ga[i], gi, c.w, c.one_minus_w);  // grad_avg.lerp_(grad, 1 - alpha)
      ga[i] = gai;
      avg = std::sqrt(std::fma(-gai, gai, si));  // square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
    } else {
      avg = std::sqrt(si);  // square_avg.sqrt()
    }
    avg = avg + c.eps;  // .add_(eps)
    if constexpr (kMom) {
      const T bi = buf[i] * c.mom + gi / avg;  // buf.mul_(momentum).addcdiv_(grad, avg)
      buf[i] = bi;
      p[i] = std::fma(bi, c.neg_lr, p[i]);  // param.add_(buf, alpha=-lr)
    } else {
      p[i] = p[i] + c.neg_lr * gi / avg;  // param.addcdiv_(grad, avg, value=-lr)
    }
  }
}

template <typename T>
void rmsprop_step_cpu(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& grad_avg,
                      const Tensor& momentum_buffer, const RMSpropStepArgs& a) {
  T* p = param.data_ptr<T>();
  const T* g = grad.data_ptr<T>();
  T* sq = square_avg.data_ptr<T>();
  T* ga = a.centered ? grad_avg.data_ptr<T>() : nullptr;
  T* buf = a.momentum != 0 ? momentum_buffer.data_ptr<T>() : nullptr;
  RMSpropConsts<T> c;
  c.wd = static_cast<T>(a.weight_decay);
  c.alpha = static_cast<T>(a.alpha);
  c.one_minus_alpha = static_cast<T>(1 - a.alpha);
  c.w = c.one_minus_alpha;  // lerp weight
  c.one_minus_w = static_cast<T>(1) - c.w;
  c.eps = static_cast<T>(a.eps);
  c.mom = static_cast<T>(a.momentum);
  c.neg_lr = static_cast<T>(-a.lr);
  const bool small_w = std::abs(c.w) < static_cast<T>(0.5);
  with_flags(
      [&](auto wd, auto centered, auto small, auto mom) {
        parallel_for(0, param.numel(), kOptimGrain, [&](int64_t begin, int64_t end) {
          rmsprop_loop<T, decltype(wd)::value, decltype(centered)::value, decltype(small)::value, decltype(mom)::value>(
              p, g, sq, ga, buf, c, begin, end);
        });
      },
      a.weight_decay != 0, a.centered, small_w, a.momentum != 0);
}

// torch.optim.Adagrad's single-tensor (dense) update.
template <typename T, bool kWd>
void adagrad_loop(T* __restrict p, const T* __restrict g, T* __restrict sum, T wd, T eps, T neg_clr, int64_t begin,
                  int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    T gi = g[i];
    if constexpr (kWd) gi = std::fma(p[i], wd, gi);  // grad.add(param, alpha=wd)
    const T si = std::fma(gi, gi, sum[i]);           // state_sum.addcmul_(grad, grad, value=1)
    sum[i] = si;
    const T std_i = std::sqrt(si) + eps;  // state_sum.sqrt().add_(eps)
    p[i] = p[i] + neg_clr * gi / std_i;   // param.addcdiv_(grad, std, value=-clr)
  }
}

template <typename T>
void adagrad_step_cpu(const Tensor& param, const Tensor& grad, const Tensor& sum, const AdagradStepArgs& a) {
  T* p = param.data_ptr<T>();
  const T* g = grad.data_ptr<T>();
  T* s = sum.data_ptr<T>();
  const double clr = a.lr / (1 + (a.step - 1) * a.lr_decay);  // Python floats in PyTorch
  const T wd = static_cast<T>(a.weight_decay), eps = static_cast<T>(a.eps), neg_clr = static_cast<T>(-clr);
  with_flags(
      [&](auto use_wd) {
        parallel_for(0, param.numel(), kOptimGrain, [&](int64_t begin, int64_t end) {
          adagrad_loop<T, decltype(use_wd)::value>(p, g, s, wd, eps, neg_clr, begin, end);
        });
      },
      a.weight_decay != 0);
}

// The sum of f(g[i]) over [s, e) in double, in 16 interleaved partial sums
// merged in a fixed tree: one running sum waited on each addition's latency
// (the GPT step's clipping norm ran at a third of memory speed). The order
// depends on s and e only, never on the thread count.
template <typename T, typename F>
double lane_sum(const T* g, int64_t s, int64_t e, F f) {
  constexpr int kLanes = 16;
  double lanes[kLanes] = {};
  int64_t i = s;
  for (; i + kLanes <= e; i += kLanes)
    for (int k = 0; k < kLanes; ++k) lanes[k] += f(static_cast<double>(g[i + k]));
  for (int k = 0; i < e; ++i, ++k) lanes[k] += f(static_cast<double>(g[i]));
  for (int w = kLanes / 2; w >= 1; w /= 2)
    for (int k = 0; k < w; ++k) lanes[k] += lanes[k + w];
  return lanes[0];
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
        acc = lane_sum(g, s, e, [](double x) { return x * x; });
      } else if (one) {
        acc = lane_sum(g, s, e, [](double x) { return std::abs(x); });
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
  rmsprop_step_table().set(DeviceType::CPU, dt, &rmsprop_step_cpu<T>);
  adagrad_step_table().set(DeviceType::CPU, dt, &adagrad_step_cpu<T>);
  grad_norm_table().set(DeviceType::CPU, dt, &grad_norm_cpu<T>);
  grad_scale_table().set(DeviceType::CPU, dt, &grad_scale_cpu<T>);
}
static detail::Registrar optim_cpu_kernels([] {
  register_cpu_kernels<float>();
  register_cpu_kernels<double>();
});

}  // namespace weft::optim
