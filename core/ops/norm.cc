// Normalisation ops: batch_norm, layer_norm and group_norm (PyTorch semantics
// and defaults). group_norm is layer_norm over each (image, group) row followed
// by the per-channel affine, so it shares layer_norm's kernels and precision.
//
// Contract: inputs are made contiguous and viewed as (N, C, S) for batch norm
// (S = product of the trailing dims, 1 for (N, C)) and (R, K) for layer norm
// (K = product of normalized_shape). Per-channel / per-row statistics are
// computed with a two-pass (mean, then squared deviations) accumulation in
// double, parallel over channels / rows, so results do not depend on the thread
// count. Float16/BFloat16 are computed in float32; saved statistics (mean,
// invstd / rstd) are float32, or float64 for float64 inputs. Training-mode batch
// norm normalises with the biased batch variance and updates the running stats
// in place with the unbiased one: r <- (1 - momentum) r + momentum * stat.
// Backward kernels are fused and give grads w.r.t. x, weight and bias.
#include "core/kernels/norm.h"

#include <cmath>

#include "core/autocast.h"
#include "core/autograd_meta.h"
#include "core/dispatch.h"
#include "core/nn_ops.h"
#include "core/ops/elementwise_util.h"
#include "core/parallel.h"

namespace weft {

BnStatsKernel& bn_stats_table() {
  static BnStatsKernel t("batch_norm_stats");
  return t;
}
BnForwardKernel& bn_forward_table() {
  static BnForwardKernel t("batch_norm");
  return t;
}
BnBackwardKernel& bn_backward_table() {
  static BnBackwardKernel t("batch_norm_backward");
  return t;
}
LnForwardKernel& ln_forward_table() {
  static LnForwardKernel t("layer_norm");
  return t;
}
LnBackwardKernel& ln_backward_table() {
  static LnBackwardKernel t("layer_norm_backward");
  return t;
}

namespace {

// Compute type: float64 for float64, float32 otherwise (float16/bfloat16; the
// registrar also instantiates kernels for types outside the registered set).
template <typename T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

DType stat_dtype(DType d) { return d == DType::Float64 ? DType::Float64 : DType::Float32; }

// ---------------------------------------------------------------- batch norm
// Signatures and shapes: core/kernels/norm.h.

template <typename T>
void cpu_bn_stats(const Tensor& x, const Tensor& mean, const Tensor& var) {
  using S = acc_t<T>;
  const int64_t N = x.size(0), C = x.size(1), L = x.size(2);
  const T* px = x.data_ptr<T>();
  S* pm = mean.data_ptr<S>();
  S* pv = var.data_ptr<S>();
  const double count = static_cast<double>(N * L);
  parallel_for(0, C, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(N * L, 1)), [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      double s = 0;
      for (int64_t n = 0; n < N; ++n) {
        const T* p = px + (n * C + c) * L;
        for (int64_t i = 0; i < L; ++i) s += static_cast<double>(static_cast<S>(p[i]));
      }
      const double m = s / count;
      double ss = 0;
      for (int64_t n = 0; n < N; ++n) {
        const T* p = px + (n * C + c) * L;
        for (int64_t i = 0; i < L; ++i) {
          double d = static_cast<double>(static_cast<S>(p[i])) - m;
          ss += d * d;
        }
      }
      pm[c] = static_cast<S>(m);
      pv[c] = static_cast<S>(ss / count);
    }
  });
}

template <typename T>
void cpu_bn_forward(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& mean,
                    const Tensor& var, double eps, const Tensor& invstd) {
  using S = acc_t<T>;
  const int64_t N = x.size(0), C = x.size(1), L = x.size(2);
  const T* px = x.data_ptr<T>();
  T* py = y.data_ptr<T>();
  const T* pw = w.defined() ? w.data_ptr<T>() : nullptr;
  const T* pb = b.defined() ? b.data_ptr<T>() : nullptr;
  const S* pm = mean.data_ptr<S>();
  const S* pv = var.data_ptr<S>();
  S* pis = invstd.data_ptr<S>();
  std::vector<S> scale(C), shift(C);
  for (int64_t c = 0; c < C; ++c) {
    S is = static_cast<S>(1.0 / std::sqrt(static_cast<double>(pv[c]) + eps));
    pis[c] = is;
    S wc = pw ? static_cast<S>(pw[c]) : S(1), bc = pb ? static_cast<S>(pb[c]) : S(0);
    scale[c] = is * wc;
    shift[c] = bc - pm[c] * scale[c];
  }
  parallel_for(0, N * C, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(L, 1)), [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      const S sc = scale[r % C], sh = shift[r % C];
      const T* p = px + r * L;
      T* q = py + r * L;
      for (int64_t i = 0; i < L; ++i) q[i] = static_cast<T>(static_cast<S>(p[i]) * sc + sh);
    }
  });
}

template <typename T>
void cpu_bn_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& g, const Tensor& x,
                     const Tensor& w, const Tensor& mean, const Tensor& invstd, bool training) {
  using S = acc_t<T>;
  const int64_t N = x.size(0), C = x.size(1), L = x.size(2);
  const T* px = x.data_ptr<T>();
  const T* pg = g.data_ptr<T>();
  const T* pw = w.defined() ? w.data_ptr<T>() : nullptr;
  const S* pm = mean.data_ptr<S>();
  const S* pis = invstd.data_ptr<S>();
  // per channel: sum g and sum g * (x - mean)
  std::vector<double> sum_g(C), sum_gd(C);
  parallel_for(0, C, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(N * L, 1)), [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      double sg = 0, sgd = 0;
      const double m = pm[c];
      for (int64_t n = 0; n < N; ++n) {
        const T* p = px + (n * C + c) * L;
        const T* q = pg + (n * C + c) * L;
        for (int64_t i = 0; i < L; ++i) {
          double gv = static_cast<double>(static_cast<S>(q[i]));
          sg += gv;
          sgd += gv * (static_cast<double>(static_cast<S>(p[i])) - m);
        }
      }
      sum_g[c] = sg;
      sum_gd[c] = sgd;
    }
  });
  if (db.defined()) {
    T* p = db.data_ptr<T>();
    for (int64_t c = 0; c < C; ++c) p[c] = static_cast<T>(sum_g[c]);
  }
  if (dw.defined()) {
    T* p = dw.data_ptr<T>();
    for (int64_t c = 0; c < C; ++c) p[c] = static_cast<T>(sum_gd[c] * static_cast<double>(pis[c]));
  }
  if (!dx.defined()) return;
  // training: dx = w * invstd * (g - mean(g) - xhat * mean(g * xhat)); eval: dx = w * invstd * g
  const double count = static_cast<double>(N * L);
  std::vector<S> a(C), k(C), off(C);  // dx = a * g + k * x + off
  for (int64_t c = 0; c < C; ++c) {
    double is = pis[c], wc = pw ? static_cast<double>(static_cast<S>(pw[c])) : 1.0;
    a[c] = static_cast<S>(wc * is);
    if (training) {
      double kk = -wc * is * is * is * sum_gd[c] / count;
      k[c] = static_cast<S>(kk);
      off[c] = static_cast<S>(-wc * is * sum_g[c] / count - kk * pm[c]);
    } else {
      k[c] = 0;
      off[c] = 0;
    }
  }
  T* pdx = dx.data_ptr<T>();
  parallel_for(0, N * C, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(L, 1)), [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      const int64_t c = r % C;
      const S ac = a[c], kc = k[c], oc = off[c];
      const T* p = px + r * L;
      const T* q = pg + r * L;
      T* o = pdx + r * L;
      for (int64_t i = 0; i < L; ++i) o[i] = static_cast<T>(ac * static_cast<S>(q[i]) + kc * static_cast<S>(p[i]) + oc);
    }
  });
}

WEFT_REGISTER_KERNEL(bn_stats_table(), DeviceType::CPU, kFloatingTypes, cpu_bn_stats);
WEFT_REGISTER_KERNEL(bn_forward_table(), DeviceType::CPU, kFloatingTypes, cpu_bn_forward);
WEFT_REGISTER_KERNEL(bn_backward_table(), DeviceType::CPU, kFloatingTypes, cpu_bn_backward);

// Checks an optional per-channel tensor: defined -> shape (C), x's dtype and device.
void check_param(const char* op, const char* what, const Tensor& p, const Tensor& x, const Shape& want) {
  if (!p.defined()) return;
  WEFT_CHECK(p.sizes() == want, op, ": ", what, " should have shape ", shape_str(want), ", got ", shape_str(p.sizes()),
             " (input shape ", shape_str(x.sizes()), ")");
  WEFT_CHECK(p.device() == x.device(), op, ": ", what, " is on a different device than the input");
}

Tensor as_dtype(const Tensor& p, DType d) { return p.defined() ? p.detach().to(d).contiguous() : Tensor(); }

// ---------------------------------------------------------------- layer norm
// Signatures and shapes: core/kernels/norm.h.

// sum of f(i) for i < K in double, as kLanes interleaved partial sums (lane l
// takes i = l mod kLanes) added in lane order: a fixed order that vectorises,
// where one running sum is a chain of K dependent additions.
template <typename F>
double lane_sum(int64_t K, const F& f) {
  constexpr int kLanes = 8;
  double acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= K; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += f(i + l);
  for (int l = 0; i < K; ++i, ++l) acc[l] += f(i);
  double s = 0;
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  return s;
}

template <typename T>
void cpu_ln_forward(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b, double eps, const Tensor& mean,
                    const Tensor& rstd) {
  using S = acc_t<T>;
  const int64_t R = x.size(0), K = x.size(1);
  const T* px = x.data_ptr<T>();
  T* py = y.data_ptr<T>();
  const T* pw = w.defined() ? w.data_ptr<T>() : nullptr;
  const T* pb = b.defined() ? b.data_ptr<T>() : nullptr;
  S* pm = mean.data_ptr<S>();
  S* pr = rstd.data_ptr<S>();
  parallel_for(0, R, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(K, 1)), [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      const T* p = px + r * K;
      T* q = py + r * K;
      const double m =
          lane_sum(K, [&](int64_t i) { return static_cast<double>(static_cast<S>(p[i])); }) / static_cast<double>(K);
      const double ss = lane_sum(K, [&](int64_t i) {
        const double d = static_cast<double>(static_cast<S>(p[i])) - m;
        return d * d;
      });
      const double rs = 1.0 / std::sqrt(ss / static_cast<double>(K) + eps);
      pm[r] = static_cast<S>(m);
      pr[r] = static_cast<S>(rs);
      const S ms = static_cast<S>(m), rss = static_cast<S>(rs);
      if (pw && pb) {
        for (int64_t i = 0; i < K; ++i)
          q[i] = static_cast<T>((static_cast<S>(p[i]) - ms) * rss * static_cast<S>(pw[i]) + static_cast<S>(pb[i]));
      } else if (pw) {
        for (int64_t i = 0; i < K; ++i)
          q[i] = static_cast<T>((static_cast<S>(p[i]) - ms) * rss * static_cast<S>(pw[i]));
      } else if (pb) {
        for (int64_t i = 0; i < K; ++i)
          q[i] = static_cast<T>((static_cast<S>(p[i]) - ms) * rss + static_cast<S>(pb[i]));
      } else {
        for (int64_t i = 0; i < K; ++i) q[i] = static_cast<T>((static_cast<S>(p[i]) - ms) * rss);
      }
    }
  });
}

template <typename T>
void cpu_ln_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& g, const Tensor& x,
                     const Tensor& w, const Tensor& mean, const Tensor& rstd) {
  using S = acc_t<T>;
  const int64_t R = x.size(0), K = x.size(1);
  const T* px = x.data_ptr<T>();
  const T* pg = g.data_ptr<T>();
  const T* pw = w.defined() ? w.data_ptr<T>() : nullptr;
  const S* pm = mean.data_ptr<S>();
  const S* pr = rstd.data_ptr<S>();
  if (dx.defined()) {
    T* pdx = dx.data_ptr<T>();
    parallel_for(0, R, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(K, 1)), [&](int64_t rb, int64_t re) {
      std::vector<S> gw(K);
      for (int64_t r = rb; r < re; ++r) {
        const T* p = px + r * K;
        const T* q = pg + r * K;
        const S m = pm[r], rs = pr[r];
        for (int64_t i = 0; i < K; ++i) gw[i] = static_cast<S>(q[i]) * (pw ? static_cast<S>(pw[i]) : S(1));
        const double sg = lane_sum(K, [&](int64_t i) { return static_cast<double>(gw[i]); });
        const double sgx = lane_sum(K, [&](int64_t i) {
          return static_cast<double>(gw[i]) * static_cast<double>((static_cast<S>(p[i]) - m) * rs);
        });
        // dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat))
        const S a = static_cast<S>(sg / static_cast<double>(K)), bb = static_cast<S>(sgx / static_cast<double>(K));
        T* o = pdx + r * K;
        for (int64_t i = 0; i < K; ++i) o[i] = static_cast<T>(rs * (gw[i] - a - (static_cast<S>(p[i]) - m) * rs * bb));
      }
    });
  }
  if (dw.defined() || db.defined()) {
    // column sums over rows, parallel over column blocks: deterministic
    T* pdw = dw.defined() ? dw.data_ptr<T>() : nullptr;
    T* pdb = db.defined() ? db.data_ptr<T>() : nullptr;
    parallel_for(0, K, std::max<int64_t>(16, kGrainSize / std::max<int64_t>(R, 1)), [&](int64_t cb, int64_t ce) {
      std::vector<double> aw(ce - cb, 0.0), ab(ce - cb, 0.0);
      for (int64_t r = 0; r < R; ++r) {
        const T* p = px + r * K;
        const T* q = pg + r * K;
        const S m = pm[r], rs = pr[r];
        for (int64_t i = cb; i < ce; ++i) {
          S gv = static_cast<S>(q[i]);
          aw[i - cb] += static_cast<double>(gv * (static_cast<S>(p[i]) - m) * rs);
          ab[i - cb] += static_cast<double>(gv);
        }
      }
      for (int64_t i = cb; i < ce; ++i) {
        if (pdw) pdw[i] = static_cast<T>(aw[i - cb]);
        if (pdb) pdb[i] = static_cast<T>(ab[i - cb]);
      }
    });
  }
}

WEFT_REGISTER_KERNEL(ln_forward_table(), DeviceType::CPU, kFloatingTypes, cpu_ln_forward);
WEFT_REGISTER_KERNEL(ln_backward_table(), DeviceType::CPU, kFloatingTypes, cpu_ln_backward);

// Note [composite double backward]: the normalizations from recorded ops, in
// the statistics' dtype as the kernels, for a backward with create_graph.
// (x - mean) / sqrt(var + eps) * w + b with the biased variance over `dims`
// of x; `mean` and `var` given (eval-mode batch norm) are constants. w and b
// are already shaped to broadcast against x.
Tensor normalize_composite(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& w, const Tensor& b,
                           double eps, const Tensor& mean = Tensor(), const Tensor& var = Tensor()) {
  const DType sd = stat_dtype(x.dtype());
  const Tensor xf = x.to(sd);
  const Tensor mu = mean.defined() ? mean : weft::mean(xf, dims, true);
  const Tensor xc = xf - mu;
  const Tensor v = var.defined() ? var : weft::mean(xc * xc, dims, true);
  Tensor y = xc * rsqrt(v + eps);
  if (w.defined()) y = y * w.to(sd);
  if (b.defined()) y = y + b.to(sd);
  return y.to(x.dtype());
}

}  // namespace

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  detail::check_devices("batch_norm", {input, running_mean, running_var, weight, bias});
  const char* op = "batch_norm";
  WEFT_CHECK(input.dim() >= 2, op, ": expected input of shape (N, C) or (N, C, *), got shape ",
             shape_str(input.sizes()));
  WEFT_CHECK(is_floating(input.dtype()), op, ": expected a floating input, got dtype ", input.dtype());
  const int64_t N = input.size(0), C = input.size(1);
  const int64_t L = input.numel() / std::max<int64_t>(N * C, 1);
  const Shape cshape{C};
  check_param(op, "weight", weight, input, cshape);
  check_param(op, "bias", bias, input, cshape);
  check_param(op, "running_mean", running_mean, input, cshape);
  check_param(op, "running_var", running_var, input, cshape);
  WEFT_CHECK(running_mean.defined() == running_var.defined(), op,
             ": running_mean and running_var must both be given or both be undefined");
  WEFT_CHECK(training || running_mean.defined(), op, ": eval mode (training=false) needs running_mean and running_var");
  WEFT_CHECK(!training || N * L > 1, op, ": expected more than 1 value per channel when training, got input shape ",
             shape_str(input.sizes()));
  const DType dt = input.dtype(), sd = stat_dtype(dt);
  Tensor x = input.detach().contiguous().view({N, C, L});
  Tensor w = as_dtype(weight, dt), b = as_dtype(bias, dt);
  Tensor mean, var;
  if (training) {
    mean = empty(cshape, {sd, input.device()});
    var = empty(cshape, {sd, input.device()});
    bn_stats_table()(input.device(), dt, x, mean, var);
    if (running_mean.defined()) {
      NoGradGuard no_grad;
      const double n = static_cast<double>(N * L);
      Tensor rm = running_mean, rv = running_var;
      rm.mul_(Scalar(1.0 - momentum)).add_(mean.to(rm.dtype()), Scalar(momentum));
      rv.mul_(Scalar(1.0 - momentum)).add_(var.to(rv.dtype()), Scalar(momentum * n / (n - 1.0)));
    }
  } else {
    mean = running_mean.detach().to(sd).contiguous();
    var = running_var.detach().to(sd).contiguous();
  }
  Tensor invstd = empty(cshape, {sd, input.device()});
  Tensor y = empty({N, C, L}, {dt, input.device()});
  bn_forward_table()(input.device(), dt, y, x, w, b, mean, var, eps, invstd);
  y = y.view(input.sizes());
  if (any_requires_grad({input, weight, bias})) {
    SavedTensor sx(x), sw(w), smean(mean), sis(invstd);
    bool need_x = input.requires_grad(), need_w = weight.defined() && weight.requires_grad(),
         need_b = bias.defined() && bias.requires_grad();
    Shape in_shape = input.sizes();
    record_function(
        "BatchNormBackward", {input, weight, bias}, {y},
        [=](const std::vector<Tensor>& grads) {
          const char* nm = "BatchNormBackward";
          Tensor xs = sx.get(nm), ws = sw.defined() ? sw.get(nm) : Tensor();
          Tensor g = grads[0].to(xs.dtype()).contiguous().view(xs.sizes());
          Tensor dx = need_x ? empty(xs.sizes(), xs.options()) : Tensor();
          Tensor dw = need_w ? empty({C}, xs.options()) : Tensor();
          Tensor db = need_b ? empty({C}, xs.options()) : Tensor();
          bn_backward_table()(xs.device(), xs.dtype(), dx, dw, db, g, xs, ws, smean.get(nm), sis.get(nm), training);
          if (dx.defined()) dx = dx.view(in_shape);
          return std::vector<Tensor>{dx, dw, db};
        },
        [N, C, L, eps, training, smean,
         svar = training ? SavedTensor() : SavedTensor(var)](const std::vector<Tensor>& in) {
          // (N, C, L); the batch's statistics when training, else the running ones
          const char* nm = "BatchNormBackward";
          const Tensor xs = in[0].reshape({N, C, L});
          const Tensor m = training ? Tensor() : smean.get(nm).view({1, C, 1});
          const Tensor v = training ? Tensor() : svar.get(nm).view({1, C, 1});
          const Tensor w = in[1].defined() ? in[1].view({1, C, 1}) : Tensor();
          const Tensor b = in[2].defined() ? in[2].view({1, C, 1}) : Tensor();
          return std::vector<Tensor>{normalize_composite(xs, {0, 2}, w, b, eps, m, v).view(in[0].sizes())};
        });
  }
  return y;
}

Tensor layer_norm(const Tensor& input_in, const Shape& normalized_shape, const Tensor& weight_in, const Tensor& bias_in,
                  double eps) {
  detail::check_devices("layer_norm", {input_in, weight_in, bias_in});
  const char* op = "layer_norm";
  // float32 under autocast (core/autocast.h)
  const Tensor input = autocast::upcast(input_in), weight = autocast::upcast(weight_in),
               bias = autocast::upcast(bias_in);
  const int64_t nd = static_cast<int64_t>(normalized_shape.size());
  WEFT_CHECK(nd >= 1, op, ": normalized_shape must have at least one dim");
  WEFT_CHECK(is_floating(input.dtype()), op, ": expected a floating input, got dtype ", input.dtype());
  bool ok = input.dim() >= nd;
  for (int64_t i = 0; ok && i < nd; ++i) ok = input.size(input.dim() - nd + i) == normalized_shape[i];
  WEFT_CHECK(ok, op, ": normalized_shape ", shape_str(normalized_shape),
             " does not match the trailing dims of input shape ", shape_str(input.sizes()));
  check_param(op, "weight", weight, input, normalized_shape);
  check_param(op, "bias", bias, input, normalized_shape);
  const int64_t K = numel_of(normalized_shape);
  const int64_t R = K == 0 ? 0 : input.numel() / K;
  const DType dt = input.dtype(), sd = stat_dtype(dt);
  Tensor x = input.detach().contiguous().view({R, K});
  Tensor w = as_dtype(weight, dt), b = as_dtype(bias, dt);
  Tensor mean = empty({R}, {sd, input.device()}), rstd = empty({R}, {sd, input.device()});
  Tensor y = empty({R, K}, {dt, input.device()});
  ln_forward_table()(input.device(), dt, y, x, w, b, eps, mean, rstd);
  y = y.view(input.sizes());
  if (any_requires_grad({input, weight, bias})) {
    SavedTensor sx(x), sw(w), smean(mean), srstd(rstd);
    bool need_x = input.requires_grad(), need_w = weight.defined() && weight.requires_grad(),
         need_b = bias.defined() && bias.requires_grad();
    Shape in_shape = input.sizes(), ns = normalized_shape;
    record_function(
        "LayerNormBackward", {input, weight, bias}, {y},
        [=](const std::vector<Tensor>& grads) {
          const char* nm = "LayerNormBackward";
          Tensor xs = sx.get(nm), ws = sw.defined() ? sw.get(nm) : Tensor();
          Tensor g = grads[0].to(xs.dtype()).contiguous().view(xs.sizes());
          Tensor dx = need_x ? empty(xs.sizes(), xs.options()) : Tensor();
          Tensor dw = need_w ? empty({K}, xs.options()) : Tensor();
          Tensor db = need_b ? empty({K}, xs.options()) : Tensor();
          ln_backward_table()(xs.device(), xs.dtype(), dx, dw, db, g, xs, ws, smean.get(nm), srstd.get(nm));
          return std::vector<Tensor>{dx.defined() ? dx.view(in_shape) : dx, dw.defined() ? dw.view(ns) : dw,
                                     db.defined() ? db.view(ns) : db};
        },
        [nd, eps](const std::vector<Tensor>& in) {
          std::vector<int64_t> dims;
          for (int64_t i = 1; i <= nd; ++i) dims.push_back(-i);
          return std::vector<Tensor>{normalize_composite(in[0], dims, in[1], in[2], eps)};
        });
  }
  return y;
}

Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight, const Tensor& bias, double eps) {
  const char* op = "group_norm";
  detail::check_devices(op, {input, weight, bias});
  WEFT_CHECK(input.defined(), op, ": undefined input");
  WEFT_CHECK(input.dim() >= 2, op, ": expected an input (N, C, *) of at least 2 dims, got shape ",
             shape_str(input.sizes()));
  const int64_t N = input.size(0), C = input.size(1);
  WEFT_CHECK(num_groups >= 1 && C % num_groups == 0, op, ": num_groups = ", num_groups, " does not divide the ", C,
             " channels of input shape ", shape_str(input.sizes()));
  auto check_affine = [&](const char* name, const Tensor& t) {
    WEFT_CHECK(!t.defined() || (t.dim() == 1 && t.size(0) == C), op, ": ", name, " shape ", shape_str(t.sizes()),
               " does not match the ", C, " channels of input shape ", shape_str(input.sizes()));
  };
  check_affine("weight", weight);
  check_affine("bias", bias);
  // (N, G, C / G * S): each row is one group of one image
  const int64_t K = N * C == 0 ? 0 : input.numel() / (N * num_groups);
  Tensor y = layer_norm(input.reshape({N, num_groups, K}), Shape{K}, Tensor(), Tensor(), eps).view(input.sizes());
  if (!weight.defined() && !bias.defined()) return y;
  Shape cshape(input.dim(), 1);  // (1, C, 1, ...)
  cshape[1] = C;
  if (weight.defined()) y = y * weight.view(cshape);
  if (bias.defined()) y = y + bias.view(cshape);
  return y;
}

}  // namespace weft
