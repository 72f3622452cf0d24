// conv2d: 2-D convolution (cross-correlation) over NCHW images, PyTorch semantics.
//
// Contract: x (N, C_in, H, W) or unbatched (C_in, H, W); weight
// (C_out, C_in / groups, kH, kW); bias (C_out) or undefined. Output
// (N, C_out, OH, OW) with OH = (H + 2 pH - dH (kH - 1) - 1) / sH + 1 (floor).
// float32/float64 run on the CPU kernels below; float16/bfloat16 are computed in
// float32 by the front end (through differentiable casts).
//
// CPU kernels: im2col + GEMM (core/cpu/im2col.h, core/cpu/gemm.h), parallel over
// images: each thread unfolds its own images into a private column buffer and
// runs one GEMM per (image, group). gemm called inside parallel_for runs inline
// (parallel_for does not nest), so a batch of one still gets a threaded GEMM.
// Note [conv weight-grad determinism]: grad_weight sums per-image products; the
// batch is cut into a fixed number of contiguous chunks chosen from N alone,
// each chunk accumulates its images in order and the chunk partials are summed
// in chunk order, so the result does not depend on the thread count.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/autograd_meta.h"
#include "core/cpu/gemm.h"
#include "core/cpu/im2col.h"
#include "core/dispatch.h"
#include "core/nn_ops.h"
#include "core/parallel.h"

namespace weft {

struct Conv2dParams {
  int64_t sH, sW, pH, pW, dH, dW, groups;
};

// out: contiguous (N, C_out, OH, OW); x: contiguous (N, C_in, H, W); w: contiguous
// (C_out, C_in/groups, kH, kW); b: contiguous (C_out) or undefined.
using Conv2dKernel = KernelTable<void(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b,
                                      const Conv2dParams& p)>;
// gx / gw / gb: contiguous outputs (undefined when not needed); go: contiguous
// (N, C_out, OH, OW); x, w: as in the forward.
using Conv2dBackwardKernel =
    KernelTable<void(const Tensor& gx, const Tensor& gw, const Tensor& gb, const Tensor& go, const Tensor& x,
                     const Tensor& w, const Conv2dParams& p)>;

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
  return {x.size(1) / p.groups, x.size(2), x.size(3), w.size(2), w.size(3), p.sH, p.sW, p.pH,
          p.pW,                 p.dH,      p.dW,      out.size(2), out.size(3)};
}

// True when the column matrix of an image is the image itself (1x1, stride 1, no padding).
bool is_pointwise(const cpu::Conv2dGeom& g) {
  return g.kH == 1 && g.kW == 1 && g.sH == 1 && g.sW == 1 && g.pH == 0 && g.pW == 0;
}

// C (m, n) row-major = A (m, k) * B (k, n); strides as in gemm.h.
template <typename T>
void gemm1(int64_t m, int64_t n, int64_t k, const T* a, int64_t a_rs, int64_t a_cs, const T* b, int64_t b_rs,
           int64_t b_cs, T* c) {
  const int64_t zero = 0;
  cpu::gemm_batched(1, &zero, &zero, m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, 0, n);
}

template <typename T>
void conv2d_forward_impl(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b,
                         const Conv2dParams& p) {
  const cpu::Conv2dGeom g = geom_of(x, w, out, p);
  const int64_t N = x.size(0), G = p.groups, Cin = x.size(1), Cout = out.size(1);
  const int64_t Cog = Cout / G, Kg = g.C * g.kH * g.kW, L = g.OH * g.OW, HW = g.H * g.W;
  const T* px = x.data_ptr<T>();
  const T* pw = w.data_ptr<T>();
  const T* pb = b.defined() ? b.data_ptr<T>() : nullptr;
  T* po = out.data_ptr<T>();
  const bool pointwise = is_pointwise(g);
  parallel_for(0, N, 1, [&](int64_t n0, int64_t n1) {
    std::vector<T> cols(pointwise ? 0 : G * Kg * L);
    for (int64_t n = n0; n < n1; ++n) {
      const T* xn = px + n * Cin * HW;
      T* on = po + n * Cout * L;
      const T* cn = xn;
      if (!pointwise) {
        for (int64_t gi = 0; gi < G; ++gi) cpu::im2col(xn + gi * g.C * HW, g, cols.data() + gi * Kg * L);
        cn = cols.data();
      }
      for (int64_t gi = 0; gi < G; ++gi)
        gemm1<T>(Cog, L, Kg, pw + gi * Cog * Kg, Kg, 1, cn + gi * Kg * L, L, 1, on + gi * Cog * L);
      if (pb) {
        for (int64_t c = 0; c < Cout; ++c) {
          T* row = on + c * L;
          const T bv = pb[c];
          for (int64_t l = 0; l < L; ++l) row[l] += bv;
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
  const T* px = x.data_ptr<T>();
  const T* pw = w.data_ptr<T>();
  const T* pgo = go.data_ptr<T>();
  T* pgx = gx.defined() ? gx.data_ptr<T>() : nullptr;
  T* pgw = gw.defined() ? gw.data_ptr<T>() : nullptr;
  const bool pointwise = is_pointwise(g);

  if (pgx || pgw) {
    // Note [conv weight-grad determinism]: chunks depend on N only.
    const int64_t chunks = pgw ? std::min<int64_t>(N, 8) : N;
    std::vector<T> partial(pgw ? (chunks - 1) * WN : 0);
    parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
      std::vector<T> cols(pointwise ? 0 : G * Kg * L);
      std::vector<T> tmp(pgw ? WN : 0);
      for (int64_t ch = c0; ch < c1; ++ch) {
        T* acc = pgw ? (ch == 0 ? pgw : partial.data() + (ch - 1) * WN) : nullptr;
        const int64_t nb = N * ch / chunks, ne = N * (ch + 1) / chunks;
        for (int64_t n = nb; n < ne; ++n) {
          const T* xn = px + n * Cin * HW;
          const T* gon = pgo + n * Cout * L;
          if (pgw) {
            const T* cn = xn;
            if (!pointwise) {
              for (int64_t gi = 0; gi < G; ++gi) cpu::im2col(xn + gi * g.C * HW, g, cols.data() + gi * Kg * L);
              cn = cols.data();
            }
            T* dst = n == nb ? acc : tmp.data();
            // dW_g (Cog, Kg) = go_g (Cog, L) * cols_g^T (L, Kg)
            for (int64_t gi = 0; gi < G; ++gi)
              gemm1<T>(Cog, Kg, L, gon + gi * Cog * L, L, 1, cn + gi * Kg * L, 1, L, dst + gi * Cog * Kg);
            if (n != nb)
              for (int64_t i = 0; i < WN; ++i) acc[i] += tmp[i];
          }
          if (pgx) {
            T* gxn = pgx + n * Cin * HW;
            if (pointwise) {
              // dx_g (Cg, HW) = W_g^T (Kg, Cog) * go_g (Cog, L)
              for (int64_t gi = 0; gi < G; ++gi)
                gemm1<T>(Kg, L, Cog, pw + gi * Cog * Kg, 1, Kg, gon + gi * Cog * L, L, 1, gxn + gi * Kg * L);
            } else {
              T* dcols = cols.data();  // reuse (weight grad of this image is done)
              for (int64_t gi = 0; gi < G; ++gi)
                gemm1<T>(Kg, L, Cog, pw + gi * Cog * Kg, 1, Kg, gon + gi * Cog * L, L, 1, dcols + gi * Kg * L);
              std::fill(gxn, gxn + Cin * HW, T(0));
              for (int64_t gi = 0; gi < G; ++gi) cpu::col2im(dcols + gi * Kg * L, g, gxn + gi * g.C * HW);
            }
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
  if (gb.defined()) {
    T* pgb = gb.data_ptr<T>();
    parallel_for(0, Cout, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(N * L, 1)), [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        T s = 0;
        for (int64_t n = 0; n < N; ++n) {
          const T* row = pgo + (n * Cout + c) * L;
          T rs = 0;
          for (int64_t l = 0; l < L; ++l) rs += row[l];
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
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
    conv2d_backward_impl<T>(gx, gw, gb, go, x, w, p);
  else WEFT_CHECK(false, "conv2d_backward: no CPU kernel for dtype ", dtype_of<T>);
}
WEFT_REGISTER_KERNEL(conv2d_table(), DeviceType::CPU, kConvTypes, cpu_conv2d);
WEFT_REGISTER_KERNEL(conv2d_backward_table(), DeviceType::CPU, kConvTypes, cpu_conv2d_backward);

std::string arr_str(std::array<int64_t, 2> a) { return "(" + std::to_string(a[0]) + ", " + std::to_string(a[1]) + ")"; }

}  // namespace

Tensor conv2d(const Tensor& x_in, const Tensor& weight, const Tensor& bias, std::array<int64_t, 2> stride,
              std::array<int64_t, 2> padding, std::array<int64_t, 2> dilation, int64_t groups) {
  WEFT_CHECK(x_in.defined() && weight.defined(), "conv2d: undefined input or weight");
  WEFT_CHECK(x_in.dim() == 3 || x_in.dim() == 4, "conv2d: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape ",
             shape_str(x_in.sizes()));
  if (x_in.dim() == 3)
    return squeeze(conv2d(unsqueeze(x_in, 0), weight, bias, stride, padding, dilation, groups), 0);
  const Tensor& x = x_in;
  WEFT_CHECK(weight.dim() == 4, "conv2d: expected a 4-D weight (C_out, C_in / groups, kH, kW), got shape ",
             shape_str(weight.sizes()));
  WEFT_CHECK(groups >= 1, "conv2d: groups must be positive, got ", groups);
  WEFT_CHECK(stride[0] >= 1 && stride[1] >= 1, "conv2d: stride must be positive, got ", arr_str(stride));
  WEFT_CHECK(padding[0] >= 0 && padding[1] >= 0, "conv2d: padding must be non-negative, got ", arr_str(padding));
  WEFT_CHECK(dilation[0] >= 1 && dilation[1] >= 1, "conv2d: dilation must be positive, got ", arr_str(dilation));
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
    WEFT_CHECK(bias.dtype() == x.dtype(), "conv2d: bias dtype ", bias.dtype(), " differs from input dtype ",
               x.dtype());
  }
  const int64_t OH = (H + 2 * padding[0] - dilation[0] * (kH - 1) - 1) / stride[0] + 1;
  const int64_t OW = (W + 2 * padding[1] - dilation[1] * (kW - 1) - 1) / stride[1] + 1;
  WEFT_CHECK(H + 2 * padding[0] - dilation[0] * (kH - 1) - 1 >= 0 && W + 2 * padding[1] - dilation[1] * (kW - 1) - 1 >= 0 &&
                 OH > 0 && OW > 0,
             "conv2d: input shape ", shape_str(x.sizes()), " (padded by ", arr_str(padding),
             ") is smaller than the dilated kernel of weight shape ", shape_str(weight.sizes()), " (dilation ",
             arr_str(dilation), "): output size would be <= 0");
  WEFT_CHECK(is_floating(x.dtype()), "conv2d: expected a floating dtype, got ", x.dtype());

  if (x.dtype() == DType::Float16 || x.dtype() == DType::BFloat16) {
    Tensor bf = bias.defined() ? bias.to(DType::Float32) : Tensor();
    return conv2d(x.to(DType::Float32), weight.to(DType::Float32), bf, stride, padding, dilation, groups)
        .to(x.dtype());
  }

  const Conv2dParams p{stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1], groups};
  Tensor xc = x.detach().contiguous(), wc = weight.detach().contiguous();
  Tensor bc = bias.defined() ? bias.detach().contiguous() : Tensor();
  Tensor out = empty({N, Cout, OH, OW}, {x.dtype(), x.device()});
  conv2d_table()(x.device(), x.dtype(), out, xc, wc, bc, p);

  if (any_requires_grad({x, weight, bias})) {
    const bool need_x = x.requires_grad(), need_w = weight.requires_grad();
    const bool need_b = bias.defined() && bias.requires_grad();
    // x is needed for grad_weight, weight for grad_input.
    SavedTensor sx = need_w ? SavedTensor(xc) : SavedTensor();
    SavedTensor sw(wc);
    Shape xshape = x.sizes();
    record_function("Conv2dBackward", {x, weight, bias}, {out},
                    [sx, sw, xshape, p, need_x, need_w, need_b](const std::vector<Tensor>& grads) {
                      Tensor go = grads[0].detach().contiguous();
                      Tensor wv = sw.get("Conv2dBackward");
                      // the kernel reads x's geometry only; without grad_weight a shape stand-in suffices
                      Tensor xv = need_w ? sx.get("Conv2dBackward")
                                         : make_view(wv, xshape, Shape(xshape.size(), 0), 0);
                      Tensor gx = need_x ? empty(xshape, {go.dtype(), go.device()}) : Tensor();
                      Tensor gw = need_w ? empty(wv.sizes(), {go.dtype(), go.device()}) : Tensor();
                      Tensor gb = need_b ? empty({wv.size(0)}, {go.dtype(), go.device()}) : Tensor();
                      conv2d_backward_table()(go.device(), go.dtype(), gx, gw, gb, go, xv, wv, p);
                      return std::vector<Tensor>{gx, gw, gb};
                    });
  }
  return out;
}

}  // namespace weft
