// The pieces of the CPU flash attention on AVX2 + FMA, for CPUs without
// AVX-512 (contract in core/cpu/flash_tiles.h: avx2_kernels()): float32
// products, with bfloat16 inputs widened as they are copied or packed.
//
// The same arithmetic as the AVX-512 table, eight lanes at a time: register
// tiles of up to 6 rows x 16 columns (12 ymm accumulators, two loads of B and
// six broadcasts of A per step), every element one FMA chain in step order;
// masked loads and stores (vmaskmovps) at a row's ragged end. exp256 is the
// Cephes polynomial of exp512 (core/cpu/avx512_util.h) with 2^n applied as two
// exponent-field factors instead of scalef, as vmath::exp does, so it keeps
// the subnormal range; results can differ from the AVX-512 path in the last
// bits.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <utility>

#include "core/cpu/avx2_util.h"
#include "core/cpu/flash_tiles.h"
#include "core/half.h"

namespace weft::cpu::flash {

// Compiled for AVX2 + FMA whatever -march says; it only runs where the CPU
// has both (flash_path_available, core/cpu/flash_attention.cc).
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace {

constexpr int kTileRows = 6;
constexpr int kTileVecs = 2;  // 16 columns

// The mask of the first n of 8 lanes (all from n >= 8, none for n <= 0).
inline __m256i lanes8(int64_t n) {
  const int c = static_cast<int>(std::clamp<int64_t>(n, 0, 8));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
}

// exp(x) on 8 lanes: relative error ~2 ulp; below -103.97 it flushes to 0,
// above 88.72 it overflows to +inf; NaN stays NaN.
inline __m256 exp256(__m256 x) {
  const __m256 hi = _mm256_set1_ps(88.7228391f), lo = _mm256_set1_ps(-103.972076f);
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // 2^n as 2^n1 * 2^n2, n1 = floor(n / 2): both factors normal for n in [-150, 128]
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  __m256 res = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  res = _mm256_blendv_ps(res, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
  res = _mm256_blendv_ps(res, _mm256_set1_ps(std::numeric_limits<float>::infinity()), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
  return _mm256_blendv_ps(res, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

inline __m256 load8(__m256i mk, const float* p) { return _mm256_maskload_ps(p, mk); }
inline void store8(__m256i mk, float* p, __m256 v) { _mm256_maskstore_ps(p, mk, v); }

// The first n (<= 8) elements at p as float32 lanes, the others zero:
// float32, or bfloat16 bits widened (exact: a bfloat16 is the top half of a
// float32).
inline __m256 load8(int64_t n, const float* p) { return load8(lanes8(n), p); }
inline __m256 load8(int64_t n, const uint16_t* p) {
  __m128i h;
  if (n >= 8) {
    h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  } else {
    alignas(16) uint16_t t[8] = {};
    for (int64_t i = 0; i < n; ++i) t[i] = p[i];
    h = _mm_load_si128(reinterpret_cast<const __m128i*>(t));
  }
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// C (R x 8V) = or += A (R x k) B (k x 8V); with kMasked the last ymm of a row
// covers only its first `tail` lanes.
template <int R, int V, bool kMasked>
void tile(int64_t k, const float* a, int64_t ars, int64_t acs, const float* b, int64_t ldb, float* c, int64_t ldc,
          int64_t tail, bool accumulate) {
  const __m256i last = lanes8(tail);
  auto ld = [&](int v, const float* p) {
    return kMasked && v == V - 1 ? _mm256_maskload_ps(p, last) : _mm256_loadu_ps(p);
  };
  __m256 acc[R][V];
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) acc[i][v] = accumulate ? ld(v, c + i * ldc + 8 * v) : _mm256_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    __m256 bv[V];
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) bv[v] = ld(v, b + 8 * v);
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      const __m256 av = _mm256_broadcast_ss(a + i * ars);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) acc[i][v] = _mm256_fmadd_ps(av, bv[v], acc[i][v]);
    }
    a += acs;
    b += ldb;
  }
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) {
      if (kMasked && v == V - 1) _mm256_maskstore_ps(c + i * ldc + 8 * v, last, acc[i][v]);
      else _mm256_storeu_ps(c + i * ldc + 8 * v, acc[i][v]);
    }
}

using TileFn = void (*)(int64_t, const float*, int64_t, int64_t, const float*, int64_t, float*, int64_t, int64_t, bool);

// [masked][rows - 1][vectors - 1]
template <int... R>
constexpr std::array<std::array<std::array<TileFn, kTileVecs>, sizeof...(R)>, 2> tile_table(
    std::integer_sequence<int, R...>) {
  return {
      {{{{&tile<R + 1, 1, false>, &tile<R + 1, 2, false>}...}}, {{{&tile<R + 1, 1, true>, &tile<R + 1, 2, true>}...}}}};
}
constexpr auto kTiles = tile_table(std::make_integer_sequence<int, kTileRows>{});

void tile_gemm8(int64_t m, int64_t n, int64_t k, const float* a, int64_t ars, int64_t acs, const float* b, int64_t ldb,
                float* c, int64_t ldc, bool accumulate) {
  for (int64_t j = 0; j < n; j += 8 * kTileVecs) {
    const int64_t nc = std::min<int64_t>(8 * kTileVecs, n - j);
    const int v = static_cast<int>((nc + 7) / 8);
    const int64_t tail = nc - 8 * (v - 1);
    const auto& table = kTiles[tail < 8 ? 1 : 0];
    for (int64_t i = 0; i < m; i += kTileRows) {
      const int r = static_cast<int>(std::min<int64_t>(kTileRows, m - i));
      table[r - 1][v - 1](k, a + i * ars, ars, acs, b + j, ldb, c + i * ldc + j, ldc, tail, accumulate);
    }
  }
}

template <typename E>
void pack_transposed_panels8(const E* src, int64_t rows, int64_t cols, int64_t rs, float* dst) {
  for (int64_t j0 = 0; j0 < rows; j0 += 8) {
    const int64_t jn = std::min<int64_t>(8, rows - j0);
    float* panel = dst + j0 / kB * cols * kB + j0 % kB;
    const __m256i out = lanes8(jn);
    for (int64_t d0 = 0; d0 < cols; d0 += 8) {
      const int64_t dn = std::min<int64_t>(8, cols - d0);
      __m256 r[8];
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) r[j] = j < jn ? load8(dn, src + (j0 + j) * rs + d0) : _mm256_setzero_ps();
      transpose8(r);
      for (int64_t d = 0; d < dn; ++d) store8(out, panel + (d0 + d) * kB, r[d]);
    }
  }
}

// Keys of a block visible to its row i (flash_tiles.h: n_i).
inline int64_t visible(int64_t first, int64_t i, int64_t bc) { return std::clamp<int64_t>(first + i, 0, bc); }

void softmax_block8(int64_t br, int64_t bc, int64_t first, float scale_f, float* s, float* m_row, float* l_row,
                    float* acc, int64_t Dv) {
  const __m256 scale = _mm256_set1_ps(scale_f);
  const __m256 ninf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t i = 0; i < br; ++i) {
    float* srow = s + i * kB;
    const int64_t n = visible(first, i, bc);
    __m256 mx = ninf;
    for (int64_t j = 0; j < n; j += 8) {
      const __m256i mk = lanes8(n - j);
      const __m256 v = _mm256_mul_ps(load8(mk, srow + j), scale);
      mx = _mm256_max_ps(mx, _mm256_blendv_ps(ninf, v, _mm256_castsi256_ps(mk)));
    }
    const float m_new = std::max(m_row[i], n > 0 ? hmax(mx) : m_row[i]);
    __m256 sum = _mm256_setzero_ps();
    const __m256 mv = _mm256_set1_ps(m_new);
    for (int64_t j = 0; j < bc; j += 8) {
      const __m256i mk = lanes8(n - j);  // hidden keys get p = 0
      const __m256 p = _mm256_and_ps(_mm256_castsi256_ps(mk), exp256(_mm256_fmsub_ps(load8(mk, srow + j), scale, mv)));
      sum = _mm256_add_ps(sum, p);
      store8(lanes8(bc - j), srow + j, p);
    }
    if (n == 0) continue;
    const float alpha = std::exp(m_row[i] - m_new);  // 0 on the first visible block
    l_row[i] = l_row[i] * alpha + hsum(sum);
    m_row[i] = m_new;
    if (alpha != 1.0f) {
      float* arow = acc + i * Dv;
      const __m256 av = _mm256_set1_ps(alpha);
      for (int64_t d = 0; d < Dv; d += 8) {
        const __m256i mk = lanes8(Dv - d);
        store8(mk, arow + d, _mm256_mul_ps(av, load8(mk, arow + d)));
      }
    }
  }
}

void finish_block8(int64_t br, int64_t Dv, const float* acc, const float* m_row, const float* l_row, float* o,
                   int64_t o_rs, float* lse) {
  for (int64_t i = 0; i < br; ++i) {
    const __m256 inv = _mm256_set1_ps(l_row[i] > 0 ? 1.0f / l_row[i] : 0.0f);  // a row that sees no key: zeros
    for (int64_t d = 0; d < Dv; d += 8) {
      const __m256i mk = lanes8(Dv - d);
      store8(mk, o + i * o_rs + d, _mm256_mul_ps(load8(mk, acc + i * Dv + d), inv));
    }
    lse[i] = l_row[i] > 0 ? m_row[i] + std::log(l_row[i]) : -std::numeric_limits<float>::infinity();
  }
}

// The same with o in bfloat16: each value rounded to nearest even as stored.
void finish_block8_bf16(int64_t br, int64_t Dv, const float* acc, const float* m_row, const float* l_row, uint16_t* o,
                        int64_t o_rs, float* lse) {
  for (int64_t i = 0; i < br; ++i) {
    const float inv = l_row[i] > 0 ? 1.0f / l_row[i] : 0.0f;
    const float* __restrict arow = acc + i * Dv;
    uint16_t* __restrict orow = o + i * o_rs;
    for (int64_t d = 0; d < Dv; ++d) orow[d] = BFloat16(arow[d] * inv).x;
    lse[i] = l_row[i] > 0 ? m_row[i] + std::log(l_row[i]) : -std::numeric_limits<float>::infinity();
  }
}

void probs_block8(int64_t br, int64_t bc, int64_t first, float scale_f, const float* lse, float* s) {
  const __m256 scale = _mm256_set1_ps(scale_f);
  for (int64_t i = 0; i < br; ++i) {
    float* row = s + i * kB;
    const int64_t n = visible(first, i, bc);
    const __m256 lv = _mm256_set1_ps(lse[i]);
    for (int64_t j = 0; j < bc; j += 8) {
      const __m256i mk = lanes8(n - j);
      const __m256 pv = _mm256_and_ps(_mm256_castsi256_ps(mk), exp256(_mm256_fmsub_ps(load8(mk, row + j), scale, lv)));
      store8(lanes8(bc - j), row + j, pv);
    }
  }
}

void ds_block8(int64_t br, int64_t bc, float scale_f, const float* p, const float* delta, float* ds) {
  const __m256 scale = _mm256_set1_ps(scale_f);
  for (int64_t i = 0; i < br; ++i) {
    const float* prow = p + i * kB;
    float* row = ds + i * kB;
    const __m256 dl = _mm256_set1_ps(delta[i]);
    for (int64_t j = 0; j < bc; j += 8) {
      const __m256i mk = lanes8(bc - j);
      const __m256 t = _mm256_sub_ps(load8(mk, row + j), dl);
      store8(mk, row + j, _mm256_mul_ps(scale, _mm256_mul_ps(load8(mk, prow + j), t)));
    }
  }
}

template <typename B>
float dot_row8(const float* a, const B* b, int64_t n) {
  __m256 sum = _mm256_setzero_ps();
  for (int64_t d = 0; d < n; d += 8) sum = _mm256_fmadd_ps(load8(n - d, a + d), load8(n - d, b + d), sum);
  return hsum(sum);
}

void widen_rows8(const uint16_t* src, int64_t rows, int64_t cols, int64_t rs, float* dst) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; c += 8)
      store8(lanes8(cols - c), dst + r * cols + c, load8(cols - c, src + r * rs + c));
}

void round_rows8(const float* src, int64_t rows, int64_t cols, uint16_t* dst, int64_t rs) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* __restrict s = src + r * cols;
    uint16_t* __restrict d = dst + r * rs;
    for (int64_t c = 0; c < cols; ++c) d[c] = BFloat16(s[c]).x;
  }
}

}  // namespace

const Kernels& avx2_kernels() {
  static constexpr Kernels k{&tile_gemm8,         &pack_transposed_panels8<float>,
                             &softmax_block8,     &finish_block8,
                             &probs_block8,       &ds_block8,
                             &dot_row8<float>,    &pack_transposed_panels8<uint16_t>,
                             &finish_block8_bf16, &dot_row8<uint16_t>,
                             &widen_rows8,        &round_rows8};
  return k;
}

#pragma GCC diagnostic pop
#pragma GCC pop_options

}  // namespace weft::cpu::flash
