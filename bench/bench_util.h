// Shared helpers for weft's benchmarks: deterministic input tensors, the byte
// and flop counts each workload is measured by (the torch peer in
// bench/ops_vs_torch.py uses the same counts, so the numbers compare), and the
// process's peak resident memory.
#pragma once

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <sys/resource.h>

#include "core/nn_ops.h"
#include "core/ops.h"

namespace weft::bench {

// A float32 tensor of `sizes` filled with a fixed pseudo-random sequence in
// [lo, hi) (a 64-bit LCG; no dependence on weft's RNG ops).
inline Tensor filled(const Shape& sizes, float lo = -1.f, float hi = 1.f, uint64_t seed = 42) {
  Tensor t = empty(sizes);
  float* p = t.data_ptr<float>();
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (int64_t i = 0, n = t.numel(); i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    float u = static_cast<float>(s >> 40) / static_cast<float>(1ull << 24);  // [0, 1)
    p[i] = lo + (hi - lo) * u;
  }
  return t;
}

// Workload sizes (keep in sync with bench/ops_vs_torch.py).
inline constexpr int64_t kGemmN = 1024;             // sgemm (N, N) x (N, N)
inline constexpr int64_t kAddN = int64_t{1} << 24;  // elementwise add of 2^24 floats
inline constexpr int64_t kSoftmaxRows = 4096;       // softmax over the last dim of (R, C)
inline constexpr int64_t kSoftmaxCols = 4096;
// bfloat16 matmuls at the GPT benchmark's MLP sizes (tokens T = 8 x 256, width
// C = 384, hidden 4C): its forward x (T, C) . W^T (W: (4C, C)), and its weight
// gradient g^T (4C, T) . x (T, C).
inline constexpr int64_t kBgemmTokens = 2048, kBgemmWidth = 384, kBgemmHidden = 1536;

inline double gemm_flops() { return 2.0 * kGemmN * kGemmN * kGemmN; }
inline double bgemm_flops() { return 2.0 * kBgemmTokens * kBgemmWidth * kBgemmHidden; }      // either product
inline double add_bytes() { return 3.0 * kAddN * sizeof(float); }                            // read a, b; write out
inline double softmax_bytes() { return 2.0 * kSoftmaxRows * kSoftmaxCols * sizeof(float); }  // read x; write out
// One layer of the GPT benchmark's causal self-attention, forward + backward:
// batch 8, 6 heads, 256 tokens, head dim 64, q, k, v views of one (B, T, 3C)
// tensor. Flops of the full (not causally halved) products: 4 B H T^2 D
// forward, 8 B H T^2 D backward.
inline constexpr int64_t kAttnBatch = 8, kAttnTokens = 256, kAttnHeads = 6, kAttnHeadDim = 64;
inline double attention_flops() { return 12.0 * kAttnBatch * kAttnHeads * kAttnTokens * kAttnTokens * kAttnHeadDim; }
// One such step: qkv (B, T, 3C) split into (B, H, T, D) views of q, k, v, causal
// attention, backward with grad (B, H, T, D), qkv's gradient cleared. Returns
// the output. The binary must link //autograd.
inline Tensor gpt_attention_step(const Tensor& qkv, const Tensor& grad) {
  const int64_t C = kAttnHeads * kAttnHeadDim;
  std::vector<Tensor> parts = split(qkv, C, 2);
  auto heads = [](const Tensor& t) {
    return t.reshape({kAttnBatch, kAttnTokens, kAttnHeads, kAttnHeadDim}).transpose(1, 2);
  };
  Tensor y = scaled_dot_product_attention(heads(parts[0]), heads(parts[1]), heads(parts[2]), true);
  y.backward(grad);
  qkv.zero_grad();
  return y;
}

// The median of v (the mean of the middle two when v has an even count; 0 when empty).
inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// sgemm 1024 and the GPT block's float32 GEMMs (tokens 8 x 256, width 384):
// the forward products x W^T and the weight gradients g^T x, the latter with A
// read column-major. //bench:balance_ab and //bench:sgemm_mkl_ab time these.
struct GemmCase {
  const char* name;
  int64_t m, n, k;
  bool a_transposed;  // A read column-major (a weight gradient's g^T)
};
inline constexpr GemmCase kGptGemmCases[] = {
    {"sgemm 1024", 1024, 1024, 1024, false}, {"qkv  x.Wt", 2048, 1152, 384, false},
    {"fc1  x.Wt", 2048, 1536, 384, false},   {"fc2  x.Wt", 2048, 384, 1536, false},
    {"proj x.Wt", 2048, 384, 384, false},    {"fc1  gt.x", 1536, 384, 2048, true},
    {"qkv  gt.x", 1152, 384, 2048, true}};
inline constexpr int64_t kGptGemmMostElements = 2048 * 2048;  // the largest operand of those cases

// n floats in [-1, 1] from a fixed LCG started at `seed`, in steps of 1/1000.
inline std::vector<float> lcg_floats(int64_t n, uint64_t seed) {
  std::vector<float> v(n);
  uint64_t s = seed;
  for (float& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<float>((s >> 40) % 2001) / 1000.0f - 1.0f;
  }
  return v;
}

// Peak resident memory of this process in MiB: VmHWM of /proc/self/status, the
// high-water mark of the program's own address space. Not getrusage's
// ru_maxrss: Linux carries that across execve, so a benchmark started by a
// large parent (the Python drivers import torch before they start weft)
// would report at least the parent's size. ru_maxrss only where /proc is missing.
inline double peak_rss_mb() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // "VmHWM:   12345 kB"
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;
}

}  // namespace weft::bench
