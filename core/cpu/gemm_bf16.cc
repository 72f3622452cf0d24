// bfloat16 GEMM (contract in core/cpu/gemm_bf16.h).
//
// The pair kernels (kAvx512Bf16, kAvx512Emulated) follow the float32 kernel's
// Goto/BLIS structure (core/cpu/gemm_avx512.cc) over pairs of k steps: a packed
// 32-bit word holds steps 2p and 2p + 1 of one row of A or one column of B,
// the even step in the low 16 bits (VDPBF16PS's layout). Each thread owns a
// slab of whole 32-column tiles of C, or of 12-row panels where C has more rows
// than columns (each thread packs all of the operand it does not split, so the
// smaller one is repacked):
//   for pc over K in blocks of up to kKP pairs (from K alone)
//     for ic over the rows in blocks of kMC: pack A in panels of kMR rows
//       for jc over the slab in blocks of kNC: pack B in panels of kNR columns
//         for each A panel, each B panel: micro-kernel -> kMR x kNR tile of C
// Micro-kernel: 12 rows x 32 columns in 24 zmm accumulators; per pair of k
// steps two loads of the B panel, 12 broadcasts of an A pair, 24 pair products.
// An odd K gets a zero step; rows and columns past the matrix are zero in the
// packing and masked at the store. Packing (pack_pairs_avx512) moves whole
// 16 x 16 blocks of 32-bit pair words through zmm registers where a row-major
// or column-major operand makes steps or lines contiguous (the GPT's every
// operand), and reads element by element at other strides (pack_pairs). The
// AMX kernel (kAmxBf16, kAmxEmulated) has the same loops with 32 x 32 blocks of
// C in four tiles; its section below says how it packs.
#include "core/cpu/gemm_bf16.h"

#include <cpuid.h>
#include <immintrin.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <sys/syscall.h>

#include "core/cpu/avx512_util.h"
#include "core/cpu/gemm.h"
#include "core/cpu/gemm_avx512.h"
#include "core/cpu/gemm_epilogue_avx512.h"
#include "core/cpu/pack_buffers.h"
#include "core/cpu/pair_dot.h"
#include "core/cpu/thread_balance.h"
#include "core/error.h"
#include "core/half.h"
#include "core/parallel.h"

namespace weft::cpu {

const char* bf16_gemm_path_name(Bf16GemmPath path) {
  switch (path) {
    case Bf16GemmPath::kFloat32: return "float32";
    case Bf16GemmPath::kAvx512Emulated: return "avx512_emulated";
    case Bf16GemmPath::kAvx512Bf16: return "avx512_bf16";
    case Bf16GemmPath::kAmxEmulated: return "amx_emulated";
    case Bf16GemmPath::kAmxBf16: return "amx_bf16";
  }
  return "?";
}

namespace {

// AMX-TILE and AMX-BF16 (CPUID leaf 7, EDX bits 24 and 22), and the Linux
// kernel's permission for this process to use the tile data state: without
// it the first tile instruction faults.
bool amx_usable() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  if ((edx & (1u << 24)) == 0 || (edx & (1u << 22)) == 0) return false;
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

// CPUID leaf 0's vendor string is "GenuineIntel".
bool cpu_is_intel() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return false;
  char vendor[13] = {};
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  return std::string(vendor) == "GenuineIntel";
}

}  // namespace

bool bf16_gemm_path_available(Bf16GemmPath path) {
  static const bool f = __builtin_cpu_supports("avx512f") != 0;
  static const bool bf16 = f && __builtin_cpu_supports("avx512bf16") != 0;
  static const bool amx = amx_usable();
  switch (path) {
    case Bf16GemmPath::kFloat32: return true;
    case Bf16GemmPath::kAvx512Emulated: return f;
    case Bf16GemmPath::kAvx512Bf16: return bf16;
    case Bf16GemmPath::kAmxEmulated: return true;
    case Bf16GemmPath::kAmxBf16: return amx;
  }
  return false;
}

Bf16GemmPath default_bf16_gemm_path(bool amx, bool avx512_bf16, bool intel) {
  if (amx) return Bf16GemmPath::kAmxBf16;
  if (avx512_bf16 && !intel) return Bf16GemmPath::kAvx512Bf16;
  return Bf16GemmPath::kFloat32;
}

Bf16GemmPath bf16_gemm_path() {
  static const Bf16GemmPath chosen = [] {
    const Bf16GemmPath all[] = {Bf16GemmPath::kAmxBf16, Bf16GemmPath::kAmxEmulated, Bf16GemmPath::kAvx512Bf16,
                                Bf16GemmPath::kAvx512Emulated, Bf16GemmPath::kFloat32};
    const char* env = std::getenv("WEFT_CPU_BF16");
    if (env == nullptr || *env == '\0')
      return default_bf16_gemm_path(bf16_gemm_path_available(Bf16GemmPath::kAmxBf16),
                                    bf16_gemm_path_available(Bf16GemmPath::kAvx512Bf16), cpu_is_intel());
    std::string has;
    for (Bf16GemmPath p : all)
      if (bf16_gemm_path_available(p)) has += std::string(has.empty() ? "" : ", ") + bf16_gemm_path_name(p);
    for (Bf16GemmPath p : all)
      if (std::string(env) == bf16_gemm_path_name(p)) {
        WEFT_CHECK(bf16_gemm_path_available(p), "WEFT_CPU_BF16=", env, ": this CPU cannot run that path; it has ", has);
        return p;
      }
    WEFT_CHECK(false, "WEFT_CPU_BF16=", env,
               ": expected amx_bf16, amx_emulated, avx512_bf16, avx512_emulated or float32 (this CPU has ", has, ")");
    return Bf16GemmPath::kFloat32;
  }();
  return chosen;
}

namespace {

float widen(uint16_t bits) { return BFloat16::from_bits(bits); }

// An operand (rows, cols; element (r, c) at src[r * rs + c * cs]) widened into
// the contiguous float32 dst in the source's orientation, so that both sides
// stream: row-major, or column-major where the source's columns are its
// contiguous lines (rs == 1: a transposed view such as a weight's). Lines are
// shared among threads. Returns dst's (row, column) strides.
std::pair<int64_t, int64_t> widen_into(const uint16_t* src, int64_t rows, int64_t cols, int64_t rs, int64_t cs,
                                       float* dst) {
  const bool by_columns = rs == 1 && cs != 1;
  const int64_t lines = by_columns ? cols : rows, len = by_columns ? rows : cols;
  const int64_t line_stride = by_columns ? cs : rs, step = by_columns ? 1 : cs;
  parallel_for(0, lines, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(len, 1)), [&](int64_t l0, int64_t l1) {
    for (int64_t l = l0; l < l1; ++l) {
      const uint16_t* __restrict s = src + l * line_stride;
      float* __restrict d = dst + l * len;
      if (step == 1)
        for (int64_t x = 0; x < len; ++x) d[x] = widen(s[x]);
      else
        for (int64_t x = 0; x < len; ++x) d[x] = widen(s[x * step]);
    }
  });
  return by_columns ? std::pair<int64_t, int64_t>{1, rows} : std::pair<int64_t, int64_t>{cols, 1};
}

void gemm_widened(int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t a_rs, int64_t a_cs, const uint16_t* b,
                  int64_t b_rs, int64_t b_cs, float* c, int64_t ldc, const float* bias) {
  std::vector<float> af(static_cast<size_t>(m * k)), bf(static_cast<size_t>(k * n));
  const auto [ars, acs] = widen_into(a, m, k, a_rs, a_cs, af.data());
  const auto [brs, bcs] = widen_into(b, k, n, b_rs, b_cs, bf.data());
  gemm<float>(m, n, k, af.data(), ars, acs, bf.data(), brs, bcs, c, ldc, false, bias);
}

// Steps 2p and 2p + 1 of a row of A or a column of B (element q at s[q * stride]),
// zero past k.
inline uint32_t pair(const uint16_t* s, int64_t stride, int64_t p, int64_t k) {
  const uint32_t lo = 2 * p < k ? s[2 * p * stride] : 0;
  const uint32_t hi = 2 * p + 1 < k ? s[(2 * p + 1) * stride] : 0;
  return lo | (hi << 16);
}

// Packs pairs [p0, p0 + kp) of `lines` lines of an operand (line l's step q at
// src[l * line_stride + q * step_stride]: A's rows, B's columns) into panels of
// W lines (dst[panel][p][line], W = kMR for A, kNR for B; lines past `lines`
// zero). Where steps are contiguous (a row-major A, a column-major B such as a
// weight's transposed view) each complete pair is one 32-bit word.
template <int W>
void pack_pairs(const uint16_t* src, int64_t line_stride, int64_t step_stride, int64_t lines, int64_t p0, int64_t kp,
                int64_t k, uint32_t* dst) {
  for (int64_t l0 = 0; l0 < lines; l0 += W) {
    uint32_t* panel = dst + l0 * kp;
    for (int j = 0; j < W; ++j) {
      if (l0 + j >= lines) {
        for (int64_t p = 0; p < kp; ++p) panel[p * W + j] = 0;
        continue;
      }
      const uint16_t* line = src + (l0 + j) * line_stride;
      for (int64_t p = 0; p < kp; ++p) {
        const int64_t q = p0 + p;
        uint32_t w;
        if (step_stride == 1 && 2 * q + 1 < k) std::memcpy(&w, line + 2 * q, sizeof w);
        else w = pair(line, step_stride, q, k);
        panel[p * W + j] = w;
      }
    }
  }
}

// C (m x n, at c with leading dimension ldc) cut into one slab per thread,
// sized by the threads' speeds (over_balanced_slabs, core/cpu/thread_balance.h):
// slabs of whole `rows`-row panels where C has more rows than columns (each
// thread packs all of B, the smaller), else of whole `cols`-column tiles (each
// packs all of A). tile(m, n, a, b, c, ep, bias) computes one slab, its
// operands, epilogue and column bias already offset to it.
template <typename Tile>
void over_slabs(int64_t m, int64_t n, int64_t k, int64_t rows, int64_t cols, const uint16_t* a, int64_t a_rs,
                const uint16_t* b, int64_t b_cs, float* c, int64_t ldc, const GemmEpilogue* ep, const float* bias,
                const Tile& tile) {
  const double work = static_cast<double>(m) * n * k;
  if (m > n) {
    over_balanced_slabs(m, work, rows, [&](int64_t i0, int64_t i1) {
      GemmEpilogue e;
      if (ep) e = ep->at(i0, 0);
      tile(i1 - i0, n, a + i0 * a_rs, b, c + i0 * ldc, ep ? &e : nullptr, bias);
    });
    return;
  }
  over_balanced_slabs(n, work, cols, [&](int64_t j0, int64_t j1) {
    GemmEpilogue e;
    if (ep) e = ep->at(0, j0);
    tile(m, j1 - j0, a, b + j0 * b_cs, c + j0, ep ? &e : nullptr, bias ? bias + j0 : nullptr);
  });
}

// Everything below runs only where bf16_gemm_path_available() said so.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx512bf16,avx2,fma")
// (GCC 12's shift intrinsics start from an undefined vector: see gemm_avx512.cc)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

constexpr int kMR = 12;       // rows of C per micro-tile
constexpr int kNR = 32;       // columns of C per micro-tile (two zmm)
constexpr int64_t kKP = 256;  // max pairs of k steps per block: an A panel (kMR x kKP words = 12 KiB) stays in L1
constexpr int64_t kMC = 1536;
constexpr int64_t kNC = 256;

// pack_pairs (same contract) with AVX-512 where steps are contiguous (a
// row-major A, a column-major B) or lines are (a column-major A, a row-major
// B): blocks of up to 16 lines x 16 whole pairs go through zmm registers, 16
// 32-bit words a line (steps contiguous: one load per line) or a pair (lines
// contiguous: the two steps' rows interleaved), turned by transpose16 where
// the panel layout wants the other; pairs past the last whole block of 16 go
// through pair(). Other strides take pack_pairs.
template <int W, bool kAmxA = false>
void pack_pairs_avx512(const uint16_t* src, int64_t line_stride, int64_t step_stride, int64_t lines, int64_t p0,
                       int64_t kp, int64_t k, uint32_t* dst) {
  const bool steps = step_stride == 1, across = line_stride == 1;
  if (!steps && !across) {  // (the AMX A layout is asked for only with contiguous steps or lines)
    if constexpr (!kAmxA) pack_pairs<W>(src, line_stride, step_stride, lines, p0, kp, k, dst);
    return;
  }
  constexpr int kLB = W == 12 ? 12 : 16;  // lines per block: one 12-line panel, half a 32-line one, or 16 1-line ones
  const int64_t whole = std::clamp<int64_t>((k - 2 * p0) / 2, 0, kp), pw = whole / 16 * 16;
  // Word (line l, pair p) of the packing.
  auto at = [&](int64_t l, int64_t p) -> uint32_t* {
    if constexpr (kAmxA) return dst + (p / 16) * 512 + l * 16 + p % 16;
    return dst + (l / W) * W * kp + p * W + l % W;
  };
  for (int64_t l0 = 0; l0 < lines; l0 += kLB) {
    const int lb = static_cast<int>(std::min<int64_t>(kLB, lines - l0));
    const __mmask16 mk = lanes(lb);
    for (int64_t p = 0; p < pw; p += 16) {
      __m512 v[16];
      if (steps) {  // v[i]: line l0 + i, pairs p..p+15
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i)
          v[i] = i < lb ? _mm512_loadu_ps(src + (l0 + i) * line_stride + 2 * (p0 + p)) : _mm512_setzero_ps();
      } else {  // v[j]: pair p + j, lines l0..l0+15
#pragma GCC unroll 16
        for (int j = 0; j < 16; ++j) {
          const uint16_t* s = src + 2 * (p0 + p + j) * step_stride + l0;
          const __m512i lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mk, s));
          const __m512i hi = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mk, s + step_stride));
          v[j] = _mm512_castsi512_ps(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
        }
      }
      if ((W == 1) != steps) transpose16(v);
      if constexpr (W == 1) {
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i)
          if (i < lb) _mm512_storeu_ps(at(l0 + i, p), v[i]);
      } else {
#pragma GCC unroll 16
        for (int j = 0; j < 16; ++j) _mm512_mask_storeu_ps(at(l0, p + j), mk, v[j]);
      }
    }
    for (int i = 0; i < lb; ++i)
      for (int64_t p = pw; p < kp; ++p) *at(l0 + i, p) = pair(src + (l0 + i) * line_stride, step_stride, p0 + p, k);
  }
  if constexpr (W > 1) {
    const int64_t padded = (lines + W - 1) / W * W;
    for (int64_t l = lines; l < padded; ++l)
      for (int64_t p = 0; p < kp; ++p) *at(l, p) = 0;
  }
}

// A finished 32 x 32 block of tile sums (s, row-major) into C: rows x cols at
// c (leading dimension ldc), plus the column bias (the first K block's), plus
// C (later K blocks), through the epilogue on the last K block (ep's pointers
// at the slab's first element, (i0, j0) the block's row and column there).
// Used by the native AMX kernel, which runs only where AVX-512 is.
void finish_amx_block(const float* s, int rows, int cols, float* c, int64_t ldc, bool load_c, const float* bias,
                      const GemmEpilogue* ep, int64_t i0, int64_t j0) {
  const __mmask16 mk[2] = {lanes(cols), lanes(cols - 16)};
  const __m512 b0 = bias ? _mm512_maskz_loadu_ps(mk[0], bias) : _mm512_setzero_ps();
  const __m512 b1 = bias ? _mm512_maskz_loadu_ps(mk[1], bias + 16) : _mm512_setzero_ps();
  for (int i = 0; i < rows; ++i)
    for (int v = 0; v < 2; ++v) {
      if (mk[v] == 0) continue;
      float* cp = c + i * ldc + 16 * v;
      __m512 r = _mm512_load_ps(s + i * 32 + 16 * v);
      if (bias) r = _mm512_add_ps(r, v ? b1 : b0);
      if (load_c) r = _mm512_add_ps(_mm512_maskz_loadu_ps(mk[v], cp), r);
      store_c(cp, mk[v], r, ep, i0 + i, j0 + 16 * v);
    }
}

// C (mr x nr at c) = or += the A panel (kp pairs x kMR words) times the B panel
// (kp pairs x kNR words); with `bias` (the tile's nr columns of the column bias,
// first K block only) the sums start from it; with `ep` (the last K block; its
// pointers at the tile's first element) the finished sums go through the
// epilogue (store_c, core/cpu/gemm_epilogue_avx512.h).
template <bool kNative>
void micro_kernel(int64_t kp, const uint32_t* __restrict ap, const uint32_t* __restrict bp, float* __restrict c,
                  int64_t ldc, int mr, int nr, bool load_c, const GemmEpilogue* ep, const float* __restrict bias) {
  const __m512 init0 = bias ? _mm512_maskz_loadu_ps(lanes(nr), bias) : _mm512_setzero_ps();
  const __m512 init1 = bias ? _mm512_maskz_loadu_ps(lanes(nr - 16), bias + 16) : _mm512_setzero_ps();
  __m512 acc[kMR][2];
#pragma GCC unroll 12
  for (int i = 0; i < kMR; ++i) acc[i][0] = init0, acc[i][1] = init1;
  // the C tile or the epilogue's rows, fetched while the k loop runs (as in gemm_avx512.cc)
  if (ep) prefetch_epilogue_rows(*ep, c, ldc, mr, nr, load_c);
  else prefetch_c_tile(c, ldc, mr, nr);
  for (int64_t p = 0; p < kp; ++p) {
    const __m512i b0 = _mm512_load_si512(bp), b1 = _mm512_load_si512(bp + 16);
#pragma GCC unroll 12
    for (int i = 0; i < kMR; ++i) {
      const __m512i a = _mm512_set1_epi32(static_cast<int>(ap[i]));
      acc[i][0] = pair_dot<kNative>(acc[i][0], a, b0);
      acc[i][1] = pair_dot<kNative>(acc[i][1], a, b1);
    }
    ap += kMR;
    bp += kNR;
  }
  for (int i = 0; i < mr; ++i)
    for (int v = 0; v < 2; ++v) {
      const __mmask16 mk = lanes(nr - 16 * v);
      if (mk == 0) continue;
      float* cp = c + i * ldc + 16 * v;
      __m512 r = acc[i][v];
      if (load_c) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(mk, cp));
      store_c(cp, mk, r, ep, i, 16 * v);
    }
}

// C (m x n) over one thread: the Goto/BLIS loops of the file comment.
template <bool kNative>
void pairs_tile(int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t a_rs, int64_t a_cs, const uint16_t* b,
                int64_t b_rs, int64_t b_cs, float* c, int64_t ldc, const GemmEpilogue* ep, const float* bias) {
  static thread_local PackBuffers<uint32_t> buf(kMC * kKP, kKP * kNC);
  uint32_t* apack = buf.a.get();
  uint32_t* bpack = buf.b.get();
  const int64_t pairs = (k + 1) / 2, blocks = (pairs + kKP - 1) / kKP, kpb = (pairs + blocks - 1) / blocks;
  GemmEpilogue et;  // the epilogue at each tile (GemmEpilogue::place)
  if (ep) et = *ep;
  for (int64_t p0 = 0; p0 < pairs; p0 += kpb) {
    const int64_t kp = std::min(kpb, pairs - p0);
    for (int64_t ic = 0; ic < m; ic += kMC) {
      const int64_t mc = std::min(kMC, m - ic), panels = (mc + kMR - 1) / kMR;
      pack_pairs_avx512<kMR>(a + ic * a_rs, a_rs, a_cs, mc, p0, kp, k, apack);
      for (int64_t jc = 0; jc < n; jc += kNC) {
        const int64_t nc = std::min(kNC, n - jc);
        pack_pairs_avx512<kNR>(b + jc * b_cs, b_cs, b_rs, nc, p0, kp, k, bpack);
        for (int64_t i = 0; i < panels; ++i)
          for (int64_t jr = 0; jr < nc; jr += kNR) {
            const int64_t at = (ic + i * kMR) * ldc + jc + jr;
            const bool last = ep && p0 + kp == pairs;
            if (last) et.place(*ep, ic + i * kMR, jc + jr);
            micro_kernel<kNative>(kp, apack + i * kMR * kp, bpack + jr * kp, c + at, ldc,
                                  static_cast<int>(std::min<int64_t>(kMR, mc - i * kMR)),
                                  static_cast<int>(std::min<int64_t>(kNR, nc - jr)), p0 > 0, last ? &et : nullptr,
                                  bias && p0 == 0 ? bias + jc + jr : nullptr);
          }
      }
    }
  }
}

template <bool kNative>
void gemm_pairs(int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t a_rs, int64_t a_cs, const uint16_t* b,
                int64_t b_rs, int64_t b_cs, float* c, int64_t ldc, const GemmEpilogue* ep, const float* bias) {
  // (rows where m > n: the GPT's GEMMs +4% on 2 Zen 4 threads, against columns only)
  over_slabs(
      m, n, k, kMR, kNR, a, a_rs, b, b_cs, c, ldc, ep, bias,
      [&](int64_t sm, int64_t sn, const uint16_t* sa, const uint16_t* sb, float* sc, const GemmEpilogue* se,
          const float* sbias) { pairs_tile<kNative>(sm, sn, k, sa, a_rs, a_cs, sb, b_rs, b_cs, sc, ldc, se, sbias); });
}

#pragma GCC diagnostic pop
#pragma GCC pop_options

// ---- AMX ----
//
// The same Goto/BLIS loops over pairs of k steps, with tiles: each thread owns
// a slab of whole 32-column tiles of C, or of 32-row tiles where C has more
// rows than columns (each thread packs all of the operand it does not split, so
// the smaller one is repacked, as in the float32 kernel); K is cut into blocks
// of up to kAmxKP pairs, every block but the last a multiple of 16 pairs (one
// tile's depth), so zero padding only ever follows the last step of K. A is
// packed in panels of 32 rows in tile order: per 16 pairs, the 32 rows' 16
// words (two 1 KiB tiles, each read in order); B in panels of 16 columns, each
// pair step's 16 columns contiguous (b[p][j], the VNNI layout TDPBF16PS reads:
// a tile is 16 pair steps, 1 KiB in order). In-order tiles measured 3-7% faster
// than rows kpp words apart (A) or interleaved 32-column panels (B), and the
// native kernel packs whole 16 x 16 blocks with AVX-512 (pack_pairs_avx512),
// which took the bfloat16 GPT step from 1,710 to 3,700 tokens/s on a 2-core
// Xeon with AMX. The micro-kernel computes a 32 x 32 block of C in four
// accumulator tiles (tmm0-3: rows 0-15 / 16-31 x columns 0-15 / 16-31), per 16
// pairs loading two A tiles (tmm4-5) and two B tiles (tmm6-7) and issuing four
// TDPBF16PS; the block goes through a 32 x 32 float scratch into C (masked at
// the edges, added to C after the first K block; the native kernel does this
// and the epilogue with AVX-512, finish_amx_block). Rows and columns past the
// matrix are zero in the packing. The emulated tiles pack and store with scalar
// code into the same layout, so every CPU checks that code too.

constexpr int64_t kAmxKP = 256;  // max pairs per K block (512 k steps): A and B panels 32 KiB each
constexpr int64_t kAmxMC = 1536;
constexpr int64_t kAmxNC = 256;
constexpr int kAmxT = 16;  // tile rows, and pairs (32-bit words) per tile row

// The tile state of one micro-kernel, in hardware (x86 AMX; only where
// bf16_gemm_path_available(kAmxBf16)).
class NativeTiles {
 public:
  static constexpr bool kAvx512 = true;  // every CPU with AMX has AVX-512: packing and stores use it
  NativeTiles() {
    Config cfg{};
    cfg.palette = 1;
    for (int t = 0; t < 8; ++t) cfg.colsb[t] = 4 * kAmxT, cfg.rows[t] = kAmxT;
    asm volatile("ldtilecfg %0" ::"m"(cfg));
  }
  ~NativeTiles() { asm volatile("tilerelease" ::: "memory"); }
  NativeTiles(const NativeTiles&) = delete;
  NativeTiles& operator=(const NativeTiles&) = delete;

  void zero() { asm volatile("tilezero %%tmm0\n\ttilezero %%tmm1\n\ttilezero %%tmm2\n\ttilezero %%tmm3" ::: "memory"); }
  // C += A rows [0, 16) and [16, 32) (a0, a1; rows `a_stride` bytes apart) times
  // B columns [0, 16) and [16, 32) (b0, b1; pair steps `b_stride` bytes apart).
  void step(const uint32_t* a0, const uint32_t* a1, int64_t a_stride, const uint32_t* b0, const uint32_t* b1,
            int64_t b_stride) {
    asm volatile(
        "tileloadd (%[a0],%[sa],1), %%tmm4\n\t"
        "tileloadd (%[a1],%[sa],1), %%tmm5\n\t"
        "tileloadd (%[b0],%[sb],1), %%tmm6\n\t"
        "tileloadd (%[b1],%[sb],1), %%tmm7\n\t"
        "tdpbf16ps %%tmm6, %%tmm4, %%tmm0\n\t"
        "tdpbf16ps %%tmm7, %%tmm4, %%tmm1\n\t"
        "tdpbf16ps %%tmm6, %%tmm5, %%tmm2\n\t"
        "tdpbf16ps %%tmm7, %%tmm5, %%tmm3" ::[a0] "r"(a0),
        [a1] "r"(a1), [b0] "r"(b0), [b1] "r"(b1), [sa] "r"(a_stride), [sb] "r"(b_stride)
        : "memory");
  }
  // The four accumulators into out (32 x 32 floats, row-major).
  void store(float* out) {
    const int64_t stride = 32 * sizeof(float);
    float* o1 = out + 16;
    float* o2 = out + 16 * 32;
    float* o3 = out + 16 * 32 + 16;
    asm volatile(
        "tilestored %%tmm0, (%[o0],%[s],1)\n\t"
        "tilestored %%tmm1, (%[o1],%[s],1)\n\t"
        "tilestored %%tmm2, (%[o2],%[s],1)\n\t"
        "tilestored %%tmm3, (%[o3],%[s],1)" ::[o0] "r"(out),
        [o1] "r"(o1), [o2] "r"(o2), [o3] "r"(o3), [s] "r"(stride)
        : "memory");
  }

 private:
  struct alignas(64) Config {  // LDTILECFG's 64-byte operand
    uint8_t palette = 0, start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
  };
  static_assert(sizeof(Config) == 64);
};

// The same tile operations in plain C++, following TDPBF16PS's documented
// semantics: per row m and column n of a 16 x 16 accumulator, for each of the
// 16 pairs in order, += the even steps' product, then += the odd steps'.
class EmulatedTiles {
 public:
  static constexpr bool kAvx512 = false;  // any CPU: scalar packing and stores
  void zero() {
    for (auto& t : acc_)
      for (auto& row : t) std::fill(std::begin(row), std::end(row), 0.0f);
  }
  void step(const uint32_t* a0, const uint32_t* a1, int64_t a_stride, const uint32_t* b0, const uint32_t* b1,
            int64_t b_stride) {
    const uint32_t* a[2] = {a0, a1};
    const uint32_t* b[2] = {b0, b1};
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) dp(acc_[2 * i + j], a[i], a_stride, b[j], b_stride);
  }
  void store(float* out) {
    for (int t = 0; t < 4; ++t)
      for (int r = 0; r < kAmxT; ++r)
        for (int c = 0; c < kAmxT; ++c) out[(16 * (t / 2) + r) * 32 + 16 * (t % 2) + c] = acc_[t][r][c];
  }

 private:
  static float lo(uint32_t w) { return BFloat16::from_bits(static_cast<uint16_t>(w & 0xFFFFu)); }
  static float hi(uint32_t w) { return BFloat16::from_bits(static_cast<uint16_t>(w >> 16)); }
  static const uint32_t* row(const uint32_t* base, int64_t stride_bytes, int r) {
    return reinterpret_cast<const uint32_t*>(reinterpret_cast<const char*>(base) + r * stride_bytes);
  }
  static void dp(float (&c)[kAmxT][kAmxT], const uint32_t* a, int64_t sa, const uint32_t* b, int64_t sb) {
    for (int m = 0; m < kAmxT; ++m)
      for (int n = 0; n < kAmxT; ++n) {
        float t = c[m][n];
        for (int p = 0; p < kAmxT; ++p) {
          const uint32_t x = row(a, sa, m)[p], y = row(b, sb, p)[n];
          t += lo(x) * lo(y);
          t += hi(x) * hi(y);
        }
        c[m][n] = t;
      }
  }
  float acc_[4][kAmxT][kAmxT];
};

// Pairs [p0, p0 + kpp) of `rows` rows (up to 32) of A (row r's step q at
// a[r * rs + q * cs]) in tile order: for each 16 pairs, the 32 rows' 16 words
// (dst[(p / 16) * 512 + r * 16 + p % 16]), so each A tile is 1 KiB read in
// order; rows past `rows`, and pairs past k, zero.
template <bool kAvx512>
void pack_amx_rows(const uint16_t* a, int64_t rs, int64_t cs, int64_t rows, int64_t p0, int64_t kpp, int64_t k,
                   uint32_t* dst) {
  if (kAvx512 && (rs == 1 || cs == 1)) {
    pack_pairs_avx512<1, true>(a, rs, cs, rows, p0, kpp, k, dst);
  } else {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t p = 0; p < kpp; ++p) dst[(p / 16) * 512 + r * 16 + p % 16] = pair(a + r * rs, cs, p0 + p, k);
  }
  for (int64_t p = 0; p < kpp; p += 16) std::fill(dst + p * 32 + rows * 16, dst + p * 32 + 512, 0u);
}

// finish_amx_block element by element, through the scalar epilogue (the
// emulated tiles' stores, for any CPU).
void finish_amx_block_scalar(const float* s, int rows, int cols, float* c, int64_t ldc, bool load_c, const float* bias,
                             const GemmEpilogue* ep, int64_t i0, int64_t j0) {
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) {
      float* cp = c + i * ldc + j;
      float r = bias ? s[i * 32 + j] + bias[j] : s[i * 32 + j];
      if (load_c) r = *cp + r;
      if (ep) apply_epilogue(*ep, cp, r, i0 + i, j0 + j);
      else *cp = r;
    }
}

// C (m x n) over one thread, tile state `Tiles`.
template <typename Tiles>
void amx_tile(int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t a_rs, int64_t a_cs, const uint16_t* b,
              int64_t b_rs, int64_t b_cs, float* c, int64_t ldc, const GemmEpilogue* ep, const float* bias) {
  static thread_local PackBuffers<uint32_t> buf(kAmxMC * kAmxKP, kAmxKP * kAmxNC);
  uint32_t* apack = buf.a.get();
  uint32_t* bpack = buf.b.get();
  alignas(64) float scratch[32 * 32];
  Tiles tiles;
  const int64_t pairs = (k + 1) / 2, blocks = (pairs + kAmxKP - 1) / kAmxKP;
  const int64_t kpb = ((pairs + blocks - 1) / blocks + kAmxT - 1) / kAmxT * kAmxT;  // whole tiles deep
  for (int64_t p0 = 0; p0 < pairs; p0 += kpb) {
    const int64_t kpp = (std::min(kpb, pairs - p0) + kAmxT - 1) / kAmxT * kAmxT;  // only the last block pads
    for (int64_t ic = 0; ic < m; ic += kAmxMC) {
      const int64_t mc = std::min(kAmxMC, m - ic);
      for (int64_t r0 = 0; r0 < mc; r0 += 32)
        pack_amx_rows<Tiles::kAvx512>(a + (ic + r0) * a_rs, a_rs, a_cs, std::min<int64_t>(32, mc - r0), p0, kpp, k,
                                      apack + r0 * kpp);
      for (int64_t jc = 0; jc < n; jc += kAmxNC) {
        const int64_t nc = std::min(kAmxNC, n - jc);
        if constexpr (Tiles::kAvx512) pack_pairs_avx512<16>(b + jc * b_cs, b_cs, b_rs, nc, p0, kpp, k, bpack);
        else pack_pairs<16>(b + jc * b_cs, b_cs, b_rs, nc, p0, kpp, k, bpack);
        std::fill(bpack + (nc + 15) / 16 * 16 * kpp, bpack + (nc + 31) / 32 * 32 * kpp, 0u);  // a whole last 32
        for (int64_t r0 = 0; r0 < mc; r0 += 32) {
          const uint32_t* ap = apack + r0 * kpp;
          const int rows = static_cast<int>(std::min<int64_t>(32, mc - r0));
          for (int64_t j0 = 0; j0 < nc; j0 += 32) {
            const uint32_t* bp = bpack + j0 * kpp;
            tiles.zero();
            for (int64_t q = 0; q < kpp; q += kAmxT)
              tiles.step(ap + q * 32, ap + q * 32 + 256, 16 * 4, bp + q * 16, bp + 16 * kpp + q * 16, 16 * 4);
            tiles.store(scratch);
            const int cols = static_cast<int>(std::min<int64_t>(32, nc - j0));
            const bool last = ep && p0 + kpb >= pairs;  // the last K block goes through the epilogue
            float* cb = c + (ic + r0) * ldc + jc + j0;
            const float* bb = bias && p0 == 0 ? bias + jc + j0 : nullptr;  // the first K block's sums plus the bias
            if constexpr (Tiles::kAvx512)
              finish_amx_block(scratch, rows, cols, cb, ldc, p0 > 0, bb, last ? ep : nullptr, ic + r0, jc + j0);
            else
              finish_amx_block_scalar(scratch, rows, cols, cb, ldc, p0 > 0, bb, last ? ep : nullptr, ic + r0, jc + j0);
          }
        }
      }
    }
  }
}

template <typename Tiles>
void gemm_amx(int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t a_rs, int64_t a_cs, const uint16_t* b,
              int64_t b_rs, int64_t b_cs, float* c, int64_t ldc, const GemmEpilogue* ep, const float* bias) {
  // (rows where m > n: the GPT's GEMMs +7% on 2 threads of an AMX Xeon, against columns only)
  over_slabs(
      m, n, k, 32, 32, a, a_rs, b, b_cs, c, ldc, ep, bias,
      [&](int64_t sm, int64_t sn, const uint16_t* sa, const uint16_t* sb, float* sc, const GemmEpilogue* se,
          const float* sbias) { amx_tile<Tiles>(sm, sn, k, sa, a_rs, a_cs, sb, b_rs, b_cs, sc, ldc, se, sbias); });
}

}  // namespace

void gemm_bf16(Bf16GemmPath path, int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t a_rs, int64_t a_cs,
               const uint16_t* b, int64_t b_rs, int64_t b_cs, float* c, int64_t ldc) {
  const int64_t zero = 0;
  gemm_bf16_batched(path, 1, &zero, &zero, m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, 0, ldc);
}

namespace {

// One matrix on `path` (not the AVX-512 widened one), finished through `ep`
// (or stored in C): the paths without a store of their own (Eigen's, and K =
// 0) apply the epilogue in a pass over C.
void gemm_one(Bf16GemmPath path, int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t a_rs, int64_t a_cs,
              const uint16_t* b, int64_t b_rs, int64_t b_cs, float* c, int64_t ldc, const GemmEpilogue* ep,
              const float* col_bias) {
  const bool pass = k == 0 || path == Bf16GemmPath::kFloat32;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = col_bias ? col_bias[j] : 0.0f;
  } else {
    switch (path) {
      case Bf16GemmPath::kFloat32: gemm_widened(m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, ldc, col_bias); break;
      case Bf16GemmPath::kAvx512Emulated:
        gemm_pairs<false>(m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, ldc, ep, col_bias);
        break;
      case Bf16GemmPath::kAvx512Bf16:
        gemm_pairs<true>(m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, ldc, ep, col_bias);
        break;
      case Bf16GemmPath::kAmxEmulated:
        gemm_amx<EmulatedTiles>(m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, ldc, ep, col_bias);
        break;
      case Bf16GemmPath::kAmxBf16:
        gemm_amx<NativeTiles>(m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, ldc, ep, col_bias);
        break;
    }
  }
  if (ep && pass) apply_epilogue_rows(*ep, c, ldc, m, n);
}

}  // namespace

void gemm_bf16_batched(Bf16GemmPath path, int64_t batch, const int64_t* a_off, const int64_t* b_off, int64_t m,
                       int64_t n, int64_t k, const uint16_t* a, int64_t a_rs, int64_t a_cs, const uint16_t* b,
                       int64_t b_rs, int64_t b_cs, float* c, int64_t c_stride, int64_t ldc, uint16_t* c16,
                       const float* col_bias) {
  WEFT_CHECK(bf16_gemm_path_available(path), "gemm_bf16: this CPU cannot run the ", bf16_gemm_path_name(path), " path");
  if (m == 0 || n == 0 || batch == 0) return;
  if (path == Bf16GemmPath::kFloat32 && gemm_f32_uses_avx512())
    return gemm_avx512_bf16_widened(batch, a_off, b_off, m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, c_stride, ldc, c16,
                                    col_bias);
  for (int64_t x = 0; x < batch; ++x) {
    GemmEpilogue round;
    round.kind = GemmEpilogue::Kind::kRoundBf16;
    round.out16 = c16 ? c16 + x * c_stride : nullptr;
    round.ld_out16 = ldc;
    gemm_one(path, m, n, k, a + a_off[x], a_rs, a_cs, b + b_off[x], b_rs, b_cs, c + x * c_stride, ldc,
             c16 ? &round : nullptr, col_bias);
  }
}

void gemm_bf16_gelu_tanh(Bf16GemmPath path, int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t a_rs,
                         int64_t a_cs, const uint16_t* b, int64_t b_rs, int64_t b_cs, float* c, int64_t ldc,
                         const float* col_bias, const GemmEpilogue& epilogue) {
  WEFT_CHECK(
      epilogue.kind == GemmEpilogue::Kind::kGeluForwardBf16 || epilogue.kind == GemmEpilogue::Kind::kGeluBackwardBf16,
      "gemm_bf16_gelu_tanh: takes a bfloat16 GELU epilogue");
  WEFT_CHECK(bf16_gemm_path_available(path), "gemm_bf16: this CPU cannot run the ", bf16_gemm_path_name(path), " path");
  if (m == 0 || n == 0) return;
  if (path == Bf16GemmPath::kFloat32 && gemm_f32_uses_avx512())
    return gemm_avx512_bf16_widened_gelu(m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, ldc, col_bias, epilogue);
  gemm_one(path, m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, ldc, &epilogue, col_bias);
}

}  // namespace weft::cpu
