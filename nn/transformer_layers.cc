// PyTorch's encoder-decoder transformer: nn.TransformerEncoderLayer,
// nn.TransformerDecoderLayer, nn.TransformerEncoder / Decoder and nn.Transformer,
// with their parameter names, defaults and masks (nn/transformer.h).
//
// Contract: the same computation as PyTorch's modules in training mode (they
// have no separate inference fast path here): post-norm x = norm(x + block(x)),
// or pre-norm x = x + block(norm(x)) with norm_first; attention through
// MultiheadAttention::forward without weights; masks are passed through to it.
#include <string>

#include "core/nn_ops.h"
#include "nn/init.h"
#include "nn/transformer.h"

namespace weft::nn {

namespace {

void check_layer_args(const char* op, int64_t d_model, int64_t nhead, const TransformerLayerOptions& o) {
  WEFT_CHECK(d_model > 0 && nhead > 0 && d_model % nhead == 0, op, ": d_model ", d_model,
             " must be a positive multiple of nhead ", nhead);
  WEFT_CHECK(o.dim_feedforward > 0, op, ": dim_feedforward must be positive, got ", o.dim_feedforward);
}

MultiheadAttentionOptions attention_options(const TransformerLayerOptions& o) {
  return {.dropout = o.dropout, .bias = o.bias, .batch_first = o.batch_first};
}

std::shared_ptr<LayerNorm> layer_norm_of(int64_t d_model, const TransformerLayerOptions& o) {
  return std::make_shared<LayerNorm>(Shape{d_model}, o.layer_norm_eps, true, o.bias);
}

Tensor activate(const Tensor& x, TransformerActivation a) {
  return a == TransformerActivation::GELU ? gelu(x) : relu(x);
}

// linear2(dropout(activation(linear1(x)))), then the block's dropout.
Tensor feed_forward(const Tensor& x, Linear& linear1, Dropout& dropout, Linear& linear2, Dropout& after,
                    TransformerActivation a) {
  return after(linear2(dropout(activate(linear1(x), a))));
}

// attn(x, kv, kv) without weights, then the block's dropout.
Tensor attend(MultiheadAttention& attn, const Tensor& x, const Tensor& kv, const Tensor& mask,
              const Tensor& key_padding_mask, bool is_causal, Dropout& after) {
  const AttentionMasks m{
      .key_padding_mask = key_padding_mask, .attn_mask = mask, .need_weights = false, .is_causal = is_causal};
  return after(attn.forward(x, kv, kv, m).output);
}

void check_two(const char* op, const Tensors& in, const char* first, const char* second) {
  WEFT_CHECK(in.size() == 2, op, ": forward_multi takes {", first, ", ", second, "}, got ", in.size(), " tensors");
}

// The layout's batch size and feature count of x: (T, N, E) or (N, T, E).
void check_sequence(const char* op, const char* what, const Tensor& x, int64_t d_model, bool batch_first) {
  WEFT_CHECK(x.defined() && (x.dim() == 3 || x.dim() == 2) && x.size(-1) == d_model, op, ": expected ", what, " ",
             batch_first ? "(N, T, " : "(T, N, ", d_model, ") or unbatched (T, ", d_model, "), got ",
             x.defined() ? shape_str(x.sizes()) : std::string("an undefined tensor"));
}

}  // namespace

// ---- encoder layer ----

TransformerEncoderLayer::TransformerEncoderLayer(int64_t d, int64_t h, TransformerLayerOptions o)
    : Module("TransformerEncoderLayer"), d_model(d), nhead(h), options(o) {
  check_layer_args("TransformerEncoderLayer", d, h, o);
  self_attn = register_module("self_attn", std::make_shared<MultiheadAttention>(d, h, attention_options(o)));
  linear1 = register_module("linear1", std::make_shared<Linear>(d, o.dim_feedforward, o.bias));
  dropout = register_module("dropout", std::make_shared<Dropout>(o.dropout));
  linear2 = register_module("linear2", std::make_shared<Linear>(o.dim_feedforward, d, o.bias));
  norm1 = register_module("norm1", layer_norm_of(d, o));
  norm2 = register_module("norm2", layer_norm_of(d, o));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(o.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(o.dropout));
}

Tensor TransformerEncoderLayer::forward(const Tensor& src) { return forward(src, EncoderMasks{}); }

Tensor TransformerEncoderLayer::forward(const Tensor& src, const EncoderMasks& m) {
  check_sequence("TransformerEncoderLayer", "src", src, d_model, options.batch_first);
  auto sa = [&](const Tensor& x) {
    return attend(*self_attn, x, x, m.mask, m.key_padding_mask, m.is_causal, *dropout1);
  };
  auto ff = [&](const Tensor& x) {
    return feed_forward(x, *linear1, *dropout, *linear2, *dropout2, options.activation);
  };
  Tensor x = src;
  if (options.norm_first) {
    x = x + sa((*norm1)(x));
    return x + ff((*norm2)(x));
  }
  x = (*norm1)(x + sa(x));
  return (*norm2)(x + ff(x));
}

// ---- decoder layer ----

TransformerDecoderLayer::TransformerDecoderLayer(int64_t d, int64_t h, TransformerLayerOptions o)
    : Module("TransformerDecoderLayer"), d_model(d), nhead(h), options(o) {
  check_layer_args("TransformerDecoderLayer", d, h, o);
  self_attn = register_module("self_attn", std::make_shared<MultiheadAttention>(d, h, attention_options(o)));
  multihead_attn = register_module("multihead_attn", std::make_shared<MultiheadAttention>(d, h, attention_options(o)));
  linear1 = register_module("linear1", std::make_shared<Linear>(d, o.dim_feedforward, o.bias));
  dropout = register_module("dropout", std::make_shared<Dropout>(o.dropout));
  linear2 = register_module("linear2", std::make_shared<Linear>(o.dim_feedforward, d, o.bias));
  norm1 = register_module("norm1", layer_norm_of(d, o));
  norm2 = register_module("norm2", layer_norm_of(d, o));
  norm3 = register_module("norm3", layer_norm_of(d, o));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(o.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(o.dropout));
  dropout3 = register_module("dropout3", std::make_shared<Dropout>(o.dropout));
}

Tensor TransformerDecoderLayer::forward(const Tensor& tgt, const Tensor& memory, const DecoderMasks& m) {
  check_sequence("TransformerDecoderLayer", "tgt", tgt, d_model, options.batch_first);
  check_sequence("TransformerDecoderLayer", "memory", memory, d_model, options.batch_first);
  auto sa = [&](const Tensor& x) {
    return attend(*self_attn, x, x, m.tgt_mask, m.tgt_key_padding_mask, m.tgt_is_causal, *dropout1);
  };
  auto mha = [&](const Tensor& x) {
    return attend(*multihead_attn, x, memory, m.memory_mask, m.memory_key_padding_mask, m.memory_is_causal, *dropout2);
  };
  auto ff = [&](const Tensor& x) {
    return feed_forward(x, *linear1, *dropout, *linear2, *dropout3, options.activation);
  };
  Tensor x = tgt;
  if (options.norm_first) {
    x = x + sa((*norm1)(x));
    x = x + mha((*norm2)(x));
    return x + ff((*norm3)(x));
  }
  x = (*norm1)(x + sa(x));
  x = (*norm2)(x + mha(x));
  return (*norm3)(x + ff(x));
}

Tensors TransformerDecoderLayer::forward_multi(const Tensors& in) {
  check_two("TransformerDecoderLayer", in, "tgt", "memory");
  return {forward(in[0], in[1])};
}

// ---- stacks ----

namespace {

// n fresh layers with `proto`'s options and parameter values, registered as "layers".
template <typename Layer>
std::shared_ptr<ModuleList> copies_of(Module& owner, const Layer& proto, int64_t n, const char* op) {
  WEFT_CHECK(n >= 1, op, ": num_layers must be at least 1, got ", n);
  auto list = owner.register_module("layers", std::make_shared<ModuleList>());
  const StateDict state = proto.state_dict();
  for (int64_t i = 0; i < n; ++i) {
    auto layer = std::make_shared<Layer>(proto.d_model, proto.nhead, proto.options);
    layer->load_state_dict(state);
    layer->train(proto.is_training());
    list->push_back(layer);
  }
  return list;
}

}  // namespace

TransformerEncoder::TransformerEncoder(const TransformerEncoderLayer& layer, int64_t num_layers,
                                       std::shared_ptr<LayerNorm> final_norm)
    : Module("TransformerEncoder") {
  layers = copies_of(*this, layer, num_layers, "TransformerEncoder");
  if (final_norm) norm = register_module("norm", std::move(final_norm));
}

Tensor TransformerEncoder::forward(const Tensor& src) { return forward(src, EncoderMasks{}); }

Tensor TransformerEncoder::forward(const Tensor& src, const EncoderMasks& masks) {
  Tensor x = src;
  for (const auto& layer : *layers) x = static_cast<TransformerEncoderLayer&>(*layer).forward(x, masks);
  return norm ? (*norm)(x) : x;
}

TransformerDecoder::TransformerDecoder(const TransformerDecoderLayer& layer, int64_t num_layers,
                                       std::shared_ptr<LayerNorm> final_norm)
    : Module("TransformerDecoder") {
  layers = copies_of(*this, layer, num_layers, "TransformerDecoder");
  if (final_norm) norm = register_module("norm", std::move(final_norm));
}

Tensor TransformerDecoder::forward(const Tensor& tgt, const Tensor& memory, const DecoderMasks& masks) {
  Tensor x = tgt;
  for (const auto& layer : *layers) x = static_cast<TransformerDecoderLayer&>(*layer).forward(x, memory, masks);
  return norm ? (*norm)(x) : x;
}

Tensors TransformerDecoder::forward_multi(const Tensors& in) {
  check_two("TransformerDecoder", in, "tgt", "memory");
  return {forward(in[0], in[1])};
}

// ---- the whole model ----

Transformer::Transformer(TransformerOptions o) : Module("Transformer"), options(o) {
  const TransformerLayerOptions& lo = o.layer;
  encoder = register_module("encoder",
                            std::make_shared<TransformerEncoder>(TransformerEncoderLayer(o.d_model, o.nhead, lo),
                                                                 o.num_encoder_layers, layer_norm_of(o.d_model, lo)));
  decoder = register_module("decoder",
                            std::make_shared<TransformerDecoder>(TransformerDecoderLayer(o.d_model, o.nhead, lo),
                                                                 o.num_decoder_layers, layer_norm_of(o.d_model, lo)));
  for (Tensor& p : parameters())  // PyTorch's _reset_parameters
    if (p.dim() > 1) init::xavier_uniform_(p);
}

Tensor Transformer::forward(const Tensor& src, const Tensor& tgt, const TransformerMasks& m) {
  const char* op = "Transformer";
  const bool bf = options.layer.batch_first;
  check_sequence(op, "src", src, options.d_model, bf);
  check_sequence(op, "tgt", tgt, options.d_model, bf);
  const int64_t batch_dim = bf ? 0 : 1;
  WEFT_CHECK(src.dim() == tgt.dim() && (src.dim() == 2 || src.size(batch_dim) == tgt.size(batch_dim)), op,
             ": src and tgt must have the same batch size, got ", shape_str(src.sizes()), " and ",
             shape_str(tgt.sizes()));
  const Tensor memory = encoder->forward(src, EncoderMasks{m.src_mask, m.src_key_padding_mask, m.src_is_causal});
  return decoder->forward(tgt, memory,
                          DecoderMasks{m.tgt_mask, m.memory_mask, m.tgt_key_padding_mask, m.memory_key_padding_mask,
                                       m.tgt_is_causal, m.memory_is_causal});
}

Tensors Transformer::forward_multi(const Tensors& in) {
  check_two("Transformer", in, "src", "tgt");
  return {forward(in[0], in[1])};
}

}  // namespace weft::nn
