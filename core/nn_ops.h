// Neural-network ops: convolution, pooling, normalisation, embedding and losses,
// as differentiable free functions (the functional forms the nn layers call).
//
// Contract: like core/ops.h — each op is defined once in core/ops/ (file named
// in the section comment) with shape checks naming the op and shapes, a CPU
// kernel registered in a KernelTable per dtype, and its backward. Layouts are
// PyTorch's: NCHW images, (N, C) or (N, C, L) for batch norm, weights (out, in/groups, kH, kW).
#pragma once

#include <array>
#include <functional>
#include <optional>
#include <vector>

#include "core/ops.h"

namespace weft {

// ---- convolution (core/ops/conv.cc; im2col + GEMM on CPU) ----
// x: (N, C_in, H, W), weight: (C_out, C_in / groups, kH, kW), bias: (C_out) or undefined
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              std::array<int64_t, 2> stride = {1, 1}, std::array<int64_t, 2> padding = {0, 0},
              std::array<int64_t, 2> dilation = {1, 1}, int64_t groups = 1);

// ---- transposed and 1-D convolution (core/ops/conv_transpose.cc, on conv2d's kernels) ----
// The adjoint of conv2d in its input. x: (N, C_in, H, W) or (C_in, H, W), weight:
// (C_in, C_out / groups, kH, kW), bias: (C_out) or undefined; output (N, C_out, OH, OW) with
// OH = (H - 1) sH - 2 pH + dH (kH - 1) + output_padding + 1 (output_padding < stride).
// Arguments in PyTorch's order.
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        std::array<int64_t, 2> stride = {1, 1}, std::array<int64_t, 2> padding = {0, 0},
                        std::array<int64_t, 2> output_padding = {0, 0}, int64_t groups = 1,
                        std::array<int64_t, 2> dilation = {1, 1});
// x: (N, C_in, L) or (C_in, L), weight: (C_out, C_in / groups, K)
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), int64_t stride = 1,
              int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1);
// x: (N, C_in, L) or (C_in, L), weight: (C_in, C_out / groups, K)
Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), int64_t stride = 1,
                        int64_t padding = 0, int64_t output_padding = 0, int64_t groups = 1, int64_t dilation = 1);

// ---- resampling (core/ops/interpolate.cc) ----
enum class InterpolateMode { Nearest, NearestExact, Linear, Bilinear, Bicubic };
// PyTorch's F.interpolate: exactly one of `size` and `scale_factor`, each one value
// for every spatial dim or one per dim. linear takes (N, C, L), bilinear and bicubic
// (N, C, H, W), the nearest modes any (N, C, *spatial).
struct InterpolateOptions {
  std::vector<int64_t> size;
  std::vector<double> scale_factor;
  InterpolateMode mode = InterpolateMode::Nearest;
  bool align_corners = false;  // the linear modes and bicubic only
};
Tensor interpolate(const Tensor& x, const InterpolateOptions& opts);

// ---- pooling (core/ops/pool.cc) ----
// stride defaults to kernel_size (stride {0, 0} means "same as kernel")
Tensor max_pool2d(const Tensor& x, std::array<int64_t, 2> kernel_size, std::array<int64_t, 2> stride = {0, 0},
                  std::array<int64_t, 2> padding = {0, 0}, std::array<int64_t, 2> dilation = {1, 1},
                  bool ceil_mode = false);
Tensor avg_pool2d(const Tensor& x, std::array<int64_t, 2> kernel_size, std::array<int64_t, 2> stride = {0, 0},
                  std::array<int64_t, 2> padding = {0, 0}, bool ceil_mode = false, bool count_include_pad = true);
Tensor adaptive_avg_pool2d(const Tensor& x, std::array<int64_t, 2> output_size);
// 1-D pooling (core/ops/pool1d_rms_norm.cc, on the 2-D kernels): x (N, C, L) or
// (C, L); stride 0 means "same as kernel_size" (PyTorch's stride=None).
Tensor max_pool1d(const Tensor& x, int64_t kernel_size, int64_t stride = 0, int64_t padding = 0, int64_t dilation = 1,
                  bool ceil_mode = false);
Tensor avg_pool1d(const Tensor& x, int64_t kernel_size, int64_t stride = 0, int64_t padding = 0, bool ceil_mode = false,
                  bool count_include_pad = true);
Tensor adaptive_avg_pool1d(const Tensor& x, int64_t output_size);

// ---- normalisation (core/ops/norm.cc) ----
// x: (N, C) or (N, C, *). In training mode uses batch statistics and, when
// running_mean/var are defined, updates them in place with `momentum`
// (unbiased variance, like PyTorch); in eval mode uses the running statistics.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum = 0.1, double eps = 1e-5);
// Normalises over the trailing dims given by normalized_shape.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

// PyTorch's instance_norm (core/ops/nn_composed.cc): x (N, C, *) normalised per
// sample and channel over the spatial dims, by batch_norm on (1, N * C, *). With
// use_input_stats and running_mean / running_var (C) defined, those are updated
// in place with the mean over the batch of each sample's update (momentum as
// batch_norm's); without use_input_stats they normalise instead.
Tensor instance_norm(const Tensor& x, const Tensor& running_mean = Tensor(), const Tensor& running_var = Tensor(),
                     const Tensor& weight = Tensor(), const Tensor& bias = Tensor(), bool use_input_stats = true,
                     double momentum = 0.1, double eps = 1e-5);

// PyTorch's rms_norm (core/ops/pool1d_rms_norm.cc): x / sqrt(mean(x^2) + eps) over
// the trailing dims given by normalized_shape, times weight (normalized_shape) when
// defined. eps defaults to the machine epsilon of x's dtype (float32's for float16
// and bfloat16, which are normalised in float32 and rounded at the end).
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                std::optional<double> eps = std::nullopt);

// x: (N, C, *), normalised over each group of C / num_groups channels of each
// sample (biased variance), then scaled and shifted per channel by weight / bias (C).
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                  double eps = 1e-5);

// ---- activations (core/ops/activations.cc, composed of element-wise ops and where) ----
// PyTorch's definitions and defaults, and its gradients at the kinks.
// clamp(x, min_val, max_val); gradient 1 strictly inside, 0 elsewhere
Tensor hardtanh(const Tensor& x, double min_val = -1.0, double max_val = 1.0);
Tensor relu6(const Tensor& x);  // hardtanh(x, 0, 6)
// x / 6 + 1/2 on (-3, 3), 0 below, 1 above
Tensor hardsigmoid(const Tensor& x);
// x (x + 3) / 6 on (-3, 3), 0 at and below -3, x at and above 3
Tensor hardswish(const Tensor& x);
Tensor mish(const Tensor& x);  // x tanh(softplus(x))
// scale elu(x, alpha) with SELU's alpha 1.6732632423543772 and scale 1.0507009873554805
Tensor selu(const Tensor& x);
// x where x > 0, else alpha (exp(x / alpha) - 1)
Tensor celu(const Tensor& x, double alpha = 1.0);
Tensor logsigmoid(const Tensor& x);  // log(sigmoid(x))
Tensor softsign(const Tensor& x);    // x / (1 + |x|)
// a * sigmoid(b), a and b the two halves of x along dim (its size must be even)
Tensor glu(const Tensor& x, int64_t dim = -1);
// x where x > 0, else weight * x; weight: one parameter, or one per channel (dim 1 of x)
Tensor prelu(const Tensor& x, const Tensor& weight);

// ---- rearranging and channel dropout (core/ops/nn_composed.cc) ----
// (*, C r^2, H, W) -> (*, C, H r, W r), and back.
Tensor pixel_shuffle(const Tensor& x, int64_t upscale_factor);
Tensor pixel_unshuffle(const Tensor& x, int64_t downscale_factor);
// Dropout of whole channels: each channel of each sample zeroed with
// probability p, the rest scaled by 1 / (1 - p). dropout1d takes (N, C, L) or
// (C, L), dropout2d (N, C, H, W) or (C, H, W). Identity when !training.
Tensor dropout1d(const Tensor& x, double p = 0.5, bool training = true);
Tensor dropout2d(const Tensor& x, double p = 0.5, bool training = true);

// ---- recurrent cells (core/ops/rnn_cell.cc) ----
// One LSTM step's element-wise part: with gates = xg + hg (N, 4H) in PyTorch's
// order i, f, g, o and the cell state c (N, H):
//   c2 = sigmoid(f) c + sigmoid(i) tanh(g);  h2 = sigmoid(o) tanh(c2)
// Returns {h2, c2}, both (N, H). One fused pass forward and backward where the
// device registers the kernels (the CPU: float32, float64), else the
// element-wise ops; the values agree to a few ulp.
std::pair<Tensor, Tensor> lstm_cell(const Tensor& xg, const Tensor& hg, const Tensor& c);

// ---- embedding (core/ops/embedding.cc) ----
// weight: (num_embeddings, dim); indices: int64 of any shape -> (*indices.shape, dim).
// padding_idx (negative counts from the end): that row gets no gradient.
// max_norm: first, every row the indices name whose norm_type-norm exceeds it
// is scaled in place to that norm (embedding_renorm_). scale_grad_by_freq:
// each row's gradient is divided by how often the indices name it.
Tensor embedding(const Tensor& indices, const Tensor& weight, std::optional<int64_t> padding_idx = std::nullopt,
                 std::optional<double> max_norm = std::nullopt, double norm_type = 2.0,
                 bool scale_grad_by_freq = false);
// PyTorch's torch.embedding_renorm_: rows of `weight` named by `indices` with a
// norm_type-norm above max_norm scaled by max_norm / (norm + 1e-7), in place,
// without autograd (the weight's version advances).
void embedding_renorm_(const Tensor& weight, const Tensor& indices, double max_norm, double norm_type);

// ---- embedding_bag (core/ops/embedding_bag.cc) ----
// Sums, means or maxima of bags of embedding rows, without the (n, dim)
// lookups in between being kept by the caller (PyTorch's F.embedding_bag).
enum class EmbeddingBagMode { Sum, Mean, Max };
struct EmbeddingBagOptions {
  // input 1-D: bag b is input[offsets[b] : offsets[b + 1]] (the last to the
  // end, or to offsets' last entry with include_last_offset); input 2-D (B, L):
  // offsets undefined, each row a bag.
  Tensor offsets;
  std::optional<double> max_norm;  // as for embedding
  double norm_type = 2.0;
  bool scale_grad_by_freq = false;
  EmbeddingBagMode mode = EmbeddingBagMode::Mean;
  Tensor per_sample_weights;  // input's shape; Sum only
  bool include_last_offset = false;
  std::optional<int64_t> padding_idx;  // entries left out of their bag (and of a mean's count)
};
// weight (num_embeddings, dim) -> (bags, dim); an empty bag gives zeros.
Tensor embedding_bag(const Tensor& input, const Tensor& weight, const EmbeddingBagOptions& opts = {});

// ---- losses (core/ops/loss.cc) ----
enum class Reduction { None, Mean, Sum };
// logits: (N, C) or (N, C, d1...), target: int64 class indices (N) / (N, d1...);
// weight: undefined or (C) per-class weights (Mean then divides by the sum of
// the kept targets' weights, as PyTorch).
Tensor cross_entropy(const Tensor& logits, const Tensor& target, Reduction reduction = Reduction::Mean,
                     int64_t ignore_index = -100, double label_smoothing = 0.0, const Tensor& weight = Tensor());
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction reduction = Reduction::Mean,
                int64_t ignore_index = -100, const Tensor& weight = Tensor());
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
// pos_weight (broadcast to the input, usually (C)) weighs the positive term;
// weight (broadcast to the input) rescales each element's loss.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        Reduction reduction = Reduction::Mean, const Tensor& pos_weight = Tensor(),
                                        const Tensor& weight = Tensor());

// Composed of element-wise ops (core/ops/losses_composed.cc); input and target
// of equal shapes, as for mse_loss.
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
// 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (beta 0: l1_loss)
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean,
                      double beta = 1.0);
// 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta)
Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean, double delta = 1.0);
// BatchMean divides the sum by the batch size (dim 0): the KL divergence per sample.
enum class KlDivReduction { None, Mean, Sum, BatchMean };
// input: log-probabilities; target: probabilities (log-probabilities with log_target)
Tensor kl_div(const Tensor& input, const Tensor& target, KlDivReduction reduction = KlDivReduction::Mean,
              bool log_target = false);
// input: probabilities in [0, 1]; weight (input's shape) or undefined
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean,
                            const Tensor& weight = Tensor());
// ---- margin, ranking and likelihood losses (core/ops/losses_margin.cc) ----
// PyTorch's definitions, defaults and reductions; the per-element losses:
// max(0, -target (input1 - input2) + margin); inputs and target of one shape
Tensor margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target, double margin = 0.0,
                           Reduction reduction = Reduction::Mean);
// input where target is 1, max(0, margin - input) where it is -1
Tensor hinge_embedding_loss(const Tensor& input, const Tensor& target, double margin = 1.0,
                            Reduction reduction = Reduction::Mean);
// log(1 + exp(-target input)), target 1 or -1
Tensor soft_margin_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
// inputs (N, D) with target (N) (or (D) with a 0-D target) of 1 or -1: 1 - cos where
// the target is 1, max(0, cos - margin) where it is -1 (cos with ATen's 1e-12 guard)
Tensor cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target, double margin = 0.0,
                             Reduction reduction = Reduction::Mean);
// the p-norm of x1 - x2 + eps over the last dim
Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p = 2.0, double eps = 1e-6, bool keepdim = false);
// max(0, d(anchor, positive) - d(anchor, negative) + margin), d = pairwise_distance;
// swap uses min(d(a, n), d(p, n)) as the negative distance. Inputs (N, D) or (D).
Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative, double margin = 1.0,
                           double p = 2.0, double eps = 1e-6, bool swap = false, Reduction reduction = Reduction::Mean);
// log_input: exp(input) - target input; else input - target log(input + eps); full adds
// Stirling's term where the target is above 1
Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, bool log_input = true, bool full = false,
                        double eps = 1e-8, Reduction reduction = Reduction::Mean);
// (log(var) + (input - target)^2 / var) / 2 (+ log(2 pi) / 2 with full), var clamped to
// eps in value only; var of input's shape, or without (or with 1 in) its last dim
Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var, bool full = false,
                         double eps = 1e-6, Reduction reduction = Reduction::Mean);
// -(target logsigmoid(input) + (1 - target) logsigmoid(-input)), times weight (C),
// averaged over the classes (last dim), then reduced over the batch
Tensor multilabel_soft_margin_loss(const Tensor& input, const Tensor& target, const Tensor& weight = Tensor(),
                                   Reduction reduction = Reduction::Mean);
// The multi-class hinge loss: per sample, the sum over the classes i other than
// the target y of weight[y] max(0, margin - x[y] + x[i])^p, over C. input (N, C)
// or (C); target (N) (or 0-D) integer class indices in [0, C); p 1 or 2; weight
// (C) or undefined (not differentiated, as PyTorch). Reduction None gives (N),
// or a 0-D loss for a 0-D target.
Tensor multi_margin_loss(const Tensor& input, const Tensor& target, int64_t p = 1, double margin = 1.0,
                         const Tensor& weight = Tensor(), Reduction reduction = Reduction::Mean);
// The multi-label hinge loss: target (input's shape, integers in [-1, C)) lists
// each sample's classes up to its first -1; per sample, the sum over the classes
// j listed and the classes i not listed of max(0, 1 - (x[j] - x[i])), over C (a
// class listed twice counts twice). input (N, C) or (C); None gives (N) or 0-D.
Tensor multilabel_margin_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
// A distance between two batches of embeddings, one value per pair.
using DistanceFunction = std::function<Tensor(const Tensor&, const Tensor&)>;
// max(0, margin + d(anchor, positive) - d(anchor, negative)) with any distance d
// (empty: pairwise_distance); swap uses min(d(a, n), d(p, n)). margin > 0.
Tensor triplet_margin_with_distance_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                                         const DistanceFunction& distance = {}, double margin = 1.0, bool swap = false,
                                         Reduction reduction = Reduction::Mean);

// ---- connectionist temporal classification (core/ops/ctc.cc) ----
struct CtcLossOptions {
  int64_t blank = 0;
  Reduction reduction = Reduction::Mean;  // Mean: each loss over its target length (at least 1), then the batch mean
  bool zero_infinity = false;             // infinite losses (alignments that cannot fit) and their gradients become 0
};
// PyTorch's F.ctc_loss: log_probs (T, N, C) log-softmaxed over C, or unbatched
// (T, C); targets padded (N, S) or concatenated (sum(target_lengths)), int64 or
// int32 classes other than blank; input_lengths and target_lengths one int per
// sample (input lengths at most T). Reduction None gives (N). The gradient is
// the derivative with respect to log_probs (PyTorch's adds exp(log_probs), which
// log_softmax's backward cancels: the logits' gradients agree).
Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, const CtcLossOptions& options = {});

// sum over dim of (x1 / max(|x1|, eps)) (x2 / max(|x2|, eps))
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim = 1, double eps = 1e-8);
// x / max(|x|_p over dim, eps)
Tensor normalize(const Tensor& x, double p = 2.0, int64_t dim = 1, double eps = 1e-12);

// ---- fused transformer MLP (core/ops/matmul.cc, Note [fused mlp]) ----
// linear(gelu(linear(x, w1, b1), GeluApproximation::Tanh), w2, b2), with x (..., in),
// w1 (hidden, in), b1 (hidden), w2 (out, hidden), b2 (out) -> (..., out): the same
// values and gradients (to a few ulp), the GELU computed inside the GEMMs where the
// device registers those kernels (the CPU in float32), else the three ops.
Tensor mlp_gelu_tanh(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2);

// ---- attention (core/ops/attention.cc) ----
// q, k, v: (B, H, T, D). Causal masking when is_causal; softmax(q k^T / sqrt(D)) v.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool is_causal = false,
                                    double dropout_p = 0.0, bool training = true);

// PyTorch's F.scaled_dot_product_attention in full. attn_mask, broadcastable to
// the scores (..., L, S): boolean (true: the key takes part, as PyTorch) or
// floating (added to the scaled scores); it and is_causal exclude each other.
// scale defaults to 1 / sqrt(D). A query row whose keys are all masked gets zero
// weights, hence a zero output row and zero gradients (PyTorch's safe softmax).
struct AttentionOptions {
  Tensor attn_mask;
  double dropout_p = 0.0;
  bool is_causal = false;
  std::optional<double> scale;
  bool training = true;  // dropout applies only when training
};
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options);
// The attention weights softmax(scale q k^T [+ mask]) (..., L, S) for those
// options, before dropout: what MultiheadAttention returns with need_weights.
Tensor scaled_dot_product_attention_weights(const Tensor& q, const Tensor& k, const AttentionOptions& options);

}  // namespace weft
