// Hand-written AVX-512 float32 GEMM (core/cpu/gemm_avx512.cc), used by
// core/cpu/gemm.cc for float32 when the CPU has AVX-512 (gemm_avx512_available),
// and by core/cpu/gemm_bf16.cc's float32 path for bfloat16 operands.
//
// Contract: C_i (m, n) = A_i (m, k) * B_i (k, n) (or C_i += A_i * B_i when
// `accumulate`) for i < batch. Element (r, c) of A_i is at a[a_off[i] + r * a_rs +
// c * a_cs], of B_i at b[b_off[i] + r * b_rs + c * b_cs]: any strides (row-major,
// col-major, sliced, broadcast zero strides), transposes handled while packing.
// C_i is row-major at c + i * c_stride with leading dimension ldc >= n; C must not
// overlap A or B. Note [gemm determinism] in gemm.h: every element of C is summed
// in one fixed order (K cut into blocks from K alone, each block summed in order
// by one FMA chain), so the result does not depend on the thread count or on how
// C is tiled among threads.
// With `col_bias` (n floats, or nullptr; not with `accumulate`, checked by the
// caller in gemm.cc): C_i = col_bias + A_i * B_i, the first K block's
// accumulators starting from the bias (masked load on the last column tile), so
// the bias is the first term of every element's sum and C is written once.
// A C of 2..15 columns (and m >= 2n, m >= 16) is computed transposed, C^T =
// B^T A^T, into a scratch (kept per thread up to 1 MiB) and copied back (Note
// [narrow gemm]): the same bits as the direct path; with a bias, the first K
// block's sum is added to the bias rather than started from it.
#pragma once

#include <cstdint>

#include "core/cpu/gemm.h"

namespace weft::cpu {

// True when this CPU (not just the compiler) supports AVX-512F.
bool gemm_avx512_available();

void gemm_avx512_f32(int64_t batch, const int64_t* a_off, const int64_t* b_off, int64_t m, int64_t n, int64_t k,
                     const float* a, int64_t a_rs, int64_t a_cs, const float* b, int64_t b_rs, int64_t b_cs, float* c,
                     int64_t c_stride, int64_t ldc, bool accumulate, const float* col_bias = nullptr);

// A B operand that its owner packs (an implicit im2col, say): pack() writes
// B's rows [p0, p0 + kc) x columns [j0, j0 + nc) to dst (64-byte aligned) as
// panels of kGemmPanelCols columns, panel jr (columns j0 + jr ...) at
// dst + jr * kc, with row p of the panel at p * w, where w = 32, or 16 for a
// last panel of at most 16 columns; columns past nc are zero. kc <=
// kGemmMaxKBlock and nc <= 256; the calls come from the calling thread.
constexpr int64_t kGemmPanelCols = 32;
// The largest K block: a product with K <= kGemmMaxKBlock sums every element
// of C in one block, its accumulator starting from zero (or the column bias)
// and taking one FMA per k, in order (Note [gemm determinism], gemm.h).
constexpr int64_t kGemmMaxKBlock = 384;
// The K blocks of a product of depth k: near-equal blocks of
// gemm_avx512_k_block(k) <= kGemmMaxKBlock (the last one shorter), each summed
// as above and added to the sum of the blocks before it (first + second,
// then + third ...), one function of k alone.
int64_t gemm_avx512_k_block(int64_t k);
class GemmPackB {
 public:
  virtual void pack(int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* dst) const = 0;

 protected:
  ~GemmPackB() = default;
};

// One matrix on the calling thread: C (m, n) = or += A (m, k) * B (k, n), with
// B packed by `b`. Bit for bit what gemm_avx512_f32 gives on that B; n >= 16
// (a narrower C is computed transposed there, Note [narrow gemm]).
void gemm_avx512_f32_packed_b(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_cs,
                              const GemmPackB& b, float* c, int64_t ldc, bool accumulate);

// One matrix with the GELU epilogue of Note [gemm epilogue] (core/cpu/gemm.h),
// evaluated on the accumulators of the last K block before they are stored.
void gemm_avx512_f32_gelu_tanh(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_cs,
                               const float* b, int64_t b_rs, int64_t b_cs, float* c, int64_t ldc, const float* col_bias,
                               const GemmEpilogue& epilogue);

// One matrix, C = A * B, with row_sums (m) = A summed over k, accumulated from
// the A panels as they are packed (gemm_row_sums in core/cpu/gemm.h).
void gemm_avx512_f32_row_sums(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_cs,
                              const float* b, int64_t b_rs, int64_t b_cs, float* c, int64_t ldc, float* row_sums);

// The same GEMM on bfloat16 operands (their bits as uint16_t), each element
// widened to float32 as it is packed: C_i = A_i * B_i in float32, bit for bit
// what gemm_avx512_f32 gives on the widened operands, with no widened copy.
// With c16, the results go there rounded to bfloat16 (kRoundBf16 of Note [gemm
// epilogue]; same layout as C), C holding only partial sums. With col_bias (n
// values) the sums start from it, as in gemm_avx512_f32.
void gemm_avx512_bf16_widened(int64_t batch, const int64_t* a_off, const int64_t* b_off, int64_t m, int64_t n,
                              int64_t k, const uint16_t* a, int64_t a_rs, int64_t a_cs, const uint16_t* b, int64_t b_rs,
                              int64_t b_cs, float* c, int64_t c_stride, int64_t ldc, uint16_t* c16 = nullptr,
                              const float* col_bias = nullptr);

// One matrix of bfloat16 operands widened as they are packed, with a bfloat16
// GELU epilogue (kGeluForwardBf16 or kGeluBackwardBf16 of Note [gemm epilogue]);
// C holds only partial sums.
void gemm_avx512_bf16_widened_gelu(int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t a_rs, int64_t a_cs,
                                   const uint16_t* b, int64_t b_rs, int64_t b_cs, float* c, int64_t ldc,
                                   const float* col_bias, const GemmEpilogue& epilogue);

}  // namespace weft::cpu
