// interpolate: resizing (N, C, *spatial) tensors, PyTorch's F.interpolate for
// the modes nearest, nearest-exact, linear, bilinear and bicubic.
//
// Contract: the output size comes from `size`, or from floor(in * scale) per
// spatial dim. Source positions follow PyTorch exactly, computed in float
// (double for float64 inputs) like its CPU kernels:
// - nearest: src = min(floor(dst * s), in - 1), with s = 1 / scale where a
//   scale was given, else in / out;
// - nearest-exact: src = min(floor((dst + 0.5) * s), in - 1);
// - linear modes: src = s * dst with align_corners (s = (in - 1) / (out - 1)),
//   else max(s * (dst + 0.5) - 0.5, 0); the two neighbours floor(src) and the
//   next one (clamped to in - 1) weighted 1 - l and l, l = src - floor(src);
// - bicubic: src as the linear modes' but not clamped at 0; i = min(floor(src),
//   in - 1), l = src - i clamped to [0, 1]; the four neighbours i - 1 .. i + 2
//   (each clamped into [0, in - 1]) weighted by Keys' cubic convolution with
//   A = -0.75: W(l + 1), W(l), W(1 - l), W(2 - l).
// The op is composed of index_select, mul and add, one spatial dim at a time
// from the last (PyTorch's bilinear and bicubic sum along the width inside the
// height's weights), so it runs on every device and differentiates through
// index_select. float16/bfloat16 inputs of the weighted modes compute in float32.
#include <cmath>
#include <string>
#include <vector>

#include "core/nn_ops.h"
#include "core/ops/elementwise_util.h"

namespace weft {
namespace {

const char* mode_name(InterpolateMode m) {
  switch (m) {
    case InterpolateMode::Nearest: return "nearest";
    case InterpolateMode::NearestExact: return "nearest-exact";
    case InterpolateMode::Linear: return "linear";
    case InterpolateMode::Bilinear: return "bilinear";
    case InterpolateMode::Bicubic: return "bicubic";
  }
  return "?";
}

std::string vec_str(const std::vector<double>& v) {
  std::string r("(");
  for (size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + std::to_string(v[i]);
  return r + ")";
}

// One spatial dim's taps: tap k reads source index idx[k][o] for output o with
// weight w[k][o] (no weights for the nearest modes: one tap, copied), in the
// compute type R.
template <typename R>
struct Taps {
  std::vector<std::vector<int64_t>> idx;
  std::vector<std::vector<R>> w;
};

// Keys' cubic convolution kernel with A = -0.75 (PyTorch's), for |x| <= 1 and 1 < |x| < 2.
template <typename R>
R cubic_near(R x) {
  constexpr R A = R(-0.75);
  return ((A + 2) * x - (A + 3)) * x * x + 1;
}
template <typename R>
R cubic_far(R x) {
  constexpr R A = R(-0.75);
  return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
}

template <typename R>
Taps<R> taps(InterpolateMode mode, int64_t in, int64_t out, double scale, bool align_corners) {
  Taps<R> t;
  // PyTorch's compute_scales_value: 1 / scale where a scale was given, else in / out
  const R s = scale > 0 ? static_cast<R>(1.0 / scale) : static_cast<R>(in) / static_cast<R>(out);
  if (mode == InterpolateMode::Nearest || mode == InterpolateMode::NearestExact) {
    std::vector<int64_t>& i0 = t.idx.emplace_back(out);
    for (int64_t o = 0; o < out; ++o) {
      int64_t src;
      if (mode == InterpolateMode::NearestExact)
        src = static_cast<int64_t>(std::floor((static_cast<R>(o) + R(0.5)) * s));
      else if (out == in) src = o;
      else if (out == 2 * in) src = o >> 1;
      else src = static_cast<int64_t>(std::floor(static_cast<R>(o) * s));
      i0[o] = std::min(src, in - 1);
    }
    return t;
  }
  const R ls = align_corners ? (out > 1 ? static_cast<R>(in - 1) / static_cast<R>(out - 1) : R(0)) : s;
  const bool cubic = mode == InterpolateMode::Bicubic;
  const int n = cubic ? 4 : 2;
  t.idx.assign(n, std::vector<int64_t>(out));
  t.w.assign(n, std::vector<R>(out));
  for (int64_t o = 0; o < out; ++o) {
    const R centre = ls * (static_cast<R>(o) + R(0.5)) - R(0.5);
    if (!cubic) {
      const R src = align_corners ? ls * static_cast<R>(o) : std::max(centre, R(0));
      const int64_t i0 = static_cast<int64_t>(src);
      const R l = std::min(std::max(src - static_cast<R>(i0), R(0)), R(1));
      t.idx[0][o] = i0;
      t.idx[1][o] = i0 + (i0 < in - 1 ? 1 : 0);
      t.w[0][o] = R(1) - l;
      t.w[1][o] = l;
      continue;
    }
    const R src = align_corners ? ls * static_cast<R>(o) : centre;
    const int64_t i = std::min(static_cast<int64_t>(std::floor(src)), in - 1);
    const R l = std::min(std::max(src - static_cast<R>(i), R(0)), R(1));
    const R w[4] = {cubic_far(l + R(1)), cubic_near(l), cubic_near(R(1) - l), cubic_far(R(2) - l)};
    for (int k = 0; k < 4; ++k) {
      t.idx[k][o] = std::min(std::max(i - 1 + k, int64_t{0}), in - 1);
      t.w[k][o] = w[k];
    }
  }
  return t;
}

Tensor index_tensor(const std::vector<int64_t>& v, Device device) {
  return tensor<int64_t>(v, {static_cast<int64_t>(v.size())}).to(device);
}

// The weights of one dim, shaped to broadcast along `axis` of an x of `dims` dims.
template <typename R>
Tensor weight_tensor(const std::vector<R>& v, int64_t axis, int64_t dims, const Tensor& like) {
  Shape s(dims, 1);
  s[axis] = static_cast<int64_t>(v.size());
  return tensor<R>(v, {s[axis]}).to(like.dtype()).to(like.device()).view(s);
}

template <typename R>
Tensor resample(Tensor x, InterpolateMode mode, const Shape& out_sizes, const std::vector<double>& scales,
                bool align_corners) {
  const int64_t sd = static_cast<int64_t>(out_sizes.size());
  for (int64_t i = sd - 1; i >= 0; --i) {  // the last spatial dim first
    const int64_t axis = 2 + i, in = x.size(axis), out = out_sizes[i];
    // the identity: nearest with in == out always, the other modes where the step is exactly 1
    // (align_corners cleared `scales`)
    if (in == out && (mode == InterpolateMode::Nearest || scales.empty() || scales[i] == 1.0)) continue;
    const Taps<R> t = taps<R>(mode, in, out, scales.empty() ? 0.0 : scales[i], align_corners);
    if (t.w.empty()) {
      x = index_select(x, axis, index_tensor(t.idx[0], x.device()));
      continue;
    }
    Tensor sum;  // the taps' weighted values, added in tap order
    for (size_t k = 0; k < t.idx.size(); ++k) {
      Tensor term = index_select(x, axis, index_tensor(t.idx[k], x.device())) * weight_tensor(t.w[k], axis, x.dim(), x);
      sum = k == 0 ? term : sum + term;
    }
    x = sum;
  }
  return x;
}

}  // namespace

Tensor interpolate(const Tensor& x, const InterpolateOptions& opts) {
  const char* op = "interpolate";
  WEFT_CHECK(x.defined(), op, ": undefined input");
  const InterpolateMode mode = opts.mode;
  // the weighted modes (linear, bilinear, bicubic): align_corners applies, inputs must be floating
  const bool linear =
      mode == InterpolateMode::Linear || mode == InterpolateMode::Bilinear || mode == InterpolateMode::Bicubic;
  WEFT_CHECK(x.dim() >= 3, op, ": expected an input (N, C, *spatial) with at least one spatial dim, got shape ",
             shape_str(x.sizes()));
  const int64_t sd = x.dim() - 2;
  WEFT_CHECK(mode != InterpolateMode::Linear || sd == 1, op, ": mode linear expects a 3-D input (N, C, L), got shape ",
             shape_str(x.sizes()));
  WEFT_CHECK(mode != InterpolateMode::Bilinear || sd == 2, op,
             ": mode bilinear expects a 4-D input (N, C, H, W), got shape ", shape_str(x.sizes()));
  WEFT_CHECK(mode != InterpolateMode::Bicubic || sd == 2, op,
             ": mode bicubic expects a 4-D input (N, C, H, W), got shape ", shape_str(x.sizes()));
  WEFT_CHECK(linear || !opts.align_corners, op, ": align_corners applies to the linear modes and bicubic only, not ",
             mode_name(mode));
  WEFT_CHECK(opts.size.empty() != opts.scale_factor.empty(), op, ": give exactly one of size and scale_factor (got ",
             opts.size.size(), " sizes and ", opts.scale_factor.size(), " scale factors)");
  WEFT_CHECK(!linear || is_floating(x.dtype()), op, ": mode ", mode_name(mode), " expects a floating input, got ",
             x.dtype());
  Shape out_sizes(sd);
  std::vector<double> scales;
  if (!opts.size.empty()) {
    WEFT_CHECK(opts.size.size() == 1 || static_cast<int64_t>(opts.size.size()) == sd, op, ": size ",
               shape_str(opts.size), " must have one value or one per spatial dim of input shape ",
               shape_str(x.sizes()));
    for (int64_t i = 0; i < sd; ++i) out_sizes[i] = opts.size.size() == 1 ? opts.size[0] : opts.size[i];
  } else {
    WEFT_CHECK(opts.scale_factor.size() == 1 || static_cast<int64_t>(opts.scale_factor.size()) == sd, op,
               ": scale_factor ", vec_str(opts.scale_factor),
               " must have one value or one per spatial dim of input shape ", shape_str(x.sizes()));
    scales.resize(sd);
    for (int64_t i = 0; i < sd; ++i) {
      scales[i] = opts.scale_factor.size() == 1 ? opts.scale_factor[0] : opts.scale_factor[i];
      WEFT_CHECK(std::isfinite(scales[i]) && scales[i] > 0, op, ": scale_factor ", vec_str(opts.scale_factor),
                 " must be positive");
      out_sizes[i] = static_cast<int64_t>(std::floor(static_cast<double>(x.size(2 + i)) * scales[i]));
    }
  }
  for (int64_t i = 0; i < sd; ++i)
    WEFT_CHECK(out_sizes[i] > 0, op, ": the output size ", shape_str(out_sizes), " for input shape ",
               shape_str(x.sizes()), " must be positive in every spatial dim");
  for (int64_t i = 0; i < sd; ++i)
    WEFT_CHECK(x.size(2 + i) > 0, op, ": input shape ", shape_str(x.sizes()), " has an empty spatial dim");
  // (the scale stays in the source positions only where PyTorch keeps it: not with align_corners)
  if (linear && opts.align_corners) scales.clear();
  if (x.dtype() == DType::Float64) return resample<double>(x, mode, out_sizes, scales, opts.align_corners);
  if (linear && (x.dtype() == DType::Float16 || x.dtype() == DType::BFloat16))
    return resample<float>(x.to(DType::Float32), mode, out_sizes, scales, opts.align_corners).to(x.dtype());
  return resample<float>(x, mode, out_sizes, scales, opts.align_corners);
}

}  // namespace weft
