// AVX2 helpers shared by the hand-written AVX2 kernels (core/cpu/gemm_avx2.cc,
// core/cpu/flash_tiles_avx2.cc): an 8 x 8 float32 transpose in registers.
// Compiled for AVX2 + FMA whatever -march says; callers run it only where the
// CPU has both.
#pragma once

#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma")

namespace weft::cpu {

// r[i] (row i of an 8 x 8 block) becomes column i: afterwards r[j] holds
// element j of every former row, in row order.
__attribute__((always_inline)) inline void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 2
  for (int g = 0; g < 2; ++g) {
    u[4 * g] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
    u[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
    u[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
    u[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
  }
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
    r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
  }
}

}  // namespace weft::cpu

#pragma GCC pop_options
