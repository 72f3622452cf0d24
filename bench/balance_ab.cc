// balance_ab: the GEMMs and the GPT step with Note [gemm balance] on and off,
// alternated in one process so both see the same host (core/cpu/thread_balance.h).
//   balance_ab [--threads 2] [--rounds 15] [--steps 12] [--amp none|bf16] [--layers 6]
// Part 1, for the GPT block's GEMM shapes (float32 and the default bfloat16
// path) and sgemm 1024: `rounds` rounds of 5 calls with the balance off, then 5
// on, the first 2 of each untimed; prints each variant's median and off / on.
// Part 2: the GPT training step of //bench:gpt_weft (same model, optimizer and
// batch), `steps` steps per variant in alternation; prints tokens/s from each
// variant's median step. With one thread both variants are the same code.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_util.h"
#include "core/autocast.h"
#include "core/autograd_meta.h"
#include "core/cpu/gemm.h"
#include "core/cpu/gemm_bf16.h"
#include "core/cpu/thread_balance.h"
#include "core/half.h"
#include "core/nn_ops.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "examples/flags.h"
#include "examples/gpt/model.h"
#include "optim/adam.h"
#include "optim/clip_grad.h"

namespace weft {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Times run() with the balance off (v = 0) and on (v = 1), alternating.
std::pair<double, double> alternate(int rounds, int calls, int untimed, const std::function<void()>& run) {
  std::vector<double> t[2];
  for (int r = 0; r < rounds; ++r)
    for (int v = 0; v < 2; ++v) {
      cpu::set_thread_balance_enabled(v == 1);
      for (int i = 0; i < calls; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        run();
        if (i >= untimed) t[v].push_back(seconds_since(t0));
      }
    }
  cpu::set_thread_balance_enabled(true);
  return {bench::median(t[0]), bench::median(t[1])};
}

void gemms(int rounds) {
  const int64_t most = bench::kGptGemmMostElements;
  const std::vector<float> a = bench::lcg_floats(most, 1), b = bench::lcg_floats(most, 2);
  std::vector<float> c(most);
  std::vector<uint16_t> a16(most), b16(most);
  for (int64_t i = 0; i < most; ++i) a16[i] = BFloat16(a[i]).x, b16[i] = BFloat16(b[i]).x;
  const cpu::Bf16GemmPath path = cpu::bf16_gemm_path();
  std::printf("%-12s %-10s %10s %10s %8s\n", "dtype", "case", "off ms", "on ms", "off/on");
  for (int bf16 = 0; bf16 < 2; ++bf16) {
    double sum[2] = {0, 0};
    for (const bench::GemmCase& sh : bench::kGptGemmCases) {
      const int64_t a_rs = sh.a_transposed ? 1 : sh.k, a_cs = sh.a_transposed ? sh.m : 1;
      auto [off, on] = alternate(rounds, 5, 2, [&] {
        if (bf16) cpu::gemm_bf16(path, sh.m, sh.n, sh.k, a16.data(), a_rs, a_cs, b16.data(), sh.n, 1, c.data(), sh.n);
        else cpu::gemm<float>(sh.m, sh.n, sh.k, a.data(), a_rs, a_cs, b.data(), sh.n, 1, c.data(), sh.n);
      });
      sum[0] += off, sum[1] += on;
      std::printf("%-12s %-10s %10.3f %10.3f %7.3fx\n", bf16 ? cpu::bf16_gemm_path_name(path) : "float32", sh.name,
                  1e3 * off, 1e3 * on, off / on);
    }
    std::printf("%-12s %-10s %10.3f %10.3f %7.3fx\n", bf16 ? cpu::bf16_gemm_path_name(path) : "float32", "sum",
                1e3 * sum[0], 1e3 * sum[1], sum[0] / sum[1]);
  }
}

void gpt_steps(int steps, int64_t layers, bool bf16) {
  examples::gpt::GptConfig c;
  c.layers = layers;
  c.dim = 384;
  c.heads = 6;
  c.context = 256;
  const int64_t batch = 8, T = c.context;
  manual_seed(0);
  auto model = examples::gpt::make_gpt(c);
  Tensor all = randint(0, 256, {batch, T + 1});      // (B, T + 1)
  Tensor idx = all.narrow(1, 0, T).contiguous();     // (B, T)
  Tensor target = all.narrow(1, 1, T).contiguous();  // (B, T)
  auto params = model->parameters();
  optim::AdamWOptions o;
  o.lr = 3e-4;
  optim::AdamW opt(params, o);
  auto step = [&] {
    opt.zero_grad();
    Tensor loss;
    {
      AutocastGuard autocast(DeviceType::CPU, DType::BFloat16, bf16);
      loss = examples::gpt::lm_loss((*model)(idx), target);
    }
    loss.backward();
    optim::clip_grad_norm_(params, 1.0);
    opt.step();
  };
  step();  // warm-up: allocations, packing buffers
  auto [off, on] = alternate(steps, 1, 0, step);
  std::printf("gpt %lld layers %s: off %.1f tokens/s, on %.1f tokens/s, on/off %.3fx (median of %d steps each)\n",
              static_cast<long long>(layers), bf16 ? "bf16 autocast" : "float32", batch * T / off, batch * T / on,
              off / on, steps);
}

int run(int argc, char** argv) {
  int threads = 2, rounds = 15, steps = 12;
  int64_t layers = 6;
  std::string amp = "none";
  examples::FlagParser flags("usage: balance_ab [flags]");
  flags.add("--threads N", &threads, "CPU threads")
      .add("--rounds N", &rounds, "GEMM rounds (5 calls off, 5 on)")
      .add("--steps N", &steps, "GPT steps per variant (0: none)")
      .add("--layers N", &layers, "GPT blocks")
      .add_choice("--amp", &amp, {"none", "bf16"}, "bfloat16 autocast for the GPT step");
  if (auto status = flags.parse_in_main(argc, argv, "balance_ab")) return *status;
  set_num_threads(threads);
  std::printf("threads=%d; balance off = equal slabs, on = Note [gemm balance]\n", get_num_threads());
  if (rounds > 0) gemms(rounds);
  if (steps > 0) gpt_steps(steps, layers, amp == "bf16");
  return 0;
}

}  // namespace
}  // namespace weft

int main(int argc, char** argv) {
  return weft::examples::run_main("balance_ab", [&] { return weft::run(argc, argv); });
}
