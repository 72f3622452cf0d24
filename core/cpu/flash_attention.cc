// Flash-style float32 and bfloat16 attention on the CPU (contract in core/cpu/flash_attention.h).
//
// Per matrix (one batch, one head), serially, after copying its strided rows of
// q, v (forward) or q, k, do (backward) contiguous (copy_rows):
//   forward:  k^T is packed once, as one contiguous (D x 64) panel per key block
//             (register transposes; v^T likewise in the backward). For each block
//             of 64 queries: for each visible key block, s = q k^T (a
//             register-tiled product), then the online softmax: the row maximum m
//             and sum l are updated, the running output is rescaled by
//             exp(m_old - m_new), and p v is added. o = acc / l, lse = m + log l.
//   backward: FlashAttention-2's loop with keys outside: for each key block, for
//             each query block that sees it, p is recomputed from lse, then
//             dv += p^T do, dp = do v^T, ds = scale * p * (dp - delta),
//             dq += ds k, dk += ds^T q (delta = rowsum(do * o), computed first).
// The products are register-tiled (core/cpu/flash_tiles.h), ForwardF32 and
// BackwardF32 with float32 FMAs, A read by broadcasts (any strides, so p^T and
// ds^T need no copies) and B by rows of up to 64 floats (AVX2: 16), in tiles
// of up to 6 rows x 64 columns (AVX2: 16). Blocks are 64 x 64 floats, so s, p and the running output
// of a block stay in L1/L2. bfloat16 operands are widened as they are copied
// or packed (copy_rows, pack_transposed_panels; o's rows in delta), so all of
// the above runs on float32 either way -- unless the products take bfloat16
// pairs (ForwardPairs, BackwardPairs: Note [flash pair products]). The output
// is rounded as it is stored, the gradients once per matrix from the thread's
// float32 scratch (they are accumulated over blocks).
// This file holds the loops, free of any instruction set: the products, the
// softmax rows and the packing come from flash_tiles.h's table for the path
// taken (AVX-512, or AVX2 + FMA for float32) and its AVX-512 bfloat16 pieces.
#include "core/cpu/flash_attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <type_traits>

#include "core/cpu/flash_tiles.h"
#include "core/cpu/gemm_bf16.h"
#include "core/cpu/thread_balance.h"
#include "core/error.h"
#include "core/parallel.h"

namespace weft::cpu {

namespace {
bool g_enabled = true;
std::atomic<int> g_path{-1};      // a forced FlashPath, or -1: the best this CPU has
std::atomic<int> g_products{-1};  // a forced FlashBf16Products, or -1: follow the bfloat16 GEMM path
}  // namespace

const char* flash_path_name(FlashPath p) { return p == FlashPath::kAvx512 ? "avx512" : "avx2"; }

bool flash_path_available(FlashPath p) {
  static const bool avx512 = __builtin_cpu_supports("avx512f") != 0;
  static const bool avx2 = __builtin_cpu_supports("avx2") != 0 && __builtin_cpu_supports("fma") != 0;
  return p == FlashPath::kAvx512 ? avx512 : avx2;
}

FlashPath flash_path() {
  const int forced = g_path.load(std::memory_order_relaxed);
  if (forced >= 0) return static_cast<FlashPath>(forced);
  return flash_path_available(FlashPath::kAvx512) ? FlashPath::kAvx512 : FlashPath::kAvx2;
}

void set_flash_path(std::optional<FlashPath> p) {
  WEFT_CHECK(!p || flash_path_available(*p), "flash attention: path '", flash_path_name(*p), "' needs a CPU with ",
             *p == FlashPath::kAvx512 ? "AVX-512F" : "AVX2 and FMA");
  g_path.store(p ? static_cast<int>(*p) : -1, std::memory_order_relaxed);
}

bool flash_attention_available() { return g_enabled && flash_path_available(flash_path()); }

void set_flash_attention_enabled(bool enabled) { g_enabled = enabled; }

const char* flash_bf16_products_name(FlashBf16Products p) {
  switch (p) {
    case FlashBf16Products::kFloat32: return "float32";
    case FlashBf16Products::kPairsEmulated: return "pairs_emulated";
    case FlashBf16Products::kPairs: return "pairs";
  }
  return "?";
}

bool flash_bf16_products_available(FlashBf16Products p) {
  switch (p) {
    case FlashBf16Products::kFloat32: return flash_path_available(FlashPath::kAvx2);  // every path
    case FlashBf16Products::kPairsEmulated: return flash_path_available(FlashPath::kAvx512);
    case FlashBf16Products::kPairs: return bf16_gemm_path_available(Bf16GemmPath::kAvx512Bf16);
  }
  return false;
}

FlashBf16Products flash_bf16_products() {
  const int forced = g_products.load(std::memory_order_relaxed);
  if (forced >= 0) return static_cast<FlashBf16Products>(forced);
  switch (bf16_gemm_path()) {
    case Bf16GemmPath::kAvx512Bf16: return FlashBf16Products::kPairs;
    case Bf16GemmPath::kAvx512Emulated: return FlashBf16Products::kPairsEmulated;
    default: return FlashBf16Products::kFloat32;
  }
}

void set_flash_bf16_products(std::optional<FlashBf16Products> p) {
  WEFT_CHECK(!p || flash_bf16_products_available(*p), "flash attention: bfloat16 products '",
             flash_bf16_products_name(*p), "' need a CPU with ",
             *p == FlashBf16Products::kPairs           ? "AVX512-BF16"
             : *p == FlashBf16Products::kPairsEmulated ? "AVX-512F"
                                                       : "AVX2 and FMA");
  g_products.store(p ? static_cast<int>(*p) : -1, std::memory_order_relaxed);
}

namespace {

using flash::kB;
using flash::Kernels;

const Kernels& kernels() {
  return flash_path() == FlashPath::kAvx512 ? flash::avx512_kernels() : flash::avx2_kernels();
}

// Query row r0 + i sees the first clamp(first + i, 0, bc) keys of the block
// [c0, c0 + bc) (flash_tiles.h): under `causal` those up to the diagonal.
inline int64_t first_visible(const FlashGeometry& g, int64_t r0, int64_t c0, int64_t bc) {
  return g.causal ? r0 - c0 + 1 : bc;
}

// A buffer that only grows, its contents uninitialised; float32 elements, or
// bfloat16 bits and 32-bit pair words in the same storage (read and written
// only through vector loads and stores, and memcpy).
class Buffer {
 public:
  float* fit(int64_t n) {
    if (n > size_) data_.reset(new float[static_cast<size_t>(n)]), size_ = n;
    return data_.get();
  }
  float* data() const { return data_.get(); }
  uint16_t* h() const { return reinterpret_cast<uint16_t*>(data_.get()); }
  uint32_t* words() const { return reinterpret_cast<uint32_t*>(data_.get()); }

 private:
  std::unique_ptr<float[]> data_;
  int64_t size_ = 0;
};

// Per-thread buffers, sized for one matrix and kept by each thread between calls
// (never cleared: every element read is written first). dq, dk, dv hold the
// float32 gradients of bfloat16 inputs until they are rounded. With pair
// products: q16, k16, v16, do16 are the operands' rows as bfloat16 (even row
// lengths), kt and vt their transposes as word panels, and v2, do2, k2, q2
// their rows paired (Note [flash pair products]); p16, p2, ds16, ds2 hold one
// block's p and ds rounded, as rows or with rows paired.
struct Scratch {
  Buffer q, k, v, d_o, kt, vt, p, ds, acc, delta, dq, dk, dv;
  Buffer q16, k16, v16, do16, v2, do2, k2, q2, p16, p2, ds16, ds2;
};
Scratch& scratch(const FlashGeometry& g, bool backward, bool bf16, bool pairs) {
  static thread_local Scratch w;
  const int64_t panels = (g.S + kB - 1) / kB * kB;  // key rows rounded up to whole blocks
  const int64_t D2 = (g.D + 1) / 2, Dv2 = (g.Dv + 1) / 2, L2 = (g.L + 1) / 2, S2 = (g.S + 1) / 2;
  w.kt.fit(g.D * panels);
  w.p.fit(kB * kB);
  if (pairs) {
    w.q16.fit(g.L * D2);
    w.k16.fit(g.S * D2);
  } else {
    w.q.fit(g.L * g.D);
  }
  if (backward) {
    w.vt.fit(g.Dv * panels);
    w.ds.fit(kB * kB);
    w.delta.fit(g.L);
    if (bf16) {
      w.dq.fit(g.L * g.D);
      w.dk.fit(g.S * g.D);
      w.dv.fit(g.S * g.Dv);
    }
    if (pairs) {
      w.v16.fit(g.S * Dv2);
      w.do16.fit(g.L * Dv2);
      w.do2.fit(L2 * g.Dv);
      w.k2.fit(S2 * g.D);
      w.q2.fit(L2 * g.D);
      w.p2.fit(kB * kB / 2);
      w.ds16.fit(kB * kB / 2);
      w.ds2.fit(kB * kB / 2);
    } else {
      w.k.fit(g.S * g.D);
      w.d_o.fit(g.L * g.Dv);
    }
  } else {
    w.acc.fit(kB * g.Dv);
    if (pairs) {
      w.v2.fit(S2 * g.Dv);
      w.p16.fit(kB * kB / 2);
    } else {
      w.v.fit(g.S * g.Dv);
    }
  }
  return w;
}

// The rows of a strided (rows, cols) operand copied contiguous: rows thousands
// of bytes apart (q, k, v are views of one (B, T, 3C) tensor) map onto few L1
// sets and evict each other inside the products.
// bfloat16 elements are widened to float32 on the way.
const float* copy_rows(const Kernels&, const float* src, int64_t rows, int64_t cols, int64_t rs, const Buffer& dst) {
  for (int64_t r = 0; r < rows; ++r) std::copy(src + r * rs, src + r * rs + cols, dst.data() + r * cols);
  return dst.data();
}
const float* copy_rows(const Kernels& K, const uint16_t* src, int64_t rows, int64_t cols, int64_t rs,
                       const Buffer& dst) {
  K.widen_rows(src, rows, cols, rs, dst.data());
  return dst.data();
}

// The table's entries by the element type of o (and of k, v where packed
// straight from the input).
float dot_row(const Kernels& K, const float* a, const float* b, int64_t n) { return K.dot_row(a, b, n); }
float dot_row(const Kernels& K, const float* a, const uint16_t* b, int64_t n) { return K.dot_row_bf16(a, b, n); }
void finish_block(const Kernels& K, int64_t br, int64_t Dv, const float* acc, const float* m, const float* l, float* o,
                  int64_t o_rs, float* lse) {
  K.finish_block(br, Dv, acc, m, l, o, o_rs, lse);
}
void finish_block(const Kernels& K, int64_t br, int64_t Dv, const float* acc, const float* m, const float* l,
                  uint16_t* o, int64_t o_rs, float* lse) {
  K.finish_block_bf16(br, Dv, acc, m, l, o, o_rs, lse);
}
void pack_panels(const Kernels& K, const float* src, int64_t rows, int64_t cols, int64_t rs, float* dst) {
  K.pack_transposed_panels(src, rows, cols, rs, dst);
}
void pack_panels(const Kernels& K, const uint16_t* src, int64_t rows, int64_t cols, int64_t rs, float* dst) {
  K.pack_transposed_panels_bf16(src, rows, cols, rs, dst);
}

// Note [flash pair products]: with bfloat16 inputs on a CPU whose bfloat16
// matmuls take VDPBF16PS (FlashBf16Products::kPairs, flash_attention.h), every
// block product runs on pairs of bfloat16 steps (flash::pair_tile_gemm) at
// twice the float32 FMA rate on a Zen 4. q k^T and do v^T pair their inputs
// along the head dimension (rows as words, the other operand's transpose
// packed word by word); p v, p^T do, ds k and ds^T q pair along keys or
// queries, so p and ds are rounded to bfloat16 (to nearest even) for them, as
// PyTorch's CPU flash attention rounds them for its bfloat16 GEMMs, and the
// other operand's rows are paired (v2, do2, k2, q2). The softmax statistics,
// p's row sums, ds itself and every accumulator stay float32. An odd count of
// keys, queries or head dimensions is padded with a zero step.

// The forward's two block products, float32 (bfloat16 inputs widened as they
// are copied and packed; bit for bit the float32 kernels on widened inputs).
class ForwardF32 {
 public:
  template <typename E>
  ForwardF32(const Kernels& K, const FlashGeometry& g, const E* q, const E* k, const E* v, Scratch& w)
      : K_(K),
        D_(g.D),
        Dv_(g.Dv),
        q_(copy_rows(K, q, g.L, g.D, g.q_rs, w.q)),
        v_(copy_rows(K, v, g.S, g.Dv, g.v_rs, w.v)) {
    pack_panels(K, k, g.S, g.D, g.k_rs, w.kt.data());  // (S / kB, D, kB): k^T by key block
    kt_ = w.kt.data();
  }
  // s (br x bc, row stride kB) = q k^T for queries [r0, r0 + br), keys [c0, c0 + bc)
  void scores(int64_t r0, int64_t br, int64_t c0, int64_t bc, float* s) const {
    K_.tile_gemm(br, bc, D_, q_ + r0 * D_, D_, 1, kt_ + c0 * D_, kB, s, kB, false);
  }
  // acc (br x Dv) += p v, p (br x bc, row stride kB)
  void add_pv(int64_t br, int64_t c0, int64_t bc, const float* p, float* acc) const {
    K_.tile_gemm(br, Dv_, bc, p, kB, 1, v_ + c0 * Dv_, Dv_, acc, Dv_, true);
  }

 private:
  const Kernels& K_;
  int64_t D_, Dv_;
  const float *q_, *v_, *kt_ = nullptr;
};

// The forward's products on bfloat16 pairs (Note [flash pair products]).
class ForwardPairs {
 public:
  ForwardPairs(const FlashGeometry& g, const uint16_t* q, const uint16_t* k, const uint16_t* v, Scratch& w, bool native)
      : native_(native), D2_((g.D + 1) / 2), Dv_(g.Dv), w_(w) {
    flash::copy_rows16(q, g.L, g.D, g.q_rs, w.q16.h(), 2 * D2_);              // (L, 2 D2)
    flash::copy_rows16(k, g.S, g.D, g.k_rs, w.k16.h(), 2 * D2_);              // (S, 2 D2)
    flash::pack_transposed_panels(w.k16.data(), g.S, D2_, D2_, w.kt.data());  // (S / kB, D2, kB) words
    flash::pair_rows(v, g.S, g.Dv, g.v_rs, w.v2.words(), g.Dv);               // (S / 2, Dv) words
  }
  void scores(int64_t r0, int64_t br, int64_t c0, int64_t bc, float* s) const {
    flash::pair_tile_gemm(native_, br, bc, D2_, w_.q16.words() + r0 * D2_, D2_, 1, w_.kt.words() + c0 * D2_, kB, s, kB,
                          false);
  }
  void add_pv(int64_t br, int64_t c0, int64_t bc, const float* p, float* acc) const {
    const int64_t bp = (bc + 1) / 2;
    flash::copy_rows16(p, br, bc, kB, w_.p16.h(), 2 * bp);  // p rounded, (br, 2 bp)
    flash::pair_tile_gemm(native_, br, Dv_, bp, w_.p16.words(), bp, 1, w_.v2.words() + c0 / 2 * Dv_, Dv_, acc, Dv_,
                          true);
  }

 private:
  bool native_;
  int64_t D2_, Dv_;
  const Scratch& w_;
};

// E: the element type of o (float, or bfloat16 bits).
template <typename E, typename Products>
void forward_matrix(const Kernels& K, const FlashGeometry& g, const Products& prod, E* o, float* lse, Scratch& w) {
  const int64_t L = g.L, S = g.S, Dv = g.Dv;
  float* s = w.p.data();      // (kB, kB)
  float* acc = w.acc.data();  // (kB, Dv)
  float m_row[kB], l_row[kB];
  for (int64_t r0 = 0; r0 < L; r0 += kB) {
    const int64_t br = std::min(kB, L - r0);
    const int64_t kend = g.causal ? std::min(S, r0 + br) : S;  // later keys are hidden from every row here
    std::fill(acc, acc + br * Dv, 0.0f);
    std::fill(m_row, m_row + br, -std::numeric_limits<float>::infinity());
    std::fill(l_row, l_row + br, 0.0f);
    for (int64_t c0 = 0; c0 < kend; c0 += kB) {
      const int64_t bc = std::min(kB, kend - c0);
      prod.scores(r0, br, c0, bc, s);                                                            // (br, bc)
      K.softmax_block(br, bc, first_visible(g, r0, c0, bc), g.scale, s, m_row, l_row, acc, Dv);  // s becomes p
      prod.add_pv(br, c0, bc, s, acc);                                                           // acc += p v
    }
    finish_block(K, br, Dv, acc, m_row, l_row, o + r0 * g.o_rs, g.o_rs, lse + r0);
  }
}

// The backward's five block products, float32 (bfloat16 inputs widened). Each
// takes queries [r0, r0 + br) and keys [c0, c0 + bc); p, ds and dp are (br x
// bc) blocks with row stride kB; the gradients' blocks are stored, or added
// to when `acc`.
class BackwardF32 {
 public:
  template <typename E>
  BackwardF32(const Kernels& K, const FlashGeometry& g, const E* q, const E* k, const E* v, const E* d_o, int64_t do_rs,
              Scratch& w)
      : K_(K),
        D_(g.D),
        Dv_(g.Dv),
        q_(copy_rows(K, q, g.L, g.D, g.q_rs, w.q)),        // (L, D)
        k_(copy_rows(K, k, g.S, g.D, g.k_rs, w.k)),        // (S, D)
        d_o_(copy_rows(K, d_o, g.L, g.Dv, do_rs, w.d_o)),  // (L, Dv)
        kt_(w.kt.data()),                                  // (S / kB, D, kB): k^T by key block
        vt_(w.vt.data()) {                                 // (S / kB, Dv, kB)
    K.pack_transposed_panels(k_, g.S, g.D, g.D, w.kt.data());
    pack_panels(K, v, g.S, g.Dv, g.v_rs, w.vt.data());
  }
  // rowsum(do * o) of query i, o's row at orow
  template <typename E>
  float delta(int64_t i, const E* orow) const {
    return dot_row(K_, d_o_ + i * Dv_, orow, Dv_);
  }
  void scores(int64_t r0, int64_t br, int64_t c0, int64_t bc, float* s) const {
    K_.tile_gemm(br, bc, D_, q_ + r0 * D_, D_, 1, kt_ + c0 * D_, kB, s, kB, false);
  }
  void add_dv(int64_t r0, int64_t br, int64_t c0, int64_t bc, const float* p, float* dv, int64_t ld, bool acc) const {
    K_.tile_gemm(bc, Dv_, br, p, 1, kB, d_o_ + r0 * Dv_, Dv_, dv + c0 * ld, ld, acc);  // dv += p^T do
  }
  void dp(int64_t r0, int64_t br, int64_t c0, int64_t bc, float* out) const {
    K_.tile_gemm(br, bc, Dv_, d_o_ + r0 * Dv_, Dv_, 1, vt_ + c0 * Dv_, kB, out, kB, false);  // do v^T
  }
  void add_dq(int64_t r0, int64_t br, int64_t c0, int64_t bc, const float* ds, float* dq, int64_t ld, bool acc) const {
    K_.tile_gemm(br, D_, bc, ds, kB, 1, k_ + c0 * D_, D_, dq + r0 * ld, ld, acc);  // dq += ds k
  }
  void add_dk(int64_t r0, int64_t br, int64_t c0, int64_t bc, const float* ds, float* dk, int64_t ld, bool acc) const {
    K_.tile_gemm(bc, D_, br, ds, 1, kB, q_ + r0 * D_, D_, dk + c0 * ld, ld, acc);  // dk += ds^T q
  }

 private:
  const Kernels& K_;
  int64_t D_, Dv_;
  const float *q_, *k_, *d_o_, *kt_, *vt_;
};

// The backward's products on bfloat16 pairs (Note [flash pair products]).
class BackwardPairs {
 public:
  BackwardPairs(const FlashGeometry& g, const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* d_o,
                int64_t do_rs, Scratch& w, bool native)
      : native_(native), D_(g.D), Dv_(g.Dv), D2_((g.D + 1) / 2), Dv2_((g.Dv + 1) / 2), w_(w) {
    flash::copy_rows16(q, g.L, g.D, g.q_rs, w.q16.h(), 2 * D2_);                // (L, 2 D2)
    flash::copy_rows16(k, g.S, g.D, g.k_rs, w.k16.h(), 2 * D2_);                // (S, 2 D2)
    flash::copy_rows16(v, g.S, g.Dv, g.v_rs, w.v16.h(), 2 * Dv2_);              // (S, 2 Dv2)
    flash::copy_rows16(d_o, g.L, g.Dv, do_rs, w.do16.h(), 2 * Dv2_);            // (L, 2 Dv2)
    flash::pack_transposed_panels(w.k16.data(), g.S, D2_, D2_, w.kt.data());    // (S / kB, D2, kB) words
    flash::pack_transposed_panels(w.v16.data(), g.S, Dv2_, Dv2_, w.vt.data());  // (S / kB, Dv2, kB) words
    flash::pair_rows(w.do16.h(), g.L, g.Dv, 2 * Dv2_, w.do2.words(), g.Dv);     // (L / 2, Dv) words
    flash::pair_rows(w.k16.h(), g.S, g.D, 2 * D2_, w.k2.words(), g.D);          // (S / 2, D) words
    flash::pair_rows(w.q16.h(), g.L, g.D, 2 * D2_, w.q2.words(), g.D);          // (L / 2, D) words
  }
  float delta(int64_t i, const uint16_t* orow) const { return flash::dot_row(w_.do16.h() + i * 2 * Dv2_, orow, Dv_); }
  void scores(int64_t r0, int64_t br, int64_t c0, int64_t bc, float* s) const {
    flash::pair_tile_gemm(native_, br, bc, D2_, w_.q16.words() + r0 * D2_, D2_, 1, w_.kt.words() + c0 * D2_, kB, s, kB,
                          false);
  }
  void add_dv(int64_t r0, int64_t br, int64_t c0, int64_t bc, const float* p, float* dv, int64_t ld, bool acc) const {
    flash::pair_rows(p, br, bc, kB, w_.p2.words(), kB);  // p rounded, query rows paired: (br / 2, bc)
    flash::pair_tile_gemm(native_, bc, Dv_, (br + 1) / 2, w_.p2.words(), 1, kB, w_.do2.words() + r0 / 2 * Dv_, Dv_,
                          dv + c0 * ld, ld, acc);
  }
  void dp(int64_t r0, int64_t br, int64_t c0, int64_t bc, float* out) const {
    flash::pair_tile_gemm(native_, br, bc, Dv2_, w_.do16.words() + r0 * Dv2_, Dv2_, 1, w_.vt.words() + c0 * Dv2_, kB,
                          out, kB, false);
  }
  void add_dq(int64_t r0, int64_t br, int64_t c0, int64_t bc, const float* ds, float* dq, int64_t ld, bool acc) const {
    const int64_t bp = (bc + 1) / 2;
    flash::copy_rows16(ds, br, bc, kB, w_.ds16.h(), 2 * bp);  // ds rounded, (br, 2 bp)
    flash::pair_tile_gemm(native_, br, D_, bp, w_.ds16.words(), bp, 1, w_.k2.words() + c0 / 2 * D_, D_, dq + r0 * ld,
                          ld, acc);
  }
  void add_dk(int64_t r0, int64_t br, int64_t c0, int64_t bc, const float* ds, float* dk, int64_t ld, bool acc) const {
    flash::pair_rows(ds, br, bc, kB, w_.ds2.words(), kB);  // ds rounded, query rows paired: (br / 2, bc)
    flash::pair_tile_gemm(native_, bc, D_, (br + 1) / 2, w_.ds2.words(), 1, kB, w_.q2.words() + r0 / 2 * D_, D_,
                          dk + c0 * ld, ld, acc);
  }

 private:
  bool native_;
  int64_t D_, Dv_, D2_, Dv2_;
  const Scratch& w_;
};

// E: the element type of o; the gradients are float32.
template <typename E, typename Products>
void backward_matrix(const Kernels& K, const FlashGeometry& g, const Products& prod, const E* o, const float* lse,
                     float* dq, float* dk, float* dv, Scratch& w) {
  const int64_t L = g.L, S = g.S, D = g.D, Dv = g.Dv;
  float* delta = w.delta.data();
  for (int64_t i = 0; i < L; ++i) delta[i] = prod.delta(i, o + i * g.o_rs);
  // dq, dk, dv are not cleared first: the first product into each block stores
  // (the key block c0 = 0 reaches every query block; a key block's first query
  // block writes its dk, dv), and blocks no product reaches are zeroed here.
  if (S == 0)
    for (int64_t i = 0; i < L; ++i) std::fill(dq + i * g.dq_rs, dq + i * g.dq_rs + D, 0.0f);
  float* p = w.p.data();
  float* ds = w.ds.data();
  for (int64_t c0 = 0; c0 < S; c0 += kB) {
    const int64_t bc = std::min(kB, S - c0);
    bool first = true;  // no query block has reached these keys yet
    for (int64_t r0 = g.causal ? c0 / kB * kB : 0; r0 < L; r0 += kB) {
      const int64_t br = std::min(kB, L - r0);
      if (g.causal && r0 + br - 1 < c0) continue;  // no row of this block sees these keys
      prod.scores(r0, br, c0, bc, p);              // s (br, bc)
      K.probs_block(br, bc, first_visible(g, r0, c0, bc), g.scale, lse + r0, p);  // p
      prod.add_dv(r0, br, c0, bc, p, dv, g.dv_rs, !first);                        // dv += p^T do
      prod.dp(r0, br, c0, bc, ds);                                                // dp = do v^T
      K.ds_block(br, bc, g.scale, p, delta + r0, ds);                             // ds
      prod.add_dq(r0, br, c0, bc, ds, dq, g.dq_rs, c0 > 0);                       // dq += ds k
      prod.add_dk(r0, br, c0, bc, ds, dk, g.dk_rs, !first);                       // dk += ds^T q
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
void over_matrices(int64_t n, const FlashGeometry& g, bool backward, bool bf16, bool pairs, const F& f) {
  if (!thread_balance_enabled()) {  // equal shares (benchmarks comparing the two)
    parallel_for(0, n, 1, [&](int64_t m0, int64_t m1) {
      Scratch& w = scratch(g, backward, bf16, pairs);
      for (int64_t m = m0; m < m1; ++m) f(w, m);
    });
    return;
  }
  std::atomic<int64_t> next{0};
  parallel_for(0, std::min<int64_t>(n, get_num_threads()), 1, [&](int64_t, int64_t) {
    Scratch& w = scratch(g, backward, bf16, pairs);
    for (int64_t m = next.fetch_add(1, std::memory_order_relaxed); m < n;
         m = next.fetch_add(1, std::memory_order_relaxed))
      f(w, m);
  });
}

// The products bfloat16 inputs take now: pairs (native or emulated) or float32.
struct PairChoice {
  bool pairs, native;
};
PairChoice pair_choice() {
  const FlashBf16Products p = flash_bf16_products();
  return {p != FlashBf16Products::kFloat32, p == FlashBf16Products::kPairs};
}

template <typename E>
void forward_all(const Kernels& K, const FlashGeometry& g, const E* q, const E* k, const E* v, E* o, float* lse) {
  constexpr bool kBf16 = std::is_same_v<E, uint16_t>;
  const PairChoice pc = kBf16 ? pair_choice() : PairChoice{false, false};
  const int64_t BH = g.batch * g.heads;
  over_matrices(BH, g, false, kBf16, pc.pairs, [&](Scratch& w, int64_t m) {
    const int64_t b = m / g.heads, h = m % g.heads;
    const E *qm = q + b * g.q_sb + h * g.q_sh, *km = k + b * g.k_sb + h * g.k_sh, *vm = v + b * g.v_sb + h * g.v_sh;
    E* om = o + b * g.o_sb + h * g.o_sh;
    if constexpr (kBf16) {
      if (pc.pairs) {
        forward_matrix(K, g, ForwardPairs(g, qm, km, vm, w, pc.native), om, lse + m * g.L, w);
        return;
      }
    }
    forward_matrix(K, g, ForwardF32(K, g, qm, km, vm, w), om, lse + m * g.L, w);
  });
}

// float32 gradients are written in place; bfloat16 ones are computed into the
// thread's float32 scratch (contiguous) and rounded once per matrix.
template <typename E>
void backward_all(const Kernels& K, const FlashGeometry& g, const E* q, const E* k, const E* v, const E* o,
                  const float* lse, const E* d_o, int64_t do_sb, int64_t do_sh, int64_t do_rs, E* dq, E* dk, E* dv) {
  constexpr bool kBf16 = std::is_same_v<E, uint16_t>;
  const PairChoice pc = kBf16 ? pair_choice() : PairChoice{false, false};
  const int64_t BH = g.batch * g.heads;
  over_matrices(BH, g, true, kBf16, pc.pairs, [&](Scratch& w, int64_t m) {
    const int64_t b = m / g.heads, h = m % g.heads;
    const E *qm = q + b * g.q_sb + h * g.q_sh, *km = k + b * g.k_sb + h * g.k_sh, *vm = v + b * g.v_sb + h * g.v_sh;
    const E *om = o + b * g.o_sb + h * g.o_sh, *dom = d_o + b * do_sb + h * do_sh;
    E* dqm = dq + b * g.dq_sb + h * g.dq_sh;
    E* dkm = dk + b * g.dk_sb + h * g.dk_sh;
    E* dvm = dv + b * g.dv_sb + h * g.dv_sh;
    if constexpr (kBf16) {
      FlashGeometry gm = g;
      gm.dq_rs = g.D, gm.dk_rs = g.D, gm.dv_rs = g.Dv;
      if (pc.pairs)
        backward_matrix(K, gm, BackwardPairs(g, qm, km, vm, dom, do_rs, w, pc.native), om, lse + m * g.L, w.dq.data(),
                        w.dk.data(), w.dv.data(), w);
      else
        backward_matrix(K, gm, BackwardF32(K, g, qm, km, vm, dom, do_rs, w), om, lse + m * g.L, w.dq.data(),
                        w.dk.data(), w.dv.data(), w);
      K.round_rows(w.dq.data(), g.L, g.D, dqm, g.dq_rs);
      K.round_rows(w.dk.data(), g.S, g.D, dkm, g.dk_rs);
      K.round_rows(w.dv.data(), g.S, g.Dv, dvm, g.dv_rs);
    } else {
      backward_matrix(K, g, BackwardF32(K, g, qm, km, vm, dom, do_rs, w), om, lse + m * g.L, dqm, dkm, dvm, w);
    }
  });
}

}  // namespace

void flash_attention_forward_f32(const FlashGeometry& g, const float* q, const float* k, const float* v, float* o,
                                 float* lse) {
  forward_all(kernels(), g, q, k, v, o, lse);
}

void flash_attention_backward_f32(const FlashGeometry& g, const float* q, const float* k, const float* v,
                                  const float* o, const float* lse, const float* d_o, int64_t do_sb, int64_t do_sh,
                                  int64_t do_rs, float* dq, float* dk, float* dv) {
  backward_all(kernels(), g, q, k, v, o, lse, d_o, do_sb, do_sh, do_rs, dq, dk, dv);
}

void flash_attention_forward_bf16(const FlashGeometry& g, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                  uint16_t* o, float* lse) {
  forward_all(kernels(), g, q, k, v, o, lse);
}

void flash_attention_backward_bf16(const FlashGeometry& g, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                   const uint16_t* o, const float* lse, const uint16_t* d_o, int64_t do_sb,
                                   int64_t do_sh, int64_t do_rs, uint16_t* dq, uint16_t* dk, uint16_t* dv) {
  backward_all(kernels(), g, q, k, v, o, lse, d_o, do_sb, do_sh, do_rs, dq, dk, dv);
}

}  // namespace weft::cpu
