// Direct AVX-512 float32 convolution with the output channels in the vector
// lanes, for layers with many taps per output (the CNN's second layer, 32 ->
// 64 channels, 3x3): used by core/ops/conv.cc for the forward in place of
// im2col + GEMM where conv_lanes_applies(), and for the input gradient of
// stride-1 "same" layers in place of GEMM + col2im where
// conv_lanes_input_grad_applies().
//
// Contract: x (n, C, H, W), w (cout, C, kH, kW), out (n, cout, OH, OW), all
// contiguous float32; one group, a column stride of 1 or 2, any row stride,
// dilation and padding, any number of taps per output (C * kH * kW). The
// input gradient runs the same kernel on go (n, cout, OH, W) for gx (n, C, H,
// W) of a stride-1 layer with OW == W (see conv_lanes_input_grad).
//
// Each image is copied once into a zero-padded buffer (per channel, the rows
// and columns its outputs read; none where nothing is padded), so every tap
// of every output is one plain load. A register tile holds 32 output channels (two zmm; one for
// a last panel of 16 or fewer) x up to 14 positions of one output row: per
// tap it loads the panel's weights (packed tap-major) and broadcasts the
// positions' input values, 28 FMAs for 2 loads and 14 broadcasts, the GEMM
// micro-kernel's ratio, with no column matrix and nothing packed from the
// images. The finished tile is transposed in registers (16 x 16) and stored
// as rows of the output planes, the bias added.
//
// Note [conv lanes bits]: each output is its taps' products summed as the
// AVX-512 GEMM sums a product of depth C kH kW: in K blocks of
// gemm_avx512_k_block(taps) (all of them in one for at most 384 taps), each
// block in tap order from zero, one FMA a tap, added to the blocks before it;
// then the bias added (when there is one). So the forward's results are bit
// for bit those of im2col + GEMM and of the implicit im2col, whatever the
// thread count.
#pragma once

#include <cstdint>

#include "core/cpu/gemm_avx512.h"
#include "core/cpu/im2col.h"

namespace weft::cpu {

// True when conv2d's forward takes conv_lanes_forward for this float32
// convolution to cout channels: the float32 GEMM runs on AVX-512
// (gemm_f32_uses_avx512), the path is enabled, the geometry is the
// contract's (column stride 1 or 2), and the cout channels fill at least 7/8
// of the lanes they take (16 a zmm: 16, 30, 32, 48, 56, 64 ..., not 8, 17, 24
// or 40).
bool conv_lanes_applies(const Conv2dGeom& g, int64_t groups, int64_t cout);

// The same for conv_lanes_input_grad, whose output channels are the layer's
// input channels (g.C): stride 1, OW == W and pH <= dH (kH - 1).
bool conv_lanes_input_grad_applies(const Conv2dGeom& g, int64_t groups);

// Tests and benchmarks: false sends conv2d back to the GEMM paths. Not
// thread-safe against convolutions running meanwhile.
void set_conv_lanes_enabled(bool enabled);

// out (n, cout, OH, OW) = conv(x, w) + bias (cout values, or nullptr: none).
void conv_lanes_forward(int64_t n, const float* x, const float* w, const float* bias, int64_t cout, const Conv2dGeom& g,
                        float* out);

// gx (n, C, H, W) = the gradient of sum(out * go) with respect to x, for go
// (n, cout, OH, W): the transposed convolution, as a convolution of go with
// the kernel flipped and its channels swapped (Note [conv lanes input
// gradient] in the .cc); needs pH <= dH (kH - 1). Its sums run over (output
// channel, ki, kj) in order from zero, in one block, so they differ from
// GEMM + col2im in rounding, and not with the thread count.
void conv_lanes_input_grad(int64_t n, const float* go, const float* w, int64_t cout, const Conv2dGeom& g, float* gx);

}  // namespace weft::cpu
