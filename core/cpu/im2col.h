// im2col / col2im for one NCHW image (single-threaded; callers parallelise over images).
//
// Contract: `im` is one contiguous image (C, H, W); `col` is the
// (C * kH * kW, OH * OW) matrix with row stride `ld` (>= OH * OW, so several
// images can sit side by side in one wider matrix) whose row (c, ki, kj) holds, for every output
// position (oh, ow), im[c, oh*sH - pH + ki*dH, ow*sW - pW + kj*dW] (0 outside
// the image). im2col overwrites `col`; col2im *adds* every col entry back into
// `im` (the caller zeroes it first), so it is the exact adjoint of im2col; it
// may zero the entries of `col` that fall outside the image (col is scratch).
// The valid output-column range of each row is computed up front, so the inner
// loops are plain copies; with stride 1 and OW == W a row block is one run.
#pragma once

#include <algorithm>
#include <cstdint>

namespace weft::cpu {

// Rows here are short (OW elements): keep GCC from turning the copy/zero loops
// into memcpy/memset calls, whose per-call cost exceeds the work.
#if defined(__GNUC__) && !defined(__clang__)
#define WEFT_NO_LIBCALL_LOOPS __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define WEFT_NO_LIBCALL_LOOPS
#endif

struct Conv2dGeom {
  int64_t C, H, W;  // input image
  int64_t kH, kW;   // kernel
  int64_t sH, sW;   // stride
  int64_t pH, pW;   // padding
  int64_t dH, dW;   // dilation
  int64_t OH, OW;   // output
};

// First and one-past-last output index o with 0 <= o*s - p + k*d < n.
inline void valid_range(int64_t out, int64_t s, int64_t off, int64_t n, int64_t& lo, int64_t& hi) {
  // need o*s + off >= 0  and  o*s + off <= n - 1
  lo = off >= 0 ? 0 : (-off + s - 1) / s;
  hi = (n - 1 - off) < 0 ? 0 : (n - 1 - off) / s + 1;
  lo = std::min(lo, out);
  hi = std::clamp(hi, lo, out);
}

template <typename T>
WEFT_NO_LIBCALL_LOOPS void im2col(const T* im, const Conv2dGeom& g, T* col, int64_t ld) {
  const int64_t L = g.OH * g.OW;
  const bool linear = g.sH == 1 && g.sW == 1 && g.OW == g.W;
  for (int64_t c = 0; c < g.C; ++c) {
    const T* plane = im + c * g.H * g.W;
    for (int64_t ki = 0; ki < g.kH; ++ki) {
      const int64_t offh = ki * g.dH - g.pH;
      int64_t oh_lo, oh_hi;
      valid_range(g.OH, g.sH, offh, g.H, oh_lo, oh_hi);
      for (int64_t kj = 0; kj < g.kW; ++kj) {
        const int64_t offw = kj * g.dW - g.pW;
        int64_t ow_lo, ow_hi;
        valid_range(g.OW, g.sW, offw, g.W, ow_lo, ow_hi);
        T* row = col + ((c * g.kH + ki) * g.kW + kj) * ld;
        for (int64_t i = 0; i < oh_lo * g.OW; ++i) row[i] = T(0);
        if (linear && oh_hi > oh_lo && ow_hi > ow_lo) {
          // stride 1 and OW == W: the valid block is one contiguous run of the
          // plane; copy it in one loop, then zero the columns that wrapped.
          const int64_t d0 = oh_lo * g.OW + ow_lo, d1 = (oh_hi - 1) * g.OW + ow_hi;
          const T* src = plane + (oh_lo + offh) * g.W + ow_lo + offw - d0;
          for (int64_t i = d0; i < d1; ++i) row[i] = src[i];
          for (int64_t oh = oh_lo; oh < oh_hi; ++oh) {
            T* dst = row + oh * g.OW;
            for (int64_t ow = 0; ow < ow_lo; ++ow) dst[ow] = T(0);
            for (int64_t ow = ow_hi; ow < g.OW; ++ow) dst[ow] = T(0);
          }
          for (int64_t i = oh_hi * g.OW; i < L; ++i) row[i] = T(0);
          continue;
        }
        for (int64_t oh = oh_lo; oh < oh_hi; ++oh) {
          T* dst = row + oh * g.OW;
          const T* src = plane + (oh * g.sH + offh) * g.W + offw;
          for (int64_t ow = 0; ow < ow_lo; ++ow) dst[ow] = T(0);
          if (g.sW == 1) {
            for (int64_t ow = ow_lo; ow < ow_hi; ++ow) dst[ow] = src[ow];
          } else {
            for (int64_t ow = ow_lo; ow < ow_hi; ++ow) dst[ow] = src[ow * g.sW];
          }
          for (int64_t ow = ow_hi; ow < g.OW; ++ow) dst[ow] = T(0);
        }
        for (int64_t i = oh_hi * g.OW; i < L; ++i) row[i] = T(0);
      }
    }
  }
}

template <typename T>
WEFT_NO_LIBCALL_LOOPS void col2im(T* col, const Conv2dGeom& g, T* im, int64_t ld) {
  const bool linear = g.sH == 1 && g.sW == 1 && g.OW == g.W;
  for (int64_t c = 0; c < g.C; ++c) {
    T* plane = im + c * g.H * g.W;
    for (int64_t ki = 0; ki < g.kH; ++ki) {
      const int64_t offh = ki * g.dH - g.pH;
      int64_t oh_lo, oh_hi;
      valid_range(g.OH, g.sH, offh, g.H, oh_lo, oh_hi);
      for (int64_t kj = 0; kj < g.kW; ++kj) {
        const int64_t offw = kj * g.dW - g.pW;
        int64_t ow_lo, ow_hi;
        valid_range(g.OW, g.sW, offw, g.W, ow_lo, ow_hi);
        T* row = col + ((c * g.kH + ki) * g.kW + kj) * ld;
        if (linear && oh_hi > oh_lo && ow_hi > ow_lo) {
          // stride 1 and OW == W: zero the entries that fall outside the image,
          // then add the whole valid block as one contiguous run.
          for (int64_t oh = oh_lo; oh < oh_hi; ++oh) {
            T* r = row + oh * g.OW;
            for (int64_t ow = 0; ow < ow_lo; ++ow) r[ow] = T(0);
            for (int64_t ow = ow_hi; ow < g.OW; ++ow) r[ow] = T(0);
          }
          const int64_t d0 = oh_lo * g.OW + ow_lo, d1 = (oh_hi - 1) * g.OW + ow_hi;
          T* dst = plane + (oh_lo + offh) * g.W + ow_lo + offw - d0;
          for (int64_t i = d0; i < d1; ++i) dst[i] += row[i];
          continue;
        }
        for (int64_t oh = oh_lo; oh < oh_hi; ++oh) {
          const T* src = row + oh * g.OW;
          T* dst = plane + (oh * g.sH + offh) * g.W + offw;
          if (g.sW == 1) {
            for (int64_t ow = ow_lo; ow < ow_hi; ++ow) dst[ow] += src[ow];
          } else {
            for (int64_t ow = ow_lo; ow < ow_hi; ++ow) dst[ow * g.sW] += src[ow];
          }
        }
      }
    }
  }
}

}  // namespace weft::cpu
