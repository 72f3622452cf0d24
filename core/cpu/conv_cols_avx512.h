// Implicit im2col for the AVX-512 float32 GEMM: the column matrix of a chunk
// of images (core/cpu/im2col.h) packed straight from the images into the
// GEMM's B panels (GemmPackB, core/cpu/gemm_avx512.h), used by
// core/ops/conv.cc for the output and the weight gradient where
// conv_cols_applies(); the column matrix is never written out.
//
// Contract: the images are contiguous float32 (nimg, C, H, W) with stride 1
// and output rows as wide as the input's (OW == W), one group, at least 16
// output positions per image (L = OH * W >= 16) and at least 16 taps (C * kH *
// kW >= 16; fewer go to the direct kernels or to im2col). As in
// core/cpu/conv_direct_avx512.h, output position q of an image reads tap t =
// (c, ki, kj) at input index q + xoff[t], and a bit per (tap, position) says
// whether that input lies inside the image. A run of 16 positions is one
// masked load; where it crosses into the next image of the chunk, a second
// masked load fills its last lanes.
// - ConvColsPack: B = cols (C kH kW, nimg * L), column j = position j % L of
//   image j / L, the forward's operand (out = W * cols).
// - ConvColsTPack: B = cols^T (nimg * L, C kH kW), the weight gradient's
//   operand (dW = go * cols^T), each 16 x 16 block transposed in registers.
// Both pack exactly the values im2col writes, so the GEMM's result is bit for
// bit that of im2col + GEMM (Note [gemm determinism] fixes the sums by shape).
#pragma once

#include <cstdint>
#include <vector>

#include "core/cpu/gemm_avx512.h"
#include "core/cpu/im2col.h"

namespace weft::cpu {

// True when conv2d's float32 GEMMs on this geometry can take their column
// matrix from ConvColsPack / ConvColsTPack: the float32 GEMM runs on AVX-512,
// the path is enabled, and the geometry is the contract's.
bool conv_cols_applies(const Conv2dGeom& g, int64_t groups);

// Tests and benchmarks: false sends conv2d back to im2col + GEMM. Not
// thread-safe against convolutions running meanwhile.
void set_conv_cols_enabled(bool enabled);

// The tap offsets and validity bits of one geometry, shared by every chunk
// (read-only once built).
struct ConvColsPlan {
  explicit ConvColsPlan(const Conv2dGeom& g);
  int64_t taps = 0;           // C * kH * kW
  int64_t L = 0;              // output positions per image
  int64_t image = 0;          // C * H * W
  int64_t row_bytes = 0;      // bytes of validity bits per tap
  std::vector<int64_t> xoff;  // per tap
  std::vector<uint8_t> bits;  // per tap, row_bytes bytes: bit q set = position q reads inside the image
};

// cols (taps, nimg * L) of a chunk of nimg images at x, side by side, as GEMM
// B panels (the GEMM's windows stay inside the chunk's nimg * L columns).
class ConvColsPack final : public GemmPackB {
 public:
  ConvColsPack(const ConvColsPlan& plan, const float* x) : plan_(plan), x_(x) {}
  void pack(int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* dst) const override;

 private:
  const ConvColsPlan& plan_;
  const float* x_;
};

// cols^T (nimg * L, taps) of a chunk of images at x, as GEMM B panels (the
// GEMM's windows stay inside the chunk's nimg * L rows).
class ConvColsTPack final : public GemmPackB {
 public:
  ConvColsTPack(const ConvColsPlan& plan, const float* x) : plan_(plan), x_(x) {}
  void pack(int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* dst) const override;

 private:
  const ConvColsPlan& plan_;
  const float* x_;
};

}  // namespace weft::cpu
