// conv2d: 2-D convolution (cross-correlation) over NCHW images, PyTorch semantics.
//
// Contract: x (N, C_in, H, W) or unbatched (C_in, H, W); weight
// (C_out, C_in / groups, kH, kW); bias (C_out) or undefined. Output
// (N, C_out, OH, OW) with OH = (H + 2 pH - dH (kH - 1) - 1) / sH + 1 (floor).
// float32/float64 run on the CPU kernels below; float16/bfloat16 are computed in
// float32 by the front end (through differentiable casts).
//
// CPU kernels: float32 layers with few taps per output (C * kH * kW <= 32,
// stride 1, "same" width: an image network's first layer) run the direct
// AVX-512 kernels of core/cpu/conv_direct_avx512.h for the output and the
// weight and bias gradients; everything else, and their input gradient, runs
// im2col + GEMM (core/cpu/im2col.h, core/cpu/gemm.h), parallel over
// chunks of images (Note [conv image chunks]): each thread unfolds a chunk into
// a private column buffer and runs one GEMM per (chunk, group). gemm called
// inside parallel_for runs inline (parallel_for does not nest), so a batch of
// one chunk still gets a threaded GEMM. On AVX-512, float32 stride-1 layers
// of one group whose output rows are as wide as the input's (3x3 "same"
// convolutions) skip the column buffer for the output and the weight
// gradient: the GEMM packs its B panels straight from the images
// (core/cpu/conv_cols_avx512.h), the same values, so the same bits. Where
// the output channels fill the vector lanes, the float32 forward of any
// layer of one group with a column stride of 1 or 2 runs the direct kernel of
// core/cpu/conv_lanes_avx512.h instead (output channels in the lanes, no
// column matrix at all), summing in the GEMM's order: the same bits again;
// where the input channels do, so does the input gradient of those stride-1
// "same" layers, as a convolution of the output gradient in place of GEMM +
// col2im.
// Note [conv weight-grad determinism]: grad_weight sums per-chunk products; each
// chunk's partial lands in its own slot and the slots are summed in chunk
// order, so the result does not depend on the thread count.
#include "core/kernels/conv.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "core/autocast.h"
#include "core/autograd_meta.h"
#include "core/cpu/conv_cols_avx512.h"
#include "core/cpu/conv_direct_avx512.h"
#include "core/cpu/conv_lanes_avx512.h"
#include "core/cpu/gemm.h"
#include "core/cpu/im2col.h"
#include "core/dispatch.h"
#include "core/nn_ops.h"
#include "core/ops/conv_args.h"
#include "core/ops/elementwise_util.h"
#include "core/parallel.h"

namespace weft {

Conv2dKernel& conv2d_table() {
  static Conv2dKernel t("conv2d");
  return t;
}
Conv2dBackwardKernel& conv2d_backward_table() {
  static Conv2dBackwardKernel t("conv2d_backward");
  return t;
}

namespace {

constexpr uint32_t kConvTypes = (1u << int(DType::Float32)) | (1u << int(DType::Float64));

cpu::Conv2dGeom geom_of(const Tensor& x, const Tensor& w, const Tensor& out, const Conv2dParams& p) {
  return {x.size(1) / p.groups, x.size(2),  x.size(3), w.size(2), w.size(3), p.sH, p.sW, p.pH, p.pW, p.dH, p.dW,
          out.size(2),          out.size(3)};
}

// Note [conv image chunks]: images are processed in chunks of B side by side, so
// each GEMM sees B * OH * OW columns (a few hundred at least: Eigen's blocking
// and gemm.h's block grid are efficient there, not on one small image). B
// depends on the shape only, and every output element is computed by the same
// chunk GEMM whatever the thread count.
int64_t chunk_images(int64_t N, int64_t L) {
  return std::clamp<int64_t>((256 + L - 1) / L, 1, std::max<int64_t>(N, 1));
}

// C (m, n) row-major with leading dimension ldc = A (m, k) * B (k, n); strides as
// in gemm.h. Inside the chunk loop this runs inline on the calling thread.
template <typename T>
void gemm1(int64_t m, int64_t n, int64_t k, const T* a, int64_t a_rs, int64_t a_cs, const T* b, int64_t b_rs,
           int64_t b_cs, T* c, int64_t ldc) {
  const int64_t zero = 0;
  cpu::gemm_batched(1, &zero, &zero, m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, 0, ldc);
}

// The threads a parallel_for here would use (1 inside a parallel region).
int threads_here() { return in_parallel_region() ? 1 : get_num_threads(); }

// The plan of the implicit column matrix (core/cpu/conv_cols_avx512.h) where
// the float32 GEMMs can take it, else nullptr (im2col). The chunks' GEMMs then
// run on their own threads, so it needs a chunk per thread at least: with
// fewer, im2col + a threaded GEMM keeps the threads busy (same bits either way).
template <typename T>
std::unique_ptr<cpu::ConvColsPlan> implicit_cols(const cpu::Conv2dGeom& g, int64_t groups, int64_t chunks) {
  if constexpr (std::is_same_v<T, float>) {
    if (cpu::conv_cols_applies(g, groups) && chunks >= threads_here()) return std::make_unique<cpu::ConvColsPlan>(g);
  }
  return nullptr;
}

template <typename T>
void conv2d_forward_impl(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p) {
  const cpu::Conv2dGeom g = geom_of(x, w, out, p);
  const int64_t N = x.size(0), G = p.groups, Cin = x.size(1), Cout = out.size(1);
  const int64_t Cog = Cout / G, Kg = g.C * g.kH * g.kW, L = g.OH * g.OW, HW = g.H * g.W;
  const int64_t B = chunk_images(N, L), chunks = (N + B - 1) / B;
  const T* px = x.data_ptr<T>();
  const T* pw = w.data_ptr<T>();
  const T* pb = b.defined() ? b.data_ptr<T>() : nullptr;
  T* po = out.data_ptr<T>();
  if constexpr (std::is_same_v<T, float>) {
    if (cpu::conv_direct_applies(g, G)) {
      cpu::conv_direct_forward(N, px, pw, pb, Cout, g, po);
      return;
    }
    // (threads split the images: with fewer images than threads the GEMM
    // paths below keep every thread busy, with the same bits)
    if (cpu::conv_lanes_applies(g, G, Cout) && N >= threads_here()) {
      cpu::conv_lanes_forward(N, px, pw, pb, Cout, g, po);
      return;
    }
  }
  const std::unique_ptr<cpu::ConvColsPlan> plan = implicit_cols<T>(g, G, chunks);
  parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
    std::vector<T> cols(plan ? 0 : G * Kg * B * L);  // (G * Kg, B * L)
    std::vector<T> cbuf(B > 1 ? Cout * B * L : 0);   // (C_out, B * L)
    for (int64_t ch = c0; ch < c1; ++ch) {
      const int64_t n0 = ch * B, nb = std::min(B, N - n0), ld = nb * L;
      T* dst = nb == 1 ? po + n0 * Cout * L : cbuf.data();
      // out_g (Cog, nb * L) = W_g (Cog, Kg) * cols_g (Kg, nb * L)
      if constexpr (std::is_same_v<T, float>) {
        if (plan) {
          cpu::gemm_avx512_f32_packed_b(Cout, ld, Kg, pw, Kg, 1, cpu::ConvColsPack(*plan, px + n0 * Cin * HW), dst, ld,
                                        false);
        }
      }
      if (!plan) {
        for (int64_t i = 0; i < nb; ++i)
          for (int64_t gi = 0; gi < G; ++gi)
            cpu::im2col(px + (n0 + i) * Cin * HW + gi * g.C * HW, g, cols.data() + gi * Kg * ld + i * L, ld);
        for (int64_t gi = 0; gi < G; ++gi)
          gemm1<T>(Cog, ld, Kg, pw + gi * Cog * Kg, Kg, 1, cols.data() + gi * Kg * ld, ld, 1, dst + gi * Cog * ld, ld);
      }
      for (int64_t i = 0; i < nb; ++i)
        for (int64_t c = 0; c < Cout; ++c) {
          T* orow = po + ((n0 + i) * Cout + c) * L;
          const T bv = pb ? pb[c] : T(0);
          if (nb > 1) {
            // (no bias: a copy, so the sums keep their signed zeros as in the nb == 1 case)
            const T* src = dst + c * ld + i * L;
            if (pb)
              for (int64_t l = 0; l < L; ++l) orow[l] = src[l] + bv;
            else std::memcpy(orow, src, L * sizeof(T));
          } else if (pb) {
            for (int64_t l = 0; l < L; ++l) orow[l] += bv;
          }
        }
    }
  });
}

template <typename T>
void conv2d_backward_impl(const Tensor& gx, const Tensor& gw, const Tensor& gb, const Tensor& go, const Tensor& x,
                          const Tensor& w, const Conv2dParams& p) {
  const cpu::Conv2dGeom g = geom_of(x, w, go, p);
  const int64_t N = x.size(0), G = p.groups, Cin = x.size(1), Cout = go.size(1);
  const int64_t Cog = Cout / G, Kg = g.C * g.kH * g.kW, L = g.OH * g.OW, HW = g.H * g.W;
  const int64_t WN = Cout * Kg;  // weight numel
  if (N == 0) {                  // no images: zero weight and bias gradients (gx is empty)
    for (const Tensor* t : {&gw, &gb})
      if (t->defined()) std::memset(t->raw_data(), 0, t->nbytes());
    return;
  }
  const int64_t B = chunk_images(N, L), chunks = (N + B - 1) / B;
  const T* px = x.data_ptr<T>();
  const T* pw = w.data_ptr<T>();
  const T* pgo = go.data_ptr<T>();
  T* pgx = gx.defined() ? gx.data_ptr<T>() : nullptr;
  T* pgw = gw.defined() ? gw.data_ptr<T>() : nullptr;
  bool gb_done = false;
  if constexpr (std::is_same_v<T, float>) {
    // few taps (a first layer): the weight and bias gradients in one direct pass
    if (pgw && cpu::conv_direct_applies(g, G)) {
      cpu::conv_direct_weight_grad(N, px, pgo, Cout, g, pgw, gb.defined() ? gb.data_ptr<T>() : nullptr);
      pgw = nullptr;
      gb_done = true;
    }
    // the input gradient as a convolution of go (the threads split the images)
    if (pgx && cpu::conv_lanes_input_grad_applies(g, G) && N >= threads_here()) {
      cpu::conv_lanes_input_grad(N, pgo, pw, Cout, g, pgx);
      pgx = nullptr;
    }
  }

  if (pgx || pgw) {
    // Note [conv weight-grad determinism]: chunk c's partial goes to slot c
    // (slot 0 is gw itself); slots are summed in order afterwards.
    std::vector<T> partial(pgw ? (chunks - 1) * WN : 0);
    const std::unique_ptr<cpu::ConvColsPlan> plan = pgw ? implicit_cols<T>(g, G, chunks) : nullptr;
    parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
      std::vector<T> cols(plan && !pgx ? 0 : G * Kg * B * L);  // (G * Kg, B * L)
      std::vector<T> gbuf;                                     // grad_out of the chunk, (C_out, B * L), where gathered
      for (int64_t ch = c0; ch < c1; ++ch) {
        const int64_t n0 = ch * B, nb = std::min(B, N - n0), ld = nb * L;
        // Note [conv per-image weight gradient]: where the GEMM would cut the
        // chunk's nb * L positions into K blocks of one image each, one GEMM
        // per image, each adding its sums to the images' before it, gives the
        // same bits and reads grad_out where it lies: no gather.
        bool per_image = false;
        if constexpr (std::is_same_v<T, float>) per_image = plan && !pgx && nb > 1 && cpu::gemm_avx512_k_block(ld) == L;
        const T* gch = pgo + n0 * Cout * L;
        if (nb > 1 && !per_image) {
          gbuf.resize(Cout * B * L);
          for (int64_t i = 0; i < nb; ++i)
            for (int64_t c = 0; c < Cout; ++c)
              std::memcpy(gbuf.data() + c * ld + i * L, pgo + ((n0 + i) * Cout + c) * L, L * sizeof(T));
          gch = gbuf.data();
        }
        if (pgw) {
          T* acc = ch == 0 ? pgw : partial.data() + (ch - 1) * WN;
          // dW_g (Cog, Kg) = go_g (Cog, nb * L) * cols_g^T (nb * L, Kg)
          if constexpr (std::is_same_v<T, float>) {
            if (per_image) {
              for (int64_t i = 0; i < nb; ++i)
                cpu::gemm_avx512_f32_packed_b(Cout, Kg, L, gch + i * Cout * L, L, 1,
                                              cpu::ConvColsTPack(*plan, px + (n0 + i) * Cin * HW), acc, Kg, i > 0);
            } else if (plan) {
              cpu::gemm_avx512_f32_packed_b(Cout, Kg, ld, gch, ld, 1, cpu::ConvColsTPack(*plan, px + n0 * Cin * HW),
                                            acc, Kg, false);
            }
          }
          if (!plan) {
            for (int64_t i = 0; i < nb; ++i)
              for (int64_t gi = 0; gi < G; ++gi)
                cpu::im2col(px + (n0 + i) * Cin * HW + gi * g.C * HW, g, cols.data() + gi * Kg * ld + i * L, ld);
            for (int64_t gi = 0; gi < G; ++gi)
              gemm1<T>(Cog, Kg, ld, gch + gi * Cog * ld, ld, 1, cols.data() + gi * Kg * ld, 1, ld, acc + gi * Cog * Kg,
                       Kg);
          }
        }
        if (pgx) {
          // dcols_g (Kg, nb * L) = W_g^T (Kg, Cog) * go_g (Cog, nb * L), then col2im image by image
          T* dcols = cols.data();
          for (int64_t gi = 0; gi < G; ++gi)
            gemm1<T>(Kg, ld, Cog, pw + gi * Cog * Kg, 1, Kg, gch + gi * Cog * ld, ld, 1, dcols + gi * Kg * ld, ld);
          for (int64_t i = 0; i < nb; ++i) {
            T* gxn = pgx + (n0 + i) * Cin * HW;
            std::fill(gxn, gxn + Cin * HW, T(0));
            for (int64_t gi = 0; gi < G; ++gi) cpu::col2im(dcols + gi * Kg * ld + i * L, g, gxn + gi * g.C * HW, ld);
          }
        }
      }
    });
    if (pgw && chunks > 1) {
      parallel_for(0, WN, 4096, [&](int64_t i0, int64_t i1) {
        for (int64_t ch = 1; ch < chunks; ++ch) {
          const T* src = partial.data() + (ch - 1) * WN;
          for (int64_t i = i0; i < i1; ++i) pgw[i] += src[i];
        }
      });
    }
  }
  if (gb.defined() && !gb_done) {
    T* pgb = gb.data_ptr<T>();
    parallel_for(0, Cout, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(N * L, 1)), [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        T s = 0;
        for (int64_t n = 0; n < N; ++n) {
          const T* row = pgo + (n * Cout + c) * L;
          // 16 independent partial sums (vectorises without reassociation), fixed order
          T part[16] = {};
          int64_t l = 0;
          for (; l + 16 <= L; l += 16)
            for (int j = 0; j < 16; ++j) part[j] += row[l + j];
          T rs = 0;
          for (; l < L; ++l) rs += row[l];
          for (int j = 0; j < 16; ++j) rs += part[j];
          s += rs;
        }
        pgb[c] = s;
      }
    });
  }
}

template <typename T>
void cpu_conv2d(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) conv2d_forward_impl<T>(out, x, w, b, p);
  else WEFT_CHECK(false, "conv2d: no CPU kernel for dtype ", dtype_of<T>);
}
template <typename T>
void cpu_conv2d_backward(const Tensor& gx, const Tensor& gw, const Tensor& gb, const Tensor& go, const Tensor& x,
                         const Tensor& w, const Conv2dParams& p) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) conv2d_backward_impl<T>(gx, gw, gb, go, x, w, p);
  else WEFT_CHECK(false, "conv2d_backward: no CPU kernel for dtype ", dtype_of<T>);
}
WEFT_REGISTER_KERNEL(conv2d_table(), DeviceType::CPU, kConvTypes, cpu_conv2d);
WEFT_REGISTER_KERNEL(conv2d_backward_table(), DeviceType::CPU, kConvTypes, cpu_conv2d_backward);

// Note [composite double backward]: conv2d from recorded ops, for a backward
// with create_graph: one batched matmul per kernel tap, over the zero-padded
// input's strided window for that tap.
Tensor conv2d_composite(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p) {
  const int64_t N = x.size(0), Cin = x.size(1), Cout = w.size(0), kH = w.size(2), kW = w.size(3), G = p.groups;
  Tensor xp = x;  // (N, Cin, H + 2 pH, W + 2 pW)
  if (p.pH > 0) {
    Tensor z = zeros({N, Cin, p.pH, xp.size(3)}, xp.options());
    xp = cat({z, xp, z}, 2);
  }
  if (p.pW > 0) {
    Tensor z = zeros({N, Cin, xp.size(2), p.pW}, xp.options());
    xp = cat({z, xp, z}, 3);
  }
  const int64_t OH = (xp.size(2) - p.dH * (kH - 1) - 1) / p.sH + 1;
  const int64_t OW = (xp.size(3) - p.dW * (kW - 1) - 1) / p.sW + 1;
  const Tensor wg = w.reshape({G, Cout / G, Cin / G, kH, kW});
  Tensor out;  // (N, G, Cout / G, OH * OW)
  for (int64_t i = 0; i < kH; ++i) {
    for (int64_t j = 0; j < kW; ++j) {
      Tensor win = slice(xp, 2, i * p.dH, i * p.dH + (OH - 1) * p.sH + 1, p.sH);
      win = slice(win, 3, j * p.dW, j * p.dW + (OW - 1) * p.sW + 1, p.sW);  // (N, Cin, OH, OW)
      const Tensor tap = select(select(wg, 4, j), 3, i);                    // (G, Cout / G, Cin / G)
      const Tensor t = matmul(tap, win.reshape({N, G, Cin / G, OH * OW}));  // (N, G, Cout / G, OH * OW)
      out = out.defined() ? out + t : t;
    }
  }
  out = out.reshape({N, Cout, OH, OW});
  return b.defined() ? out + b.view({1, Cout, 1, 1}) : out;
}

// conv2d without autocast (its recursive calls must not re-cast).
Tensor conv2d_impl(const Tensor& x_in, const Tensor& weight, const Tensor& bias, std::array<int64_t, 2> stride,
                   std::array<int64_t, 2> padding, std::array<int64_t, 2> dilation, int64_t groups) {
  detail::check_devices("conv2d", {x_in, weight, bias});
  WEFT_CHECK(x_in.defined() && weight.defined(), "conv2d: undefined input or weight");
  WEFT_CHECK(x_in.dim() == 3 || x_in.dim() == 4,
             "conv2d: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape ", shape_str(x_in.sizes()));
  if (x_in.dim() == 3)
    return squeeze(conv2d_impl(unsqueeze(x_in, 0), weight, bias, stride, padding, dilation, groups), 0);
  const Tensor& x = x_in;
  WEFT_CHECK(weight.dim() == 4, "conv2d: expected a 4-D weight (C_out, C_in / groups, kH, kW), got shape ",
             shape_str(weight.sizes()));
  detail::check_conv_args("conv2d", stride, padding, dilation, groups);
  const int64_t N = x.size(0), Cin = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t Cout = weight.size(0), kH = weight.size(2), kW = weight.size(3);
  WEFT_CHECK(Cin % groups == 0, "conv2d: groups = ", groups, " does not divide the ", Cin,
             " input channels of input shape ", shape_str(x.sizes()));
  WEFT_CHECK(Cout % groups == 0, "conv2d: groups = ", groups, " does not divide the ", Cout,
             " output channels of weight shape ", shape_str(weight.sizes()));
  WEFT_CHECK(weight.size(1) * groups == Cin, "conv2d: input shape ", shape_str(x.sizes()), " has ", Cin,
             " channels but weight shape ", shape_str(weight.sizes()), " with groups = ", groups, " expects ",
             weight.size(1) * groups);
  WEFT_CHECK(x.dtype() == weight.dtype(), "conv2d: input dtype ", x.dtype(), " and weight dtype ", weight.dtype(),
             " differ");
  WEFT_CHECK(x.device() == weight.device(), "conv2d: input and weight are on different devices");
  if (bias.defined()) {
    WEFT_CHECK(bias.dim() == 1 && bias.size(0) == Cout, "conv2d: bias shape ", shape_str(bias.sizes()),
               " does not match the ", Cout, " output channels of weight shape ", shape_str(weight.sizes()));
    WEFT_CHECK(bias.dtype() == x.dtype(), "conv2d: bias dtype ", bias.dtype(), " differs from input dtype ", x.dtype());
  }
  const int64_t OH = (H + 2 * padding[0] - dilation[0] * (kH - 1) - 1) / stride[0] + 1;
  const int64_t OW = (W + 2 * padding[1] - dilation[1] * (kW - 1) - 1) / stride[1] + 1;
  WEFT_CHECK(H + 2 * padding[0] - dilation[0] * (kH - 1) - 1 >= 0 &&
                 W + 2 * padding[1] - dilation[1] * (kW - 1) - 1 >= 0 && OH > 0 && OW > 0,
             "conv2d: input shape ", shape_str(x.sizes()), " (padded by ", detail::pair_str(padding),
             ") is smaller than the dilated kernel of weight shape ", shape_str(weight.sizes()), " (dilation ",
             detail::pair_str(dilation), "): output size would be <= 0");
  WEFT_CHECK(is_floating(x.dtype()), "conv2d: expected a floating dtype, got ", x.dtype());

  // 16-bit types run natively where the backend registers them (cuDNN), else in float32
  if (detail::conv_in_float32(x)) {
    Tensor bf = bias.defined() ? bias.to(DType::Float32) : Tensor();
    return conv2d_impl(x.to(DType::Float32), weight.to(DType::Float32), bf, stride, padding, dilation, groups)
        .to(x.dtype());
  }

  const Conv2dParams p{stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1], groups};
  Tensor xc = x.detach().contiguous(), wc = weight.detach().contiguous();
  Tensor bc = bias.defined() ? bias.detach().contiguous() : Tensor();
  Tensor out = empty({N, Cout, OH, OW}, {x.dtype(), x.device()});
  conv2d_table()(x.device(), x.dtype(), out, xc, wc, bc, p);

  // Two backward nodes, parameters first (Note [parameters first] in core/autograd_meta.h).
  if (any_requires_grad({x, weight, bias})) {
    const bool need_w = weight.requires_grad(), need_b = bias.defined() && bias.requires_grad();
    SavedTensor sx = need_w ? SavedTensor(xc) : SavedTensor();  // x is needed for grad_weight only
    Shape xshape = x.sizes(), wshape = weight.sizes();
    BackwardPart params{"Conv2dWeightBackward",
                        {weight, bias},
                        [sx, xshape, wshape, p, need_w, need_b](const std::vector<Tensor>& grads) {
                          Tensor go = grads[0].detach().contiguous();  // (N, Cout, OH, OW)
                          // The kernel reads the weight's geometry only here: a shape stand-in.
                          Tensor wv = make_view(go, wshape, Shape(wshape.size(), 0), 0);
                          Tensor xv = need_w ? sx.get("Conv2dWeightBackward")
                                             : make_view(go, xshape, Shape(xshape.size(), 0), 0);
                          Tensor gw = need_w ? empty(wshape, {go.dtype(), go.device()}) : Tensor();
                          Tensor gb = need_b ? empty({wshape[0]}, {go.dtype(), go.device()}) : Tensor();
                          conv2d_backward_table()(go.device(), go.dtype(), Tensor(), gw, gb, go, xv, wv, p);
                          return std::vector<Tensor>{gw, gb};
                        },
                        /*differentiable=*/false,
                        /*composite_wrt=*/{1, 2}};
    SavedTensor sw = x.requires_grad() ? SavedTensor(wc) : SavedTensor();
    BackwardPart input{"Conv2dInputBackward",
                       {x},
                       [sw, xshape, p](const std::vector<Tensor>& grads) {
                         Tensor go = grads[0].detach().contiguous();  // (N, Cout, OH, OW)
                         Tensor wv = sw.get("Conv2dInputBackward");
                         // The kernel reads x's geometry only here: a shape stand-in.
                         Tensor xv = make_view(wv, xshape, Shape(xshape.size(), 0), 0);
                         Tensor gx = empty(xshape, {go.dtype(), go.device()});
                         conv2d_backward_table()(go.device(), go.dtype(), gx, Tensor(), Tensor(), go, xv, wv, p);
                         return std::vector<Tensor>{gx};
                       },
                       /*differentiable=*/false,
                       /*composite_wrt=*/{0}};
    record_function_parts(
        "Conv2dBackward", out, std::move(params), std::move(input), {x, weight, bias},
        [p](const std::vector<Tensor>& in) { return std::vector<Tensor>{conv2d_composite(in[0], in[1], in[2], p)}; });
  }
  return out;
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, std::array<int64_t, 2> stride,
              std::array<int64_t, 2> padding, std::array<int64_t, 2> dilation, int64_t groups) {
  return conv2d_impl(autocast::lower(x), autocast::lower(weight), autocast::lower(bias), stride, padding, dilation,
                     groups);
}

}  // namespace weft
