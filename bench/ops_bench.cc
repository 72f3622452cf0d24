// Google Benchmark micro-benchmarks of weft's core CPU ops.
//
// Run with: ./bazelw run //bench:ops_bench [-- --benchmark_filter=sgemm]
// Counters: sgemm reports GFLOP/s (2 N^3 flops per call); add and softmax report
// bytes moved per second (add: 3 arrays; softmax: read + write), shown by
// Google Benchmark as bytes_per_second; attention_gpt reports GFLOP/s.
#include <benchmark/benchmark.h>

#include "bench/bench_util.h"
#include "core/autograd_meta.h"
#include "core/cpu/flash_attention.h"
#include "core/nn_ops.h"
#include "core/ops.h"

namespace weft::bench {
namespace {

void BM_sgemm_1024(benchmark::State& state) {
  Tensor a = filled({kGemmN, kGemmN}, -1, 1, 1);  // (N, N)
  Tensor b = filled({kGemmN, kGemmN}, -1, 1, 2);  // (N, N)
  for (auto _ : state) {
    Tensor c = matmul(a, b);  // (N, N)
    benchmark::DoNotOptimize(c.raw_data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(gemm_flops() * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_sgemm_1024)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_add_large(benchmark::State& state) {
  Tensor a = filled({kAddN}, -1, 1, 3);  // (2^24,)
  Tensor b = filled({kAddN}, -1, 1, 4);  // (2^24,)
  for (auto _ : state) {
    Tensor c = add(a, b);  // (2^24,)
    benchmark::DoNotOptimize(c.raw_data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * add_bytes()));
}
BENCHMARK(BM_add_large)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_softmax_4096(benchmark::State& state) {
  Tensor x = filled({kSoftmaxRows, kSoftmaxCols}, -3, 3, 5);  // (R, C)
  for (auto _ : state) {
    Tensor y = softmax(x, -1);  // (R, C)
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * softmax_bytes()));
  state.counters["rows/s"] =
      benchmark::Counter(static_cast<double>(kSoftmaxRows), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_softmax_4096)->Unit(benchmark::kMillisecond)->UseRealTime();

// Causal self-attention of the GPT benchmark's block (batch 8, 6 heads, 256
// tokens, head dim 64; q, k, v strided views of one (B, T, 3C) tensor), forward
// and backward; arg 1 = the flash kernels (the CPU's fused path), 0 = the unfused
// path (two GEMMs around a fused softmax). Counter: GFLOP/s of the full (not
// causally halved) products, 4 B H T^2 D forward + 8 B H T^2 D backward. The
// bf16 variant takes bfloat16 q, k, v (what CPU autocast passes); there arg 1
// is the flash kernels with this CPU's default bfloat16 products, 2 with
// float32 products, 3 with VDPBF16PS pairs (cpu::FlashBf16Products; skipped
// where the CPU lacks them).
void attention_gpt(benchmark::State& state, DType dt) {
  const int64_t arg = state.range(0);
  if (arg == 3 && !cpu::flash_bf16_products_available(cpu::FlashBf16Products::kPairs)) {
    state.SkipWithError("this CPU has no AVX512-BF16");
    return;
  }
  cpu::set_flash_attention_enabled(arg != 0);
  if (arg >= 2)
    cpu::set_flash_bf16_products(arg == 2 ? cpu::FlashBf16Products::kFloat32 : cpu::FlashBf16Products::kPairs);
  Tensor qkv = filled({kAttnBatch, kAttnTokens, 3 * kAttnHeads * kAttnHeadDim}, -1, 1, 6).to(dt).requires_grad_();
  Tensor g = filled({kAttnBatch, kAttnHeads, kAttnTokens, kAttnHeadDim}, -1, 1, 7).to(dt);
  for (auto _ : state) gpt_attention_step(qkv, g);
  cpu::set_flash_attention_enabled(true);
  cpu::set_flash_bf16_products(std::nullopt);
  state.counters["GFLOP/s"] =
      benchmark::Counter(attention_flops() * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
void BM_attention_gpt(benchmark::State& state) { attention_gpt(state, DType::Float32); }
void BM_attention_gpt_bf16(benchmark::State& state) { attention_gpt(state, DType::BFloat16); }
BENCHMARK(BM_attention_gpt)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_attention_gpt_bf16)->Arg(1)->Arg(2)->Arg(3)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime();

// The GPT benchmark's MLP activation, (2048, 1536) float32, forward and
// backward (bytes: forward reads x and writes y, backward reads x and dy and
// writes dx).
void BM_gelu_tanh_gpt(benchmark::State& state) {
  Tensor x = filled({2048, 1536}, -3, 3, 8).requires_grad_();
  Tensor g = filled({2048, 1536}, -1, 1, 9);
  for (auto _ : state) {
    Tensor y = gelu(x, GeluApproximation::Tanh);
    y.backward(g);
    x.zero_grad();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * 5 * x.numel() * sizeof(float)));
}
BENCHMARK(BM_gelu_tanh_gpt)->Unit(benchmark::kMillisecond)->UseRealTime();

// The GPT benchmark's layer norm, (2048, 384) float32 with affine weights,
// forward and backward.
void BM_layer_norm_gpt(benchmark::State& state) {
  Tensor x = filled({2048, 384}, -3, 3, 10).requires_grad_();
  Tensor w = filled({384}, 0.5, 1.5, 11).requires_grad_(), b = filled({384}, -1, 1, 12).requires_grad_();
  Tensor g = filled({2048, 384}, -1, 1, 13);
  for (auto _ : state) {
    Tensor y = layer_norm(x, {384}, w, b, 1e-5);
    y.backward(g);
    x.zero_grad();
    w.zero_grad();
    b.zero_grad();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * 5 * x.numel() * sizeof(float)));
}
BENCHMARK(BM_layer_norm_gpt)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace weft::bench

BENCHMARK_MAIN();
