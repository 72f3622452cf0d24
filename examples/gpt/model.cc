// The GPT example's model (contract in model.h).
#include "examples/gpt/model.h"

#include <cmath>
#include <sstream>

#include "core/error.h"

namespace weft::examples::gpt {

void check_config(const GptConfig& c) {
  WEFT_CHECK(c.vocab >= 1, "gpt: the vocabulary must be positive, got ", c.vocab);
  WEFT_CHECK(c.context >= 1, "--context must be a positive integer, got ", c.context);
  WEFT_CHECK(c.layers >= 1, "--layers must be a positive integer, got ", c.layers);
  WEFT_CHECK(c.heads >= 1, "--heads must be a positive integer, got ", c.heads);
  WEFT_CHECK(c.dim >= 1 && c.dim % c.heads == 0, "--dim ", c.dim, " must be a positive multiple of --heads ", c.heads);
  WEFT_CHECK(c.dropout >= 0 && c.dropout < 1, "--dropout must be in [0, 1), got ", c.dropout);
}

std::string describe(const GptConfig& c) {
  std::ostringstream os;
  os << c.layers << " layers, " << c.heads << " heads, dim " << c.dim << ", context " << c.context << ", "
     << (c.tied ? "tied" : "untied") << " head, dropout " << c.dropout;
  return os.str();
}

GptEmbedding::GptEmbedding(int64_t vocab, int64_t ctx, int64_t dim, double dropout)
    : Module("GptEmbedding"), context(ctx) {
  tok = register_module("tok", std::make_shared<nn::Embedding>(vocab, dim));
  pos = register_module("pos", std::make_shared<nn::Embedding>(ctx, dim));
  drop = register_module("drop", std::make_shared<nn::Dropout>(dropout));
}

Tensor GptEmbedding::embed(const Tensor& idx, int64_t offset) {
  WEFT_CHECK(idx.dim() == 2 && idx.dtype() == DType::Int64, "GptEmbedding: expected int64 tokens (B, T), got ",
             idx.dtype(), " ", shape_str(idx.sizes()));
  const int64_t T = idx.size(1);
  WEFT_CHECK(offset >= 0 && offset + T <= context, "GptEmbedding: positions ", offset, "..", offset + T - 1,
             " exceed the context of ", context, " tokens");
  Tensor positions = arange(offset, offset + T, 1, {DType::Int64, idx.device()});  // (T)
  return (*drop)(add((*tok)(idx), (*pos)(positions)));                             // (B, T, C)
}

GptHead::GptHead(Tensor w) : Module("GptHead") { weight = register_parameter("weight", std::move(w)); }

std::shared_ptr<nn::Sequential> make_gpt(const GptConfig& c) {
  check_config(c);
  auto m = std::make_shared<nn::Sequential>();
  auto emb = std::make_shared<GptEmbedding>(c.vocab, c.context, c.dim, c.dropout);
  nn::init::normal_(emb->tok->weight, 0.0, 0.02);
  nn::init::normal_(emb->pos->weight, 0.0, 0.01);
  m->push_back(emb);
  const double proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(c.layers));
  for (int64_t i = 0; i < c.layers; ++i) {
    auto block = std::make_shared<nn::TransformerBlock>(c.dim, c.heads, c.dropout);
    for (auto& [name, mod] : block->named_modules()) {
      auto* lin = dynamic_cast<nn::Linear*>(mod.get());
      if (!lin) continue;
      const bool residual = name == "attn.proj" || name == "mlp.2";
      nn::init::normal_(lin->weight, 0.0, residual ? proj_std : 0.02);
      if (lin->bias.defined()) nn::init::zeros_(lin->bias);
    }
    m->push_back(block);
  }
  m->push_back(std::make_shared<nn::LayerNorm>(c.dim));
  Tensor w;
  if (c.tied) {
    w = emb->tok->weight;
  } else {
    w = empty({c.vocab, c.dim});
    nn::init::normal_(w, 0.0, 0.02);
  }
  m->push_back(std::make_shared<GptHead>(w));
  return m;
}

std::vector<std::vector<std::string>> tied_groups(const GptConfig& c) {
  if (!c.tied) return {};
  return {{"0.tok.weight", std::to_string(c.layers + 2) + ".weight"}};
}

int64_t parameter_count(const GptConfig& c) {
  const int64_t C = c.dim;
  const int64_t block = 2 * 2 * C              // ln1, ln2
                        + (C * 3 * C + 3 * C)  // qkv
                        + (C * C + C)          // proj
                        + (C * 4 * C + 4 * C)  // mlp.0
                        + (4 * C * C + C);     // mlp.2
  return c.vocab * C + c.context * C           // embeddings
         + c.layers * block + 2 * C            // blocks, final norm
         + (c.tied ? 0 : c.vocab * C);         // head
}

namespace {
template <class M>
M& child_as(const nn::Sequential& gpt, int64_t index, const char* what) {
  auto* m = dynamic_cast<M*>(gpt[index].get());
  WEFT_CHECK(m != nullptr, "gpt: child ", index, " of the model is not the ", what, " (build it with make_gpt)");
  return *m;
}
}  // namespace

GptEmbedding& embedding_of(const nn::Sequential& gpt) { return child_as<GptEmbedding>(gpt, 0, "embedding"); }
nn::TransformerBlock& block_of(const nn::Sequential& gpt, int64_t i) {
  return child_as<nn::TransformerBlock>(gpt, 1 + i, "transformer block");
}
nn::LayerNorm& final_norm_of(const nn::Sequential& gpt) { return child_as<nn::LayerNorm>(gpt, -2, "final LayerNorm"); }
GptHead& head_of(const nn::Sequential& gpt) { return child_as<GptHead>(gpt, -1, "head"); }

Tensor lm_loss(const Tensor& logits, const Tensor& targets) {
  const int64_t V = logits.size(-1);
  return cross_entropy(logits.reshape({-1, V}), targets.reshape({-1}));  // mean over B * T tokens
}

}  // namespace weft::examples::gpt
