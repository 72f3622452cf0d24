// cpu::gemm (core/cpu/gemm.h) on raw buffers against a double-precision triple
// loop: odd shapes (edge tiles, several K blocks, more rows/columns than one
// packing block), every transpose combination, padded leading dimensions, general
// and zero strides, accumulate, the fused column bias, batched offsets, and
// bitwise-identical results at 1, 2 and 3 threads. Runs the AVX-512 kernel (where
// the CPU has it) and the Eigen path; float64 always takes the Eigen path.
#include "core/cpu/gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/parallel.h"

namespace weft {
namespace {

// Operand storage kinds. Element (r, c) lives at data[off + r * rs + c * cs].
enum Kind { kRow, kCol, kRowPadded, kColPadded, kStrided, kBroadcastRows };
const char* kind_name(Kind k) {
  static const char* names[] = {"row", "col", "row+ld", "col+ld", "strided", "bcast-rows"};
  return names[k];
}

uint64_t g_state = 1;
// Values k/64 for integer k in [-64, 64): exact in float, products exact in double.
float next_value() {
  g_state = g_state * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<float>(static_cast<int>((g_state >> 33) % 128) - 64) / 64.0f;
}

template <typename T>
struct Mat {
  std::vector<T> data;  // includes padding filled with junk the GEMM must not read into C
  int64_t off = 0, rs = 0, cs = 0;
  T at(int64_t r, int64_t c) const { return data[off + r * rs + c * cs]; }
};

template <typename T>
Mat<T> make(int64_t rows, int64_t cols, Kind kind) {
  Mat<T> m;
  int64_t size = 0;
  switch (kind) {
    case kRow: m.rs = cols, m.cs = 1, size = rows * cols; break;
    case kCol: m.rs = 1, m.cs = rows, size = rows * cols; break;
    case kRowPadded: m.rs = cols + 3, m.cs = 1, size = rows * (cols + 3); break;
    case kColPadded: m.rs = 1, m.cs = rows + 5, size = cols * (rows + 5); break;
    case kStrided: m.rs = 2 * cols + 1, m.cs = 2, size = rows * (2 * cols + 1); break;  // neither row- nor col-major
    case kBroadcastRows: m.rs = 0, m.cs = 1, size = cols; break;                        // every row the same
  }
  m.off = 2;  // not at the start of the buffer
  m.data.resize(size + 4);
  for (T& v : m.data) v = next_value();
  return m;
}

// Column bias values: +-3 plus a value in [-1, 1) (exact in float), so a dropped
// or doubled bias is off by at least 2, far outside the bound below.
template <typename T>
std::vector<T> make_bias(int64_t n) {
  std::vector<T> bias(n);
  for (int64_t j = 0; j < n; ++j) bias[j] = T(j % 2 ? 3 : -3) + T(next_value());
  return bias;
}

// C (m, n; ldc = n + pad) from gemm vs the exact product in double (plus a column
// bias when `bias`). The bound is the classical one for a length-k float sum,
// |fl(s) - s| <= (k + 1) u sum|terms| (k + 2 with the bias term), which no
// dropped, repeated or misplaced term can stay within.
template <typename T>
::testing::AssertionResult check_gemm(int64_t m, int64_t n, int64_t k, Kind ka, Kind kb, bool accumulate,
                                      int64_t pad = 0, bool bias = false) {
  Mat<T> A = make<T>(m, k, ka), B = make<T>(k, n, kb);
  const std::vector<T> cb = bias ? make_bias<T>(n) : std::vector<T>();
  const int64_t ldc = n + pad;
  std::vector<T> c(m * ldc + 1);
  for (T& v : c) v = next_value();
  const std::vector<T> c0 = c;
  cpu::gemm<T>(m, n, k, A.data.data() + A.off, A.rs, A.cs, B.data.data() + B.off, B.rs, B.cs, c.data(), ldc, accumulate,
               bias ? cb.data() : nullptr);
  const double u = std::is_same_v<T, float> ? std::ldexp(1.0, -24) : std::ldexp(1.0, -53);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const T got = c[i * ldc + j];
      if (j >= n) {
        if (got != c0[i * ldc + j])
          return ::testing::AssertionFailure() << "wrote outside C at (" << i << ", " << j << ")";
        continue;
      }
      double s = accumulate ? c0[i * ldc + j] : bias ? cb[j] : 0.0, mag = std::abs(s);
      for (int64_t p = 0; p < k; ++p) {
        const double t = double(A.at(i, p)) * double(B.at(p, j));
        s += t;
        mag += std::abs(t);
      }
      if (!(std::abs(got - s) <= (k + 2) * u * 1.01 * mag))
        return ::testing::AssertionFailure()
               << "C(" << i << ", " << j << ") = " << got << ", expected " << s << " (m=" << m << " n=" << n
               << " k=" << k << " A " << kind_name(ka) << ", B " << kind_name(kb) << (accumulate ? ", accumulate" : "")
               << (bias ? ", bias" : "") << " pad=" << pad << ")";
    }
  }
  if (c.back() != c0.back()) return ::testing::AssertionFailure() << "wrote past the end of C";
  return ::testing::AssertionSuccess();
}

// Runs the body once on each float32 path this CPU has (AVX-512 kernel, AVX2
// kernel, Eigen), restoring the default.
template <typename F>
void for_each_f32_path(F&& body) {
  for (int path = 0; path < 3; ++path) {
    cpu::set_gemm_f32_avx512(path == 0);
    cpu::set_gemm_f32_avx2(path <= 1);
    const char* runs = cpu::gemm_f32_uses_avx512() ? "avx512 kernel"
                       : cpu::gemm_f32_uses_avx2() ? "avx2 kernel"
                                                   : "eigen";
    if (path == 0 && !cpu::gemm_f32_uses_avx512()) continue;  // the next round runs what this one would
    if (path == 1 && !cpu::gemm_f32_uses_avx2()) continue;
    SCOPED_TRACE(runs);
    body();
  }
  cpu::set_gemm_f32_avx512(true);
  cpu::set_gemm_f32_avx2(true);
}

const Kind kPlain[] = {kRow, kCol};

TEST(Gemm, OddShapesEveryTransposeVsNaive) {
  const int64_t sizes[] = {1, 7, 17, 63, 65, 129};
  for_each_f32_path([&] {
    for (int64_t m : sizes)
      for (int64_t n : sizes)
        for (int64_t k : sizes)
          for (Kind ka : kPlain)
            for (Kind kb : kPlain) ASSERT_TRUE(check_gemm<float>(m, n, k, ka, kb, false));
  });
}

TEST(Gemm, EveryPanelHeightAndWidthVsNaive) {
  // m = 1..26 covers every micro-kernel height (one panel up to 12 rows, then two
  // near-equal panels); n covers one and two vectors per row with masked tails
  for (int64_t m = 1; m <= 26; ++m)
    for (int64_t n : {5, 16, 17, 32, 33})
      for (Kind ka : kPlain)
        for (Kind kb : kPlain) ASSERT_TRUE(check_gemm<float>(m, n, 21, ka, kb, m % 2 == 0));
}

TEST(Gemm, LargeShapesVsNaive) {
  // one K block up to k = 384 (300, 257, and 384 with more rows than one packed
  // A block, m > 1536: the largest packing), several beyond (1000, 1031, 2049),
  // more columns than one packed B block (n > 512), tall/flat extremes; a
  // column-major A goes through the chunked packing (chunks of 32 columns and
  // a partial one)
  struct S {
    int64_t m, n, k;
  };
  const S shapes[] = {{1000, 129, 300}, {129, 1000, 257}, {65, 63, 1000},   {1000, 1000, 7}, {1600, 33, 40},
                      {40, 1100, 50},   {3, 2, 2049},     {513, 257, 1031}, {1600, 40, 384}};
  for (const S& s : shapes)
    for (Kind ka : kPlain)
      for (Kind kb : kPlain) EXPECT_TRUE(check_gemm<float>(s.m, s.n, s.k, ka, kb, false));
}

TEST(Gemm, StridesLeadingDimsAndAccumulate) {
  const Kind kinds[] = {kRow, kCol, kRowPadded, kColPadded, kStrided};
  for_each_f32_path([&] {
    for (Kind ka : kinds)
      for (Kind kb : kinds)
        for (bool acc : {false, true}) {
          EXPECT_TRUE(check_gemm<float>(37, 45, 300, ka, kb, acc, 3));
          EXPECT_TRUE(check_gemm<float>(13, 33, 16, ka, kb, acc, 0));
        }
    // zero row stride (a broadcast operand): every row of A (or of B) the same
    EXPECT_TRUE(check_gemm<float>(20, 40, 30, kBroadcastRows, kRow, false));
    EXPECT_TRUE(check_gemm<float>(20, 40, 30, kCol, kBroadcastRows, true));
  });
  for (Kind ka : kinds)
    for (Kind kb : kinds)
      for (bool acc : {false, true}) EXPECT_TRUE(check_gemm<double>(29, 31, 70, ka, kb, acc, 2));
}

TEST(Gemm, EmptyInnerDimension) {
  for_each_f32_path([&] {
    std::vector<float> c(6, 5.0f);
    cpu::gemm<float>(2, 3, 0, nullptr, 0, 1, nullptr, 3, 1, c.data(), 3, true);
    EXPECT_EQ(c, std::vector<float>(6, 5.0f));  // C += nothing
    cpu::gemm<float>(2, 3, 0, nullptr, 0, 1, nullptr, 3, 1, c.data(), 3, false);
    EXPECT_EQ(c, std::vector<float>(6, 0.0f));
    cpu::gemm<float>(0, 3, 4, nullptr, 4, 1, nullptr, 3, 1, c.data(), 3, false);  // no rows: no-op
  });
}

TEST(Gemm, BatchedOffsetsVsNaive) {
  // 4 matrices; A's batch broadcast (two offsets repeat), B col-major with gaps
  const int64_t m = 19, n = 35, k = 41, batch = 4;
  std::vector<float> a(2 * m * k), b(batch * (k * n + 7)), c(batch * m * n);
  for (float& v : a) v = next_value();
  for (float& v : b) v = next_value();
  const int64_t a_off[] = {0, m * k, 0, m * k};
  const int64_t b_off[] = {0, k * n + 7, 2 * (k * n + 7), 3 * (k * n + 7)};
  for_each_f32_path([&] {
    cpu::gemm_batched(batch, a_off, b_off, m, n, k, a.data(), k, 1, b.data(), 1, k, c.data(), m * n, n);
    for (int64_t x = 0; x < batch; ++x)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double s = 0, mag = 0;
          for (int64_t p = 0; p < k; ++p) {
            double t = double(a[a_off[x] + i * k + p]) * double(b[b_off[x] + j * k + p]);
            s += t, mag += std::abs(t);
          }
          ASSERT_LE(std::abs(c[x * m * n + i * n + j] - s), (k + 1) * std::ldexp(1.0, -24) * mag) << x << " " << i;
        }
  });
}

TEST(Gemm, BitwiseIdenticalAcrossThreadCounts) {
  struct S {
    int64_t m, n, k;
    Kind ka, kb;
  };
  const S shapes[] = {{300, 200, 150, kRow, kRow},
                      {64, 2048, 784, kRow, kCol},
                      {2048, 784, 64, kCol, kRow},
                      {1000, 999, 1001, kRow, kRow},
                      {10, 2048, 64, kCol, kRow},
                      {2048, 10, 300, kStrided, kCol},
                      {1700, 40, 520, kColPadded, kRowPadded}};
  const int prev = get_num_threads();
  for_each_f32_path([&] {
    for (const S& s : shapes) {
      Mat<float> A = make<float>(s.m, s.k, s.ka), B = make<float>(s.k, s.n, s.kb);
      std::vector<float> init(s.m * s.n);
      for (float& v : init) v = next_value();
      std::vector<std::vector<float>> out;
      for (int threads : {1, 2, 3})
        for (bool acc : {false, true}) {
          set_num_threads(threads);
          std::vector<float> c = init;
          cpu::gemm<float>(s.m, s.n, s.k, A.data.data() + A.off, A.rs, A.cs, B.data.data() + B.off, B.rs, B.cs,
                           c.data(), s.n, acc);
          out.push_back(std::move(c));
        }
      set_num_threads(prev);
      for (size_t r = 2; r < out.size(); ++r)
        EXPECT_TRUE(out[r] == out[r % 2]) << "m=" << s.m << " n=" << s.n << " k=" << s.k << " run " << r;
    }
    // batched: tiles of several matrices shared out together
    const int64_t m = 70, n = 90, k = 60, batch = 5;
    std::vector<float> a(batch * m * k), b(k * n);
    for (float& v : a) v = next_value();
    for (float& v : b) v = next_value();
    std::vector<int64_t> a_off(batch), b_off(batch, 0);
    for (int64_t x = 0; x < batch; ++x) a_off[x] = x * m * k;
    std::vector<float> c1(batch * m * n), c2(batch * m * n);
    set_num_threads(1);
    cpu::gemm_batched(batch, a_off.data(), b_off.data(), m, n, k, a.data(), k, 1, b.data(), 1, k, c1.data(), m * n, n);
    set_num_threads(2);
    cpu::gemm_batched(batch, a_off.data(), b_off.data(), m, n, k, a.data(), k, 1, b.data(), 1, k, c2.data(), m * n, n);
    set_num_threads(prev);
    EXPECT_TRUE(c1 == c2);
  });
}

// Note [narrow gemm] (gemm_avx512.cc): a C with 2..15 columns is computed
// transposed. Each element is the same FMA chain over the same K blocks as in a
// wider product, so the narrow C must equal, bit for bit, the first n columns of
// the product with B widened to 40 columns (the direct path), also when
// accumulating, batched, with a padded C and on 1 and 3 threads; and it must
// agree with the float64 reference (with a bias too).
TEST(Gemm, NarrowProductsEqualTheColumnsOfAWideOne) {
  struct S {
    int64_t m, n, k;
    Kind ka, kb;
  };
  const S shapes[] = {{32, 9, 784, kRow, kCol},
                      {64, 10, 2048, kRow, kCol},
                      {16, 2, 5, kCol, kRow},
                      {100, 15, 390, kCol, kRow},
                      {37, 7, 1000, kRowPadded, kColPadded},
                      {1700, 3, 60, kRow, kRow},
                      {20000, 7, 20, kRow, kCol}};  // a scratch C^T of over 1 MiB: allocated for the call
  const int64_t wide = 40, batch = 2, pad = 3;
  const int prev = get_num_threads();
  for (const S& s : shapes) {
    SCOPED_TRACE("m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k));
    Mat<float> A = make<float>(batch * s.m, s.k, s.ka), B = make<float>(s.k, wide, s.kb);
    // matrix x of the batch: rows [x m, (x + 1) m) of A, the same B
    const int64_t a_off[] = {A.off, A.off + s.m * A.rs}, b_off[] = {B.off, B.off};
    std::vector<float> init(batch * s.m * wide);
    for (float& v : init) v = next_value();
    for (bool acc : {false, true}) {
      std::vector<float> cw = init;  // (batch, m, wide)
      cpu::gemm_batched(batch, a_off, b_off, s.m, wide, s.k, A.data.data(), A.rs, A.cs, B.data.data(), B.rs, B.cs,
                        cw.data(), s.m * wide, wide, acc);
      for (int threads : {1, 3}) {
        set_num_threads(threads);
        const int64_t ldc = s.n + pad;
        std::vector<float> cn(batch * s.m * ldc);  // (batch, m, n + pad)
        for (int64_t x = 0; x < batch; ++x)
          for (int64_t i = 0; i < s.m; ++i)
            for (int64_t j = 0; j < ldc; ++j)
              cn[(x * s.m + i) * ldc + j] = j < s.n ? init[(x * s.m + i) * wide + j] : 77.0f;
        cpu::gemm_batched(batch, a_off, b_off, s.m, s.n, s.k, A.data.data(), A.rs, A.cs, B.data.data(), B.rs, B.cs,
                          cn.data(), s.m * ldc, ldc, acc);
        for (int64_t x = 0; x < batch; ++x)
          for (int64_t i = 0; i < s.m; ++i)
            for (int64_t j = 0; j < ldc; ++j) {
              const float want = j < s.n ? cw[(x * s.m + i) * wide + j] : 77.0f;
              ASSERT_EQ(cn[(x * s.m + i) * ldc + j], want)
                  << "matrix " << x << " C(" << i << ", " << j << ")" << (acc ? " accumulate" : "") << ", " << threads
                  << " threads";
            }
      }
      set_num_threads(prev);
    }
    for (bool bias : {false, true}) EXPECT_TRUE(check_gemm<float>(s.m, s.n, s.k, s.ka, s.kb, !bias, 2, bias));
  }
}

// The fused column bias (gemm.h): C = bias + A B. Ragged shapes (m, n not
// multiples of the 12 x 32 micro-tile or of 16), n = 1 (the transposed
// matrix-vector path when C is contiguous, the plain one when it is padded),
// m = 1, several K blocks (k > 384), more columns than one packed B block
// (n > 256: the bias offset by the block's first column), more rows than one packed
// A block, every transpose combination; both float32 paths and float64.
TEST(Gemm, ColumnBiasVsNaive) {
  struct S {
    int64_t m, n, k;
  };
  const S shapes[] = {{1, 1, 1},      {1, 37, 5},    {37, 1, 300},  {2, 1, 7},       {13, 17, 16},
                      {25, 33, 257},  {12, 32, 256}, {11, 31, 513}, {100, 300, 300}, {7, 530, 40},
                      {1600, 40, 70}, {3, 2, 2049},  {65, 63, 1000}};
  for_each_f32_path([&] {
    for (const S& s : shapes)
      for (Kind ka : kPlain)
        for (Kind kb : kPlain)
          for (int64_t pad : {0, 3}) ASSERT_TRUE(check_gemm<float>(s.m, s.n, s.k, ka, kb, false, pad, true));
    for (Kind ka : {kRowPadded, kColPadded, kStrided, kBroadcastRows})
      for (Kind kb : {kRowPadded, kColPadded, kStrided})
        EXPECT_TRUE(check_gemm<float>(37, 45, 300, ka, kb, false, 2, true));
  });
  for (const S& s : shapes) {
    if (s.m * s.n * s.k > 5'000'000) continue;  // keeps the float64 run short
    for (Kind ka : kPlain)
      for (Kind kb : kPlain)
        for (int64_t pad : {0, 3}) ASSERT_TRUE(check_gemm<double>(s.m, s.n, s.k, ka, kb, false, pad, true));
  }
  for (Kind ka : {kRowPadded, kStrided})
    for (Kind kb : {kColPadded, kStrided}) EXPECT_TRUE(check_gemm<double>(29, 31, 70, ka, kb, false, 2, true));
}

TEST(Gemm, ColumnBiasEveryPanelHeightAndWidth) {
  // every micro-kernel height, one and two vectors per row, masked bias tails
  for_each_f32_path([&] {
    for (int64_t m = 1; m <= 26; ++m)
      for (int64_t n : {1, 5, 15, 16, 17, 31, 32, 33, 47})
        for (Kind ka : kPlain)
          for (Kind kb : kPlain)
            ASSERT_TRUE(check_gemm<float>(m, n, m % 3 == 0 ? 290 : 21, ka, kb, false, m % 2, true));
  });
}

TEST(Gemm, ColumnBiasThreadsBatchedAndEdgeCases) {
  // every thread count gives the right result (each thread's slab of columns reads
  // its own part of the bias) and the same bits (Note [gemm determinism])
  struct S {
    int64_t m, n, k;
    Kind ka, kb;
  };
  const S shapes[] = {
      {64, 2048, 300, kRow, kCol}, {2048, 10, 300, kCol, kRow}, {300, 200, 150, kRow, kRow}, {513, 1, 257, kRow, kRow}};
  const int prev = get_num_threads();
  for_each_f32_path([&] {
    for (const S& s : shapes) {
      for (int threads : {1, 3}) {
        set_num_threads(threads);
        EXPECT_TRUE(check_gemm<float>(s.m, s.n, s.k, s.ka, s.kb, false, 0, true)) << threads << " threads";
      }
      Mat<float> A = make<float>(s.m, s.k, s.ka), B = make<float>(s.k, s.n, s.kb);
      const std::vector<float> bias = make_bias<float>(s.n);
      std::vector<std::vector<float>> out;
      for (int threads : {1, 2, 3}) {
        set_num_threads(threads);
        std::vector<float> c(s.m * s.n);
        cpu::gemm<float>(s.m, s.n, s.k, A.data.data() + A.off, A.rs, A.cs, B.data.data() + B.off, B.rs, B.cs, c.data(),
                         s.n, false, bias.data());
        out.push_back(std::move(c));
      }
      set_num_threads(prev);
      EXPECT_TRUE(out[1] == out[0] && out[2] == out[0]) << "m=" << s.m << " n=" << s.n << " k=" << s.k;
    }
    // batched: one bias shared by every matrix
    const int64_t m = 19, n = 35, k = 300, batch = 3;
    std::vector<float> a(batch * m * k), b(k * n), c(batch * m * n);
    for (float& v : a) v = next_value();
    for (float& v : b) v = next_value();
    const std::vector<float> bias = make_bias<float>(n);
    const int64_t a_off[] = {0, m * k, 2 * m * k}, b_off[] = {0, 0, 0};
    cpu::gemm_batched(batch, a_off, b_off, m, n, k, a.data(), k, 1, b.data(), n, 1, c.data(), m * n, n, false,
                      bias.data());
    for (int64_t x = 0; x < batch; ++x)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double s = bias[j], mag = std::abs(s);
          for (int64_t p = 0; p < k; ++p) {
            double t = double(a[a_off[x] + i * k + p]) * double(b[p * n + j]);
            s += t, mag += std::abs(t);
          }
          ASSERT_LE(std::abs(c[x * m * n + i * n + j] - s), (k + 2) * std::ldexp(1.0, -24) * mag) << x << " " << i;
        }
    // empty inner dimension: C = bias
    std::vector<float> c2(6, 5.0f);
    const float b3[] = {1.5f, -2.0f, 4.0f};
    cpu::gemm<float>(2, 3, 0, nullptr, 0, 1, nullptr, 3, 1, c2.data(), 3, false, b3);
    EXPECT_EQ(c2, (std::vector<float>{1.5f, -2.0f, 4.0f, 1.5f, -2.0f, 4.0f}));
    // a bias with accumulate is refused
    std::vector<float> one(1, 1.0f);
    EXPECT_THROW(cpu::gemm<float>(1, 1, 1, one.data(), 1, 1, one.data(), 1, 1, c2.data(), 1, true, one.data()), Error);
  });
  std::vector<double> d(4, 7.0), db = {0.25, -1.0};
  cpu::gemm<double>(2, 2, 0, nullptr, 0, 1, nullptr, 2, 1, d.data(), 2, false, db.data());
  EXPECT_EQ(d, (std::vector<double>{0.25, -1.0, 0.25, -1.0}));
  EXPECT_THROW(cpu::gemm<double>(1, 1, 1, d.data(), 1, 1, d.data(), 1, 1, d.data() + 2, 1, true, db.data()), Error);
}

// gemm_row_sums (gemm.h): C = A B as gemm gives it (bit for bit), and A's row
// sums within the float summation bound of the exact sums, on both float32
// paths: every A layout (the column-major one is summed while packed in chunks
// of 32, the others from each packed panel), several K blocks (k = 1000), more
// rows than one packed block (m = 1600), N split between threads (m <= n) and M
// split (m > n), n = 1 and 0, k = 0; the sums do not depend on the thread
// count.
TEST(Gemm, RowSumsVsNaive) {
  struct S {
    int64_t m, n, k;
    Kind ka;
  };
  const S shapes[] = {{7, 5, 3, kRow},           {37, 300, 1000, kCol},  {1600, 40, 450, kCol},
                      {50, 70, 129, kRowPadded}, {25, 33, 77, kStrided}, {300, 1, 40, kCol},
                      {13, 0, 20, kCol},         {13, 9, 0, kRow},       {100, 900, 64, kColPadded},
                      {900, 100, 64, kRow}};
  const int prev = get_num_threads();
  const double u = std::ldexp(1.0, -24);
  for_each_f32_path([&] {
    for (const S& s : shapes) {
      SCOPED_TRACE(std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) + " A " +
                   kind_name(s.ka));
      Mat<float> A = make<float>(s.m, s.k, s.ka), B = make<float>(s.k, s.n, kRow);
      std::vector<std::vector<float>> sums;
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        std::vector<float> c(s.m * s.n + 1, 7.0f), want(s.m * s.n + 1, 7.0f), rs(s.m + 1, 7.0f);
        cpu::gemm_row_sums(s.m, s.n, s.k, A.data.data() + A.off, A.rs, A.cs, B.data.data() + B.off, B.rs, B.cs,
                           c.data(), s.n, rs.data());
        cpu::gemm<float>(s.m, s.n, s.k, A.data.data() + A.off, A.rs, A.cs, B.data.data() + B.off, B.rs, B.cs,
                         want.data(), s.n);
        EXPECT_TRUE(c == want) << threads << " threads";
        EXPECT_EQ(rs.back(), 7.0f) << "wrote past the sums";
        for (int64_t i = 0; i < s.m; ++i) {
          double ref = 0, mag = 0;
          for (int64_t p = 0; p < s.k; ++p) ref += A.at(i, p), mag += std::abs(A.at(i, p));
          ASSERT_LE(std::abs(rs[i] - ref), (s.k + 1) * u * 1.01 * mag) << "row " << i << ": " << rs[i] << " vs " << ref;
        }
        rs.pop_back();
        sums.push_back(rs);
      }
      EXPECT_TRUE(sums[0] == sums[1]) << "the sums depend on the thread count";
    }
  });
  set_num_threads(prev);
}

}  // namespace
}  // namespace weft
