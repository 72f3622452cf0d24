// The bfloat16 pair product shared by the VDPBF16PS kernels (core/cpu/gemm_bf16.cc,
// core/cpu/flash_tiles.cc).
//
// Contract: pair_dot<kNative>(acc, a, b): per 32-bit lane, a and b each hold
// two bfloat16 values (the even k step in the low half, the odd one in the
// high half); returns acc + the odd step's product, then + the even one's
// (Note [bf16 pair order] in core/cpu/gemm_bf16.h). kNative: one VDPBF16PS
// (the caller runs it only where the CPU has AVX512-BF16); otherwise two
// float32 FMAs on the halves widened, which give the same bits on normal
// numbers (VDPBF16PS flushes denormals to zero) on any AVX-512 CPU.
#pragma once

#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx512bf16,avx2,fma")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace weft::cpu {

template <bool kNative>
inline __m512 pair_dot(__m512 acc, __m512i a, __m512i b) {
  if constexpr (kNative) {
    return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b);
  } else {
    const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
    acc = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(a, high)),
                          _mm512_castsi512_ps(_mm512_and_si512(b, high)), acc);
    return _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(a, 16)), _mm512_castsi512_ps(_mm512_slli_epi32(b, 16)),
                           acc);
  }
}

}  // namespace weft::cpu

#pragma GCC diagnostic pop
#pragma GCC pop_options
