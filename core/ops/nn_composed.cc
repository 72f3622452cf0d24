// nn ops composed of other ops (contracts in core/nn_ops.h): instance_norm on
// batch_norm (PyTorch's own construction), pixel_shuffle / pixel_unshuffle as
// reshapes and a permute, and dropout1d / dropout2d as one Bernoulli mask per
// channel. Autograd and every device come from the ops they use.
#include "core/autograd_meta.h"
#include "core/error.h"
#include "core/nn_ops.h"
#include "core/ops.h"

namespace weft {

Tensor instance_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                     const Tensor& bias, bool use_input_stats, double momentum, double eps) {
  WEFT_CHECK(x.defined(), "instance_norm: undefined input");
  WEFT_CHECK(x.dim() >= 3, "instance_norm: expected an input of shape (N, C, *) with at least one spatial dim, got ",
             "shape ", shape_str(x.sizes()));
  WEFT_CHECK(running_mean.defined() == running_var.defined(),
             "instance_norm: running_mean and running_var must both be given or both be undefined");
  WEFT_CHECK(use_input_stats || running_mean.defined(),
             "instance_norm: expected running_mean and running_var to be defined when use_input_stats is false");
  const int64_t n = x.size(0), c = x.size(1);
  if (use_input_stats) {
    WEFT_CHECK(x.numel() / std::max<int64_t>(n * c, 1) > 1 || n * c == 0,
               "instance_norm: expected more than 1 spatial element when training, got input shape ",
               shape_str(x.sizes()));
  }
  for (const auto& [name, t] : {std::pair<const char*, const Tensor&>{"running_mean", running_mean},
                                {"running_var", running_var},
                                {"weight", weight},
                                {"bias", bias}}) {
    WEFT_CHECK(!t.defined() || (t.dim() == 1 && t.size(0) == c), "instance_norm: ", name, " must have shape [", c,
               "] (the input's channels), got ", shape_str(t.sizes()));
  }
  // One batch-norm channel per (sample, channel): (1, N * C, *), the per-channel
  // tensors repeated N times; the running statistics are the mean over the N copies.
  Shape shape = x.sizes();
  shape[0] = 1;
  shape[1] = n * c;
  auto rep = [n](const Tensor& t) { return t.defined() ? t.repeat({n}) : Tensor(); };
  Tensor rm = rep(running_mean), rv = rep(running_var);
  Tensor y = batch_norm(x.contiguous().view(shape), rm, rv, rep(weight), rep(bias), use_input_stats, momentum, eps);
  if (running_mean.defined() && use_input_stats) {
    NoGradGuard ng;
    Tensor m = running_mean, v = running_var;
    m.copy_(mean(rm.view({n, c}), {0}));
    v.copy_(mean(rv.view({n, c}), {0}));
  }
  return y.view(x.sizes());
}

Tensor pixel_shuffle(const Tensor& x, int64_t r) {
  WEFT_CHECK(x.defined() && x.dim() >= 3, "pixel_shuffle: expected an input of shape (*, C * r^2, H, W), got shape ",
             x.defined() ? shape_str(x.sizes()) : std::string("undefined"));
  WEFT_CHECK(r > 0, "pixel_shuffle: upscale_factor must be positive, got ", r);
  const int64_t d = x.dim(), c = x.size(d - 3), h = x.size(d - 2), w = x.size(d - 1);
  WEFT_CHECK(c % (r * r) == 0, "pixel_shuffle: channels ", c, " of input shape ", shape_str(x.sizes()),
             " are not divisible by upscale_factor^2 = ", r * r);
  Shape lead(x.sizes().begin(), x.sizes().end() - 3);
  Shape split = lead;  // (*, C', r, r, H, W)
  for (int64_t s : {c / (r * r), r, r, h, w}) split.push_back(s);
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < d - 3; ++i) perm.push_back(i);
  const int64_t b = d - 3;
  for (int64_t i : {b, b + 3, b + 1, b + 4, b + 2}) perm.push_back(i);  // (*, C', H, r, W, r)
  Shape out = lead;
  for (int64_t s : {c / (r * r), h * r, w * r}) out.push_back(s);
  return x.reshape(split).permute(perm).reshape(out);
}

Tensor pixel_unshuffle(const Tensor& x, int64_t r) {
  WEFT_CHECK(x.defined() && x.dim() >= 3,
             "pixel_unshuffle: expected an input of shape (*, C, H * r, W * r), got shape ",
             x.defined() ? shape_str(x.sizes()) : std::string("undefined"));
  WEFT_CHECK(r > 0, "pixel_unshuffle: downscale_factor must be positive, got ", r);
  const int64_t d = x.dim(), c = x.size(d - 3), h = x.size(d - 2), w = x.size(d - 1);
  WEFT_CHECK(h % r == 0 && w % r == 0, "pixel_unshuffle: height ", h, " and width ", w, " of input shape ",
             shape_str(x.sizes()), " must be divisible by downscale_factor ", r);
  Shape lead(x.sizes().begin(), x.sizes().end() - 3);
  Shape split = lead;  // (*, C, H', r, W', r)
  for (int64_t s : {c, h / r, r, w / r, r}) split.push_back(s);
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < d - 3; ++i) perm.push_back(i);
  const int64_t b = d - 3;
  for (int64_t i : {b, b + 2, b + 4, b + 1, b + 3}) perm.push_back(i);  // (*, C, r, r, H', W')
  Shape out = lead;
  for (int64_t s : {c * r * r, h / r, w / r}) out.push_back(s);
  return x.reshape(split).permute(perm).reshape(out);
}

namespace {

// Zeroes whole channels: one Bernoulli(1 - p) draw per (sample, channel), the
// survivors scaled by 1 / (1 - p). `batched_dims` is the input rank with a batch dim.
Tensor channel_dropout(const char* op, const Tensor& x, double p, bool training, int64_t batched_dims) {
  WEFT_CHECK(x.defined(), op, ": undefined input");
  WEFT_CHECK(p >= 0.0 && p <= 1.0, op, ": dropout probability has to be between 0 and 1, but got ", p);
  WEFT_CHECK(x.dim() == batched_dims || x.dim() == batched_dims - 1, op, ": expected a ", batched_dims - 1, "-D or ",
             batched_dims, "-D input, got shape ", shape_str(x.sizes()));
  WEFT_CHECK(is_floating(x.dtype()), op, ": expected a floating dtype, got ", x.dtype());
  if (!training || p == 0.0) return x;
  if (p == 1.0) return x * 0.0;
  const bool batched = x.dim() == batched_dims;
  Shape mask_shape(static_cast<size_t>(x.dim()), 1);  // (N, C, 1, ...) or (C, 1, ...)
  mask_shape[0] = x.size(0);
  if (batched) mask_shape[1] = x.size(1);
  Tensor keep = full(mask_shape, 1.0 - p, x.options());
  Tensor mask = bernoulli(keep) / (1.0 - p);
  return x * mask;
}

}  // namespace

Tensor dropout1d(const Tensor& x, double p, bool training) { return channel_dropout("dropout1d", x, p, training, 3); }
Tensor dropout2d(const Tensor& x, double p, bool training) { return channel_dropout("dropout2d", x, p, training, 4); }

}  // namespace weft
