// Flash-style float32 and bfloat16 attention on the CPU (contract in core/cpu/flash_attention.h).
//
// Per matrix (one batch, one head), serially, after copying its strided rows of
// q, v (forward) or q, k, do (backward) contiguous (copy_rows):
//   forward:  k^T is packed once, as one contiguous (D x 64) panel per key block
//             (16 x 16 register transposes; v^T likewise in the backward). For each block
//             of 64 queries: for each visible key block, s = q k^T (a
//             register-tiled product), then the online softmax: the row maximum m
//             and sum l are updated, the running output is rescaled by
//             exp(m_old - m_new), and p v is added. o = acc / l, lse = m + log l.
//   backward: FlashAttention-2's loop with keys outside: for each key block, for
//             each query block that sees it, p is recomputed from lse, then
//             dv += p^T do, dp = do v^T, ds = scale * p * (dp - delta),
//             dq += ds k, dk += ds^T q (delta = rowsum(do * o), computed first).
// Every product is one routine, tile_gemm: C (m x n) = or += A (m x k) B (k x n)
// with A read by broadcasts (any strides, so p^T and ds^T need no copies) and B
// by rows of up to 64 floats (four zmm, the last masked), in register tiles of up
// to 6 rows x 64 columns. Blocks are 64 x 64 floats, so s, p and the running
// output of a block stay in L1/L2. bfloat16 operands are widened as they are
// copied or packed (copy_rows, pack_transposed_panels; o's rows in delta), so all
// of the above runs on float32 either way; the output is rounded as it is
// stored, the gradients once per matrix from the thread's float32 scratch (they
// are accumulated over blocks).
#include "core/cpu/flash_attention.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/cpu/avx512_util.h"
#include "core/cpu/thread_balance.h"
#include "core/parallel.h"

namespace weft::cpu {

namespace {
bool g_enabled = true;
}  // namespace

bool flash_attention_available() {
  static const bool ok = __builtin_cpu_supports("avx512f") != 0;
  return ok && g_enabled;
}

void set_flash_attention_enabled(bool enabled) { g_enabled = enabled; }

// Everything below is compiled for AVX-512 whatever -march says; it only runs
// when flash_attention_available().
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace {

constexpr int64_t kB = 64;  // queries and keys per block
constexpr int kTileRows = 6;
constexpr int kTileVecs = 4;  // 64 columns

inline __mmask16 lanes(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << std::max<int64_t>(n, 0)) - 1);
}

// C (R x 16V, last zmm of a row masked by `last`) = or += A (R x k) B (k x 16V).
template <int R, int V>
void tile(int64_t k, const float* a, int64_t ars, int64_t acs, const float* b, int64_t ldb, float* c, int64_t ldc,
          __mmask16 last, bool accumulate) {
  __m512 acc[R][V];
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      const __mmask16 mk = v == V - 1 ? last : __mmask16(0xFFFF);
      acc[i][v] = accumulate ? _mm512_maskz_loadu_ps(mk, c + i * ldc + 16 * v) : _mm512_setzero_ps();
    }
  for (int64_t p = 0; p < k; ++p) {
    __m512 bv[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) bv[v] = _mm512_maskz_loadu_ps(v == V - 1 ? last : __mmask16(0xFFFF), b + 16 * v);
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      const __m512 av = _mm512_set1_ps(a[i * ars]);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
    }
    a += acs;
    b += ldb;
  }
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      _mm512_mask_storeu_ps(c + i * ldc + 16 * v, v == V - 1 ? last : __mmask16(0xFFFF), acc[i][v]);
}

using TileFn = void (*)(int64_t, const float*, int64_t, int64_t, const float*, int64_t, float*, int64_t, __mmask16,
                        bool);

template <int... R>
constexpr std::array<std::array<TileFn, kTileVecs>, sizeof...(R)> tile_table(std::integer_sequence<int, R...>) {
  return {{{&tile<R + 1, 1>, &tile<R + 1, 2>, &tile<R + 1, 3>, &tile<R + 1, 4>}...}};
}
constexpr auto kTiles = tile_table(std::make_integer_sequence<int, kTileRows>{});

// C (m x n, row stride ldc) = or += A (m x k; element (i, p) at a[i * ars + p * acs])
// times B (k x n; row p at b + p * ldb, unit column stride).
void tile_gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t ars, int64_t acs, const float* b, int64_t ldb,
               float* c, int64_t ldc, bool accumulate) {
  for (int64_t j = 0; j < n; j += 16 * kTileVecs) {
    const int64_t nc = std::min<int64_t>(16 * kTileVecs, n - j);
    const int v = static_cast<int>((nc + 15) / 16);
    const __mmask16 last = lanes(nc - 16 * (v - 1));
    for (int64_t i = 0; i < m; i += kTileRows) {
      const int r = static_cast<int>(std::min<int64_t>(kTileRows, m - i));
      kTiles[r - 1][v - 1](k, a + i * ars, ars, acs, b + j, ldb, c + i * ldc + j, ldc, last, accumulate);
    }
  }
}

// The transpose of src (rows x cols, row stride rs) in panels of kB rows: the
// rows of block b = j / kB become a contiguous (cols x kB) panel at
// dst + b * cols * kB, so dst[b * cols * kB + d * kB + j % kB] = src[j * rs + d]
// (columns past the last row are left unset; the products mask them). Panels
// rather than one (cols x rows) matrix: the rows of a wide matrix lie a power of
// two apart and share a few L1 sets, so a panel streamed by every register tile
// of a block would come from L2 each time.
template <typename E>
void pack_transposed_panels(const E* src, int64_t rows, int64_t cols, int64_t rs, float* dst) {
  for (int64_t j0 = 0; j0 < rows; j0 += 16) {
    const int64_t jn = std::min<int64_t>(16, rows - j0);
    float* panel = dst + j0 / kB * cols * kB + j0 % kB;
    for (int64_t d0 = 0; d0 < cols; d0 += 16) {
      const int64_t dn = std::min<int64_t>(16, cols - d0);
      __m512 r[16];
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) r[j] = j < jn ? load16(lanes(dn), src + (j0 + j) * rs + d0) : _mm512_setzero_ps();
      transpose16(r);
      for (int64_t d = 0; d < dn; ++d) _mm512_mask_storeu_ps(panel + (d0 + d) * kB, lanes(jn), r[d]);
    }
  }
}

// Keys of block [c0, c0 + bc) visible to query row r: a prefix of the block.
inline int64_t visible(const FlashGeometry& g, int64_t r, int64_t c0, int64_t bc) {
  return g.causal ? std::clamp<int64_t>(r - c0 + 1, 0, bc) : bc;
}

// A float buffer that only grows, its contents uninitialised.
class Buffer {
 public:
  float* fit(int64_t n) {
    if (n > size_) data_.reset(new float[static_cast<size_t>(n)]), size_ = n;
    return data_.get();
  }
  float* data() const { return data_.get(); }

 private:
  std::unique_ptr<float[]> data_;
  int64_t size_ = 0;
};

// Per-thread buffers, sized for one matrix and kept by each thread between calls
// (never cleared: every element read is written first). dq, dk, dv hold the
// float32 gradients of bfloat16 inputs until they are rounded.
struct Scratch {
  Buffer q, k, v, d_o, kt, vt, p, ds, acc, delta, dq, dk, dv;
};
Scratch& scratch(const FlashGeometry& g, bool backward, bool bf16 = false) {
  static thread_local Scratch w;
  const int64_t panels = (g.S + kB - 1) / kB * kB;  // key rows rounded up to whole blocks
  w.q.fit(g.L * g.D);
  w.kt.fit(g.D * panels);
  w.p.fit(kB * kB);
  if (backward) {
    w.k.fit(g.S * g.D);
    w.d_o.fit(g.L * g.Dv);
    w.vt.fit(g.Dv * panels);
    w.ds.fit(kB * kB);
    w.delta.fit(g.L);
    if (bf16) {
      w.dq.fit(g.L * g.D);
      w.dk.fit(g.S * g.D);
      w.dv.fit(g.S * g.Dv);
    }
  } else {
    w.v.fit(g.S * g.Dv);
    w.acc.fit(kB * g.Dv);
  }
  return w;
}

// The rows of a strided (rows, cols) operand copied contiguous: rows thousands
// of bytes apart (q, k, v are views of one (B, T, 3C) tensor) map onto few L1
// sets and evict each other inside the products.
// bfloat16 elements are widened to float32 on the way.
const float* copy_rows(const float* src, int64_t rows, int64_t cols, int64_t rs, const Buffer& dst) {
  for (int64_t r = 0; r < rows; ++r) std::copy(src + r * rs, src + r * rs + cols, dst.data() + r * cols);
  return dst.data();
}
const float* copy_rows(const uint16_t* src, int64_t rows, int64_t cols, int64_t rs, const Buffer& dst) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; c += 16) {
      const __mmask16 mk = lanes(cols - c);
      _mm512_mask_storeu_ps(dst.data() + r * cols + c, mk, load16(mk, src + r * rs + c));
    }
  return dst.data();
}

// The contiguous float32 (rows, cols) src rounded to bfloat16 into dst (row stride rs).
void round_rows(const float* src, int64_t rows, int64_t cols, uint16_t* dst, int64_t rs) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; c += 16) {
      const __mmask16 mk = lanes(cols - c);
      store16(mk, dst + r * rs + c, _mm512_maskz_loadu_ps(mk, src + r * cols + c));
    }
}

inline float hmax(__m512 v) { return _mm512_reduce_max_ps(v); }
inline float hsum(__m512 v) { return _mm512_reduce_add_ps(v); }

// E: the element type of q, k, v and o (float, or bfloat16 bits).
template <typename E>
void forward_matrix(const FlashGeometry& g, const E* q_in, const E* k, const E* v_in, E* o, float* lse, Scratch& w) {
  const int64_t L = g.L, S = g.S, D = g.D, Dv = g.Dv;
  const float* q = copy_rows(q_in, L, D, g.q_rs, w.q);   // (L, D)
  const float* v = copy_rows(v_in, S, Dv, g.v_rs, w.v);  // (S, Dv)
  float* kt = w.kt.data();                               // (S / kB, D, kB): k^T by key block
  pack_transposed_panels(k, S, D, g.k_rs, kt);
  float* s = w.p.data();      // (kB, kB)
  float* acc = w.acc.data();  // (kB, Dv)
  const __m512 scale = _mm512_set1_ps(g.scale);
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  float m_row[kB], l_row[kB];
  for (int64_t r0 = 0; r0 < L; r0 += kB) {
    const int64_t br = std::min(kB, L - r0);
    const int64_t kend = g.causal ? std::min(S, r0 + br) : S;  // later keys are hidden from every row here
    std::fill(acc, acc + br * Dv, 0.0f);
    std::fill(m_row, m_row + br, -std::numeric_limits<float>::infinity());
    std::fill(l_row, l_row + br, 0.0f);
    for (int64_t c0 = 0; c0 < kend; c0 += kB) {
      const int64_t bc = std::min(kB, kend - c0);
      tile_gemm(br, bc, D, q + r0 * D, D, 1, kt + c0 * D, kB, s, kB, false);  // (br, bc)
      for (int64_t i = 0; i < br; ++i) {
        float* srow = s + i * kB;
        const int64_t n = visible(g, r0 + i, c0, bc);
        __m512 mx = ninf;
        for (int64_t j = 0; j < n; j += 16) {
          const __mmask16 mk = lanes(n - j);
          mx = _mm512_mask_max_ps(mx, mk, mx, _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, srow + j), scale));
        }
        const float m_new = std::max(m_row[i], n > 0 ? hmax(mx) : m_row[i]);
        __m512 sum = _mm512_setzero_ps();
        const __m512 mv = _mm512_set1_ps(m_new);
        for (int64_t j = 0; j < bc; j += 16) {
          const __mmask16 mk = lanes(n - j);  // hidden keys get p = 0
          const __m512 p =
              _mm512_maskz_mov_ps(mk, exp512(_mm512_fmsub_ps(_mm512_maskz_loadu_ps(mk, srow + j), scale, mv)));
          sum = _mm512_add_ps(sum, p);
          _mm512_mask_storeu_ps(srow + j, lanes(bc - j), p);
        }
        if (n == 0) continue;
        const float alpha = std::exp(m_row[i] - m_new);  // 0 on the first visible block
        l_row[i] = l_row[i] * alpha + hsum(sum);
        m_row[i] = m_new;
        if (alpha != 1.0f) {
          float* arow = acc + i * Dv;
          const __m512 av = _mm512_set1_ps(alpha);
          for (int64_t d = 0; d < Dv; d += 16) {
            const __mmask16 mk = lanes(Dv - d);
            _mm512_mask_storeu_ps(arow + d, mk, _mm512_mul_ps(av, _mm512_maskz_loadu_ps(mk, arow + d)));
          }
        }
      }
      tile_gemm(br, Dv, bc, s, kB, 1, v + c0 * Dv, Dv, acc, Dv, true);  // acc += p v
    }
    for (int64_t i = 0; i < br; ++i) {
      const float inv = l_row[i] > 0 ? 1.0f / l_row[i] : 0.0f;  // a row that sees no key: zeros
      const float* arow = acc + i * Dv;
      E* orow = o + (r0 + i) * g.o_rs;
      for (int64_t d = 0; d < Dv; d += 16) {
        const __mmask16 mk = lanes(Dv - d);
        store16(mk, orow + d, _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, arow + d), _mm512_set1_ps(inv)));
      }
      lse[r0 + i] = l_row[i] > 0 ? m_row[i] + std::log(l_row[i]) : -std::numeric_limits<float>::infinity();
    }
  }
}

// E: the element type of q, k, v, o and do; the gradients are float32.
template <typename E>
void backward_matrix(const FlashGeometry& g, const E* q_in, const E* k_in, const E* v, const E* o, const float* lse,
                     const E* do_in, int64_t do_in_rs, float* dq, float* dk, float* dv, Scratch& w) {
  const int64_t L = g.L, S = g.S, D = g.D, Dv = g.Dv;
  const float* q = copy_rows(q_in, L, D, g.q_rs, w.q);          // (L, D)
  const float* k = copy_rows(k_in, S, D, g.k_rs, w.k);          // (S, D)
  const float* d_o = copy_rows(do_in, L, Dv, do_in_rs, w.d_o);  // (L, Dv)
  const int64_t do_rs = Dv;
  float* kt = w.kt.data();  // (S / kB, D, kB): k^T by key block
  float* vt = w.vt.data();  // (S / kB, Dv, kB)
  float* delta = w.delta.data();
  pack_transposed_panels(k, S, D, D, kt);
  pack_transposed_panels(v, S, Dv, g.v_rs, vt);
  for (int64_t i = 0; i < L; ++i) {
    const float* a = d_o + i * do_rs;
    const E* b = o + i * g.o_rs;
    __m512 sum = _mm512_setzero_ps();
    for (int64_t d = 0; d < Dv; d += 16) {
      const __mmask16 mk = lanes(Dv - d);
      sum = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, a + d), load16(mk, b + d), sum);
    }
    delta[i] = hsum(sum);
  }
  // dq, dk, dv are not cleared first: the first product into each block stores
  // (the key block c0 = 0 reaches every query block; a key block's first query
  // block writes its dk, dv), and blocks no product reaches are zeroed here.
  if (S == 0)
    for (int64_t i = 0; i < L; ++i) std::fill(dq + i * g.dq_rs, dq + i * g.dq_rs + D, 0.0f);
  const __m512 scale = _mm512_set1_ps(g.scale);
  float* p = w.p.data();
  float* ds = w.ds.data();
  for (int64_t c0 = 0; c0 < S; c0 += kB) {
    const int64_t bc = std::min(kB, S - c0);
    bool first = true;  // no query block has reached these keys yet
    for (int64_t r0 = g.causal ? c0 / kB * kB : 0; r0 < L; r0 += kB) {
      const int64_t br = std::min(kB, L - r0);
      if (g.causal && r0 + br - 1 < c0) continue;                             // no row of this block sees these keys
      tile_gemm(br, bc, D, q + r0 * D, D, 1, kt + c0 * D, kB, p, kB, false);  // s (br, bc)
      for (int64_t i = 0; i < br; ++i) {
        float* row = p + i * kB;
        const int64_t n = visible(g, r0 + i, c0, bc);
        const __m512 lv = _mm512_set1_ps(lse[r0 + i]);
        for (int64_t j = 0; j < bc; j += 16) {
          const __mmask16 mk = lanes(n - j);
          const __m512 pv =
              _mm512_maskz_mov_ps(mk, exp512(_mm512_fmsub_ps(_mm512_maskz_loadu_ps(mk, row + j), scale, lv)));
          _mm512_mask_storeu_ps(row + j, lanes(bc - j), pv);
        }
      }
      const float* dob = d_o + r0 * do_rs;
      tile_gemm(bc, Dv, br, p, 1, kB, dob, do_rs, dv + c0 * g.dv_rs, g.dv_rs, !first);  // dv += p^T do
      tile_gemm(br, bc, Dv, dob, do_rs, 1, vt + c0 * Dv, kB, ds, kB, false);            // dp = do v^T
      for (int64_t i = 0; i < br; ++i) {
        const float* prow = p + i * kB;
        float* row = ds + i * kB;
        const __m512 dl = _mm512_set1_ps(delta[r0 + i]);
        for (int64_t j = 0; j < bc; j += 16) {
          const __mmask16 mk = lanes(bc - j);
          const __m512 t = _mm512_sub_ps(_mm512_maskz_loadu_ps(mk, row + j), dl);
          _mm512_mask_storeu_ps(row + j, mk,
                                _mm512_mul_ps(scale, _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, prow + j), t)));
        }
      }
      tile_gemm(br, D, bc, ds, kB, 1, k + c0 * D, D, dq + r0 * g.dq_rs, g.dq_rs, c0 > 0);  // dq += ds k
      tile_gemm(bc, D, br, ds, 1, kB, q + r0 * D, D, dk + c0 * g.dk_rs, g.dk_rs, !first);  // dk += ds^T q
      first = false;
    }
    if (first)  // keys no query sees (causal, L < S): zero gradients
      for (int64_t j = c0; j < c0 + bc; ++j) {
        std::fill(dk + j * g.dk_rs, dk + j * g.dk_rs + D, 0.0f);
        std::fill(dv + j * g.dv_rs, dv + j * g.dv_rs + Dv, 0.0f);
      }
  }
}

// Runs f(w, m) for every matrix m < n, w the running thread's scratch: the
// matrices go one at a time to whichever thread is free, not in equal shares,
// since threads need not run at one speed (Note [gemm balance] in
// core/cpu/thread_balance.h). A matrix's results do not depend on its thread.
template <typename F>
void over_matrices(int64_t n, const FlashGeometry& g, bool backward, bool bf16, const F& f) {
  if (!thread_balance_enabled()) {  // equal shares (benchmarks comparing the two)
    parallel_for(0, n, 1, [&](int64_t m0, int64_t m1) {
      Scratch& w = scratch(g, backward, bf16);
      for (int64_t m = m0; m < m1; ++m) f(w, m);
    });
    return;
  }
  std::atomic<int64_t> next{0};
  parallel_for(0, std::min<int64_t>(n, get_num_threads()), 1, [&](int64_t, int64_t) {
    Scratch& w = scratch(g, backward, bf16);
    for (int64_t m = next.fetch_add(1, std::memory_order_relaxed); m < n;
         m = next.fetch_add(1, std::memory_order_relaxed))
      f(w, m);
  });
}

template <typename E>
void forward_all(const FlashGeometry& g, const E* q, const E* k, const E* v, E* o, float* lse) {
  const int64_t BH = g.batch * g.heads;
  over_matrices(BH, g, false, false, [&](Scratch& w, int64_t m) {
    const int64_t b = m / g.heads, h = m % g.heads;
    forward_matrix(g, q + b * g.q_sb + h * g.q_sh, k + b * g.k_sb + h * g.k_sh, v + b * g.v_sb + h * g.v_sh,
                   o + b * g.o_sb + h * g.o_sh, lse + m * g.L, w);
  });
}

// float32 gradients are written in place; bfloat16 ones are computed into the
// thread's float32 scratch (contiguous) and rounded once per matrix.
template <typename E>
void backward_all(const FlashGeometry& g, const E* q, const E* k, const E* v, const E* o, const float* lse,
                  const E* d_o, int64_t do_sb, int64_t do_sh, int64_t do_rs, E* dq, E* dk, E* dv) {
  constexpr bool kBf16 = std::is_same_v<E, uint16_t>;
  const int64_t BH = g.batch * g.heads;
  over_matrices(BH, g, true, kBf16, [&](Scratch& w, int64_t m) {
    const int64_t b = m / g.heads, h = m % g.heads;
    E* dqm = dq + b * g.dq_sb + h * g.dq_sh;
    E* dkm = dk + b * g.dk_sb + h * g.dk_sh;
    E* dvm = dv + b * g.dv_sb + h * g.dv_sh;
    auto run = [&](const FlashGeometry& gm, float* gq, float* gk, float* gv) {
      backward_matrix(gm, q + b * g.q_sb + h * g.q_sh, k + b * g.k_sb + h * g.k_sh, v + b * g.v_sb + h * g.v_sh,
                      o + b * g.o_sb + h * g.o_sh, lse + m * g.L, d_o + b * do_sb + h * do_sh, do_rs, gq, gk, gv, w);
    };
    if constexpr (kBf16) {
      FlashGeometry gm = g;
      gm.dq_rs = g.D, gm.dk_rs = g.D, gm.dv_rs = g.Dv;
      run(gm, w.dq.data(), w.dk.data(), w.dv.data());
      round_rows(w.dq.data(), g.L, g.D, dqm, g.dq_rs);
      round_rows(w.dk.data(), g.S, g.D, dkm, g.dk_rs);
      round_rows(w.dv.data(), g.S, g.Dv, dvm, g.dv_rs);
    } else {
      run(g, dqm, dkm, dvm);
    }
  });
}

}  // namespace

void flash_attention_forward_f32(const FlashGeometry& g, const float* q, const float* k, const float* v, float* o,
                                 float* lse) {
  forward_all(g, q, k, v, o, lse);
}

void flash_attention_backward_f32(const FlashGeometry& g, const float* q, const float* k, const float* v,
                                  const float* o, const float* lse, const float* d_o, int64_t do_sb, int64_t do_sh,
                                  int64_t do_rs, float* dq, float* dk, float* dv) {
  backward_all(g, q, k, v, o, lse, d_o, do_sb, do_sh, do_rs, dq, dk, dv);
}

void flash_attention_forward_bf16(const FlashGeometry& g, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                  uint16_t* o, float* lse) {
  forward_all(g, q, k, v, o, lse);
}

void flash_attention_backward_bf16(const FlashGeometry& g, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                   const uint16_t* o, const float* lse, const uint16_t* d_o, int64_t do_sb,
                                   int64_t do_sh, int64_t do_rs, uint16_t* dq, uint16_t* dk, uint16_t* dv) {
  backward_all(g, q, k, v, o, lse, d_o, do_sb, do_sh, do_rs, dq, dk, dv);
}

#pragma GCC diagnostic pop
#pragma GCC pop_options

}  // namespace weft::cpu
