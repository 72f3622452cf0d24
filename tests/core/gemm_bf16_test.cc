// cpu::gemm_bf16 (core/cpu/gemm_bf16.h) on every path this CPU can run
// against a float64 triple loop over the same bfloat16 values. The products of
// two bfloat16 are exact in float32, so the only error is float32 summation:
// |C - ref| <= k * 2^-24 * sum_p |a_ip b_pj| per element (the classical bound
// for k rounded additions), asserted as such. Shapes: edge tiles in rows and
// columns, odd K (a zero-padded step), several K blocks (k > 512 steps), more
// rows than one packed A block, every row/column-major combination and general
// strides; the pair paths do not depend on the thread count, and where the
// CPU has AVX512-BF16 its path meets the same bound (and says how many
// elements equal the emulation's: all of them in VDPBF16PS's documented
// order, Note [bf16 pair order]). The float32 path, which widens while the
// float32 kernel packs, gives bit for bit what cpu::gemm<float> gives on
// widened copies, batched with repeated (broadcast) offsets too, and with the
// AVX-512 kernel switched off it still meets the bound. The AMX kernel runs
// here through its tile emulation (amx_emulated, every CPU) and, where the CPU
// has AMX, in hardware, against the same bound. A bfloat16 output (c16) is,
// bit for bit, the float32 result rounded, on every path, with a column bias
// summed in float32 before that rounding.
#include "core/cpu/gemm_bf16.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/cpu/gemm.h"
#include "core/half.h"
#include "core/parallel.h"

namespace weft {
namespace {

using cpu::Bf16GemmPath;

// The CPU's vendor string from /proc/cpuinfo (independent of the library's CPUID read).
std::string cpu_vendor() {
  FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (f == nullptr) return "";
  char line[256];
  std::string vendor;
  while (vendor.empty() && std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "vendor_id", 9) == 0) {
      const char* colon = std::strchr(line, ':');
      if (colon) vendor = std::string(colon + 2, std::strcspn(colon + 2, "\n"));
    }
  std::fclose(f);
  return vendor;
}

uint64_t g_state = 7;
uint16_t next_bf16() {  // a normal bfloat16 in about [-2, 2]
  g_state = g_state * 6364136223846793005ull + 1442695040888963407ull;
  const float f = static_cast<float>(static_cast<int64_t>((g_state >> 33) % 4001) - 2000) / 997.0f + 1e-3f;
  return BFloat16(f).x;
}

double value(uint16_t bits) { return static_cast<float>(BFloat16::from_bits(bits)); }

// An (rows, cols) operand stored row-major (false) or column-major (true), or with
// general strides (row stride 3 * cols, column stride 2).
struct Operand {
  std::vector<uint16_t> data;
  int64_t rs, cs;
  uint16_t at(int64_t r, int64_t c) const { return data[r * rs + c * cs]; }
};
Operand make(int64_t rows, int64_t cols, int layout) {
  Operand o;
  if (layout == 0) o.rs = cols, o.cs = 1;
  else if (layout == 1) o.rs = 1, o.cs = rows;
  else o.rs = 3 * cols, o.cs = 2;
  o.data.assign(static_cast<size_t>(rows * cols * (layout == 2 ? 6 : 1)), 0x7fc0);  // NaN padding: must not be read
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) o.data[r * o.rs + c * o.cs] = next_bf16();
  return o;
}

std::vector<float> run(Bf16GemmPath path, int64_t m, int64_t n, int64_t k, const Operand& a, const Operand& b) {
  std::vector<float> c(static_cast<size_t>(m * n), -1.0f);
  cpu::gemm_bf16(path, m, n, k, a.data.data(), a.rs, a.cs, b.data.data(), b.rs, b.cs, c.data(), n);
  return c;
}

// Every element within the float32 summation bound of the float64 product.
::testing::AssertionResult near_reference(const std::vector<float>& c, int64_t m, int64_t n, int64_t k,
                                          const Operand& a, const Operand& b) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0, mag = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double t = value(a.at(i, p)) * value(b.at(p, j));
        ref += t;
        mag += std::fabs(t);
      }
      const double err = std::fabs(c[i * n + j] - ref), bound = (k + 1) * std::ldexp(1.0, -24) * mag;
      if (!(err <= bound))
        return ::testing::AssertionFailure() << "C(" << i << ", " << j << ") = " << c[i * n + j] << ", reference "
                                             << ref << ": error " << err << " over the bound " << bound;
    }
  return ::testing::AssertionSuccess();
}

std::vector<Bf16GemmPath> paths() {
  std::vector<Bf16GemmPath> out;
  for (Bf16GemmPath p : {Bf16GemmPath::kFloat32, Bf16GemmPath::kAvx512Emulated, Bf16GemmPath::kAvx512Bf16,
                         Bf16GemmPath::kAmxEmulated, Bf16GemmPath::kAmxBf16})
    if (cpu::bf16_gemm_path_available(p)) out.push_back(p);
  return out;
}

TEST(GemmBf16, EveryPathEveryLayoutVsFloat64) {
  struct S {
    int64_t m, n, k;
  };
  const S shapes[] = {{1, 1, 1},    {7, 33, 5},    {13, 17, 2},   {25, 65, 63},
                      {12, 32, 64}, {30, 40, 601}, {5, 300, 129}, {1600, 20, 9}};
  for (Bf16GemmPath path : paths())
    for (const S& s : shapes)
      for (int la = 0; la < 3; ++la)
        for (int lb = 0; lb < 3; ++lb) {
          SCOPED_TRACE(std::string(cpu::bf16_gemm_path_name(path)) + " " + std::to_string(s.m) + "x" +
                       std::to_string(s.n) + "x" + std::to_string(s.k) + " layouts " + std::to_string(la) +
                       std::to_string(lb));
          const Operand a = make(s.m, s.k, la), b = make(s.k, s.n, lb);
          EXPECT_TRUE(near_reference(run(path, s.m, s.n, s.k, a, b), s.m, s.n, s.k, a, b));
        }
}

// One shape through an emulated path on 1 and 3 threads (the same bits, both
// near the float64 reference), then through the hardware path it emulates
// where the CPU has it (near the reference; how many elements equal the
// emulation's is printed). The layouts: make()'s.
void threads_then_hardware(Bf16GemmPath emulated, Bf16GemmPath hardware, int64_t m, int64_t n, int64_t k, int la,
                           int lb) {
  SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k));
  const Operand a = make(m, k, la), b = make(k, n, lb);
  const int threads = get_num_threads();
  set_num_threads(1);
  const std::vector<float> one = run(emulated, m, n, k, a, b);
  set_num_threads(3);
  const std::vector<float> three = run(emulated, m, n, k, a, b);
  set_num_threads(threads);
  EXPECT_TRUE(near_reference(one, m, n, k, a, b));
  EXPECT_EQ(std::memcmp(one.data(), three.data(), one.size() * sizeof(float)), 0);
  if (!cpu::bf16_gemm_path_available(hardware)) return;
  const std::vector<float> native = run(hardware, m, n, k, a, b);
  EXPECT_TRUE(near_reference(native, m, n, k, a, b));
  size_t same = 0;
  for (size_t i = 0; i < one.size(); ++i) same += native[i] == one[i];
  std::printf("%s and %s: %zu of %zu elements bitwise equal\n", cpu::bf16_gemm_path_name(hardware),
              cpu::bf16_gemm_path_name(emulated), same, one.size());
}

// The pair kernel: slabs of columns and several K blocks; slabs of rows
// (m > n) with more rows than one packed A block (1536); then VDPBF16PS.
TEST(GemmBf16, PairPathsAgreeAndIgnoreTheThreadCount) {
  if (!cpu::bf16_gemm_path_available(Bf16GemmPath::kAvx512Emulated)) GTEST_SKIP() << "no AVX-512 on this CPU";
  threads_then_hardware(Bf16GemmPath::kAvx512Emulated, Bf16GemmPath::kAvx512Bf16, 70, 600, 777, 0, 1);
  threads_then_hardware(Bf16GemmPath::kAvx512Emulated, Bf16GemmPath::kAvx512Bf16, 1600, 40, 300, 0, 1);
}

// The AMX kernel's loops through its tile emulation: more rows than one packed
// A block (1536), split over 3 threads in 32-row slabs (m > n) or 32-column
// ones, K blocks of whole
// tiles with the padding after the last step only (k = 1100: 550 pairs in
// blocks of 192, 192, 166 + 10 zero pairs), odd K; then the hardware against it.
TEST(GemmBf16, AmxKernelBlocksAndThreads) {
  threads_then_hardware(Bf16GemmPath::kAmxEmulated, Bf16GemmPath::kAmxBf16, 1540, 33, 31, 0, 1);
  threads_then_hardware(Bf16GemmPath::kAmxEmulated, Bf16GemmPath::kAmxBf16, 40, 200, 1100, 1, 0);
  threads_then_hardware(Bf16GemmPath::kAmxEmulated, Bf16GemmPath::kAmxBf16, 33, 97, 1, 2, 2);
}

TEST(GemmBf16, Float32PathEqualsTheFloat32GemmOnWidenedOperands) {
  struct S {
    int64_t m, n, k;
  };
  const S shapes[] = {{1, 40, 7}, {7, 33, 5}, {25, 65, 63}, {30, 40, 601}, {70, 1, 19}, {130, 300, 129}};
  for (const S& s : shapes)
    for (int la = 0; la < 3; ++la)
      for (int lb = 0; lb < 3; ++lb) {
        SCOPED_TRACE(std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) + " layouts " +
                     std::to_string(la) + std::to_string(lb));
        // three matrices of A over two of B (offsets 0, 0, 1: broadcast), one buffer each
        std::vector<Operand> as, bs;
        for (int x = 0; x < 3; ++x) as.push_back(make(s.m, s.k, la));
        for (int x = 0; x < 2; ++x) bs.push_back(make(s.k, s.n, lb));
        auto concat = [](const std::vector<Operand>& ops, std::vector<int64_t>& offs) {
          std::vector<uint16_t> all;
          for (const Operand& o : ops)
            offs.push_back(static_cast<int64_t>(all.size())), all.insert(all.end(), o.data.begin(), o.data.end());
          return all;
        };
        std::vector<int64_t> ao, bo_all;
        const std::vector<uint16_t> a = concat(as, ao), b = concat(bs, bo_all);
        const std::vector<int64_t> bo = {bo_all[0], bo_all[0], bo_all[1]};
        std::vector<float> c(static_cast<size_t>(3 * s.m * s.n), -1.0f);
        cpu::gemm_bf16_batched(Bf16GemmPath::kFloat32, 3, ao.data(), bo.data(), s.m, s.n, s.k, a.data(), as[0].rs,
                               as[0].cs, b.data(), bs[0].rs, bs[0].cs, c.data(), s.m * s.n, s.n);
        std::vector<float> af(a.size()), bf(b.size()), cf(c.size(), -2.0f);
        for (size_t i = 0; i < a.size(); ++i) af[i] = static_cast<float>(BFloat16::from_bits(a[i]));
        for (size_t i = 0; i < b.size(); ++i) bf[i] = static_cast<float>(BFloat16::from_bits(b[i]));
        cpu::gemm_batched(3, ao.data(), bo.data(), s.m, s.n, s.k, af.data(), as[0].rs, as[0].cs, bf.data(), bs[0].rs,
                          bs[0].cs, cf.data(), s.m * s.n, s.n);
        EXPECT_EQ(std::memcmp(c.data(), cf.data(), c.size() * sizeof(float)), 0);
        const std::vector<float> c2(c.begin() + 2 * s.m * s.n, c.end());
        EXPECT_TRUE(near_reference(c2, s.m, s.n, s.k, as[2], bs[1]));
      }
  // without the AVX-512 kernel (widened copies and Eigen)
  const bool was = cpu::gemm_f32_uses_avx512();
  cpu::set_gemm_f32_avx512(false);
  const Operand a = make(45, 77, 1), b = make(77, 50, 0);
  EXPECT_TRUE(near_reference(run(Bf16GemmPath::kFloat32, 45, 50, 77, a, b), 45, 50, 77, a, b));
  cpu::set_gemm_f32_avx512(was);
}

// With a bfloat16 output (c16), every path stores BFloat16(float) of the very
// float32 sums it would have stored in C: the same bits, over several K blocks
// (the partial sums then go through C), edge tiles, a batch with broadcast
// offsets, K = 0, and Eigen's path (AVX-512 kernel off); ties round to even and
// NaN becomes 0x7fc0.
TEST(GemmBf16, RoundedOutputIsTheRoundedFloat32Result) {
  std::vector<Bf16GemmPath> paths;
  for (Bf16GemmPath p : {Bf16GemmPath::kFloat32, Bf16GemmPath::kAvx512Emulated, Bf16GemmPath::kAvx512Bf16,
                         Bf16GemmPath::kAmxEmulated, Bf16GemmPath::kAmxBf16})
    if (cpu::bf16_gemm_path_available(p)) paths.push_back(p);
  auto check = [](Bf16GemmPath path, int64_t m, int64_t n, int64_t k, const std::vector<uint16_t>& a,
                  const std::vector<int64_t>& ao, int64_t ars, int64_t acs, const std::vector<uint16_t>& b,
                  const std::vector<int64_t>& bo, int64_t brs, int64_t bcs) {
    const int64_t batch = static_cast<int64_t>(ao.size());
    std::vector<float> c(static_cast<size_t>(batch * m * n), -1.0f), scratch(c.size(), -1.0f);
    std::vector<uint16_t> c16(c.size(), 0x1234);
    cpu::gemm_bf16_batched(path, batch, ao.data(), bo.data(), m, n, k, a.data(), ars, acs, b.data(), brs, bcs, c.data(),
                           m * n, n);
    cpu::gemm_bf16_batched(path, batch, ao.data(), bo.data(), m, n, k, a.data(), ars, acs, b.data(), brs, bcs,
                           scratch.data(), m * n, n, c16.data());
    for (size_t i = 0; i < c.size(); ++i)
      if (c16[i] != BFloat16(c[i]).x)
        return ::testing::AssertionFailure()
               << "element " << i << ": " << c16[i] << " for " << c[i] << " (rounds to " << BFloat16(c[i]).x << ")";
    return ::testing::AssertionSuccess();
  };
  struct S {
    int64_t m, n, k;
  };
  for (Bf16GemmPath path : paths)
    for (const S& s : {S{1, 40, 7}, S{25, 65, 63}, S{30, 40, 601}, S{130, 300, 129}, S{13, 17, 0}, S{40, 70, 1100},
                       S{300, 40, 129}}) {
      SCOPED_TRACE(std::string(cpu::bf16_gemm_path_name(path)) + " " + std::to_string(s.m) + "x" + std::to_string(s.n) +
                   "x" + std::to_string(s.k));
      const Operand a = make(s.m, std::max<int64_t>(s.k, 1), 0), b = make(std::max<int64_t>(s.k, 1), s.n, 1);
      EXPECT_TRUE(check(path, s.m, s.n, s.k, a.data, {0}, a.rs, a.cs, b.data, {0}, b.rs, b.cs));
      // a batch of three A matrices over one B (broadcast offsets)
      std::vector<uint16_t> a3;
      for (int x = 0; x < 3; ++x) a3.insert(a3.end(), a.data.begin(), a.data.end());
      const int64_t sz = static_cast<int64_t>(a.data.size());
      EXPECT_TRUE(check(path, s.m, s.n, s.k, a3, {0, sz, 2 * sz}, a.rs, a.cs, b.data, {0, 0, 0}, b.rs, b.cs));
    }
  // Eigen's path (no AVX-512 kernel) rounds in a pass
  const bool was = cpu::gemm_f32_uses_avx512();
  cpu::set_gemm_f32_avx512(false);
  const Operand a = make(45, 77, 1), b = make(77, 50, 0);
  EXPECT_TRUE(check(Bf16GemmPath::kFloat32, 45, 50, 77, a.data, {0}, a.rs, a.cs, b.data, {0}, b.rs, b.cs));
  cpu::set_gemm_f32_avx512(was);
  // ties to even, and NaN (inf * 0): (1, 2) x (2, 5), hand-computed bits
  const auto bits = [](float f) { return BFloat16(f).x; };
  const std::vector<uint16_t> a1 = {bits(1.0f), bits(1.0f)};
  const float e7 = std::ldexp(1.0f, -7), e8 = std::ldexp(1.0f, -8);
  const std::vector<uint16_t> b1 = {
      bits(1.0f), bits(1.0f + e7), bits(-1.0f), bits(3.0f), bits(INFINITY),  // the last column: inf - inf
      bits(e8),   bits(e8),        bits(-e8),   bits(e7),   bits(-INFINITY)};
  const uint16_t want[5] = {0x3f80, 0x3f82, 0xbf80, 0x4040, 0x7fc0};  // 1, 1 + 2^-6, -1, 3, NaN
  for (Bf16GemmPath path : paths) {
    std::vector<float> scratch(5);
    std::vector<uint16_t> c16(5);
    const int64_t zero = 0;
    cpu::gemm_bf16_batched(path, 1, &zero, &zero, 1, 5, 2, a1.data(), 2, 1, b1.data(), 5, 1, scratch.data(), 5, 5,
                           c16.data());
    for (int j = 0; j < 5; ++j) EXPECT_EQ(c16[j], want[j]) << cpu::bf16_gemm_path_name(path) << " column " << j;
  }
}

// A column bias joins the float32 sums before the one rounding: on every path,
// C = bias + A * B within the summation bound of the float64 result (one more
// addition; the bias is 2 + [-2, 2], so a dropped or doubled bias is off by far
// more), with one and several K blocks, edge tiles, a broadcast batch, K = 0
// and Eigen's path; the bfloat16 output is BFloat16(float) of that C bit for
// bit; and a hand-computed case that rounding twice gets wrong: 1 + 2^-8 (a
// tie, to even: 1) + 2^-9 rounds once to 1 + 2^-7 (0x3f81).
TEST(GemmBf16, ColumnBiasJoinsTheFloat32SumsBeforeTheRounding) {
  auto check = [](Bf16GemmPath path, int64_t m, int64_t n, int64_t k, const Operand& a, const Operand& b,
                  int64_t batch) -> ::testing::AssertionResult {
    std::vector<float> bias(static_cast<size_t>(n));
    for (float& v : bias) v = 2.0f + static_cast<float>(value(next_bf16()));
    std::vector<uint16_t> a3;  // batch copies of A over one B (broadcast offsets)
    std::vector<int64_t> ao, bo(static_cast<size_t>(batch), 0);
    const int64_t sz = static_cast<int64_t>(a.data.size());
    for (int64_t x = 0; x < batch; ++x) {
      a3.insert(a3.end(), a.data.begin(), a.data.end());
      ao.push_back(x * sz);
    }
    std::vector<float> c(static_cast<size_t>(batch * m * n), -1.0f), scratch(c.size(), -1.0f);
    std::vector<uint16_t> c16(c.size(), 0x1234);
    cpu::gemm_bf16_batched(path, batch, ao.data(), bo.data(), m, n, k, a3.data(), a.rs, a.cs, b.data.data(), b.rs, b.cs,
                           c.data(), m * n, n, nullptr, bias.data());
    cpu::gemm_bf16_batched(path, batch, ao.data(), bo.data(), m, n, k, a3.data(), a.rs, a.cs, b.data.data(), b.rs, b.cs,
                           scratch.data(), m * n, n, c16.data(), bias.data());
    for (int64_t x = 0; x < batch; ++x)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double ref = bias[j], mag = std::fabs(bias[j]);
          for (int64_t p = 0; p < k; ++p) {
            const double t = value(a.at(i, p)) * value(b.at(p, j));
            ref += t;
            mag += std::fabs(t);
          }
          const size_t e = static_cast<size_t>((x * m + i) * n + j);
          const double err = std::fabs(c[e] - ref), bound = (k + 2) * std::ldexp(1.0, -24) * mag;
          if (!(err <= bound))
            return ::testing::AssertionFailure() << "matrix " << x << " C(" << i << ", " << j << ") = " << c[e]
                                                 << ", reference " << ref << ": error " << err << " over " << bound;
          if (c16[e] != BFloat16(c[e]).x)
            return ::testing::AssertionFailure() << "matrix " << x << " (" << i << ", " << j << "): " << c16[e]
                                                 << " for " << c[e] << " (rounds to " << BFloat16(c[e]).x << ")";
        }
    return ::testing::AssertionSuccess();
  };
  struct S {
    int64_t m, n, k;
  };
  for (Bf16GemmPath path : paths())
    for (const S& s :
         {S{1, 40, 7}, S{25, 65, 63}, S{30, 40, 601}, S{13, 17, 0}, S{40, 70, 1100}, S{3, 1, 5}, S{300, 40, 129}}) {
      SCOPED_TRACE(std::string(cpu::bf16_gemm_path_name(path)) + " " + std::to_string(s.m) + "x" + std::to_string(s.n) +
                   "x" + std::to_string(s.k));
      const Operand a = make(s.m, std::max<int64_t>(s.k, 1), 0), b = make(std::max<int64_t>(s.k, 1), s.n, 1);
      EXPECT_TRUE(check(path, s.m, s.n, s.k, a, b, 1));
      EXPECT_TRUE(check(path, s.m, s.n, s.k, a, b, 3));
    }
  const bool was = cpu::gemm_f32_uses_avx512();
  cpu::set_gemm_f32_avx512(false);
  {
    SCOPED_TRACE("Eigen's path");
    const Operand a = make(45, 77, 1), b = make(77, 50, 0);
    EXPECT_TRUE(check(Bf16GemmPath::kFloat32, 45, 50, 77, a, b, 2));
  }
  cpu::set_gemm_f32_avx512(was);
  const auto bits = [](float f) { return BFloat16(f).x; };
  const std::vector<uint16_t> a1 = {bits(1.0f), bits(1.0f)}, b1 = {bits(1.0f), bits(std::ldexp(1.0f, -8))};
  const float bias1 = std::ldexp(1.0f, -9);
  for (Bf16GemmPath path : paths()) {
    float scratch = 0;
    uint16_t c16 = 0;
    const int64_t zero = 0;
    cpu::gemm_bf16_batched(path, 1, &zero, &zero, 1, 1, 2, a1.data(), 2, 1, b1.data(), 1, 1, &scratch, 1, 1, &c16,
                           &bias1);
    EXPECT_EQ(c16, 0x3f81) << cpu::bf16_gemm_path_name(path);
  }
}

// The bfloat16 GELU epilogues (Note [gemm epilogue]) on every path. Forward: h
// is, bit for bit, BFloat16(float) of the path's own float32 sum with the bias
// (gemm_bf16_batched), and act is gelu_tanh of that rounded h, rounded: within
// one bfloat16 step of the float64 GELU of h (the kernels' float32 GELU is a
// few ulp off the exact one, so a value near a rounding boundary may land on
// either side). Backward: (A B) * gelu_tanh'(pre) rounded once, within one
// bfloat16 step of the float64 product of the path's float32 sum and the
// derivative. Shapes: one and several K blocks, edge tiles, K = 0, pre-
// activations large enough to saturate the GELU, and Eigen's path.
TEST(GemmBf16, GeluEpiloguesRoundOnceFromTheFloat32Sums) {
  // one bfloat16 step at |v|: the spacing of bfloat16 numbers there (2^-7 relative, normal range)
  const auto step = [](double v) {
    return std::ldexp(1.0, std::max(std::ilogb(std::max(std::fabs(v), 1e-30)), -126) - 7);
  };
  const auto gelu = [](double x) {
    return x / (1 + std::exp(-2 * 0.79788456080286535588 * (x + 0.044715 * x * x * x)));
  };
  const auto gelu_grad = [](double x) {
    const double u = 0.79788456080286535588 * (x + 0.044715 * x * x * x), sg = 1 / (1 + std::exp(-2 * u));
    return sg * (1 + 2 * x * (1 - sg) * 0.79788456080286535588 * (1 + 3 * 0.044715 * x * x));
  };
  auto check = [&](Bf16GemmPath path, int64_t m, int64_t n, int64_t k, const Operand& a, const Operand& b,
                   float scale) -> ::testing::AssertionResult {
    std::vector<float> bias(static_cast<size_t>(n));
    for (float& v : bias) v = scale * static_cast<float>(value(next_bf16()));
    std::vector<uint16_t> pre(static_cast<size_t>(m * n));
    for (uint16_t& v : pre) v = BFloat16(scale * static_cast<float>(value(next_bf16()))).x;
    const size_t mn = static_cast<size_t>(m * n);
    std::vector<float> sum_b(mn), sum(mn), scratch(mn, -1.0f);
    const int64_t zero = 0;
    cpu::gemm_bf16_batched(path, 1, &zero, &zero, m, n, k, a.data.data(), a.rs, a.cs, b.data.data(), b.rs, b.cs,
                           sum_b.data(), 0, n, nullptr, bias.data());
    cpu::gemm_bf16(path, m, n, k, a.data.data(), a.rs, a.cs, b.data.data(), b.rs, b.cs, sum.data(), n);
    std::vector<uint16_t> h(mn, 0x1234), act(mn, 0x1234), dh(mn, 0x1234);
    cpu::GemmEpilogue fwd;
    fwd.kind = cpu::GemmEpilogue::Kind::kGeluForwardBf16;
    fwd.out16 = h.data(), fwd.act16 = act.data(), fwd.ld_out16 = fwd.ld_act16 = n;
    cpu::gemm_bf16_gelu_tanh(path, m, n, k, a.data.data(), a.rs, a.cs, b.data.data(), b.rs, b.cs, scratch.data(), n,
                             bias.data(), fwd);
    cpu::GemmEpilogue bwd;
    bwd.kind = cpu::GemmEpilogue::Kind::kGeluBackwardBf16;
    bwd.out16 = dh.data(), bwd.pre16 = pre.data(), bwd.ld_out16 = bwd.ld_pre16 = n;
    cpu::gemm_bf16_gelu_tanh(path, m, n, k, a.data.data(), a.rs, a.cs, b.data.data(), b.rs, b.cs, scratch.data(), n,
                             nullptr, bwd);
    for (size_t e = 0; e < mn; ++e) {
      if (h[e] != BFloat16(sum_b[e]).x)
        return ::testing::AssertionFailure() << "h[" << e << "] = " << h[e] << ", want " << BFloat16(sum_b[e]).x;
      const double hv = value(h[e]), want_a = gelu(hv), got_a = value(act[e]);
      if (!(std::fabs(got_a - want_a) <= step(want_a)))
        return ::testing::AssertionFailure()
               << "act[" << e << "] = " << got_a << " for h " << hv << ", want " << want_a;
      const double want_d = static_cast<double>(sum[e]) * gelu_grad(value(pre[e])), got_d = value(dh[e]);
      if (!(std::fabs(got_d - want_d) <= step(want_d)))
        return ::testing::AssertionFailure() << "dh[" << e << "] = " << got_d << ", want " << want_d;
    }
    return ::testing::AssertionSuccess();
  };
  struct S {
    int64_t m, n, k;
    float scale;
  };
  for (Bf16GemmPath path : paths())
    for (const S& s :
         {S{1, 40, 7, 1}, S{25, 65, 63, 1}, S{30, 40, 601, 1}, S{13, 17, 0, 1}, S{20, 33, 9, 30}, S{300, 40, 129, 1}}) {
      SCOPED_TRACE(std::string(cpu::bf16_gemm_path_name(path)) + " " + std::to_string(s.m) + "x" + std::to_string(s.n) +
                   "x" + std::to_string(s.k) + " scale " + std::to_string(s.scale));
      const Operand a = make(s.m, std::max<int64_t>(s.k, 1), 0), b = make(std::max<int64_t>(s.k, 1), s.n, 1);
      EXPECT_TRUE(check(path, s.m, s.n, s.k, a, b, s.scale));
    }
  const bool was = cpu::gemm_f32_uses_avx512();
  cpu::set_gemm_f32_avx512(false);
  {
    SCOPED_TRACE("Eigen's path");
    const Operand a = make(45, 77, 1), b = make(77, 50, 0);
    EXPECT_TRUE(check(Bf16GemmPath::kFloat32, 45, 50, 77, a, b, 1));
  }
  cpu::set_gemm_f32_avx512(was);
}

TEST(GemmBf16, TheChosenPathIsOneThisCpuRuns) {
  const Bf16GemmPath p = cpu::bf16_gemm_path();
  std::printf("bfloat16 matmuls take the %s path\n", cpu::bf16_gemm_path_name(p));
  EXPECT_TRUE(cpu::bf16_gemm_path_available(p)) << cpu::bf16_gemm_path_name(p);
  EXPECT_TRUE(cpu::bf16_gemm_path_available(Bf16GemmPath::kFloat32));
  EXPECT_STREQ(cpu::bf16_gemm_path_name(Bf16GemmPath::kAvx512Bf16), "avx512_bf16");
  // With WEFT_CPU_BF16 unset, the choice is the rule for this CPU.
  if (std::getenv("WEFT_CPU_BF16") == nullptr)
    EXPECT_EQ(p, cpu::default_bf16_gemm_path(cpu::bf16_gemm_path_available(Bf16GemmPath::kAmxBf16),
                                             cpu::bf16_gemm_path_available(Bf16GemmPath::kAvx512Bf16),
                                             std::string(cpu_vendor()) == "GenuineIntel"));
}

// AMX first; VDPBF16PS only off Intel, whose cores issue it at half their FMA
// rate; else the float32 path.
TEST(GemmBf16, DefaultPathRule) {
  using P = Bf16GemmPath;
  EXPECT_EQ(cpu::default_bf16_gemm_path(true, true, true), P::kAmxBf16);
  EXPECT_EQ(cpu::default_bf16_gemm_path(true, true, false), P::kAmxBf16);
  EXPECT_EQ(cpu::default_bf16_gemm_path(false, true, true), P::kFloat32);
  EXPECT_EQ(cpu::default_bf16_gemm_path(false, true, false), P::kAvx512Bf16);
  EXPECT_EQ(cpu::default_bf16_gemm_path(false, false, true), P::kFloat32);
  EXPECT_EQ(cpu::default_bf16_gemm_path(false, false, false), P::kFloat32);
}

}  // namespace
}  // namespace weft
