// The GEMM epilogues of Note [gemm epilogue] (core/cpu/gemm.h) on 16 lanes, for
// the AVX-512 kernels that finish a float32 sum in a zmm register: the float32
// kernel (core/cpu/gemm_avx512.cc, float32 or widened bfloat16 operands) and
// the VDPBF16PS kernel (core/cpu/gemm_bf16.cc). Compiled for AVX-512 whatever
// -march says; callers run it only where the CPU has AVX-512F.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "core/cpu/avx512_util.h"
#include "core/cpu/gemm.h"
#include "core/cpu/vec_math.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")

namespace weft::cpu {

// vmath::gelu_tanh and gelu_tanh_grad (core/cpu/vec_math.h), 16 lanes at a time.
inline __m512 gelu_tanh_exp(__m512 x) {  // exp(-2 sqrt(2/pi) (x + 0.044715 x^3))
  constexpr float kSqrt2OverPi = static_cast<float>(vmath::kSqrt2OverPi);
  constexpr float kGeluCubic = static_cast<float>(vmath::kGeluCubic);
  const __m512 u = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(kGeluCubic), _mm512_mul_ps(x, x)), x, x);
  return exp512(_mm512_mul_ps(_mm512_set1_ps(-2 * kSqrt2OverPi), u));
}
inline __m512 gelu_tanh16(__m512 x) { return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), gelu_tanh_exp(x))); }
inline __m512 gelu_tanh_grad16(__m512 x) {
  constexpr float kSqrt2OverPi = static_cast<float>(vmath::kSqrt2OverPi);
  constexpr float kGeluCubic = static_cast<float>(vmath::kGeluCubic);
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 sg = _mm512_div_ps(one, _mm512_add_ps(one, gelu_tanh_exp(x)));
  const __m512 dinner = _mm512_mul_ps(_mm512_set1_ps(kSqrt2OverPi),
                                      _mm512_fmadd_ps(_mm512_set1_ps(3 * kGeluCubic), _mm512_mul_ps(x, x), one));
  const __m512 t = _mm512_mul_ps(_mm512_mul_ps(_mm512_add_ps(x, x), _mm512_sub_ps(one, sg)), dinner);
  return _mm512_mul_ps(sg, _mm512_add_ps(one, t));
}

// Stores 16 finished values r of C (lanes mk) at cp, through the epilogue ep
// when there is one, its pointers at C's first element and (i, j) the values'
// row and column from there. The bfloat16 kinds leave cp alone.
inline void store_c(float* cp, __mmask16 mk, __m512 r, const GemmEpilogue* ep, int64_t i, int64_t j) {
  using Kind = GemmEpilogue::Kind;
  if (!ep) {
    _mm512_mask_storeu_ps(cp, mk, r);
    return;
  }
  switch (ep->kind) {
    case Kind::kGeluForward:
      _mm512_mask_storeu_ps(cp, mk, r);
      _mm512_mask_storeu_ps(ep->act + i * ep->ld_act + j, mk, gelu_tanh16(r));
      break;
    case Kind::kGeluBackward: {
      const __m512 h = _mm512_maskz_loadu_ps(mk, ep->pre + i * ep->ld_pre + j);
      _mm512_mask_storeu_ps(cp, mk, _mm512_mul_ps(r, gelu_tanh_grad16(h)));
      break;
    }
    case Kind::kRoundBf16: store16(mk, ep->out16 + i * ep->ld_out16 + j, r); break;
    case Kind::kGeluForwardBf16: {
      const __m256i h = round_bf16x16(r);
      _mm256_mask_storeu_epi16(ep->out16 + i * ep->ld_out16 + j, mk, h);
      const __m512 hw = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
      store16(mk, ep->act16 + i * ep->ld_act16 + j, gelu_tanh16(hw));
      break;
    }
    case Kind::kGeluBackwardBf16: {
      const __m512 h = load16(mk, ep->pre16 + i * ep->ld_pre16 + j);
      store16(mk, ep->out16 + i * ep->ld_out16 + j, _mm512_mul_ps(r, gelu_tanh_grad16(h)));
      break;
    }
  }
}

// Fetches the rows x cols tile of C at c (leading dimension ldc) into L1: each
// row's first and last line, and the middle one of a 32-column row that does
// not start on a line.
inline void prefetch_c_tile(const float* c, int64_t ldc, int rows, int cols) {
  for (int i = 0; i < rows; ++i) {
    const float* row = c + i * ldc;
    _mm_prefetch(reinterpret_cast<const char*>(row), _MM_HINT_T0);
    if (cols > 16) _mm_prefetch(reinterpret_cast<const char*>(row + 16), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(row + cols - 1), _MM_HINT_T0);
  }
}

// Fetches the rows [0, rows) x columns [0, cols) that the epilogue reads or
// writes for a tile (pointers at the tile's first element), and C's own when
// the epilogue still stores there or load_c reads it.
inline void prefetch_epilogue_rows(const GemmEpilogue& ep, float* c, int64_t ldc, int rows, int cols, bool load_c) {
  using Kind = GemmEpilogue::Kind;
  const bool c_used = load_c || ep.kind == Kind::kGeluForward || ep.kind == Kind::kGeluBackward;
  for (int i = 0; i < rows; ++i) {
    const char* p[2] = {nullptr, nullptr};
    int bytes = 4;
    switch (ep.kind) {
      case Kind::kGeluForward: p[0] = reinterpret_cast<const char*>(ep.act + i * ep.ld_act); break;
      case Kind::kGeluBackward: p[0] = reinterpret_cast<const char*>(ep.pre + i * ep.ld_pre); break;
      case Kind::kRoundBf16: p[0] = reinterpret_cast<const char*>(ep.out16 + i * ep.ld_out16), bytes = 2; break;
      case Kind::kGeluForwardBf16:
        p[0] = reinterpret_cast<const char*>(ep.out16 + i * ep.ld_out16);
        p[1] = reinterpret_cast<const char*>(ep.act16 + i * ep.ld_act16);
        bytes = 2;
        break;
      case Kind::kGeluBackwardBf16:
        p[0] = reinterpret_cast<const char*>(ep.out16 + i * ep.ld_out16);
        p[1] = reinterpret_cast<const char*>(ep.pre16 + i * ep.ld_pre16);
        bytes = 2;
        break;
    }
    for (const char* q : p)
      if (q) {
        __builtin_prefetch(q, 1, 3);
        __builtin_prefetch(q + bytes * (cols - 1), 1, 3);
      }
  }
  if (c_used) prefetch_c_tile(c, ldc, rows, cols);
}

}  // namespace weft::cpu

#pragma GCC pop_options
