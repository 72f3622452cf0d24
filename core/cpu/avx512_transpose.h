// A 16 x 16 float32 transpose in AVX-512 registers, shared by the kernels that
// pack transposed operands (core/cpu/gemm_avx512.cc, core/cpu/flash_attention.cc).
// Compiled for AVX-512 whatever -march says; callers run it only where the CPU
// has AVX-512F.
#pragma once

#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace weft::cpu {

// r[i] (row i of the block) becomes column i.
inline void transpose16(__m512 r[16]) {
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

}  // namespace weft::cpu

#pragma GCC diagnostic pop
#pragma GCC pop_options
