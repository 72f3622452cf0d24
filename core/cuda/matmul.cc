// CUDA matmul kernel (core/kernels/matmul.h) on cuBLAS: float32 (TF32 opt-in, see
// blas.h), float64, float16 and bfloat16 (float32 accumulation, CUBLAS_COMPUTE_32F).
//
// Layout: cuBLAS is column-major. The row-major product C (M, N) = A (M, K) B (K, N)
// is the column-major product C^T (N, M) = B^T (N, K) A^T (K, M), so the operands
// are swapped and nothing is copied for row-major or transposed (column-major)
// matrices: a row-major (R, C) matrix with strides (rs, 1) is a column-major
// (C, R) matrix with ld = rs (op N); one with strides (1, cs) is the transpose of a
// column-major (R, C) matrix with ld = cs (op T). Only matrices with neither unit
// stride (or a leading dimension cuBLAS rejects) are copied. Batches use one
// cublasGemmStridedBatchedEx when each operand's batch matrices sit at a constant
// stride (0 for a broadcast operand); otherwise the operand is made contiguous.
// out is contiguous (batch..., M, N), written with beta = 0 (never read).
#include "core/kernels/matmul.h"

#include <climits>
#include <type_traits>
#include <vector>

#include "core/cuda/blas.h"
#include "core/cuda/check.h"
#include "core/cuda/library_check.h"
#include "core/cuda/runtime.h"
#include "core/cuda/stream.h"
#include "core/dispatch.h"
#include "core/ops.h"

namespace weft::cuda {
namespace {

// An operand as cuBLAS sees it: op(X) is the column-major (C, R) transpose of the
// row-major (R, C) matrix.
struct BlasOperand {
  Tensor t;  // the tensor actually read (maybe a contiguous copy)
  cublasOperation_t op;
  int64_t ld;
  int64_t batch_stride;  // elements between consecutive batch matrices
};

// The constant stride between batch matrices, or -1 when there is none.
int64_t uniform_batch_stride(const Tensor& t) {
  std::vector<int64_t> offs = batch_offsets(t);
  if (offs.size() <= 1) return 0;
  const int64_t s = offs[1] - offs[0];
  if (s < 0) return -1;
  for (size_t i = 1; i < offs.size(); ++i)
    if (offs[i] - offs[i - 1] != s) return -1;
  return s;
}

// Fills op/ld for t's matrices (R, C) = (size(-2), size(-1)); false when no
// column-major description exists.
bool describe(const Tensor& t, cublasOperation_t& op, int64_t& ld) {
  const int64_t R = t.size(-2), C = t.size(-1), rs = t.stride(-2), cs = t.stride(-1);
  // row-major: X = t^T is column-major (C, R) with ld = rs
  if ((cs == 1 || C == 1) && (R == 1 || rs >= std::max<int64_t>(1, C))) {
    op = CUBLAS_OP_N;
    ld = R == 1 ? std::max<int64_t>(1, C) : rs;
    return ld <= INT_MAX;
  }
  // column-major: t itself is column-major (R, C) with ld = cs; cuBLAS transposes it
  if ((rs == 1 || R == 1) && (C == 1 || cs >= std::max<int64_t>(1, R))) {
    op = CUBLAS_OP_T;
    ld = C == 1 ? std::max<int64_t>(1, R) : cs;
    return ld <= INT_MAX;
  }
  return false;
}

BlasOperand prepare(const Tensor& t_in) {
  BlasOperand o{t_in, CUBLAS_OP_N, 0, 0};
  bool ok = describe(o.t, o.op, o.ld);
  if (ok) {
    o.batch_stride = uniform_batch_stride(o.t);
    ok = o.batch_stride >= 0;
  }
  if (!ok) {
    o.t = t_in.contiguous();
    WEFT_CHECK(describe(o.t, o.op, o.ld), "matmul: cannot describe a contiguous operand of shape ",
               shape_str(o.t.sizes()), " to cuBLAS");
    o.batch_stride = o.t.size(-2) * o.t.size(-1);
  }
  return o;
}

template <typename T>
struct BlasTypes;
template <>
struct BlasTypes<float> {
  static constexpr cudaDataType_t data = CUDA_R_32F;
};
template <>
struct BlasTypes<double> {
  static constexpr cudaDataType_t data = CUDA_R_64F;
};
template <>
struct BlasTypes<Half> {
  static constexpr cudaDataType_t data = CUDA_R_16F;
};
template <>
struct BlasTypes<BFloat16> {
  static constexpr cudaDataType_t data = CUDA_R_16BF;
};

template <typename T>
void cuda_matmul(const Tensor& out, const Tensor& a_in, const Tensor& b_in) {
  if constexpr (!(std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, Half> ||
                  std::is_same_v<T, BFloat16>)) {
    WEFT_CHECK(false, "matmul: no CUDA kernel for dtype ", dtype_of<T>);
  } else {
    const int64_t M = a_in.size(-2), K = a_in.size(-1), N = b_in.size(-1);
    const int64_t batch = out.numel() / std::max<int64_t>(M * N, 1);
    if (out.numel() == 0) return;
    const int dev = out.device().index;
    DeviceGuard guard(dev);
    cudaStream_t stream = current_stream(dev);
    if (K == 0) {  // empty sum: zeros (not left to cuBLAS's k = 0 handling)
      WEFT_CUDA_CHECK(cudaMemsetAsync(out.raw_data(), 0, out.nbytes(), stream));
      return;
    }
    WEFT_CHECK(M <= INT_MAX && N <= INT_MAX && K <= INT_MAX && batch <= INT_MAX, "matmul: sizes (M, N, K) = (", M, ", ",
               N, ", ", K, ") with batch ", batch, " exceed cuBLAS's 32-bit limits");
    BlasOperand a = prepare(a_in), b = prepare(b_in);
    cublasHandle_t h = blas_handle(dev);

    constexpr cudaDataType_t dt = BlasTypes<T>::data;
    cublasComputeType_t compute;
    if constexpr (std::is_same_v<T, double>) compute = CUBLAS_COMPUTE_64F;
    else if constexpr (std::is_same_v<T, float>)
      compute = allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    else compute = CUBLAS_COMPUTE_32F;
    // alpha/beta have the compute type's scalar type
    using Scalar = std::conditional_t<std::is_same_v<T, double>, double, float>;
    const Scalar alpha = 1, beta = 0;

    // column-major: C^T (N, M) = op(B^T) (N, K) * op(A^T) (K, M)
    const int m = static_cast<int>(N), n = static_cast<int>(M), k = static_cast<int>(K);
    const void* pa = b.t.raw_data();  // cuBLAS "A" = our b
    const void* pb = a.t.raw_data();  // cuBLAS "B" = our a
    void* pc = out.raw_data();
    if (batch == 1) {
      WEFT_CUBLAS_CHECK(cublasGemmEx(h, b.op, a.op, m, n, k, &alpha, pa, dt, static_cast<int>(b.ld), pb, dt,
                                     static_cast<int>(a.ld), &beta, pc, dt, m, compute, CUBLAS_GEMM_DEFAULT));
    } else {
      WEFT_CUBLAS_CHECK(cublasGemmStridedBatchedEx(h, b.op, a.op, m, n, k, &alpha, pa, dt, static_cast<int>(b.ld),
                                                   b.batch_stride, pb, dt, static_cast<int>(a.ld), a.batch_stride,
                                                   &beta, pc, dt, m, M * N, static_cast<int>(batch), compute,
                                                   CUBLAS_GEMM_DEFAULT));
    }
  }
}

constexpr uint32_t kBlasTypes = (1u << int(DType::Float32)) | (1u << int(DType::Float64)) |
                                (1u << int(DType::Float16)) | (1u << int(DType::BFloat16));
WEFT_REGISTER_KERNEL(matmul_table(), DeviceType::CUDA, kBlasTypes, cuda_matmul);

}  // namespace
}  // namespace weft::cuda
