// ops_weft: a plain timing binary for the weft side of bench/ops_vs_torch.py.
//
// Usage: ops_weft [--threads N] [--reps R] [--warmup W] [--only NAME[,NAME...]]
// Runs each workload W times to warm up, then R timed times, and prints one JSON
// line per workload: {"workload": ..., "value": ..., "unit": ..., "median_ms": ...,
// "min_ms": ..., "threads": ...}. `value` is higher-is-better (GFLOP/s or GB/s,
// computed from the median time). Threads default to the number of cores.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "core/error.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "examples/flags.h"

namespace weft::bench {
namespace {

struct Workload {
  std::string name;
  std::string unit;
  double work;  // flops or bytes per call
  std::function<void()> setup;
  std::function<void()> run;
};

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else if (static_cast<unsigned char>(c) < 0x20) out += ' ';
    else out += c;
  }
  return out;
}

int run_main(int argc, char** argv) {
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  int reps = 15, warmup = 3;
  std::string only;
  examples::FlagParser flags("usage: ops_weft [flags]");
  flags.add("--threads N", &threads, "CPU threads", "all cores")
      .add("--reps N", &reps, "timed repetitions per workload")
      .add("--warmup N", &warmup, "untimed repetitions first")
      .add("--only NAME[,NAME...]", &only, "run only these workloads", "all");
  if (auto status = flags.parse_in_main(argc, argv, "ops_weft")) return *status;
  reps = std::max(1, reps);
  warmup = std::max(0, warmup);
  if (threads < 1) threads = 1;
  set_num_threads(threads);

  Tensor ga, gb, aa, ab, sx, bx, bw, bg, qkv, attn_grad, out;
  // the attention workloads: qkv (B, T, 3C), grad (B, H, T, D)
  auto attention_setup = [&](DType dt) {
    return [&, dt] {
      qkv = filled({kAttnBatch, kAttnTokens, 3 * kAttnHeads * kAttnHeadDim}, -1, 1, 9).to(dt).requires_grad_();
      attn_grad = filled({kAttnBatch, kAttnHeads, kAttnTokens, kAttnHeadDim}, -1, 1, 10).to(dt);
    };
  };
  auto attention_run = [&] { out = gpt_attention_step(qkv, attn_grad); };
  std::vector<Workload> workloads = {
      {"sgemm_1024", "GFLOP/s", gemm_flops(),
       [&] {
         ga = filled({kGemmN, kGemmN}, -1, 1, 1);  // (N, N)
         gb = filled({kGemmN, kGemmN}, -1, 1, 2);  // (N, N)
       },
       [&] { out = matmul(ga, gb); }},
      {"bgemm_fc1", "GFLOP/s", bgemm_flops(),
       [&] {
         bx = filled({kBgemmTokens, kBgemmWidth}, -1, 1, 6).to(DType::BFloat16);  // (T, C)
         bw = filled({kBgemmHidden, kBgemmWidth}, -1, 1, 7).to(DType::BFloat16);  // (4C, C)
       },
       [&] { out = matmul(bx, bw.t()); }},  // (T, 4C)
      {"bgemm_fc1_wgrad", "GFLOP/s", bgemm_flops(),
       [&] {
         bg = filled({kBgemmTokens, kBgemmHidden}, -1, 1, 8).to(DType::BFloat16);  // (T, 4C)
         bx = filled({kBgemmTokens, kBgemmWidth}, -1, 1, 6).to(DType::BFloat16);   // (T, C)
       },
       [&] { out = matmul(bg.t(), bx); }},  // (4C, C)
      {"add_large", "GB/s", add_bytes(),
       [&] {
         aa = filled({kAddN}, -1, 1, 3);  // (2^24,)
         ab = filled({kAddN}, -1, 1, 4);  // (2^24,)
       },
       [&] { out = add(aa, ab); }},
      {"softmax_4096", "GB/s", softmax_bytes(),
       [&] {
         sx = filled({kSoftmaxRows, kSoftmaxCols}, -3, 3, 5);
       },  // (R, C)
       [&] { out = softmax(sx, -1); }},
      {"attention_gpt", "GFLOP/s", attention_flops(), attention_setup(DType::Float32), attention_run},
      {"attention_gpt_bf16", "GFLOP/s", attention_flops(), attention_setup(DType::BFloat16), attention_run},
  };

  for (Workload& w : workloads) {
    if (!only.empty() && ("," + only + ",").find("," + w.name + ",") == std::string::npos) continue;
    try {
      w.setup();
      for (int i = 0; i < warmup; ++i) w.run();
      out = Tensor();
      std::vector<double> ms;
      for (int i = 0; i < reps; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        w.run();
        auto t1 = std::chrono::steady_clock::now();
        out = Tensor();  // free the result outside the timed region
        ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      }
      double med = median(ms);
      double value = w.work * 1e-9 / (med * 1e-3);  // GFLOP/s or GB/s
      std::printf(
          "{\"workload\": \"%s\", \"value\": %.3f, \"unit\": \"%s\", \"median_ms\": %.4f, \"min_ms\": %.4f, "
          "\"threads\": %d, \"reps\": %d}\n",
          w.name.c_str(), value, w.unit.c_str(), med, *std::min_element(ms.begin(), ms.end()), threads, reps);
    } catch (const std::exception& e) {
      std::printf("{\"workload\": \"%s\", \"error\": \"%s\"}\n", w.name.c_str(), json_escape(e.what()).c_str());
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace weft::bench

int main(int argc, char** argv) { return weft::bench::run_main(argc, argv); }
