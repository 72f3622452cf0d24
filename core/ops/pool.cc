// Pooling over NCHW images: max_pool2d, avg_pool2d, adaptive_avg_pool2d (PyTorch semantics).
//
// Contract: input (N, C, H, W) or unbatched (C, H, W). Output sizes follow
// PyTorch's pooling_output_shape: floor((H + 2p - d (k - 1) - 1 [+ s - 1 if
// ceil_mode]) / s) + 1, and in ceil_mode the last window must start inside the
// input or the left padding. Padding may be at most half the (effective) kernel.
// max_pool2d: padding counts as -inf; each output keeps the flat index (h * W + w)
// of its window's first maximum (NaN propagates), and backward routes the
// gradient there; 2x2 windows at stride 2 (rows of 8 windows or more when
// training) keep no indices: the backward finds each window's first maximum
// again in the saved input, with the same result. avg_pool2d: divisor is the
// window clipped to the padded input (count_include_pad) or to the input.
// adaptive_avg_pool2d: window of output i is [floor(i H / OH),
// ceil((i + 1) H / OH)). Kernels work plane by plane (one
// (n, c) image), parallel over planes, so results do not depend on the thread
// count. float16/bfloat16 are computed in float32 by the front end.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "core/autograd_meta.h"
#include "core/dispatch.h"
#include "core/kernels/pool.h"
#include "core/nn_ops.h"
#include "core/parallel.h"

namespace weft {

MaxPool2dKernel& max_pool2d_table() {
  static MaxPool2dKernel t("max_pool2d");
  return t;
}
MaxPool2dBackwardKernel& max_pool2d_backward_table() {
  static MaxPool2dBackwardKernel t("max_pool2d_backward");
  return t;
}
MaxPool2x2Kernel& max_pool2x2_table() {
  static MaxPool2x2Kernel t("max_pool2x2");
  return t;
}
MaxPool2x2BackwardKernel& max_pool2x2_backward_table() {
  static MaxPool2x2BackwardKernel t("max_pool2x2_backward");
  return t;
}
AvgPool2dKernel& avg_pool2d_table() {
  static AvgPool2dKernel t("avg_pool2d");
  return t;
}
AvgPool2dBackwardKernel& avg_pool2d_backward_table() {
  static AvgPool2dBackwardKernel t("avg_pool2d_backward");
  return t;
}
AdaptivePool2dKernel& adaptive_avg_pool2d_table() {
  static AdaptivePool2dKernel t("adaptive_avg_pool2d");
  return t;
}
AdaptivePool2dBackwardKernel& adaptive_avg_pool2d_backward_table() {
  static AdaptivePool2dBackwardKernel t("adaptive_avg_pool2d_backward");
  return t;
}

namespace {

constexpr uint32_t kPoolTypes = (1u << int(DType::Float32)) | (1u << int(DType::Float64));
template <typename T>
constexpr bool kIsPoolType = std::is_same_v<T, float> || std::is_same_v<T, double>;

// Planes per parallel chunk so that a chunk touches ~kGrainSize elements.
int64_t plane_grain(int64_t plane_elems) {
  return std::max<int64_t>(1, kGrainSize / std::max<int64_t>(plane_elems, 1));
}

// ---- max pool ----
// Window ow of a 2x2 / stride-2 row (input rows r0, r1): its maximum in m and
// which entry holds it, 0..3 for (0,0) (0,1) (1,0) (1,1), by ordered
// branch-free selects (random data would mispredict every compare): a later
// entry wins only if greater or NaN, so the first maximum, NaN propagating.
template <typename T>
inline int window_max_2x2(const T* r0, const T* r1, int64_t ow, T& m) {
  const T cand[4] = {r0[2 * ow], r0[2 * ow + 1], r1[2 * ow], r1[2 * ow + 1]};
  m = cand[0];
  int k = 0;
  for (int e = 1; e < 4; ++e) {
    const bool c = (cand[e] > m) | (cand[e] != cand[e]);
    m = c ? cand[e] : m;
    k = c ? e : k;
  }
  return k;
}

#if defined(__AVX2__)
// The lanes where v takes window_max_2x2's running maximum m: greater, or NaN.
inline __m256 takes_max8(__m256 v, __m256 m) {
  return _mm256_or_ps(_mm256_cmp_ps(v, m, _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}

// The even and odd entries of 16 floats at p.
inline void deinterleave8(const float* p, __m256& even, __m256& odd) {
  __m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 8);
  even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
  odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
}
#endif

// 2x2 / stride-2 windows of one output row, all inside the image. Branch-free
// selects (random data would mispredict every compare) over restrict pointers so
// the loop vectorises; window order (0,0) (0,1) (1,0) (1,1), NaN propagates.
// Without kIndices, irow is not written (it may be null).
template <typename T, bool kIndices = true>
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-loop-distribute-patterns")))  // short tail loops: no memcpy calls
#endif
void max_pool_row_2x2(const T* __restrict r0, const T* __restrict r1, T* __restrict orow, int64_t* __restrict irow,
                      int64_t OW, int64_t base, int64_t W) {
  int64_t ow = 0;
#if defined(__AVX2__)
  if constexpr (std::is_same_v<T, float>) {
    // 8 outputs at a time: deinterleave even/odd columns of both rows, then the
    // same ordered selects as the scalar loop on 8 lanes.
    const __m256i lane = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    const __m256i kone = _mm256_set1_epi32(1), kw = _mm256_set1_epi32(static_cast<int32_t>(W)),
                  kw1 = _mm256_set1_epi32(static_cast<int32_t>(W + 1));
    auto step = [](__m256& m, __m256i& k, __m256 v, __m256i code) {
      __m256 c = takes_max8(v, m);
      m = _mm256_blendv_ps(m, v, c);
      k = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(k), _mm256_castsi256_ps(code), c));
    };
    auto block = [&](const float* a0, const float* a1, float* o, int64_t* id, int64_t b) {
      __m256 a, bb, c, d;
      deinterleave8(a0, a, bb);
      deinterleave8(a1, c, d);
      __m256 m = a;
      __m256i k = _mm256_setzero_si256();
      step(m, k, bb, kone);
      step(m, k, c, kw);
      step(m, k, d, kw1);
      _mm256_storeu_ps(o, m);
      if constexpr (kIndices) {
        __m256i off = _mm256_add_epi32(k, lane);  // 2 * lane + k, small
        __m256i base4 = _mm256_set1_epi64x(b);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(id),
                            _mm256_add_epi64(base4, _mm256_cvtepi32_epi64(_mm256_castsi256_si128(off))));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(id + 4),
                            _mm256_add_epi64(base4, _mm256_cvtepi32_epi64(_mm256_extracti128_si256(off, 1))));
      }
    };
    if (W < (int64_t{1} << 30)) {
      for (; ow + 8 <= OW; ow += 8)
        block(r0 + 2 * ow, r1 + 2 * ow, orow + ow, kIndices ? irow + ow : nullptr, base + 2 * ow);
      if (ow < OW) {  // partial block through small local buffers (no mispredicted scalar tail)
        const int64_t rem = OW - ow;
        alignas(32) float b0[16] = {}, b1[16] = {}, ob[8];
        alignas(32) int64_t ib[8];
        for (int64_t j = 0; j < 2 * rem; ++j) {
          b0[j] = r0[2 * ow + j];
          b1[j] = r1[2 * ow + j];
        }
        block(b0, b1, ob, ib, base + 2 * ow);
        for (int64_t j = 0; j < rem; ++j) {
          orow[ow + j] = ob[j];
          if constexpr (kIndices) irow[ow + j] = ib[j];
        }
        ow = OW;
      }
    }
  }
#endif
  for (; ow < OW; ++ow) {
    T m;
    const int k = window_max_2x2(r0, r1, ow, m);
    orow[ow] = m;
    if constexpr (kIndices) irow[ow] = base + 2 * ow + (k >> 1) * W + (k & 1);
  }
}

// The gradient of one output row of 2x2 / stride-2 windows (rows r0, r1 of x):
// each window's first maximum found by the forward's selects gets g (plus +0,
// so a -0 lands as the scatter-add of max_pool_backward leaves it), its other
// three entries +0; columns past 2 OW are left to the caller.
template <typename T>
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-loop-distribute-patterns")))  // short tail loops: no memcpy calls
#endif
void max_unpool_row_2x2(const T* __restrict r0, const T* __restrict r1, const T* __restrict g, T* __restrict o0,
                        T* __restrict o1, int64_t OW) {
  int64_t ow = 0;
#if defined(__AVX2__)
  if constexpr (std::is_same_v<T, float>) {
    auto interleave = [](float* p, __m256 even, __m256 odd) {
      __m256 lo = _mm256_unpacklo_ps(even, odd), hi = _mm256_unpackhi_ps(even, odd);
      _mm256_storeu_ps(p, _mm256_permute2f128_ps(lo, hi, 0x20));
      _mm256_storeu_ps(p + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
    };
    // 8 windows: x rows a0, a1 (16 values each), gradients g (8), out rows o0, o1 (16 each)
    auto block = [&](const float* a0, const float* a1, const float* g8, float* q0, float* q1) {
      __m256 a, b, c, d;
      deinterleave8(a0, a, b);
      deinterleave8(a1, c, d);
      const __m256 cb = takes_max8(b, a);
      __m256 m = _mm256_blendv_ps(a, b, cb);
      const __m256 cc = takes_max8(c, m);
      m = _mm256_blendv_ps(m, c, cc);
      const __m256 cd = takes_max8(d, m);
      // the last select that fired wins: d, else c, else b, else a
      const __m256 gv = _mm256_add_ps(_mm256_loadu_ps(g8), _mm256_setzero_ps());
      const __m256 vd = _mm256_and_ps(cd, gv), left_c = _mm256_andnot_ps(cd, gv);
      const __m256 vc = _mm256_and_ps(cc, left_c), left_b = _mm256_andnot_ps(cc, left_c);
      const __m256 vb = _mm256_and_ps(cb, left_b), va = _mm256_andnot_ps(cb, left_b);
      interleave(q0, va, vb);
      interleave(q1, vc, vd);
    };
    for (; ow + 8 <= OW; ow += 8) block(r0 + 2 * ow, r1 + 2 * ow, g + ow, o0 + 2 * ow, o1 + 2 * ow);
    if (ow < OW && OW >= 8) {  // the last 8 windows again: the same values rewritten, no partial block
                               // (rows of under 8 windows take the scalar loop)
      ow = OW - 8;
      block(r0 + 2 * ow, r1 + 2 * ow, g + ow, o0 + 2 * ow, o1 + 2 * ow);
      ow = OW;
    }
  }
#endif
  for (; ow < OW; ++ow) {
    T m;
    const int k = window_max_2x2(r0, r1, ow, m);
    const T gv = g[ow] + T(0);
    o0[2 * ow] = k == 0 ? gv : T(0);
    o0[2 * ow + 1] = k == 1 ? gv : T(0);
    o1[2 * ow] = k == 2 ? gv : T(0);
    o1[2 * ow + 1] = k == 3 ? gv : T(0);
  }
}

template <typename T>
void max_pool_forward(const Tensor& out, const Tensor& indices, const Tensor& x, const Pool2dParams& pr) {
  const int64_t P = x.size(0), H = x.size(1), W = x.size(2), OH = out.size(1), OW = out.size(2);
  const T* px = x.data_ptr<T>();
  T* po = out.data_ptr<T>();
  int64_t* pi = indices.data_ptr<int64_t>();
  const Pool2dParams p = pr;
  const bool fast2 = p.kH == 2 && p.kW == 2 && p.sH == 2 && p.sW == 2 && p.pH == 0 && p.pW == 0 && p.dH == 1 &&
                     p.dW == 1 && 2 * OH <= H && 2 * OW <= W;
  parallel_for(0, P, plane_grain(H * W), [=](int64_t p0, int64_t p1) {
    for (int64_t pl = p0; pl < p1; ++pl) {
      const T* xp = px + pl * H * W;
      T* op = po + pl * OH * OW;
      int64_t* ip = pi + pl * OH * OW;
      if (fast2) {
        for (int64_t oh = 0; oh < OH; ++oh)
          max_pool_row_2x2<T>(xp + 2 * oh * W, xp + (2 * oh + 1) * W, op + oh * OW, ip + oh * OW, OW, 2 * oh * W, W);
        continue;
      }
      for (int64_t oh = 0; oh < OH; ++oh) {
        int64_t hs = oh * p.sH - p.pH, he = std::min(hs + (p.kH - 1) * p.dH + 1, H);
        while (hs < 0) hs += p.dH;
        for (int64_t ow = 0; ow < OW; ++ow) {
          int64_t ws = ow * p.sW - p.pW, we = std::min(ws + (p.kW - 1) * p.dW + 1, W);
          while (ws < 0) ws += p.dW;
          T m = -std::numeric_limits<T>::infinity();
          int64_t idx = hs * W + ws;
          for (int64_t h = hs; h < he; h += p.dH)
            for (int64_t w = ws; w < we; w += p.dW) {
              T v = xp[h * W + w];
              bool c = (v > m) | (v != v);  // NaN propagates (like PyTorch)
              m = c ? v : m;
              idx = c ? h * W + w : idx;
            }
          op[oh * OW + ow] = m;
          ip[oh * OW + ow] = idx;
        }
      }
    }
  });
}

template <typename T>
void max_pool2x2_forward(const Tensor& out, const Tensor& x) {
  const int64_t P = x.size(0), H = x.size(1), W = x.size(2), OH = out.size(1), OW = out.size(2);
  const T* px = x.data_ptr<T>();
  T* po = out.data_ptr<T>();
  parallel_for(0, P, plane_grain(H * W), [=](int64_t p0, int64_t p1) {
    for (int64_t pl = p0; pl < p1; ++pl) {
      const T* xp = px + pl * H * W;
      T* op = po + pl * OH * OW;
      for (int64_t oh = 0; oh < OH; ++oh)
        max_pool_row_2x2<T, false>(xp + 2 * oh * W, xp + (2 * oh + 1) * W, op + oh * OW, nullptr, OW, 2 * oh * W, W);
    }
  });
}

template <typename T>
void max_pool2x2_backward(const Tensor& gx, const Tensor& go, const Tensor& x) {
  const int64_t P = x.size(0), H = x.size(1), W = x.size(2), OH = go.size(1), OW = go.size(2);
  const T* px = x.data_ptr<T>();
  const T* pgo = go.data_ptr<T>();
  T* pgx = gx.data_ptr<T>();
  parallel_for(0, P, plane_grain(H * W), [=](int64_t p0, int64_t p1) {
    for (int64_t pl = p0; pl < p1; ++pl) {
      const T* xp = px + pl * H * W;
      T* gp = pgx + pl * H * W;
      for (int64_t oh = 0; oh < OH; ++oh) {
        T* o0 = gp + 2 * oh * W;
        T* o1 = o0 + W;
        max_unpool_row_2x2<T>(xp + 2 * oh * W, xp + (2 * oh + 1) * W, pgo + (pl * OH + oh) * OW, o0, o1, OW);
        std::fill(o0 + 2 * OW, o0 + W, T(0));  // columns no window covers
        std::fill(o1 + 2 * OW, o1 + W, T(0));
      }
      std::fill(gp + 2 * OH * W, gp + H * W, T(0));  // rows no window covers
    }
  });
}

template <typename T>
void max_pool_backward(const Tensor& gx, const Tensor& go, const Tensor& indices) {
  const int64_t P = gx.size(0), HW = gx.size(1) * gx.size(2), L = go.size(1) * go.size(2);
  T* pgx = gx.data_ptr<T>();
  const T* pgo = go.data_ptr<T>();
  const int64_t* pi = indices.data_ptr<int64_t>();
  parallel_for(0, P, plane_grain(HW), [&](int64_t p0, int64_t p1) {
    std::fill(pgx + p0 * HW, pgx + p1 * HW, T(0));
    for (int64_t pl = p0; pl < p1; ++pl) {
      T* gp = pgx + pl * HW;
      const T* g = pgo + pl * L;
      const int64_t* ip = pi + pl * L;
      for (int64_t l = 0; l < L; ++l) gp[ip[l]] += g[l];
    }
  });
}

// ---- avg pool ----
// Window of output o along one axis: [start, end) clipped to the input, and the divisor span.
struct Span {
  int64_t start, end, padded;
};
inline Span avg_span(int64_t o, int64_t s, int64_t pad, int64_t k, int64_t n) {
  int64_t st = o * s - pad, en = std::min(st + k, n + pad);
  int64_t padded = en - st;
  return {std::max<int64_t>(st, 0), std::min(en, n), padded};
}

template <typename T>
void avg_pool_forward(const Tensor& out, const Tensor& x, const Pool2dParams& p) {
  const int64_t P = x.size(0), H = x.size(1), W = x.size(2), OH = out.size(1), OW = out.size(2);
  const T* px = x.data_ptr<T>();
  T* po = out.data_ptr<T>();
  parallel_for(0, P, plane_grain(H * W), [&](int64_t p0, int64_t p1) {
    for (int64_t pl = p0; pl < p1; ++pl) {
      const T* xp = px + pl * H * W;
      T* op = po + pl * OH * OW;
      for (int64_t oh = 0; oh < OH; ++oh) {
        Span sh = avg_span(oh, p.sH, p.pH, p.kH, H);
        for (int64_t ow = 0; ow < OW; ++ow) {
          Span sw = avg_span(ow, p.sW, p.pW, p.kW, W);
          T s = 0;
          for (int64_t h = sh.start; h < sh.end; ++h)
            for (int64_t w = sw.start; w < sw.end; ++w) s += xp[h * W + w];
          int64_t div = p.count_include_pad ? sh.padded * sw.padded : (sh.end - sh.start) * (sw.end - sw.start);
          op[oh * OW + ow] = div > 0 ? s / static_cast<T>(div) : T(0);
        }
      }
    }
  });
}

template <typename T>
void avg_pool_backward(const Tensor& gx, const Tensor& go, const Pool2dParams& p) {
  const int64_t P = gx.size(0), H = gx.size(1), W = gx.size(2), OH = go.size(1), OW = go.size(2);
  T* pgx = gx.data_ptr<T>();
  const T* pgo = go.data_ptr<T>();
  parallel_for(0, P, plane_grain(H * W), [&](int64_t p0, int64_t p1) {
    std::fill(pgx + p0 * H * W, pgx + p1 * H * W, T(0));
    for (int64_t pl = p0; pl < p1; ++pl) {
      T* gp = pgx + pl * H * W;
      const T* g = pgo + pl * OH * OW;
      for (int64_t oh = 0; oh < OH; ++oh) {
        Span sh = avg_span(oh, p.sH, p.pH, p.kH, H);
        for (int64_t ow = 0; ow < OW; ++ow) {
          Span sw = avg_span(ow, p.sW, p.pW, p.kW, W);
          int64_t div = p.count_include_pad ? sh.padded * sw.padded : (sh.end - sh.start) * (sw.end - sw.start);
          if (div <= 0) continue;
          T v = g[oh * OW + ow] / static_cast<T>(div);
          for (int64_t h = sh.start; h < sh.end; ++h)
            for (int64_t w = sw.start; w < sw.end; ++w) gp[h * W + w] += v;
        }
      }
    }
  });
}

// ---- adaptive avg pool ----
inline int64_t ad_start(int64_t o, int64_t n, int64_t on) { return (o * n) / on; }
inline int64_t ad_end(int64_t o, int64_t n, int64_t on) { return ((o + 1) * n + on - 1) / on; }

template <typename T>
void adaptive_forward(const Tensor& out, const Tensor& x) {
  const int64_t P = x.size(0), H = x.size(1), W = x.size(2), OH = out.size(1), OW = out.size(2);
  const T* px = x.data_ptr<T>();
  T* po = out.data_ptr<T>();
  parallel_for(0, P, plane_grain(H * W), [&](int64_t p0, int64_t p1) {
    for (int64_t pl = p0; pl < p1; ++pl) {
      const T* xp = px + pl * H * W;
      T* op = po + pl * OH * OW;
      for (int64_t oh = 0; oh < OH; ++oh) {
        int64_t hs = ad_start(oh, H, OH), he = ad_end(oh, H, OH);
        for (int64_t ow = 0; ow < OW; ++ow) {
          int64_t ws = ad_start(ow, W, OW), we = ad_end(ow, W, OW);
          T s = 0;
          for (int64_t h = hs; h < he; ++h)
            for (int64_t w = ws; w < we; ++w) s += xp[h * W + w];
          op[oh * OW + ow] = s / static_cast<T>((he - hs) * (we - ws));
        }
      }
    }
  });
}

template <typename T>
void adaptive_backward(const Tensor& gx, const Tensor& go) {
  const int64_t P = gx.size(0), H = gx.size(1), W = gx.size(2), OH = go.size(1), OW = go.size(2);
  T* pgx = gx.data_ptr<T>();
  const T* pgo = go.data_ptr<T>();
  parallel_for(0, P, plane_grain(H * W), [&](int64_t p0, int64_t p1) {
    std::fill(pgx + p0 * H * W, pgx + p1 * H * W, T(0));
    for (int64_t pl = p0; pl < p1; ++pl) {
      T* gp = pgx + pl * H * W;
      const T* g = pgo + pl * OH * OW;
      for (int64_t oh = 0; oh < OH; ++oh) {
        int64_t hs = ad_start(oh, H, OH), he = ad_end(oh, H, OH);
        for (int64_t ow = 0; ow < OW; ++ow) {
          int64_t ws = ad_start(ow, W, OW), we = ad_end(ow, W, OW);
          T v = g[oh * OW + ow] / static_cast<T>((he - hs) * (we - ws));
          for (int64_t h = hs; h < he; ++h)
            for (int64_t w = ws; w < we; ++w) gp[h * W + w] += v;
        }
      }
    }
  });
}

// Registered wrappers (instantiated for every dtype by the registrar; only float/double are registered).
#define WEFT_POOL_WRAP(name, impl, params, args)                             \
  template <typename T>                                                      \
  void name params {                                                         \
    if constexpr (kIsPoolType<T>) impl<T> args;                              \
    else WEFT_CHECK(false, #impl ": no CPU kernel for dtype ", dtype_of<T>); \
  }
WEFT_POOL_WRAP(cpu_max_pool2d, max_pool_forward,
               (const Tensor& o, const Tensor& i, const Tensor& x, const Pool2dParams& p), (o, i, x, p))
WEFT_POOL_WRAP(cpu_max_pool2d_backward, max_pool_backward, (const Tensor& gx, const Tensor& go, const Tensor& i),
               (gx, go, i))
WEFT_POOL_WRAP(cpu_max_pool2x2, max_pool2x2_forward, (const Tensor& o, const Tensor& x), (o, x))
WEFT_POOL_WRAP(cpu_max_pool2x2_backward, max_pool2x2_backward, (const Tensor& gx, const Tensor& go, const Tensor& x),
               (gx, go, x))
WEFT_POOL_WRAP(cpu_avg_pool2d, avg_pool_forward, (const Tensor& o, const Tensor& x, const Pool2dParams& p), (o, x, p))
WEFT_POOL_WRAP(cpu_avg_pool2d_backward, avg_pool_backward, (const Tensor& gx, const Tensor& go, const Pool2dParams& p),
               (gx, go, p))
WEFT_POOL_WRAP(cpu_adaptive_avg_pool2d, adaptive_forward, (const Tensor& o, const Tensor& x), (o, x))
WEFT_POOL_WRAP(cpu_adaptive_avg_pool2d_backward, adaptive_backward, (const Tensor& gx, const Tensor& go), (gx, go))
#undef WEFT_POOL_WRAP

WEFT_REGISTER_KERNEL(max_pool2d_table(), DeviceType::CPU, kPoolTypes, cpu_max_pool2d);
WEFT_REGISTER_KERNEL(max_pool2d_backward_table(), DeviceType::CPU, kPoolTypes, cpu_max_pool2d_backward);
WEFT_REGISTER_KERNEL(max_pool2x2_table(), DeviceType::CPU, kPoolTypes, cpu_max_pool2x2);
WEFT_REGISTER_KERNEL(max_pool2x2_backward_table(), DeviceType::CPU, kPoolTypes, cpu_max_pool2x2_backward);
WEFT_REGISTER_KERNEL(avg_pool2d_table(), DeviceType::CPU, kPoolTypes, cpu_avg_pool2d);
WEFT_REGISTER_KERNEL(avg_pool2d_backward_table(), DeviceType::CPU, kPoolTypes, cpu_avg_pool2d_backward);
WEFT_REGISTER_KERNEL(adaptive_avg_pool2d_table(), DeviceType::CPU, kPoolTypes, cpu_adaptive_avg_pool2d);
WEFT_REGISTER_KERNEL(adaptive_avg_pool2d_backward_table(), DeviceType::CPU, kPoolTypes,
                     cpu_adaptive_avg_pool2d_backward);

std::string arr_str(std::array<int64_t, 2> a) {
  std::string r("(");
  r.append(std::to_string(a[0])).append(", ").append(std::to_string(a[1])).append(")");
  return r;
}

// PyTorch's pooling_output_shape.
int64_t pool_out(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d, bool ceil_mode) {
  int64_t num = in + 2 * pad - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil_mode && (out - 1) * s >= in + pad) --out;
  return out;
}

// Validates the input and window arguments, returns the 4-D input and (OH, OW).
struct PoolSetup {
  Tensor x4;  // (N, C, H, W)
  int64_t OH, OW;
};
PoolSetup pool_setup(const char* op, const Tensor& x, std::array<int64_t, 2> k, std::array<int64_t, 2>& s,
                     std::array<int64_t, 2> pad, std::array<int64_t, 2> dil, bool ceil_mode, bool is_max) {
  WEFT_CHECK(x.defined(), op, ": undefined input");
  WEFT_CHECK(x.dim() == 3 || x.dim() == 4, op, ": expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape ",
             shape_str(x.sizes()));
  WEFT_CHECK(is_floating(x.dtype()), op, ": expected a floating dtype, got ", x.dtype());
  WEFT_CHECK(k[0] > 0 && k[1] > 0, op, ": kernel_size must be positive, got ", arr_str(k));
  if (s[0] == 0 && s[1] == 0) s = k;
  WEFT_CHECK(s[0] > 0 && s[1] > 0, op, ": stride must be positive, got ", arr_str(s));
  WEFT_CHECK(dil[0] > 0 && dil[1] > 0, op, ": dilation must be positive, got ", arr_str(dil));
  WEFT_CHECK(pad[0] >= 0 && pad[1] >= 0, op, ": padding must be non-negative, got ", arr_str(pad));
  for (int i = 0; i < 2; ++i) {
    int64_t eff = is_max ? (k[i] - 1) * dil[i] + 1 : k[i];
    WEFT_CHECK(pad[i] <= eff / 2, op, ": padding ", arr_str(pad), " should be at most half of the ",
               is_max ? "effective " : "", "kernel size ", arr_str(k), is_max ? " (with dilation " : "",
               is_max ? arr_str(dil) : "", is_max ? ")" : "");
  }
  Tensor x4 = x.dim() == 3 ? unsqueeze(x, 0) : x;
  const int64_t H = x4.size(2), W = x4.size(3);
  WEFT_CHECK(H > 0 && W > 0, op, ": input shape ", shape_str(x.sizes()), " has an empty spatial dimension");
  int64_t OH = pool_out(H, k[0], pad[0], s[0], dil[0], ceil_mode);
  int64_t OW = pool_out(W, k[1], pad[1], s[1], dil[1], ceil_mode);
  WEFT_CHECK(OH > 0 && OW > 0, op, ": input shape ", shape_str(x.sizes()), " with kernel ", arr_str(k), ", stride ",
             arr_str(s), ", padding ", arr_str(pad), " gives output size (", OH, ", ", OW, "), which is too small");
  return {x4, OH, OW};
}

bool is_half(DType d) { return d == DType::Float16 || d == DType::BFloat16; }

// Note [double backward]: a pool's input gradient gx is linear in the output
// gradient g and, given where the maxima are, does not depend on x (almost
// everywhere). With grad mode on (a backward with create_graph), gx gets a
// node whose backward is that linear map's adjoint, built of recorded ops: the
// forward pool itself for the average pools, a gather at the maxima for max.
Tensor with_adjoint(const char* name, const Tensor& gx, const Tensor& g, std::function<Tensor(const Tensor&)> adjoint) {
  record_differentiable(name, {g}, {gx}, [adjoint = std::move(adjoint)](const std::vector<Tensor>& gg) {
    return std::vector<Tensor>{adjoint(gg[0])};
  });
  return gx;
}

}  // namespace

Tensor max_pool2d(const Tensor& x, std::array<int64_t, 2> kernel_size, std::array<int64_t, 2> stride,
                  std::array<int64_t, 2> padding, std::array<int64_t, 2> dilation, bool ceil_mode) {
  PoolSetup ps = pool_setup("max_pool2d", x, kernel_size, stride, padding, dilation, ceil_mode, true);
  if (is_half(x.dtype()))
    return max_pool2d(x.to(DType::Float32), kernel_size, stride, padding, dilation, ceil_mode).to(x.dtype());
  const int64_t N = ps.x4.size(0), C = ps.x4.size(1), H = ps.x4.size(2), W = ps.x4.size(3);
  Tensor xc = ps.x4.detach().contiguous().view({N * C, H, W});
  Tensor out = empty({N * C, ps.OH, ps.OW}, {x.dtype(), x.device()});
  Shape oshape = x.dim() == 3 ? Shape{C, ps.OH, ps.OW} : Shape{N, C, ps.OH, ps.OW};
  Shape pshape{N * C, H, W};
  Shape xshape = x.sizes();
  // 2x2 windows at stride 2 (the usual downsampling) where the device has the
  // index-free kernels: no int64 index per output (8 bytes per output
  // written, then read back, against the 4 of a float32 output); the backward
  // finds each window's maximum again in x, which it saves instead (often
  // kept anyway: a ReLU before the pool saves its output). Its backward
  // rewrites gx eight windows at a time, so for training, rows of fewer than 8
  // windows keep the indices (Zen 4, batch 128: 28x28 -> 14x14 forward +
  // backward 2.2 -> 1.7-2.1 ms; 14x14 -> 7x7 1.4 against 1.9 ms).
  const bool two_by_two = kernel_size == std::array<int64_t, 2>{2, 2} && stride == std::array<int64_t, 2>{2, 2} &&
                          padding == std::array<int64_t, 2>{0, 0} && dilation == std::array<int64_t, 2>{1, 1} &&
                          2 * ps.OH <= H && 2 * ps.OW <= W && (ps.OW >= 8 || !any_requires_grad({x}));
  if (two_by_two && max_pool2x2_table().has(x.device().type, x.dtype()) &&
      max_pool2x2_backward_table().has(x.device().type, x.dtype())) {
    max_pool2x2_table()(x.device(), x.dtype(), out, xc);
    out = out.view(oshape);
    if (any_requires_grad({x})) {
      SavedTensor sx(xc);
      record_differentiable("MaxPool2dBackward", {x}, {out}, [sx, xshape](const std::vector<Tensor>& g) {
        Tensor xs = sx.get("MaxPool2dBackward").detach();
        Tensor go = g[0].detach().contiguous().view({xs.size(0), g[0].size(-2), g[0].size(-1)});
        Tensor gx = empty(xshape, {go.dtype(), go.device()});
        max_pool2x2_backward_table()(go.device(), go.dtype(), gx.view(xs.sizes()), go, xs);
        if (!any_requires_grad({g[0]})) return std::vector<Tensor>{gx};
        // the windows do not overlap: the adjoint sums gg over each window's maximum
        Tensor at_max = empty(xshape, {go.dtype(), go.device()});  // 1 at each window's maximum
        max_pool2x2_backward_table()(go.device(), go.dtype(), at_max.view(xs.sizes()), ones_like(go), xs);
        return std::vector<Tensor>{with_adjoint("MaxPool2dBackwardBackward", gx, g[0], [at_max](const Tensor& gg) {
          return avg_pool2d(gg * at_max, {2, 2}) * 4.0;
        })};
      });
    }
    return out;
  }
  Tensor idx = empty({N * C, ps.OH, ps.OW}, {DType::Int64, x.device()});
  const Pool2dParams p{kernel_size[0], kernel_size[1], stride[0],   stride[1], padding[0],
                       padding[1],     dilation[0],    dilation[1], false};
  max_pool2d_table()(x.device(), x.dtype(), out, idx, xc, p);
  out = out.view(oshape);
  record_differentiable("MaxPool2dBackward", {x}, {out}, [idx, pshape, xshape](const std::vector<Tensor>& g) {
    Tensor go = g[0].detach().contiguous().view(idx.sizes());
    Tensor gx = empty(xshape, {go.dtype(), go.device()});
    max_pool2d_backward_table()(go.device(), go.dtype(), gx.view(pshape), go, idx);
    if (!any_requires_grad({g[0]})) return std::vector<Tensor>{gx};
    const Shape oshape = g[0].sizes();
    return std::vector<Tensor>{with_adjoint("MaxPool2dBackwardBackward", gx, g[0], [=](const Tensor& gg) {
      const int64_t planes = pshape[0], hw = pshape[1] * pshape[2];
      return gather(gg.reshape({planes, hw}), 1, idx.view({planes, idx.numel() / planes})).view(oshape);
    })};
  });
  return out;
}

Tensor avg_pool2d(const Tensor& x, std::array<int64_t, 2> kernel_size, std::array<int64_t, 2> stride,
                  std::array<int64_t, 2> padding, bool ceil_mode, bool count_include_pad) {
  PoolSetup ps = pool_setup("avg_pool2d", x, kernel_size, stride, padding, {1, 1}, ceil_mode, false);
  if (is_half(x.dtype()))
    return avg_pool2d(x.to(DType::Float32), kernel_size, stride, padding, ceil_mode, count_include_pad).to(x.dtype());
  const int64_t N = ps.x4.size(0), C = ps.x4.size(1), H = ps.x4.size(2), W = ps.x4.size(3);
  Tensor xc = ps.x4.detach().contiguous().view({N * C, H, W});
  Tensor out = empty({N * C, ps.OH, ps.OW}, {x.dtype(), x.device()});
  const Pool2dParams p{kernel_size[0],   kernel_size[1], stride[0], stride[1], padding[0], padding[1], 1, 1,
                       count_include_pad};
  avg_pool2d_table()(x.device(), x.dtype(), out, xc, p);
  Shape oshape = x.dim() == 3 ? Shape{C, ps.OH, ps.OW} : Shape{N, C, ps.OH, ps.OW};
  out = out.view(oshape);
  Shape pshape{N * C, H, W}, poshape{N * C, ps.OH, ps.OW};
  Shape xshape = x.sizes();
  record_differentiable("AvgPool2dBackward", {x}, {out}, [=](const std::vector<Tensor>& g) {
    Tensor go = g[0].detach().contiguous().view(poshape);
    Tensor gx = empty(xshape, {go.dtype(), go.device()});
    avg_pool2d_backward_table()(go.device(), go.dtype(), gx.view(pshape), go, p);
    if (!any_requires_grad({g[0]})) return std::vector<Tensor>{gx};
    return std::vector<Tensor>{with_adjoint("AvgPool2dBackwardBackward", gx, g[0], [=](const Tensor& gg) {
      return avg_pool2d(gg, kernel_size, stride, padding, ceil_mode, count_include_pad);
    })};
  });
  return out;
}

Tensor adaptive_avg_pool2d(const Tensor& x, std::array<int64_t, 2> output_size) {
  WEFT_CHECK(x.defined(), "adaptive_avg_pool2d: undefined input");
  WEFT_CHECK(x.dim() == 3 || x.dim() == 4,
             "adaptive_avg_pool2d: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape ",
             shape_str(x.sizes()));
  WEFT_CHECK(is_floating(x.dtype()), "adaptive_avg_pool2d: expected a floating dtype, got ", x.dtype());
  WEFT_CHECK(output_size[0] > 0 && output_size[1] > 0, "adaptive_avg_pool2d: output_size must be positive, got ",
             arr_str(output_size));
  if (is_half(x.dtype())) return adaptive_avg_pool2d(x.to(DType::Float32), output_size).to(x.dtype());
  Tensor x4 = x.dim() == 3 ? unsqueeze(x, 0) : x;
  const int64_t N = x4.size(0), C = x4.size(1), H = x4.size(2), W = x4.size(3);
  WEFT_CHECK(H > 0 && W > 0, "adaptive_avg_pool2d: input shape ", shape_str(x.sizes()),
             " has an empty spatial dimension");
  const int64_t OH = output_size[0], OW = output_size[1];
  Tensor xc = x4.detach().contiguous().view({N * C, H, W});
  Tensor out = empty({N * C, OH, OW}, {x.dtype(), x.device()});
  adaptive_avg_pool2d_table()(x.device(), x.dtype(), out, xc);
  out = out.view(x.dim() == 3 ? Shape{C, OH, OW} : Shape{N, C, OH, OW});
  Shape pshape{N * C, H, W}, poshape{N * C, OH, OW};
  Shape xshape = x.sizes();
  record_differentiable("AdaptiveAvgPool2dBackward", {x}, {out}, [=](const std::vector<Tensor>& g) {
    Tensor go = g[0].detach().contiguous().view(poshape);
    Tensor gx = empty(xshape, {go.dtype(), go.device()});
    adaptive_avg_pool2d_backward_table()(go.device(), go.dtype(), gx.view(pshape), go);
    if (!any_requires_grad({g[0]})) return std::vector<Tensor>{gx};
    return std::vector<Tensor>{with_adjoint("AdaptiveAvgPool2dBackwardBackward", gx, g[0],
                                            [=](const Tensor& gg) { return adaptive_avg_pool2d(gg, output_size); })};
  });
  return out;
}

}  // namespace weft
