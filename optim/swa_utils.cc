// AveragedModel's updates, PyTorch's averaging functions, SWALR and the batch
// norm recomputation behind update_bn.
#include "optim/swa_utils.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <utility>

namespace weft::optim {

// ---- averaging functions ----

namespace {

void check_decay(const char* who, double decay) {
  WEFT_CHECK(decay >= 0.0 && decay <= 1.0, who, ": Invalid decay value ", decay,
             " provided. Please provide a value in [0,1] range.");
}

// Integer tensors are averaged in float32 (PyTorch's true division and float
// scalars promote them to the default dtype); the caller's copy_ truncates.
Tensor averaging_view(const Tensor& t) { return is_floating(t.dtype()) ? t : t.to(DType::Float32); }

}  // namespace

AvgFn swa_avg_fn() {
  return [](const Tensor& averaged, const Tensor& current, int64_t n) {
    const Tensor a = averaging_view(averaged);
    return a + (averaging_view(current) - a) / Scalar(static_cast<double>(n + 1));
  };
}

AvgFn ema_avg_fn(double decay) {
  check_decay("ema_avg_fn", decay);
  return [decay](const Tensor& ema, const Tensor& current, int64_t) {
    return averaging_view(ema) * Scalar(decay) + averaging_view(current) * Scalar(1 - decay);
  };
}

MultiAvgFn swa_multi_avg_fn() {
  return [](std::vector<Tensor>& averaged, const std::vector<Tensor>& current, int64_t n) {
    const AvgFn fallback = swa_avg_fn();
    for (size_t i = 0; i < averaged.size(); ++i) {
      if (is_floating(averaged[i].dtype())) {
        lerp_(averaged[i], current[i], Scalar(1.0 / static_cast<double>(n + 1)));
      } else {
        averaged[i].copy_(fallback(averaged[i], current[i], n));
      }
    }
  };
}

MultiAvgFn ema_multi_avg_fn(double decay) {
  check_decay("ema_multi_avg_fn", decay);
  return [decay](std::vector<Tensor>& ema, const std::vector<Tensor>& current, int64_t) {
    for (size_t i = 0; i < ema.size(); ++i) {
      if (is_floating(ema[i].dtype())) {
        lerp_(ema[i], current[i], Scalar(1 - decay));
      } else {
        ema[i].copy_(averaging_view(ema[i]) * Scalar(decay) + averaging_view(current[i]) * Scalar(1 - decay));
      }
    }
  };
}

void update_average(std::vector<Tensor>& averaged, const std::vector<Tensor>& current, int64_t n, const AvgFn& avg_fn,
                    const MultiAvgFn& multi_avg_fn) {
  WEFT_INTERNAL_ASSERT(averaged.size() == current.size(), "update_average: ", averaged.size(), " averages for ",
                       current.size(), " tensors");
  if (n == 0) {
    for (size_t i = 0; i < averaged.size(); ++i) averaged[i].copy_(current[i]);
  } else if (avg_fn || !multi_avg_fn) {
    const AvgFn f = avg_fn ? avg_fn : swa_avg_fn();
    for (size_t i = 0; i < averaged.size(); ++i) averaged[i].copy_(f(averaged[i], current[i], n));
  } else {
    std::vector<std::pair<Device, DType>> keys;
    std::vector<std::pair<std::vector<Tensor>, std::vector<Tensor>>> groups;
    for (size_t i = 0; i < averaged.size(); ++i) {
      const std::pair<Device, DType> key{averaged[i].device(), averaged[i].dtype()};
      const size_t g = static_cast<size_t>(std::find(keys.begin(), keys.end(), key) - keys.begin());
      if (g == keys.size()) {
        keys.push_back(key);
        groups.emplace_back();
      }
      groups[g].first.push_back(averaged[i]);
      groups[g].second.push_back(current[i]);
    }
    for (auto& [avg, cur] : groups) multi_avg_fn(avg, cur, n);
  }
}

// ---- AveragedModel ----

namespace {

using Named = std::vector<std::pair<std::string, Tensor>>;

Named averaged_tensors(const nn::Module& m, bool with_buffers) {
  Named out = m.named_parameters();
  if (with_buffers)
    for (auto& b : m.named_buffers()) out.push_back(std::move(b));
  return out;
}

// Pairs (averaged, current) in order, current on the averaged tensor's
// device; an error naming the first tensor that does not match.
std::vector<std::pair<Tensor, Tensor>> pair_up(const Named& avg, const Named& cur, const char* what) {
  WEFT_CHECK(avg.size() == cur.size(), "AveragedModel.update_parameters: the averaged model has ", avg.size(), " ",
             what, " but the model has ", cur.size(), "; the models must be built alike");
  std::vector<std::pair<Tensor, Tensor>> out;
  for (size_t i = 0; i < avg.size(); ++i) {
    const Tensor &a = avg[i].second, &c = cur[i].second;
    WEFT_CHECK(a.sizes() == c.sizes(), "AveragedModel.update_parameters: '", avg[i].first, "' has shape ",
               shape_str(a.sizes()), " in the averaged model but '", cur[i].first, "' has shape ", shape_str(c.sizes()),
               " in the model");
    out.emplace_back(a.detach(), c.detach().to(a.device()));
  }
  return out;
}

void copy_all(const std::vector<std::pair<Tensor, Tensor>>& pairs) {
  for (const auto& [a, c] : pairs) Tensor(a).copy_(c);
}

}  // namespace

AveragedModel::AveragedModel(const nn::Module& model, std::shared_ptr<nn::Module> copy, AveragedModelOptions options)
    : nn::Module("AveragedModel"), options_(std::move(options)) {
  WEFT_CHECK(copy != nullptr, "AveragedModel: the copy of the model is null");
  WEFT_CHECK(copy.get() != &model, "AveragedModel: the copy must be a second model built like the model, not the ",
             "model itself");
  WEFT_CHECK(!(options_.avg_fn && options_.multi_avg_fn), "AveragedModel: Only one of avg_fn and multi_avg_fn ",
             "should be provided");
  {
    NoGradGuard no_grad;
    copy_all(pair_up(averaged_tensors(*copy, true), averaged_tensors(model, true), "parameters and buffers"));
  }
  module = register_module("module", std::move(copy));
  n_averaged = register_buffer("n_averaged", zeros({}, TensorOptions{DType::Int64}));
}

int64_t AveragedModel::num_averaged() const { return n_averaged.item<int64_t>(); }

void AveragedModel::update_parameters(const nn::Module& model) {
  NoGradGuard no_grad;
  const bool with_buffers = options_.use_buffers;
  const auto pairs = pair_up(averaged_tensors(*module, with_buffers), averaged_tensors(model, with_buffers),
                             with_buffers ? "parameters and buffers" : "parameters");
  const auto buffers = with_buffers ? std::vector<std::pair<Tensor, Tensor>>{}
                                    : pair_up(module->named_buffers(), model.named_buffers(), "buffers");
  std::vector<Tensor> averaged, current;
  for (const auto& [a, c] : pairs) {
    averaged.push_back(a);
    current.push_back(c);
  }
  update_average(averaged, current, num_averaged(), options_.avg_fn, options_.multi_avg_fn);
  copy_all(buffers);
  n_averaged.add_(1);
}

Tensor AveragedModel::forward(const Tensor& x) { return (*module)(x); }

nn::Tensors AveragedModel::forward_multi(const nn::Tensors& xs) { return (*module)(xs); }

// ---- SWALR ----

SWALR::SWALR(Optimizer& optimizer, const PerGroup& swa_lr, int64_t anneal_epochs, AnnealStrategy anneal_strategy)
    : LRScheduler(optimizer),
      swa_lrs_(swa_lr.resolve("SWALR", "swa_lr", optimizer)),
      anneal_epochs_(anneal_epochs),
      anneal_strategy_(anneal_strategy) {
  WEFT_CHECK(anneal_strategy == AnnealStrategy::kCos || anneal_strategy == AnnealStrategy::kLinear,
             "SWALR: anneal_strategy must be one of kCos or kLinear, instead got ", static_cast<int>(anneal_strategy));
  WEFT_CHECK(anneal_epochs >= 0, "SWALR: anneal_epochs must be equal or greater than 0, got ", anneal_epochs);
  initial_step();
}

double SWALR::anneal(double t) const {
  if (anneal_strategy_ == AnnealStrategy::kLinear) return t;
  return (1 - std::cos(std::numbers::pi * t)) / 2;
}

std::vector<double> SWALR::get_lr() {
  int64_t step = last_epoch_;
  if (anneal_epochs_ == 0) step = std::max<int64_t>(1, step);
  const double span = static_cast<double>(std::max<int64_t>(1, anneal_epochs_));
  const double prev_alpha = anneal(std::max(0.0, std::min(1.0, static_cast<double>(step - 1) / span)));
  const double alpha = anneal(std::max(0.0, std::min(1.0, static_cast<double>(step) / span)));
  std::vector<double> out(num_groups());
  for (size_t g = 0; g < out.size(); ++g) {
    const double swa = swa_lrs_[g];
    // The lr before annealing, recovered from the current one (PyTorch's _get_initial_lr).
    const double lr = prev_alpha == 1 ? swa : (group_lr(g) - prev_alpha * swa) / (1 - prev_alpha);
    out[g] = swa * alpha + lr * (1 - alpha);
  }
  return out;
}

void SWALR::save_extra_state(SchedulerStateDict& sd) const { sd["swa_lrs"] = per_group_tensor(swa_lrs_); }

void SWALR::load_extra_state(const SchedulerStateDict& sd) { swa_lrs_ = per_group_entry(sd, "swa_lrs"); }

// ---- update_bn ----

BatchNormRecompute::BatchNormRecompute(nn::Module& model) : model_(model), was_training_(model.is_training()) {
  model.apply([&](nn::Module& m) {
    if (auto* bn = dynamic_cast<nn::BatchNorm*>(&m)) {
      bn->reset_running_stats();
      layers_.emplace_back(bn, bn->momentum);
    }
  });
  if (layers_.empty()) return;
  model.train();
  for (auto& [bn, momentum] : layers_) bn->momentum = std::nullopt;
}

BatchNormRecompute::~BatchNormRecompute() {
  if (layers_.empty()) return;
  for (auto& [bn, momentum] : layers_) bn->momentum = momentum;
  model_.train(was_training_);
}

}  // namespace weft::optim
