#include "nn/loss.h"

#include <string>
#include <utility>

namespace weft::nn {

namespace {

// Registers t as buffer `name` when defined; returns the module's handle to it.
Tensor buffer_if(Module& m, const char* name, const Tensor& t) {
  return t.defined() ? m.register_buffer(name, t) : Tensor();
}

}  // namespace

Loss::Loss(std::string type_name, int arity, const char* args)
    : Module(std::move(type_name)), arity_(arity), args_(args) {}

Tensor Loss::operator()(const Tensor& a, const Tensor& b) { return Module::operator()(Tensors{a, b})[0]; }

Tensor Loss::operator()(const Tensor& a, const Tensor& b, const Tensor& c) {
  return Module::operator()(Tensors{a, b, c})[0];
}

Tensor Loss::operator()(const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& d) {
  return Module::operator()(Tensors{a, b, c, d})[0];
}

Tensors Loss::forward_multi(const Tensors& in) {
  WEFT_CHECK(static_cast<int>(in.size()) == arity_, type_name(), " takes ", args_, ", got ", in.size(), " tensor",
             in.size() == 1 ? "" : "s");
  for (size_t i = 0; i < in.size(); ++i)
    WEFT_CHECK(in[i].defined(), type_name(), ": argument ", i, " of ", args_, " is undefined");
  return {compute(in)};
}

HuberLoss::HuberLoss(Reduction r, double d) : Loss("HuberLoss", 2, "(input, target)"), reduction(r), delta(d) {}

SmoothL1Loss::SmoothL1Loss(Reduction r, double b) : Loss("SmoothL1Loss", 2, "(input, target)"), reduction(r), beta(b) {}

CrossEntropyLoss::CrossEntropyLoss(CrossEntropyLossOptions o)
    : Loss("CrossEntropyLoss", 2, "(input, target)"),
      ignore_index(o.ignore_index),
      reduction(o.reduction),
      label_smoothing(o.label_smoothing) {
  WEFT_CHECK(o.label_smoothing >= 0.0 && o.label_smoothing <= 1.0,
             "CrossEntropyLoss: label_smoothing must be in [0, 1], got ", o.label_smoothing);
  weight = buffer_if(*this, "weight", o.weight);
}

Tensor CrossEntropyLoss::compute(const Tensors& in) {
  return cross_entropy(in[0], in[1], reduction, ignore_index, label_smoothing, weight);
}

NLLLoss::NLLLoss(NLLLossOptions o)
    : Loss("NLLLoss", 2, "(input, target)"), ignore_index(o.ignore_index), reduction(o.reduction) {
  weight = buffer_if(*this, "weight", o.weight);
}

BCELoss::BCELoss(BCELossOptions o) : Loss("BCELoss", 2, "(input, target)"), reduction(o.reduction) {
  weight = buffer_if(*this, "weight", o.weight);
}

BCEWithLogitsLoss::BCEWithLogitsLoss(BCEWithLogitsLossOptions o)
    : Loss("BCEWithLogitsLoss", 2, "(input, target)"), reduction(o.reduction) {
  weight = buffer_if(*this, "weight", o.weight);
  pos_weight = buffer_if(*this, "pos_weight", o.pos_weight);
}

MultiLabelSoftMarginLoss::MultiLabelSoftMarginLoss(MultiLabelSoftMarginLossOptions o)
    : Loss("MultiLabelSoftMarginLoss", 2, "(input, target)"), reduction(o.reduction) {
  weight = buffer_if(*this, "weight", o.weight);
}

MultiMarginLoss::MultiMarginLoss(MultiMarginLossOptions o)
    : Loss("MultiMarginLoss", 2, "(input, target)"), p(o.p), margin(o.margin), reduction(o.reduction) {
  WEFT_CHECK(o.p == 1 || o.p == 2, "MultiMarginLoss: only p == 1 and p == 2 supported, got ", o.p);
  weight = buffer_if(*this, "weight", o.weight);
}

TripletMarginWithDistanceLoss::TripletMarginWithDistanceLoss(TripletMarginWithDistanceLossOptions o)
    : Loss("TripletMarginWithDistanceLoss", 3, "(anchor, positive, negative)"), options(std::move(o)) {
  WEFT_CHECK(options.margin > 0, "TripletMarginWithDistanceLoss: margin must be greater than 0, got ", options.margin);
}

PoissonNLLLoss::PoissonNLLLoss(PoissonNLLLossOptions o) : Loss("PoissonNLLLoss", 2, "(input, target)"), options(o) {}

GaussianNLLLoss::GaussianNLLLoss(GaussianNLLLossOptions o)
    : Loss("GaussianNLLLoss", 3, "(input, target, var)"), options(o) {}

TripletMarginLoss::TripletMarginLoss(TripletMarginLossOptions o)
    : Loss("TripletMarginLoss", 3, "(anchor, positive, negative)"), options(o) {}

}  // namespace weft::nn
