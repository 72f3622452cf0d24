// Block products, operand layouts and softmax rows of the CPU flash attention,
// AVX-512 (contract in core/cpu/flash_tiles.h).
#include "core/cpu/flash_tiles.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "core/cpu/avx512_util.h"
#include "core/cpu/pair_dot.h"

namespace weft::cpu::flash {

// Compiled for AVX-512 (and AVX512-BF16, used by the native pair tiles only)
// whatever -march says.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx512bf16,avx2,fma")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// _mm512_reduce_add_ps / _max_ps start from _mm256_undefined_pd() inside GCC's headers.
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace {

constexpr int kTileRows = 6;
constexpr int kTileVecs = 4;  // 64 columns

// How a tile reads and multiplies its operands: float32 elements and FMAs, or
// bfloat16 pair words and pair_dot.
struct F32Op {
  using T = float;
  static __m512 load_b(__mmask16 m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
  static __m512 bcast_a(const float* p) { return _mm512_set1_ps(*p); }
  static __m512 madd(__m512 acc, __m512 a, __m512 b) { return _mm512_fmadd_ps(a, b, acc); }
};
template <bool kNative>
struct PairOp {
  using T = uint32_t;
  static __m512i load_b(__mmask16 m, const uint32_t* p) { return _mm512_maskz_loadu_epi32(m, p); }
  static __m512i bcast_a(const uint32_t* p) {
    uint32_t word;
    std::memcpy(&word, p, sizeof word);
    return _mm512_set1_epi32(static_cast<int>(word));
  }
  static __m512 madd(__m512 acc, __m512i a, __m512i b) { return pair_dot<kNative>(acc, a, b); }
};

// C (R x 16V, last zmm of a row masked by `last`) = or += A (R x k) B (k x 16V),
// k steps of Op's elements (float32 steps, or pairs of bfloat16 steps).
template <int R, int V, typename Op>
void tile(int64_t k, const typename Op::T* a, int64_t ars, int64_t acs, const typename Op::T* b, int64_t ldb, float* c,
          int64_t ldc, __mmask16 last, bool accumulate) {
  __m512 acc[R][V];
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      acc[i][v] = accumulate ? _mm512_maskz_loadu_ps(v == V - 1 ? last : __mmask16(0xFFFF), c + i * ldc + 16 * v)
                             : _mm512_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    decltype(Op::load_b(0, b)) bv[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) bv[v] = Op::load_b(v == V - 1 ? last : __mmask16(0xFFFF), b + 16 * v);
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      const auto av = Op::bcast_a(a + i * ars);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[i][v] = Op::madd(acc[i][v], av, bv[v]);
    }
    a += acs;
    b += ldb;
  }
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      _mm512_mask_storeu_ps(c + i * ldc + 16 * v, v == V - 1 ? last : __mmask16(0xFFFF), acc[i][v]);
}

template <typename T>
using TileFn = void (*)(int64_t, const T*, int64_t, int64_t, const T*, int64_t, float*, int64_t, __mmask16, bool);

template <typename Op, int... R>
constexpr std::array<std::array<TileFn<typename Op::T>, kTileVecs>, sizeof...(R)> tile_table(
    std::integer_sequence<int, R...>) {
  return {{{&tile<R + 1, 1, Op>, &tile<R + 1, 2, Op>, &tile<R + 1, 3, Op>, &tile<R + 1, 4, Op>}...}};
}
constexpr auto kRows = std::make_integer_sequence<int, kTileRows>{};
constexpr auto kTiles = tile_table<F32Op>(kRows);
constexpr auto kPairTiles = tile_table<PairOp<true>>(kRows);
constexpr auto kPairTilesEmulated = tile_table<PairOp<false>>(kRows);

// C (m x n) over register tiles of up to kTileRows x 64 columns.
template <typename T, typename Table>
void over_tiles(const Table& table, int64_t m, int64_t n, int64_t k, const T* a, int64_t ars, int64_t acs, const T* b,
                int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  for (int64_t j = 0; j < n; j += 16 * kTileVecs) {
    const int64_t nc = std::min<int64_t>(16 * kTileVecs, n - j);
    const int v = static_cast<int>((nc + 15) / 16);
    const __mmask16 last = lanes(nc - 16 * (v - 1));
    for (int64_t i = 0; i < m; i += kTileRows) {
      const int r = static_cast<int>(std::min<int64_t>(kTileRows, m - i));
      table[r - 1][v - 1](k, a + i * ars, ars, acs, b + j, ldb, c + i * ldc + j, ldc, last, accumulate);
    }
  }
}

// 16 elements of a row as bfloat16 bits (the masked-off lanes zero).
inline __m256i bits16(__mmask16 m, const uint16_t* p) { return _mm256_maskz_loadu_epi16(m, p); }
inline __m256i bits16(__mmask16 m, const float* p) { return round_bf16x16(_mm512_maskz_loadu_ps(m, p)); }

}  // namespace

void pair_tile_gemm(bool native, int64_t m, int64_t n, int64_t kp, const uint32_t* a, int64_t ars, int64_t acs,
                    const uint32_t* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  over_tiles(native ? kPairTiles : kPairTilesEmulated, m, n, kp, a, ars, acs, b, ldb, c, ldc, accumulate);
}

// Panels rather than one (cols x rows) matrix: the rows of a wide matrix lie a
// power of two apart and share a few L1 sets, so a panel streamed by every
// register tile of a block would come from L2 each time.
template <typename E>
void pack_transposed_panels(const E* src, int64_t rows, int64_t cols, int64_t rs, float* dst) {
  for (int64_t j0 = 0; j0 < rows; j0 += 16) {
    const int64_t jn = std::min<int64_t>(16, rows - j0);
    float* panel = dst + j0 / kB * cols * kB + j0 % kB;
    for (int64_t d0 = 0; d0 < cols; d0 += 16) {
      const int64_t dn = std::min<int64_t>(16, cols - d0);
      __m512 r[16];
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) r[j] = j < jn ? load16(lanes(dn), src + (j0 + j) * rs + d0) : _mm512_setzero_ps();
      transpose16(r);
      for (int64_t d = 0; d < dn; ++d) _mm512_mask_storeu_ps(panel + (d0 + d) * kB, lanes(jn), r[d]);
    }
  }
}
template void pack_transposed_panels<float>(const float*, int64_t, int64_t, int64_t, float*);
template void pack_transposed_panels<uint16_t>(const uint16_t*, int64_t, int64_t, int64_t, float*);

template <typename E>
void copy_rows16(const E* src, int64_t rows, int64_t cols, int64_t rs, uint16_t* dst, int64_t ld) {
  constexpr int64_t kAhead = 8;  // rows
  for (int64_t r = 0; r < rows; ++r) {
    if (r + kAhead < rows)
      for (int64_t c = 0; c < cols; c += 64 / sizeof(E))
        _mm_prefetch(reinterpret_cast<const char*>(src + (r + kAhead) * rs + c), _MM_HINT_T0);
    for (int64_t c = 0; c < ld; c += 16)
      _mm256_mask_storeu_epi16(dst + r * ld + c, lanes(ld - c), bits16(lanes(cols - c), src + r * rs + c));
  }
}
template void copy_rows16<float>(const float*, int64_t, int64_t, int64_t, uint16_t*, int64_t);
template void copy_rows16<uint16_t>(const uint16_t*, int64_t, int64_t, int64_t, uint16_t*, int64_t);

template <typename E>
void pair_rows(const E* src, int64_t rows, int64_t cols, int64_t rs, uint32_t* dst, int64_t ldd) {
  for (int64_t t = 0; 2 * t < rows; ++t)
    for (int64_t c = 0; c < cols; c += 16) {
      const __mmask16 mk = lanes(cols - c);
      const __m512i lo = _mm512_cvtepu16_epi32(bits16(mk, src + 2 * t * rs + c));
      const __m512i hi =
          2 * t + 1 < rows ? _mm512_cvtepu16_epi32(bits16(mk, src + (2 * t + 1) * rs + c)) : _mm512_setzero_si512();
      _mm512_mask_storeu_epi32(dst + t * ldd + c, mk, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
    }
}
template void pair_rows<float>(const float*, int64_t, int64_t, int64_t, uint32_t*, int64_t);
template void pair_rows<uint16_t>(const uint16_t*, int64_t, int64_t, int64_t, uint32_t*, int64_t);

namespace {

// Keys of a block visible to its row i (flash_tiles.h: n_i).
inline int64_t visible(int64_t first, int64_t i, int64_t bc) { return std::clamp<int64_t>(first + i, 0, bc); }

void softmax_block512(int64_t br, int64_t bc, int64_t first, float scale_f, float* s, float* m_row, float* l_row,
                      float* acc, int64_t Dv) {
  const __m512 scale = _mm512_set1_ps(scale_f);
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t i = 0; i < br; ++i) {
    float* srow = s + i * kB;
    const int64_t n = visible(first, i, bc);
    __m512 mx = ninf;
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 mk = lanes(n - j);
      mx = _mm512_mask_max_ps(mx, mk, mx, _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, srow + j), scale));
    }
    const float m_new = std::max(m_row[i], n > 0 ? _mm512_reduce_max_ps(mx) : m_row[i]);
    __m512 sum = _mm512_setzero_ps();
    const __m512 mv = _mm512_set1_ps(m_new);
    for (int64_t j = 0; j < bc; j += 16) {
      const __mmask16 mk = lanes(n - j);  // hidden keys get p = 0
      const __m512 p = _mm512_maskz_mov_ps(mk, exp512(_mm512_fmsub_ps(_mm512_maskz_loadu_ps(mk, srow + j), scale, mv)));
      sum = _mm512_add_ps(sum, p);
      _mm512_mask_storeu_ps(srow + j, lanes(bc - j), p);
    }
    if (n == 0) continue;
    const float alpha = std::exp(m_row[i] - m_new);  // 0 on the first visible block
    l_row[i] = l_row[i] * alpha + _mm512_reduce_add_ps(sum);
    m_row[i] = m_new;
    if (alpha != 1.0f) {
      float* arow = acc + i * Dv;
      const __m512 av = _mm512_set1_ps(alpha);
      for (int64_t d = 0; d < Dv; d += 16) {
        const __mmask16 mk = lanes(Dv - d);
        _mm512_mask_storeu_ps(arow + d, mk, _mm512_mul_ps(av, _mm512_maskz_loadu_ps(mk, arow + d)));
      }
    }
  }
}

template <typename E>
void finish_block512(int64_t br, int64_t Dv, const float* acc, const float* m_row, const float* l_row, E* o,
                     int64_t o_rs, float* lse) {
  for (int64_t i = 0; i < br; ++i) {
    const float inv = l_row[i] > 0 ? 1.0f / l_row[i] : 0.0f;  // a row that sees no key: zeros
    const float* arow = acc + i * Dv;
    E* orow = o + i * o_rs;
    for (int64_t d = 0; d < Dv; d += 16) {
      const __mmask16 mk = lanes(Dv - d);
      store16(mk, orow + d, _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, arow + d), _mm512_set1_ps(inv)));
    }
    lse[i] = l_row[i] > 0 ? m_row[i] + std::log(l_row[i]) : -std::numeric_limits<float>::infinity();
  }
}

void probs_block512(int64_t br, int64_t bc, int64_t first, float scale_f, const float* lse, float* s) {
  const __m512 scale = _mm512_set1_ps(scale_f);
  for (int64_t i = 0; i < br; ++i) {
    float* row = s + i * kB;
    const int64_t n = visible(first, i, bc);
    const __m512 lv = _mm512_set1_ps(lse[i]);
    for (int64_t j = 0; j < bc; j += 16) {
      const __mmask16 mk = lanes(n - j);
      const __m512 pv = _mm512_maskz_mov_ps(mk, exp512(_mm512_fmsub_ps(_mm512_maskz_loadu_ps(mk, row + j), scale, lv)));
      _mm512_mask_storeu_ps(row + j, lanes(bc - j), pv);
    }
  }
}

void ds_block512(int64_t br, int64_t bc, float scale_f, const float* p, const float* delta, float* ds) {
  const __m512 scale = _mm512_set1_ps(scale_f);
  for (int64_t i = 0; i < br; ++i) {
    const float* prow = p + i * kB;
    float* row = ds + i * kB;
    const __m512 dl = _mm512_set1_ps(delta[i]);
    for (int64_t j = 0; j < bc; j += 16) {
      const __mmask16 mk = lanes(bc - j);
      const __m512 t = _mm512_sub_ps(_mm512_maskz_loadu_ps(mk, row + j), dl);
      _mm512_mask_storeu_ps(row + j, mk, _mm512_mul_ps(scale, _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, prow + j), t)));
    }
  }
}

// rowsum(a * b) over n elements, a and b float32 or bfloat16 bits.
template <typename A, typename B>
float dot_row512(const A* a, const B* b, int64_t n) {
  __m512 sum = _mm512_setzero_ps();
  for (int64_t d = 0; d < n; d += 16) {
    const __mmask16 mk = lanes(n - d);
    sum = _mm512_fmadd_ps(load16(mk, a + d), load16(mk, b + d), sum);
  }
  return _mm512_reduce_add_ps(sum);
}

void widen_rows512(const uint16_t* src, int64_t rows, int64_t cols, int64_t rs, float* dst) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; c += 16) {
      const __mmask16 mk = lanes(cols - c);
      _mm512_mask_storeu_ps(dst + r * cols + c, mk, load16(mk, src + r * rs + c));
    }
}

void round_rows512(const float* src, int64_t rows, int64_t cols, uint16_t* dst, int64_t rs) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; c += 16) {
      const __mmask16 mk = lanes(cols - c);
      store16(mk, dst + r * rs + c, _mm512_maskz_loadu_ps(mk, src + r * cols + c));
    }
}

void tile_gemm512(int64_t m, int64_t n, int64_t k, const float* a, int64_t ars, int64_t acs, const float* b,
                  int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  over_tiles(kTiles, m, n, k, a, ars, acs, b, ldb, c, ldc, accumulate);
}

}  // namespace

const Kernels& avx512_kernels() {
  static constexpr Kernels k{&tile_gemm512,
                             &pack_transposed_panels<float>,
                             &softmax_block512,
                             &finish_block512<float>,
                             &probs_block512,
                             &ds_block512,
                             &dot_row512<float, float>,
                             &pack_transposed_panels<uint16_t>,
                             &finish_block512<uint16_t>,
                             &dot_row512<float, uint16_t>,
                             &widen_rows512,
                             &round_rows512};
  return k;
}

float dot_row(const uint16_t* a, const uint16_t* b, int64_t n) { return dot_row512(a, b, n); }

#pragma GCC diagnostic pop
#pragma GCC pop_options

}  // namespace weft::cpu::flash
