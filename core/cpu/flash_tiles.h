// Block products, operand layouts and softmax rows of the CPU flash attention
// (core/cpu/flash_attention.cc), which alone uses them. Two instruction sets:
// AVX-512 (flash_tiles.cc: every function below) and AVX2 + FMA
// (flash_tiles_avx2.cc: the Kernels table only, float32 products); callers
// run each only where the CPU has it.
//
// Contract:
// - tile_gemm: C (m x n, row stride ldc) = or += A (m x k) B (k x n) in float32.
//   Element (i, p) of A at a[i * ars + p * acs] (any strides, so p^T and ds^T
//   need no copy); row p of B at b + p * ldb, unit column stride. Register
//   tiles of up to 6 rows x 64 columns (AVX2: x 16 columns); each element is
//   one FMA chain in p order.
// - softmax_block (the forward's online softmax over one block of scores): s
//   (br x bc, row stride kB) holds q k^T for br query rows; row i sees its
//   first n_i = clamp(first + i, 0, bc) keys. For a row with n_i > 0:
//   m_new = max(m[i], scale * max of its visible scores), the row becomes p =
//   exp(scale * s - m_new) (0 on hidden keys), l[i] = l[i] * exp(m[i] - m_new)
//   + sum of p, acc's row (Dv floats, row stride Dv) is multiplied by
//   exp(m[i] - m_new) (skipped when that is 1), m[i] = m_new. A row with
//   n_i = 0 becomes zeros and keeps m, l and acc.
// - finish_block: o's row i (row stride o_rs) = acc's row i / l[i] (zeros
//   where l[i] = 0), lse[i] = m[i] + log l[i] (-inf where l[i] = 0).
// - probs_block (the backward's p): row i of s (br x bc, row stride kB)
//   becomes exp(scale * s - lse[i]) on its first n_i keys (as above), 0 after.
// - ds_block: ds (br x bc, row stride kB) holding dp becomes
//   scale * p * (dp - delta[i]) row by row, p with row stride kB.
// - dot_row: the sum of a[d] * b[d] for d < n.
// - pack_transposed_panels: the transpose of src (rows x cols, row stride rs)
//   in panels of 64 rows: dst[b * cols * 64 + d * 64 + j % 64] = src[j * rs + d]
//   for b = j / 64 (columns past the last row unset). E = float, or bfloat16
//   bits widened to float32. A (rows x 2 cols) bfloat16 matrix passed as a float
//   matrix of cols words is packed word for word (pairs of columns kept together).
// - pair_tile_gemm: the product of tile_gemm on bfloat16 pairs, in VDPBF16PS's layout:
//   steps 2t and 2t + 1 of A's row i are one 32-bit word (step 2t in the low
//   half) at a[i * ars + t * acs], and those of B's column j the word at
//   b[t * ldb + j]; kp pairs (an odd k padded with a zero step on both sides).
//   Each element sums its pairs in t order by pair_dot (core/cpu/pair_dot.h):
//   with `native`, VDPBF16PS (AVX512-BF16 only), else two float32 FMAs.
// - copy_rows16: src (rows x cols, row stride rs) as bfloat16 bits into dst
//   (row stride ld >= cols, the columns [cols, ld) zeroed); E = float (rounded
//   to nearest even) or bfloat16 bits (copied).
// - pair_rows: rows 2t and 2t + 1 of src (as copy_rows16 reads it) interleaved
//   into words, dst[t * ldd + c] = bits(src[2t][c]) | bits(src[2t + 1][c]) << 16
//   for t < ceil(rows / 2), c < cols; a missing last odd row reads as zeros.
// - widen_rows: bfloat16 src (rows x cols, row stride rs) into the contiguous
//   float32 dst; round_rows: the contiguous float32 src into bfloat16 dst (row
//   stride rs), to nearest even.
// - The _bf16 entries of Kernels: the same with bfloat16 elements (bits) for
//   o (finish_block_bf16: rounded to nearest even as stored), the second
//   operand of dot_row_bf16 and the source of pack_transposed_panels_bf16
//   (widened as read).
#pragma once

#include <cstdint>

namespace weft::cpu::flash {

constexpr int64_t kB = 64;  // queries and keys per block, rows per packed panel

// The float32 pieces, one table per instruction set.
struct Kernels {
  void (*tile_gemm)(int64_t m, int64_t n, int64_t k, const float* a, int64_t ars, int64_t acs, const float* b,
                    int64_t ldb, float* c, int64_t ldc, bool accumulate);
  void (*pack_transposed_panels)(const float* src, int64_t rows, int64_t cols, int64_t rs, float* dst);
  void (*softmax_block)(int64_t br, int64_t bc, int64_t first, float scale, float* s, float* m, float* l, float* acc,
                        int64_t Dv);
  void (*finish_block)(int64_t br, int64_t Dv, const float* acc, const float* m, const float* l, float* o, int64_t o_rs,
                       float* lse);
  void (*probs_block)(int64_t br, int64_t bc, int64_t first, float scale, const float* lse, float* s);
  void (*ds_block)(int64_t br, int64_t bc, float scale, const float* p, const float* delta, float* ds);
  float (*dot_row)(const float* a, const float* b, int64_t n);
  // bfloat16 inputs on float32 products
  void (*pack_transposed_panels_bf16)(const uint16_t* src, int64_t rows, int64_t cols, int64_t rs, float* dst);
  void (*finish_block_bf16)(int64_t br, int64_t Dv, const float* acc, const float* m, const float* l, uint16_t* o,
                            int64_t o_rs, float* lse);
  float (*dot_row_bf16)(const float* a, const uint16_t* b, int64_t n);
  void (*widen_rows)(const uint16_t* src, int64_t rows, int64_t cols, int64_t rs, float* dst);
  void (*round_rows)(const float* src, int64_t rows, int64_t cols, uint16_t* dst, int64_t rs);
};
const Kernels& avx512_kernels();  // flash_tiles.cc
const Kernels& avx2_kernels();    // flash_tiles_avx2.cc

// AVX-512 only: the pair products' pieces.
float dot_row(const uint16_t* a, const uint16_t* b, int64_t n);

void pair_tile_gemm(bool native, int64_t m, int64_t n, int64_t kp, const uint32_t* a, int64_t ars, int64_t acs,
                    const uint32_t* b, int64_t ldb, float* c, int64_t ldc, bool accumulate);

template <typename E>
void pack_transposed_panels(const E* src, int64_t rows, int64_t cols, int64_t rs, float* dst);

template <typename E>
void copy_rows16(const E* src, int64_t rows, int64_t cols, int64_t rs, uint16_t* dst, int64_t ld);

template <typename E>
void pair_rows(const E* src, int64_t rows, int64_t cols, int64_t rs, uint32_t* dst, int64_t ldd);

}  // namespace weft::cpu::flash
