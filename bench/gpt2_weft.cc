// gpt2_weft: a GPT-2-small-shaped training step on a GPU (12 layers, d_model 768,
// 12 heads, context 1024, vocab 50257; learned position embeddings, pre-norm
// nn::TransformerBlock, final LayerNorm, untied lm_head without bias), bfloat16
// autocast for the forward pass, AdamW (lr 3e-4). Synthetic tokens. Prints:
//   params=<N> tokens_per_s=<v> peak_bf16_tflops=<p> mfu=<m>
// MFU = flops_per_token * tokens/s / peak, flops_per_token = 6 N + 12 L d T
// (PaLM's accounting: N = all parameters, plus causal-agnostic attention
// scores/values), peak = bf16 GEMM throughput measured here (8192^3 matmul).
// bench/gpt2_torch.py is the PyTorch peer (same shapes, same formula).
//   gpt2_weft [--device cuda:0] [--batch 8] [--steps 10] [--warmup 3] [--layers 12] [--peak-iters 20]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/autograd_meta.h"
#include "core/nn_ops.h"
#include "core/rng.h"
#include "examples/device_support.h"
#include "examples/flags.h"
#include "nn/nn.h"
#include "nn/transformer.h"
#include "optim/adam.h"

namespace weft {
namespace {

struct Gpt2Config {
  int64_t vocab = 50257, context = 1024, layers = 12, d_model = 768, heads = 12;
};

class Gpt2 : public nn::Module {
 public:
  explicit Gpt2(const Gpt2Config& c) : nn::Module("Gpt2") {
    wte = register_module("wte", std::make_shared<nn::Embedding>(c.vocab, c.d_model));
    wpe = register_module("wpe", std::make_shared<nn::Embedding>(c.context, c.d_model));
    blocks = register_module("h", std::make_shared<nn::Sequential>());
    for (int64_t i = 0; i < c.layers; ++i)
      blocks->push_back(std::make_shared<nn::TransformerBlock>(c.d_model, c.heads));
    ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(c.d_model));
    lm_head = register_module("lm_head", std::make_shared<nn::Linear>(c.d_model, c.vocab, false));
  }
  // idx: (B, T) int64 -> logits (B, T, vocab)
  Tensor forward(const Tensor& idx) override {
    Tensor pos = arange(idx.size(1), {DType::Int64, idx.device()});  // (T)
    Tensor h = add((*wte)(idx), (*wpe)(pos));                        // (B, T, C)
    return (*lm_head)((*ln_f)((*blocks)(h)));
  }
  std::shared_ptr<nn::Embedding> wte, wpe;
  std::shared_ptr<nn::Sequential> blocks;
  std::shared_ptr<nn::LayerNorm> ln_f;
  std::shared_ptr<nn::Linear> lm_head;
};

// Tokens in [0, vocab) from a fixed LCG, on the CPU.
Tensor tokens(int64_t b, int64_t t, int64_t vocab, uint64_t seed) {
  Tensor out = empty({b, t}, {DType::Int64});
  int64_t* p = out.data_ptr<int64_t>();
  uint64_t s = seed * 6364136223846793005ull + 1;
  for (int64_t i = 0; i < b * t; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = static_cast<int64_t>((s >> 33) % static_cast<uint64_t>(vocab));
  }
  return out;
}

// bf16 GEMM throughput in TFLOP/s: (n, n) x (n, n) bfloat16 matmuls.
double measure_bf16_peak(Device dev, int64_t n = 8192, int iters = 20) {
  NoGradGuard ng;
  Tensor a = (rand({n, n}, {DType::Float32, dev}) - 0.5).to(DType::BFloat16);
  Tensor b = (rand({n, n}, {DType::Float32, dev}) - 0.5).to(DType::BFloat16);
  for (int i = 0; i < 3; ++i) matmul(a, b);
  examples::synchronize(dev);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) matmul(a, b);
  examples::synchronize(dev);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return 2.0 * n * n * n * iters / secs / 1e12;
}

int run(int argc, char** argv) {
  std::string device = "cuda:0", amp = "bf16";
  int steps = 10, warmup = 3, peak_iters = 20;
  int64_t batch = 8;
  Gpt2Config c;
  examples::FlagParser flags("usage: gpt2_weft [flags]");
  flags.add("--device D", &device, "cuda or cuda:N")
      .add("--steps N", &steps, "timed steps")
      .add("--warmup N", &warmup, "untimed steps first")
      .add("--batch N", &batch, "batch size")
      .add("--layers N", &c.layers, "transformer blocks")
      .add("--peak-iters N", &peak_iters, "8192^3 bf16 matmuls timed for the peak (0: none, e.g. under a profiler)")
      .add_choice("--amp", &amp, {"none", "bf16"}, "autocast for the forward pass");
  if (auto status = flags.parse_in_main(argc, argv, "gpt2_weft")) return *status;
  const Device dev = examples::parse_device(device);
  examples::AmpScope::check(amp);
  manual_seed(0);
  Gpt2 model(c);
  model.to(dev);
  optim::AdamWOptions o;
  o.lr = 3e-4;
  optim::AdamW opt(model.parameters(), o);
  const int64_t T = c.context;
  Tensor all = tokens(batch, T + 1, c.vocab, 1).to(dev);  // (B, T + 1)
  Tensor idx = all.narrow(1, 0, T).contiguous();          // (B, T)
  Tensor target = all.narrow(1, 1, T).contiguous();       // (B, T)
  auto step = [&] {
    Tensor loss;
    {
      examples::AmpScope autocast(amp, dev);
      Tensor logits = model(idx);  // (B, T, V)
      loss = cross_entropy(reshape(logits, {batch * T, c.vocab}), reshape(target, {batch * T}));
    }
    opt.zero_grad();
    loss.backward();
    opt.step();
  };
  for (int s = 0; s < warmup; ++s) step();
  examples::synchronize(dev);
  auto t0 = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) step();
  examples::synchronize(dev);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double tok_s = static_cast<double>(batch * T) * steps / secs;
  const double n_params = static_cast<double>(model.num_parameters());
  const double flops_per_token = 6.0 * n_params + 12.0 * c.layers * c.d_model * T;
  if (peak_iters <= 0) {
    std::printf("params=%.0f tokens_per_s=%.1f\n", n_params, tok_s);
    return 0;
  }
  const double peak = measure_bf16_peak(dev, 8192, peak_iters);
  std::printf("params=%.0f tokens_per_s=%.1f peak_bf16_tflops=%.1f mfu=%.4f\n", n_params, tok_s, peak,
              flops_per_token * tok_s / (peak * 1e12));
  return 0;
}

}  // namespace
}  // namespace weft

int main(int argc, char** argv) {
  try {
    return weft::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpt2_weft: error: %s\n", e.what());
    return 1;
  }
}
