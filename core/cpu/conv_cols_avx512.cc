// Implicit im2col packing for the AVX-512 GEMM (contract in
// core/cpu/conv_cols_avx512.h).
#include "core/cpu/conv_cols_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/cpu/avx512_util.h"
#include "core/cpu/gemm.h"

namespace weft::cpu {
namespace {
std::atomic<bool> g_cols{true};
}  // namespace

bool conv_cols_applies(const Conv2dGeom& g, int64_t groups) {
  return g_cols.load(std::memory_order_relaxed) && gemm_f32_uses_avx512() && groups == 1 && g.sH == 1 && g.sW == 1 &&
         g.OW == g.W && g.OH * g.OW >= 16 && g.C * g.kH * g.kW >= 16;
}

void set_conv_cols_enabled(bool enabled) { g_cols.store(enabled, std::memory_order_relaxed); }

ConvColsPlan::ConvColsPlan(const Conv2dGeom& g) {
  taps = g.C * g.kH * g.kW;
  L = g.OH * g.OW;
  image = g.C * g.H * g.W;
  // a 4-byte window is read from byte q / 8 for any q < L
  row_bytes = (L + 7) / 8 + 4;
  xoff.resize(taps);
  bits.assign(taps * row_bytes, 0);
  for (int64_t ki = 0; ki < g.kH; ++ki)
    for (int64_t kj = 0; kj < g.kW; ++kj) {
      const int64_t dh = ki * g.dH - g.pH, dw = kj * g.dW - g.pW;
      // output row oh reads input row oh + dh, its columns [lo, hi) inside the image
      const int64_t lo = std::max<int64_t>(0, -dw), hi = std::min(g.OW, g.W - dw);
      uint8_t* row = bits.data() + (ki * g.kW + kj) * row_bytes;
      for (int64_t oh = std::max<int64_t>(0, -dh); oh < std::min(g.OH, g.H - dh); ++oh)
        for (int64_t ow = lo; ow < hi; ++ow) {
          const int64_t q = oh * g.OW + ow;
          row[q / 8] = uint8_t(row[q / 8] | (1u << (q % 8)));
        }
      for (int64_t c = 0; c < g.C; ++c) {
        const int64_t t = (c * g.kH + ki) * g.kW + kj;
        xoff[t] = c * g.H * g.W + dh * g.W + dw;
        if (c > 0) std::memcpy(bits.data() + t * row_bytes, row, row_bytes);
      }
    }
}

}  // namespace weft::cpu

// Everything below is compiled for AVX-512 whatever -march says; it runs only
// where conv_cols_applies() (which checks the CPU).
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace weft::cpu {
namespace {

// Validity bits q .. q + 15 of tap t (q < L; bits past L are 0).
inline uint32_t window(const ConvColsPlan& P, int64_t t, int64_t q) {
  uint32_t w;
  std::memcpy(&w, P.bits.data() + t * P.row_bytes + q / 8, sizeof w);
  return (w >> (q % 8)) & 0xFFFF;
}

// Row t of the chunk's cols at columns [j, j + 16), j = img * L + q, the lanes
// outside `lim` zero. Lanes past position L - 1 of image img come from the
// next image's first positions.
inline __m512 load_tap(const ConvColsPlan& P, const float* x, int64_t t, int64_t img, int64_t q, __mmask16 lim) {
  const float* base = x + img * P.image + P.xoff[t];
  __m512 v = _mm512_maskz_loadu_ps(__mmask16(window(P, t, q) & lim), base + q);
  const int64_t s = P.L - q;  // lanes left in image img
  if (s < 16) {
    const __mmask16 next = __mmask16((window(P, t, 0) << s) & lim);
    if (next) v = _mm512_mask_loadu_ps(v, next, base + P.image - s);
  }
  return v;
}

}  // namespace

void ConvColsPack::pack(int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* dst) const {
  const ConvColsPlan& P = plan_;
  for (int64_t jr = 0; jr < nc; jr += kGemmPanelCols) {
    const int64_t cols = std::min(kGemmPanelCols, nc - jr);
    const int w = cols > 16 ? 32 : 16;
    float* panel = dst + jr * kc;
    for (int h = 0; h < w / 16; ++h) {
      const int64_t j = j0 + jr + 16 * h, img = j / P.L, q = j - img * P.L;
      const __mmask16 lim = lanes(cols - 16 * h);
      for (int64_t p = 0; p < kc; ++p) _mm512_store_ps(panel + p * w + 16 * h, load_tap(P, x_, p0 + p, img, q, lim));
    }
  }
}

void ConvColsTPack::pack(int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* dst) const {
  const ConvColsPlan& P = plan_;
  for (int64_t jr = 0; jr < nc; jr += kGemmPanelCols) {
    const int64_t cols = std::min(kGemmPanelCols, nc - jr);
    const int w = cols > 16 ? 32 : 16;
    float* panel = dst + jr * kc;
    for (int h = 0; h < w / 16; ++h) {
      const int64_t t0 = j0 + jr + 16 * h;
      const int ct = static_cast<int>(std::clamp<int64_t>(cols - 16 * h, 0, 16));  // taps in this half
      for (int64_t p = 0; p < kc; p += 16) {
        const int64_t pl = std::min<int64_t>(16, kc - p), j = p0 + p, img = j / P.L, q = j - img * P.L;
        const __mmask16 lim = lanes(pl);
        // r[i] = tap t0 + i at the 16 positions; transposed, r[e] = position e's 16 taps
        __m512 r[16];
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) r[i] = i < ct ? load_tap(P, x_, t0 + i, img, q, lim) : _mm512_setzero_ps();
        transpose16(r);
        for (int64_t e = 0; e < pl; ++e) _mm512_store_ps(panel + (p + e) * w + 16 * h, r[e]);
      }
    }
  }
}

}  // namespace weft::cpu

#pragma GCC diagnostic pop
#pragma GCC pop_options
