// Block products and operand layouts of the CPU flash attention
// (core/cpu/flash_attention.cc), which alone uses them. AVX-512: callers run
// them only where flash_attention_available().
//
// Contract:
// - tile_gemm: C (m x n, row stride ldc) = or += A (m x k) B (k x n) in float32.
//   Element (i, p) of A at a[i * ars + p * acs] (any strides, so p^T and ds^T
//   need no copy); row p of B at b + p * ldb, unit column stride. Register
//   tiles of up to 6 rows x 64 columns; each element is one FMA chain in p order.
// - pair_tile_gemm: the same product on bfloat16 pairs, in VDPBF16PS's layout:
//   steps 2t and 2t + 1 of A's row i are one 32-bit word (step 2t in the low
//   half) at a[i * ars + t * acs], and those of B's column j the word at
//   b[t * ldb + j]; kp pairs (an odd k padded with a zero step on both sides).
//   Each element sums its pairs in t order by pair_dot (core/cpu/pair_dot.h):
//   with `native`, VDPBF16PS (AVX512-BF16 only), else two float32 FMAs.
// - pack_transposed_panels: the transpose of src (rows x cols, row stride rs)
//   in panels of 64 rows: dst[b * cols * 64 + d * 64 + j % 64] = src[j * rs + d]
//   for b = j / 64 (columns past the last row unset). E = float, or bfloat16
//   bits widened to float32. A (rows x 2 cols) bfloat16 matrix passed as a float
//   matrix of cols words is packed word for word (pairs of columns kept together).
// - copy_rows16: src (rows x cols, row stride rs) as bfloat16 bits into dst
//   (row stride ld >= cols, the columns [cols, ld) zeroed); E = float (rounded
//   to nearest even) or bfloat16 bits (copied).
// - pair_rows: rows 2t and 2t + 1 of src (as copy_rows16 reads it) interleaved
//   into words, dst[t * ldd + c] = bits(src[2t][c]) | bits(src[2t + 1][c]) << 16
//   for t < ceil(rows / 2), c < cols; a missing last odd row reads as zeros.
#pragma once

#include <cstdint>

namespace weft::cpu::flash {

constexpr int64_t kB = 64;  // queries and keys per block, rows per packed panel

void tile_gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t ars, int64_t acs, const float* b, int64_t ldb,
               float* c, int64_t ldc, bool accumulate);

void pair_tile_gemm(bool native, int64_t m, int64_t n, int64_t kp, const uint32_t* a, int64_t ars, int64_t acs,
                    const uint32_t* b, int64_t ldb, float* c, int64_t ldc, bool accumulate);

template <typename E>
void pack_transposed_panels(const E* src, int64_t rows, int64_t cols, int64_t rs, float* dst);

template <typename E>
void copy_rows16(const E* src, int64_t rows, int64_t cols, int64_t rs, uint16_t* dst, int64_t ld);

template <typename E>
void pair_rows(const E* src, int64_t rows, int64_t cols, int64_t rs, uint32_t* dst, int64_t ldd);

}  // namespace weft::cpu::flash
