// CPU GEMM: C = A * B (or C += A * B) for float and double, strided operands.
//
// Contract: A is (m, k), B is (k, n), element (i, j) of an operand at
// data[i * rs + j * cs] for any strides (row-major, col-major, sliced, zero
// strides of broadcast dims); C is row-major with leading dimension ldc >= n, must
// not overlap A or B, and is overwritten (or added to when `accumulate`).
// Optional column bias (linear's bias, fused as an epilogue): with `col_bias`
// (n contiguous values, shared by every matrix of a batch, must not overlap C),
// C(i, j) = col_bias[j] + (A B)(i, j) without a separate pass over C. It cannot be
// combined with `accumulate` (a WEFT_CHECK error): C += bias + A B has no caller.
// float32 runs the hand-written AVX-512 kernel (core/cpu/gemm_avx512.cc) when the
// CPU has AVX-512; double, and float32 elsewhere, go through Eigen's product
// (this is the only translation unit that includes Eigen), which copies an
// operand to contiguous first when gemm_layout_ok() is false for it.
//
// Note [gemm determinism]: every element of C is summed in one order fixed by the
// shape alone -- K is cut into blocks chosen from K (AVX-512 path), each block's
// products chained in k order, block sums added to C in block order; the Eigen
// path computes blocks of C chosen from the shape, each by one single-threaded
// product. A column bias comes first on both paths: the AVX-512 kernel starts
// the first K block's accumulators from it (a C of 2..15 columns, computed
// transposed by Note [narrow gemm] in gemm_avx512.cc, gets it written first
// and the first block's sum added onto it), the Eigen path writes it into its
// block of C and adds the block's product onto it. Threads only share out whole
// tiles of C, so the result does not depend on the thread count.
#pragma once

#include <cstdint>

namespace weft::cpu {

// True when the operand is plain row-major (cs == 1) or col-major (rs == 1) with
// a leading dimension covering its inner size; the Eigen path copies it otherwise.
bool gemm_layout_ok(int64_t rows, int64_t cols, int64_t rs, int64_t cs);

// Batched: matrix i of A starts at a + a_off[i], of B at b + b_off[i] (offsets in
// elements; broadcast batches may repeat offsets); C_i at c + i * c_stride. All
// (matrix, tile) pairs are shared out over the threads together.
void gemm_batched(int64_t batch, const int64_t* a_off, const int64_t* b_off, int64_t m, int64_t n, int64_t k,
                  const float* a, int64_t a_rs, int64_t a_cs, const float* b, int64_t b_rs, int64_t b_cs, float* c,
                  int64_t c_stride, int64_t ldc, bool accumulate = false, const float* col_bias = nullptr);
void gemm_batched(int64_t batch, const int64_t* a_off, const int64_t* b_off, int64_t m, int64_t n, int64_t k,
                  const double* a, int64_t a_rs, int64_t a_cs, const double* b, int64_t b_rs, int64_t b_cs, double* c,
                  int64_t c_stride, int64_t ldc, bool accumulate = false, const double* col_bias = nullptr);

// One matrix: C (m, n) = or += A (m, k) * B (k, n); = col_bias (n) + A * B with a bias.
template <typename T>
void gemm(int64_t m, int64_t n, int64_t k, const T* a, int64_t a_rs, int64_t a_cs, const T* b, int64_t b_rs,
          int64_t b_cs, T* c, int64_t ldc, bool accumulate = false, const T* col_bias = nullptr) {
  const int64_t zero = 0;
  gemm_batched(1, &zero, &zero, m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, 0, ldc, accumulate, col_bias);
}

// Note [gemm epilogue]: work fused into a GEMM, applied to each element of C
// once its sum is complete, so that no separate pass reads C back:
//   kGeluForward:  C = col_bias + A B is the pre-activation h; `act` (same
//              shape, leading dimension ld_act) receives gelu_tanh(h) (a
//              transformer MLP's first linear).
//   kGeluBackward: C = (A B) * gelu_tanh'(pre), with `pre` the saved
//              pre-activation (leading dimension ld_pre): the gradient of h
//              from the gradient of the activation.
//   kRoundBf16: the finished value rounded to bfloat16 (to nearest even, NaN
//              to the quiet NaN, as BFloat16(float)) goes to `out16` (its bits,
//              leading dimension ld_out16; matrix i of a batch at out16 + i *
//              c_stride) instead of C, which then only holds the partial sums
//              of earlier K blocks (untouched when K is one block): a
//              bfloat16 matmul's float32 result never makes a pass of its own.
//   kGeluForwardBf16, kGeluBackwardBf16: the GELU kinds of a bfloat16 MLP,
//              writing bfloat16 instead of C (which, as for kRoundBf16, only
//              holds partial sums). Forward: h = col_bias + A B rounded goes to
//              `out16`, and gelu_tanh of that rounded h, rounded, to `act16`
//              (the activation is the GELU of the pre-activation the backward
//              will read). Backward: (A B) * gelu_tanh'(pre16), rounded, to
//              `out16`. The float32 product is rounded once, never before the
//              GELU factor.
// The GELU kinds:
// gelu_tanh(x) = x / (1 + exp(-2 sqrt(2/pi) (x + 0.044715 x^3))), as the unary
// kernels compute it (core/ops/unary.cc); the AVX-512 kernels evaluate it on
// the accumulators with their own exp, so they agree with the unfused ops to a
// few ulp rather than bit for bit. Not with `accumulate`; the epilogue's
// pointers must not overlap A, B or C.
struct GemmEpilogue {
  enum class Kind { kGeluForward, kGeluBackward, kRoundBf16, kGeluForwardBf16, kGeluBackwardBf16 };
  Kind kind = Kind::kGeluForward;
  float* act = nullptr;  // kGeluForward
  int64_t ld_act = 0;
  const float* pre = nullptr;  // kGeluBackward
  int64_t ld_pre = 0;
  uint16_t* out16 = nullptr;  // kRoundBf16 and the bfloat16 GELU kinds
  int64_t ld_out16 = 0;
  uint16_t* act16 = nullptr;  // kGeluForwardBf16
  int64_t ld_act16 = 0;
  const uint16_t* pre16 = nullptr;  // kGeluBackwardBf16
  int64_t ld_pre16 = 0;

  // Writes bfloat16 instead of C.
  bool bf16_out() const {
    return kind == Kind::kRoundBf16 || kind == Kind::kGeluForwardBf16 || kind == Kind::kGeluBackwardBf16;
  }
  // The same epilogue for the block of C whose first element is (r0, c0).
  GemmEpilogue at(int64_t r0, int64_t c0) const {
    GemmEpilogue t = *this;
    t.place(*this, r0, c0);
    return t;
  }
  // Makes this (a copy of `base`) base's epilogue for the block at (r0, c0),
  // field by field. The micro-kernels' loops call it on one copy per thread:
  // a fresh `at` per tile wrote the copy's pointers one by one and then moved
  // the whole struct with wide loads, which cannot be forwarded from those
  // stores and stalled every tile (Zen 5: 7% of a bfloat16 GEMM's time).
  void place(const GemmEpilogue& base, int64_t r0, int64_t c0) {
    act = base.act ? base.act + r0 * base.ld_act + c0 : nullptr;
    pre = base.pre ? base.pre + r0 * base.ld_pre + c0 : nullptr;
    out16 = base.out16 ? base.out16 + r0 * base.ld_out16 + c0 : nullptr;
    act16 = base.act16 ? base.act16 + r0 * base.ld_act16 + c0 : nullptr;
    pre16 = base.pre16 ? base.pre16 + r0 * base.ld_pre16 + c0 : nullptr;
  }
};

// The epilogue on one finished value r of C at (i, j) from ep's first element
// (cp is C's element there), with the scalar formulas of the unary kernels:
// the paths without an AVX-512 store of their own (Eigen's, the AMX kernels).
void apply_epilogue(const GemmEpilogue& ep, float* cp, float r, int64_t i, int64_t j);

// The same formulas as a pass over a finished C (m, n; leading dimension ldc,
// ep's pointers at C's first element): one kind per call, a row loop per kind
// that vectorises, rows shared among threads. For the paths whose product has
// no epilogue store of its own (the AVX2 kernel, Eigen, widened bfloat16).
void apply_epilogue_rows(const GemmEpilogue& ep, float* c, int64_t ldc, int64_t m, int64_t n);

// One float32 matrix: C (m, n) = [col_bias +] A (m, k) * B (k, n), then a GELU
// epilogue. Threads and determinism as gemm (Note [gemm determinism]).
void gemm_gelu_tanh(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
                    int64_t b_rs, int64_t b_cs, float* c, int64_t ldc, const float* col_bias,
                    const GemmEpilogue& epilogue);

// One float32 matrix: C (m, n) = A (m, k) * B (k, n), and row_sums (m) = A
// summed over k (a linear's bias gradient beside its weight gradient: with A =
// g^T, the column sums of g). The AVX-512 kernel adds up each panel of A while
// packing it, so the sums cost no pass over A of their own; each row's sum runs
// over k in an order fixed by the shape (chunks of k in order), whatever the
// thread count. row_sums must not overlap A, B or C.
void gemm_row_sums(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
                   int64_t b_rs, int64_t b_cs, float* c, int64_t ldc, float* row_sums);

// Which float32 path runs: true = AVX-512 kernel (default where the CPU has it),
// false = Eigen. For tests and benchmarks comparing the two; not thread-safe
// against concurrent GEMMs.
bool gemm_f32_uses_avx512();
void set_gemm_f32_avx512(bool enabled);
// The AVX2 + FMA kernel (core/cpu/gemm_avx2.h) takes float32 where the AVX-512
// one does not run and the CPU has AVX2 and FMA; switched off, Eigen's product.
bool gemm_f32_uses_avx2();
void set_gemm_f32_avx2(bool enabled);

}  // namespace weft::cpu
