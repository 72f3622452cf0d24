// Direct AVX-512 float32 convolution for layers with few taps per output value
// (C * kH * kW <= kConvDirectMaxTaps: the first layer of an image network on 1
// or 3 channels), used by core/ops/conv.cc in place of im2col + GEMM where
// conv_direct_applies().
//
// Contract: x (n, C, H, W), w (cout, C, kH, kW), out and go (n, cout, OH, W),
// all contiguous float32; stride 1, one group, output rows as wide as the
// input's (OW == W: 2 pW == dW (kW - 1)), any dilation and any pH.
// Output position q = oh * W + ow of a flattened plane reads tap (c, ki, kj)
// at input index c * H * W + q + (ki dH - pH) W + (kj dW - pW): each tap is one
// unaligned 16-lane load, whose lanes falling outside the image (rows above or
// below it, columns that would wrap into the neighbouring row, positions past
// the plane) are masked to zero by a mask per 16 positions and (ki, kj),
// computed once per call. No im2col, no packing: a register tile of up to 8
// output channels x 32 positions sums its taps and is stored once, the bias
// starting the sums; the weight gradient holds 4 channels x up to 5 taps
// (plus the 4 bias-gradient sums) in registers over a chunk of images.
//
// Note [conv direct determinism]: every sum has one order fixed by the shape:
// forward, the bias then the taps in order; weight and bias gradients, per
// chunk of kConvDirectChunk images, lanes accumulating positions in order
// (image by image), reduced across lanes by one fixed tree, and the chunks'
// partials summed in chunk order. So results do not depend on the thread
// count. They differ from the im2col + GEMM path in rounding only.
#pragma once

#include <cstdint>

#include "core/cpu/im2col.h"

namespace weft::cpu {

constexpr int64_t kConvDirectMaxTaps = 32;  // C * kH * kW
constexpr int64_t kConvDirectChunk = 8;     // images per weight-gradient partial

// True when the direct kernels take this float32 convolution: the float32
// GEMM runs on AVX-512 (gemm_f32_uses_avx512), the direct path is enabled,
// and the geometry is one of the contract's.
bool conv_direct_applies(const Conv2dGeom& g, int64_t groups);

// Tests and benchmarks: false sends every convolution to im2col + GEMM, true
// (the default) restores the direct path. Not thread-safe against convolutions
// running meanwhile.
void set_conv_direct_enabled(bool enabled);

// out (n, cout, OH, W) = bias (cout, or nullptr) + conv(x, w).
void conv_direct_forward(int64_t n, const float* x, const float* w, const float* bias, int64_t cout,
                         const Conv2dGeom& g, float* out);

// gw (cout, C, kH, kW) = sum over images and positions of go (n, cout, OH, W)
// times the taps of x; gb (cout, or nullptr) = go summed over images and
// positions. Both are overwritten.
void conv_direct_weight_grad(int64_t n, const float* x, const float* go, int64_t cout, const Conv2dGeom& g, float* gw,
                             float* gb);

}  // namespace weft::cpu
