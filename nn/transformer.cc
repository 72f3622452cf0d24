#include "nn/transformer.h"

#include <algorithm>
#include <limits>
#include <string>

#include "core/autograd_meta.h"
#include "core/nn_ops.h"
#include "nn/init.h"

namespace weft::nn {

namespace {

// x in the module's layout -> (N, T, E); unbatched (T, E) -> (1, T, E).
Tensor to_batch_first(const Tensor& x, bool batched, bool batch_first) {
  if (!batched) return x.unsqueeze(0);
  return batch_first ? x : x.transpose(0, 1);
}

Tensor from_batch_first(const Tensor& y, bool batched, bool batch_first) {
  if (!batched) return y.squeeze(0);
  return batch_first ? y : y.transpose(0, 1);
}

// A boolean mask (true: not allowed) or a floating one, as an additive mask of dtype dt.
Tensor additive_mask(const Tensor& m, DType dt) {
  if (m.dtype() != DType::Bool) return m.to(dt);
  return masked_fill(zeros(m.sizes(), TensorOptions{dt, m.device()}), m, -std::numeric_limits<double>::infinity());
}

// (L, S) additive: 0 where query i may see key j <= i, -inf above the diagonal.
Tensor causal_mask(int64_t L, int64_t S, DType dt, Device device) {
  return additive_mask(triu(ones({L, S}, TensorOptions{DType::Bool, device}), 1), dt);
}

}  // namespace

Tensor generate_square_subsequent_mask(int64_t sz, const TensorOptions& options) {
  WEFT_CHECK(sz >= 0, "generate_square_subsequent_mask: size must be non-negative, got ", sz);
  return causal_mask(sz, sz, is_floating(options.dtype) ? options.dtype : DType::Float32, options.device);
}

MultiheadAttention::MultiheadAttention(int64_t c, int64_t h, MultiheadAttentionOptions o)
    : Module("MultiheadAttention"),
      embed_dim(c),
      num_heads(h),
      kdim(o.kdim > 0 ? o.kdim : c),
      vdim(o.vdim > 0 ? o.vdim : c),
      add_zero_attn(o.add_zero_attn),
      causal(o.causal),
      dropout_p(o.dropout),
      batch_first(o.batch_first),
      output_dropout(false) {
  WEFT_CHECK(h > 0 && c > 0 && c % h == 0, "MultiheadAttention: embed_dim ", c, " must be divisible by num_heads ", h);
  WEFT_CHECK(o.dropout >= 0.0 && o.dropout <= 1.0, "MultiheadAttention: dropout must be in [0, 1], got ", o.dropout);
  WEFT_CHECK(o.kdim >= 0 && o.vdim >= 0, "MultiheadAttention: kdim and vdim must be positive (0: embed_dim), got ",
             o.kdim, " and ", o.vdim);
  if (kdim == c && vdim == c) {
    in_proj_weight = register_parameter("in_proj_weight", empty({3 * c, c}));
    init::xavier_uniform_(in_proj_weight);
  } else {
    q_proj_weight = register_parameter("q_proj_weight", empty({c, c}));
    k_proj_weight = register_parameter("k_proj_weight", empty({c, kdim}));
    v_proj_weight = register_parameter("v_proj_weight", empty({c, vdim}));
    for (Tensor* w : {&q_proj_weight, &k_proj_weight, &v_proj_weight}) init::xavier_uniform_(*w);
  }
  if (o.bias) in_proj_bias = register_parameter("in_proj_bias", zeros({3 * c}));
  if (o.add_bias_kv) {
    bias_k = register_parameter("bias_k", empty({1, 1, c}));
    bias_v = register_parameter("bias_v", empty({1, 1, c}));
    init::xavier_normal_(bias_k);
    init::xavier_normal_(bias_v);
  }
  out_proj = proj = register_module("out_proj", std::make_shared<Linear>(c, c, o.bias));
  if (o.bias) {
    NoGradGuard no_grad;
    out_proj->bias.zero_();
  }
}

MultiheadAttention::MultiheadAttention(int64_t c, int64_t h, bool causal, double dropout, bool bias)
    : Module("MultiheadAttention"),
      embed_dim(c),
      num_heads(h),
      kdim(c),
      vdim(c),
      causal(causal),
      dropout_p(dropout),
      batch_first(true),
      output_dropout(true) {
  WEFT_CHECK(h > 0 && c > 0 && c % h == 0, "MultiheadAttention: embed_dim ", c, " must be divisible by num_heads ", h);
  WEFT_CHECK(dropout >= 0.0 && dropout <= 1.0, "MultiheadAttention: dropout must be in [0, 1], got ", dropout);
  qkv = register_module("qkv", std::make_shared<Linear>(c, 3 * c, bias));
  out_proj = proj = register_module("proj", std::make_shared<Linear>(c, c, bias));
}

std::string MultiheadAttention::extra_repr() const {
  return "embed_dim=" + std::to_string(embed_dim) + ", num_heads=" + std::to_string(num_heads) +
         (kdim != embed_dim ? ", kdim=" + std::to_string(kdim) : "") +
         (vdim != embed_dim ? ", vdim=" + std::to_string(vdim) : "") + ", dropout=" + std::to_string(dropout_p) +
         ", batch_first=" + (batch_first ? "true" : "false") + (causal ? ", causal=true" : "") +
         (bias_k.defined() ? ", add_bias_kv=true" : "") + (add_zero_attn ? ", add_zero_attn=true" : "");
}

Tensor MultiheadAttention::in_projection(const Tensor& x, int64_t first, int64_t count) {
  if (first == 0 && count == 3 && qkv) return (*qkv)(x);
  const int64_t E = embed_dim;
  if (q_proj_weight.defined()) {  // separate weights: one part at a time
    WEFT_INTERNAL_ASSERT(count == 1, "MultiheadAttention: separate projection weights project one part at a time");
    const Tensor& w = first == 0 ? q_proj_weight : first == 1 ? k_proj_weight : v_proj_weight;
    return linear(x, w, in_proj_bias.defined() ? in_proj_bias.narrow(0, first * E, E) : Tensor());
  }
  const Tensor& w = qkv ? qkv->weight : in_proj_weight;  // (3E, E)
  const Tensor& b = qkv ? qkv->bias : in_proj_bias;      // (3E)
  return linear(x, w.narrow(0, first * E, count * E), b.defined() ? b.narrow(0, first * E, count * E) : Tensor());
}

Tensor MultiheadAttention::forward(const Tensor& x_in) {
  WEFT_CHECK(x_in.dim() == 3 && x_in.size(2) == embed_dim, "MultiheadAttention: expected input ",
             batch_first ? "(N, T, " : "(T, N, ", embed_dim, "), got ", shape_str(x_in.sizes()));
  if (!plain_self_attention())
    return forward(x_in, x_in, x_in, AttentionMasks{.need_weights = false, .is_causal = causal}).output;
  const Tensor x = to_batch_first(x_in, true, batch_first);
  const int64_t B = x.size(0), T = x.size(1), C = embed_dim, H = num_heads, D = C / H;
  std::vector<Tensor> parts = split(in_projection(x, 0, 3), C, 2);                        // (B, T, 3C) -> 3 x (B, T, C)
  auto heads = [&](const Tensor& t) { return t.reshape({B, T, H, D}).transpose(1, 2); };  // (B, H, T, D)
  Tensor y = scaled_dot_product_attention(heads(parts[0]), heads(parts[1]), heads(parts[2]), causal, dropout_p,
                                          is_training());  // (B, H, T, D)
  y = (*proj)(y.transpose(1, 2).reshape({B, T, C}));
  if (output_dropout) y = dropout(y, dropout_p, is_training());
  return from_batch_first(y, true, batch_first);
}

AttentionOutput MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                            const AttentionMasks& m) {
  const char* op = "MultiheadAttention";
  WEFT_CHECK(query.defined() && key.defined() && value.defined(), op, ": undefined query, key or value");
  const bool batched = query.dim() == 3;
  WEFT_CHECK((query.dim() == 3 || query.dim() == 2) && key.dim() == query.dim() && value.dim() == query.dim(), op,
             ": expected query, key and value all ", batch_first ? "(N, L, E)" : "(L, N, E)",
             " or all unbatched (L, E), got ", shape_str(query.sizes()), ", ", shape_str(key.sizes()), ", ",
             shape_str(value.sizes()));
  const Tensor q_in = to_batch_first(query, batched, batch_first);  // (N, L, E)
  const Tensor k_in = to_batch_first(key, batched, batch_first);    // (N, S, E)
  const Tensor v_in = to_batch_first(value, batched, batch_first);  // (N, S, E)
  const int64_t N = q_in.size(0), L = q_in.size(1), S = k_in.size(1), E = embed_dim, H = num_heads, D = E / H;
  WEFT_CHECK(q_in.size(2) == E && k_in.size(2) == kdim && v_in.size(2) == vdim, op,
             ": query, key and value must end in embed_dim, kdim and vdim (", E, ", ", kdim, ", ", vdim, "), got ",
             shape_str(query.sizes()), ", ", shape_str(key.sizes()), ", ", shape_str(value.sizes()));
  WEFT_CHECK(k_in.size(0) == N && v_in.size(0) == N && v_in.size(1) == S, op,
             ": key and value must have query's batch size and the same length, got query ", shape_str(query.sizes()),
             ", key ", shape_str(key.sizes()), ", value ", shape_str(value.sizes()));

  // Projections: one GEMM for self-attention, one for key and value when they are the same tensor.
  Tensor q, k, v;  // (N, L|S, E)
  if (q_proj_weight.defined()) {
    q = in_projection(q_in, 0, 1);
    k = in_projection(k_in, 1, 1);
    v = in_projection(v_in, 2, 1);
  } else if (query.is_same(key) && key.is_same(value)) {
    std::vector<Tensor> p = split(in_projection(q_in, 0, 3), E, 2);
    q = p[0], k = p[1], v = p[2];
  } else {
    q = in_projection(q_in, 0, 1);
    if (key.is_same(value)) {
      std::vector<Tensor> p = split(in_projection(k_in, 1, 2), E, 2);
      k = p[0], v = p[1];
    } else {
      k = in_projection(k_in, 1, 1);
      v = in_projection(v_in, 2, 1);
    }
  }
  int64_t Sk = S;          // the keys attended to: S, then bias_k's and the zero key
  if (bias_k.defined()) {  // (N, S, E) -> (N, S + 1, E)
    k = cat({k, bias_k.to(k.dtype()).expand({N, 1, E})}, 1);
    v = cat({v, bias_v.to(v.dtype()).expand({N, 1, E})}, 1);
    ++Sk;
  }
  auto heads = [&](const Tensor& t, int64_t T) { return t.reshape({N, T, H, D}).transpose(1, 2); };  // (N, H, T, D)

  // One additive (N | 1, H | 1, L, S) mask from the two.
  const DType dt = q.dtype();
  Tensor mask;
  if (const Tensor& a = m.attn_mask; a.defined()) {
    const bool two_d = a.dim() == 2 && a.size(0) == L && a.size(1) == S;
    const bool per_head = a.dim() == 3 && a.size(0) == N * H && a.size(1) == L && a.size(2) == S;
    WEFT_CHECK(two_d || per_head, op, ": attn_mask of shape ", shape_str(a.sizes()), " should be (L, S) = (", L, ", ",
               S, ") or (N * num_heads, L, S) = (", N * H, ", ", L, ", ", S, ")");
    WEFT_CHECK(a.dtype() == DType::Bool || is_floating(a.dtype()), op,
               ": attn_mask must be bool (true: not allowed) or floating (added), got ", a.dtype());
    mask = additive_mask(a, dt).reshape(two_d ? Shape{1, 1, L, S} : Shape{N, H, L, S});
  }
  if (const Tensor& kp = m.key_padding_mask; kp.defined()) {
    const bool ok = batched ? kp.dim() == 2 && kp.size(0) == N && kp.size(1) == S : kp.dim() == 1 && kp.size(0) == S;
    WEFT_CHECK(ok, op, ": key_padding_mask of shape ", shape_str(kp.sizes()), " should be ",
               batched ? "(N, S) = (" + std::to_string(N) + ", " : std::string("(S) = ("), S, ")");
    WEFT_CHECK(kp.dtype() == DType::Bool || is_floating(kp.dtype()), op,
               ": key_padding_mask must be bool (true: ignore the key) or floating (added), got ", kp.dtype());
    Tensor pad = additive_mask(kp, dt).reshape({N, 1, 1, S});
    if (!mask.defined() && m.is_causal)  // the causal mask joins the padding as an explicit mask
      mask = causal_mask(L, S, dt, q.device()).reshape({1, 1, L, S});
    mask = mask.defined() ? add(mask, pad) : pad;
  }
  Tensor kh = heads(k, Sk), vh = heads(v, Sk);
  if (add_zero_attn) {  // (N, H, Sk, D) -> (N, H, Sk + 1, D)
    kh = cat({kh, zeros({N, H, 1, D}, TensorOptions{kh.dtype()}.with_device(kh.device()))}, 2);
    vh = cat({vh, zeros({N, H, 1, D}, TensorOptions{vh.dtype()}.with_device(vh.device()))}, 2);
    ++Sk;
  }
  if (Sk > S) {  // the appended keys are never masked (PyTorch pads its masks with zeros)
    if (!mask.defined() && m.is_causal) mask = causal_mask(L, S, dt, q.device()).reshape({1, 1, L, S});
    if (mask.defined()) {
      Shape pad = mask.sizes();
      pad.back() = Sk - S;
      mask = cat({mask, zeros(pad, TensorOptions{mask.dtype()}.with_device(mask.device()))}, 3);
    }
  }
  AttentionOptions ao{.attn_mask = mask,
                      .dropout_p = dropout_p,
                      .is_causal = m.is_causal && !mask.defined(),
                      .training = is_training()};
  const Tensor qh = heads(q, L);
  AttentionOutput out;
  Tensor y;  // (N, H, L, D)
  if (m.need_weights) {
    Tensor w = dropout(scaled_dot_product_attention_weights(qh, kh, ao), dropout_p, is_training());  // (N, H, L, S)
    y = matmul(w, vh);
    out.weights = m.average_attn_weights ? mean(w, {1}) : w;
    if (!batched) out.weights = out.weights.squeeze(0);
  } else {
    y = scaled_dot_product_attention(qh, kh, vh, ao);
  }
  y = (*out_proj)(y.transpose(1, 2).reshape({N, L, E}));
  if (output_dropout) y = dropout(y, dropout_p, is_training());
  out.output = from_batch_first(y, batched, batch_first);
  return out;
}

Tensors MultiheadAttention::forward_multi(const Tensors& in) {
  WEFT_CHECK(in.size() == 1 || in.size() == 3,
             "MultiheadAttention: forward_multi takes {x} or {query, key, value}, got ", in.size(), " tensors");
  if (in.size() == 1) return {forward(in[0])};
  return {forward(in[0], in[1], in[2], AttentionMasks{.need_weights = false}).output};
}

TransformerBlock::TransformerBlock(int64_t c, int64_t h, double dropout, int64_t ratio) : Module("TransformerBlock") {
  ln1 = register_module("ln1", std::make_shared<LayerNorm>(c));
  attn = register_module("attn", std::make_shared<MultiheadAttention>(c, h, true, dropout));
  ln2 = register_module("ln2", std::make_shared<LayerNorm>(c));
  mlp = register_module(
      "mlp", Sequential::of(std::make_shared<Linear>(c, ratio * c), std::make_shared<GELU>(GeluApproximation::Tanh),
                            std::make_shared<Linear>(ratio * c, c), std::make_shared<Dropout>(dropout)));
}

Tensor TransformerBlock::forward(const Tensor& x) {
  Tensor h = x + (*attn)((*ln1)(x));
  return h + mlp_forward((*ln2)(h));
}

Tensor TransformerBlock::mlp_forward(const Tensor& x) {
  const auto& m = mlp->modules();
  std::shared_ptr<Linear> fc1, fc2;
  std::shared_ptr<GELU> act;
  std::shared_ptr<Dropout> drop;
  if (m.size() == 4) {
    fc1 = std::dynamic_pointer_cast<Linear>(m[0]);
    act = std::dynamic_pointer_cast<GELU>(m[1]);
    fc2 = std::dynamic_pointer_cast<Linear>(m[2]);
    drop = std::dynamic_pointer_cast<Dropout>(m[3]);
  }
  const bool fusable = fc1 && act && fc2 && drop && act->approximate == GeluApproximation::Tanh &&
                       fc1->bias.defined() && fc2->bias.defined() && !mlp->has_forward_hooks() &&
                       std::none_of(m.begin(), m.end(), [](const auto& c) { return c->has_forward_hooks(); });
  if (!fusable) return (*mlp)(x);
  return (*drop)(mlp_gelu_tanh(x, fc1->weight, fc1->bias, fc2->weight, fc2->bias));
}

}  // namespace weft::nn
