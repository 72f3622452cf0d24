// Hand-written AVX2 + FMA float32 GEMM (core/cpu/gemm_avx2.cc), used by
// core/cpu/gemm.cc for float32 on CPUs with AVX2 and FMA but no AVX-512 (or
// with the AVX-512 kernel switched off): Eigen's product reaches about two
// thirds of MKL's sgemm there.
//
// Contract: gemm_batched's (core/cpu/gemm.h): C_i (m, n) = A_i (m, k) * B_i
// (k, n), or C_i += A_i * B_i when `accumulate`, or C_i = col_bias + A_i * B_i,
// for i < batch, with A_i at a + a_off[i] (element (r, c) at r * a_rs + c *
// a_cs, any strides), B_i likewise, C_i row-major at c + i * c_stride with
// leading dimension ldc >= n, not overlapping A or B; k > 0 (gemm.cc sends an
// empty inner dimension, which only fills C, to its Eigen path). Note [gemm determinism]:
// K is cut into blocks from K alone; each block's products are chained in k
// order by one FMA per k, starting from zero (the first block: from the bias),
// and the block sums are added to C in block order, so the result does not
// depend on the thread count or on how C is tiled among threads.
#pragma once

#include <cstdint>

namespace weft::cpu {

// True when this CPU (not just the compiler) supports AVX2 and FMA.
bool gemm_avx2_available();

void gemm_avx2_f32(int64_t batch, const int64_t* a_off, const int64_t* b_off, int64_t m, int64_t n, int64_t k,
                   const float* a, int64_t a_rs, int64_t a_cs, const float* b, int64_t b_rs, int64_t b_cs, float* c,
                   int64_t c_stride, int64_t ldc, bool accumulate, const float* col_bias = nullptr);

}  // namespace weft::cpu
