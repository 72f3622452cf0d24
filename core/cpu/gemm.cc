// CPU GEMM front end (see core/cpu/gemm.h and Note [gemm determinism]): float32
// goes to the AVX-512 kernel where the CPU has it, else to the AVX2 + FMA one
// where the CPU has that, everything else to Eigen's product. Eigen's own OpenMP threading is switched off here: weft
// shares out blocks of C itself so results are independent of the thread count.
#define EIGEN_DONT_PARALLELIZE
#include "core/cpu/gemm.h"

#include <algorithm>
#include <atomic>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "core/cpu/gemm_avx2.h"
#include "core/cpu/gemm_avx512.h"
#include "core/cpu/vec_math.h"
#include "core/error.h"
#include "core/half.h"
#include "core/parallel.h"

namespace weft::cpu {
namespace {

template <typename T, int Order>
using CMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Order>, 0, Eigen::OuterStride<>>;
template <typename T>
using OutMap = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, 0, Eigen::OuterStride<>>;

// Operand layout: row-major (true) or col-major (false), and its leading dimension.
struct Layout {
  bool row_major;
  int64_t ld;
};
Layout layout_of(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if ((cs == 1 || cols <= 1) && (rows <= 1 || rs >= cols)) return {true, rows <= 1 ? std::max<int64_t>(cols, 1) : rs};
  return {false, cols <= 1 ? std::max<int64_t>(rows, 1) : cs};
}

// The block grid (Note [gemm determinism] in gemm.h): from the shape only, up to
// 8 blocks (enough for 2..8 threads) of at least ~2^17 multiply-adds each;
// column blocks unless C is narrow.
struct Grid {
  int64_t rb, cb;  // rows / columns per block
};
Grid grid_for(int64_t m, int64_t n, int64_t k) {
  int64_t work = m * n * k;
  int64_t blocks = std::min<int64_t>(4, work >> 17);
  if (blocks <= 1) return {m, n};
  // Prefer column blocks: with row-major C, Eigen packs B once per column block
  // (a row split would repack all of B in every block).
  if (n < 128 && m >= 64) {
    int64_t rb = std::max<int64_t>(32, ((m + blocks - 1) / blocks + 31) / 32 * 32);
    return {std::min(rb, m), n};
  }
  int64_t cb = std::max<int64_t>(64, ((n + blocks - 1) / blocks + 63) / 64 * 64);
  return {m, std::min(cb, n)};
}

// Computes every (matrix, block) pair of the batch; matrix i reads A at
// a + a_off[i], B at b + b_off[i] and writes C at c + i * c_stride. With a column
// bias, each block of C is first set to the bias and its product added onto it
// (the bias summed first, as on the AVX-512 path: Note [gemm determinism]).
template <typename T, int OA, int OB>
void run(int64_t batch, const int64_t* a_off, const int64_t* b_off, int64_t m, int64_t n, int64_t k, const T* a,
         int64_t lda, const T* b, int64_t ldb, T* c, int64_t c_stride, int64_t ldc, bool accumulate,
         const T* col_bias) {
  const Grid g = grid_for(m, n, k);
  const int64_t nr = (m + g.rb - 1) / g.rb, nc = (n + g.cb - 1) / g.cb, per = nr * nc;
  auto body = [&](int64_t b0, int64_t b1) {
    for (int64_t w = b0; w < b1; ++w) {
      int64_t i = w / per, blk = w % per;
      CMap<T, OA> A(a + a_off[i], m, k, Eigen::OuterStride<>(lda));
      CMap<T, OB> B(b + b_off[i], k, n, Eigen::OuterStride<>(ldb));
      OutMap<T> C(c + i * c_stride, m, n, Eigen::OuterStride<>(ldc));
      int64_t r0 = (blk / nc) * g.rb, c0 = (blk % nc) * g.cb;
      int64_t rl = std::min(g.rb, m - r0), cl = std::min(g.cb, n - c0);
      if (col_bias) {
        Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>> bias(col_bias + c0, cl);
        C.block(r0, c0, rl, cl).rowwise() = bias;
      }
      if (accumulate || col_bias) C.block(r0, c0, rl, cl).noalias() += A.middleRows(r0, rl) * B.middleCols(c0, cl);
      else C.block(r0, c0, rl, cl).noalias() = A.middleRows(r0, rl) * B.middleCols(c0, cl);
    }
  };
  parallel_for(0, batch * per, 1, body);
}

// Row-major copies of the batch's matrices (rows x cols each) of an operand
// whose layout Eigen cannot map; offsets rewritten to match.
template <typename T>
const T* contiguous_copy(int64_t batch, const int64_t*& off, int64_t rows, int64_t cols, const T* p, int64_t& rs,
                         int64_t& cs, std::vector<T>& data, std::vector<int64_t>& offs) {
  data.resize(batch * rows * cols);
  offs.resize(batch);
  for (int64_t x = 0; x < batch; ++x) {
    offs[x] = x * rows * cols;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) data[offs[x] + i * cols + j] = p[off[x] + i * rs + j * cs];
  }
  off = offs.data();
  rs = cols;
  cs = 1;
  return data.data();
}

template <typename T>
void gemm_eigen(int64_t batch, const int64_t* a_off, const int64_t* b_off, int64_t m, int64_t n, int64_t k, const T* a,
                int64_t a_rs, int64_t a_cs, const T* b, int64_t b_rs, int64_t b_cs, T* c, int64_t c_stride, int64_t ldc,
                bool accumulate, const T* col_bias) {
  if (m == 0 || n == 0 || batch == 0) return;
  if (k == 0) {
    if (!accumulate)
      for (int64_t x = 0; x < batch; ++x)
        for (int64_t i = 0; i < m; ++i) {
          T* row = c + x * c_stride + i * ldc;
          if (col_bias) std::copy(col_bias, col_bias + n, row);
          else std::fill(row, row + n, T(0));
        }
    return;
  }
  std::vector<T> a_data, b_data;
  std::vector<int64_t> a_offs, b_offs;
  if (!gemm_layout_ok(m, k, a_rs, a_cs)) a = contiguous_copy(batch, a_off, m, k, a, a_rs, a_cs, a_data, a_offs);
  if (!gemm_layout_ok(k, n, b_rs, b_cs)) b = contiguous_copy(batch, b_off, k, n, b, b_rs, b_cs, b_data, b_offs);
  Layout la = layout_of(m, k, a_rs, a_cs), lb = layout_of(k, n, b_rs, b_cs);
  auto go = [&](auto oa, auto ob) {
    run<T, decltype(oa)::value, decltype(ob)::value>(batch, a_off, b_off, m, n, k, a, la.ld, b, lb.ld, c, c_stride, ldc,
                                                     accumulate, col_bias);
  };
  using RowT = std::integral_constant<int, Eigen::RowMajor>;
  using ColT = std::integral_constant<int, Eigen::ColMajor>;
  if (la.row_major && lb.row_major) go(RowT{}, RowT{});
  else if (la.row_major) go(RowT{}, ColT{});
  else if (lb.row_major) go(ColT{}, RowT{});
  else go(ColT{}, ColT{});
}

std::atomic<bool> g_use_avx512{true}, g_use_avx2{true};

}  // namespace

bool gemm_f32_uses_avx512() { return g_use_avx512.load(std::memory_order_relaxed) && gemm_avx512_available(); }
void set_gemm_f32_avx512(bool enabled) { g_use_avx512.store(enabled, std::memory_order_relaxed); }
bool gemm_f32_uses_avx2() {
  return !gemm_f32_uses_avx512() && g_use_avx2.load(std::memory_order_relaxed) && gemm_avx2_available();
}
void set_gemm_f32_avx2(bool enabled) { g_use_avx2.store(enabled, std::memory_order_relaxed); }

namespace {
// float32 without the AVX-512 kernel: the AVX2 one where it runs, else Eigen's
// product (also for k == 0, where C is only filled with the bias or zeros).
void gemm_f32_below_avx512(int64_t batch, const int64_t* a_off, const int64_t* b_off, int64_t m, int64_t n, int64_t k,
                           const float* a, int64_t a_rs, int64_t a_cs, const float* b, int64_t b_rs, int64_t b_cs,
                           float* c, int64_t c_stride, int64_t ldc, bool accumulate, const float* col_bias) {
  if (gemm_f32_uses_avx2() && k > 0)
    gemm_avx2_f32(batch, a_off, b_off, m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, c_stride, ldc, accumulate, col_bias);
  else gemm_eigen(batch, a_off, b_off, m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, c_stride, ldc, accumulate, col_bias);
}
}  // namespace

bool gemm_layout_ok(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  bool row = (cs == 1 || cols <= 1) && (rows <= 1 || rs >= cols);
  bool col = (rs == 1 || rows <= 1) && (cols <= 1 || cs >= rows);
  return row || col;
}

void gemm_batched(int64_t batch, const int64_t* a_off, const int64_t* b_off, int64_t m, int64_t n, int64_t k,
                  const float* a, int64_t a_rs, int64_t a_cs, const float* b, int64_t b_rs, int64_t b_cs, float* c,
                  int64_t c_stride, int64_t ldc, bool accumulate, const float* col_bias) {
  WEFT_CHECK(!(accumulate && col_bias), "gemm: a column bias cannot be combined with accumulate");
  if (gemm_f32_uses_avx512())
    gemm_avx512_f32(batch, a_off, b_off, m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, c_stride, ldc, accumulate, col_bias);
  else
    gemm_f32_below_avx512(batch, a_off, b_off, m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, c_stride, ldc, accumulate,
                          col_bias);
}
void gemm_row_sums(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
                   int64_t b_rs, int64_t b_cs, float* c, int64_t ldc, float* row_sums) {
  if (gemm_f32_uses_avx512() && n > 0 && k > 0) {  // the kernel sums A while packing it
    gemm_avx512_f32_row_sums(m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, ldc, row_sums);
    return;
  }
  const int64_t zero = 0;
  gemm_f32_below_avx512(1, &zero, &zero, m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, 0, ldc, false, nullptr);
  // each row summed over k in order; with rows adjacent in memory (A = g^T,
  // a_rs == 1) a chunk of rows goes through k together, so the loop reads A
  // sequentially and vectorises (the same sums, bit for bit)
  parallel_for(0, m, std::max<int64_t>(16, kGrainSize / std::max<int64_t>(k, 1)), [&](int64_t r0, int64_t r1) {
    if (a_rs == 1) {
      float* __restrict s = row_sums + r0;
      std::fill(s, s + (r1 - r0), 0.0f);
      for (int64_t p = 0; p < k; ++p) {
        const float* __restrict col = a + r0 + p * a_cs;
        for (int64_t i = 0; i < r1 - r0; ++i) s[i] += col[i];
      }
      return;
    }
    for (int64_t i = r0; i < r1; ++i) {
      float s = 0;
      for (int64_t p = 0; p < k; ++p) s += a[i * a_rs + p * a_cs];
      row_sums[i] = s;
    }
  });
}

void apply_epilogue(const GemmEpilogue& ep, float* cp, float r, int64_t i, int64_t j) {
  using Kind = GemmEpilogue::Kind;
  switch (ep.kind) {
    case Kind::kGeluForward:
      *cp = r;
      ep.act[i * ep.ld_act + j] = vmath::gelu_tanh(r);
      break;
    case Kind::kGeluBackward: *cp = r * vmath::gelu_tanh_grad(ep.pre[i * ep.ld_pre + j]); break;
    case Kind::kRoundBf16: ep.out16[i * ep.ld_out16 + j] = BFloat16(r).x; break;
    case Kind::kGeluForwardBf16: {
      const BFloat16 h(r);
      ep.out16[i * ep.ld_out16 + j] = h.x;
      ep.act16[i * ep.ld_act16 + j] = BFloat16(vmath::gelu_tanh(static_cast<float>(h))).x;
      break;
    }
    case Kind::kGeluBackwardBf16: {
      const float pre = BFloat16::from_bits(ep.pre16[i * ep.ld_pre16 + j]);
      ep.out16[i * ep.ld_out16 + j] = BFloat16(r * vmath::gelu_tanh_grad(pre)).x;
      break;
    }
  }
}

void gemm_gelu_tanh(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
                    int64_t b_rs, int64_t b_cs, float* c, int64_t ldc, const float* col_bias, const GemmEpilogue& ep) {
  WEFT_CHECK(ep.kind == GemmEpilogue::Kind::kGeluForward || ep.kind == GemmEpilogue::Kind::kGeluBackward,
             "gemm_gelu_tanh: takes a float32 GELU epilogue");
  if (gemm_f32_uses_avx512()) {
    gemm_avx512_f32_gelu_tanh(m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, ldc, col_bias, ep);
    return;
  }
  // the product, then the epilogue as a pass of the unary kernels' formulas
  const int64_t zero = 0;
  gemm_f32_below_avx512(1, &zero, &zero, m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, 0, ldc, false, col_bias);
  apply_epilogue_rows(ep, c, ldc, m, n);
}

namespace {

// Row i of each kind (core/cpu/gemm.h: Note [gemm epilogue]); plain loops over
// restrict pointers, so each vectorises.
void epilogue_row(const GemmEpilogue& ep, float* __restrict row, int64_t i, int64_t n) {
  using Kind = GemmEpilogue::Kind;
  switch (ep.kind) {
    case Kind::kGeluForward: {
      float* __restrict act = ep.act + i * ep.ld_act;
      for (int64_t j = 0; j < n; ++j) act[j] = vmath::gelu_tanh(row[j]);
      break;
    }
    case Kind::kGeluBackward: {
      const float* __restrict pre = ep.pre + i * ep.ld_pre;
      for (int64_t j = 0; j < n; ++j) row[j] = row[j] * vmath::gelu_tanh_grad(pre[j]);
      break;
    }
    case Kind::kRoundBf16: {
      uint16_t* __restrict out = ep.out16 + i * ep.ld_out16;
      for (int64_t j = 0; j < n; ++j) out[j] = BFloat16(row[j]).x;
      break;
    }
    case Kind::kGeluForwardBf16: {
      uint16_t* __restrict out = ep.out16 + i * ep.ld_out16;
      uint16_t* __restrict act = ep.act16 + i * ep.ld_act16;
      for (int64_t j = 0; j < n; ++j) {
        const BFloat16 h(row[j]);
        out[j] = h.x;
        act[j] = BFloat16(vmath::gelu_tanh(static_cast<float>(h))).x;
      }
      break;
    }
    case Kind::kGeluBackwardBf16: {
      uint16_t* __restrict out = ep.out16 + i * ep.ld_out16;
      const uint16_t* __restrict pre = ep.pre16 + i * ep.ld_pre16;
      for (int64_t j = 0; j < n; ++j)
        out[j] = BFloat16(row[j] * vmath::gelu_tanh_grad(static_cast<float>(BFloat16::from_bits(pre[j])))).x;
      break;
    }
  }
}

}  // namespace

void apply_epilogue_rows(const GemmEpilogue& ep, float* c, int64_t ldc, int64_t m, int64_t n) {
  parallel_for(0, m, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(n, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) epilogue_row(ep, c + i * ldc, i, n);
  });
}

void gemm_batched(int64_t batch, const int64_t* a_off, const int64_t* b_off, int64_t m, int64_t n, int64_t k,
                  const double* a, int64_t a_rs, int64_t a_cs, const double* b, int64_t b_rs, int64_t b_cs, double* c,
                  int64_t c_stride, int64_t ldc, bool accumulate, const double* col_bias) {
  WEFT_CHECK(!(accumulate && col_bias), "gemm: a column bias cannot be combined with accumulate");
  gemm_eigen(batch, a_off, b_off, m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, c_stride, ldc, accumulate, col_bias);
}

}  // namespace weft::cpu
