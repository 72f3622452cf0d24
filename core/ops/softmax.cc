// softmax and log_softmax over any dim.
//
// Contract: numerically stable (each slice is shifted by its max; a slice whose
// max is -inf gives NaN like PyTorch); float16/bfloat16 are computed in float.
// The input is laid out as (outer, r, inner) with r the softmax dim (a copy only
// when the input is not contiguous). inner == 1 (the last dim) runs three
// vectorised passes per row (max; exp and sum; scale), rows in parallel; inner
// > 1 runs the same passes on whole rows of `inner`, vectorised across them.
// Backward: softmax g -> y * (g - sum(g * y)); log_softmax g -> g - exp(y) * sum(g).
#include "core/kernels/softmax.h"

#include <cmath>
#include <vector>

#include "core/autocast.h"
#include "core/autograd_meta.h"
#include "core/ops/reduce_util.h"

namespace weft {

ReduceTable& softmax_table() {
  static ReduceTable t("softmax");
  return t;
}
ReduceTable& log_softmax_table() {
  static ReduceTable t("log_softmax");
  return t;
}

using namespace reduce_detail;

namespace {

// One contiguous row of length n (float math). out may alias the scratch row.
template <typename M, bool Log>
inline void softmax_row(const M* x, M* out, int64_t n) {
  M lanes[kLanes];
  for (int k = 0; k < kLanes; ++k) lanes[k] = -std::numeric_limits<M>::infinity();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) lanes[k] = x[i + k] > lanes[k] ? x[i + k] : lanes[k];
  M mx = -std::numeric_limits<M>::infinity();
  for (int k = 0; k < kLanes; ++k) mx = lanes[k] > mx ? lanes[k] : mx;
  for (; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  M sums[kLanes] = {};
  i = 0;
  if constexpr (Log) {
    for (; i + kLanes <= n; i += kLanes)
      for (int k = 0; k < kLanes; ++k) sums[k] += exp_m<M>(x[i + k] - mx);
  } else {
    for (; i + kLanes <= n; i += kLanes)
      for (int k = 0; k < kLanes; ++k) {
        M e = exp_m<M>(x[i + k] - mx);
        out[i + k] = e;
        sums[k] += e;
      }
  }
  M s = 0;
  for (int w = kLanes / 2; w >= 1; w /= 2)
    for (int k = 0; k < w; ++k) sums[k] += sums[k + w];
  s = sums[0];
  for (; i < n; ++i) {
    M e = exp_m<M>(x[i] - mx);
    if constexpr (!Log) out[i] = e;
    s += e;
  }
  if constexpr (Log) {
    const M ls = std::log(s);
    for (int64_t j = 0; j < n; ++j) out[j] = (x[j] - mx) - ls;
  } else {
    const M inv = M(1) / s;
    for (int64_t j = 0; j < n; ++j) out[j] *= inv;
  }
}

template <typename T, bool Log>
void softmax_impl(const T* in, T* out, const ReduceGeom& g) {
  using M = opmath_t<T>;
  const int64_t outer = g.outer, r = g.r, inner = g.inner;
  if (inner == 1) {
    parallel_for(0, outer, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(r, 1) / 4), [&](int64_t b, int64_t e) {
      if constexpr (std::is_same_v<T, M>) {
        for (int64_t o = b; o < e; ++o) softmax_row<M, Log>(in + o * r, out + o * r, r);
      } else {
        std::vector<M> xs(r), ys(r);
        for (int64_t o = b; o < e; ++o) {
          for (int64_t j = 0; j < r; ++j) xs[j] = static_cast<M>(in[o * r + j]);
          softmax_row<M, Log>(xs.data(), ys.data(), r);
          for (int64_t j = 0; j < r; ++j) out[o * r + j] = static_cast<T>(ys[j]);
        }
      }
    });
    return;
  }
  const int64_t tiles = (inner + kColTile - 1) / kColTile;
  parallel_for(0, outer * tiles, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(r * kColTile, 1) / 4),
               [&](int64_t b, int64_t e) {
                 M mx[kColTile], sum[kColTile];
                 for (int64_t t = b; t < e; ++t) {
                   const int64_t o = t / tiles, j0 = (t % tiles) * kColTile, n = std::min(kColTile, inner - j0);
                   const T* x = in + o * r * inner + j0;
                   T* y = out + o * r * inner + j0;
                   for (int64_t j = 0; j < n; ++j) {
                     mx[j] = -std::numeric_limits<M>::infinity();
                     sum[j] = 0;
                   }
                   for (int64_t k = 0; k < r; ++k)
                     for (int64_t j = 0; j < n; ++j) {
                       M v = static_cast<M>(x[k * inner + j]);
                       mx[j] = v > mx[j] ? v : mx[j];
                     }
                   for (int64_t k = 0; k < r; ++k)
                     for (int64_t j = 0; j < n; ++j) sum[j] += exp_m<M>(static_cast<M>(x[k * inner + j]) - mx[j]);
                   if constexpr (Log) {
                     for (int64_t j = 0; j < n; ++j) sum[j] = std::log(sum[j]);
                     for (int64_t k = 0; k < r; ++k)
                       for (int64_t j = 0; j < n; ++j)
                         y[k * inner + j] = static_cast<T>((static_cast<M>(x[k * inner + j]) - mx[j]) - sum[j]);
                   } else {
                     for (int64_t j = 0; j < n; ++j) sum[j] = M(1) / sum[j];
                     for (int64_t k = 0; k < r; ++k)
                       for (int64_t j = 0; j < n; ++j)
                         y[k * inner + j] = static_cast<T>(exp_m<M>(static_cast<M>(x[k * inner + j]) - mx[j]) * sum[j]);
                   }
                 }
               });
}

template <typename T>
void cpu_softmax(const ReduceArgs& a) {
  if constexpr (std::is_floating_point_v<opmath_t<T>>)
    softmax_impl<T, false>(static_cast<const T*>(a.in), static_cast<T*>(a.out), a.g);
}
template <typename T>
void cpu_log_softmax(const ReduceArgs& a) {
  if constexpr (std::is_floating_point_v<opmath_t<T>>)
    softmax_impl<T, true>(static_cast<const T*>(a.in), static_cast<T*>(a.out), a.g);
}
WEFT_REGISTER_KERNEL(softmax_table(), DeviceType::CPU, kFloatingTypes, cpu_softmax);
WEFT_REGISTER_KERNEL(log_softmax_table(), DeviceType::CPU, kFloatingTypes, cpu_log_softmax);

Tensor softmax_forward(const char* op, ReduceTable& table, const Tensor& a, int64_t dim, int64_t& d) {
  WEFT_CHECK(is_floating(a.dtype()), op, ": input dtype ", a.dtype(),
             " is not floating point; convert it first (e.g. .to(DType::Float32))");
  d = wrap_dim(op, dim, a.dim());
  Tensor x = a.detach().contiguous();
  ReduceArgs args;
  args.g = {1, a.dim() == 0 ? 1 : a.size(d), 1};
  for (int64_t i = 0; i < a.dim(); ++i) {
    if (i < d) args.g.outer *= a.size(i);
    if (i > d) args.g.inner *= a.size(i);
  }
  Tensor out = empty(a.sizes(), a.options());
  if (a.numel() == 0) return out;
  args.in = x.raw_data();
  args.out = out.raw_data();
  table(a.device(), a.dtype(), args);
  return out;
}

}  // namespace

Tensor softmax(const Tensor& a_in, int64_t dim) {
  const Tensor a = autocast::upcast(a_in);  // float32 under autocast (core/autocast.h)
  int64_t d = 0;
  Tensor out = softmax_forward("softmax", softmax_table(), a, dim, d);
  if (any_requires_grad({a})) {
    SavedTensor so = SavedTensor::output(out);
    int64_t nd = a.dim();
    record_differentiable("SoftmaxBackward", {a}, {out}, [so, d, nd](const std::vector<Tensor>& g) {
      Tensor y = so.get("SoftmaxBackward");
      Tensor gy = mul(g[0], y);
      Tensor s = nd == 0 ? gy : sum(gy, {d}, true);
      return std::vector<Tensor>{mul(y, sub(g[0], s))};
    });
  }
  return out;
}

Tensor log_softmax(const Tensor& a_in, int64_t dim) {
  const Tensor a = autocast::upcast(a_in);  // float32 under autocast (core/autocast.h)
  int64_t d = 0;
  Tensor out = softmax_forward("log_softmax", log_softmax_table(), a, dim, d);
  if (any_requires_grad({a})) {
    SavedTensor so = SavedTensor::output(out);
    int64_t nd = a.dim();
    record_differentiable("LogSoftmaxBackward", {a}, {out}, [so, d, nd](const std::vector<Tensor>& g) {
      Tensor y = so.get("LogSoftmaxBackward");
      Tensor s = nd == 0 ? g[0] : sum(g[0], {d}, true);
      // exp recorded when the backward builds a graph (Note [double backward])
      return std::vector<Tensor>{sub(g[0], mul(GradMode::is_enabled() ? exp(y) : exp_nograd(y), s))};
    });
  }
  return out;
}

}  // namespace weft
