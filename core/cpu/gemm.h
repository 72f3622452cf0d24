// CPU GEMM through Eigen: C = A * B for float and double, strided operands.
//
// Contract: A is (m, k), B is (k, n), element (i, j) of an operand at
// data[i * rs + j * cs]; each operand must be row-major (cs == 1) or col-major
// (rs == 1) with a leading dimension covering its inner size -- check with
// gemm_layout_ok() and copy to contiguous otherwise. C is row-major with leading
// dimension ldc and is overwritten. This is the only translation unit that
// includes Eigen (compile time). Note [gemm determinism]: C is cut into blocks
// (of columns, or of rows when C is narrow) chosen from the shape alone;
// each block is one single-threaded Eigen product and threads only share out
// whole blocks, so the result does not depend on the thread count.
#pragma once

#include <cstdint>

namespace weft::cpu {

bool gemm_layout_ok(int64_t rows, int64_t cols, int64_t rs, int64_t cs);

// Batched: matrix i of A starts at a + a_off[i], of B at b + b_off[i] (offsets in
// elements; broadcast batches may repeat offsets); C_i at c + i * c_stride. All
// (matrix, block) pairs are shared out over the threads together.
void gemm_batched(int64_t batch, const int64_t* a_off, const int64_t* b_off, int64_t m, int64_t n, int64_t k,
                  const float* a, int64_t a_rs, int64_t a_cs, const float* b, int64_t b_rs, int64_t b_cs, float* c,
                  int64_t c_stride, int64_t ldc);
void gemm_batched(int64_t batch, const int64_t* a_off, const int64_t* b_off, int64_t m, int64_t n, int64_t k,
                  const double* a, int64_t a_rs, int64_t a_cs, const double* b, int64_t b_rs, int64_t b_cs, double* c,
                  int64_t c_stride, int64_t ldc);

}  // namespace weft::cpu
