// Direct AVX-512 float32 convolution with the output channels in the vector
// lanes (contract in core/cpu/conv_lanes_avx512.h).
#include "core/cpu/conv_lanes_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "core/cpu/avx512_util.h"
#include "core/cpu/gemm.h"
#include "core/error.h"
#include "core/parallel.h"

namespace weft::cpu {
namespace {
std::atomic<bool> g_lanes{true};
constexpr int kMaxStride = 2;  // column strides with tiles of their own

// One group and `channels` output channels filling at least 7/8 of the lanes
// they take (16 a zmm). (Zen 4, one thread: 24 channels, 3/4 of two zmm, ran
// the forward of a 5x5 layer at 0.91x the GEMM's speed, which fills its
// 12-row tiles.)
bool lanes_fill(int64_t groups, int64_t channels) {
  return g_lanes.load(std::memory_order_relaxed) && gemm_f32_uses_avx512() && groups == 1 && channels >= 16 &&
         8 * channels >= 7 * 16 * ((channels + 15) / 16);
}
}  // namespace

bool conv_lanes_applies(const Conv2dGeom& g, int64_t groups, int64_t cout) {
  return lanes_fill(groups, cout) && g.sH >= 1 && g.sW >= 1 && g.sW <= kMaxStride;
}

bool conv_lanes_input_grad_applies(const Conv2dGeom& g, int64_t groups) {
  return lanes_fill(groups, g.C) && g.sH == 1 && g.sW == 1 && g.OW == g.W && g.pH <= g.dH * (g.kH - 1);
}

void set_conv_lanes_enabled(bool enabled) { g_lanes.store(enabled, std::memory_order_relaxed); }

}  // namespace weft::cpu

// Everything below is compiled for AVX-512 whatever -march says; it runs only
// where conv_lanes_applies() or conv_lanes_input_grad_applies() (which check
// the CPU).
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")
// GCC 12's unpack and shuffle intrinsics (transpose16) start from
// _mm512_undefined_ps(), which the uninitialized-use warnings report.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace weft::cpu {
namespace {

constexpr int kPanel = 32;  // output channels per tile (two zmm)
constexpr int kPos = 14;    // output positions per tile, at most (28 accumulators)

// The image as the kernels read it: per channel a plane of Hp rows x Wp
// columns. Padded (pH or pW > 0), a copy: row r and column u hold input row
// r - pH, column u - pW (zero outside the image), Hp = (OH - 1) sH + dH (kH -
// 1) + 1 rows of Wp = (OW - 1) sW + dW (kW - 1) + 1 columns, just what the
// outputs read. Unpadded, the image itself (Hp = H, Wp = W). Output (oh, ow)
// reads tap t at toff[t] + oh sH Wp + ow sW.
struct Layout {
  bool padded = false;
  int64_t Hp = 0, Wp = 0, plane = 0, taps = 0;
  std::vector<int64_t> toff;
};

Layout make_layout(const Conv2dGeom& g) {
  Layout l;
  l.padded = g.pH != 0 || g.pW != 0;
  l.Hp = l.padded ? (g.OH - 1) * g.sH + g.dH * (g.kH - 1) + 1 : g.H;
  l.Wp = l.padded ? (g.OW - 1) * g.sW + g.dW * (g.kW - 1) + 1 : g.W;
  l.plane = l.Hp * l.Wp;
  l.taps = g.C * g.kH * g.kW;
  l.toff.resize(l.taps);
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t ki = 0; ki < g.kH; ++ki)
      for (int64_t kj = 0; kj < g.kW; ++kj)
        l.toff[(c * g.kH + ki) * g.kW + kj] = c * l.plane + ki * g.dH * l.Wp + kj * g.dW;
  return l;
}

// The rows of image x (C, H, W) that the outputs read into xp (C planes of a
// padded layout). The padding is never written: it stays zero from the
// buffer's allocation.
void copy_image(const Conv2dGeom& g, const Layout& l, const float* x, float* xp) {
  const int64_t rows = std::min(g.H, l.Hp - g.pH), cols = std::min(g.W, l.Wp - g.pW);
  if (rows <= 0 || cols <= 0) return;
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t ih = 0; ih < rows; ++ih)
      std::memcpy(xp + c * l.plane + (ih + g.pH) * l.Wp + g.pW, x + (c * g.H + ih) * g.W, cols * sizeof(float));
}

// Channels [0, rows) of a panel (rows <= 16 V) at P adjacent output positions
// of one row, S columns apart in the image: xo is the layout at the first
// position, wp the panel's
// weights (tap t's 16 V lanes at wp + 16 V t, zero past rows), out the first
// position in channel 0's output plane (channel r's at out + r L). Each
// output is summed over the taps in blocks of kc, each block in order from
// zero and added to the blocks before it (Note [conv lanes bits]), then
// transposed 16 x 16 and stored with the bias added.
template <int S, int P, int V>
void tile(const float* __restrict xo, const int64_t* __restrict toff, int64_t taps, int64_t kc,
          const float* __restrict wp, const float* __restrict bias, int rows, int64_t L, float* __restrict out) {
  __m512 acc[P][V];
  alignas(64) float part[P][V][16];  // the sum of the blocks before the current one
  for (int64_t t0 = 0;;) {
    const int64_t t1 = std::min(taps, t0 + kc);
#pragma GCC unroll 14
    for (int p = 0; p < P; ++p)
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) acc[p][v] = _mm512_setzero_ps();
    for (int64_t t = t0; t < t1; ++t) {
      const float* xr = xo + toff[t];
      const float* wt = wp + 16 * V * t;
      __m512 wv[V];
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) wv[v] = _mm512_load_ps(wt + 16 * v);
#pragma GCC unroll 14
      for (int p = 0; p < P; ++p) {
        const __m512 xb = _mm512_set1_ps(xr[S * p]);
#pragma GCC unroll 2
        for (int v = 0; v < V; ++v) acc[p][v] = _mm512_fmadd_ps(wv[v], xb, acc[p][v]);
      }
    }
    const bool first = t0 == 0, last = t1 == taps;
    if (first && last) break;
#pragma GCC unroll 14
    for (int p = 0; p < P; ++p)
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) {
        const __m512 sum = first ? acc[p][v] : _mm512_add_ps(acc[p][v], _mm512_load_ps(part[p][v]));
        if (last) acc[p][v] = sum;
        else _mm512_store_ps(part[p][v], sum);
      }
    if (last) break;
    t0 = t1;
  }
  const __mmask16 m = lanes(P);
#pragma GCC unroll 2
  for (int v = 0; v < V; ++v) {
    __m512 r[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) r[i] = i < P ? acc[i][v] : _mm512_setzero_ps();
    transpose16(r);  // r[i]: channel 16 v + i at the P positions
    for (int i = 0; i < 16 && 16 * v + i < rows; ++i) {
      const int c = 16 * v + i;
      const __m512 y = bias ? _mm512_add_ps(r[i], _mm512_set1_ps(bias[c])) : r[i];
      _mm512_mask_storeu_ps(out + c * L, m, y);
    }
  }
}

using TileFn = void (*)(const float*, const int64_t*, int64_t, int64_t, const float*, const float*, int, int64_t,
                        float*);

template <int S, int... I>
constexpr std::array<std::array<TileFn, 2>, sizeof...(I)> tile_table(std::integer_sequence<int, I...>) {
  return {{{&tile<S, I + 1, 1>, &tile<S, I + 1, 2>}...}};
}
// kTile[s - 1][p - 1][v - 1]: column stride s, p positions, v zmm of channels.
constexpr std::array<std::array<std::array<TileFn, 2>, kPos>, kMaxStride> kTile = {
    tile_table<1>(std::make_integer_sequence<int, kPos>{}), tile_table<2>(std::make_integer_sequence<int, kPos>{})};

// out (n, cout, OH, W) = bias (or none) + the convolution of x (n, C, H, W)
// with the weights wt(o, t) (output channel o, tap t = (c, ki, kj) in order),
// the taps summed in blocks of kc (Note [conv lanes bits]).
template <typename Weights>
void convolve(int64_t n, const float* x, const Weights& wt, const float* bias, int64_t cout, const Conv2dGeom& g,
              int64_t kc, float* out) {
  const int64_t L = g.OH * g.OW;
  if (n == 0 || cout == 0 || L == 0) return;
  const Layout l = make_layout(g);
  const int64_t taps = l.taps, panels = (cout + kPanel - 1) / kPanel;
  // Panel pi's weights, tap-major (tap t's 16 or 32 lanes, zero past the
  // panel's rows), at wp + pi * taps * kPanel, 64-byte aligned.
  std::vector<float> wbuf(panels * taps * kPanel + 16, 0.0f);
  float* wp = wbuf.data() + (16 - reinterpret_cast<uintptr_t>(wbuf.data()) / sizeof(float) % 16) % 16;
  for (int64_t pi = 0; pi < panels; ++pi) {
    const int64_t c0 = pi * kPanel, rows = std::min<int64_t>(kPanel, cout - c0), width = rows > 16 ? 32 : 16;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t t = 0; t < taps; ++t) wp[pi * taps * kPanel + t * width + r] = wt(c0 + r, t);
  }
  // each output row in near-equal blocks of at most kPos positions
  const int64_t blocks = (g.OW + kPos - 1) / kPos;
  const auto& tiles = kTile[g.sW - 1];
  parallel_for(0, n, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> pad(l.padded ? g.C * l.plane : 0, 0.0f);
    for (int64_t img = i0; img < i1; ++img) {
      const float* xi = x + img * g.C * g.H * g.W;
      if (l.padded) copy_image(g, l, xi, pad.data());
      const float* xp = l.padded ? pad.data() : xi;
      for (int64_t pi = 0; pi < panels; ++pi) {
        const int64_t c0 = pi * kPanel;
        const int rows = static_cast<int>(std::min<int64_t>(kPanel, cout - c0));
        const int V = rows > 16 ? 2 : 1;
        const float* wpi = wp + pi * taps * kPanel;
        const float* bi = bias ? bias + c0 : nullptr;
        float* oi = out + (img * cout + c0) * L;
        for (int64_t oh = 0; oh < g.OH; ++oh)
          for (int64_t b = 0; b < blocks; ++b) {
            const int64_t ow0 = b * g.OW / blocks, P = (b + 1) * g.OW / blocks - ow0;
            tiles[P - 1][V - 1](xp + oh * g.sH * l.Wp + ow0 * g.sW, l.toff.data(), taps, kc, wpi, bi, rows, L,
                                oi + oh * g.OW + ow0);
          }
      }
    }
  });
}

}  // namespace

void conv_lanes_forward(int64_t n, const float* x, const float* w, const float* bias, int64_t cout, const Conv2dGeom& g,
                        float* out) {
  WEFT_CHECK(g.sH >= 1 && g.sW >= 1 && g.sW <= kMaxStride,
             "conv_lanes_forward: needs a column stride of 1 or 2, got stride (", g.sH, ", ", g.sW, ")");
  const int64_t taps = g.C * g.kH * g.kW;
  convolve(
      n, x, [&](int64_t o, int64_t t) { return w[o * taps + t]; }, bias, cout, g,
      std::max<int64_t>(1, gemm_avx512_k_block(taps)), out);
}

void conv_lanes_input_grad(int64_t n, const float* go, const float* w, int64_t cout, const Conv2dGeom& g, float* gx) {
  WEFT_CHECK(g.sH == 1 && g.sW == 1 && g.OW == g.W && g.pH <= g.dH * (g.kH - 1),
             "conv_lanes_input_grad: needs stride 1, OW == W and pH <= dH (kH - 1), got pH ", g.pH);
  // Note [conv lanes input gradient]: gx is go convolved with w flipped in
  // both kernel dimensions and its channels swapped, go padded by dH (kH - 1)
  // - pH rows (and pW columns: 2 pW = dW (kW - 1)), an output as high as the
  // input. Tap t = (o, ki, kj) of output channel c is w[o, c, kH - 1 - ki,
  // kW - 1 - kj].
  const Conv2dGeom gt{cout, g.OH, g.W, g.kH, g.kW, 1, 1, g.dH * (g.kH - 1) - g.pH, g.pW, g.dH, g.dW, g.H, g.W};
  const int64_t khw = g.kH * g.kW, taps = cout * khw;
  std::vector<float> wt(g.C * taps);  // (C, cout, kH, kW), flipped
  for (int64_t o = 0; o < cout; ++o)
    for (int64_t c = 0; c < g.C; ++c)
      for (int64_t s = 0; s < khw; ++s) wt[(c * cout + o) * khw + s] = w[(o * g.C + c) * khw + (khw - 1 - s)];
  convolve(
      n, go, [&](int64_t c, int64_t t) { return wt[c * taps + t]; }, nullptr, g.C, gt, std::max<int64_t>(1, taps), gx);
}

}  // namespace weft::cpu

#pragma GCC diagnostic pop
#pragma GCC pop_options
