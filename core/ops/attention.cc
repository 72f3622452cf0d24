// scaled_dot_product_attention: softmax(q k^T / sqrt(D) [+ causal mask]) v, with
// optional dropout on the attention weights (PyTorch's F.scaled_dot_product_attention
// without attn_mask / scale arguments).
//
// Contract: q (B, H, L, D), k (B, H, S, D), v (B, H, S, Dv) -> (B, H, L, Dv); the
// leading dims must match exactly. The causal mask is PyTorch's: query i sees
// keys j <= i (top-left aligned tril of ones(L, S)); a fully masked row gives
// zero weights. The two GEMMs go through matmul; between them one fused kernel
// (registered per dtype) scales, masks and softmaxes each score row in a single
// numerically stable pass, and its backward is the fused softmax backward
// dx = scale * y * (g - sum(g * y)). Float16/BFloat16 compute in float32.
#include "core/kernels/attention.h"

#include <cmath>
#include <limits>

#include "core/autograd_meta.h"
#include "core/dispatch.h"
#include "core/nn_ops.h"
#include "core/parallel.h"

namespace weft {

AttnSoftmaxKernel& attn_softmax_table() {
  static AttnSoftmaxKernel t("scaled_dot_product_attention");
  return t;
}
AttnSoftmaxBackwardKernel& attn_softmax_backward_table() {
  static AttnSoftmaxBackwardKernel t("scaled_dot_product_attention_backward");
  return t;
}

namespace {

// Compute type: float64 for float64, float32 otherwise (float16/bfloat16; the
// registrar also instantiates kernels for types outside the registered set).
template <typename T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
void cpu_attn_softmax(const Tensor& y, const Tensor& scores, int64_t L, double scale, bool causal) {
  using S = acc_t<T>;
  const int64_t rows = scores.size(0), K = scores.size(1);
  const T* px = scores.data_ptr<T>();
  T* py = y.data_ptr<T>();
  const S sc = static_cast<S>(scale);
  parallel_for(0, rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(K, 1)), [&](int64_t b, int64_t e) {
    std::vector<S> buf(static_cast<size_t>(K));
    for (int64_t r = b; r < e; ++r) {
      const T* p = px + r * K;
      T* q = py + r * K;
      const int64_t valid = causal ? std::min<int64_t>(K, r % L + 1) : K;
      if (valid == 0) {
        for (int64_t j = 0; j < K; ++j) q[j] = T(0);
        continue;
      }
      S mx = -std::numeric_limits<S>::infinity();
      for (int64_t j = 0; j < valid; ++j) {
        buf[j] = static_cast<S>(p[j]) * sc;
        mx = std::max(mx, buf[j]);
      }
      S s = 0;
      for (int64_t j = 0; j < valid; ++j) {
        buf[j] = std::exp(buf[j] - mx);
        s += buf[j];
      }
      const S inv = S(1) / s;
      for (int64_t j = 0; j < valid; ++j) q[j] = static_cast<T>(buf[j] * inv);
      for (int64_t j = valid; j < K; ++j) q[j] = T(0);
    }
  });
}

template <typename T>
void cpu_attn_softmax_backward(const Tensor& dx, const Tensor& g, const Tensor& y, double scale) {
  using S = acc_t<T>;
  const int64_t rows = y.size(0), K = y.size(1);
  const T* pg = g.data_ptr<T>();
  const T* py = y.data_ptr<T>();
  T* pd = dx.data_ptr<T>();
  const S sc = static_cast<S>(scale);
  parallel_for(0, rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(K, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const T* a = pg + r * K;
      const T* q = py + r * K;
      T* d = pd + r * K;
      S dot = 0;
      for (int64_t j = 0; j < K; ++j) dot += static_cast<S>(a[j]) * static_cast<S>(q[j]);
      for (int64_t j = 0; j < K; ++j) d[j] = static_cast<T>(sc * static_cast<S>(q[j]) * (static_cast<S>(a[j]) - dot));
    }
  });
}

WEFT_REGISTER_KERNEL(attn_softmax_table(), DeviceType::CPU, kFloatingTypes, cpu_attn_softmax);
WEFT_REGISTER_KERNEL(attn_softmax_backward_table(), DeviceType::CPU, kFloatingTypes, cpu_attn_softmax_backward);

// softmax(scale * scores, masked) over the last dim of scores (..., L, S), differentiable.
Tensor attn_softmax(const Tensor& scores, double scale, bool causal) {
  const int64_t L = scores.size(-2), K = scores.size(-1);
  const int64_t rows = numel_of(Shape(scores.sizes().begin(), scores.sizes().end() - 1));
  Tensor x = scores.detach().contiguous().view({rows, K});
  Tensor y = empty({rows, K}, scores.options());
  attn_softmax_table()(scores.device(), scores.dtype(), y, x, L, scale, causal);
  y = y.view(scores.sizes());
  if (any_requires_grad({scores})) {
    SavedTensor sy(y);
    record_function("ScaledSoftmaxBackward", {scores}, {y}, [sy, rows, K, scale](const std::vector<Tensor>& grads) {
      Tensor ys = sy.get("ScaledSoftmaxBackward");
      Tensor g = grads[0].to(ys.dtype()).contiguous().view({rows, K});
      Tensor dx = empty({rows, K}, ys.options());
      attn_softmax_backward_table()(ys.device(), ys.dtype(), dx, g, ys.contiguous().view({rows, K}), scale);
      return std::vector<Tensor>{dx.view(ys.sizes())};
    });
  }
  return y;
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool is_causal, double dropout_p,
                                    bool training) {
  const char* op = "scaled_dot_product_attention";
  WEFT_CHECK(q.dim() >= 2 && k.dim() == q.dim() && v.dim() == q.dim(), op,
             ": expected q, k, v with the same number of dims (B, H, T, D), got shapes ", shape_str(q.sizes()), ", ",
             shape_str(k.sizes()), ", ", shape_str(v.sizes()));
  WEFT_CHECK(is_floating(q.dtype()) && q.dtype() == k.dtype() && q.dtype() == v.dtype(), op,
             ": expected q, k, v of the same floating dtype, got ", q.dtype(), ", ", k.dtype(), ", ", v.dtype());
  WEFT_CHECK(q.device() == k.device() && q.device() == v.device(), op, ": q, k, v are on different devices");
  const int64_t n = q.dim();
  bool lead_ok = true;
  for (int64_t d = 0; d < n - 2; ++d) lead_ok = lead_ok && q.size(d) == k.size(d) && q.size(d) == v.size(d);
  WEFT_CHECK(lead_ok && q.size(-1) == k.size(-1) && k.size(-2) == v.size(-2), op, ": incompatible shapes q ",
             shape_str(q.sizes()), ", k ", shape_str(k.sizes()), ", v ", shape_str(v.sizes()),
             " (expected q (..., L, D), k (..., S, D), v (..., S, Dv))");
  WEFT_CHECK(dropout_p >= 0.0 && dropout_p <= 1.0, op, ": dropout_p must be in [0, 1], got ", dropout_p);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  Tensor scores = matmul(q, transpose(k, -2, -1));  // (..., L, S)
  Tensor attn = attn_softmax(scores, scale, is_causal);
  if (training && dropout_p > 0.0) attn = dropout(attn, dropout_p, true);
  return matmul(attn, v);
}

}  // namespace weft
