// Flash-style attention on the CPU, forward and backward, float32 and bfloat16,
// on AVX-512 or AVX2 + FMA (core/cpu/flash_attention.cc). The CPU entries of the fused attention tables
// (core/kernels/attention.h) call these.
//
// Contract: one (batch, head) pair is a "matrix" m = b * heads + h < BH. q (L, D)
// of matrix m starts at q + b * q_sb + h * q_sh with row stride q_rs and unit
// column stride; k (S, D), v (S, Dv), o (L, Dv) and the gradients dq, dk, dv
// likewise, each with its own strides (FlashGeometry); lse (L) is contiguous
// per matrix (lse + m * L). So o and the gradients can be written straight into
// a (B, T, H, D) layout, whose (B, T, H * D) reshape needs no copy. With
// p = softmax(scale * q k^T,
// causal: key j hidden from query i when j > i):
//   forward:  o = p v, lse = log(sum_j exp(scale * q_i . k_j)) per row (natural log)
//   backward: dv = p^T do, dp = do v^T, ds = p * (dp - rowsum(do * o)),
//             dq = scale * ds k, dk = scale * ds^T q.
// Queries and keys are visited in blocks of 64; under `causal` the blocks wholly
// above the diagonal are never computed. Work is shared out by whole matrices,
// each computed in one fixed order, so results do not depend on the thread count.
// Scores live only in one block at a time (no L x S tensor); the backward
// recomputes them from lse. Requires flash_attention_available().
#pragma once

#include <cstdint>
#include <optional>

namespace weft::cpu {

// The instruction set the float32 kernels use: by default the best this CPU
// has. The results of the two differ in the last bits (their exp and their
// products' tiling differ); each is independent of the thread count.
enum class FlashPath { kAvx512, kAvx2 };
const char* flash_path_name(FlashPath p);  // "avx512", "avx2"
bool flash_path_available(FlashPath p);    // AVX-512F; AVX2 and FMA
FlashPath flash_path();
// Forces one (an error naming it where the CPU cannot run it), or with nullopt
// goes back to the default. For tests and benchmarks; not thread-safe against
// attention calls running meanwhile.
void set_flash_path(std::optional<FlashPath> p);

// True when the kernels are enabled (the default) and this CPU has a path
// (AVX-512F, or AVX2 and FMA).
bool flash_attention_available();
// For tests and benchmarks comparing with the unfused path; not thread-safe
// against concurrent attention calls.
void set_flash_attention_enabled(bool enabled);

struct FlashGeometry {
  int64_t batch = 0, heads = 0;  // matrices: batch * heads, m = b * heads + h
  int64_t L = 0, S = 0, D = 0, Dv = 0;
  // Element strides of q, k, v: (batch, head, row); the column stride is 1.
  int64_t q_sb = 0, q_sh = 0, q_rs = 0;
  int64_t k_sb = 0, k_sh = 0, k_rs = 0;
  int64_t v_sb = 0, v_sh = 0, v_rs = 0;
  int64_t o_sb = 0, o_sh = 0, o_rs = 0;     // the forward's output, the backward's o
  int64_t dq_sb = 0, dq_sh = 0, dq_rs = 0;  // the backward's outputs
  int64_t dk_sb = 0, dk_sh = 0, dk_rs = 0;
  int64_t dv_sb = 0, dv_sh = 0, dv_rs = 0;
  float scale = 1.0f;
  bool causal = false;
};

// o: strides o_sb, o_sh, o_rs; lse: (BH, L) contiguous.
void flash_attention_forward_f32(const FlashGeometry& g, const float* q, const float* k, const float* v, float* o,
                                 float* lse);

// d_o: (B, H, L, Dv) with strides (do_sb, do_sh, do_rs) and a unit column stride; o, lse as the forward wrote them; dq
// (L, D), dk (S, D), dv (S, Dv) per matrix at their strides in g, overwritten.
void flash_attention_backward_f32(const FlashGeometry& g, const float* q, const float* k, const float* v,
                                  const float* o, const float* lse, const float* d_o, int64_t do_sb, int64_t do_sh,
                                  int64_t do_rs, float* dq, float* dk, float* dv);

// The same kernels on bfloat16 q, k, v, o and d_o (their bits as uint16_t). With
// float32 products (FlashBf16Products below) each element is widened to float32
// as the kernels copy or pack it (they copy every operand anyway), every score,
// probability, statistic and sum is float32, and the outputs (o; dq, dk, dv)
// are rounded to bfloat16 (to nearest even) as they are stored: bit for bit the
// float32 kernels on the widened inputs with their outputs then rounded,
// without the widened copies or the float32 outputs.
// How the bfloat16 entries compute their block products:
//   kFloat32: the float32 kernels on the widened inputs (bit for bit their
//     results, rounded as stored: see below);
//   kPairs: VDPBF16PS on pairs of bfloat16 steps (AVX512-BF16), with p and ds
//     rounded to bfloat16 for the four products that take them, as PyTorch's
//     CPU flash attention does for its bfloat16 GEMMs; softmax statistics,
//     row sums, ds itself and the accumulators stay float32 (Note [flash pair
//     products] in flash_attention.cc);
//   kPairsEmulated: kPairs's layouts and order with each pair product as two
//     float32 FMAs (any AVX-512 CPU; the same bits as kPairs on normal numbers),
//     so a CPU without AVX512-BF16 still tests that code.
// kFloat32 runs on either path (FlashPath); the pair products are AVX-512
// code whichever path the softmax rows take.
// By default they follow the bfloat16 matmuls (bf16_gemm_path() in
// core/cpu/gemm_bf16.h): kPairs where those take avx512_bf16 (a Zen 4: twice
// the float32 FMA rate), kPairsEmulated under avx512_emulated, else kFloat32
// (an Intel CPU issues VDPBF16PS at half its FMA rate, no faster than float32).
enum class FlashBf16Products { kFloat32, kPairsEmulated, kPairs };
const char* flash_bf16_products_name(FlashBf16Products p);  // "float32", "pairs_emulated", "pairs"
bool flash_bf16_products_available(FlashBf16Products p);
FlashBf16Products flash_bf16_products();
// Forces one (an error naming it where the CPU cannot run it), or with
// nullopt goes back to the default. For tests and benchmarks; not thread-safe
// against attention calls running meanwhile.
void set_flash_bf16_products(std::optional<FlashBf16Products> p);

void flash_attention_forward_bf16(const FlashGeometry& g, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                  uint16_t* o, float* lse);
void flash_attention_backward_bf16(const FlashGeometry& g, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                   const uint16_t* o, const float* lse, const uint16_t* d_o, int64_t do_sb,
                                   int64_t do_sh, int64_t do_rs, uint16_t* dq, uint16_t* dk, uint16_t* dv);

}  // namespace weft::cpu
