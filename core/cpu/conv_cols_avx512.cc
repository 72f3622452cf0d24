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

// The 16 columns [j, j + 16) of a chunk's cols, j = img * L + q, the lanes
// outside `lim` zero, as every tap loads them (load_run): tap t is the load at
// base + xoff[t] under its validity bits q .. q + 15 (row t of the bits from
// byte q / 8, shifted down by q % 8). Where the run crosses into image img + 1
// (s = L - q < 16 lanes left in img), a second load at nbase + xoff[t] fills
// the last lanes, under row t's first bits shifted up by s. Everything here
// is per run, so the tap loops keep it in registers (the panel stores may
// alias any memory the loops read through the plan), and whether a run
// crosses is decided once per run, not per tap. Zen 4, the CNN's second layer
// (1 thread): with the plan read per load and the crossing tested per tap,
// packing took 11-15% of the forward; now 6-8% (the GEMMs, packing included:
// output 101 -> 105.6 GFLOP/s, weight gradient 96.8 -> 103.6).
struct Run {
  Run(const ConvColsPlan& P, const float* x, int64_t j, __mmask16 lim_) : lim(lim_) {
    const int64_t img = j / P.L, q = j - img * P.L;
    base = x + img * P.image + q;
    s = P.L - q;
    nbase = x + (img + 1) * P.image - s;
    byte = q / 8;
    shift = static_cast<int>(q % 8);
  }
  bool crosses() const { return s < 16; }
  const float* base;
  const float* nbase;
  int64_t s, byte;
  int shift;
  __mmask16 lim;
};

// Tap t of run r: xoff = xoff[t], row = its validity bits (P.bits + t * row_bytes).
template <bool kCrosses>
__attribute__((always_inline)) inline __m512 load_run(const Run& r, int64_t xoff, const uint8_t* row) {
  uint32_t m;
  std::memcpy(&m, row + r.byte, sizeof m);
  __m512 v = _mm512_maskz_loadu_ps(__mmask16((m >> r.shift) & r.lim), r.base + xoff);
  if constexpr (kCrosses) {
    std::memcpy(&m, row, sizeof m);
    const __mmask16 next = __mmask16((m << r.s) & r.lim);
    if (next) v = _mm512_mask_loadu_ps(v, next, r.nbase + xoff);
  }
  return v;
}

// Rows [0, kc) of run r for the taps at xoff / bits (row stride rb) to out,
// one zmm a row, rows w floats apart.
template <bool kCrosses>
void pack_rows(const Run& r, const int64_t* xoff, const uint8_t* bits, int64_t rb, int64_t kc, float* out, int w) {
  for (int64_t p = 0; p < kc; ++p, bits += rb, out += w) _mm512_store_ps(out, load_run<kCrosses>(r, xoff[p], bits));
}

// v[i] = tap i of run r (xoff[i], bits + i * rb) for i < ct, 0 past it.
template <bool kCrosses>
__attribute__((always_inline)) inline void load_taps(const Run& r, const int64_t* xoff, const uint8_t* bits, int64_t rb,
                                                     int ct, __m512 (&v)[16]) {
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) v[i] = i < ct ? load_run<kCrosses>(r, xoff[i], bits + i * rb) : _mm512_setzero_ps();
}

}  // namespace

void ConvColsPack::pack(int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* dst) const {
  const ConvColsPlan& P = plan_;
  const int64_t rb = P.row_bytes;
  const int64_t* xoff = P.xoff.data() + p0;
  const uint8_t* bits = P.bits.data() + p0 * rb;
  for (int64_t jr = 0; jr < nc; jr += kGemmPanelCols) {
    const int64_t cols = std::min(kGemmPanelCols, nc - jr);
    const int w = cols > 16 ? 32 : 16;
    float* panel = dst + jr * kc;
    for (int h = 0; h < w / 16; ++h) {
      const Run r(P, x_, j0 + jr + 16 * h, lanes(cols - 16 * h));
      if (r.crosses()) pack_rows<true>(r, xoff, bits, rb, kc, panel + 16 * h, w);
      else pack_rows<false>(r, xoff, bits, rb, kc, panel + 16 * h, w);
    }
  }
}

void ConvColsTPack::pack(int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* dst) const {
  const ConvColsPlan& P = plan_;
  const int64_t rb = P.row_bytes;
  for (int64_t jr = 0; jr < nc; jr += kGemmPanelCols) {
    const int64_t cols = std::min(kGemmPanelCols, nc - jr);
    const int w = cols > 16 ? 32 : 16;
    float* panel = dst + jr * kc;
    for (int h = 0; h < w / 16; ++h) {
      const int64_t t0 = j0 + jr + 16 * h;
      const int ct = static_cast<int>(std::clamp<int64_t>(cols - 16 * h, 0, 16));  // taps in this half
      const int64_t* xoff = P.xoff.data() + t0;
      const uint8_t* bits = P.bits.data() + t0 * rb;
      for (int64_t p = 0; p < kc; p += 16) {
        const int64_t pl = std::min<int64_t>(16, kc - p);
        const Run r(P, x_, p0 + p, lanes(pl));
        // v[i] = tap t0 + i at the 16 positions; transposed, v[e] = position e's 16 taps
        __m512 v[16];
        if (r.crosses()) load_taps<true>(r, xoff, bits, rb, ct, v);
        else load_taps<false>(r, xoff, bits, rb, ct, v);
        transpose16(v);
        for (int64_t e = 0; e < pl; ++e) _mm512_store_ps(panel + (p + e) * w + 16 * h, v[e]);
      }
    }
  }
}

}  // namespace weft::cpu

#pragma GCC diagnostic pop
#pragma GCC pop_options
