#include "nn/layers.h"

#include "autograd/engine.h"
#include "core/autograd_meta.h"
#include "core/ops.h"
#include "nn/init.h"

namespace weft::nn {

namespace {
// PyTorch's default for Linear/Conv: kaiming_uniform(a=sqrt(5)) weight, and a
// bias uniform in +-1/sqrt(fan_in).
void default_reset(Tensor& weight, Tensor& bias) {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    int64_t fan_in = init::fans(weight).first;
    double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
    init::uniform_(bias, -bound, bound);
  }
}
}  // namespace

Linear::Linear(int64_t in, int64_t out, bool with_bias) : Module("Linear"), in_features(in), out_features(out) {
  WEFT_CHECK(in >= 0 && out >= 0, "Linear: feature counts must be non-negative, got in=", in, " out=", out);
  weight = register_parameter("weight", empty({out, in}));
  if (with_bias) bias = register_parameter("bias", empty({out}));
  reset_parameters();
}
void Linear::reset_parameters() { default_reset(weight, bias); }
Tensor Linear::forward(const Tensor& x) {
  WEFT_CHECK(x.dim() >= 1 && x.size(-1) == in_features, "Linear: input of shape ", shape_str(x.sizes()),
             " does not end in in_features=", in_features);
  return linear(x, weight, bias);
}
std::string Linear::extra_repr() const {
  return "in_features=" + std::to_string(in_features) + ", out_features=" + std::to_string(out_features) +
         ", bias=" + (bias.defined() ? "true" : "false");
}

Conv2d::Conv2d(int64_t in, int64_t out, std::array<int64_t, 2> k, const Conv2dOptions& opts)
    : Module("Conv2d"), in_channels(in), out_channels(out), kernel_size(k), options(opts) {
  WEFT_CHECK(opts.groups > 0 && in % opts.groups == 0 && out % opts.groups == 0, "Conv2d: in_channels ", in,
             " and out_channels ", out, " must both be divisible by groups ", opts.groups);
  WEFT_CHECK(k[0] > 0 && k[1] > 0, "Conv2d: kernel size must be positive, got ", k[0], "x", k[1]);
  WEFT_CHECK(!opts.same_padding || (opts.stride[0] == 1 && opts.stride[1] == 1),
             "Conv2d: same padding needs a stride of 1, got (", opts.stride[0], ", ", opts.stride[1], ")");
  weight = register_parameter("weight", empty({out, in / opts.groups, k[0], k[1]}));
  if (opts.bias) bias = register_parameter("bias", empty({out}));
  reset_parameters();
}
void Conv2d::reset_parameters() { default_reset(weight, bias); }
Tensor Conv2d::forward(const Tensor& x) {
  const Conv2dOptions& o = options;
  if (!o.same_padding && o.padding_mode == PadMode::Constant)
    return conv2d(x, weight, bias, o.stride, o.padding, o.dilation, o.groups);
  // (before, after) per dim; same padding puts the odd one after, like PyTorch
  std::array<int64_t, 2> before = o.padding, after = o.padding;
  if (o.same_padding) {
    for (int i = 0; i < 2; ++i) {
      const int64_t total = o.dilation[i] * (kernel_size[i] - 1);
      before[i] = total / 2;
      after[i] = total - before[i];
    }
  }
  if (o.padding_mode == PadMode::Constant && before == after)
    return conv2d(x, weight, bias, o.stride, before, o.dilation, o.groups);
  Tensor xp = pad(x, {before[1], after[1], before[0], after[0]}, o.padding_mode);
  return conv2d(xp, weight, bias, o.stride, {0, 0}, o.dilation, o.groups);
}
std::string Conv2d::extra_repr() const {
  return std::to_string(in_channels) + ", " + std::to_string(out_channels) + ", kernel_size=(" +
         std::to_string(kernel_size[0]) + ", " + std::to_string(kernel_size[1]) + "), stride=(" +
         std::to_string(options.stride[0]) + ", " + std::to_string(options.stride[1]) + "), padding=(" +
         std::to_string(options.padding[0]) + ", " + std::to_string(options.padding[1]) + ")";
}

Conv1d::Conv1d(int64_t in, int64_t out, int64_t k, const Conv1dOptions& opts)
    : Module("Conv1d"), in_channels(in), out_channels(out), kernel_size(k), options(opts) {
  WEFT_CHECK(opts.groups > 0 && in % opts.groups == 0 && out % opts.groups == 0, "Conv1d: in_channels ", in,
             " and out_channels ", out, " must both be divisible by groups ", opts.groups);
  WEFT_CHECK(k > 0, "Conv1d: kernel size must be positive, got ", k);
  weight = register_parameter("weight", empty({out, in / opts.groups, k}));
  if (opts.bias) bias = register_parameter("bias", empty({out}));
  reset_parameters();
}
void Conv1d::reset_parameters() { default_reset(weight, bias); }
Tensor Conv1d::forward(const Tensor& x) {
  return conv1d(x, weight, bias, options.stride, options.padding, options.dilation, options.groups);
}
std::string Conv1d::extra_repr() const {
  return std::to_string(in_channels) + ", " + std::to_string(out_channels) +
         ", kernel_size=" + std::to_string(kernel_size) + ", stride=" + std::to_string(options.stride) +
         ", padding=" + std::to_string(options.padding);
}

ConvTranspose2d::ConvTranspose2d(int64_t in, int64_t out, std::array<int64_t, 2> k, const ConvTranspose2dOptions& opts)
    : Module("ConvTranspose2d"), in_channels(in), out_channels(out), kernel_size(k), options(opts) {
  WEFT_CHECK(opts.groups > 0 && in % opts.groups == 0 && out % opts.groups == 0, "ConvTranspose2d: in_channels ", in,
             " and out_channels ", out, " must both be divisible by groups ", opts.groups);
  WEFT_CHECK(k[0] > 0 && k[1] > 0, "ConvTranspose2d: kernel size must be positive, got ", k[0], "x", k[1]);
  weight = register_parameter("weight", empty({in, out / opts.groups, k[0], k[1]}));
  if (opts.bias) bias = register_parameter("bias", empty({out}));
  reset_parameters();
}
// (PyTorch's init: fan_in is dim 1 of the weight, C_out / groups * kH * kW)
void ConvTranspose2d::reset_parameters() { default_reset(weight, bias); }
Tensor ConvTranspose2d::forward(const Tensor& x) {
  return conv_transpose2d(x, weight, bias, options.stride, options.padding, options.output_padding, options.groups,
                          options.dilation);
}
std::string ConvTranspose2d::extra_repr() const {
  return std::to_string(in_channels) + ", " + std::to_string(out_channels) + ", kernel_size=(" +
         std::to_string(kernel_size[0]) + ", " + std::to_string(kernel_size[1]) + "), stride=(" +
         std::to_string(options.stride[0]) + ", " + std::to_string(options.stride[1]) + "), padding=(" +
         std::to_string(options.padding[0]) + ", " + std::to_string(options.padding[1]) + ")";
}

ConvTranspose1d::ConvTranspose1d(int64_t in, int64_t out, int64_t k, const ConvTranspose1dOptions& opts)
    : Module("ConvTranspose1d"), in_channels(in), out_channels(out), kernel_size(k), options(opts) {
  WEFT_CHECK(opts.groups > 0 && in % opts.groups == 0 && out % opts.groups == 0, "ConvTranspose1d: in_channels ", in,
             " and out_channels ", out, " must both be divisible by groups ", opts.groups);
  WEFT_CHECK(k > 0, "ConvTranspose1d: kernel size must be positive, got ", k);
  weight = register_parameter("weight", empty({in, out / opts.groups, k}));
  if (opts.bias) bias = register_parameter("bias", empty({out}));
  reset_parameters();
}
// (PyTorch's init: fan_in is dim 1 of the weight, C_out / groups * K)
void ConvTranspose1d::reset_parameters() { default_reset(weight, bias); }
Tensor ConvTranspose1d::forward(const Tensor& x) {
  return conv_transpose1d(x, weight, bias, options.stride, options.padding, options.output_padding, options.groups,
                          options.dilation);
}
std::string ConvTranspose1d::extra_repr() const {
  return std::to_string(in_channels) + ", " + std::to_string(out_channels) +
         ", kernel_size=" + std::to_string(kernel_size) + ", stride=" + std::to_string(options.stride) +
         ", padding=" + std::to_string(options.padding);
}

BatchNorm::BatchNorm(const char* type, int64_t lo, int64_t hi, int64_t c, double eps, std::optional<double> momentum,
                     bool affine, bool track)
    : Module(type), num_features(c), eps(eps), momentum(momentum), dims_lo_(lo), dims_hi_(hi) {
  if (affine) {
    weight = register_parameter("weight", ones({c}));
    bias = register_parameter("bias", zeros({c}));
  }
  if (track) {
    running_mean = register_buffer("running_mean", zeros({c}));
    running_var = register_buffer("running_var", ones({c}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, {DType::Int64}));
  }
}
Tensor BatchNorm::forward(const Tensor& x) {
  WEFT_CHECK(
      x.dim() >= dims_lo_ && x.dim() <= dims_hi_, type_name(), ": expected ",
      dims_lo_ == dims_hi_ ? std::to_string(dims_lo_) : std::to_string(dims_lo_) + "D or " + std::to_string(dims_hi_),
      "D input, got shape ", shape_str(x.sizes()));
  WEFT_CHECK(x.size(1) == num_features, type_name(), ": input has ", x.size(1), " channels (shape ",
             shape_str(x.sizes()), ") but the layer was built for ", num_features);
  bool use_batch_stats = is_training() || !running_mean.defined();
  // A forward run inside backward is activation checkpointing recomputing
  // this one: it normalises the same way but must not update the running
  // statistics a second time.
  const bool update = is_training() && running_mean.defined() && !autograd::in_backward();
  if (deferred_chunks_ > 0 && is_training() && running_mean.defined()) {  // Note [deferred batch norm]
    if (update) accumulate(x);
    return batch_norm(x, Tensor(), Tensor(), weight, bias, /*training=*/true, 0.0, eps);
  }
  if (update && num_batches_tracked.defined()) {
    NoGradGuard ng;
    num_batches_tracked.add_(1);
  }
  if (is_training() && !update) return batch_norm(x, Tensor(), Tensor(), weight, bias, use_batch_stats, 0.0, eps);
  return batch_norm(x, running_mean, running_var, weight, bias, use_batch_stats, update ? average_factor() : 0.0, eps);
}

// After num_batches_tracked has counted this batch.
double BatchNorm::average_factor() const {
  if (momentum) return *momentum;
  WEFT_CHECK(num_batches_tracked.defined(), type_name(), ": momentum None (a cumulative average) needs ",
             "num_batches_tracked");
  return 1.0 / static_cast<double>(num_batches_tracked.item<int64_t>());
}

void BatchNorm::reset_running_stats() {
  if (!running_mean.defined()) return;
  NoGradGuard ng;
  running_mean.zero_();
  running_var.fill_(1.0);
  if (num_batches_tracked.defined()) num_batches_tracked.zero_();
}

void BatchNorm::set_deferred(int chunks) {
  WEFT_CHECK(chunks >= 0, type_name(), ": deferred chunks must be >= 0, got ", chunks);
  deferred_chunks_ = chunks;
  deferred_seen_ = 0;
  deferred_count_ = 0;
  deferred_sum_ = deferred_sumsq_ = Tensor();
}

void BatchNorm::accumulate(const Tensor& x) {
  NoGradGuard ng;
  std::vector<int64_t> dims = {0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  Tensor xd = x.detach().to(DType::Float64);
  Tensor s = sum(xd, dims), sq = sum(mul(xd, xd), dims);  // (C)
  if (deferred_seen_ == 0) {
    deferred_sum_ = s;
    deferred_sumsq_ = sq;
    deferred_count_ = 0;
  } else {
    deferred_sum_ = add(deferred_sum_, s);
    deferred_sumsq_ = add(deferred_sumsq_, sq);
  }
  deferred_count_ += x.numel() / x.size(1);
  if (++deferred_seen_ < deferred_chunks_) return;
  // Commit: the whole mini-batch's mean and unbiased variance.
  const double n = static_cast<double>(deferred_count_);
  Tensor mean = div(deferred_sum_, full_like(deferred_sum_, n));
  Tensor var = sub(div(deferred_sumsq_, full_like(deferred_sumsq_, n)), mul(mean, mean));
  if (n > 1) var = mul(var, full_like(var, n / (n - 1)));
  if (num_batches_tracked.defined()) num_batches_tracked.add_(1);
  const double m = average_factor();
  running_mean.mul_(Scalar(1 - m)).add_(mul(mean, full_like(mean, m)).to(running_mean.dtype()));
  running_var.mul_(Scalar(1 - m)).add_(mul(var, full_like(var, m)).to(running_var.dtype()));
  deferred_seen_ = 0;
}
std::string BatchNorm::extra_repr() const {
  return std::to_string(num_features) + ", eps=" + std::to_string(eps) +
         ", momentum=" + (momentum ? std::to_string(*momentum) : std::string("None"));
}

LayerNorm::LayerNorm(Shape shape, double eps, bool affine, bool with_bias)
    : Module("LayerNorm"), normalized_shape(shape), eps(eps) {
  if (affine) {
    weight = register_parameter("weight", ones(shape));
    if (with_bias) bias = register_parameter("bias", zeros(shape));
  }
}

RMSNorm::RMSNorm(Shape shape, std::optional<double> eps, bool affine)
    : Module("RMSNorm"), normalized_shape(shape), eps(eps) {
  WEFT_CHECK(!shape.empty(), "RMSNorm: normalized_shape must have at least one dimension");
  if (affine) weight = register_parameter("weight", ones(shape));
}
std::string RMSNorm::extra_repr() const {
  std::string r = shape_str(normalized_shape) + ", eps=";
  r += eps.has_value() ? std::to_string(*eps) : "None";
  return r + ", elementwise_affine=" + (weight.defined() ? "True" : "False");
}

GroupNorm::GroupNorm(int64_t groups, int64_t channels, double eps, bool affine)
    : Module("GroupNorm"), num_groups(groups), num_channels(channels), eps(eps) {
  WEFT_CHECK(groups > 0 && channels % groups == 0, "GroupNorm: num_groups ", groups,
             " must be positive and divide num_channels ", channels);
  if (affine) {
    weight = register_parameter("weight", ones({channels}));
    bias = register_parameter("bias", zeros({channels}));
  }
}
std::string GroupNorm::extra_repr() const {
  return std::to_string(num_groups) + ", " + std::to_string(num_channels) + ", eps=" + std::to_string(eps) +
         ", affine=" + (weight.defined() ? "true" : "false");
}

Dropout::Dropout(double p) : Module("Dropout"), p(p) {
  WEFT_CHECK(p >= 0.0 && p <= 1.0, "Dropout: probability has to be between 0 and 1, but got ", p);
}

Dropout1d::Dropout1d(double p) : Module("Dropout1d"), p(p) {
  WEFT_CHECK(p >= 0.0 && p <= 1.0, "Dropout1d: probability has to be between 0 and 1, but got ", p);
}
Dropout2d::Dropout2d(double p) : Module("Dropout2d"), p(p) {
  WEFT_CHECK(p >= 0.0 && p <= 1.0, "Dropout2d: probability has to be between 0 and 1, but got ", p);
}

namespace {
// An embedding table: N(0, 1), the padding row (checked, made non-negative) zero.
Tensor embedding_table(Module& m, const char* type, int64_t n, int64_t dim, std::optional<int64_t>& pad) {
  if (pad) {
    WEFT_CHECK(*pad < n && *pad >= -n, type, ": padding_idx ", *pad, " must be within num_embeddings ", n);
    if (*pad < 0) *pad += n;
  }
  Tensor weight = m.register_parameter("weight", empty({n, dim}));
  init::normal_(weight, 0.0, 1.0);
  if (pad) {
    NoGradGuard ng;
    weight.select(0, *pad).zero_();
  }
  return weight;
}

// A module's weight replaced by a copy of `embeddings`, frozen unless told otherwise.
void load_pretrained(Module& m, Tensor& weight, const Tensor& embeddings, bool freeze) {
  m.to(embeddings.dtype());  // the weight keeps the embeddings' dtype and device
  m.to(embeddings.device());
  {
    NoGradGuard ng;
    weight.copy_(embeddings);
  }
  weight.requires_grad_(!freeze);
}

void check_pretrained(const char* type, const Tensor& embeddings) {
  WEFT_CHECK(embeddings.defined() && embeddings.dim() == 2, type,
             ".from_pretrained: embeddings parameter is expected to be 2-dimensional, got ",
             embeddings.defined() ? "shape " + shape_str(embeddings.sizes()) : std::string("an undefined tensor"));
  WEFT_CHECK(embeddings.is_floating_point(), type, ".from_pretrained: expected floating embeddings, got dtype ",
             embeddings.dtype());
}

void check_max_norm(const char* type, const std::optional<double>& max_norm) {
  WEFT_CHECK(!max_norm || *max_norm >= 0.0, type, ": max_norm must be non-negative, got ", max_norm.value_or(0.0));
}
}  // namespace

Embedding::Embedding(int64_t n, int64_t dim, std::optional<int64_t> pad) : Embedding(n, dim, EmbeddingOptions{pad}) {}
Embedding::Embedding(int64_t n, int64_t dim, const EmbeddingOptions& o)
    : Module("Embedding"),
      padding_idx(o.padding_idx),
      max_norm(o.max_norm),
      norm_type(o.norm_type),
      scale_grad_by_freq(o.scale_grad_by_freq) {
  check_max_norm("Embedding", max_norm);
  weight = embedding_table(*this, "Embedding", n, dim, padding_idx);
}
std::shared_ptr<Embedding> Embedding::from_pretrained(const Tensor& embeddings, bool freeze,
                                                      std::optional<int64_t> padding_idx) {
  check_pretrained("Embedding", embeddings);
  auto e = std::make_shared<Embedding>(embeddings.size(0), embeddings.size(1), padding_idx);
  load_pretrained(*e, e->weight, embeddings, freeze);
  return e;
}
std::string Embedding::extra_repr() const {
  std::string r = std::to_string(weight.size(0)) + ", " + std::to_string(weight.size(1));
  if (padding_idx) r += ", padding_idx=" + std::to_string(*padding_idx);
  if (max_norm) r += ", max_norm=" + std::to_string(*max_norm);
  if (norm_type != 2.0) r += ", norm_type=" + std::to_string(norm_type);
  if (scale_grad_by_freq) r += ", scale_grad_by_freq=true";
  return r;
}

EmbeddingBag::EmbeddingBag(int64_t n, int64_t dim, const EmbeddingBagModuleOptions& o)
    : Module("EmbeddingBag"), options(o) {
  check_max_norm("EmbeddingBag", options.max_norm);
  weight = embedding_table(*this, "EmbeddingBag", n, dim, options.padding_idx);
}
std::shared_ptr<EmbeddingBag> EmbeddingBag::from_pretrained(const Tensor& embeddings, bool freeze,
                                                            const EmbeddingBagModuleOptions& options) {
  check_pretrained("EmbeddingBag", embeddings);
  auto e = std::make_shared<EmbeddingBag>(embeddings.size(0), embeddings.size(1), options);
  load_pretrained(*e, e->weight, embeddings, freeze);
  return e;
}
Tensor EmbeddingBag::forward(const Tensor& input, const Tensor& offsets, const Tensor& per_sample_weights) {
  EmbeddingBagOptions o;
  o.offsets = offsets;
  o.max_norm = options.max_norm;
  o.norm_type = options.norm_type;
  o.scale_grad_by_freq = options.scale_grad_by_freq;
  o.mode = options.mode;
  o.per_sample_weights = per_sample_weights;
  o.include_last_offset = options.include_last_offset;
  o.padding_idx = options.padding_idx;
  return embedding_bag(input, weight, o);
}
Tensors EmbeddingBag::forward_multi(const Tensors& in) {
  WEFT_CHECK(!in.empty() && in.size() <= 3, "EmbeddingBag: forward_multi takes {input[, offsets[, ",
             "per_sample_weights]]}, got ", in.size(), " tensors");
  return {forward(in[0], in.size() > 1 ? in[1] : Tensor(), in.size() > 2 ? in[2] : Tensor())};
}
std::string EmbeddingBag::extra_repr() const {
  static const char* const kModes[] = {"sum", "mean", "max"};
  std::string r = std::to_string(weight.size(0)) + ", " + std::to_string(weight.size(1)) +
                  ", mode=" + kModes[static_cast<int>(options.mode)];
  if (options.padding_idx) r += ", padding_idx=" + std::to_string(*options.padding_idx);
  if (options.max_norm) r += ", max_norm=" + std::to_string(*options.max_norm);
  if (options.scale_grad_by_freq) r += ", scale_grad_by_freq=true";
  if (options.include_last_offset) r += ", include_last_offset=true";
  return r;
}

InstanceNorm::InstanceNorm(const char* type, int64_t spatial_dims, int64_t c, double eps, double momentum, bool affine,
                           bool track)
    : Module(type), num_features(c), eps(eps), momentum(momentum), spatial_dims_(spatial_dims) {
  WEFT_CHECK(c > 0, type, ": num_features must be positive, got ", c);
  if (affine) {
    weight = register_parameter("weight", ones({c}));
    bias = register_parameter("bias", zeros({c}));
  }
  if (track) {
    running_mean = register_buffer("running_mean", zeros({c}));
    running_var = register_buffer("running_var", ones({c}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, {DType::Int64}));
  }
}
Tensor InstanceNorm::forward(const Tensor& x) {
  const int64_t unbatched = spatial_dims_ + 1;
  WEFT_CHECK(x.dim() == unbatched || x.dim() == unbatched + 1, type_name(), ": expected a ", unbatched, "-D or ",
             unbatched + 1, "-D input, got shape ", shape_str(x.sizes()));
  const int64_t channels = x.size(x.dim() - unbatched);
  WEFT_CHECK(channels == num_features || !weight.defined(), type_name(), ": input has ", channels, " channels (shape ",
             shape_str(x.sizes()), ") but the layer was built for ", num_features);
  const Tensor xb = x.dim() == unbatched ? x.unsqueeze(0) : x;
  // (a forward inside backward is checkpointing recomputing this one: no second update)
  const bool use_input_stats = is_training() || !running_mean.defined();
  const bool update = use_input_stats && running_mean.defined() && !autograd::in_backward();
  Tensor y =
      instance_norm(xb, update || !use_input_stats ? running_mean : Tensor(),
                    update || !use_input_stats ? running_var : Tensor(), weight, bias, use_input_stats, momentum, eps);
  return x.dim() == unbatched ? y.squeeze(0) : y;
}
std::string InstanceNorm::extra_repr() const {
  return std::to_string(num_features) + ", eps=" + std::to_string(eps) + ", momentum=" + std::to_string(momentum) +
         ", affine=" + (weight.defined() ? "True" : "False") +
         ", track_running_stats=" + (running_mean.defined() ? "True" : "False");
}

}  // namespace weft::nn
