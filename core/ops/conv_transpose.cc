// conv_transpose2d, and the 1-D forms conv1d and conv_transpose1d, PyTorch
// semantics.
//
// Contract: conv_transpose2d is the adjoint of conv2d in its input: for x
// (N, C_in, H, W) and weight (C_in, C_out / groups, kH, kW) it returns the
// y (N, C_out, OH, OW) with <y, g> = <x, conv2d(g, weight)> for every g, plus
// bias (C_out), where OH = (H - 1) sH - 2 pH + dH (kH - 1) + output_padding + 1.
// So it runs on conv2d's kernel tables (core/kernels/conv.h) with the roles
// swapped: its output is conv2d's input gradient, its input gradient is
// conv2d's forward of the output gradient, and its weight gradient is conv2d's
// weight gradient with x as the output gradient. Every device with conv2d's
// tables runs it; float16/bfloat16 run in float32 where a device lacks them,
// as conv2d does. output_padding must be smaller than the stride (PyTorch also
// allows it below the dilation, which conv2d's geometry here does not cover).
//
// conv1d / conv_transpose1d take (N, C, L) or (C, L) and run the 2-D ops on a
// height of 1.
#include <array>
#include <string>

#include "core/autocast.h"
#include "core/autograd_meta.h"
#include "core/kernels/conv.h"
#include "core/nn_ops.h"
#include "core/ops/conv_args.h"
#include "core/ops/elementwise_util.h"

namespace weft {
namespace {

Tensor conv_transpose2d_impl(const Tensor& x_in, const Tensor& weight, const Tensor& bias,
                             std::array<int64_t, 2> stride, std::array<int64_t, 2> padding,
                             std::array<int64_t, 2> output_padding, int64_t groups, std::array<int64_t, 2> dilation) {
  const char* op = "conv_transpose2d";
  detail::check_devices(op, {x_in, weight, bias});
  WEFT_CHECK(x_in.defined() && weight.defined(), op, ": undefined input or weight");
  WEFT_CHECK(x_in.dim() == 3 || x_in.dim() == 4, op, ": expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape ",
             shape_str(x_in.sizes()));
  if (x_in.dim() == 3)
    return squeeze(
        conv_transpose2d_impl(unsqueeze(x_in, 0), weight, bias, stride, padding, output_padding, groups, dilation), 0);
  const Tensor& x = x_in;
  WEFT_CHECK(weight.dim() == 4, op, ": expected a 4-D weight (C_in, C_out / groups, kH, kW), got shape ",
             shape_str(weight.sizes()));
  detail::check_conv_args(op, stride, padding, dilation, groups);
  WEFT_CHECK(output_padding[0] >= 0 && output_padding[1] >= 0 && output_padding[0] < stride[0] &&
                 output_padding[1] < stride[1],
             op, ": output_padding ", detail::pair_str(output_padding),
             " must be non-negative and smaller than the stride ", detail::pair_str(stride));
  const int64_t N = x.size(0), Cin = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t kH = weight.size(2), kW = weight.size(3), Cout = weight.size(1) * groups;
  WEFT_CHECK(weight.size(0) == Cin, op, ": input shape ", shape_str(x.sizes()), " has ", Cin,
             " channels but weight shape ", shape_str(weight.sizes()), " expects ", weight.size(0));
  WEFT_CHECK(Cin % groups == 0, op, ": groups = ", groups, " does not divide the ", Cin, " input channels of shape ",
             shape_str(x.sizes()));
  WEFT_CHECK(x.dtype() == weight.dtype(), op, ": input dtype ", x.dtype(), " and weight dtype ", weight.dtype(),
             " differ");
  WEFT_CHECK(is_floating(x.dtype()), op, ": expected a floating dtype, got ", x.dtype());
  if (bias.defined()) {
    WEFT_CHECK(bias.dim() == 1 && bias.size(0) == Cout, op, ": bias shape ", shape_str(bias.sizes()),
               " does not match the ", Cout, " output channels of weight shape ", shape_str(weight.sizes()),
               " with groups = ", groups);
    WEFT_CHECK(bias.dtype() == x.dtype(), op, ": bias dtype ", bias.dtype(), " differs from input dtype ", x.dtype());
  }
  const int64_t OH = (H - 1) * stride[0] - 2 * padding[0] + dilation[0] * (kH - 1) + output_padding[0] + 1;
  const int64_t OW = (W - 1) * stride[1] - 2 * padding[1] + dilation[1] * (kW - 1) + output_padding[1] + 1;
  WEFT_CHECK(OH > 0 && OW > 0, op, ": input shape ", shape_str(x.sizes()), " with weight shape ",
             shape_str(weight.sizes()), ", stride ", detail::pair_str(stride), ", padding ", detail::pair_str(padding),
             " and dilation ", detail::pair_str(dilation), " gives an output of ", OH, " x ", OW);

  if (detail::conv_in_float32(x)) {
    Tensor bf = bias.defined() ? bias.to(DType::Float32) : Tensor();
    return conv_transpose2d_impl(x.to(DType::Float32), weight.to(DType::Float32), bf, stride, padding, output_padding,
                                 groups, dilation)
        .to(x.dtype());
  }

  // conv2d's view: input (N, C_out, OH, OW), weight (C_in, C_out / groups, kH, kW), output x's shape.
  const Conv2dParams p{stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1], groups};
  const Shape yshape{N, Cout, OH, OW}, xshape = x.sizes(), wshape = weight.sizes();
  Tensor xc = x.detach().contiguous(), wc = weight.detach().contiguous();
  Tensor out = empty(yshape, {x.dtype(), x.device()});  // (N, C_out, OH, OW)
  // The kernel reads conv2d's input geometry only: a shape stand-in.
  Tensor ystand = make_view(xc, yshape, Shape(4, 0), 0);
  conv2d_backward_table()(x.device(), x.dtype(), out, Tensor(), Tensor(), xc, ystand, wc, p);
  if (bias.defined()) {
    NoGradGuard no_grad;
    Tensor b = bias.detach().view({1, Cout, 1, 1});
    add_(out, b);
  }

  if (any_requires_grad({x, weight, bias})) {
    const bool need_w = weight.requires_grad(), need_b = bias.defined() && bias.requires_grad();
    SavedTensor sx = need_w ? SavedTensor(xc) : SavedTensor();
    BackwardPart params{"ConvTranspose2dWeightBackward",
                        {weight, bias},
                        [sx, wshape, p, need_w, need_b](const std::vector<Tensor>& grads) {
                          Tensor gy = grads[0].detach().contiguous();  // (N, C_out, OH, OW)
                          Tensor gw, gb;
                          if (need_w) {
                            Tensor xs = sx.get("ConvTranspose2dWeightBackward");  // conv2d's output gradient
                            Tensor wv = make_view(gy, wshape, Shape(4, 0), 0);
                            gw = empty(wshape, {gy.dtype(), gy.device()});
                            conv2d_backward_table()(gy.device(), gy.dtype(), Tensor(), gw, Tensor(), xs, gy, wv, p);
                          }
                          if (need_b) gb = sum(gy, {0, 2, 3});
                          return std::vector<Tensor>{gw, gb};
                        }};
    SavedTensor sw = x.requires_grad() ? SavedTensor(wc) : SavedTensor();
    BackwardPart input{"ConvTranspose2dInputBackward", {x}, [sw, xshape, p](const std::vector<Tensor>& grads) {
                         Tensor gy = grads[0].detach().contiguous();  // (N, C_out, OH, OW)
                         Tensor gx = empty(xshape, {gy.dtype(), gy.device()});
                         conv2d_table()(gy.device(), gy.dtype(), gx, gy, sw.get("ConvTranspose2dInputBackward"),
                                        Tensor(), p);
                         return std::vector<Tensor>{gx};
                       }};
    params.composite_wrt = {1, 2};
    input.composite_wrt = {0};
    // Note [composite double backward]: by the contract above, the op is
    // conv2d's input gradient; taken with a nested create_graph grad through
    // conv2d (whose own composite is built of recorded ops), it is linear in x
    // and weight with their history.
    Composite composite = [yshape, stride, padding, dilation, groups](const std::vector<Tensor>& in) {
      Tensor z = zeros(yshape, in[0].options()).requires_grad_(true);  // (N, C_out, OH, OW)
      Tensor u = conv2d(z, in[1], Tensor(), stride, padding, dilation, groups);
      Tensor y = grad_engine()({u}, {z}, {in[0]})[0];  // d<conv2d(z, w), x>/dz
      if (in[2].defined()) y = y + in[2].view({1, -1, 1, 1});
      return std::vector<Tensor>{y};
    };
    record_function_parts("ConvTranspose2dBackward", out, std::move(params), std::move(input), {x, weight, bias},
                          std::move(composite));
  }
  return out;
}

// (N, C, L) -> (N, C, 1, L), or (C, L) -> (C, 1, L); the weight (A, B, K) -> (A, B, 1, K).
void check_1d(const char* op, const Tensor& x, const Tensor& weight) {
  WEFT_CHECK(x.defined() && weight.defined(), op, ": undefined input or weight");
  WEFT_CHECK(x.dim() == 2 || x.dim() == 3, op, ": expected a 2-D (C, L) or 3-D (N, C, L) input, got shape ",
             shape_str(x.sizes()));
  WEFT_CHECK(weight.dim() == 3, op, ": expected a 3-D weight, got shape ", shape_str(weight.sizes()));
}

}  // namespace

Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias, std::array<int64_t, 2> stride,
                        std::array<int64_t, 2> padding, std::array<int64_t, 2> output_padding, int64_t groups,
                        std::array<int64_t, 2> dilation) {
  return conv_transpose2d_impl(autocast::lower(x), autocast::lower(weight), autocast::lower(bias), stride, padding,
                               output_padding, groups, dilation);
}

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride, int64_t padding,
              int64_t dilation, int64_t groups) {
  check_1d("conv1d", x, weight);
  const int64_t hdim = x.dim() - 1;  // the height of 1 goes before L
  return squeeze(
      conv2d(unsqueeze(x, hdim), unsqueeze(weight, 2), bias, {1, stride}, {0, padding}, {1, dilation}, groups), hdim);
}

Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride, int64_t padding,
                        int64_t output_padding, int64_t groups, int64_t dilation) {
  check_1d("conv_transpose1d", x, weight);
  const int64_t hdim = x.dim() - 1;
  return squeeze(conv_transpose2d(unsqueeze(x, hdim), unsqueeze(weight, 2), bias, {1, stride}, {0, padding},
                                  {0, output_padding}, groups, {1, dilation}),
                 hdim);
}

}  // namespace weft
