// The basic layers: Linear, Conv1d, Conv2d, ConvTranspose1d/2d, pooling (1-D
// and 2-D), normalisation (batch, layer, RMS, group), Upsample, Dropout, Embedding,
// Identity and Flatten (the activations: nn/activations.h, included here;
// rearranging and padding layers: nn/shape_layers.h). Defaults (initialisation, eps, momentum)
// match PyTorch so a ported model trains the same.
#pragma once

#include <array>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "core/nn_ops.h"
#include "nn/activations.h"
#include "nn/module.h"

namespace weft::nn {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;  // (*, in) -> (*, out)
  std::string extra_repr() const override;
  void reset_parameters();
  Tensor weight;  // (out, in)
  Tensor bias;    // (out) or undefined
  int64_t in_features, out_features;
};

struct Conv2dOptions {
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};
  std::array<int64_t, 2> dilation{1, 1};
  int64_t groups = 1;
  bool bias = true;
  // PyTorch's padding="same" (stride 1 only): dilation * (k - 1) in all per dim,
  // the odd one after; replaces `padding`.
  bool same_padding = false;
  // PyTorch's padding_mode: Constant pads with zeros; Reflect, Replicate and
  // Circular pad the input with pad() before a convolution without padding.
  PadMode padding_mode = PadMode::Constant;
};

class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, std::array<int64_t, 2> kernel_size, const Conv2dOptions& opts = {});
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, const Conv2dOptions& opts = {})
      : Conv2d(in_channels, out_channels, {kernel_size, kernel_size}, opts) {}
  Tensor forward(const Tensor& x) override;  // (N, C_in, H, W) -> (N, C_out, H', W')
  std::string extra_repr() const override;
  void reset_parameters();
  Tensor weight;  // (C_out, C_in / groups, kH, kW)
  Tensor bias;    // (C_out) or undefined
  int64_t in_channels, out_channels;
  std::array<int64_t, 2> kernel_size;
  Conv2dOptions options;
};

struct Conv1dOptions {
  int64_t stride = 1, padding = 0, dilation = 1, groups = 1;
  bool bias = true;
};

class Conv1d : public Module {
 public:
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, const Conv1dOptions& opts = {});
  Tensor forward(const Tensor& x) override;  // (N, C_in, L) -> (N, C_out, L')
  std::string extra_repr() const override;
  void reset_parameters();
  Tensor weight;  // (C_out, C_in / groups, K)
  Tensor bias;    // (C_out) or undefined
  int64_t in_channels, out_channels, kernel_size;
  Conv1dOptions options;
};

struct ConvTranspose2dOptions {
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};
  std::array<int64_t, 2> output_padding{0, 0};
  std::array<int64_t, 2> dilation{1, 1};
  int64_t groups = 1;
  bool bias = true;
};

// The adjoint of Conv2d in its input (a "deconvolution"): upsampling by the stride.
class ConvTranspose2d : public Module {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, std::array<int64_t, 2> kernel_size,
                  const ConvTranspose2dOptions& opts = {});
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                  const ConvTranspose2dOptions& opts = {})
      : ConvTranspose2d(in_channels, out_channels, {kernel_size, kernel_size}, opts) {}
  Tensor forward(const Tensor& x) override;  // (N, C_in, H, W) -> (N, C_out, H', W')
  std::string extra_repr() const override;
  void reset_parameters();
  Tensor weight;  // (C_in, C_out / groups, kH, kW)
  Tensor bias;    // (C_out) or undefined
  int64_t in_channels, out_channels;
  std::array<int64_t, 2> kernel_size;
  ConvTranspose2dOptions options;
};

struct ConvTranspose1dOptions {
  int64_t stride = 1, padding = 0, output_padding = 0, dilation = 1, groups = 1;
  bool bias = true;
};

// The adjoint of Conv1d in its input: upsampling of (N, C, L) by the stride.
class ConvTranspose1d : public Module {
 public:
  ConvTranspose1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                  const ConvTranspose1dOptions& opts = {});
  Tensor forward(const Tensor& x) override;  // (N, C_in, L) -> (N, C_out, L')
  std::string extra_repr() const override;
  void reset_parameters();
  Tensor weight;  // (C_in, C_out / groups, K)
  Tensor bias;    // (C_out) or undefined
  int64_t in_channels, out_channels, kernel_size;
  ConvTranspose1dOptions options;
};

// 1-D pooling over (N, C, L) or (C, L); stride 0 means "same as kernel_size".
class MaxPool1d : public Module {
 public:
  explicit MaxPool1d(int64_t kernel_size, int64_t stride = 0, int64_t padding = 0, int64_t dilation = 1,
                     bool ceil_mode = false)
      : Module("MaxPool1d"),
        kernel_size(kernel_size),
        stride(stride),
        padding(padding),
        dilation(dilation),
        ceil_mode(ceil_mode) {}
  Tensor forward(const Tensor& x) override { return max_pool1d(x, kernel_size, stride, padding, dilation, ceil_mode); }
  int64_t kernel_size, stride, padding, dilation;
  bool ceil_mode;
};

class AvgPool1d : public Module {
 public:
  explicit AvgPool1d(int64_t kernel_size, int64_t stride = 0, int64_t padding = 0, bool ceil_mode = false,
                     bool count_include_pad = true)
      : Module("AvgPool1d"),
        kernel_size(kernel_size),
        stride(stride),
        padding(padding),
        ceil_mode(ceil_mode),
        count_include_pad(count_include_pad) {}
  Tensor forward(const Tensor& x) override {
    return avg_pool1d(x, kernel_size, stride, padding, ceil_mode, count_include_pad);
  }
  int64_t kernel_size, stride, padding;
  bool ceil_mode, count_include_pad;
};

class AdaptiveAvgPool1d : public Module {
 public:
  explicit AdaptiveAvgPool1d(int64_t output_size) : Module("AdaptiveAvgPool1d"), output_size(output_size) {}
  Tensor forward(const Tensor& x) override { return adaptive_avg_pool1d(x, output_size); }
  int64_t output_size;
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(std::array<int64_t, 2> kernel_size, std::array<int64_t, 2> stride = {0, 0},
                     std::array<int64_t, 2> padding = {0, 0})
      : Module("MaxPool2d"), kernel_size(kernel_size), stride(stride), padding(padding) {}
  explicit MaxPool2d(int64_t k) : MaxPool2d({k, k}) {}
  Tensor forward(const Tensor& x) override { return max_pool2d(x, kernel_size, stride, padding); }
  std::array<int64_t, 2> kernel_size, stride, padding;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(std::array<int64_t, 2> kernel_size, std::array<int64_t, 2> stride = {0, 0},
                     std::array<int64_t, 2> padding = {0, 0})
      : Module("AvgPool2d"), kernel_size(kernel_size), stride(stride), padding(padding) {}
  explicit AvgPool2d(int64_t k) : AvgPool2d({k, k}) {}
  Tensor forward(const Tensor& x) override { return avg_pool2d(x, kernel_size, stride, padding); }
  std::array<int64_t, 2> kernel_size, stride, padding;
};

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(std::array<int64_t, 2> output_size)
      : Module("AdaptiveAvgPool2d"), output_size(output_size) {}
  Tensor forward(const Tensor& x) override { return adaptive_avg_pool2d(x, output_size); }
  std::array<int64_t, 2> output_size;
};

// BatchNorm over dim 1 of (N, C) / (N, C, L) (1d) or (N, C, H, W) (2d).
class BatchNorm : public Module {
 public:
  BatchNorm(const char* type, int64_t expected_dims_lo, int64_t expected_dims_hi, int64_t num_features, double eps,
            std::optional<double> momentum, bool affine, bool track_running_stats);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  // running_mean 0, running_var 1, num_batches_tracked 0 (PyTorch's).
  void reset_running_stats();
  Tensor weight, bias;                                    // (C)
  Tensor running_mean, running_var, num_batches_tracked;  // buffers
  int64_t num_features;
  double eps;
  // The running statistics' update factor; std::nullopt (PyTorch's momentum
  // None) averages every batch since the last reset equally: the factor is
  // 1 / num_batches_tracked (optim::update_bn uses it).
  std::optional<double> momentum;

  // Note [deferred batch norm]: with chunks > 0, training forwards normalise
  // with their own (micro-batch) statistics but leave the running statistics
  // alone; every `chunks` forwards the statistics of those forwards' inputs
  // taken together (mean, unbiased variance) update them once, as one forward
  // on the whole mini-batch would (fairscale's DeferredBatchNorm). 0 turns it
  // off (and drops a partial accumulation).
  void set_deferred(int chunks);
  int deferred_chunks() const { return deferred_chunks_; }

 private:
  void accumulate(const Tensor& x);
  double average_factor() const;
  int64_t dims_lo_, dims_hi_;
  int deferred_chunks_ = 0;
  int deferred_seen_ = 0;
  Tensor deferred_sum_, deferred_sumsq_;  // (C) float64
  int64_t deferred_count_ = 0;
};
class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true)
      : BatchNorm("BatchNorm1d", 2, 3, num_features, eps, momentum, affine, track_running_stats) {}
};
class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true)
      : BatchNorm("BatchNorm2d", 4, 4, num_features, eps, momentum, affine, track_running_stats) {}
};

// InstanceNorm over (N, C, *) (or unbatched (C, *)): statistics per sample and
// channel; PyTorch's defaults (affine false, no running statistics). With
// track_running_stats, training updates running_mean / running_var and eval
// normalises with them.
class InstanceNorm : public Module {
 public:
  InstanceNorm(const char* type, int64_t spatial_dims, int64_t num_features, double eps, double momentum, bool affine,
               bool track_running_stats);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  Tensor weight, bias;                                    // (C) when affine
  Tensor running_mean, running_var, num_batches_tracked;  // buffers, with track_running_stats
  int64_t num_features;
  double eps, momentum;

 private:
  int64_t spatial_dims_;
};
class InstanceNorm1d : public InstanceNorm {
 public:
  explicit InstanceNorm1d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = false,
                          bool track_running_stats = false)
      : InstanceNorm("InstanceNorm1d", 1, num_features, eps, momentum, affine, track_running_stats) {}
};
class InstanceNorm2d : public InstanceNorm {
 public:
  explicit InstanceNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = false,
                          bool track_running_stats = false)
      : InstanceNorm("InstanceNorm2d", 2, num_features, eps, momentum, affine, track_running_stats) {}
};

class LayerNorm : public Module {
 public:
  // bias = false: a weight without a bias (PyTorch's bias argument)
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true, bool bias = true);
  explicit LayerNorm(int64_t dim, double eps = 1e-5) : LayerNorm(Shape{dim}, eps) {}
  Tensor forward(const Tensor& x) override { return layer_norm(x, normalized_shape, weight, bias, eps); }
  Tensor weight, bias;
  Shape normalized_shape;
  double eps;
};

// RMSNorm (PyTorch's nn.RMSNorm): x / sqrt(mean(x^2) + eps) over the trailing
// normalized_shape, times a weight of ones when elementwise_affine. eps unset:
// the machine epsilon of the input's dtype (core/nn_ops.h rms_norm).
class RMSNorm : public Module {
 public:
  explicit RMSNorm(Shape normalized_shape, std::optional<double> eps = std::nullopt, bool elementwise_affine = true);
  explicit RMSNorm(int64_t dim, std::optional<double> eps = std::nullopt) : RMSNorm(Shape{dim}, eps) {}
  Tensor forward(const Tensor& x) override { return rms_norm(x, normalized_shape, weight, eps); }
  std::string extra_repr() const override;
  Tensor weight;  // (normalized_shape) or undefined
  Shape normalized_shape;
  std::optional<double> eps;
};

// GroupNorm over (N, C, *): statistics per sample and group of C / num_groups channels;
// weight ones and bias zeros (C) when affine.
class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true);
  Tensor forward(const Tensor& x) override { return group_norm(x, num_groups, weight, bias, eps); }
  std::string extra_repr() const override;
  Tensor weight, bias;
  int64_t num_groups, num_channels;
  double eps;
};

// Resizes (N, C, *spatial) by `size` or `scale_factor` (interpolate in core/nn_ops.h).
class Upsample : public Module {
 public:
  explicit Upsample(InterpolateOptions opts) : Module("Upsample"), options(std::move(opts)) {}
  Tensor forward(const Tensor& x) override { return interpolate(x, options); }
  InterpolateOptions options;
};

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override { return dropout(x, p, is_training()); }
  std::string extra_repr() const override { return "p=" + std::to_string(p); }
  double p;
};

// Dropout of whole channels (PyTorch's Dropout1d on (N, C, L) / (C, L), Dropout2d
// on (N, C, H, W) / (C, H, W)).
class Dropout1d : public Module {
 public:
  explicit Dropout1d(double p = 0.5);
  Tensor forward(const Tensor& x) override { return dropout1d(x, p, is_training()); }
  std::string extra_repr() const override { return "p=" + std::to_string(p); }
  double p;
};
class Dropout2d : public Module {
 public:
  explicit Dropout2d(double p = 0.5);
  Tensor forward(const Tensor& x) override { return dropout2d(x, p, is_training()); }
  std::string extra_repr() const override { return "p=" + std::to_string(p); }
  double p;
};

// What nn::Embedding and nn::EmbeddingBag take besides their sizes, as
// PyTorch's arguments (embedding() in core/nn_ops.h says what each does).
struct EmbeddingOptions {
  std::optional<int64_t> padding_idx;  // negative counts from the end
  std::optional<double> max_norm;
  double norm_type = 2.0;
  bool scale_grad_by_freq = false;
};

// padding_idx (negative counts from the end): that row starts at zero and gets
// no gradient, as PyTorch's. With max_norm, forward renormalises the rows it
// reads in place (embedding_renorm_), as PyTorch's.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx = std::nullopt);
  Embedding(int64_t num_embeddings, int64_t embedding_dim, const EmbeddingOptions& options);
  // PyTorch's Embedding.from_pretrained: the weight is a copy of `embeddings`
  // (num_embeddings, embedding_dim), padding row included, in their dtype and on
  // their device; frozen (no gradient) unless freeze is false.
  static std::shared_ptr<Embedding> from_pretrained(const Tensor& embeddings, bool freeze = true,
                                                    std::optional<int64_t> padding_idx = std::nullopt);
  Tensor forward(const Tensor& indices) override {
    return embedding(indices, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq);
  }
  std::string extra_repr() const override;
  Tensor weight;                       // (num_embeddings, embedding_dim), N(0, 1) like PyTorch
  std::optional<int64_t> padding_idx;  // in [0, num_embeddings) once built
  std::optional<double> max_norm;
  double norm_type = 2.0;
  bool scale_grad_by_freq = false;
};

// PyTorch's EmbeddingBag: the sum, mean (the default) or maximum of each bag
// of rows (embedding_bag in core/nn_ops.h), without the per-entry rows being
// returned. forward(input) takes a 2-D (bags, length) input;
// forward(input, offsets[, per_sample_weights]) a 1-D one, as does
// forward_multi({input, offsets[, per_sample_weights]}).
struct EmbeddingBagModuleOptions {
  std::optional<double> max_norm;
  double norm_type = 2.0;
  bool scale_grad_by_freq = false;
  EmbeddingBagMode mode = EmbeddingBagMode::Mean;
  bool include_last_offset = false;
  std::optional<int64_t> padding_idx;  // that row starts at zero, gets no gradient and is left out of bags
};
class EmbeddingBag : public Module {
 public:
  EmbeddingBag(int64_t num_embeddings, int64_t embedding_dim, const EmbeddingBagModuleOptions& options = {});
  // The weight a copy of `embeddings`, frozen unless freeze is false.
  static std::shared_ptr<EmbeddingBag> from_pretrained(const Tensor& embeddings, bool freeze = true,
                                                       const EmbeddingBagModuleOptions& options = {});
  Tensor forward(const Tensor& input) override { return forward(input, Tensor()); }
  Tensor forward(const Tensor& input, const Tensor& offsets, const Tensor& per_sample_weights = Tensor());
  Tensors forward_multi(const Tensors& inputs) override;
  std::string extra_repr() const override;
  Tensor weight;  // (num_embeddings, embedding_dim), N(0, 1) like PyTorch
  EmbeddingBagModuleOptions options;
};

class Identity : public Module {
 public:
  Identity() : Module("Identity") {}
  Tensor forward(const Tensor& x) override { return x; }
};
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : Module("Flatten"), start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& x) override { return flatten(x, start_dim, end_dim); }
  int64_t start_dim, end_dim;
};

}  // namespace weft::nn
