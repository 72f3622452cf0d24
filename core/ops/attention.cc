// scaled_dot_product_attention: softmax(q k^T / sqrt(D) [+ causal mask]) v, with
// optional dropout on the attention weights (PyTorch's F.scaled_dot_product_attention),
// and an optional mask and scale (AttentionOptions).
//
// Contract: q (B, H, L, D), k (B, H, S, D), v (B, H, S, Dv) -> (B, H, L, Dv); the
// leading dims must match exactly. The causal mask is PyTorch's: query i sees
// keys j <= i (top-left aligned tril of ones(L, S)); a fully masked row gives
// zero weights. Float16/BFloat16 compute in float32. Under autocast q, k, v are
// cast to the autocast dtype.
//
// Two paths:
//  - fused: when q is 4-d on a device whose sdpa_fused_table has a kernel for its
//    dtype (CUDA float16/bfloat16 through cuDNN, core/cuda/attention_cudnn.cc; CPU
//    float32 and bfloat16 through the flash kernels of core/cpu/flash_attention.h,
//    bfloat16 widened to float32 inside them, outputs rounded once) and
//    dropout is inactive (dropout_p == 0 or !training), one kernel computes the
//    output and the per-row logsumexp; autograd records one node,
//    "ScaledDotProductAttentionBackward", saving q, k, v, o and the statistics, whose
//    backward is the fused backward kernel. A kernel that declines (returns false:
//    unsupported head dim, cuDNN too old, no engine) sends the forward silently to
//    the unfused path; a declining backward recomputes the gradient with the unfused
//    path's math (same kernels, no recording), so the gradient stays right.
//  - unfused (everything else: CPU float64/float16, CUDA float32/float64,
//    dropout in training, a declining kernel): the two
//    GEMMs go through matmul; between them one fused kernel (registered per dtype)
//    scales, masks and softmaxes each score row in a single numerically stable pass,
//    and its backward is the fused softmax backward dx = scale * y * (g - sum(g * y)).
//    Device-agnostic: on CUDA the GEMMs are cuBLAS and the softmax the CUDA
//    attn_softmax kernels.
// With an attn_mask, a third path of recorded ops (masked_attention_probs) computes
// the weights; masks are rare enough in training (padding, encoder-decoder models)
// that it has no kernel of its own.
#include "core/kernels/attention.h"

#include <cmath>
#include <limits>

#include "core/autocast.h"
#include "core/autograd_meta.h"
#include "core/cpu/flash_attention.h"
#include "core/dispatch.h"
#include "core/nn_ops.h"
#include "core/ops/elementwise_util.h"
#include "core/parallel.h"
#include "core/tensor_impl.h"

namespace weft {

AttnSoftmaxKernel& attn_softmax_table() {
  static AttnSoftmaxKernel t("scaled_dot_product_attention");
  return t;
}
AttnSoftmaxBackwardKernel& attn_softmax_backward_table() {
  static AttnSoftmaxBackwardKernel t("scaled_dot_product_attention_backward");
  return t;
}
SdpaFusedKernel& sdpa_fused_table() {
  static SdpaFusedKernel t("scaled_dot_product_attention_fused");
  return t;
}
SdpaFusedBackwardKernel& sdpa_fused_backward_table() {
  static SdpaFusedBackwardKernel t("scaled_dot_product_attention_fused_backward");
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

// A (B, H, T, X) tensor for the fused path's output and gradients. On the CPU
// its memory is laid out (B, T, H, X) (the flash kernels write any strides), so
// the transpose(1, 2).reshape(B, T, H * X) that follows attention in a model,
// and the same steps back in the backward, are views, not copies; the other
// devices' kernels get contiguous tensors.
Tensor heads_tensor(const Shape& bhtx, const TensorOptions& options) {
  if (options.device.type != DeviceType::CPU) return empty(bhtx, options);
  return empty({bhtx[0], bhtx[2], bhtx[1], bhtx[3]}, options).transpose(1, 2);
}

// Gradient tensors for q, k, v that are views of one (B, T, 3C) tensor (q, k, v
// split from it, as nn::MultiheadAttention does): dq, dk, dv become the same
// views of one new (B, T, 3, H, D) buffer, so the split's backward joins them
// without a copy (Note [split backward views] in core/ops/join.cc). False for
// any other layout.
bool qkv_grads(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& dq, Tensor& dk, Tensor& dv) {
  if (q.device().type != DeviceType::CPU || q.dim() != 4 || q.sizes() != k.sizes() || q.sizes() != v.sizes())
    return false;
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3), C = H * D;
  const Shape strides{T * 3 * C, D, 3 * C, 1};
  const bool packed = q.impl()->storage() == k.impl()->storage() && q.impl()->storage() == v.impl()->storage() &&
                      q.strides() == strides && k.strides() == strides && v.strides() == strides &&
                      k.storage_offset() == q.storage_offset() + C && v.storage_offset() == q.storage_offset() + 2 * C;
  if (!packed) return false;
  Tensor buf = empty({B, T, 3, H, D}, q.options());
  dq = make_view(buf, q.sizes(), strides, 0);
  dk = make_view(buf, q.sizes(), strides, C);
  dv = make_view(buf, q.sizes(), strides, 2 * C);
  return true;
}

// The CPU's fused attention: float32 and bfloat16 through the flash kernels
// (core/cpu/flash_attention.h); they decline where the CPU has neither
// AVX-512 nor AVX2 + FMA.
cpu::FlashGeometry flash_geometry(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, double scale,
                                  bool causal) {
  cpu::FlashGeometry g;
  g.batch = q.size(0);
  g.heads = q.size(1);
  g.L = q.size(2);
  g.S = k.size(2);
  g.D = q.size(3);
  g.Dv = v.size(3);
  g.q_sb = q.stride(0), g.q_sh = q.stride(1), g.q_rs = q.stride(2);
  g.k_sb = k.stride(0), g.k_sh = k.stride(1), g.k_rs = k.stride(2);
  g.v_sb = v.stride(0), g.v_sh = v.stride(1), g.v_rs = v.stride(2);
  g.o_sb = o.stride(0), g.o_sh = o.stride(1), g.o_rs = o.stride(2);
  g.scale = static_cast<float>(scale);
  g.causal = causal;
  return g;
}

// The backward's geometry: the forward's, and the strides of dq, dk, dv.
cpu::FlashGeometry flash_backward_geometry(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& q,
                                           const Tensor& k, const Tensor& v, const Tensor& o, double scale,
                                           bool causal) {
  cpu::FlashGeometry g = flash_geometry(q, k, v, o, scale, causal);
  g.dq_sb = dq.stride(0), g.dq_sh = dq.stride(1), g.dq_rs = dq.stride(2);
  g.dk_sb = dk.stride(0), g.dk_sh = dk.stride(1), g.dk_rs = dk.stride(2);
  g.dv_sb = dv.stride(0), g.dv_sh = dv.stride(1), g.dv_rs = dv.stride(2);
  return g;
}

bool cpu_sdpa_flash(const Tensor& o, const Tensor& stats, const Tensor& q, const Tensor& k, const Tensor& v,
                    double scale, bool causal) {
  if (!cpu::flash_attention_available()) return false;
  cpu::flash_attention_forward_f32(flash_geometry(q, k, v, o, scale, causal), q.data_ptr<float>(), k.data_ptr<float>(),
                                   v.data_ptr<float>(), o.data_ptr<float>(), stats.data_ptr<float>());
  return true;
}

bool cpu_sdpa_flash_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& d_o, const Tensor& q,
                             const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& stats, double scale,
                             bool causal) {
  if (!cpu::flash_attention_available()) return false;
  const cpu::FlashGeometry g = flash_backward_geometry(dq, dk, dv, q, k, v, o, scale, causal);
  cpu::flash_attention_backward_f32(g, q.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(),
                                    o.data_ptr<float>(), stats.data_ptr<float>(), d_o.data_ptr<float>(), d_o.stride(0),
                                    d_o.stride(1), d_o.stride(2), dq.data_ptr<float>(), dk.data_ptr<float>(),
                                    dv.data_ptr<float>());
  return true;
}

// bfloat16 q, k, v (CPU autocast): the flash kernels' bfloat16 entries, which
// widen each element as they copy or pack it and round the outputs once as they
// store them; the statistics stay float32. Every score, probability and sum is
// float32 (the unfused path would round the scores and probabilities to
// bfloat16), and no widened copy or float32 output is made.
const uint16_t* bf16_bits(const Tensor& t) { return reinterpret_cast<const uint16_t*>(t.data_ptr<BFloat16>()); }
uint16_t* bf16_bits_out(const Tensor& t) { return reinterpret_cast<uint16_t*>(t.data_ptr<BFloat16>()); }

bool cpu_sdpa_flash_bf16(const Tensor& o, const Tensor& stats, const Tensor& q, const Tensor& k, const Tensor& v,
                         double scale, bool causal) {
  if (!cpu::flash_attention_available()) return false;
  cpu::flash_attention_forward_bf16(flash_geometry(q, k, v, o, scale, causal), bf16_bits(q), bf16_bits(k), bf16_bits(v),
                                    bf16_bits_out(o), stats.data_ptr<float>());
  return true;
}

bool cpu_sdpa_flash_bf16_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& d_o,
                                  const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                                  const Tensor& stats, double scale, bool causal) {
  if (!cpu::flash_attention_available()) return false;
  const cpu::FlashGeometry g = flash_backward_geometry(dq, dk, dv, q, k, v, o, scale, causal);
  cpu::flash_attention_backward_bf16(g, bf16_bits(q), bf16_bits(k), bf16_bits(v), bf16_bits(o), stats.data_ptr<float>(),
                                     bf16_bits(d_o), d_o.stride(0), d_o.stride(1), d_o.stride(2), bf16_bits_out(dq),
                                     bf16_bits_out(dk), bf16_bits_out(dv));
  return true;
}

const detail::Registrar cpu_flash_registrar([] {
  sdpa_fused_table().set(DeviceType::CPU, DType::Float32, &cpu_sdpa_flash);
  sdpa_fused_backward_table().set(DeviceType::CPU, DType::Float32, &cpu_sdpa_flash_backward);
  sdpa_fused_table().set(DeviceType::CPU, DType::BFloat16, &cpu_sdpa_flash_bf16);
  sdpa_fused_backward_table().set(DeviceType::CPU, DType::BFloat16, &cpu_sdpa_flash_bf16_backward);
});

// softmax(scale * scores, masked) over the last dim of scores (..., L, S), differentiable.
Tensor attn_softmax(const Tensor& scores, double scale, bool causal) {
  const int64_t L = scores.size(-2), K = scores.size(-1);
  const int64_t rows = numel_of(Shape(scores.sizes().begin(), scores.sizes().end() - 1));
  Tensor x = scores.detach().contiguous().view({rows, K});
  Tensor y = empty({rows, K}, scores.options());
  attn_softmax_table()(scores.device(), scores.dtype(), y, x, L, scale, causal);
  y = y.view(scores.sizes());
  if (any_requires_grad({scores})) {
    SavedTensor sy = SavedTensor::output(y);
    record_differentiable(
        "ScaledSoftmaxBackward", {scores}, {y}, [sy, rows, K, scale](const std::vector<Tensor>& grads) {
          Tensor ys = sy.get("ScaledSoftmaxBackward");
          if (GradMode::is_enabled()) {  // Note [double backward]: scale * y * (g - sum(g y)); masked y are 0
            Tensor gy = grads[0].to(ys.dtype());
            return std::vector<Tensor>{mul(ys, sub(gy, sum(mul(gy, ys), {-1}, true))) * scale};
          }
          Tensor g = grads[0].to(ys.dtype()).contiguous().view({rows, K});
          Tensor dx = empty({rows, K}, ys.options());
          attn_softmax_backward_table()(ys.device(), ys.dtype(), dx, g, ys.contiguous().view({rows, K}), scale);
          return std::vector<Tensor>{dx.view(ys.sizes())};
        });
  }
  return y;
}

// softmax(scale * scores) of (rows, S) contiguous scores, no autograd.
Tensor attn_softmax_nograd(const Tensor& scores, int64_t L, double scale, bool causal) {
  Tensor y = empty(scores.sizes(), scores.options());
  attn_softmax_table()(scores.device(), scores.dtype(), y, scores, L, scale, causal);
  return y;
}

// Gradients (dq, dk, dv) of attention from the detached inputs and the output
// gradient g, with the unfused path's math and kernels and no recording: what the
// fused node falls back to when the fused backward declines.
std::vector<Tensor> unfused_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                               double scale, bool causal) {
  NoGradGuard no_grad;
  const int64_t L = q.size(-2), S = k.size(-2);
  Tensor scores = matmul(q, transpose(k, -2, -1)).contiguous();  // (..., L, S)
  const int64_t rows = scores.numel() / S;
  Tensor p = attn_softmax_nograd(scores.view({rows, S}), L, scale, causal);  // (rows, S)
  Tensor p4 = p.view(scores.sizes());
  Tensor dv = matmul(transpose(p4, -2, -1), g);                              // (..., S, Dv)
  Tensor dp = matmul(g, transpose(v, -2, -1)).contiguous().view({rows, S});  // dL/dp
  Tensor ds = empty({rows, S}, p.options());                                 // dL/dscores
  attn_softmax_backward_table()(p.device(), p.dtype(), ds, dp, p, scale);
  Tensor ds4 = ds.view(scores.sizes());
  return {matmul(ds4, k), matmul(transpose(ds4, -2, -1), q), dv};
}

// The fused path (see the contract above); an undefined tensor when it does not
// apply or its kernel declines.
Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal) {
  const Device dev = q.device();
  const DType dt = q.dtype();
  if (q.dim() != 4 || !sdpa_fused_table().has(dev.type, dt)) return Tensor();
  if (q.numel() == 0 || k.numel() == 0 || v.numel() == 0) return Tensor();
  auto unit_last = [](const Tensor& t) {
    Tensor d = t.detach();
    return d.stride(-1) == 1 ? d : d.contiguous();
  };
  const Tensor qd = unit_last(q), kd = unit_last(k), vd = unit_last(v);
  const int64_t B = q.size(0), H = q.size(1), L = q.size(2), Dv = v.size(3);
  Tensor o = heads_tensor({B, H, L, Dv}, qd.options());                    // (B, H, L, Dv)
  Tensor stats = empty({B, H, L, 1}, TensorOptions{DType::Float32, dev});  // (B, H, L, 1)
  if (!sdpa_fused_table()(dev, dt, o, stats, qd, kd, vd, scale, causal)) return Tensor();
  if (any_requires_grad({q, k, v})) {
    SavedTensor sq(qd), sk(kd), sv(vd), so(o), ss(stats);
    record_function(
        "ScaledDotProductAttentionBackward", {q, k, v}, {o},
        [sq, sk, sv, so, ss, scale, causal](const std::vector<Tensor>& grads) {
          const char* node = "ScaledDotProductAttentionBackward";
          Tensor qs = sq.get(node), ks = sk.get(node), vs = sv.get(node), os = so.get(node), st = ss.get(node);
          Tensor g = grads[0].detach().to(os.dtype());
          if (g.stride(-1) != 1) g = g.contiguous();
          Tensor dq, dk, dv;
          if (!qkv_grads(qs, ks, vs, dq, dk, dv)) {
            dq = heads_tensor(qs.sizes(), qs.options());
            dk = heads_tensor(ks.sizes(), ks.options());
            dv = heads_tensor(vs.sizes(), vs.options());
          }
          const auto& bwd = sdpa_fused_backward_table();
          if (bwd.has(os.device().type, os.dtype()) &&
              bwd(os.device(), os.dtype(), dq, dk, dv, g, qs, ks, vs, os, st, scale, causal))
            return std::vector<Tensor>{dq, dk, dv};
          return unfused_attention_backward(qs, ks, vs, g, scale, causal);
        },
        // Note [composite double backward]: the unfused path's recorded ops
        [scale, causal](const std::vector<Tensor>& in) {
          const Tensor p = attn_softmax(matmul(in[0], transpose(in[1], -2, -1)), scale, causal);
          return std::vector<Tensor>{matmul(p, in[2])};
        });
  }
  return o;
}

// The masked path's probabilities: softmax(scale q k^T + mask) over the last dim,
// built of recorded ops (so differentiable to any order). mask is boolean (true:
// takes part) or additive of the scores' dtype. A row with every score -inf
// softmaxes zeros instead of NaN (PyTorch's safe softmax): its scores are replaced
// by 0 first, so neither the forward nor the backward meets inf - inf.
Tensor masked_attention_probs(const Tensor& q, const Tensor& k, const Tensor& mask, double scale) {
  Tensor s = mul(matmul(q, transpose(k, -2, -1)), wrapped_scalar(scale, q.dtype(), q.device()));  // (..., L, S)
  const Tensor neg_inf = wrapped_scalar(-std::numeric_limits<double>::infinity(), s.dtype(), s.device());
  if (mask.dtype() == DType::Bool) s = masked_fill(s, logical_not(mask), -std::numeric_limits<double>::infinity());
  else s = add(s, mask.to(s.dtype()));
  const Tensor dead = all(eq(s.detach(), neg_inf), {-1}, true);  // (..., L, 1): no key takes part
  const Tensor zero = wrapped_scalar(0.0, s.dtype(), s.device());
  return masked_fill(softmax(where(dead, zero, s), -1), dead, 0.0);
}

struct CheckedAttention {
  Tensor q, k, v;  // after autocast
  double scale;
};

// Validates q, k (and v when given) and the options for op; lowers them under autocast.
CheckedAttention check_attention(const char* op, const Tensor& q_in, const Tensor& k_in, const Tensor* v_in,
                                 const AttentionOptions& o) {
  if (v_in) detail::check_devices(op, {q_in, k_in, *v_in});
  else detail::check_devices(op, {q_in, k_in});
  WEFT_CHECK(q_in.defined() && k_in.defined() && (!v_in || v_in->defined()), op, ": undefined q, k or v");
  const Tensor q = autocast::lower(q_in), k = autocast::lower(k_in), v = v_in ? autocast::lower(*v_in) : k;
  WEFT_CHECK(q.dim() >= 2 && k.dim() == q.dim() && v.dim() == q.dim(), op,
             ": expected q, k, v with the same number of dims (B, H, T, D), got shapes ", shape_str(q.sizes()), ", ",
             shape_str(k.sizes()), ", ", shape_str(v.sizes()));
  WEFT_CHECK(is_floating(q.dtype()) && q.dtype() == k.dtype() && q.dtype() == v.dtype(), op,
             ": expected q, k, v of the same floating dtype, got ", q.dtype(), ", ", k.dtype(), ", ", v.dtype());
  const int64_t n = q.dim();
  bool lead_ok = true;
  for (int64_t d = 0; d < n - 2; ++d) lead_ok = lead_ok && q.size(d) == k.size(d) && q.size(d) == v.size(d);
  WEFT_CHECK(lead_ok && q.size(-1) == k.size(-1) && k.size(-2) == v.size(-2), op, ": incompatible shapes q ",
             shape_str(q.sizes()), ", k ", shape_str(k.sizes()), ", v ", shape_str(v.sizes()),
             " (expected q (..., L, D), k (..., S, D), v (..., S, Dv))");
  WEFT_CHECK(o.dropout_p >= 0.0 && o.dropout_p <= 1.0, op, ": dropout_p must be in [0, 1], got ", o.dropout_p);
  WEFT_CHECK(!o.scale || std::isfinite(*o.scale), op, ": scale must be finite, got ", o.scale.value_or(0.0));
  if (const Tensor& m = o.attn_mask; m.defined()) {
    WEFT_CHECK(!o.is_causal, op, ": attn_mask and is_causal exclude each other (pass a causal attn_mask instead)");
    WEFT_CHECK(m.dtype() == DType::Bool || is_floating(m.dtype()), op,
               ": attn_mask must be bool (true: takes part) or floating (added to the scores), got ", m.dtype());
    WEFT_CHECK(m.device() == q.device(), op, ": attn_mask is on ", m.device(), ", q on ", q.device());
    Shape scores(q.sizes().begin(), q.sizes().end() - 1);
    scores.push_back(k.size(-2));  // (..., L, S)
    bool fits = m.dim() <= static_cast<int64_t>(scores.size());
    for (int64_t d = 1; fits && d <= m.dim(); ++d) {
      const int64_t ms = m.size(-d), ss = scores[scores.size() - static_cast<size_t>(d)];
      fits = ms == ss || ms == 1;
    }
    WEFT_CHECK(fits, op, ": attn_mask of shape ", shape_str(m.sizes()), " does not broadcast to the scores' shape ",
               shape_str(scores), " (..., L, S)");
  }
  return {q, k, v, o.scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(-1))))};
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool is_causal, double dropout_p,
                                    bool training) {
  return scaled_dot_product_attention(
      q, k, v, AttentionOptions{.dropout_p = dropout_p, .is_causal = is_causal, .training = training});
}

Tensor scaled_dot_product_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                    const AttentionOptions& options) {
  const CheckedAttention a = check_attention("scaled_dot_product_attention", q_in, k_in, &v_in, options);
  const bool dropout_active = options.training && options.dropout_p > 0.0;
  Tensor attn;
  if (options.attn_mask.defined()) {
    attn = masked_attention_probs(a.q, a.k, options.attn_mask, a.scale);
  } else {
    if (!dropout_active) {
      Tensor fused = fused_attention(a.q, a.k, a.v, a.scale, options.is_causal);
      if (fused.defined()) return fused;
    }
    attn = attn_softmax(matmul(a.q, transpose(a.k, -2, -1)), a.scale, options.is_causal);  // (..., L, S)
  }
  if (dropout_active) attn = dropout(attn, options.dropout_p, true);
  return matmul(attn, a.v);
}

Tensor scaled_dot_product_attention_weights(const Tensor& q_in, const Tensor& k_in, const AttentionOptions& options) {
  const CheckedAttention a = check_attention("scaled_dot_product_attention_weights", q_in, k_in, nullptr, options);
  if (options.attn_mask.defined()) return masked_attention_probs(a.q, a.k, options.attn_mask, a.scale);
  return attn_softmax(matmul(a.q, transpose(a.k, -2, -1)), a.scale, options.is_causal);
}

}  // namespace weft
