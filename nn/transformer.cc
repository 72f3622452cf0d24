#include "nn/transformer.h"

#include <algorithm>

#include "core/nn_ops.h"

namespace weft::nn {

MultiheadAttention::MultiheadAttention(int64_t c, int64_t h, bool causal, double dropout, bool bias)
    : Module("MultiheadAttention"), embed_dim(c), num_heads(h), causal(causal), dropout_p(dropout) {
  WEFT_CHECK(h > 0 && c % h == 0, "MultiheadAttention: embed_dim ", c, " must be divisible by num_heads ", h);
  qkv = register_module("qkv", std::make_shared<Linear>(c, 3 * c, bias));
  proj = register_module("proj", std::make_shared<Linear>(c, c, bias));
}

Tensor MultiheadAttention::forward(const Tensor& x) {
  WEFT_CHECK(x.dim() == 3 && x.size(2) == embed_dim, "MultiheadAttention: expected input (B, T, ", embed_dim, "), got ",
             shape_str(x.sizes()));
  const int64_t B = x.size(0), T = x.size(1), C = embed_dim, H = num_heads, D = C / H;
  Tensor qkv_out = (*qkv)(x);  // (B, T, 3C)
  std::vector<Tensor> parts = split(qkv_out, C, 2);
  auto heads = [&](const Tensor& t) { return t.reshape({B, T, H, D}).transpose(1, 2); };  // (B, H, T, D)
  Tensor y = scaled_dot_product_attention(heads(parts[0]), heads(parts[1]), heads(parts[2]), causal, dropout_p,
                                          is_training());  // (B, H, T, D)
  y = y.transpose(1, 2).reshape({B, T, C});
  return dropout((*proj)(y), dropout_p, is_training());
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
