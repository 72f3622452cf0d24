// interpolate: resizing (N, C, *spatial) tensors, PyTorch's F.interpolate for
// the modes nearest, nearest-exact, linear and bilinear.
//
// Contract: the output size comes from `size`, or from floor(in * scale) per
// spatial dim. Source positions follow PyTorch exactly, computed in float
// (double for float64 inputs) like its CPU kernels:
// - nearest: src = min(floor(dst * s), in - 1), with s = 1 / scale where a
//   scale was given, else in / out;
// - nearest-exact: src = min(floor((dst + 0.5) * s), in - 1);
// - linear modes: src = s * dst with align_corners (s = (in - 1) / (out - 1)),
//   else max(s * (dst + 0.5) - 0.5, 0); the two neighbours floor(src) and the
//   next one (clamped to in - 1) weighted 1 - l and l, l = src - floor(src).
// The op is composed of index_select, mul and add, one spatial dim at a time
// from the last (PyTorch's bilinear sums along the width inside the height's
// weights), so it runs on every device and differentiates through
// index_select. float16/bfloat16 linear modes compute in float32.
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
  }
  return "?";
}

std::string vec_str(const std::vector<double>& v) {
  std::string r("(");
  for (size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + std::to_string(v[i]);
  return r + ")";
}

// One spatial dim's source positions (and, for the linear modes, the second
// neighbour and the two weights), in the compute type R.
template <typename R>
struct Taps {
  std::vector<int64_t> i0, i1;
  std::vector<R> w0, w1;
};

template <typename R>
Taps<R> taps(InterpolateMode mode, int64_t in, int64_t out, double scale, bool align_corners) {
  Taps<R> t;
  t.i0.resize(out);
  // PyTorch's compute_scales_value: 1 / scale where a scale was given, else in / out
  const R s = scale > 0 ? static_cast<R>(1.0 / scale) : static_cast<R>(in) / static_cast<R>(out);
  if (mode == InterpolateMode::Nearest || mode == InterpolateMode::NearestExact) {
    for (int64_t o = 0; o < out; ++o) {
      int64_t src;
      if (mode == InterpolateMode::NearestExact)
        src = static_cast<int64_t>(std::floor((static_cast<R>(o) + R(0.5)) * s));
      else if (out == in) src = o;
      else if (out == 2 * in) src = o >> 1;
      else src = static_cast<int64_t>(std::floor(static_cast<R>(o) * s));
      t.i0[o] = std::min(src, in - 1);
    }
    return t;
  }
  const R ls = align_corners ? (out > 1 ? static_cast<R>(in - 1) / static_cast<R>(out - 1) : R(0)) : s;
  t.i1.resize(out);
  t.w0.resize(out);
  t.w1.resize(out);
  for (int64_t o = 0; o < out; ++o) {
    R src = align_corners ? ls * static_cast<R>(o) : std::max(ls * (static_cast<R>(o) + R(0.5)) - R(0.5), R(0));
    const int64_t i0 = static_cast<int64_t>(src);
    const R l = std::min(std::max(src - static_cast<R>(i0), R(0)), R(1));
    t.i0[o] = i0;
    t.i1[o] = i0 + (i0 < in - 1 ? 1 : 0);
    t.w0[o] = R(1) - l;
    t.w1[o] = l;
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
    Tensor a = index_select(x, axis, index_tensor(t.i0, x.device()));
    if (t.w0.empty()) {
      x = a;
      continue;
    }
    Tensor b = index_select(x, axis, index_tensor(t.i1, x.device()));
    x = a * weight_tensor(t.w0, axis, x.dim(), x) + b * weight_tensor(t.w1, axis, x.dim(), x);
  }
  return x;
}

}  // namespace

Tensor interpolate(const Tensor& x, const InterpolateOptions& opts) {
  const char* op = "interpolate";
  WEFT_CHECK(x.defined(), op, ": undefined input");
  const InterpolateMode mode = opts.mode;
  const bool linear = mode == InterpolateMode::Linear || mode == InterpolateMode::Bilinear;
  WEFT_CHECK(x.dim() >= 3, op, ": expected an input (N, C, *spatial) with at least one spatial dim, got shape ",
             shape_str(x.sizes()));
  const int64_t sd = x.dim() - 2;
  WEFT_CHECK(mode != InterpolateMode::Linear || sd == 1, op, ": mode linear expects a 3-D input (N, C, L), got shape ",
             shape_str(x.sizes()));
  WEFT_CHECK(mode != InterpolateMode::Bilinear || sd == 2, op,
             ": mode bilinear expects a 4-D input (N, C, H, W), got shape ", shape_str(x.sizes()));
  WEFT_CHECK(linear || !opts.align_corners, op, ": align_corners applies to the linear modes only, not ",
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
