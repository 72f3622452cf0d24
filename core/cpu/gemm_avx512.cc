// AVX-512 float32 GEMM (contract in core/cpu/gemm_avx512.h).
//
// Goto/BLIS structure, seen from row-major C. Each thread owns whole tiles of C
// (rows [m0, m1) x columns [n0, n1) of one matrix of the batch) and runs:
//   for pc over K in blocks of kc (kc from K alone: Note [gemm determinism])
//     for ic over the rows in blocks of kMC:   pack A (mc x kc) into kMR-row panels
//       for jc over the columns in blocks of kNC: pack B (kc x nc) into kNR-column panels (L2)
//         for each A panel (kMR x kc, stays in L1)
//           for each B panel (kc x kNR, streamed from L2): micro-kernel -> kMR x kNR tile of C
// Micro-kernel: kMR = 12 rows x kNR = 32 columns of C held in 24 zmm accumulators;
// per k step: two aligned loads of the B panel, 12 broadcasts of the A panel, 24
// FMAs, and a software prefetch of the B panel's lines kBAhead steps ahead (the
// panel streams from L2; with it, 2-5% more GFLOP/s on a Xeon, 1 and 2
// threads). The first K block stores C (or adds to it when accumulating), later
// blocks add their partial sums. A column bias (gemm.h) is the epilogue fused
// into the prologue: the first K block's accumulators start from the bias
// vectors instead of zero, so it is summed first and costs no pass over C. The
// rows of a block are cut into panels of near-equal height <= kMR (one kernel
// instantiation per height); the last column tile uses one or two zmm per row
// with masked C columns, its B panel zero-padded to 16 or 32 columns. Transposes and strides are absorbed by
// packing: contiguous rows are copied with vector loads, contiguous columns go
// through 16x16 in-register transposes, any other stride is gathered element by
// element. With few rows of A, the next row-major B block is prefetched while the
// current one is computed (BPrefetch). Packing fetches ahead itself: a row-major
// B block is packed row by row across its panels (each row read front to back,
// the row four below fetched meanwhile), A's rows a chunk ahead of the
// transposes (sgemm 1024, 1 thread: packing 10% -> 9% of the time; the GPT
// shapes +3% summed over best-of-7 runs).
#include "core/cpu/gemm_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/cpu/avx512_util.h"
#include "core/cpu/gemm_epilogue_avx512.h"
#include "core/cpu/pack_buffers.h"
#include "core/cpu/thread_balance.h"
#include "core/error.h"
#include "core/parallel.h"

namespace weft::cpu {

bool gemm_avx512_available() {
  static const bool ok = __builtin_cpu_supports("avx512f") != 0;
  return ok;
}

// Everything below is compiled for AVX-512 whatever -march says; it only runs
// when gemm_avx512_available() (checked by the caller in gemm.cc).
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")
// GCC 12's shuffle/unpack intrinsics start from _mm512_undefined_ps(), which
// -Wmaybe-uninitialized reports at every inlined use.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace {

constexpr int kMR = 12;          // rows of C per micro-tile
constexpr int kNR = 32;          // columns of C per micro-tile (two zmm)
constexpr int64_t kKC = 384;     // max K block: an A panel (kMR x kKC floats = 18 KiB) stays in L1
constexpr int64_t kMC = 1536;    // rows of A packed at once (kMC x kKC floats = 2.25 MiB)
constexpr int64_t kNC = 256;     // columns of B packed at once (kKC x kNC floats = 384 KiB, in L2)
constexpr int64_t kBAhead = 16;  // k steps between fetching a B panel line and reading it (2 KiB)
static_assert(kMC % kMR == 0 && kNC % kNR == 0);
static_assert(kNR == kGemmPanelCols && kKC == kGemmMaxKBlock && kNC == 256, "GemmPackB's contract in gemm_avx512.h");

// Operand elements: float, or bfloat16 bits (uint16_t) widened to float32 while
// packing (exact: a bfloat16 is the top half of a float32); one at a time here,
// 16 at a time by load16 (core/cpu/avx512_util.h).
inline float to_float(float x) { return x; }
inline float to_float(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// C (R x 16V tile at c, leading dimension ldc) = or += A panel (kc steps of kMR
// floats, first R used) * B panel (kc steps of 16V floats). `last` masks the
// columns of the last zmm of each row. With `bias` (the tile's 16V columns of the
// column bias, never together with load_c) the accumulators start from it. With
// `ep` (only in the last K block) the finished values go through the epilogue.
template <int R, int V>
void micro_kernel(int64_t kc, const float* __restrict ap, const float* __restrict bp, float* __restrict c, int64_t ldc,
                  __mmask16 last, bool load_c, const float* __restrict bias, const GemmEpilogue* ep) {
  __m512 init[V];
#pragma GCC unroll 2
  for (int v = 0; v < V; ++v)
    init[v] = bias ? _mm512_maskz_loadu_ps(v == V - 1 ? last : __mmask16(0xFFFF), bias + 16 * v) : _mm512_setzero_ps();
  __m512 acc[R][V];
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) acc[i][v] = init[v];
  // the C tile (added to or stored after the k loop) or the epilogue's rows are
  // fetched while it runs: a C larger than L2 comes from L3 once per K block, and
  // its loads would otherwise stall the sums' stores (Zen 5, 1 thread: the GPT's
  // fc1 g.W and fc2 x.Wt, 3-4 K blocks, +5-8%)
  if (ep) prefetch_epilogue_rows(*ep, c, ldc, R, 16 * V, load_c);
  else prefetch_c_tile(c, ldc, R, 16 * V);
  for (int64_t p = 0; p < kc; ++p) {
    // the B panel streams in from L2: its lines are fetched kBAhead steps
    // before they are read (near the end, the next panel's first lines)
    _mm_prefetch(reinterpret_cast<const char*>(bp + kBAhead * 16 * V), _MM_HINT_T0);
    if constexpr (V == 2) _mm_prefetch(reinterpret_cast<const char*>(bp + kBAhead * 16 * V + 16), _MM_HINT_T0);
    __m512 bv[V];
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) bv[v] = _mm512_load_ps(bp + 16 * v);
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const __m512 av = _mm512_set1_ps(ap[i]);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
    }
    ap += kMR;
    bp += 16 * V;
  }
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) {
      float* cp = c + i * ldc + 16 * v;
      const __mmask16 mk = v == V - 1 ? last : __mmask16(0xFFFF);
      __m512 r = acc[i][v];
      if (load_c) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(mk, cp));
      store_c(cp, mk, r, ep, i, 16 * v);
    }
}

using KernelFn = void (*)(int64_t, const float*, const float*, float*, int64_t, __mmask16, bool, const float*,
                          const GemmEpilogue*);

template <int... R>
constexpr std::array<std::array<KernelFn, 2>, sizeof...(R)> kernel_table(std::integer_sequence<int, R...>) {
  return {{{&micro_kernel<R + 1, 1>, &micro_kernel<R + 1, 2>}...}};
}
// kKernels[r - 1][v - 1]: r rows, v zmm per row.
constexpr auto kKernels = kernel_table(std::make_integer_sequence<int, kMR>{});

// Packs the A block rows [0, mr) x k steps [0, kc) of A (element (i, p) at
// a[i * rs + p * cs]) as dst[p * kMR + i]; rows >= mr are left unset (never read).
template <typename S>
void pack_a_panel(const S* a, int64_t rs, int64_t cs, int64_t kc, int mr, float* dst) {
  const __mmask16 mm = lanes(mr);
  if (rs == 1 || mr == 1) {  // the mr values of one k step are contiguous (or single)
    if (mr == 1) {
      for (int64_t p = 0; p < kc; ++p) dst[p * kMR] = to_float(a[p * cs]);
    } else {
      for (int64_t p = 0; p < kc; ++p) _mm512_mask_storeu_ps(dst + p * kMR, mm, load16(mm, a + p * cs));
    }
  } else if (cs == 1) {  // rows contiguous along k: 16x16 transposes
    // The rows sit rs apart (often a power of two: one L1 set for all of them),
    // so their next lines are fetched a chunk ahead. Rows past mr repeat the
    // last one (valid memory, no branch); their lanes are never stored.
    const S* row[16];
    for (int i = 0; i < 16; ++i) row[i] = a + std::min(i, mr - 1) * rs;
    for (int64_t p = 0; p < kc; p += 16) {
      const int64_t pl = std::min<int64_t>(16, kc - p);
      const __mmask16 pm = lanes(pl);
      for (int i = 0; i < mr; ++i) _mm_prefetch(reinterpret_cast<const char*>(row[i] + p + 32), _MM_HINT_T0);
      __m512 r[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) r[i] = load16(pm, row[i] + p);
      transpose16(r);
      for (int64_t q = 0; q < pl; ++q) _mm512_mask_storeu_ps(dst + (p + q) * kMR, mm, r[q]);
    }
  } else {
    for (int64_t p = 0; p < kc; ++p)
      for (int i = 0; i < mr; ++i) dst[p * kMR + i] = to_float(a[i * rs + p * cs]);
  }
}

// Packs columns [0, nr) x k steps [0, kc) of B (element (p, j) at b[p * rs + j * cs])
// as dst[p * w + j] with w = 16 or 32 >= nr, columns nr..w-1 zero. dst is 64-byte aligned.
template <typename S>
void pack_b_panel(const S* b, int64_t rs, int64_t cs, int64_t kc, int nr, int w, float* dst) {
  if (cs == 1 || nr == 1) {  // one k step's columns are contiguous (or single)
    if (nr == 1) {
      for (int64_t p = 0; p < kc; ++p) {
        _mm512_store_ps(dst + p * w, _mm512_setzero_ps());
        if (w == 32) _mm512_store_ps(dst + p * w + 16, _mm512_setzero_ps());
        dst[p * w] = to_float(b[p * rs]);
      }
      return;
    }
    const __mmask16 m0 = lanes(nr), m1 = lanes(nr - 16);
    for (int64_t p = 0; p < kc; ++p) {
      const S* s = b + p * rs;
      _mm512_store_ps(dst + p * w, load16(m0, s));
      if (w == 32) _mm512_store_ps(dst + p * w + 16, load16(m1, s + 16));
    }
  } else if (rs == 1) {  // columns contiguous along k: 16x16 transposes
    for (int h = 0; h < w / 16; ++h) {
      const int cols = static_cast<int>(std::clamp<int64_t>(nr - 16 * h, 0, 16));
      const S* bh = b + 16 * h * cs;
      for (int64_t p = 0; p < kc; p += 16) {
        const int64_t pl = std::min<int64_t>(16, kc - p);
        const __mmask16 pm = lanes(pl);
        __m512 r[16];
#pragma GCC unroll 16
        for (int j = 0; j < 16; ++j) r[j] = j < cols ? load16(pm, bh + j * cs + p) : _mm512_setzero_ps();
        transpose16(r);
        for (int64_t q = 0; q < pl; ++q) _mm512_store_ps(dst + (p + q) * w + 16 * h, r[q]);
      }
    }
  } else {
    for (int64_t p = 0; p < kc; ++p)
      for (int j = 0; j < w; ++j) dst[p * w + j] = j < nr ? to_float(b[p * rs + j * cs]) : 0.0f;
  }
}

// Packs the B block k steps [0, kc) x columns [0, nc) (element (p, j) at
// b[p * rs + j * cs]) as the panels pack_b_panel writes, panel jr at dst + jr *
// kc. Row-major B (cs == 1) goes row by row across all panels, so each row of
// nc values is read front to back (rows sit rs apart, often a power of two;
// panel by panel, every row's lines would be fetched once per panel), and the
// row kRowsAhead below is fetched meanwhile.
template <typename S>
void pack_b_block(const S* b, int64_t rs, int64_t cs, int64_t kc, int64_t nc, float* dst) {
  if (cs != 1 || nc == 1) {
    for (int64_t jr = 0; jr < nc; jr += kNR) {
      const int nr = static_cast<int>(std::min<int64_t>(kNR, nc - jr));
      pack_b_panel(b + jr * cs, rs, cs, kc, nr, nr > 16 ? 32 : 16, dst + jr * kc);
    }
    return;
  }
  constexpr int64_t kRowsAhead = 4;
  constexpr int64_t kLine = 64 / sizeof(S);
  const int64_t full = nc / kNR * kNR;  // columns in whole 32-wide panels
  const int nr = static_cast<int>(nc - full);
  const __mmask16 m0 = lanes(nr), m1 = lanes(nr - 16);
  const int w = nr > 16 ? 32 : 16;
  for (int64_t p = 0; p < kc; ++p) {
    const S* src = b + p * rs;
    const S* ahead = src + kRowsAhead * rs;
    for (int64_t j = 0; j < nc; j += kLine) _mm_prefetch(reinterpret_cast<const char*>(ahead + j), _MM_HINT_T0);
    for (int64_t jr = 0; jr < full; jr += kNR) {
      float* d = dst + jr * kc + p * kNR;
      _mm512_store_ps(d, load16(__mmask16(0xFFFF), src + jr));
      _mm512_store_ps(d + 16, load16(__mmask16(0xFFFF), src + jr + 16));
    }
    if (nr > 0) {
      float* d = dst + full * kc + p * w;
      _mm512_store_ps(d, load16(m0, src + full));
      if (w == 32) _mm512_store_ps(d + 16, load16(m1, src + full + 16));
    }
  }
}

template <typename S>
struct Operand {
  const S* p;
  int64_t rs, cs;  // element (r, c) at p[r * rs + c * cs]
};

// K block size: K cut into ceil(K / kKC) near-equal blocks (a function of K alone).
// Blocks of up to 384 rather than 256: each further block reads and writes all
// of C once more, which costs more than the larger panels (A's 12 x 384 floats
// still share L1 with the B panel streamed from L2). On an AVX-512 Xeon (2
// threads) sgemm 1024 went from 204-224 to 230-233 GFLOP/s with it.
int64_t k_block(int64_t k) {
  const int64_t nb = (k + kKC - 1) / kKC;
  return (k + nb - 1) / nb;
}

// Software prefetch of the raw B block packed next (rows [p0, p0 + kc) x columns
// [j0, j0 + nc) of a row- or col-major B), spread over the micro-kernel calls of
// the current block so its memory traffic overlaps compute: with few rows of A,
// packing B is otherwise a memory-bound phase of its own. Measured on Zen 4 (DDP
// MLP, 64 x 2048 x 2048 products): one-thread training step ~35 -> ~38 steps/s;
// skipped when the block has few rows (little compute to hide it behind).
template <typename S>
class BPrefetch {
 public:
  static constexpr int64_t kLine = 64 / sizeof(S);  // elements per cache line
  BPrefetch() = default;
  BPrefetch(const Operand<S>& B, int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t calls) {
    const bool rows = B.cs == 1;  // rows of nc floats, else columns of kc floats
    row_ = B.p + p0 * B.rs + j0 * B.cs;
    stride_ = rows ? B.rs : B.cs;
    per_ = ((rows ? nc : kc) + kLine - 1) / kLine;
    outer_left_ = rows ? kc : nc;
    step_ = (outer_left_ * per_ + calls - 1) / calls;
  }
  // Prefetches the next share of lines into L2.
  void next() {
    for (int64_t s = 0; s < step_ && outer_left_ > 0; ++s) {
      _mm_prefetch(reinterpret_cast<const char*>(row_ + kLine * line_), _MM_HINT_T1);
      if (++line_ == per_) line_ = 0, row_ += stride_, --outer_left_;
    }
  }

 private:
  const S* row_ = nullptr;
  int64_t stride_ = 0, per_ = 1, line_ = 0, outer_left_ = 0, step_ = 0;
};

// Row sums of A (gemm_row_sums): the lanes mm of `sum` (a chunk of k steps of
// consecutive rows) written to, or added to, the rows' sums at s.
inline void add_row_sums(float* s, __mmask16 mm, __m512 sum, bool first) {
  if (!first) sum = _mm512_add_ps(_mm512_maskz_loadu_ps(mm, s), sum);
  _mm512_mask_storeu_ps(s, mm, sum);
}

// C (m x n at c, leading dimension ldc) = or += A (m x k) * B (k x n), one thread;
// = bias (n values, or nullptr) + A * B when not accumulating; then the
// epilogue (or nullptr) on the last K block.

// With packb, B's blocks are packed by it (B unused).
template <typename S>
void gemm_tile(int64_t m, int64_t n, int64_t k, Operand<S> A, Operand<S> B, float* c, int64_t ldc, bool accumulate,
               const float* bias, const GemmEpilogue* epilogue, float* row_sums, const GemmPackB* packb = nullptr) {
  static thread_local PackBuffers<float> buf(kMC * kKC, kKC * kNC);  // A's block, B's block
  float* apack = buf.a.get();
  float* bpack = buf.b.get();
  const int64_t kcb = k_block(k);
  GemmEpilogue et;  // the epilogue at each tile (GemmEpilogue::place)
  if (epilogue) et = *epilogue;
  for (int64_t pc = 0; pc < k; pc += kcb) {
    const int64_t kc = std::min(kcb, k - pc);
    const bool load_c = accumulate || pc > 0;
    const float* bias_k = pc == 0 ? bias : nullptr;                // Note [gemm determinism]: the bias is summed first
    const GemmEpilogue* ep_k = pc + kc == k ? epilogue : nullptr;  // once each sum is complete
    for (int64_t ic = 0; ic < m; ic += kMC) {
      const int64_t mc = std::min(kMC, m - ic);
      // the mc rows are split into ceil(mc / kMR) panels of near-equal height (64
      // rows: 10 or 11 each, rather than 5 x 12 + a 4-row panel with few accumulators)
      const int64_t panels = (mc + kMR - 1) / kMR;
      auto row0 = [&](int64_t i) { return i * mc / panels; };
      if (A.rs == 1 && A.cs != 1) {
        // A stored column by column (a transposed view, e.g. the g^T of a weight
        // gradient): neighbouring panels read neighbouring 48 bytes of the same
        // columns. Panel by panel over kKC columns, each panel would refetch
        // lines the previous one evicted; so the columns go in chunks of 32,
        // every panel taking its part of a chunk while its lines are in L1.
        // The lines a few panels to the right are fetched meanwhile (32 strided
        // streams: more than the hardware prefetcher follows).
        constexpr int64_t kChunk = 32;
        constexpr int64_t kAhead = 4 * 64 / sizeof(S);  // elements: four lines ahead
        for (int64_t p0 = 0; p0 < kc; p0 += kChunk) {
          const int64_t pl = std::min(kChunk, kc - p0);
          for (int64_t i = 0; i < panels; ++i) {
            const __mmask16 mm = lanes(row0(i + 1) - row0(i));
            const S* src = A.p + ic + row0(i) + (pc + p0) * A.cs;
            float* dst = apack + i * kMR * kc + p0 * kMR;
            __m512 sum = _mm512_setzero_ps();
            for (int64_t p = 0; p < pl; ++p) {
              _mm_prefetch(reinterpret_cast<const char*>(src + p * A.cs + kAhead), _MM_HINT_T0);
              const __m512 v = load16(mm, src + p * A.cs);
              _mm512_mask_storeu_ps(dst + p * kMR, mm, v);
              sum = _mm512_add_ps(sum, v);
            }
            if (row_sums) add_row_sums(row_sums + ic + row0(i), mm, sum, pc == 0 && p0 == 0);
          }
        }
      } else {
        for (int64_t i = 0; i < panels; ++i) {
          const int mr = static_cast<int>(row0(i + 1) - row0(i));
          float* dst = apack + i * kMR * kc;
          pack_a_panel(A.p + (ic + row0(i)) * A.rs + pc * A.cs, A.rs, A.cs, kc, mr, dst);
          if (row_sums) {  // summed from the panel just packed (in L1), k in order
            const __mmask16 mm = lanes(mr);
            __m512 sum = _mm512_setzero_ps();
            for (int64_t p = 0; p < kc; ++p) sum = _mm512_add_ps(sum, _mm512_maskz_loadu_ps(mm, dst + p * kMR));
            add_row_sums(row_sums + ic + row0(i), mm, sum, pc == 0);
          }
        }
      }
      for (int64_t jc = 0; jc < n; jc += kNC) {
        const int64_t nc = std::min(kNC, n - jc);
        if (packb) packb->pack(pc, kc, jc, nc, bpack);
        else pack_b_block(B.p + pc * B.rs + jc * B.cs, B.rs, B.cs, kc, nc, bpack);
        // the B block packed next: the next columns, else the first ones of the
        // next row block or K block
        int64_t np = pc, nj = jc + kNC;
        if (nj >= n) nj = 0, np = ic + kMC < m ? pc : pc + kcb;
        const int64_t calls = panels * ((nc + kNR - 1) / kNR);
        BPrefetch<S> pf;
        if (!packb && (B.cs == 1 || B.rs == 1) && mc >= 4 * kMR && np < k)
          pf = BPrefetch<S>(B, np, std::min(kcb, k - np), nj, std::min(kNC, n - nj), calls);
        for (int64_t i = 0; i < panels; ++i) {
          const int mr = static_cast<int>(row0(i + 1) - row0(i));
          const float* ap = apack + i * kMR * kc;
          float* crow = c + (ic + row0(i)) * ldc + jc;
          for (int64_t jr = 0; jr < nc; jr += kNR) {
            const int64_t nr = std::min<int64_t>(kNR, nc - jr);
            const int v = nr > 16 ? 2 : 1;
            pf.next();
            if (ep_k) et.place(*ep_k, ic + row0(i), jc + jr);
            kKernels[mr - 1][v - 1](kc, ap, bpack + jr * kc, crow + jr, ldc, lanes(nr - 16 * (v - 1)), load_c,
                                    bias_k ? bias_k + jc + jr : nullptr, ep_k ? &et : nullptr);
          }
        }
      }
    }
  }
}

// The batched driver of gemm_avx512_f32 and gemm_avx512_bf16_widened.
template <typename S>
void gemm_driver(int64_t batch, const int64_t* a_off, const int64_t* b_off, int64_t m, int64_t n, int64_t k, const S* a,
                 int64_t a_rs, int64_t a_cs, const S* b, int64_t b_rs, int64_t b_cs, float* c, int64_t c_stride,
                 int64_t ldc, bool accumulate, const float* col_bias, const GemmEpilogue* epilogue = nullptr,
                 float* row_sums = nullptr) {
  WEFT_CHECK(!(accumulate && col_bias), "gemm: a column bias cannot be combined with accumulate");
  const bool round16 = epilogue && epilogue->kind == GemmEpilogue::Kind::kRoundBf16;
  WEFT_CHECK(!epilogue || round16 || (batch == 1 && !accumulate),
             "gemm: the GELU epilogue needs one matrix, not accumulating");
  WEFT_CHECK(!round16 || !accumulate, "gemm: rounding to bfloat16 cannot be combined with accumulate");
  constexpr bool kBf16Operands = std::is_same_v<S, uint16_t>;
  WEFT_CHECK(!epilogue || epilogue->bf16_out() == kBf16Operands,
             "gemm: a bfloat16 epilogue needs bfloat16 operands, a float32 one float32 operands");
  // (gemm_row_sums sends an empty product, which packs no A, to its other path)
  WEFT_CHECK(!row_sums || (batch == 1 && n > 0 && k > 0), "gemm: A's row sums need one matrix with n, k > 0");
  if (m == 0 || n == 0 || batch == 0) return;
  if (k == 0 && round16) {  // every product is 0: the bias (or 0) rounded
    for (int64_t x = 0; x < batch; ++x)
      for (int64_t i = 0; i < m; ++i) {
        uint16_t* row = epilogue->out16 + x * c_stride + i * epilogue->ld_out16;
        for (int64_t j = 0; j < n; j += 16) {
          const __mmask16 mk = lanes(n - j);
          const __m512 v = col_bias ? _mm512_maskz_loadu_ps(mk, col_bias + j) : _mm512_setzero_ps();
          _mm256_mask_storeu_epi16(row + j, mk, round_bf16x16(v));
        }
      }
    return;
  }
  if (k == 0 && epilogue) {  // C = bias (or 0), then the epilogue on it
    gemm_driver<S>(batch, a_off, b_off, m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, c_stride, ldc, false, col_bias);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; j += 16) {
        float* cp = c + i * ldc + j;
        const __mmask16 mk = lanes(n - j);
        store_c(cp, mk, _mm512_maskz_loadu_ps(mk, cp), epilogue, i, j);
      }
    return;
  }
  if (k == 0) {
    if (!accumulate)
      for (int64_t x = 0; x < batch; ++x)
        for (int64_t i = 0; i < m; ++i) {
          float* row = c + x * c_stride + i * ldc;
          if (col_bias) std::copy(col_bias, col_bias + n, row);
          else std::fill(row, row + n, 0.0f);
        }
    return;
  }
  // A matrix-vector product C (m, 1) = A b with contiguous C is computed as the
  // row C^T (1, m) = b^T A^T: full 32-column tiles instead of 1 useful lane in 16.
  // The single bias value becomes a row of m equal values.
  if (n == 1 && m > 1 && ldc == 1 && !epilogue && !row_sums) {
    std::vector<float> row_bias(col_bias ? m : 0, col_bias ? col_bias[0] : 0.0f);
    gemm_driver<S>(batch, b_off, a_off, 1, m, k, b, b_cs, b_rs, a, a_cs, a_rs, c, c_stride, m, accumulate,
                   col_bias ? row_bias.data() : nullptr);
    return;
  }
  // Note [narrow gemm]: with fewer than 16 columns of C a row of C fills part of
  // one zmm and each broadcast of A feeds a single FMA, so the product is
  // computed transposed instead, C^T (n, m) = B^T A^T, into a scratch matrix
  // whose rows are full 32-column tiles, then copied back (bench/gemm_shapes,
  // 1 thread, Zen 4: conv1's weight gradient, 32 x 9 x 784, 28% -> 51% of the
  // FMA peak, the rest being packing and the call's fixed costs on a 4-us
  // product; the DDP MLP's 64 x 10 x 2048 head, 31% -> 44%). Every
  // element is the same FMA chain over the same K blocks, so C is bit for bit
  // what the direct path gives; with a bias, C^T starts from the bias and is
  // accumulated onto, so there the bias is added to the first K block's sum
  // instead of starting it (a rounding difference, still fixed by the shape).
  if (n > 1 && n < 16 && m >= 2 * n && m >= 16 && !epilogue && !row_sums) {
    // (batch, n, m); up to 1 MiB kept per thread, as the packing buffers are
    // (the narrow products of a conv's weight gradient come once per chunk of
    // images), a larger one allocated for the call and freed after it
    constexpr size_t kKept = (1 << 20) / sizeof(float);
    const size_t need = static_cast<size_t>(batch * n * m);
    thread_local std::vector<float> kept;
    std::vector<float> once;
    if (need <= kKept && kept.size() < need) kept.resize(need);
    if (need > kKept) once.resize(need);
    float* ct = need <= kKept ? kept.data() : once.data();
    if (accumulate || col_bias)
      for (int64_t x = 0; x < batch; ++x)
        for (int64_t j = 0; j < n; ++j)
          for (int64_t i = 0; i < m; ++i)
            ct[(x * n + j) * m + i] = accumulate ? c[x * c_stride + i * ldc + j] : col_bias[j];
    gemm_driver<S>(batch, b_off, a_off, n, m, k, b, b_cs, b_rs, a, a_cs, a_rs, ct, n * m, m, accumulate || col_bias,
                   nullptr);
    for (int64_t x = 0; x < batch; ++x)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) c[x * c_stride + i * ldc + j] = ct[(x * n + j) * m + i];
    return;
  }
  // Thread tiling: each matrix is cut into `parts` slabs of whole micro-tiles along
  // N (or M), so that batch * parts shares out evenly; a single matrix's slabs
  // are sized by the threads' measured speeds (Note [gemm balance]). Any tiling
  // gives the same bits (Note [gemm determinism]); this one only decides speed.
  const int nt = in_parallel_region() ? 1 : get_num_threads();
  const double work = static_cast<double>(m) * n * k * batch;
  int64_t parts = 1;
  if (nt > 1 && work >= double(1 << 18) && batch < 4 * nt) parts = nt / std::gcd<int64_t>(batch, nt);
  const int64_t mt = (m + kMR - 1) / kMR, ntl = (n + kNR - 1) / kNR;
  // Splitting N repacks A in every slab, splitting M repacks B: split the side
  // whose other operand is smaller, if it has enough tiles.
  bool split_n = (m <= n && ntl >= parts) || mt < parts;
  parts = std::min(parts, split_n ? ntl : mt);
  const int64_t tiles = split_n ? ntl : mt, unit = split_n ? kNR : kMR, extent = split_n ? n : m;
  // Columns [s0, s1) (split_n) or rows [s0, s1) of matrix x.
  auto slab = [&](int64_t x, int64_t s0, int64_t s1) {
    const S* pa = a + a_off[x];
    const S* pb = b + b_off[x];
    float* pc = c + x * c_stride;
    GemmEpilogue ep;
    if (epilogue) ep = split_n ? epilogue->at(0, s0) : epilogue->at(s0, 0);
    if (round16) ep.out16 += x * c_stride;  // matrix x of the batch, laid out as C
    const GemmEpilogue* pep = epilogue ? &ep : nullptr;
    // A's row sums: from the slab that starts at column 0 (every slab packs all
    // of A when N is split), else from each slab's own rows
    float* sums = row_sums ? (split_n ? (s0 == 0 ? row_sums : nullptr) : row_sums + s0) : nullptr;
    if (split_n)
      gemm_tile<S>(m, s1 - s0, k, {pa, a_rs, a_cs}, {pb + s0 * b_cs, b_rs, b_cs}, pc + s0, ldc, accumulate,
                   col_bias ? col_bias + s0 : nullptr, pep, sums);
    else
      gemm_tile<S>(s1 - s0, n, k, {pa + s0 * a_rs, a_rs, a_cs}, {pb, b_rs, b_cs}, pc + s0 * ldc, ldc, accumulate,
                   col_bias, pep, sums);
  };
  if (batch == 1) {
    over_balanced_slabs(extent, work, unit, [&](int64_t s0, int64_t s1) { slab(0, s0, s1); });
    return;
  }
  auto body = [&](int64_t w0, int64_t w1) {
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t x = w / parts, q = w % parts;
      const int64_t s0 = std::min(extent, tiles * q / parts * unit),
                    s1 = std::min(extent, tiles * (q + 1) / parts * unit);
      if (s0 < s1) slab(x, s0, s1);
    }
  };
  // small products run inline: a thread hand-off costs more than they do
  parallel_for(0, batch * parts, work >= double(1 << 18) ? 1 : batch * parts, body);
}

}  // namespace

void gemm_avx512_f32(int64_t batch, const int64_t* a_off, const int64_t* b_off, int64_t m, int64_t n, int64_t k,
                     const float* a, int64_t a_rs, int64_t a_cs, const float* b, int64_t b_rs, int64_t b_cs, float* c,
                     int64_t c_stride, int64_t ldc, bool accumulate, const float* col_bias) {
  gemm_driver<float>(batch, a_off, b_off, m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, c_stride, ldc, accumulate,
                     col_bias);
}

int64_t gemm_avx512_k_block(int64_t k) { return k_block(k); }

void gemm_avx512_f32_packed_b(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_cs,
                              const GemmPackB& b, float* c, int64_t ldc, bool accumulate) {
  WEFT_CHECK(n >= 16, "gemm_avx512_f32_packed_b: needs n >= 16 (got ", n, ")");
  if (m == 0) return;
  if (k == 0) {
    if (!accumulate)
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    return;
  }
  gemm_tile<float>(m, n, k, {a, a_rs, a_cs}, {nullptr, 0, 0}, c, ldc, accumulate, nullptr, nullptr, nullptr, &b);
}

void gemm_avx512_f32_gelu_tanh(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_cs,
                               const float* b, int64_t b_rs, int64_t b_cs, float* c, int64_t ldc, const float* col_bias,
                               const GemmEpilogue& epilogue) {
  const int64_t zero = 0;
  gemm_driver<float>(1, &zero, &zero, m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, 0, ldc, false, col_bias, &epilogue);
}

void gemm_avx512_f32_row_sums(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_cs,
                              const float* b, int64_t b_rs, int64_t b_cs, float* c, int64_t ldc, float* row_sums) {
  const int64_t zero = 0;
  gemm_driver<float>(1, &zero, &zero, m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, 0, ldc, false, nullptr, nullptr,
                     row_sums);
}

void gemm_avx512_bf16_widened_gelu(int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t a_rs, int64_t a_cs,
                                   const uint16_t* b, int64_t b_rs, int64_t b_cs, float* c, int64_t ldc,
                                   const float* col_bias, const GemmEpilogue& epilogue) {
  const int64_t zero = 0;
  gemm_driver<uint16_t>(1, &zero, &zero, m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, 0, ldc, false, col_bias, &epilogue);
}

void gemm_avx512_bf16_widened(int64_t batch, const int64_t* a_off, const int64_t* b_off, int64_t m, int64_t n,
                              int64_t k, const uint16_t* a, int64_t a_rs, int64_t a_cs, const uint16_t* b, int64_t b_rs,
                              int64_t b_cs, float* c, int64_t c_stride, int64_t ldc, uint16_t* c16,
                              const float* col_bias) {
  GemmEpilogue round;
  round.kind = GemmEpilogue::Kind::kRoundBf16;
  round.out16 = c16;
  round.ld_out16 = ldc;
  gemm_driver<uint16_t>(batch, a_off, b_off, m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, c_stride, ldc, false, col_bias,
                        c16 ? &round : nullptr);
}

#pragma GCC diagnostic pop
#pragma GCC pop_options

}  // namespace weft::cpu
