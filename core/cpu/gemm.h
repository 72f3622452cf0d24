// CPU GEMM through Eigen: C = A * B for float and double, strided operands.
//
// Contract: A is (m, k), B is (k, n), element (i, j) of an operand at
// data[i * rs + j * cs]; each operand must be row-major (cs == 1) or col-major
// (rs == 1) with a leading dimension covering its inner size -- check with
// gemm_layout_ok() and copy to contiguous otherwise. C is row-major with leading
// dimension ldc and is overwritten. This is the only translation unit that
// includes Eigen (compile time). Note [gemm determinism]: C is cut into blocks
// (of rows when C is tall, of columns when wide) chosen from the shape alone;
// each block is one single-threaded Eigen product and threads only share out
// whole blocks, so the result does not depend on the thread count. `parallel` = false runs the blocks inline (used
// when the caller already parallelises over a batch).
#pragma once

#include <cstdint>

namespace weft::cpu {

bool gemm_layout_ok(int64_t rows, int64_t cols, int64_t rs, int64_t cs);

void gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
          int64_t b_rs, int64_t b_cs, float* c, int64_t ldc, bool parallel = true);
void gemm(int64_t m, int64_t n, int64_t k, const double* a, int64_t a_rs, int64_t a_cs, const double* b,
          int64_t b_rs, int64_t b_cs, double* c, int64_t ldc, bool parallel = true);

}  // namespace weft::cpu
