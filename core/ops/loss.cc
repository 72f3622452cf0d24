// Losses: cross_entropy, nll_loss, mse_loss, binary_cross_entropy_with_logits,
// with PyTorch's semantics and defaults, except that mse_loss refuses input and
// target shapes that differ (PyTorch warns and broadcasts), as
// binary_cross_entropy_with_logits does.
//
// Contract: class-index losses take logits / log-probs (N, C) or (N, C, d1...)
// (or unbatched (C)) and int64 targets (N) / (N, d1...). Internally the class
// dim is moved last so every position is one contiguous row of C values.
// cross_entropy is one fused kernel (max, log-sum-exp, NLL and the label
// smoothing term per row) and one fused backward (softmax minus the target
// distribution) that recomputes the softmax from the saved log-sum-exp.
// Label smoothing follows PyTorch: loss = (1 - ls) * nll + ls / C * sum_c(-log p_c),
// ignored positions contribute 0, and Mean divides by the number of
// non-ignored positions (NaN when all are ignored, like PyTorch). Sums are
// accumulated in double over fixed blocks, so results do not depend on the
// thread count. Targets outside [0, C) that are not ignore_index are an error
// naming the target and C. Float16/BFloat16 compute in float32. Class weights
// (weight=) are composed over the per-position losses (weighted_class_loss), as
// is binary_cross_entropy_with_logits' element weight.
#include "core/kernels/loss.h"

#include <cmath>

#include "core/autocast.h"
#include "core/autograd_meta.h"
#include "core/dispatch.h"
#include "core/nn_ops.h"
#include "core/ops/elementwise_util.h"
#include "core/parallel.h"

namespace weft {

ClassLossKernel& class_loss_table() {
  static ClassLossKernel t("cross_entropy");
  return t;
}
ClassLossBackwardKernel& class_loss_backward_table() {
  static ClassLossBackwardKernel t("cross_entropy_backward");
  return t;
}
PointLossKernel& mse_table() {
  static PointLossKernel t("mse_loss");
  return t;
}
PointLossBackwardKernel& mse_backward_table() {
  static PointLossBackwardKernel t("mse_loss_backward");
  return t;
}
PointLossKernel& bce_table() {
  static PointLossKernel t("binary_cross_entropy_with_logits");
  return t;
}
PointLossBackwardKernel& bce_backward_table() {
  static PointLossBackwardKernel t("binary_cross_entropy_with_logits_backward");
  return t;
}

namespace {

// Compute type: float64 for float64, float32 otherwise (float16/bfloat16; the
// registrar also instantiates kernels for types outside the registered set).
template <typename T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

DType stat_dtype(DType d) { return d == DType::Float64 ? DType::Float64 : DType::Float32; }

// Deterministic parallel sum of f(i) for i in [0, n): fixed blocks, summed in order.
template <typename F>
double block_sum(int64_t n, const F& f) {
  constexpr int64_t kBlock = 4096;
  const int64_t nb = (n + kBlock - 1) / kBlock;
  std::vector<double> part(static_cast<size_t>(nb), 0.0);
  parallel_for(0, nb, std::max<int64_t>(1, kGrainSize / kBlock), [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      double s = 0;
      const int64_t hi = std::min(n, (k + 1) * kBlock);
      for (int64_t i = k * kBlock; i < hi; ++i) s += f(i);
      part[k] = s;
    }
  });
  double s = 0;
  for (double p : part) s += p;
  return s;
}

// ---------------------------------------------------------------- cross entropy / nll
// Signatures and shapes: core/kernels/loss.h.

template <typename T>
void cpu_class_loss(const Tensor& x, const Tensor& target, int64_t ignore_index, double smoothing, bool log_probs,
                    const Tensor& loss, const Tensor& lse) {
  using S = acc_t<T>;
  const int64_t R = x.size(0), C = x.size(1);
  const T* px = x.data_ptr<T>();
  const int64_t* pt = target.data_ptr<int64_t>();
  double* pl = loss.data_ptr<double>();
  S* plse = log_probs ? nullptr : lse.data_ptr<S>();
  parallel_for(0, R, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(C, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const T* p = px + r * C;
      const int64_t t = pt[r];
      if (log_probs) {
        pl[r] = t == ignore_index ? 0.0 : -static_cast<double>(static_cast<S>(p[t]));
        continue;
      }
      S mx = static_cast<S>(p[0]);
      for (int64_t c = 1; c < C; ++c) mx = std::max(mx, static_cast<S>(p[c]));
      S s = 0, sx = 0;
      for (int64_t c = 0; c < C; ++c) {
        S v = static_cast<S>(p[c]);
        s += std::exp(v - mx);
        sx += v;
      }
      const S l = std::isinf(mx) ? mx : mx + std::log(s);
      plse[r] = l;
      if (t == ignore_index) {
        pl[r] = 0.0;
        continue;
      }
      double nll = static_cast<double>(l) - static_cast<double>(static_cast<S>(p[t]));
      if (smoothing > 0) {
        double smooth = static_cast<double>(C) * static_cast<double>(l) - static_cast<double>(sx);  // -sum log p
        pl[r] = (1.0 - smoothing) * nll + smoothing / static_cast<double>(C) * smooth;
      } else {
        pl[r] = nll;
      }
    }
  });
}

template <typename T>
void cpu_class_loss_backward(const Tensor& dx, const Tensor& x, const Tensor& target, int64_t ignore_index,
                             double smoothing, bool log_probs, const Tensor& lse, const Tensor& g, double scale) {
  using S = acc_t<T>;
  const int64_t R = x.size(0), C = x.size(1);
  const T* px = x.data_ptr<T>();
  const int64_t* pt = target.data_ptr<int64_t>();
  const S* plse = log_probs ? nullptr : lse.data_ptr<S>();
  const double* pg = g.data_ptr<double>();
  const bool g_scalar = g.numel() == 1;
  T* pd = dx.data_ptr<T>();
  const S off = static_cast<S>(smoothing / static_cast<double>(C));
  const S on = static_cast<S>(1.0 - smoothing);
  parallel_for(0, R, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(C, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      T* d = pd + r * C;
      const int64_t t = pt[r];
      if (t == ignore_index) {
        for (int64_t c = 0; c < C; ++c) d[c] = T(0);
        continue;
      }
      const S gr = static_cast<S>(pg[g_scalar ? 0 : r] * scale);
      if (log_probs) {
        for (int64_t c = 0; c < C; ++c) d[c] = T(0);
        d[t] = static_cast<T>(-gr);
        continue;
      }
      // d loss / d x_c = softmax_c - (1 - ls) [c == t] - ls / C
      const T* p = px + r * C;
      const S l = plse[r];
      for (int64_t c = 0; c < C; ++c) d[c] = static_cast<T>(gr * (std::exp(static_cast<S>(p[c]) - l) - off));
      d[t] = static_cast<T>(static_cast<S>(d[t]) - gr * on);
    }
  });
}

WEFT_REGISTER_KERNEL(class_loss_table(), DeviceType::CPU, kFloatingTypes, cpu_class_loss);
WEFT_REGISTER_KERNEL(class_loss_backward_table(), DeviceType::CPU, kFloatingTypes, cpu_class_loss_backward);

// Note [composite double backward]: class_loss from recorded ops, for a
// backward with create_graph. x is the input as given ((C), (N, C) or
// (N, C, d1, ...)); the target picks its class through a one-hot constant.
// loss = -(1 - eps) logp_t - eps / C sum_c logp_c, 0 where ignored.
Tensor class_loss_composite(const Tensor& x, const Tensor& target, Reduction reduction, int64_t ignore_index,
                            double smoothing, bool log_probs) {
  const int64_t cdim = x.dim() == 1 ? 0 : 1;
  const int64_t C = x.size(cdim);
  const DType sd = x.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  const Tensor xf = x.to(sd);
  const Tensor logp = log_probs ? xf : log_softmax(xf, cdim);                     // (x.shape)
  const Tensor kept = ne(target, scalar_tensor(ignore_index, target.options()));  // (target.shape) bool
  const Tensor safe = where(kept, target, zeros_like(target));
  Tensor pick = one_hot(safe, C).to(sd);  // (target.shape, C)
  if (cdim != pick.dim() - 1) {
    std::vector<int64_t> perm{0, pick.dim() - 1};
    for (int64_t d = 1; d < pick.dim() - 1; ++d) perm.push_back(d);
    pick = permute(pick, perm);  // class dim at cdim, as x
  }
  Tensor loss = neg(sum(logp * pick, {cdim}));  // (target.shape)
  if (smoothing > 0) loss = loss * (1.0 - smoothing) + neg(sum(logp, {cdim})) * (smoothing / static_cast<double>(C));
  const Tensor keep = kept.to(sd);
  loss = loss * keep;
  Tensor out;
  switch (reduction) {
    case Reduction::None: out = loss; break;
    case Reduction::Sum: out = sum(loss); break;
    case Reduction::Mean: out = sum(loss) / sum(keep); break;
  }
  return out.to(x.dtype());
}

// Front end shared by cross_entropy and nll_loss.
Tensor class_loss(const char* op, const Tensor& input, const Tensor& target, Reduction reduction, int64_t ignore_index,
                  double smoothing, bool log_probs) {
  detail::check_devices(op, {input, target});
  WEFT_CHECK(is_floating(input.dtype()), op, ": expected floating input, got dtype ", input.dtype());
  WEFT_CHECK(target.dtype() == DType::Int64, op, ": expected int64 class-index targets, got dtype ", target.dtype());
  WEFT_CHECK(input.device() == target.device(), op, ": input and target are on different devices");
  WEFT_CHECK(smoothing >= 0.0 && smoothing <= 1.0, op, ": label_smoothing must be between 0.0 and 1.0, got ",
             smoothing);
  WEFT_CHECK(input.dim() >= 1, op, ": expected input of shape (C), (N, C) or (N, C, d1, ...), got shape ",
             shape_str(input.sizes()));
  // Expected target shape: input's shape without the class dim.
  Shape tshape = input.sizes();
  const int64_t cdim = input.dim() == 1 ? 0 : 1;
  tshape.erase(tshape.begin() + cdim);
  WEFT_CHECK(target.sizes() == tshape, op, ": expected target of shape ", shape_str(tshape), " for input of shape ",
             shape_str(input.sizes()), ", got ", shape_str(target.sizes()));
  const int64_t C = input.size(cdim);
  const int64_t R = numel_of(tshape);
  WEFT_CHECK(C > 0 || R == 0, op, ": input has no classes (shape ", shape_str(input.sizes()), ")");
  Tensor tgt = target.detach().contiguous().view({R});
  if (tgt.device().is_cpu()) {  // device targets are range-checked by the kernel (same message shape)
    const int64_t* pt = tgt.data_ptr<int64_t>();
    for (int64_t r = 0; r < R; ++r)
      WEFT_CHECK(pt[r] == ignore_index || (pt[r] >= 0 && pt[r] < C), op, ": target ", pt[r], " is out of bounds for ",
                 C, " classes (valid range [0, ", C, ") or ignore_index ", ignore_index, ")");
  }
  // Move the class dim last so rows are contiguous.
  Tensor xin = input.detach();
  std::vector<int64_t> perm;
  if (input.dim() > 2) {
    perm.push_back(0);
    for (int64_t d = 2; d < input.dim(); ++d) perm.push_back(d);
    perm.push_back(1);
    xin = permute(xin, perm);
  }
  Tensor x = xin.contiguous().view({R, C});
  const DType dt = input.dtype();
  Tensor loss = empty({R}, {DType::Float64, input.device()});
  Tensor lse = log_probs ? Tensor() : empty({R}, {stat_dtype(dt), input.device()});
  class_loss_table()(input.device(), dt, x, tgt, ignore_index, smoothing, log_probs, loss, lse);

  Tensor out;
  double scale = 1.0;
  Tensor dev_scale;  // () float64 on the device: 1 / count for a device mean
  if (reduction == Reduction::None) {
    out = loss.to(dt).view(tshape);
  } else if (loss.device().is_cpu()) {
    const double* pl = loss.data_ptr<double>();
    double total = block_sum(R, [pl](int64_t i) { return pl[i]; });
    if (reduction == Reduction::Mean) {
      int64_t count = 0;
      const int64_t* pt = tgt.data_ptr<int64_t>();
      for (int64_t r = 0; r < R; ++r) count += pt[r] != ignore_index;
      scale = 1.0 / static_cast<double>(count);
      total = total / static_cast<double>(count);
    }
    out = scalar_tensor(total, {dt, input.device()});
  } else {
    // Device: the sum, the count and the mean stay there (no host read, so no
    // stream synchronisation); a mean over zero kept rows is NaN, as on the CPU.
    Tensor total = R == 0 ? zeros({}, {DType::Float64, input.device()}) : sum(loss);  // ()
    if (reduction == Reduction::Mean) {
      Tensor count = R == 0 ? zeros({}, {DType::Float64, input.device()})
                            : sum(ne(tgt, scalar_tensor(ignore_index, tgt.options()))).to(DType::Float64);  // ()
      dev_scale = 1.0 / count;
      total = total * dev_scale;
    }
    out = total.to(dt);
  }
  if (any_requires_grad({input})) {
    SavedTensor sx(x), st(tgt), slse(lse);
    Shape in_shape = input.sizes(), perm_shape = xin.sizes();
    std::string node = log_probs ? "NllLossBackward" : "CrossEntropyBackward";
    record_function(
        node.c_str(), {input}, {out},
        [=](const std::vector<Tensor>& grads) {
          Tensor xs = sx.get(node);
          Tensor g = grads[0].to(DType::Float64).contiguous();
          if (dev_scale.defined()) g = (g * dev_scale).contiguous();  // times 1 / count; `scale` is 1 then
          Tensor dx = empty(xs.sizes(), xs.options());
          class_loss_backward_table()(xs.device(), xs.dtype(), dx, xs, st.get(node), ignore_index, smoothing, log_probs,
                                      slse.defined() ? slse.get(node) : Tensor(), g, scale);
          dx = dx.view(perm_shape);
          if (!perm.empty()) {
            std::vector<int64_t> inv(perm.size());
            for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int64_t>(i);
            dx = permute(dx, inv).contiguous();
          }
          return std::vector<Tensor>{dx.view(in_shape)};
        },
        [st, reduction, ignore_index, smoothing, log_probs, node, tshape](const std::vector<Tensor>& in) {
          const Tensor t = st.get(node).view(tshape);
          return std::vector<Tensor>{class_loss_composite(in[0], t, reduction, ignore_index, smoothing, log_probs)};
        });
  }
  return out;
}

// ---------------------------------------------------------------- elementwise losses
// mse: loss_i = (x_i - y_i)^2. bce: loss_i = (1 - y) x + lw * softplus(-x), lw = 1 + (pw - 1) y.
// Signatures and shapes: core/kernels/loss.h.

template <typename S>
inline S softplus_neg(S x) {  // log(1 + exp(-x)), stable
  return std::max(-x, S(0)) + std::log1p(std::exp(-std::abs(x)));
}

template <typename T, bool kBce>
void cpu_point_loss(const Tensor& out, const Tensor& x, const Tensor& y, const Tensor& pw, double& total) {
  using S = acc_t<T>;
  const int64_t n = x.numel();
  const T* px = x.data_ptr<T>();
  const T* py = y.data_ptr<T>();
  const T* pp = pw.defined() ? pw.data_ptr<T>() : nullptr;
  T* po = out.defined() ? out.data_ptr<T>() : nullptr;
  auto f = [=](int64_t i) -> S {
    const S a = static_cast<S>(px[i]), b = static_cast<S>(py[i]);
    if constexpr (kBce) {
      const S lw = pp ? S(1) + (static_cast<S>(pp[i]) - S(1)) * b : S(1);
      return (S(1) - b) * a + lw * softplus_neg(a);
    } else {
      return (a - b) * (a - b);
    }
  };
  if (po) {
    parallel_for(0, n, kGrainSize / 4, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) po[i] = static_cast<T>(f(i));
    });
    total = 0;
  } else {
    total = block_sum(n, [&](int64_t i) { return static_cast<double>(f(i)); });
  }
}

template <typename T, bool kBce>
void cpu_point_loss_backward(const Tensor& dx, const Tensor& dy, const Tensor& dpw, const Tensor& x, const Tensor& y,
                             const Tensor& pw, const Tensor& g, double scale) {
  using S = acc_t<T>;
  const int64_t n = x.numel();
  const T* px = x.data_ptr<T>();
  const T* py = y.data_ptr<T>();
  const T* pp = pw.defined() ? pw.data_ptr<T>() : nullptr;
  const T* pg = g.data_ptr<T>();
  const bool gs = g.numel() == 1;
  T* pdx = dx.defined() ? dx.data_ptr<T>() : nullptr;
  T* pdy = dy.defined() ? dy.data_ptr<T>() : nullptr;
  T* pdp = dpw.defined() ? dpw.data_ptr<T>() : nullptr;
  const S sc = static_cast<S>(scale);
  parallel_for(0, n, kGrainSize / 4, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const S gi = static_cast<S>(pg[gs ? 0 : i]) * sc;
      const S a = static_cast<S>(px[i]), t = static_cast<S>(py[i]);
      if constexpr (kBce) {
        const S p = pp ? static_cast<S>(pp[i]) : S(1);
        const S lw = S(1) + (p - S(1)) * t;
        const S sp = softplus_neg(a);
        const S sig_neg = S(1) / (S(1) + std::exp(a));  // sigmoid(-x)
        if (pdx) pdx[i] = static_cast<T>(gi * ((S(1) - t) - lw * sig_neg));
        if (pdy) pdy[i] = static_cast<T>(gi * (-a + (p - S(1)) * sp));
        if (pdp) pdp[i] = static_cast<T>(gi * t * sp);
      } else {
        const S d = S(2) * (a - t) * gi;
        if (pdx) pdx[i] = static_cast<T>(d);
        if (pdy) pdy[i] = static_cast<T>(-d);
      }
    }
  });
}

template <typename T>
void cpu_mse(const Tensor& o, const Tensor& x, const Tensor& y, const Tensor& p, double& s) {
  cpu_point_loss<T, false>(o, x, y, p, s);
}
template <typename T>
void cpu_bce(const Tensor& o, const Tensor& x, const Tensor& y, const Tensor& p, double& s) {
  cpu_point_loss<T, true>(o, x, y, p, s);
}
template <typename T>
void cpu_mse_backward(const Tensor& dx, const Tensor& dy, const Tensor& dp, const Tensor& x, const Tensor& y,
                      const Tensor& p, const Tensor& g, double scale) {
  cpu_point_loss_backward<T, false>(dx, dy, dp, x, y, p, g, scale);
}
template <typename T>
void cpu_bce_backward(const Tensor& dx, const Tensor& dy, const Tensor& dp, const Tensor& x, const Tensor& y,
                      const Tensor& p, const Tensor& g, double scale) {
  cpu_point_loss_backward<T, true>(dx, dy, dp, x, y, p, g, scale);
}
WEFT_REGISTER_KERNEL(mse_table(), DeviceType::CPU, kFloatingTypes, cpu_mse);
WEFT_REGISTER_KERNEL(mse_backward_table(), DeviceType::CPU, kFloatingTypes, cpu_mse_backward);
WEFT_REGISTER_KERNEL(bce_table(), DeviceType::CPU, kFloatingTypes, cpu_bce);
WEFT_REGISTER_KERNEL(bce_backward_table(), DeviceType::CPU, kFloatingTypes, cpu_bce_backward);

// Front end shared by mse_loss and bce_with_logits. Their front ends require input
// and target of the same shape; pos_weight broadcasts to it.
// `squared_error` (mse_loss): its backward can also be composed of recorded ops
// for a backward that builds a graph (Note [double backward]).
Tensor point_loss(const char* op, PointLossKernel& fwd, PointLossBackwardKernel& bwd, const Tensor& input,
                  const Tensor& target, Reduction reduction, const Tensor& pos_weight, bool squared_error = false) {
  detail::check_devices(op, {input, target, pos_weight});
  WEFT_CHECK(is_floating(input.dtype()), op, ": expected floating input, got dtype ", input.dtype());
  WEFT_CHECK(is_floating(target.dtype()), op, ": expected floating target, got dtype ", target.dtype());
  WEFT_CHECK(input.device() == target.device(), op, ": input and target are on different devices");
  const DType dt = promote_types(input.dtype(), target.dtype());
  Shape shape = broadcast_shapes(op, input.sizes(), target.sizes());
  Tensor x = expand(input.detach().to(dt), shape).contiguous();
  Tensor y = expand(target.detach().to(dt), shape).contiguous();
  Tensor pw;
  if (pos_weight.defined()) {
    WEFT_CHECK(is_floating(pos_weight.dtype()), op, ": expected floating pos_weight, got dtype ", pos_weight.dtype());
    const Shape& pws = pos_weight.sizes();
    bool fits = pws.size() <= shape.size();
    for (size_t i = 0; fits && i < pws.size(); ++i) {
      int64_t want = shape[shape.size() - pws.size() + i];
      fits = pws[i] == want || pws[i] == 1;
    }
    WEFT_CHECK(fits, op, ": pos_weight of shape ", shape_str(pos_weight.sizes()),
               " does not broadcast to the input shape ", shape_str(shape));
    pw = expand(pos_weight.detach().to(dt), shape).contiguous();
  }
  const int64_t n = numel_of(shape);
  Tensor out;
  double scale = 1.0;
  if (reduction == Reduction::None) {
    out = empty(shape, {dt, input.device()});
    double unused = 0;
    fwd(input.device(), dt, out, x, y, pw, unused);
  } else {
    double total = 0;
    fwd(input.device(), dt, Tensor(), x, y, pw, total);
    if (reduction == Reduction::Mean) {
      scale = 1.0 / static_cast<double>(n);
      total /= static_cast<double>(n);
    }
    out = scalar_tensor(total, {dt, input.device()});
  }
  if (any_requires_grad({input, target, pos_weight})) {
    SavedTensor sx(x), sy(y), sp(pw);
    const bool nx = input.requires_grad(), ny = target.requires_grad(),
               np = pos_weight.defined() && pos_weight.requires_grad();
    Shape si = input.sizes(), st = target.sizes(), spw = pos_weight.defined() ? pos_weight.sizes() : Shape{};
    std::string node = std::string(op) + "Backward";
    PointLossBackwardKernel* bk = &bwd;
    SavedTensor hx = squared_error ? SavedTensor(input) : SavedTensor();
    SavedTensor hy = squared_error ? SavedTensor(target) : SavedTensor();
    FunctionNode::Backward backward = [=](const std::vector<Tensor>& grads) {
      if (squared_error && GradMode::is_enabled()) {  // d/dx (x - y)^2 * scale, with the inputs' history
        Tensor gd = grads[0].to(dt) * ((hx.get(node).to(dt) - hy.get(node).to(dt)) * (2.0 * scale));
        return std::vector<Tensor>{nx ? sum_to(gd, si) : Tensor(), ny ? sum_to(-gd, st) : Tensor(), Tensor()};
      }
      Tensor xs = sx.get(node), ys = sy.get(node), ps = sp.defined() ? sp.get(node) : Tensor();
      Tensor g = grads[0].to(xs.dtype()).contiguous();
      Tensor dx = nx ? empty(xs.sizes(), xs.options()) : Tensor();
      Tensor dy = ny ? empty(xs.sizes(), xs.options()) : Tensor();
      Tensor dp = np ? empty(xs.sizes(), xs.options()) : Tensor();
      (*bk)(xs.device(), xs.dtype(), dx, dy, dp, xs, ys, ps, g, scale);
      return std::vector<Tensor>{nx ? sum_to(dx, si) : Tensor(), ny ? sum_to(dy, st) : Tensor(),
                                 np ? sum_to(dp, spw) : Tensor()};
    };
    if (squared_error) {
      record_differentiable(node.c_str(), {input, target, pos_weight}, {out}, std::move(backward));
    } else {
      // Note [composite double backward]: (1 - y) x + lw softplus(-x), lw = 1 + (pw - 1) y
      record_function(node.c_str(), {input, target, pos_weight}, {out}, std::move(backward),
                      [dt, reduction](const std::vector<Tensor>& in) {
                        const Tensor x = in[0].to(dt), y = in[1].to(dt);
                        const Tensor sp = softplus(-x);
                        Tensor loss = (1.0 - y) * x + (in[2].defined() ? (1.0 + (in[2].to(dt) - 1.0) * y) * sp : sp);
                        if (reduction == Reduction::Sum) loss = sum(loss);
                        if (reduction == Reduction::Mean) loss = mean(loss);
                        return std::vector<Tensor>{loss};
                      });
    }
  }
  return out;
}

// Per-class weights (weight: (C)), as PyTorch: each position's loss times the
// weight of its target class, and with label smoothing the smoothing term
// -sum_c weight_c log p_c; Mean divides by the sum of the kept positions'
// target weights. Composed of the unweighted op's per-position losses and
// element-wise ops (in float32 for 16-bit input), so it runs and
// differentiates wherever they do. The weight gets no gradient.
Tensor weighted_class_loss(const char* op, const Tensor& input, const Tensor& target, const Tensor& weight,
                           Reduction reduction, int64_t ignore_index, double smoothing, bool log_probs) {
  const DType dt = input.dtype();
  const bool narrow = dt == DType::Float16 || dt == DType::BFloat16;
  const Tensor x = narrow ? input.to(DType::Float32) : input;  // (input.shape)
  const DType ct = x.dtype();
  // Per-position losses; 0 where the target is ignore_index. class_loss checks input and target.
  Tensor nll = class_loss(op, x, target, Reduction::None, ignore_index, 0.0, log_probs);  // (target.shape)
  const int64_t cdim = x.dim() == 1 ? 0 : 1;
  const int64_t C = x.size(cdim);
  detail::check_devices(op, {x, weight});
  WEFT_CHECK(is_floating(weight.dtype()), op, ": expected a floating class weight, got dtype ", weight.dtype());
  WEFT_CHECK(weight.dim() == 1 && weight.size(0) == C, op, ": weight tensor should be defined either for all ", C,
             " classes or no classes but got weight tensor of shape: ", shape_str(weight.sizes()));
  const Tensor ignored = eq(target, scalar_tensor(ignore_index, target.options()));  // (target.shape) bool
  const Tensor w = weight.detach().to(ct);                                           // (C)
  const Tensor safe = where(ignored, zeros_like(target), target);                    // (target.shape)
  const Tensor wy =
      masked_fill(index_select(w, 0, safe.reshape({-1})).view(target.sizes()), ignored, 0.0);  // (target.shape)
  Tensor loss = nll * wy;
  if (smoothing > 0) {
    Shape ws(x.dim(), 1);
    ws[cdim] = C;
    const Tensor logp = log_probs ? x : log_softmax(x, cdim);
    const Tensor smooth = masked_fill(neg(sum(logp * w.view(ws), {cdim})), ignored, 0.0);  // (target.shape)
    loss = loss * (1.0 - smoothing) + smooth * (smoothing / static_cast<double>(C));
  }
  Tensor out;
  switch (reduction) {
    case Reduction::None: out = loss; break;
    case Reduction::Sum: out = sum(loss); break;
    case Reduction::Mean:
      out = sum(loss) / sum(wy);  // NaN when no kept position has weight, as PyTorch
      break;
  }
  return narrow ? out.to(dt) : out;
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& target, Reduction reduction, int64_t ignore_index,
                     double label_smoothing, const Tensor& weight) {
  if (weight.defined())
    return weighted_class_loss("cross_entropy", autocast::upcast(logits), autocast::upcast(target),
                               autocast::upcast(weight), reduction, ignore_index, label_smoothing, false);
  return class_loss("cross_entropy", autocast::upcast(logits), autocast::upcast(target), reduction, ignore_index,
                    label_smoothing, false);
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction reduction, int64_t ignore_index,
                const Tensor& weight) {
  if (weight.defined())
    return weighted_class_loss("nll_loss", autocast::upcast(log_probs), autocast::upcast(target),
                               autocast::upcast(weight), reduction, ignore_index, 0.0, true);
  return class_loss("nll_loss", autocast::upcast(log_probs), autocast::upcast(target), reduction, ignore_index, 0.0,
                    true);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  detail::check_pointwise_loss("mse_loss", input, target);
  return point_loss("mse_loss", mse_table(), mse_backward_table(), autocast::upcast(input), autocast::upcast(target),
                    reduction, Tensor(), /*squared_error=*/true);
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, Reduction reduction,
                                        const Tensor& pos_weight, const Tensor& weight) {
  const char* op = "binary_cross_entropy_with_logits";
  WEFT_CHECK(input.sizes() == target.sizes(), op, ": target size ", shape_str(target.sizes()),
             " must be the same as input size ", shape_str(input.sizes()));
  if (!weight.defined())
    return point_loss(op, bce_table(), bce_backward_table(), autocast::upcast(input), autocast::upcast(target),
                      reduction, autocast::upcast(pos_weight));
  // weight rescales each element's loss before the reduction (PyTorch's weight=)
  WEFT_CHECK(broadcast_shapes(op, weight.sizes(), input.sizes()) == input.sizes(), op, ": weight of shape ",
             shape_str(weight.sizes()), " does not broadcast to the input's shape ", shape_str(input.sizes()));
  const Tensor each = point_loss(op, bce_table(), bce_backward_table(), autocast::upcast(input),
                                 autocast::upcast(target), Reduction::None, autocast::upcast(pos_weight));
  return detail::apply_reduction(mul(each, autocast::upcast(weight)), reduction);
}

}  // namespace weft
