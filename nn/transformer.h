// Attention and transformers: nn::MultiheadAttention with PyTorch's masks and
// weights, PyTorch's encoder-decoder Transformer and its layers, and the
// pre-norm TransformerBlock of GPT-2-style models.
#pragma once

#include <memory>
#include <string>

#include "nn/container.h"
#include "nn/layers.h"

namespace weft::nn {

// Options of the PyTorch-shaped MultiheadAttention constructor, with PyTorch's defaults.
struct MultiheadAttentionOptions {
  double dropout = 0.0;      // on the attention weights, in training
  bool bias = true;          // in_proj_bias and out_proj.bias
  bool batch_first = false;  // (N, L, E) rather than PyTorch's default (L, N, E)
  bool causal = false;       // weft's: forward(x) attends to keys j <= i only
  // The key's and value's features (0: embed_dim). When either differs from
  // embed_dim the in-projection is three weights, q_proj_weight (E, E),
  // k_proj_weight (E, kdim) and v_proj_weight (E, vdim), as PyTorch's.
  int64_t kdim = 0, vdim = 0;
  bool add_bias_kv = false;    // learned bias_k, bias_v (1, 1, E) appended to the projected keys and values
  bool add_zero_attn = false;  // a zero key and value appended to each head's keys and values
};

// The masks and switches of MultiheadAttention::forward(query, key, value, ...),
// as PyTorch's. Boolean masks are true where attention is NOT allowed (the
// opposite of scaled_dot_product_attention's); floating masks are added to the
// scaled scores. A query row left with no key gets zero weights and a zero
// attention output (PyTorch gives NaN there when need_weights is set).
struct AttentionMasks {
  Tensor key_padding_mask;  // (N, S), or (S) unbatched: true ignores that key
  Tensor attn_mask;         // (L, S) or (N * num_heads, L, S)
  bool need_weights = true;
  bool average_attn_weights = true;  // weights (N, L, S) averaged over heads, else (N, H, L, S)
  // A causal mask (query i sees keys j <= i). With attn_mask as well it is only
  // a hint that attn_mask is causal, as in PyTorch, and attn_mask is used.
  bool is_causal = false;
};

struct AttentionOutput {
  Tensor output;   // the query's layout: (L, N, E), (N, L, E) or unbatched (L, E)
  Tensor weights;  // with need_weights: (N, L, S) or (N, H, L, S), unbatched without N; undefined otherwise
};

// Multi-head attention: PyTorch's nn.MultiheadAttention.
// Two constructors:
//  - the PyTorch form, MultiheadAttention(E, H, MultiheadAttentionOptions): PyTorch's
//    defaults (sequence-first, not causal), parameter names (in_proj_weight (3E, E),
//    in_proj_bias (3E), out_proj) and initialisation (Xavier-uniform in_proj_weight,
//    zero biases; kdim, vdim, add_bias_kv and add_zero_attn as PyTorch's, with
//    q_proj_weight, k_proj_weight, v_proj_weight, bias_k and bias_v), so a
//    PyTorch state dict loads as it is;
//  - the earlier GPT-2 form, MultiheadAttention(E, H, causal, dropout, bias):
//    batch-first, a Linear `qkv` (GPT-2's c_attn) and `proj` (c_proj) with
//    Linear's initialisation, and dropout on the output as well (GPT-2's
//    residual dropout). qkv holds the in-projection; in_proj_weight and
//    in_proj_bias stay undefined.
// proj and out_proj are the same Linear in both forms; qkv is null in the PyTorch form.
// forward(x) is self-attention through one fused projection and the fused
// attention kernel; forward(query, key, value, masks) is PyTorch's full call.
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, MultiheadAttentionOptions options = {});
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, bool causal, double dropout = 0.0, bool bias = true);
  Tensor forward(const Tensor& x) override;
  AttentionOutput forward(const Tensor& query, const Tensor& key, const Tensor& value,
                          const AttentionMasks& masks = {});
  // {x} -> {forward(x)}; {query, key, value} -> {output} (no weights, no masks).
  Tensors forward_multi(const Tensors& inputs) override;
  std::string extra_repr() const override;

  Tensor in_proj_weight, in_proj_bias;  // (3E, E), (3E) or undefined; undefined in the GPT-2 form
  // With kdim or vdim other than E (in_proj_weight then undefined): (E, E), (E, kdim), (E, vdim).
  Tensor q_proj_weight, k_proj_weight, v_proj_weight;
  Tensor bias_k, bias_v;             // (1, 1, E) with add_bias_kv
  std::shared_ptr<Linear> out_proj;  // (E) -> (E)
  std::shared_ptr<Linear> qkv;       // the GPT-2 form's (E) -> (3E); null in the PyTorch form
  std::shared_ptr<Linear> proj;      // = out_proj
  int64_t embed_dim, num_heads, kdim, vdim;
  bool add_zero_attn = false;
  bool causal;
  double dropout_p;
  bool batch_first;
  bool output_dropout;  // the GPT-2 form's dropout after proj

 private:
  // x (N, T, E | kdim | vdim) -> (N, T, count * E): rows [first E, (first + count) E) of the in-projection.
  Tensor in_projection(const Tensor& x, int64_t first, int64_t count);
  // Whether forward(x) may take the fused self-attention path.
  bool plain_self_attention() const { return !q_proj_weight.defined() && !bias_k.defined() && !add_zero_attn; }
};

// ---- PyTorch's encoder-decoder transformer (nn.Transformer and its layers) ----

enum class TransformerActivation { ReLU, GELU };

// A layer's options, PyTorch's defaults.
struct TransformerLayerOptions {
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  TransformerActivation activation = TransformerActivation::ReLU;
  double layer_norm_eps = 1e-5;
  bool batch_first = false;  // (N, S, E) rather than (S, N, E)
  bool norm_first = false;   // pre-norm: x + sa(norm1(x)); else post-norm: norm1(x + sa(x))
  bool bias = true;          // in the linear layers, attention and layer norms
};

// src_mask (S, S) or (N * nhead, S, S); src_key_padding_mask (N, S): as AttentionMasks.
struct EncoderMasks {
  Tensor mask, key_padding_mask;
  bool is_causal = false;
};
struct DecoderMasks {
  Tensor tgt_mask, memory_mask;                          // (T, T), (T, S) or per head
  Tensor tgt_key_padding_mask, memory_key_padding_mask;  // (N, T), (N, S)
  bool tgt_is_causal = false, memory_is_causal = false;
};

// Self-attention and a feed-forward block, each with a residual connection and
// a layer norm. (S, N, E) -> (S, N, E), or (N, S, E) with batch_first.
class TransformerEncoderLayer : public Module {
 public:
  TransformerEncoderLayer(int64_t d_model, int64_t nhead, TransformerLayerOptions options = {});
  Tensor forward(const Tensor& src) override;
  Tensor forward(const Tensor& src, const EncoderMasks& masks);
  std::shared_ptr<MultiheadAttention> self_attn;
  std::shared_ptr<Linear> linear1, linear2;              // (E) -> (F) -> (E)
  std::shared_ptr<Dropout> dropout, dropout1, dropout2;  // inside the feed-forward block; after each block
  std::shared_ptr<LayerNorm> norm1, norm2;
  int64_t d_model, nhead;
  TransformerLayerOptions options;
};

// Self-attention over tgt, attention to memory, a feed-forward block.
// {tgt (T, N, E), memory (S, N, E)} -> (T, N, E), or batch-first.
class TransformerDecoderLayer : public Module {
 public:
  TransformerDecoderLayer(int64_t d_model, int64_t nhead, TransformerLayerOptions options = {});
  Tensor forward(const Tensor& tgt, const Tensor& memory, const DecoderMasks& masks = {});
  Tensors forward_multi(const Tensors& inputs) override;  // {tgt, memory} -> {out}
  std::shared_ptr<MultiheadAttention> self_attn, multihead_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2, dropout3;
  std::shared_ptr<LayerNorm> norm1, norm2, norm3;
  int64_t d_model, nhead;
  TransformerLayerOptions options;
};

// num_layers copies of `layer` (its options and its current parameter values,
// as PyTorch's deep copies), then `norm` when given. `layer` itself is not
// registered. Parameters: layers.<i>.*, norm.*.
class TransformerEncoder : public Module {
 public:
  TransformerEncoder(const TransformerEncoderLayer& layer, int64_t num_layers,
                     std::shared_ptr<LayerNorm> norm = nullptr);
  Tensor forward(const Tensor& src) override;
  Tensor forward(const Tensor& src, const EncoderMasks& masks);
  std::shared_ptr<ModuleList> layers;
  std::shared_ptr<LayerNorm> norm;  // null when none
};

class TransformerDecoder : public Module {
 public:
  TransformerDecoder(const TransformerDecoderLayer& layer, int64_t num_layers,
                     std::shared_ptr<LayerNorm> norm = nullptr);
  Tensor forward(const Tensor& tgt, const Tensor& memory, const DecoderMasks& masks = {});
  Tensors forward_multi(const Tensors& inputs) override;  // {tgt, memory} -> {out}
  std::shared_ptr<ModuleList> layers;
  std::shared_ptr<LayerNorm> norm;
};

struct TransformerOptions {
  int64_t d_model = 512;
  int64_t nhead = 8;
  int64_t num_encoder_layers = 6;
  int64_t num_decoder_layers = 6;
  TransformerLayerOptions layer = {};
};

struct TransformerMasks {
  Tensor src_mask, tgt_mask, memory_mask;
  Tensor src_key_padding_mask, tgt_key_padding_mask, memory_key_padding_mask;
  bool src_is_causal = false, tgt_is_causal = false, memory_is_causal = false;
};

// PyTorch's nn.Transformer: an encoder and a decoder, each with a final layer
// norm; every parameter of 2 or more dims Xavier-uniform. {src (S, N, E),
// tgt (T, N, E)} -> (T, N, E), or batch-first.
class Transformer : public Module {
 public:
  explicit Transformer(TransformerOptions options = {});
  Tensor forward(const Tensor& src, const Tensor& tgt, const TransformerMasks& masks = {});
  Tensors forward_multi(const Tensors& inputs) override;  // {src, tgt} -> {out}
  std::shared_ptr<TransformerEncoder> encoder;
  std::shared_ptr<TransformerDecoder> decoder;
  TransformerOptions options;
};

// (sz, sz) float32: 0 on and below the diagonal, -inf above it (a causal tgt_mask).
Tensor generate_square_subsequent_mask(int64_t sz, const TensorOptions& options = {});

// x + attn(ln1(x)); then x + mlp(ln2(x)) with mlp = Linear(C, 4C), GELU(tanh), Linear(4C, C), Dropout.
// The MLP runs as one fused op, mlp_gelu_tanh (core/nn_ops.h: the GELU inside the
// GEMMs on the CPU), while mlp still holds those four modules with no forward
// hooks on it or them; otherwise module by module.
class TransformerBlock : public Module {
 public:
  TransformerBlock(int64_t embed_dim, int64_t num_heads, double dropout = 0.0, int64_t mlp_ratio = 4);
  Tensor forward(const Tensor& x) override;  // (B, T, C) -> (B, T, C)
  Tensor mlp_forward(const Tensor& x);       // mlp(x), fused where it can be
  std::shared_ptr<LayerNorm> ln1, ln2;
  std::shared_ptr<MultiheadAttention> attn;
  std::shared_ptr<Sequential> mlp;
};

}  // namespace weft::nn
