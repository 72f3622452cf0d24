// Direct AVX-512 float32 convolution (contract in core/cpu/conv_direct_avx512.h).
//
// Forward: each item of work is one image and one panel of up to 8 output
// channels; it walks the plane's positions in tiles of 32 (two zmm), and per
// tap loads the tile's 32 input values once (masked) and broadcasts the
// panel's weights for that tap (packed tap-major): a GEMM micro-kernel's
// register tile with B read straight from the image instead of a packed
// im2col panel. (8 rows ran 2% faster than 11 or 12 on Zen 4.) Full panels of
// a one-channel 3x3 layer take forward_fixed, the same tile with the kernel
// known at compile time.
// Weight gradient: each item is one chunk of images and a run of 4-channel
// tiles; per tile and block of up to 5 taps, 20 accumulators (plus 4 for the
// bias gradient) collect go * tap over the chunk's positions, and are reduced
// across lanes once per chunk (Zen 4, one chunk of the CNN's first layer:
// 97 GFLOP/s against 80 for 2 channels x 9 taps).
#include "core/cpu/conv_direct_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <utility>
#include <vector>

#include "core/cpu/avx512_util.h"
#include "core/cpu/gemm.h"
#include "core/error.h"
#include "core/parallel.h"

namespace weft::cpu {
namespace {
std::atomic<bool> g_direct{true};
}  // namespace

bool conv_direct_applies(const Conv2dGeom& g, int64_t groups) {
  return g_direct.load(std::memory_order_relaxed) && gemm_f32_uses_avx512() && groups == 1 && g.sH == 1 && g.sW == 1 &&
         g.OW == g.W && g.C * g.kH * g.kW <= kConvDirectMaxTaps;
}

void set_conv_direct_enabled(bool enabled) { g_direct.store(enabled, std::memory_order_relaxed); }

}  // namespace weft::cpu

// Everything below is compiled for AVX-512 whatever -march says; the kernels
// run only where conv_direct_applies() (which checks the CPU).
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")
// GCC 12's _mm512_reduce_add_ps starts from _mm512_undefined_ps(), which the
// uninitialized-use warnings report at every inlined use.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace weft::cpu {
namespace {
constexpr int kRows = 8;      // output channels per forward tile (at most)
constexpr int kGradRows = 4;  // channels per weight-gradient tile
constexpr int kTaps = 5;      // taps per weight-gradient tile (at most)

// The geometry as the kernels use it: tap t (channel c, kernel position s)
// of the 16 positions from q0 = 16 v is the load at x + q0 + xoff[t], its
// lanes masked by mask[v * taps + t] (the same for every channel).
struct Plan {
  int64_t C = 0, hw = 0, L = 0, nvec = 0, taps = 0;
  std::vector<int64_t> xoff;
  std::vector<__mmask16> mask;
};

Plan make_plan(const Conv2dGeom& g) {
  Plan p;
  p.C = g.C;
  p.hw = g.H * g.W;
  p.L = g.OH * g.OW;
  p.nvec = (p.L + 15) / 16;
  const int64_t khw = g.kH * g.kW;
  p.taps = g.C * khw;
  p.xoff.resize(p.taps);
  p.mask.assign(p.nvec * p.taps, 0);
  for (int64_t ki = 0; ki < g.kH; ++ki)
    for (int64_t kj = 0; kj < g.kW; ++kj) {
      const int64_t s = ki * g.kW + kj, dh = ki * g.dH - g.pH, dw = kj * g.dW - g.pW;
      // output row oh reads input row oh + dh, its columns [lo, hi) inside the image
      const int64_t lo = std::max<int64_t>(0, -dw), hi = std::min(g.OW, g.W - dw);
      for (int64_t oh = std::max<int64_t>(0, -dh); oh < std::min(g.OH, g.H - dh); ++oh)
        for (int64_t q = oh * g.OW + lo, qe = oh * g.OW + hi; q < qe;) {
          const int64_t v = q / 16, l0 = q % 16, l1 = std::min<int64_t>(16, qe - 16 * v);
          p.mask[v * p.taps + s] |= __mmask16(lanes(l1) & ~lanes(l0));
          q = 16 * v + l1;
        }
      for (int64_t c = 0; c < g.C; ++c) p.xoff[c * khw + s] = c * p.hw + dh * g.W + dw;
    }
  for (int64_t v = 0; v < p.nvec; ++v)
    for (int64_t c = 1; c < g.C; ++c)
      std::copy_n(p.mask.begin() + v * p.taps, khw, p.mask.begin() + v * p.taps + c * khw);
  return p;
}

// The pieces of a forward register tile (R channels x V zmm of positions),
// shared by forward_tile and forward_fixed: the sums started from the bias (or
// 0); one tap's V inputs times its R weights (w, R floats) added; the tile
// stored at positions [q0, q0 + 16 V) of rows r * L, lanes past L masked.
template <int R, int V>
__attribute__((always_inline)) inline void tile_start(__m512 (&acc)[R][V], const float* bias) {
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m512 b = bias ? _mm512_set1_ps(bias[r]) : _mm512_setzero_ps();
#pragma GCC unroll 2
    for (int u = 0; u < V; ++u) acc[r][u] = b;
  }
}
template <int R, int V>
__attribute__((always_inline)) inline void tile_tap(__m512 (&acc)[R][V], const __m512 (&xv)[V], const float* w) {
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m512 wv = _mm512_set1_ps(w[r]);
#pragma GCC unroll 2
    for (int u = 0; u < V; ++u) acc[r][u] = _mm512_fmadd_ps(wv, xv[u], acc[r][u]);
  }
}
template <int R, int V>
__attribute__((always_inline)) inline void tile_store(const __m512 (&acc)[R][V], float* out, int64_t L, int64_t q0) {
#pragma GCC unroll 2
  for (int u = 0; u < V; ++u) {
    const __mmask16 mk = lanes(L - q0 - 16 * u);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(out + r * L + q0 + 16 * u, mk, acc[r][u]);
  }
}

// Rows [0, R) of out (row stride L) at positions [16 v0, 16 (v0 + V)) = bias
// (R values, or nullptr) + sum over taps t of wp[t * R + r] * tap t of image x.
// wp is the panel's weights packed tap-major, so each tap's R broadcasts read
// one run of R floats.
template <int R, int V>
void forward_tile(const Plan& p, const float* __restrict x, const float* __restrict wp, const float* __restrict bias,
                  int64_t v0, float* __restrict out) {
  __m512 acc[R][V];
  tile_start(acc, bias);
  const int64_t q0 = 16 * v0;
  const float* xq = x + q0;
  const __mmask16* mrow = p.mask.data() + v0 * p.taps;
  const int64_t* xoff = p.xoff.data();
  for (int64_t t = 0; t < p.taps; ++t) {
    __m512 xv[V];
#pragma GCC unroll 2
    for (int u = 0; u < V; ++u) xv[u] = _mm512_maskz_loadu_ps(mrow[u * p.taps + t], xq + 16 * u + xoff[t]);
    tile_tap(acc, xv, wp);
    wp += R;
  }
  tile_store(acc, out, p.L, q0);
}

// forward_tile for a full panel (kRows channels) over the zmm pairs [v0, v1)
// of the positions, for a kernel known at compile time: KR rows (channels x
// kernel rows) of KW adjacent taps (a column dilation of 1). The tap loop is
// unrolled, each of the KR rows is one base pointer and its KW taps fixed
// displacements from it, and the loop over the tiles is in here. Zen 4, the
// CNN's first layer: 83 -> 88-90 GFLOP/s. (The same loop with a runtime tap
// count ran up to 8% slower than forward_tile, so the other kernels stay
// there.)
template <int KR, int KW>
void forward_fixed(const Plan& p, const float* __restrict x, const float* __restrict wp, const float* __restrict bias,
                   int64_t v0, int64_t v1, float* __restrict out) {
  constexpr int R = kRows, V = 2, NT = KR * KW;
  // (in locals, not read through p: the compiler cannot tell that the stores
  // to out leave p alone, and reloaded them for every load and store)
  const int64_t L = p.L;
  const __mmask16* mask = p.mask.data();
  const float* xrow[KR];
  for (int i = 0; i < KR; ++i) xrow[i] = x + p.xoff[i * KW];
  for (int64_t v = v0; v < v1; v += V) {
    __m512 acc[R][V];
    tile_start(acc, bias);
    const int64_t q0 = 16 * v;
    const __mmask16* mrow = mask + v * NT;
    const float* w = wp;
#pragma GCC unroll 32
    for (int t = 0; t < NT; ++t) {
      __m512 xv[V];
#pragma GCC unroll 2
      for (int u = 0; u < V; ++u) xv[u] = _mm512_maskz_loadu_ps(mrow[u * NT + t], xrow[t / KW] + q0 + 16 * u + t % KW);
      tile_tap(acc, xv, w);
      w += R;
    }
    tile_store(acc, out, L, q0);
  }
}

// Rows [0, R) of gw (row stride taps) at taps [t0, t0 + T) = sum over the
// chunk's nimg images and positions of go row r * tap t, and gb[r] (when gb
// is not nullptr) = go row r summed. x and go point at the chunk's first
// image (go at the tile's first row), gw and gb at the tile's first row.
// The taps' base pointers are set once per image and the partial last vector
// is peeled off the position loop, which keeps the loop's addressing in
// registers (Zen 4, the CNN's first layer: 85 -> 97 GFLOP/s; with a tail mask,
// a multiply for the mask row and the offsets per vector, it spilled).
template <int R, int T>
void weight_grad_tile(const Plan& p, int64_t nimg, const float* __restrict x, const float* __restrict go,
                      int64_t go_image, int64_t t0, float* __restrict gw, float* __restrict gb) {
  __m512 acc[R][T], bacc[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    bacc[r] = _mm512_setzero_ps();
#pragma GCC unroll 12
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  }
  const int64_t x_image = p.C * p.hw, L = p.L, taps = p.taps, full = L / 16;
  for (int64_t i = 0; i < nimg; ++i) {
    const float* gi = go + i * go_image;
    const float* xt[T];  // the taps' base pointers in image i
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) xt[t] = x + i * x_image + p.xoff[t0 + t];
    const __mmask16* mrow = p.mask.data() + t0;
    auto step = [&](int64_t q0, __mmask16 tail) __attribute__((always_inline)) {
      __m512 g[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) g[r] = _mm512_maskz_loadu_ps(tail, gi + r * L + q0);
        // (summed whether or not gb is wanted: a branch here costs the
        // accumulators their registers)
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) bacc[r] = _mm512_add_ps(bacc[r], g[r]);
#pragma GCC unroll 12
      for (int t = 0; t < T; ++t) {
        const __m512 xv = _mm512_maskz_loadu_ps(mrow[t], xt[t] + q0);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(g[r], xv, acc[r][t]);
      }
      mrow += taps;
    };
    for (int64_t v = 0; v < full; ++v) step(16 * v, __mmask16(0xFFFF));
    if (full < p.nvec) step(16 * full, lanes(L - 16 * full));
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 12
    for (int t = 0; t < T; ++t) gw[r * taps + t0 + t] = _mm512_reduce_add_ps(acc[r][t]);
    if (gb) gb[r] = _mm512_reduce_add_ps(bacc[r]);
  }
}

using ForwardFn = void (*)(const Plan&, const float*, const float*, const float*, int64_t, float*);
using FixedFn = void (*)(const Plan&, const float*, const float*, const float*, int64_t, int64_t, float*);
using WeightGradFn = void (*)(const Plan&, int64_t, const float*, const float*, int64_t, int64_t, float*, float*);

template <int... I>
constexpr std::array<std::array<ForwardFn, 2>, sizeof...(I)> forward_table(std::integer_sequence<int, I...>) {
  return {{{&forward_tile<I + 1, 1>, &forward_tile<I + 1, 2>}...}};
}
template <int T, int... R>
constexpr std::array<WeightGradFn, sizeof...(R)> weight_grad_row(std::integer_sequence<int, R...>) {
  return {{&weight_grad_tile<R + 1, T>...}};
}
template <int... T>
constexpr std::array<std::array<WeightGradFn, kGradRows>, sizeof...(T)> weight_grad_table(
    std::integer_sequence<int, T...>) {
  return {{weight_grad_row<T + 1>(std::make_integer_sequence<int, kGradRows>{})...}};
}
// kForward[r - 1][v - 1]: r channels, v zmm of positions.
constexpr auto kForward = forward_table(std::make_integer_sequence<int, kRows>{});
// The kernel forward_fixed runs (a full panel of a one-channel 3x3 layer with
// a column dilation of 1, the usual first layer), or nullptr. (Fixed kernels
// for one-channel 5x5 and RGB 3x3 gained under 1% and lost 1.5% on Zen 4.)
FixedFn fixed_forward(const Conv2dGeom& g) {
  return g.C == 1 && g.kH == 3 && g.kW == 3 && g.dW == 1 ? &forward_fixed<3, 3> : nullptr;
}
// kWeightGrad[t - 1][r - 1]: t taps, r channels.
constexpr auto kWeightGrad = weight_grad_table(std::make_integer_sequence<int, kTaps>{});

// Work below this many flops runs on the calling thread.
constexpr double kInlineFlops = double(1 << 18);

}  // namespace

void conv_direct_forward(int64_t n, const float* x, const float* w, const float* bias, int64_t cout,
                         const Conv2dGeom& g, float* out) {
  WEFT_CHECK(g.sH == 1 && g.sW == 1 && g.OW == g.W, "conv_direct_forward: needs stride 1 and OW == W");
  if (n == 0 || cout == 0 || g.OH * g.OW == 0) return;
  const Plan p = make_plan(g);
  // channels cut into near-equal panels of at most kRows
  const int64_t panels = (cout + kRows - 1) / kRows;
  auto row0 = [&](int64_t i) { return i * cout / panels; };
  // each panel's weights tap-major: wp[panel rows * t + r] at the panel's offset r0 * taps
  std::vector<float> wp(cout * p.taps);
  for (int64_t pi = 0; pi < panels; ++pi) {
    const int64_t r0 = row0(pi), rows = row0(pi + 1) - r0;
    for (int64_t t = 0; t < p.taps; ++t)
      for (int64_t r = 0; r < rows; ++r) wp[r0 * p.taps + t * rows + r] = w[(r0 + r) * p.taps + t];
  }
  const FixedFn fixed = fixed_forward(g);
  const double flops = 2.0 * n * cout * p.taps * p.L;
  parallel_for(0, n * panels, flops >= kInlineFlops ? 1 : n * panels, [&](int64_t w0, int64_t w1) {
    for (int64_t item = w0; item < w1; ++item) {
      const int64_t img = item / panels, pi = item % panels;
      const int64_t r0 = row0(pi), rows = row0(pi + 1) - r0;
      const float* xi = x + img * p.C * p.hw;
      float* oi = out + (img * cout + r0) * p.L;
      const float* bi = bias ? bias + r0 : nullptr;
      const float* wi = wp.data() + r0 * p.taps;
      int64_t v = 0;
      if (rows == kRows && fixed) {
        v = p.nvec / 2 * 2;
        fixed(p, xi, wi, bi, 0, v, oi);
      }
      for (; v < p.nvec; v += 2) {
        const int vv = v + 1 < p.nvec ? 2 : 1;
        kForward[rows - 1][vv - 1](p, xi, wi, bi, v, oi);
      }
    }
  });
}

void conv_direct_weight_grad(int64_t n, const float* x, const float* go, int64_t cout, const Conv2dGeom& g, float* gw,
                             float* gb) {
  WEFT_CHECK(g.sH == 1 && g.sW == 1 && g.OW == g.W, "conv_direct_weight_grad: needs stride 1 and OW == W");
  const Plan p = make_plan(g);
  const int64_t wn = cout * p.taps;
  if (n == 0 || p.L == 0) {
    std::fill(gw, gw + wn, 0.0f);
    if (gb) std::fill(gb, gb + cout, 0.0f);
    return;
  }
  // Note [conv direct determinism]: chunk ch's sums land in its own slot (gw
  // and gb for chunk 0), summed in chunk order below.
  const int64_t chunks = (n + kConvDirectChunk - 1) / kConvDirectChunk;
  const int64_t slot = wn + cout;
  std::vector<float> partial((chunks - 1) * slot);
  auto gw_of = [&](int64_t ch) { return ch == 0 ? gw : partial.data() + (ch - 1) * slot; };
  auto gb_of = [&](int64_t ch) { return gb ? (ch == 0 ? gb : partial.data() + (ch - 1) * slot + wn) : nullptr; };
  // taps cut into near-equal blocks of at most kTaps
  const int64_t blocks = (p.taps + kTaps - 1) / kTaps;
  auto tap0 = [&](int64_t b) { return b * p.taps / blocks; };
  // Tiles of kGradRows channels are split among items too where chunks alone
  // are fewer than two per thread; which item computes a tile does not change
  // its sums.
  const int64_t tiles = (cout + kGradRows - 1) / kGradRows;
  const int nt = in_parallel_region() ? 1 : get_num_threads();
  const int64_t groups = std::min(tiles, std::max<int64_t>(1, (2 * nt + chunks - 1) / chunks));
  const double flops = 2.0 * n * wn * p.L;
  parallel_for(0, chunks * groups, flops >= kInlineFlops ? 1 : chunks * groups, [&](int64_t w0, int64_t w1) {
    for (int64_t item = w0; item < w1; ++item) {
      const int64_t ch = item / groups, gi = item % groups;
      const int64_t i0 = ch * kConvDirectChunk, nimg = std::min(kConvDirectChunk, n - i0);
      float* pw = gw_of(ch);
      float* pb = gb_of(ch);
      for (int64_t pr = gi * tiles / groups; pr < (gi + 1) * tiles / groups; ++pr) {
        const int64_t c0 = kGradRows * pr, rows = std::min<int64_t>(kGradRows, cout - c0);
        for (int64_t b = 0; b < blocks; ++b) {
          const int64_t t0 = tap0(b), taps = tap0(b + 1) - t0;
          const float* xc = x + i0 * p.C * p.hw;
          const float* gc = go + (i0 * cout + c0) * p.L;
          float* bc = b == 0 && pb ? pb + c0 : nullptr;
          kWeightGrad[taps - 1][rows - 1](p, nimg, xc, gc, cout * p.L, t0, pw + c0 * p.taps, bc);
        }
      }
    }
  });
  for (int64_t ch = 1; ch < chunks; ++ch) {
    const float* src = partial.data() + (ch - 1) * slot;
    for (int64_t i = 0; i < wn; ++i) gw[i] += src[i];
    if (gb)
      for (int64_t i = 0; i < cout; ++i) gb[i] += src[wn + i];
  }
}

}  // namespace weft::cpu

#pragma GCC diagnostic pop
#pragma GCC pop_options
