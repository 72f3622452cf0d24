// Loss modules: PyTorch's nn.*Loss classes over the functional losses of
// core/nn_ops.h, with PyTorch's defaults.
//
// Contract: a loss is called with its inputs, loss(input, target) (or
// loss(a, b, c) for those that take three), runs the module's forward hooks
// and returns what the functional form returns for its options. Through the
// Module interface, forward_multi({input, target}) returns {loss}; a call with
// the wrong number of tensors is an error naming the loss and what it takes.
// The tensors a loss holds (weight, pos_weight) are buffers under PyTorch's
// names, so they are in its state dict and move with to().
#pragma once

#include <cstdint>
#include <string>

#include "core/nn_ops.h"
#include "nn/module.h"

namespace weft::nn {

class Loss : public Module {
 public:
  using Module::operator();
  Tensor operator()(const Tensor& a, const Tensor& b);
  Tensor operator()(const Tensor& a, const Tensor& b, const Tensor& c);
  Tensor operator()(const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& d);
  Tensors forward_multi(const Tensors& inputs) override;

 protected:
  // args: what the loss takes, for errors ("(input, target)").
  Loss(std::string type_name, int arity, const char* args);
  // The loss of `in` (arity tensors, checked).
  virtual Tensor compute(const Tensors& in) = 0;

 private:
  int arity_;
  const char* args_;
};

// ---- element-wise regression losses: (input, target) of one shape ----

class L1Loss : public Loss {
 public:
  explicit L1Loss(Reduction reduction = Reduction::Mean) : Loss("L1Loss", 2, "(input, target)"), reduction(reduction) {}
  Reduction reduction;

 protected:
  Tensor compute(const Tensors& in) override { return l1_loss(in[0], in[1], reduction); }
};

class MSELoss : public Loss {
 public:
  explicit MSELoss(Reduction reduction = Reduction::Mean)
      : Loss("MSELoss", 2, "(input, target)"), reduction(reduction) {}
  Reduction reduction;

 protected:
  Tensor compute(const Tensors& in) override { return mse_loss(in[0], in[1], reduction); }
};

class HuberLoss : public Loss {
 public:
  explicit HuberLoss(Reduction reduction = Reduction::Mean, double delta = 1.0);
  Reduction reduction;
  double delta;

 protected:
  Tensor compute(const Tensors& in) override { return huber_loss(in[0], in[1], reduction, delta); }
};

class SmoothL1Loss : public Loss {
 public:
  explicit SmoothL1Loss(Reduction reduction = Reduction::Mean, double beta = 1.0);
  Reduction reduction;
  double beta;

 protected:
  Tensor compute(const Tensors& in) override { return smooth_l1_loss(in[0], in[1], reduction, beta); }
};

// ---- classification losses ----

struct CrossEntropyLossOptions {
  Tensor weight;  // (C) per-class weights, or undefined
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::Mean;
  double label_smoothing = 0.0;
};

// (logits (N, C, ...), class indices (N, ...))
class CrossEntropyLoss : public Loss {
 public:
  explicit CrossEntropyLoss(CrossEntropyLossOptions options = {});
  Tensor weight;
  int64_t ignore_index;
  Reduction reduction;
  double label_smoothing;

 protected:
  Tensor compute(const Tensors& in) override;
};

struct NLLLossOptions {
  Tensor weight;
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::Mean;
};

// (log-probabilities (N, C, ...), class indices (N, ...))
class NLLLoss : public Loss {
 public:
  explicit NLLLoss(NLLLossOptions options = {});
  Tensor weight;
  int64_t ignore_index;
  Reduction reduction;

 protected:
  Tensor compute(const Tensors& in) override { return nll_loss(in[0], in[1], reduction, ignore_index, weight); }
};

struct BCELossOptions {
  Tensor weight;  // the input's shape, or undefined
  Reduction reduction = Reduction::Mean;
};

// (probabilities, targets in [0, 1])
class BCELoss : public Loss {
 public:
  explicit BCELoss(BCELossOptions options = {});
  Tensor weight;
  Reduction reduction;

 protected:
  Tensor compute(const Tensors& in) override { return binary_cross_entropy(in[0], in[1], reduction, weight); }
};

struct BCEWithLogitsLossOptions {
  Tensor weight;  // broadcastable to the input, or undefined
  Reduction reduction = Reduction::Mean;
  Tensor pos_weight;  // broadcastable to the input (usually (C)), or undefined
};

// (logits, targets in [0, 1])
class BCEWithLogitsLoss : public Loss {
 public:
  explicit BCEWithLogitsLoss(BCEWithLogitsLossOptions options = {});
  Tensor weight, pos_weight;
  Reduction reduction;

 protected:
  Tensor compute(const Tensors& in) override {
    return binary_cross_entropy_with_logits(in[0], in[1], reduction, pos_weight, weight);
  }
};

struct MultiLabelSoftMarginLossOptions {
  Tensor weight;  // (C), or undefined
  Reduction reduction = Reduction::Mean;
};

// (input (N, C), targets 0 or 1 (N, C))
class MultiLabelSoftMarginLoss : public Loss {
 public:
  explicit MultiLabelSoftMarginLoss(MultiLabelSoftMarginLossOptions options = {});
  Tensor weight;
  Reduction reduction;

 protected:
  Tensor compute(const Tensors& in) override { return multilabel_soft_margin_loss(in[0], in[1], weight, reduction); }
};

// (input, targets 1 or -1)
class SoftMarginLoss : public Loss {
 public:
  explicit SoftMarginLoss(Reduction reduction = Reduction::Mean)
      : Loss("SoftMarginLoss", 2, "(input, target)"), reduction(reduction) {}
  Reduction reduction;

 protected:
  Tensor compute(const Tensors& in) override { return soft_margin_loss(in[0], in[1], reduction); }
};

// ---- distribution losses ----

// (log-probabilities, probabilities; log-probabilities with log_target).
// PyTorch's default reduction "mean" averages over every element; BatchMean
// gives the KL divergence per sample.
class KLDivLoss : public Loss {
 public:
  explicit KLDivLoss(KlDivReduction reduction = KlDivReduction::Mean, bool log_target = false)
      : Loss("KLDivLoss", 2, "(input, target)"), reduction(reduction), log_target(log_target) {}
  KlDivReduction reduction;
  bool log_target;

 protected:
  Tensor compute(const Tensors& in) override { return kl_div(in[0], in[1], reduction, log_target); }
};

struct PoissonNLLLossOptions {
  bool log_input = true;
  bool full = false;
  double eps = 1e-8;
  Reduction reduction = Reduction::Mean;
};

class PoissonNLLLoss : public Loss {
 public:
  explicit PoissonNLLLoss(PoissonNLLLossOptions options = {});
  PoissonNLLLossOptions options;

 protected:
  Tensor compute(const Tensors& in) override {
    return poisson_nll_loss(in[0], in[1], options.log_input, options.full, options.eps, options.reduction);
  }
};

struct GaussianNLLLossOptions {
  bool full = false;
  double eps = 1e-6;
  Reduction reduction = Reduction::Mean;
};

// (input, target, var)
class GaussianNLLLoss : public Loss {
 public:
  explicit GaussianNLLLoss(GaussianNLLLossOptions options = {});
  GaussianNLLLossOptions options;

 protected:
  Tensor compute(const Tensors& in) override {
    return gaussian_nll_loss(in[0], in[1], in[2], options.full, options.eps, options.reduction);
  }
};

// ---- margin and embedding losses ----

// (input1, input2, targets 1 or -1)
class MarginRankingLoss : public Loss {
 public:
  explicit MarginRankingLoss(double margin = 0.0, Reduction reduction = Reduction::Mean)
      : Loss("MarginRankingLoss", 3, "(input1, input2, target)"), margin(margin), reduction(reduction) {}
  double margin;
  Reduction reduction;

 protected:
  Tensor compute(const Tensors& in) override { return margin_ranking_loss(in[0], in[1], in[2], margin, reduction); }
};

// (input, targets 1 or -1)
class HingeEmbeddingLoss : public Loss {
 public:
  explicit HingeEmbeddingLoss(double margin = 1.0, Reduction reduction = Reduction::Mean)
      : Loss("HingeEmbeddingLoss", 2, "(input, target)"), margin(margin), reduction(reduction) {}
  double margin;
  Reduction reduction;

 protected:
  Tensor compute(const Tensors& in) override { return hinge_embedding_loss(in[0], in[1], margin, reduction); }
};

// (input1, input2, targets 1 or -1)
class CosineEmbeddingLoss : public Loss {
 public:
  explicit CosineEmbeddingLoss(double margin = 0.0, Reduction reduction = Reduction::Mean)
      : Loss("CosineEmbeddingLoss", 3, "(input1, input2, target)"), margin(margin), reduction(reduction) {}
  double margin;
  Reduction reduction;

 protected:
  Tensor compute(const Tensors& in) override { return cosine_embedding_loss(in[0], in[1], in[2], margin, reduction); }
};

struct TripletMarginLossOptions {
  double margin = 1.0;
  double p = 2.0;
  double eps = 1e-6;
  bool swap = false;
  Reduction reduction = Reduction::Mean;
};

// (anchor, positive, negative)
class TripletMarginLoss : public Loss {
 public:
  explicit TripletMarginLoss(TripletMarginLossOptions options = {});
  TripletMarginLossOptions options;

 protected:
  Tensor compute(const Tensors& in) override {
    return triplet_margin_loss(in[0], in[1], in[2], options.margin, options.p, options.eps, options.swap,
                               options.reduction);
  }
};

struct MultiMarginLossOptions {
  int64_t p = 1;  // 1 or 2
  double margin = 1.0;
  Tensor weight;  // (C), or undefined
  Reduction reduction = Reduction::Mean;
};

// (input (N, C), target class indices (N))
class MultiMarginLoss : public Loss {
 public:
  explicit MultiMarginLoss(MultiMarginLossOptions options = {});
  int64_t p;
  double margin;
  Tensor weight;
  Reduction reduction;

 protected:
  Tensor compute(const Tensors& in) override { return multi_margin_loss(in[0], in[1], p, margin, weight, reduction); }
};

// (input (N, C), target label lists (N, C) ended by -1)
class MultiLabelMarginLoss : public Loss {
 public:
  explicit MultiLabelMarginLoss(Reduction reduction = Reduction::Mean)
      : Loss("MultiLabelMarginLoss", 2, "(input, target)"), reduction(reduction) {}
  Reduction reduction;

 protected:
  Tensor compute(const Tensors& in) override { return multilabel_margin_loss(in[0], in[1], reduction); }
};

struct TripletMarginWithDistanceLossOptions {
  DistanceFunction distance_function;  // empty: pairwise_distance
  double margin = 1.0;
  bool swap = false;
  Reduction reduction = Reduction::Mean;
};

// (anchor, positive, negative)
class TripletMarginWithDistanceLoss : public Loss {
 public:
  explicit TripletMarginWithDistanceLoss(TripletMarginWithDistanceLossOptions options = {});
  TripletMarginWithDistanceLossOptions options;

 protected:
  Tensor compute(const Tensors& in) override {
    return triplet_margin_with_distance_loss(in[0], in[1], in[2], options.distance_function, options.margin,
                                             options.swap, options.reduction);
  }
};

// (log_probs (T, N, C), targets, input_lengths, target_lengths)
class CTCLoss : public Loss {
 public:
  explicit CTCLoss(CtcLossOptions options = {})
      : Loss("CTCLoss", 4, "(log_probs, targets, input_lengths, target_lengths)"), options(options) {}
  CtcLossOptions options;

 protected:
  Tensor compute(const Tensors& in) override { return ctc_loss(in[0], in[1], in[2], in[3], options); }
};

}  // namespace weft::nn
