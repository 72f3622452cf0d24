// Linear algebra: matmul (torch.matmul semantics), mm, bmm, linear, and the
// transformer MLP with its GELU fused (mlp_gelu_tanh, Note [fused mlp]).
//
// Contract: every product goes through one internal op, matmul_nd, on operands
// with >= 2 dims whose batch dims (all but the last two) broadcast. Its CPU
// kernel reads strided operands; float32/float64 use the GEMM in core/cpu/gemm.h
// without copying plain transposes, float16 computes in float32, bfloat16 takes
// cpu::bf16_gemm_path() (core/cpu/gemm_bf16.h: AMX tiles where the CPU has
// them, VDPBF16PS on AMD CPUs with AVX512-BF16, else widened to float32 while
// packing; float32 sums either way), integers use a simple
// loop. Backward: dA = sum_to(dC B^T, A), dB = sum_to(A^T dC, B), so
// broadcast batch dims are summed back (Note [grad layout] for 2-D transposes).
// Under autocast (core/autocast.h) the public entry points cast their operands first.
#include "core/kernels/matmul.h"

#include <algorithm>

#include "core/autocast.h"
#include "core/autograd_meta.h"
#include "core/cpu/gemm.h"
#include "core/cpu/gemm_bf16.h"
#include "core/dispatch.h"
#include "core/nn_ops.h"
#include "core/ops.h"
#include "core/ops/elementwise_util.h"
#include "core/parallel.h"

namespace weft {

MatmulKernel& matmul_table() {
  static MatmulKernel t("matmul");
  return t;
}

AddmmKernel& addmm_table() {
  static AddmmKernel t("addmm");
  return t;
}

AddmmGeluKernel& addmm_gelu_tanh_table() {
  static AddmmGeluKernel t("addmm_gelu_tanh");
  return t;
}

MmGeluBackwardKernel& mm_gelu_tanh_backward_table() {
  static MmGeluBackwardKernel t("mm_gelu_tanh_backward");
  return t;
}

MmRowSumsKernel& mm_row_sums_table() {
  static MmRowSumsKernel t("mm_row_sums");
  return t;
}

std::vector<int64_t> batch_offsets(const Tensor& t) {
  const int64_t nb = t.dim() - 2;
  int64_t count = 1;
  for (int64_t d = 0; d < nb; ++d) count *= t.size(d);
  std::vector<int64_t> offs(count, 0);
  std::vector<int64_t> idx(nb, 0);
  int64_t off = 0;
  for (int64_t i = 0; i < count; ++i) {
    offs[i] = off;
    for (int64_t d = nb - 1; d >= 0; --d) {
      ++idx[d];
      off += t.stride(d);
      if (idx[d] < t.size(d)) break;
      off -= t.stride(d) * t.size(d);
      idx[d] = 0;
    }
  }
  return offs;
}

namespace {

// A copy of `t` when its matrices are not plain row- or col-major.
Tensor gemm_ready(const Tensor& t) {
  int64_t r = t.size(-2), c = t.size(-1);
  return cpu::gemm_layout_ok(r, c, t.stride(-2), t.stride(-1)) ? t : t.contiguous();
}

template <typename T>
void cpu_matmul_float(const Tensor& out, const Tensor& a_in, const Tensor& b_in) {
  Tensor a = gemm_ready(a_in), b = gemm_ready(b_in);
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  std::vector<int64_t> oa = batch_offsets(a), ob = batch_offsets(b);
  const int64_t B = static_cast<int64_t>(oa.size());
  const T* pa = a.data_ptr<T>();
  const T* pb = b.data_ptr<T>();
  T* pc = out.data_ptr<T>();
  const int64_t ars = a.stride(-2), acs = a.stride(-1), brs = b.stride(-2), bcs = b.stride(-1);
  // every (matrix, block) pair goes to the thread pool at once (Note [gemm determinism])
  cpu::gemm_batched(B, oa.data(), ob.data(), M, N, K, pa, ars, acs, pb, brs, bcs, pc, M * N, N);
}

// bfloat16: cpu::bf16_gemm_path()'s kernel (core/cpu/gemm_bf16.h), which
// rounds its float32 sums into `out` as it stores them (a float32 buffer holds
// the partial sums of a K cut into blocks); a strided `out` gets a copy.
void cpu_matmul_bf16(const Tensor& out, const Tensor& a_in, const Tensor& b_in) {
  NoGradGuard ng;
  Tensor a = gemm_ready(a_in), b = gemm_ready(b_in);
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  std::vector<int64_t> oa = batch_offsets(a), ob = batch_offsets(b);
  const auto* pa = reinterpret_cast<const uint16_t*>(a.data_ptr<BFloat16>());
  const auto* pb = reinterpret_cast<const uint16_t*>(b.data_ptr<BFloat16>());
  Tensor of = empty(out.sizes(), {DType::Float32, out.device()});  // (..., M, N) partial sums
  Tensor o16 = out.is_contiguous() ? out : empty(out.sizes(), out.options());
  cpu::gemm_bf16_batched(cpu::bf16_gemm_path(), static_cast<int64_t>(oa.size()), oa.data(), ob.data(), M, N, K, pa,
                         a.stride(-2), a.stride(-1), pb, b.stride(-2), b.stride(-1), of.data_ptr<float>(), M * N, N,
                         reinterpret_cast<uint16_t*>(o16.data_ptr<BFloat16>()));
  if (!o16.is_same(out)) {
    Tensor o = out;
    copy_(o, o16);
  }
}

// float16: both operands widened to float32.
void cpu_matmul_half(const Tensor& out, const Tensor& a, const Tensor& b) {
  NoGradGuard ng;
  Tensor af = a.to(DType::Float32), bf = b.to(DType::Float32);
  Tensor of = empty(out.sizes(), {DType::Float32, out.device()});
  cpu_matmul_float<float>(of, af, bf);
  Tensor o = out;
  copy_(o, of);
}

template <typename T>
void cpu_matmul_int(const Tensor& out, const Tensor& a, const Tensor& b) {
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  std::vector<int64_t> oa = batch_offsets(a), ob = batch_offsets(b);
  const int64_t B = static_cast<int64_t>(oa.size());
  const T* pa = a.data_ptr<T>();
  const T* pb = b.data_ptr<T>();
  T* pc = out.data_ptr<T>();
  const int64_t ars = a.stride(-2), acs = a.stride(-1), brs = b.stride(-2), bcs = b.stride(-1);
  parallel_for(0, B * M, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(N * K, 1)), [&](int64_t s, int64_t e) {
    for (int64_t r = s; r < e; ++r) {
      int64_t bi = r / M, i = r % M;
      const T* arow = pa + oa[bi] + i * ars;
      const T* bm = pb + ob[bi];
      T* crow = pc + r * N;
      for (int64_t j = 0; j < N; ++j) crow[j] = 0;
      for (int64_t p = 0; p < K; ++p) {
        T av = arow[p * acs];
        const T* brow = bm + p * brs;
        for (int64_t j = 0; j < N; ++j) crow[j] += av * brow[j * bcs];
      }
    }
  });
}

template <typename T>
void cpu_matmul(const Tensor& out, const Tensor& a, const Tensor& b) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) cpu_matmul_float<T>(out, a, b);
  else if constexpr (std::is_same_v<T, BFloat16>) cpu_matmul_bf16(out, a, b);
  else if constexpr (std::is_same_v<T, Half>) cpu_matmul_half(out, a, b);
  else cpu_matmul_int<T>(out, a, b);
}
WEFT_REGISTER_KERNEL(matmul_table(), DeviceType::CPU, kNumericTypes, cpu_matmul);

// out (M, N) = bias + a @ b in one GEMM: the bias is the GEMM's column bias
// (core/cpu/gemm.h), written with C instead of in a second pass over it. In
// bfloat16 the bias (widened to float32) joins the float32 sums before the one
// rounding into out (gemm_bf16_batched), where matmul + add would round twice.
template <typename T>
void cpu_addmm(const Tensor& out, const Tensor& bias_in, const Tensor& a_in, const Tensor& b_in) {
  NoGradGuard ng;
  Tensor a = gemm_ready(a_in), b = gemm_ready(b_in);
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    Tensor bias = bias_in.contiguous();
    cpu::gemm<T>(M, N, K, a.data_ptr<T>(), a.stride(0), a.stride(1), b.data_ptr<T>(), b.stride(0), b.stride(1),
                 out.data_ptr<T>(), N, false, bias.data_ptr<T>());
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    Tensor bias = bias_in.to(DType::Float32).contiguous();           // (N)
    Tensor partial = empty({M, N}, {DType::Float32, out.device()});  // (M, N) partial sums of a K cut into blocks
    const int64_t zero = 0;
    cpu::gemm_bf16_batched(
        cpu::bf16_gemm_path(), 1, &zero, &zero, M, N, K, reinterpret_cast<const uint16_t*>(a.data_ptr<BFloat16>()),
        a.stride(0), a.stride(1), reinterpret_cast<const uint16_t*>(b.data_ptr<BFloat16>()), b.stride(0), b.stride(1),
        partial.data_ptr<float>(), 0, N, reinterpret_cast<uint16_t*>(out.data_ptr<BFloat16>()), bias.data_ptr<float>());
  } else {
    WEFT_CHECK(false, "addmm: no CPU kernel for dtype ", dtype_of<T>);
  }
}
constexpr uint32_t kAddmmTypes =
    (1u << int(DType::Float32)) | (1u << int(DType::Float64)) | (1u << int(DType::BFloat16));
WEFT_REGISTER_KERNEL(addmm_table(), DeviceType::CPU, kAddmmTypes, cpu_addmm);

// The GELU epilogues (Note [gemm epilogue] in core/cpu/gemm.h): out = [bias +]
// a @ b, then `ep` with its pointer rows as long as out's. float32 writes out
// (and act); bfloat16 sums in float32 (a scratch C for the partial sums of a K
// cut into blocks) and writes the rounded results, the bias widened.
void gemm_gelu(const Tensor& out, const Tensor& bias_in, const Tensor& a_in, const Tensor& b_in, cpu::GemmEpilogue ep) {
  NoGradGuard ng;
  Tensor a = gemm_ready(a_in), b = gemm_ready(b_in);
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  ep.ld_act = ep.ld_pre = ep.ld_out16 = ep.ld_act16 = ep.ld_pre16 = N;
  if (out.dtype() == DType::Float32) {
    Tensor bias = bias_in.defined() ? bias_in.contiguous() : Tensor();
    cpu::gemm_gelu_tanh(M, N, K, a.data_ptr<float>(), a.stride(0), a.stride(1), b.data_ptr<float>(), b.stride(0),
                        b.stride(1), out.data_ptr<float>(), N, bias.defined() ? bias.data_ptr<float>() : nullptr, ep);
    return;
  }
  Tensor bias = bias_in.defined() ? bias_in.to(DType::Float32).contiguous() : Tensor();  // (N)
  Tensor partial = empty({M, N}, {DType::Float32, out.device()});                        // (M, N)
  cpu::gemm_bf16_gelu_tanh(cpu::bf16_gemm_path(), M, N, K, reinterpret_cast<const uint16_t*>(a.data_ptr<BFloat16>()),
                           a.stride(0), a.stride(1), reinterpret_cast<const uint16_t*>(b.data_ptr<BFloat16>()),
                           b.stride(0), b.stride(1), partial.data_ptr<float>(), N,
                           bias.defined() ? bias.data_ptr<float>() : nullptr, ep);
}
uint16_t* bits16(const Tensor& t) { return reinterpret_cast<uint16_t*>(t.data_ptr<BFloat16>()); }
template <typename T>
void cpu_addmm_gelu_tanh(const Tensor& pre, const Tensor& act, const Tensor& bias, const Tensor& a, const Tensor& b) {
  cpu::GemmEpilogue ep;
  if constexpr (std::is_same_v<T, float>) {
    ep.kind = cpu::GemmEpilogue::Kind::kGeluForward;
    ep.act = act.data_ptr<float>();
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    ep.kind = cpu::GemmEpilogue::Kind::kGeluForwardBf16;
    ep.out16 = bits16(pre);
    ep.act16 = bits16(act);
  } else {
    WEFT_CHECK(false, "addmm_gelu_tanh: no CPU kernel for dtype ", dtype_of<T>);
  }
  gemm_gelu(pre, bias, a, b, ep);
}
template <typename T>
void cpu_mm_gelu_tanh_backward(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& pre) {
  cpu::GemmEpilogue ep;
  if constexpr (std::is_same_v<T, float>) {
    ep.kind = cpu::GemmEpilogue::Kind::kGeluBackward;
    ep.pre = pre.data_ptr<float>();
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    ep.kind = cpu::GemmEpilogue::Kind::kGeluBackwardBf16;
    ep.out16 = bits16(out);
    ep.pre16 = bits16(pre);
  } else {
    WEFT_CHECK(false, "mm_gelu_tanh_backward: no CPU kernel for dtype ", dtype_of<T>);
  }
  gemm_gelu(out, Tensor(), a, b, ep);
}
constexpr uint32_t kGeluGemmTypes = (1u << int(DType::Float32)) | (1u << int(DType::BFloat16));
WEFT_REGISTER_KERNEL(addmm_gelu_tanh_table(), DeviceType::CPU, kGeluGemmTypes, cpu_addmm_gelu_tanh);
WEFT_REGISTER_KERNEL(mm_gelu_tanh_backward_table(), DeviceType::CPU, kGeluGemmTypes, cpu_mm_gelu_tanh_backward);

template <typename T>
void cpu_mm_row_sums(const Tensor& out, const Tensor& sums, const Tensor& a_in, const Tensor& b_in) {
  WEFT_CHECK((std::is_same_v<T, float>), "mm_row_sums: no CPU kernel for dtype ", dtype_of<T>);
  Tensor a = gemm_ready(a_in), b = gemm_ready(b_in);
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  cpu::gemm_row_sums(M, N, K, a.data_ptr<float>(), a.stride(0), a.stride(1), b.data_ptr<float>(), b.stride(0),
                     b.stride(1), out.data_ptr<float>(), N, sums.data_ptr<float>());
}
constexpr uint32_t kFloat32Only = 1u << int(DType::Float32);
WEFT_REGISTER_KERNEL(mm_row_sums_table(), DeviceType::CPU, kFloat32Only, cpu_mm_row_sums);

Shape batch_of(const Tensor& t) { return Shape(t.sizes().begin(), t.sizes().end() - 2); }

void check_pair(const char* op, const Tensor& a, const Tensor& b) {
  WEFT_CHECK(a.defined() && b.defined(), op, ": undefined tensor argument");
  WEFT_CHECK(a.dtype() == b.dtype(), op, ": expected both operands to have the same dtype, got ", a.dtype(), " (shape ",
             shape_str(a.sizes()), ") and ", b.dtype(), " (shape ", shape_str(b.sizes()), ")");
  WEFT_CHECK(a.device() == b.device(), op, ": operands are on different devices: ", a.device(), " and ", b.device());
}

void check_inner(const char* op, const Tensor& a, const Tensor& b) {
  int64_t ka = a.size(-1), kb = b.dim() == 1 ? b.size(0) : b.size(-2);
  WEFT_CHECK(ka == kb, op, ": shapes ", shape_str(a.sizes()), " and ", shape_str(b.sizes()),
             " cannot be multiplied (inner dimensions ", ka, " and ", kb, " differ)");
}

Tensor mT(const Tensor& t) { return transpose(t, -2, -1); }

// A 2-D tensor laid out as the transpose of a contiguous one (Note [grad layout]).
bool col_major_2d(const Tensor& t) {
  return t.dim() == 2 && t.size(0) > 1 && t.size(1) > 1 && t.stride(0) == 1 && t.stride(1) == t.size(0);
}

// The one product op: a (..., M, K) @ b (..., K, N) with broadcast batch dims.
Tensor matmul_nd(const char* op, const char* node, const Tensor& a, const Tensor& b) {
  check_pair(op, a, b);
  check_inner(op, a, b);
  Shape batch = broadcast_shapes(op, batch_of(a), batch_of(b));
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  Shape ea = batch, eb = batch, eo = batch;
  ea.insert(ea.end(), {M, K});
  eb.insert(eb.end(), {K, N});
  eo.insert(eo.end(), {M, N});
  Tensor out = empty(eo, {a.dtype(), a.device()});
  matmul_table()(a.device(), a.dtype(), out, expand(a.detach(), ea), expand(b.detach(), eb));
  if (any_requires_grad({a, b})) {
    SavedTensor sa = b.requires_grad() ? SavedTensor(a) : SavedTensor();
    SavedTensor sb = a.requires_grad() ? SavedTensor(b) : SavedTensor();
    Shape za = a.sizes(), zb = b.sizes();
    std::string name = node;
    // Note [grad layout]: a 2-D operand stored transposed (col-major, such as
    // linear's weight.t()) gets its gradient computed as the transpose of the
    // swapped product, so the gradient is col-major too and the weight's own
    // gradient comes out contiguous (no transposed copy when it is accumulated).
    const bool ta = col_major_2d(a) && b.dim() == 2, tb = col_major_2d(b) && a.dim() == 2;
    record_differentiable(node, {a, b}, {out}, [sa, sb, za, zb, name, ta, tb](const std::vector<Tensor>& g) {
      Tensor ga, gb;
      if (sb.defined())
        ga = ta ? mT(matmul_nd("matmul", "MatmulBackward", sb.get(name), mT(g[0])))
                : sum_to(matmul_nd("matmul", "MatmulBackward", g[0], mT(sb.get(name))), za);
      if (sa.defined())
        gb = tb ? mT(matmul_nd("matmul", "MatmulBackward", mT(g[0]), sa.get(name)))
                : sum_to(matmul_nd("matmul", "MatmulBackward", mT(sa.get(name)), g[0]), zb);
      return std::vector<Tensor>{ga, gb};
    });
  }
  return out;
}

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  WEFT_CHECK(a_in.defined() && b_in.defined(), "matmul: undefined tensor argument");
  const Tensor a = autocast::lower(a_in), b = autocast::lower(b_in);  // core/autocast.h
  WEFT_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both arguments need at least 1 dimension, got shapes ",
             shape_str(a.sizes()), " and ", shape_str(b.sizes()));
  check_pair("matmul", a, b);
  check_inner("matmul", a, b);
  if (a.dim() == 1 && b.dim() == 1)  // dot
    return reshape(matmul_nd("matmul", "MatmulBackward", unsqueeze(a, 0), unsqueeze(b, 1)), {});
  if (a.dim() == 1)  // (K) @ (..., K, N) -> (..., N)
    return squeeze(matmul_nd("matmul", "MatmulBackward", unsqueeze(a, 0), b), -2);
  if (b.dim() <= 2) {
    // (..., M, K) @ (K, N) or (K): fold the batch into the rows (one big GEMM).
    Shape out_shape(a.sizes().begin(), a.sizes().end() - 1);
    int64_t rows = numel_of(out_shape);
    Tensor a2 = a.dim() == 2 ? a : reshape(a, {rows, a.size(-1)});
    Tensor b2 = b.dim() == 1 ? unsqueeze(b, 1) : b;
    Tensor r = matmul_nd("matmul", "MatmulBackward", a2, b2);
    if (b.dim() == 2) out_shape.push_back(b.size(1));
    return a.dim() == 2 && b.dim() == 2 ? r : reshape(r, out_shape);
  }
  if (b.dim() == 1) return squeeze(matmul_nd("matmul", "MatmulBackward", a, unsqueeze(b, 1)), -1);
  return matmul_nd("matmul", "MatmulBackward", a, b);
}

Tensor mm(const Tensor& a_in, const Tensor& b_in) {
  WEFT_CHECK(a_in.defined() && b_in.defined(), "mm: undefined tensor argument");
  const Tensor a = autocast::lower(a_in), b = autocast::lower(b_in);
  WEFT_CHECK(a.dim() == 2 && b.dim() == 2, "mm: expected 2-D operands, got shapes ", shape_str(a.sizes()), " and ",
             shape_str(b.sizes()));
  return matmul_nd("mm", "MmBackward", a, b);
}

Tensor bmm(const Tensor& a_in, const Tensor& b_in) {
  WEFT_CHECK(a_in.defined() && b_in.defined(), "bmm: undefined tensor argument");
  const Tensor a = autocast::lower(a_in), b = autocast::lower(b_in);
  WEFT_CHECK(a.dim() == 3 && b.dim() == 3, "bmm: expected 3-D operands, got shapes ", shape_str(a.sizes()), " and ",
             shape_str(b.sizes()));
  WEFT_CHECK(a.size(0) == b.size(0), "bmm: batch sizes differ: shapes ", shape_str(a.sizes()), " and ",
             shape_str(b.sizes()));
  return matmul_nd("bmm", "BmmBackward", a, b);
}

namespace {

// dW = g^T x and db = g summed over rows from one kernel, where the device
// registers mm_row_sums for g's dtype and x has it too; false (nothing
// computed) otherwise, and the caller runs matmul and a sum. g (rows, out_f),
// x (rows, in_f).
bool fused_weight_and_bias_grad(const Tensor& g, const Tensor& x, Tensor& dw, Tensor& db) {
  const Device dev = g.device();
  const DType dt = g.dtype();
  if (!x.defined() || !mm_row_sums_table().has(dev.type, dt) || x.dtype() != dt || x.device() != dev) return false;
  dw = empty({g.size(1), x.size(1)}, {dt, dev});  // (out_f, in_f)
  db = empty({g.size(1)}, {dt, dev});             // (out_f)
  mm_row_sums_table()(dev, dt, dw, db, mT(g), x);
  return true;
}

}  // namespace

// linear's backward is two nodes (Note [parameters first] in
// core/autograd_meta.h): "LinearWeightBackward" (dW = g^T x, db = sum of g over
// rows) runs before "LinearInputBackward" (dx = g W). Forward: with a bias, where
// the device registers addmm (the CPU, float32/float64), x is flattened to
// (rows, in_f) and y = bias + x W^T is one GEMM with the bias fused; elsewhere
// y = matmul(x, W^T) and the bias is added in a second pass.
Tensor linear(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in) {
  detail::check_devices("linear", {x_in, weight_in, bias_in});
  WEFT_CHECK(x_in.defined() && weight_in.defined(), "linear: undefined input or weight");
  const Tensor x = autocast::lower(x_in), weight = autocast::lower(weight_in), bias = autocast::lower(bias_in);
  WEFT_CHECK(weight.dim() == 2, "linear: weight must be 2-D (out_features, in_features), got shape ",
             shape_str(weight.sizes()));
  WEFT_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), "linear: input shape ", shape_str(x.sizes()),
             " does not end in in_features = ", weight.size(1), " of weight shape ", shape_str(weight.sizes()));
  if (bias.defined()) {
    WEFT_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), "linear: bias shape ", shape_str(bias.sizes()),
               " does not match out_features = ", weight.size(0), " of weight shape ", shape_str(weight.sizes()));
    WEFT_CHECK(bias.dtype() == x.dtype(), "linear: bias dtype ", bias.dtype(), " differs from input dtype ", x.dtype());
  }
  const int64_t in_f = weight.size(1), out_f = weight.size(0);
  const int64_t rows = numel_of(Shape(x.sizes().begin(), x.sizes().end() - 1));
  Tensor y;  // (..., out_f)
  {
    NoGradGuard no_grad;
    if (bias.defined() && addmm_table().has(x.device().type, x.dtype())) {
      Shape ys(x.sizes().begin(), x.sizes().end() - 1);
      ys.push_back(out_f);
      Tensor x2 = x.dim() == 2 ? x.detach() : reshape(x.detach(), {rows, in_f});  // (rows, in_f)
      Tensor y2 = empty({rows, out_f}, {x.dtype(), x.device()});                  // (rows, out_f)
      addmm_table()(x.device(), x.dtype(), y2, bias.detach(), x2, transpose(weight.detach(), 0, 1));
      y = x.dim() == 2 ? y2 : reshape(y2, ys);
    } else {
      y = matmul(x.detach(), transpose(weight.detach(), 0, 1));
      if (bias.defined()) y.add_(bias.detach());
    }
  }
  if (!any_requires_grad({x, weight, bias})) return y;

  SavedTensor sx = weight.requires_grad() ? SavedTensor(x) : SavedTensor();
  const bool need_b = bias.defined() && bias.requires_grad();
  BackwardPart params{
      "LinearWeightBackward",
      {weight, bias},
      [sx, rows, in_f, out_f, need_b](const std::vector<Tensor>& g) {
        Tensor g2 = reshape(g[0], {rows, out_f});  // (rows, out_f)
        Tensor dw, db;
        // the fused kernel records no graph: not when differentiating twice (Note [double backward])
        if (sx.defined() && need_b && !GradMode::is_enabled() &&
            fused_weight_and_bias_grad(g2, reshape(sx.get("LinearWeightBackward"), {rows, in_f}), dw, db))
          return std::vector<Tensor>{dw, db};
        if (sx.defined()) {
          Tensor x2 = reshape(sx.get("LinearWeightBackward"), {rows, in_f});  // (rows, in_f)
          dw = matmul_nd("linear", "LinearWeightBackward", mT(g2), x2);       // (out_f, in_f)
        }
        if (need_b) db = sum_to(g2, {out_f});  // (out_f)
        return std::vector<Tensor>{dw, db};
      },
      /*differentiable=*/true};
  SavedTensor sw = x.requires_grad() ? SavedTensor(weight) : SavedTensor();
  const Shape xs = x.sizes();
  BackwardPart input{"LinearInputBackward",
                     {x},
                     [sw, xs, rows, out_f](const std::vector<Tensor>& g) {
                       Tensor g2 = reshape(g[0], {rows, out_f});  // (rows, out_f)
                       // (rows, out_f) @ (out_f, in_f) -> (rows, in_f)
                       Tensor dx = matmul_nd("linear", "LinearInputBackward", g2, sw.get("LinearInputBackward"));
                       return std::vector<Tensor>{reshape(dx, xs)};
                     },
                     /*differentiable=*/true};
  record_function_parts("LinearBackward", y, std::move(params), std::move(input));
  return y;
}

// Note [fused mlp]: mlp_gelu_tanh is linear(gelu_tanh(linear(x, w1, b1)), w2, b2)
// with the GELU in GEMM epilogues where the device registers them (Note [gemm
// epilogue]): forward, h = b1 + x w1^T and a = gelu(h) leave one GEMM; backward,
// dh = (g w2) * gelu'(h) leaves the GEMM of a's gradient, so the (rows, hidden)
// activation gradient is never written or read back. Saved: x, w1, w2, h and a
// (what linear, gelu, linear save). The backward is two nodes (Note [parameters
// first]): "MlpGeluWeightBackward" (dw2 = g^T a, db2, dh, dw1 = dh^T x, db1),
// then "MlpGeluInputBackward" (dx = dh w1), which reuses the first node's dh when
// both run on the same gradient. The CPU fuses float32 and bfloat16 (autocast's
// dtype: h and a are rounded as the GEMM stores them, a from the rounded h, and
// dh rounds (g w2) * gelu'(h) once where the composed ops round g w2 first).
// Elsewhere (other devices or dtypes) it composes the three ops, with their
// errors.
Tensor mlp_gelu_tanh(const Tensor& x_in, const Tensor& w1_in, const Tensor& b1_in, const Tensor& w2_in,
                     const Tensor& b2_in) {
  detail::check_devices("mlp_gelu_tanh", {x_in, w1_in, b1_in, w2_in, b2_in});
  WEFT_CHECK(x_in.defined() && w1_in.defined() && b1_in.defined() && w2_in.defined() && b2_in.defined(),
             "mlp_gelu_tanh: undefined input, weight or bias");
  const Tensor x = autocast::lower(x_in), w1 = autocast::lower(w1_in), b1 = autocast::lower(b1_in),
               w2 = autocast::lower(w2_in), b2 = autocast::lower(b2_in);
  const Device dev = x.device();
  const DType dt = x.dtype();
  const bool fused = addmm_gelu_tanh_table().has(dev.type, dt) && mm_gelu_tanh_backward_table().has(dev.type, dt) &&
                     addmm_table().has(dev.type, dt) && w1.dtype() == dt && b1.dtype() == dt && w2.dtype() == dt &&
                     b2.dtype() == dt && x.dim() >= 1 && w1.dim() == 2 && w2.dim() == 2 && b1.dim() == 1 &&
                     b2.dim() == 1 && x.size(-1) == w1.size(1) && b1.size(0) == w1.size(0) &&
                     w2.size(1) == w1.size(0) && b2.size(0) == w2.size(0);
  if (!fused) return linear(gelu(linear(x, w1, b1), GeluApproximation::Tanh), w2, b2);

  const int64_t in_f = w1.size(1), hid = w1.size(0), out_f = w2.size(0);
  const int64_t rows = numel_of(Shape(x.sizes().begin(), x.sizes().end() - 1));
  Shape ys(x.sizes().begin(), x.sizes().end() - 1);
  ys.push_back(out_f);
  Tensor x2, h, a, y;
  {
    NoGradGuard no_grad;
    x2 = reshape(x.detach(), {rows, in_f});       // (rows, in_f)
    h = empty({rows, hid}, {dt, dev});            // (rows, hid) pre-activation
    a = empty({rows, hid}, {dt, dev});            // (rows, hid) gelu(h)
    Tensor y2 = empty({rows, out_f}, {dt, dev});  // (rows, out_f)
    addmm_gelu_tanh_table()(dev, dt, h, a, b1.detach(), x2, transpose(w1.detach(), 0, 1));
    addmm_table()(dev, dt, y2, b2.detach(), a, transpose(w2.detach(), 0, 1));
    y = reshape(y2, ys);
  }
  if (!any_requires_grad({x, w1, b1, w2, b2})) return y;

  // dh from the output gradient, shared by the two nodes: kept with the gradient
  // it came from (holding that tensor, so a later gradient cannot reuse its memory).
  struct Stash {
    Tensor g, dh;
  };
  auto stash = std::make_shared<Stash>();
  const SavedTensor sw2 = SavedTensor(w2);
  auto grad_h = [h, sw2, dev, dt, rows, hid](const Tensor& g2, const char* node) {
    Tensor dh = empty({rows, hid}, {dt, dev});  // (rows, hid)
    mm_gelu_tanh_backward_table()(dev, dt, dh, g2, sw2.get(node), h);
    return dh;
  };
  const bool need_x = x.requires_grad(), need_w1 = w1.requires_grad(), need_b1 = b1.requires_grad(),
             need_w2 = w2.requires_grad(), need_b2 = b2.requires_grad();
  const SavedTensor sx = need_w1 ? SavedTensor(x) : SavedTensor();
  BackwardPart params{
      "MlpGeluWeightBackward",
      {w1, b1, w2, b2},
      [=](const std::vector<Tensor>& g) {
        const char* node = "MlpGeluWeightBackward";
        Tensor g2 = reshape(g[0], {rows, out_f});  // (rows, out_f)
        Tensor dw1, db1, dw2, db2;
        if (!(need_w2 && need_b2 && fused_weight_and_bias_grad(g2, a, dw2, db2))) {
          if (need_w2) dw2 = matmul_nd("mlp_gelu_tanh", node, mT(g2), a);  // (out_f, hid)
          if (need_b2) db2 = sum_to(g2, {out_f});
        }
        if (need_w1 || need_b1 || need_x) {
          Tensor dh = grad_h(g2, node);  // (rows, hid)
          if (!(need_w1 && need_b1 && fused_weight_and_bias_grad(dh, reshape(sx.get(node), {rows, in_f}), dw1, db1))) {
            if (need_w1)
              dw1 = matmul_nd("mlp_gelu_tanh", node, mT(dh), reshape(sx.get(node), {rows, in_f}));  // (hid, in_f)
            if (need_b1) db1 = sum_to(dh, {hid});
          }
          if (need_x) *stash = Stash{g[0], dh};
        }
        return std::vector<Tensor>{dw1, db1, dw2, db2};
      },
      /*differentiable=*/false,
      /*composite_wrt=*/{1, 2, 3, 4}};
  const SavedTensor sw1 = need_x ? SavedTensor(w1) : SavedTensor();
  const Shape xs = x.sizes();
  BackwardPart input{"MlpGeluInputBackward",
                     {x},
                     [=](const std::vector<Tensor>& g) {
                       const char* node = "MlpGeluInputBackward";
                       Tensor dh = stash->g.defined() && stash->g.is_same(g[0])
                                       ? stash->dh
                                       : grad_h(reshape(g[0], {rows, out_f}), node);  // (rows, hid)
                       *stash = Stash{};
                       Tensor dx = matmul_nd("mlp_gelu_tanh", node, dh, sw1.get(node));  // (rows, in_f)
                       return std::vector<Tensor>{reshape(dx, xs)};
                     },
                     /*differentiable=*/false,
                     /*composite_wrt=*/{0}};
  // Note [composite double backward]: the three ops the fused path stands for
  record_function_parts(
      "MlpGeluBackward", y, std::move(params), std::move(input), {x, w1, b1, w2, b2},
      [](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{linear(gelu(linear(in[0], in[1], in[2]), GeluApproximation::Tanh), in[3], in[4])};
      });
  return y;
}

}  // namespace weft
