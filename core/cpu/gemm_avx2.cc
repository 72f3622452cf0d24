// AVX2 + FMA float32 GEMM (contract in core/cpu/gemm_avx2.h).
//
// Goto/BLIS structure, seen from row-major C. Each thread owns a tile of C
// (columns [n0, n1) x rows [m0, m1) of one matrix of the batch) and runs:
//   for pc over K in blocks of kc (kc from K alone: Note [gemm determinism])
//     for jc over the tile's columns in blocks of kNC: pack B (kc x nc) into kNR-column panels
//       for ic over the rows in blocks of kMC: pack A (mc x kc) into kMR-row panels
//         for each B panel (kc x kNR, stays in L1) and each A panel (kMR x kc, from L2):
//           micro-kernel -> kMR x kNR tile of C
// Micro-kernel: kMR = 6 rows x kNR = 16 columns of C in 12 ymm accumulators; per
// k step two loads of the B panel, six broadcasts of A and twelve FMAs. The
// first K block stores C (or adds to it when accumulating; with a column bias its
// accumulators start from the bias), later blocks add their partial sums. Panels
// are zero-padded, so the kernel always computes a full tile; a tile at C's
// right or bottom edge goes through a 6 x 16 scratch and only its valid part is
// copied back. The kernel fetches its C rows (prefetcht0) before its k loop.
// Packing a row-major A or a column-major B (the GPT's activations and
// transposed weights) reads 8 k steps of 6 or 8 rows and transposes them in
// registers (transpose8, core/cpu/avx2_util.h).
#include "core/cpu/gemm_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "core/cpu/avx2_util.h"
#include "core/cpu/pack_buffers.h"
#include "core/cpu/thread_balance.h"
#include "core/error.h"
#include "core/parallel.h"

namespace weft::cpu {

bool gemm_avx2_available() {
  static const bool ok = __builtin_cpu_supports("avx2") != 0 && __builtin_cpu_supports("fma") != 0;
  return ok;
}

// Compiled for AVX2 + FMA whatever -march says; it only runs when
// gemm_avx2_available() (checked by the caller in gemm.cc).
#pragma GCC push_options
#pragma GCC target("avx2,fma")

namespace {

constexpr int kMR = 6;         // rows of C per micro-tile
constexpr int kNR = 16;        // columns of C per micro-tile (two ymm)
constexpr int64_t kKC = 256;   // max K block: a B panel (kKC x kNR floats = 16 KiB) stays in L1
constexpr int64_t kMC = 96;    // rows of A packed at once (kMC x kKC floats = 96 KiB, in L2)
constexpr int64_t kNC = 1024;  // columns of B packed at once (kKC x kNC floats = 1 MiB)
static_assert(kMC % kMR == 0 && kNC % kNR == 0);

// K cut into ceil(K / kKC) near-equal blocks: a function of K alone.
int64_t k_block(int64_t k) {
  const int64_t nb = (k + kKC - 1) / kKC;
  return (k + nb - 1) / nb;
}

// C (kMR x kNR at c, leading dimension ldc) = or += A panel (kc steps of kMR
// floats) * B panel (kc steps of kNR floats), the accumulators starting from
// `bias` (kNR floats) or zero.
void micro_kernel(int64_t kc, const float* __restrict ap, const float* __restrict bp, float* __restrict c, int64_t ldc,
                  bool load_c, const float* __restrict bias) {
  const __m256 i0 = bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps();
  const __m256 i1 = bias ? _mm256_loadu_ps(bias + 8) : _mm256_setzero_ps();
  __m256 c00 = i0, c01 = i1, c10 = i0, c11 = i1, c20 = i0, c21 = i1;
  __m256 c30 = i0, c31 = i1, c40 = i0, c41 = i1, c50 = i0, c51 = i1;
  // C's rows are fetched while the k loop runs: C is read (or written) only
  // after it, and a large C comes from L3 or memory once per K block.
#pragma GCC unroll 6
  for (int i = 0; i < kMR; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + kNR - 1), _MM_HINT_T0);
  }
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_load_ps(bp), b1 = _mm256_load_ps(bp + 8);
    __m256 a = _mm256_broadcast_ss(ap);
    c00 = _mm256_fmadd_ps(a, b0, c00);
    c01 = _mm256_fmadd_ps(a, b1, c01);
    a = _mm256_broadcast_ss(ap + 1);
    c10 = _mm256_fmadd_ps(a, b0, c10);
    c11 = _mm256_fmadd_ps(a, b1, c11);
    a = _mm256_broadcast_ss(ap + 2);
    c20 = _mm256_fmadd_ps(a, b0, c20);
    c21 = _mm256_fmadd_ps(a, b1, c21);
    a = _mm256_broadcast_ss(ap + 3);
    c30 = _mm256_fmadd_ps(a, b0, c30);
    c31 = _mm256_fmadd_ps(a, b1, c31);
    a = _mm256_broadcast_ss(ap + 4);
    c40 = _mm256_fmadd_ps(a, b0, c40);
    c41 = _mm256_fmadd_ps(a, b1, c41);
    a = _mm256_broadcast_ss(ap + 5);
    c50 = _mm256_fmadd_ps(a, b0, c50);
    c51 = _mm256_fmadd_ps(a, b1, c51);
    ap += kMR;
    bp += kNR;
  }
  auto put = [&](int i, __m256 lo, __m256 hi) {
    float* r = c + i * ldc;
    if (load_c) {
      lo = _mm256_add_ps(lo, _mm256_loadu_ps(r));
      hi = _mm256_add_ps(hi, _mm256_loadu_ps(r + 8));
    }
    _mm256_storeu_ps(r, lo);
    _mm256_storeu_ps(r + 8, hi);
  };
  put(0, c00, c01);
  put(1, c10, c11);
  put(2, c20, c21);
  put(3, c30, c31);
  put(4, c40, c41);
  put(5, c50, c51);
}

// A rows [0, mc) x k steps [0, kc) (element (i, p) at a[i * rs + p * cs]) as
// panels of kMR rows, panel q at dst + q * kMR * kc holding row i of step p at
// p * kMR + i; rows past mc are zero.
void pack_a(const float* a, int64_t rs, int64_t cs, int64_t mc, int64_t kc, float* dst) {
  for (int64_t r0 = 0; r0 < mc; r0 += kMR) {
    const int mr = static_cast<int>(std::min<int64_t>(kMR, mc - r0));
    float* d = dst + r0 * kc;
    const float* s = a + r0 * rs;
    if (mr == kMR && rs == 1) {  // a step's six rows are contiguous: four floats and two
      for (int64_t p = 0; p < kc; ++p) {
        const float* sp = s + p * cs;
        _mm_storeu_ps(d + p * kMR, _mm_loadu_ps(sp));
        _mm_storel_pi(reinterpret_cast<__m64*>(d + p * kMR + 4),
                      _mm_loadl_pi(_mm_setzero_ps(), reinterpret_cast<const __m64*>(sp + 4)));
      }
    } else if (mr == kMR && cs == 1) {  // rows contiguous along k: 8 steps at a time through a transpose
      int64_t p = 0;
      for (; p + 8 <= kc; p += 8) {
        __m256 r[8];
#pragma GCC unroll 6
        for (int i = 0; i < kMR; ++i) r[i] = _mm256_loadu_ps(s + i * rs + p);
        r[6] = r[7] = _mm256_setzero_ps();
        transpose8(r);  // r[q]: step p + q of the six rows, then two zeros
        float* o = d + p * kMR;
        // each store's two zeros are overwritten by the next step's; the last
        // step stores only its six floats
#pragma GCC unroll 7
        for (int q = 0; q < 7; ++q) _mm256_storeu_ps(o + q * kMR, r[q]);
        _mm_storeu_ps(o + 7 * kMR, _mm256_castps256_ps128(r[7]));
        _mm_storel_pi(reinterpret_cast<__m64*>(o + 7 * kMR + 4), _mm256_extractf128_ps(r[7], 1));
      }
      for (; p < kc; ++p)
        for (int i = 0; i < kMR; ++i) d[p * kMR + i] = s[i * rs + p];
    } else {
      for (int64_t p = 0; p < kc; ++p)
        for (int i = 0; i < kMR; ++i) d[p * kMR + i] = i < mr ? s[i * rs + p * cs] : 0.0f;
    }
  }
}

// B k steps [0, kc) x columns [0, nc) (element (p, j) at b[p * rs + j * cs]) as
// panels of kNR columns, panel q at dst + q * kNR * kc holding column j of
// step p at p * kNR + j; columns past nc are zero.
void pack_b(const float* b, int64_t rs, int64_t cs, int64_t kc, int64_t nc, float* dst) {
  for (int64_t j0 = 0; j0 < nc; j0 += kNR) {
    const int nr = static_cast<int>(std::min<int64_t>(kNR, nc - j0));
    float* d = dst + j0 * kc;
    const float* s = b + j0 * cs;
    if (nr == kNR && cs == 1) {
      for (int64_t p = 0; p < kc; ++p) {
        _mm256_store_ps(d + p * kNR, _mm256_loadu_ps(s + p * rs));
        _mm256_store_ps(d + p * kNR + 8, _mm256_loadu_ps(s + p * rs + 8));
      }
    } else if (nr == kNR && rs == 1) {  // columns contiguous along k: 8 x 8 blocks through a transpose
      int64_t p = 0;
      for (; p + 8 <= kc; p += 8) {
#pragma GCC unroll 2
        for (int h = 0; h < kNR / 8; ++h) {
          __m256 r[8];
#pragma GCC unroll 8
          for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(s + (8 * h + j) * cs + p);
          transpose8(r);  // r[q]: step p + q of columns 8h .. 8h + 7
#pragma GCC unroll 8
          for (int q = 0; q < 8; ++q) _mm256_store_ps(d + (p + q) * kNR + 8 * h, r[q]);
        }
      }
      for (; p < kc; ++p)
        for (int j = 0; j < kNR; ++j) d[p * kNR + j] = s[j * cs + p];
    } else if (rs == 1) {  // columns contiguous along k
      for (int j = 0; j < kNR; ++j)
        for (int64_t p = 0; p < kc; ++p) d[p * kNR + j] = j < nr ? s[j * cs + p] : 0.0f;
    } else {
      for (int64_t p = 0; p < kc; ++p)
        for (int j = 0; j < kNR; ++j) d[p * kNR + j] = j < nr ? s[p * rs + j * cs] : 0.0f;
    }
  }
}

// One tile of one matrix: C (m x n at c) = or += A (m x k) * B (k x n), or bias + A * B.
void gemm_tile(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
               int64_t b_rs, int64_t b_cs, float* c, int64_t ldc, bool accumulate, const float* bias) {
  static thread_local PackBuffers<float> buf(kMC * kKC, kKC * kNC);  // A's block, B's block
  float* apack = buf.a.get();
  float* bpack = buf.b.get();
  alignas(32) float scratch[kMR * kNR];
  alignas(32) float bias_pad[kNR];
  const int64_t kcb = k_block(k);
  for (int64_t pc = 0; pc < k; pc += kcb) {
    const int64_t kc = std::min(kcb, k - pc);
    const bool load_c = accumulate || pc > 0;
    const float* bias_k = pc == 0 ? bias : nullptr;  // Note [gemm determinism]: the bias is summed first
    for (int64_t jc = 0; jc < n; jc += kNC) {
      const int64_t nc = std::min(kNC, n - jc);
      pack_b(b + pc * b_rs + jc * b_cs, b_rs, b_cs, kc, nc, bpack);
      for (int64_t ic = 0; ic < m; ic += kMC) {
        const int64_t mc = std::min(kMC, m - ic);
        pack_a(a + ic * a_rs + pc * a_cs, a_rs, a_cs, mc, kc, apack);
        for (int64_t jr = 0; jr < nc; jr += kNR) {
          const int64_t nr = std::min<int64_t>(kNR, nc - jr);
          const float* bp = bpack + jr * kc;
          const float* bj = nullptr;
          if (bias_k) {
            if (nr == kNR) {
              bj = bias_k + jc + jr;
            } else {
              std::fill(bias_pad, bias_pad + kNR, 0.0f);
              std::copy(bias_k + jc + jr, bias_k + jc + jr + nr, bias_pad);
              bj = bias_pad;
            }
          }
          for (int64_t ir = 0; ir < mc; ir += kMR) {
            const int64_t mr = std::min<int64_t>(kMR, mc - ir);
            float* ct = c + (ic + ir) * ldc + jc + jr;
            if (mr == kMR && nr == kNR) {
              micro_kernel(kc, apack + ir * kc, bp, ct, ldc, load_c, bj);
              continue;
            }
            // an edge tile: through the scratch, only its valid part read and written
            if (load_c) {
              std::fill(scratch, scratch + kMR * kNR, 0.0f);
              for (int64_t i = 0; i < mr; ++i) std::copy(ct + i * ldc, ct + i * ldc + nr, scratch + i * kNR);
            }
            micro_kernel(kc, apack + ir * kc, bp, scratch, kNR, load_c, bj);
            for (int64_t i = 0; i < mr; ++i) std::copy(scratch + i * kNR, scratch + i * kNR + nr, ct + i * ldc);
          }
        }
      }
    }
  }
}

}  // namespace

void gemm_avx2_f32(int64_t batch, const int64_t* a_off, const int64_t* b_off, int64_t m, int64_t n, int64_t k,
                   const float* a, int64_t a_rs, int64_t a_cs, const float* b, int64_t b_rs, int64_t b_cs, float* c,
                   int64_t c_stride, int64_t ldc, bool accumulate, const float* col_bias) {
  WEFT_CHECK(!(accumulate && col_bias), "gemm: a column bias cannot be combined with accumulate");
  if (m == 0 || n == 0 || batch == 0) return;
  WEFT_CHECK(k > 0, "gemm_avx2_f32: an empty inner dimension goes to the caller's fill (core/cpu/gemm.cc)");
  // A matrix-vector product C (m, 1) = A b with contiguous C is computed as the
  // row C^T (1, m) = b^T A^T: full 16-column tiles instead of one useful column.
  if (n == 1 && m > 1 && ldc == 1) {
    std::vector<float> row_bias(col_bias ? m : 0, col_bias ? col_bias[0] : 0.0f);
    gemm_avx2_f32(batch, b_off, a_off, 1, m, k, b, b_cs, b_rs, a, a_cs, a_rs, c, c_stride, m, accumulate,
                  col_bias ? row_bias.data() : nullptr);
    return;
  }
  // A C of 2..15 columns fills part of a 16-column tile, so it is computed
  // transposed, C^T (n, m) = B^T A^T, into a scratch and copied back (as the
  // AVX-512 kernel's Note [narrow gemm]): the same FMA chains over the same K
  // blocks, so the same bits; a bias is written into C^T first and the first
  // K block's sum added to it (a rounding difference, fixed by the shape).
  // (bench/gemm_shapes, Zen 4 without AVX-512, 1 thread: the DDP MLP's 64 x 10
  // x 2048 head, 19 -> 28 GFLOP/s.)
  if (n > 1 && n < kNR && m >= 2 * n && m >= kNR) {
    std::vector<float> ct(static_cast<size_t>(batch * n * m));  // (batch, n, m)
    if (accumulate || col_bias)
      for (int64_t x = 0; x < batch; ++x)
        for (int64_t j = 0; j < n; ++j)
          for (int64_t i = 0; i < m; ++i)
            ct[(x * n + j) * m + i] = accumulate ? c[x * c_stride + i * ldc + j] : col_bias[j];
    gemm_avx2_f32(batch, b_off, a_off, n, m, k, b, b_cs, b_rs, a, a_cs, a_rs, ct.data(), n * m, m,
                  accumulate || col_bias, nullptr);
    for (int64_t x = 0; x < batch; ++x)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) c[x * c_stride + i * ldc + j] = ct[(x * n + j) * m + i];
    return;
  }
  // Thread tiling: each matrix is cut into `parts` slabs of whole micro-tiles
  // along N (or M) so that batch * parts shares out over the threads; a single
  // matrix's slabs are sized by the threads' measured speeds (Note [gemm
  // balance]). Any tiling gives the same bits (Note [gemm determinism]); this
  // one only decides speed.
  const int nt = in_parallel_region() ? 1 : get_num_threads();
  const double work = static_cast<double>(m) * n * k * batch;
  int64_t parts = 1;
  if (nt > 1 && work >= double(1 << 18) && batch < 4 * nt) parts = (nt + batch - 1) / batch;
  const int64_t mt = (m + kMR - 1) / kMR, ntl = (n + kNR - 1) / kNR;
  const bool split_n = (m <= n && ntl >= parts) || mt < parts;
  parts = std::max<int64_t>(1, std::min(parts, split_n ? ntl : mt));
  const int64_t tiles = split_n ? ntl : mt, unit = split_n ? kNR : kMR, extent = split_n ? n : m;
  // Columns [s0, s1) (split_n) or rows [s0, s1) of matrix x.
  auto slab = [&](int64_t x, int64_t s0, int64_t s1) {
    const float* pa = a + a_off[x];
    const float* pb = b + b_off[x];
    float* pc = c + x * c_stride;
    if (split_n)
      gemm_tile(m, s1 - s0, k, pa, a_rs, a_cs, pb + s0 * b_cs, b_rs, b_cs, pc + s0, ldc, accumulate,
                col_bias ? col_bias + s0 : nullptr);
    else gemm_tile(s1 - s0, n, k, pa + s0 * a_rs, a_rs, a_cs, pb, b_rs, b_cs, pc + s0 * ldc, ldc, accumulate, col_bias);
  };
  if (batch == 1) {
    over_balanced_slabs(extent, work, unit, [&](int64_t s0, int64_t s1) { slab(0, s0, s1); });
    return;
  }
  auto body = [&](int64_t w0, int64_t w1) {
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t x = w / parts, q = w % parts;
      const int64_t s0 = std::min(extent, tiles * q / parts * unit),
                    s1 = std::min(extent, tiles * (q + 1) / parts * unit);
      if (s0 < s1) slab(x, s0, s1);
    }
  };
  // small products run inline: a thread hand-off costs more than they do
  parallel_for(0, batch * parts, work >= double(1 << 18) ? 1 : batch * parts, body);
}

#pragma GCC pop_options

}  // namespace weft::cpu
