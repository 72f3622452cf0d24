// CPU GEMM on bfloat16 operands: C (float32) = A * B, A and B bfloat16.
//
// Contract:
// - gemm_bf16(path, m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, ldc): C (m, n),
//   row-major with leading dimension ldc >= n, = A (m, k) * B (k, n); element
//   (r, c) of A at a[r * a_rs + c * a_cs] (bfloat16 bits), of B likewise: any
//   strides. Products of two bfloat16 are exact in float32; the sums are
//   float32. C must not overlap A or B.
// - Paths (Bf16GemmPath), chosen at run time from what the CPU has:
//   kAmxBf16: AMX tiles (TDPBF16PS, 16 x 16 float32 per instruction over 16
//   pairs of k steps), after the kernel grants the process the tile state
//   (arch_prctl(ARCH_REQ_XCOMP_PERM)); kAmxEmulated: the same packing, tile
//   loads and order with each tile instruction done in plain C++ (any CPU;
//   slow, there to check the AMX kernel's packing and addressing where the
//   CPU has no AMX); kAvx512Bf16: VDPBF16PS (AVX512-BF16), one instruction
//   per pair of k steps; kAvx512Emulated: the same kernel, packing and order
//   with the pair product written as two float32 FMAs (AVX-512F only; slower
//   than kFloat32, there to check the kernel on any AVX-512 CPU); kFloat32:
//   both operands widened to float32 and the float32 GEMM (core/cpu/gemm.h);
//   with AVX-512 the widening happens while the float32 kernel packs its
//   panels (gemm_avx512_bf16_widened), so no widened copy is made and the
//   result equals the float32 GEMM's on widened operands.
//   Note [bf16 pair order]: the VDPBF16PS kernels add, per element and per
//   pair of k steps, the odd step's product and then the even one's
//   (VDPBF16PS's order), so the two agree exactly on normal numbers
//   (VDPBF16PS flushes denormals to zero); the AMX emulation follows
//   TDPBF16PS's documented order (even step, then odd, 16 pairs per tile
//   instruction), which the hardware need not match bit for bit.
// - bf16_gemm_path(): the path bfloat16 matmuls take (default_bf16_gemm_path):
//   kAmxBf16 where the CPU has AMX-BF16 and the kernel grants the tile state,
//   else kAvx512Bf16 where it has AVX512-BF16 and is not an Intel CPU, else
//   kFloat32. Intel cores issue VDPBF16PS at about half the rate of their two
//   FMA ports (bench/gemm_shapes on an Emerald Rapids Xeon: 12 chains, 85-87
//   against 124-152 GFLOP/s; the GPT's GEMMs 77-81 against 131-154), so there
//   an Intel CPU without usable AMX (an older kernel refusing the tile state,
//   Cooper Lake) keeps the float32 path; AMD's Zen 4 and 5, whose 512-bit FMAs
//   issue as two halves, take VDPBF16PS (Zen 4 issues it at its FMA rate:
//   234.6 against 110.7 GFLOP/s, the GPT's GEMMs at 206-213); the environment variable
//   WEFT_CPU_BF16 (read once: "amx_bf16", "amx_emulated", "avx512_bf16",
//   "avx512_emulated", "float32") forces one, so a machine's tests can run
//   every path it supports; asking for one the CPU lacks is an error naming
//   what it has.
// - Determinism (Note [gemm determinism] in gemm.h): K is cut into blocks
//   chosen from K alone and threads share out whole slabs of columns (or,
//   where C has more rows than columns, of rows), so the result
//   does not depend on the thread count.
#pragma once

#include <cstdint>
#include <string>

#include "core/cpu/gemm.h"

namespace weft::cpu {

enum class Bf16GemmPath { kFloat32, kAvx512Emulated, kAvx512Bf16, kAmxEmulated, kAmxBf16 };

const char* bf16_gemm_path_name(Bf16GemmPath path);  // "float32", "avx512_emulated", "avx512_bf16", "amx_..."
bool bf16_gemm_path_available(Bf16GemmPath path);    // the CPU can run it
Bf16GemmPath bf16_gemm_path();
// The default for a CPU that has usable AMX-BF16 (amx), AVX512-BF16
// (avx512_bf16) and is an Intel one (intel): the rule above, as a function.
Bf16GemmPath default_bf16_gemm_path(bool amx, bool avx512_bf16, bool intel);

void gemm_bf16(Bf16GemmPath path, int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t a_rs, int64_t a_cs,
               const uint16_t* b, int64_t b_rs, int64_t b_cs, float* c, int64_t ldc);

// Batched: matrix i of A at a + a_off[i], of B at b + b_off[i] (broadcast
// batches may repeat offsets), C_i at c + i * c_stride (leading dimension ldc).
// With c16, the result goes there rounded to bfloat16 (its bits, laid out as C;
// to nearest even, as BFloat16(float)) by each kernel as it stores the last K
// block (Note [gemm epilogue] in gemm.h); C then holds only partial sums (or
// nothing, with one K block): a bfloat16 matmul needs no pass over a float32
// result. With col_bias (n float32 values, the same for every matrix), C_i =
// col_bias + A_i * B_i, the bias added in float32 before any rounding (a
// bfloat16 linear rounds once, as PyTorch's CPU autocast does): the float32
// and VDPBF16PS kernels start their sums from it, the AMX kernels add it to
// their first K block's tile sums.
void gemm_bf16_batched(Bf16GemmPath path, int64_t batch, const int64_t* a_off, const int64_t* b_off, int64_t m,
                       int64_t n, int64_t k, const uint16_t* a, int64_t a_rs, int64_t a_cs, const uint16_t* b,
                       int64_t b_rs, int64_t b_cs, float* c, int64_t c_stride, int64_t ldc, uint16_t* c16 = nullptr,
                       const float* col_bias = nullptr);

// One matrix with a bfloat16 GELU epilogue (kGeluForwardBf16: h and gelu(h) of
// an MLP's first linear, with col_bias; kGeluBackwardBf16: the gradient of h,
// no bias), on `path`, threads and determinism as above; C (float32, leading
// dimension ldc) holds only partial sums.
void gemm_bf16_gelu_tanh(Bf16GemmPath path, int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t a_rs,
                         int64_t a_cs, const uint16_t* b, int64_t b_rs, int64_t b_cs, float* c, int64_t ldc,
                         const float* col_bias, const GemmEpilogue& epilogue);

}  // namespace weft::cpu
