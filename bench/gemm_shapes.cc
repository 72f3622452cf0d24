// gemm_shapes: GFLOP/s of cpu::gemm (the CPU GEMM under matmul) per shape and
// operand layout, for the AVX-512 kernel and for Eigen, at a given thread count.
// Shapes: the DDP benchmark's MLP (784-2048-2048-10, batch 64) forward and
// backward products, sgemm 1024, the GPT benchmark's linear layers and the
// Fashion-MNIST CNN's conv (im2col) and fc1 products at batch 128, the
// direct convolution conv2d runs for the CNN's first layer, and the GEMMs it
// runs for the second with B packed from the images (one thread).
//   gemm_shapes [--threads N] [--reps R]
// Times are the best of R; at 1 thread they are the thread's CPU time (less
// disturbed by other processes on a shared machine), else wall time. A sample
// times enough calls back to back for 2^27 flops (one call for the large
// shapes): reading a clock costs about a microsecond in a virtual machine,
// a sixth of a conv1 product.
// Layout letters: A then B, N = row-major, T = a transposed (col-major) view.
// First it measures the machine's float32 FMA peak (fma_peak) and gives each
// shape's AVX-512 rate as a share of it (and, where the CPU has AVX512-BF16,
// the same loop's rate with VDPBF16PS); then the GPT's shapes with bfloat16
// operands on every bfloat16 GEMM path the CPU runs (core/cpu/gemm_bf16.h).
#include <immintrin.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/cpu/conv_cols_avx512.h"
#include "core/cpu/conv_direct_avx512.h"
#include "core/cpu/conv_lanes_avx512.h"
#include "core/cpu/gemm.h"
#include "core/cpu/gemm_avx512.h"
#include "core/cpu/gemm_bf16.h"
#include "core/half.h"
#include "core/parallel.h"
#include "examples/flags.h"

namespace {

struct Case {
  const char* what;
  int64_t m, n, k;
  bool at, bt;  // operand stored transposed (col-major)
};

double now(bool cpu_time) {
  if (!cpu_time) return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// GCC 12's _mm512_reduce_add_ps (the peak loops' sinks below) starts from
// _mm512_undefined_ps(), which -Wmaybe-uninitialized reports at each use.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// The machine's float32 FMA peak on one thread, GFLOP/s: 12 independent chains
// of AVX-512 FMAs (enough to cover the FMA latency on two FMA ports), all
// operands in registers, best of 5 runs of thread CPU time. 0 where the CPU
// lacks AVX-512. (GCC put the AVX2 loop's constants in memory operands of
// every FMA, short of ymm registers, and that loop measured 59-69 GFLOP/s
// instead of 90.5 on an AVX2-only Zen 4 guest, below the GEMM kernels.)
__attribute__((target("avx512f"))) double fma_peak_avx512() {
  double best = 0;
  for (int run = 0; run < 5; ++run) {
    __m512 acc[12];
    __m512 mul = _mm512_set1_ps(0.999999f), add = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
    constexpr int64_t kIters = 20000000;
    const double t0 = now(true);
    for (int64_t it = 0; it < kIters; ++it) {
      asm volatile("" : "+v"(mul), "+v"(add));  // in registers (see fma_peak_avx2)
#pragma GCC unroll 12
      for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], mul, add);
    }
    const double t = now(true) - t0;
    float sink = 0;
    for (int i = 0; i < 12; ++i) sink += _mm512_reduce_add_ps(acc[i]);
    if (sink == 42.0f) std::printf(" ");  // keeps the chains alive
    best = std::max(best, 12.0 * 16 * 2 * kIters / t / 1e9);
  }
  return best;
}

// The same with AVX2 FMAs (8 lanes), for CPUs without AVX-512.
__attribute__((target("avx2,fma"))) double fma_peak_avx2() {
  double best = 0;
  for (int run = 0; run < 5; ++run) {
    __m256 acc[12];
    __m256 mul = _mm256_set1_ps(0.999999f), add = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
    constexpr int64_t kIters = 20000000;
    const double t0 = now(true);
    for (int64_t it = 0; it < kIters; ++it) {
      // opaque to the compiler, so mul and add stay in registers: GCC otherwise
      // folds them into memory operands and reloads them every iteration
      asm volatile("" : "+x"(mul), "+x"(add));
#pragma GCC unroll 12
      for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], mul, add);
    }
    const double t = now(true) - t0;
    alignas(32) float lanes[8];
    float sink = 0;
    for (int i = 0; i < 12; ++i) {
      _mm256_store_ps(lanes, acc[i]);
      for (float v : lanes) sink += v;
    }
    if (sink == 42.0f) std::printf(" ");  // keeps the chains alive
    best = std::max(best, 12.0 * 8 * 2 * kIters / t / 1e9);
  }
  return best;
}

// The widest FMA the CPU has: AVX-512, else AVX2 (0 with neither), and its name.
bool has_avx2_fma() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
double fma_peak() {
  if (__builtin_cpu_supports("avx512f")) return fma_peak_avx512();
  return has_avx2_fma() ? fma_peak_avx2() : 0;
}
const char* fma_kind() { return __builtin_cpu_supports("avx512f") ? "AVX-512" : has_avx2_fma() ? "AVX2" : "no"; }

// The same loop with VDPBF16PS (AVX512-BF16: 16 lanes x 2 bfloat16 products a
// lane, 64 flops an instruction), to compare its rate with the FMAs' on this
// core (the default bfloat16 path follows from it: core/cpu/gemm_bf16.h).
// 24 chains, as many as the GEMM's micro-tile has accumulators: with 12, Zen 5
// waits on VDPBF16PS's latency (417-425 GFLOP/s against 452-464 with 16 or 24).
__attribute__((target("avx512f,avx512bf16"), noinline)) double dpbf16_peak_avx512() {
  constexpr int kChains = 24;
  double best = 0;
  for (int run = 0; run < 5; ++run) {
    __m512 acc[kChains];
    __m512i pair = _mm512_set1_epi32(0x3f803f80);  // (1, 1)
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
    constexpr int64_t kIters = 10000000;
    const double t0 = now(true);
    for (int64_t it = 0; it < kIters; ++it) {
#pragma GCC unroll 24
      for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], (__m512bh)pair, (__m512bh)pair);
      asm volatile("" : "+v"(pair));  // not hoisted
    }
    const double t = now(true) - t0;
    float sink = 0;
    for (int i = 0; i < kChains; ++i) sink += _mm512_reduce_add_ps(acc[i]);
    if (sink == 42.0f) std::printf(" ");
    best = std::max(best, double(kChains) * 16 * 4 * kIters / t / 1e9);
  }
  return best;
}
#pragma GCC diagnostic pop

// GFLOP/s of f (`flops` per call): the best of `reps` samples after `warm`
// untimed ones, each sample enough calls back to back for 2^27 flops (one call
// for the large shapes).
template <typename F>
double best_rate(double flops, int reps, int warm, bool cpu_time, const F& f) {
  const int64_t calls = std::max<int64_t>(1, static_cast<int64_t>(double(1 << 27) / flops));
  double best = 1e30;
  for (int r = 0; r < reps + warm; ++r) {
    const double t0 = now(cpu_time);
    for (int64_t i = 0; i < calls; ++i) f();
    if (r >= warm) best = std::min(best, now(cpu_time) - t0);
  }
  return flops * calls / best / 1e9;
}

// n test values in [-0.5, 0.5): ((i * mult) % 1000) / 1000 - 0.5.
std::vector<float> ramp(size_t n, size_t mult) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float((i * mult) % 1000) / 1000.0f - 0.5f;
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  // best of 61: on a shared virtual machine the best of 21 read single shapes
  // up to 7% below what longer runs settle at (Zen 4, the GPT's K-blocked g.W)
  int threads = 1, reps = 61;
  bool peaks_only = false;
  weft::examples::FlagParser flags("usage: gemm_shapes [flags]");
  flags.add("--threads N", &threads, "CPU threads")
      .add("--reps N", &reps, "timed repetitions per shape")
      .add_switch("--peaks-only", &peaks_only, true, "print the measured FMA and VDPBF16PS peaks, then stop");
  if (auto status = flags.parse_in_main(argc, argv, "gemm_shapes")) return *status;
  weft::set_num_threads(threads);
  const std::vector<Case> cases = {
      {"ddp fwd1  x.W1t", 64, 2048, 784, false, true},
      {"ddp fwd2  h.W2t", 64, 2048, 2048, false, true},
      {"ddp fwd3  h.W3t", 64, 10, 2048, false, true},
      {"ddp dX2   g.W2", 64, 2048, 2048, false, false},
      {"ddp dX3   g.W3", 64, 2048, 10, false, false},
      {"ddp dW1t  xt.g", 784, 2048, 64, true, false},
      {"ddp dW2t  ht.g", 2048, 2048, 64, true, false},
      {"ddp dW1   gt.x", 2048, 784, 64, true, false},
      {"ddp dW2   gt.h", 2048, 2048, 64, true, false},
      {"ddp dW3   gt.h", 10, 2048, 64, true, false},
      {"sgemm 1024 NN", 1024, 1024, 1024, false, false},
      {"sgemm 1024 NT", 1024, 1024, 1024, false, true},
      {"sgemm 1024 TN", 1024, 1024, 1024, true, false},
      {"sgemm 1024 TT", 1024, 1024, 1024, true, true},
      {"odd 1000x999x1001", 1000, 999, 1001, false, false},
      // The GPT benchmark's block (batch 8 x context 256 = 2048 tokens, width 384):
      // forward x.Wt, input gradient g.W, weight gradient gt.x, per linear.
      {"gpt qkv  x.Wt", 2048, 1152, 384, false, true},
      {"gpt qkv  g.W", 2048, 384, 1152, false, false},
      {"gpt qkv  gt.x", 1152, 384, 2048, true, false},
      {"gpt proj x.Wt", 2048, 384, 384, false, true},
      {"gpt proj g.W", 2048, 384, 384, false, false},
      {"gpt proj gt.x", 384, 384, 2048, true, false},
      {"gpt fc1  x.Wt", 2048, 1536, 384, false, true},
      {"gpt fc1  g.W", 2048, 384, 1536, false, false},
      {"gpt fc1  gt.x", 1536, 384, 2048, true, false},
      {"gpt fc2  x.Wt", 2048, 384, 1536, false, true},
      {"gpt fc2  g.W", 2048, 1536, 384, false, false},
      {"gpt fc2  gt.x", 384, 1536, 2048, true, false},
      {"gpt head x.Wt", 2048, 256, 384, false, true},
      {"gpt head gt.x", 256, 384, 2048, true, false},
      {"gpt head g.W", 2048, 384, 256, false, false},
      // The Fashion-MNIST CNN at batch 128 (examples/models.h): conv as im2col +
      // GEMM per chunk of images (core/ops/conv.cc: conv1 one 28x28 image, 784
      // columns; conv2 two 14x14 images, 392 columns), then fc1 (3136 -> 128).
      // conv2d now runs conv1 as a direct convolution (the rows after the
      // table); its GEMM rows show what im2col + GEMM would give.
      {"cnn conv1 W.cols", 32, 784, 9, false, false},
      {"cnn conv1 g.colsT", 32, 9, 784, false, true},
      {"cnn conv2 W.cols", 64, 392, 288, false, false},
      {"cnn conv2 g.colsT", 64, 288, 392, false, true},
      {"cnn conv2 Wt.g", 288, 392, 64, true, false},
      {"cnn fc1  x.Wt", 128, 128, 3136, false, true},
      {"cnn fc1  g.W", 128, 3136, 128, false, false},
      {"cnn fc1  gt.x", 128, 3136, 128, true, false},
  };
  const bool cpu_time = weft::get_num_threads() == 1;
  const double peak = fma_peak() * weft::get_num_threads();
  std::printf("measured float32 FMA peak: %.1f GFLOP/s (%d thread(s) x 12 %s FMA chains)\n", peak,
              weft::get_num_threads(), fma_kind());
  if (__builtin_cpu_supports("avx512bf16"))
    std::printf("measured VDPBF16PS peak: %.1f GFLOP/s (1 thread, 24 chains; the FMA peak on 1 thread: %.1f)\n",
                dpbf16_peak_avx512(), peak / weft::get_num_threads());
  if (peaks_only) return 0;
  std::printf("threads=%d (best of %d, %s time)\n%-20s %6s %6s %6s %10s %7s %10s\n", weft::get_num_threads(), reps,
              cpu_time ? "thread CPU" : "wall", "case", "m", "n", "k",
              weft::cpu::gemm_f32_uses_avx512() ? "avx512"
              : weft::cpu::gemm_f32_uses_avx2() ? "avx2"
                                                : "default",
              "%peak", "eigen");
  // a row of the float32 table; eigen < 0 prints "-" (no Eigen counterpart)
  auto row = [&](const char* what, int64_t m, int64_t n, int64_t k, double rate, double eigen) {
    std::printf("%-20s %6ld %6ld %6ld %10.1f %6.0f%% ", what, long(m), long(n), long(k), rate,
                peak > 0 ? 100.0 * rate / peak : 0.0);
    if (eigen < 0) std::printf("%10s\n", "-");
    else std::printf("%10.1f\n", eigen);
  };
  for (const Case& cs : cases) {
    const std::vector<float> a = ramp(cs.m * cs.k, 7919), b = ramp(cs.k * cs.n, 104729);
    std::vector<float> c(cs.m * cs.n);
    const int64_t ars = cs.at ? 1 : cs.k, acs = cs.at ? cs.m : 1, brs = cs.bt ? 1 : cs.n, bcs = cs.bt ? cs.k : 1;
    double rate[2];
    for (int path = 0; path < 2; ++path) {  // the default kernel, then Eigen's product
      weft::cpu::set_gemm_f32_avx512(path == 0);
      weft::cpu::set_gemm_f32_avx2(path == 0);
      rate[path] = best_rate(2.0 * cs.m * cs.n * cs.k, reps, 2, cpu_time, [&] {
        weft::cpu::gemm<float>(cs.m, cs.n, cs.k, a.data(), ars, acs, b.data(), brs, bcs, c.data(), cs.n);
      });
    }
    weft::cpu::set_gemm_f32_avx512(true);
    weft::cpu::set_gemm_f32_avx2(true);
    row(cs.what, cs.m, cs.n, cs.k, rate[0], rate[1]);
  }
  // The CNN's first layer as conv2d runs it on an AVX-512 CPU: the direct
  // convolution of core/cpu/conv_direct_avx512.h (1 -> 32 channels, 3x3, 28x28).
  // Both are timed on kConvDirectChunk images (the weight gradient's unit):
  // each call builds its masks and packs the weights, a microsecond that one
  // 28x28 image's 4-us output does not hide.
  const weft::cpu::Conv2dGeom g1{1, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1, 28, 28};
  if (weft::cpu::conv_direct_applies(g1, 1)) {
    const int64_t n = weft::cpu::kConvDirectChunk, cout = 32, L = 28 * 28;
    const std::vector<float> x = ramp(n * L, 7919), bias(cout);
    std::vector<float> y = ramp(n * cout * L, 104729), w(cout * 9), gw(cout * 9), gb(cout);
    for (size_t i = 0; i < w.size(); ++i) w[i] = float(i % 7) / 7.0f - 0.5f;
    const double flops = 2.0 * n * cout * 9 * L;
    row("cnn conv1 direct y", cout, n * L, 9,
        best_rate(flops, reps, 2, cpu_time,
                  [&] { weft::cpu::conv_direct_forward(n, x.data(), w.data(), bias.data(), cout, g1, y.data()); }),
        -1);
    row("cnn conv1 direct dW,db", cout, n * L, 9,
        best_rate(flops, reps, 2, cpu_time,
                  [&] { weft::cpu::conv_direct_weight_grad(n, x.data(), y.data(), cout, g1, gw.data(), gb.data()); }),
        -1);
  }
  // The CNN's second layer as conv2d runs it on an AVX-512 CPU (32 -> 64
  // channels, 3x3, one chunk of two 14x14 images): the output's and the
  // weight gradient's GEMMs packing B straight from the images
  // (core/cpu/conv_cols_avx512.h; conv2d runs the output's only for layers of
  // over 384 taps), the packing included; the "cnn conv2" rows
  // above read a column matrix im2col has already written. One thread only,
  // as conv2d runs them inside its loop over chunks.
  const weft::cpu::Conv2dGeom g2{32, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1, 14, 14};
  if (cpu_time && weft::cpu::conv_cols_applies(g2, 1)) {
    const int64_t n = 2, cout = 64, taps = 288, cols = n * 14 * 14;
    const std::vector<float> x = ramp(n * 32 * 14 * 14, 7919), go = ramp(cout * cols, 104729);
    std::vector<float> w(cout * taps), y(cout * cols), gw(cout * taps);
    for (size_t i = 0; i < w.size(); ++i) w[i] = float(i % 7) / 7.0f - 0.5f;
    const weft::cpu::ConvColsPlan plan(g2);
    const weft::cpu::ConvColsPack pack(plan, x.data());
    const weft::cpu::ConvColsTPack tpack(plan, x.data());
    const double flops = 2.0 * cout * taps * cols;
    row("cnn conv2 implicit y", cout, cols, taps,
        best_rate(flops, reps, 2, cpu_time,
                  [&] {
                    weft::cpu::gemm_avx512_f32_packed_b(cout, cols, taps, w.data(), taps, 1, pack, y.data(), cols,
                                                        false);
                  }),
        -1);
    row("cnn conv2 implicit dW", cout, taps, cols,
        best_rate(flops, reps, 2, cpu_time,
                  [&] {
                    weft::cpu::gemm_avx512_f32_packed_b(cout, taps, cols, go.data(), cols, 1, tpack, gw.data(), taps,
                                                        false);
                  }),
        -1);
  }
  // conv2d's forward and input gradient of that layer: the direct kernel with
  // the output channels in the lanes (core/cpu/conv_lanes_avx512.h), on 16
  // images (each call packs the weights, 18 K strided reads that two images'
  // 14 MFLOP would not hide), copying every image into its padded buffer
  // included. The input gradient is the same kernel on the output gradient:
  // 32 channels x 576 taps.
  if (cpu_time && weft::cpu::conv_lanes_applies(g2, 1, 64) && weft::cpu::conv_lanes_input_grad_applies(g2, 1)) {
    const int64_t n = 16, cout = 64, taps = 288, cols = n * 14 * 14;
    const std::vector<float> x = ramp(n * 32 * 14 * 14, 7919);
    std::vector<float> w(cout * taps), y(cout * cols), gx(x.size());
    for (size_t i = 0; i < w.size(); ++i) w[i] = float(i % 7) / 7.0f - 0.5f;
    const double flops = 2.0 * cout * taps * cols;
    row("cnn conv2 lanes y", cout, cols, taps,
        best_rate(flops, reps, 2, cpu_time,
                  [&] { weft::cpu::conv_lanes_forward(n, x.data(), w.data(), nullptr, cout, g2, y.data()); }),
        -1);
    row("cnn conv2 lanes dX", 32, cols, cout * 9,
        best_rate(flops, reps, 2, cpu_time,
                  [&] { weft::cpu::conv_lanes_input_grad(n, y.data(), w.data(), cout, g2, gx.data()); }),
        -1);
  }
  // bfloat16 operands (core/cpu/gemm_bf16.h), every path this CPU runs, on the
  // GPT's shapes (amx_emulated, plain C++ tiles for tests, is left out).
  using weft::cpu::Bf16GemmPath;
  std::vector<Bf16GemmPath> paths;
  for (Bf16GemmPath p :
       {Bf16GemmPath::kAmxBf16, Bf16GemmPath::kAvx512Bf16, Bf16GemmPath::kAvx512Emulated, Bf16GemmPath::kFloat32})
    if (weft::cpu::bf16_gemm_path_available(p)) paths.push_back(p);
  std::printf("\nbfloat16 operands, GFLOP/s per path (matmuls take %s; the float32 peak above for scale)\n%-20s",
              weft::cpu::bf16_gemm_path_name(weft::cpu::bf16_gemm_path()), "case");
  for (Bf16GemmPath p : paths) std::printf(" %16s", weft::cpu::bf16_gemm_path_name(p));
  std::printf("\n");
  for (const Case& cs : cases) {
    if (std::string(cs.what).rfind("gpt", 0) != 0) continue;
    std::vector<uint16_t> a(cs.m * cs.k), b(cs.k * cs.n);
    std::vector<float> c(cs.m * cs.n);
    const std::vector<float> af = ramp(a.size(), 7919), bf = ramp(b.size(), 104729);
    for (size_t i = 0; i < a.size(); ++i) a[i] = weft::BFloat16(af[i]).x;
    for (size_t i = 0; i < b.size(); ++i) b[i] = weft::BFloat16(bf[i]).x;
    const int64_t ars = cs.at ? 1 : cs.k, acs = cs.at ? cs.m : 1, brs = cs.bt ? 1 : cs.n, bcs = cs.bt ? cs.k : 1;
    std::printf("%-20s", cs.what);
    for (Bf16GemmPath p : paths) {
      std::printf(" %16.1f", best_rate(2.0 * cs.m * cs.n * cs.k, std::max(3, reps / 4), 1, cpu_time, [&] {
                    weft::cpu::gemm_bf16(p, cs.m, cs.n, cs.k, a.data(), ars, acs, b.data(), brs, bcs, c.data(), cs.n);
                  }));
    }
    std::printf("\n");
  }
  return 0;
}
