// AVX-512 helpers shared by the hand-written kernels (core/cpu/gemm_avx512.cc,
// core/cpu/flash_attention.cc): a 16 x 16 float32 transpose in registers, exp
// on 16 lanes, rounding 16 lanes to bfloat16, 16-lane loads and stores of
// float32 or bfloat16 elements with float32 lanes, and the mask of a row's
// first lanes.
// Compiled for AVX-512 whatever -march says; callers run it only where the CPU
// has AVX-512F.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace weft::cpu {

// The mask of the first n of 16 lanes (all 16 from n >= 16, none for n <= 0).
inline __mmask16 lanes(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << std::max<int64_t>(n, 0)) - 1);
}

// 16 float32 lanes rounded to bfloat16 bits: to nearest even, NaN to the
// quiet NaN 0x7fc0 (BFloat16(float) in core/half.h, lane by lane).
inline __m256i round_bf16x16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
  r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_set1_epi32(0x7fc0));
  return _mm512_cvtepi32_epi16(r);
}

// Operand elements: float, or bfloat16 bits (uint16_t) widened to float32 as
// they are loaded (exact: a bfloat16 is the top half of a float32). The masked
// lanes of 16 consecutive elements, the others zero.
inline __m512 load16(__mmask16 m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 load16(__mmask16 m, const uint16_t* p) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}
// The masked lanes of v stored at p: as float, or rounded to bfloat16 bits.
inline void store16(__mmask16 m, float* p, __m512 v) { _mm512_mask_storeu_ps(p, m, v); }
inline void store16(__mmask16 m, uint16_t* p, __m512 v) { _mm256_mask_storeu_epi16(p, m, round_bf16x16(v)); }

// r[i] (row i of the block) becomes column i. Always inlined: GCC left one
// copy out of line, and the calls through it cost the packing loops 1-3%
// (Zen 4: sgemm 1024 TT, the conv GEMMs' transposed column matrix).
__attribute__((always_inline)) inline void transpose16(__m512 r[16]) {
  __m512 t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // u[4g + c], 128-bit lane L = column 4L + c of rows 4g..4g+3
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    r[4 * g] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
    r[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
    r[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
    r[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
  }
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    __m512 v0 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x44), v1 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xEE);
    __m512 v2 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x44), v3 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xEE);
    t[c] = _mm512_shuffle_f32x4(v0, v2, 0x88);
    t[4 + c] = _mm512_shuffle_f32x4(v0, v2, 0xDD);
    t[8 + c] = _mm512_shuffle_f32x4(v1, v3, 0x88);
    t[12 + c] = _mm512_shuffle_f32x4(v1, v3, 0xDD);
  }
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}

// exp(x) on 16 lanes (Cephes' polynomial on the reduced argument, scaled by
// 2^n with scalef): relative error ~2 ulp; below -104 it flushes to 0 (-inf
// gives 0), above 88.7 it overflows to +inf; NaN stays NaN.
inline __m512 exp512(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);  // exp(-104) flushes to 0 through scalef; NaN passes
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

}  // namespace weft::cpu

#pragma GCC diagnostic pop
#pragma GCC pop_options
