// Google Benchmark micro-benchmarks of weft's core CPU ops.
//
// Run with: ./bazelw run //bench:ops_bench [-- --benchmark_filter=sgemm]
// Counters: sgemm reports GFLOP/s (2 N^3 flops per call); add and softmax report
// bytes moved per second (add: 3 arrays; softmax: read + write), shown by
// Google Benchmark as bytes_per_second.
#include <benchmark/benchmark.h>

#include "bench/bench_util.h"
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

}  // namespace
}  // namespace weft::bench

BENCHMARK_MAIN();
