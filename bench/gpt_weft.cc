// gpt_weft: weft's side of //bench:gpt_vs_torch. Trains the GPT example's model
// (examples/gpt/model.h: byte vocabulary 256, learned positions, pre-norm
// blocks, tied head, no dropout) on a fixed synthetic batch with AdamW
// (lr 3e-4, weight decay 0.01) and gradient clipping at norm 1.0, and prints
// one JSON line: tokens/s over the timed steps, the process's peak resident
// memory and every step's loss.
//   gpt_weft --layers 6 --dim 384 --heads 6 --context 256 --batch 8 --threads 2
//            [--steps 20 --warmup 3] [--init FILE] [--amp bf16]
// --amp bf16: forward and loss under bfloat16 autocast on the CPU
// (core/autocast.h; float32 weights, gradients and AdamW state).
// --attention unfused: attention without the CPU flash kernels
// (core/cpu/flash_attention.h), to measure what they bring.
// --init FILE writes the initial weights (state-dict names) and the batch's
// tokens ("tokens", (B, T + 1) int64) as safetensors before the first step,
// so the PyTorch peer starts from the same weights and data.
#include <chrono>
#include <cstdio>
#include <map>
#include <string>

#include "bench/bench_util.h"
#include "core/autocast.h"
#include "core/autograd_meta.h"
#include "core/cpu/flash_attention.h"
#include "core/nn_ops.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "examples/flags.h"
#include "examples/gpt/model.h"
#include "io/safetensors.h"
#include "optim/adam.h"
#include "optim/clip_grad.h"

namespace weft {
namespace {

// Byte tokens (B, T + 1) from a fixed LCG.
Tensor lcg_tokens(int64_t b, int64_t t, uint64_t seed) {
  Tensor out = empty({b, t}, {DType::Int64});
  int64_t* p = out.data_ptr<int64_t>();
  uint64_t s = seed;
  for (int64_t i = 0; i < b * t; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = static_cast<int64_t>((s >> 33) % 256);
  }
  return out;
}

int run(int argc, char** argv) {
  examples::gpt::GptConfig c;
  c.layers = 6;
  c.dim = 384;
  c.heads = 6;
  c.context = 256;
  int64_t batch = 8;
  int steps = 20, warmup = 3, threads = 0;
  std::string init, amp = "none", attention = "flash";
  examples::FlagParser flags("usage: gpt_weft [flags]");
  flags.add("--layers N", &c.layers, "transformer blocks")
      .add("--dim N", &c.dim, "model width")
      .add("--heads N", &c.heads, "attention heads")
      .add("--context N", &c.context, "tokens per row")
      .add("--batch N", &batch, "rows per step")
      .add("--steps N", &steps, "timed steps")
      .add("--warmup N", &warmup, "untimed steps first")
      .add("--threads N", &threads, "CPU threads", "all cores")
      .add("--init FILE", &init, "write the initial weights and tokens here (safetensors)")
      .add_choice("--amp", &amp, {"none", "bf16"}, "bfloat16 autocast for the forward pass and loss")
      .add_choice("--attention", &attention, {"flash", "unfused"},
                  "the CPU flash attention kernels where the CPU has them, or the unfused path");
  if (auto status = flags.parse_in_main(argc, argv, "gpt_weft")) return *status;
  cpu::set_flash_attention_enabled(attention == "flash");
  if (threads > 0) set_num_threads(threads);
  manual_seed(0);
  auto model = examples::gpt::make_gpt(c);
  const int64_t T = c.context;
  Tensor all = lcg_tokens(batch, T + 1, 1);          // (B, T + 1)
  Tensor idx = all.narrow(1, 0, T).contiguous();     // (B, T)
  Tensor target = all.narrow(1, 1, T).contiguous();  // (B, T)
  if (!init.empty()) {
    std::map<std::string, Tensor> out;
    for (auto& [name, t] : model->named_parameters()) out[name] = t;
    out["tokens"] = all;
    io::save_safetensors(init, out);
  }
  auto params = model->parameters();
  optim::AdamWOptions o;
  o.lr = 3e-4;
  optim::AdamW opt(params, o);
  std::vector<double> losses;
  auto step = [&] {
    opt.zero_grad();
    Tensor loss;
    {
      AutocastGuard autocast(DeviceType::CPU, DType::BFloat16, amp == "bf16");
      loss = examples::gpt::lm_loss((*model)(idx), target);  // mean over (B, T)
    }
    loss.backward();
    optim::clip_grad_norm_(params, 1.0);
    opt.step();
    losses.push_back(loss.item<double>());
  };
  for (int s = 0; s < warmup; ++s) step();
  auto t0 = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) step();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double rss = bench::peak_rss_mb();
  std::string ls;
  for (double l : losses) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%.9g", ls.empty() ? "" : ", ", l);
    ls += buf;
  }
  std::printf(
      "{\"tokens_per_second\": %.1f, \"peak_rss_mb\": %.1f, \"params\": %lld, \"threads\": %d, "
      "\"losses\": [%s]}\n",
      static_cast<double>(batch * T) * steps / secs, rss, static_cast<long long>(examples::gpt::parameter_count(c)),
      get_num_threads(), ls.c_str());
  return 0;
}

}  // namespace
}  // namespace weft

int main(int argc, char** argv) {
  try {
    return weft::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpt_weft: error: %s\n", e.what());
    return 1;
  }
}
