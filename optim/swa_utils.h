// Weight averaging (PyTorch's torch.optim.swa_utils): AveragedModel keeps a
// running average of a model's weights, stochastic weight averaging (SWA) or
// an exponential moving average (EMA); SWALR anneals the lr to a constant SWA
// lr; update_bn recomputes an averaged model's batch norm statistics.
//
//   auto swa = std::make_shared<optim::AveragedModel>(*model, std::make_shared<Net>());
//   optim::SWALR swa_sched(opt, 0.05);
//   for (epoch ...) { train(...); if (epoch >= swa_start) { swa->update_parameters(*model); swa_sched.step(); } }
//   optim::update_bn(loader, *swa);   // then evaluate swa
//
// Contract:
// - AveragedModel(model, copy, options): `copy` is a second model built like
//   `model` (the same parameter and buffer names and shapes; C++ cannot deep-
//   copy a module as PyTorch does), registered as the child "module" and
//   given model's values at once. update_parameters(model) averages model's
//   parameters (and buffers with use_buffers) into it: the first call copies
//   them, later ones apply avg_fn or multi_avg_fn (at most one may be given),
//   by default the equal-weight average a + (x - a) / (n + 1), n counting the
//   earlier calls (the buffer "n_averaged", int64 0-dim). Without use_buffers
//   the buffers are copied from model at every call. Integer tensors (a batch
//   norm's num_batches_tracked, with use_buffers) are averaged in float32 and
//   truncated, as PyTorch. The models must have the same number of averaged
//   tensors, each of the same shape (an error naming the first that differs).
//   forward runs the averaged module.
// - swa_avg_fn / ema_avg_fn(decay) and their multi-tensor forms are PyTorch's
//   get_swa_avg_fn, get_ema_avg_fn, get_swa_multi_avg_fn and
//   get_ema_multi_avg_fn: ema_multi_avg_fn lerps each tensor toward the model
//   by 1 - decay; decay must lie in [0, 1].
// - SWALR(optimizer, swa_lr, anneal_epochs = 10, anneal_strategy = kCos)
//   moves each group's lr from its value to swa_lr over anneal_epochs steps
//   (cosine or linear in the step, PyTorch's formula), then holds swa_lr.
//   State: the base entries and "swa_lrs".
// - update_bn(loader, model) resets the running statistics of every BatchNorm
//   in model, runs model in training mode over the loader's inputs (a batch
//   that is a Tensor, or the .data of an io::Batch, or the first of a vector
//   of tensors) with the running statistics averaged over all batches
//   (momentum None), then restores each BatchNorm's momentum and the model's
//   mode. Without a BatchNorm it does nothing (it does not read the loader).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "core/autograd_meta.h"
#include "nn/layers.h"
#include "nn/module.h"
#include "optim/lr_scheduler.h"

namespace weft::optim {

// avg_fn(averaged, current, num_averaged) -> the new average of one tensor.
using AvgFn = std::function<Tensor(const Tensor& averaged, const Tensor& current, int64_t num_averaged)>;
// multi_avg_fn(averaged, current, num_averaged) updates every `averaged` tensor in place.
using MultiAvgFn =
    std::function<void(std::vector<Tensor>& averaged, const std::vector<Tensor>& current, int64_t num_averaged)>;

AvgFn swa_avg_fn();
AvgFn ema_avg_fn(double decay = 0.999);
MultiAvgFn swa_multi_avg_fn();
MultiAvgFn ema_multi_avg_fn(double decay = 0.999);

// One update of an average (AveragedModel::update_parameters' rule, which
// train::WeightAveraging shares): with num_averaged 0 `current` is copied into
// `averaged`; otherwise avg_fn runs tensor by tensor, multi_avg_fn once per
// (device, dtype) group in order of first appearance (PyTorch's grouping),
// or, with neither, the equal-weight average tensor by tensor (PyTorch's CPU
// path). averaged[i] is updated in place; current[i] is on its device.
void update_average(std::vector<Tensor>& averaged, const std::vector<Tensor>& current, int64_t num_averaged,
                    const AvgFn& avg_fn, const MultiAvgFn& multi_avg_fn);

struct AveragedModelOptions {
  AvgFn avg_fn;              // empty: the equal-weight (SWA) average
  MultiAvgFn multi_avg_fn;   // exclusive with avg_fn
  bool use_buffers = false;  // average the buffers too (else copy them)
};

class AveragedModel : public nn::Module {
 public:
  AveragedModel(const nn::Module& model, std::shared_ptr<nn::Module> copy, AveragedModelOptions options = {});
  void update_parameters(const nn::Module& model);
  Tensor forward(const Tensor& x) override;
  nn::Tensors forward_multi(const nn::Tensors& xs) override;
  int64_t num_averaged() const;

  std::shared_ptr<nn::Module> module;  // the average
  Tensor n_averaged;                   // int64 0-dim buffer

 private:
  AveragedModelOptions options_;
};

class SWALR : public LRScheduler {
 public:
  SWALR(Optimizer& optimizer, const PerGroup& swa_lr, int64_t anneal_epochs = 10,
        AnnealStrategy anneal_strategy = AnnealStrategy::kCos);
  const std::vector<double>& swa_lrs() const { return swa_lrs_; }

 protected:
  std::vector<double> get_lr() override;
  std::vector<std::string> extra_state_keys() const override { return {"swa_lrs"}; }
  void save_extra_state(SchedulerStateDict& sd) const override;
  void load_extra_state(const SchedulerStateDict& sd) override;

 private:
  double anneal(double t) const;
  std::vector<double> swa_lrs_;
  int64_t anneal_epochs_;
  AnnealStrategy anneal_strategy_;
};

// The BatchNorm layers of `model` set up for update_bn (running statistics
// reset, momentum None, training mode); the destructor restores the momenta
// and the model's mode.
class BatchNormRecompute {
 public:
  explicit BatchNormRecompute(nn::Module& model);
  ~BatchNormRecompute();
  BatchNormRecompute(const BatchNormRecompute&) = delete;
  BatchNormRecompute& operator=(const BatchNormRecompute&) = delete;
  bool empty() const { return layers_.empty(); }

 private:
  nn::Module& model_;
  bool was_training_;
  std::vector<std::pair<nn::BatchNorm*, std::optional<double>>> layers_;
};

namespace detail {
inline const Tensor& batch_input(const Tensor& batch) { return batch; }
inline const Tensor& batch_input(const std::vector<Tensor>& batch) {
  WEFT_CHECK(!batch.empty(), "update_bn: a batch holds no tensor");
  return batch[0];
}
template <class B>
requires requires(const B& b) { b.data; }
const Tensor& batch_input(const B& batch) { return batch.data; }
}  // namespace detail

template <class Loader>
void update_bn(Loader&& loader, nn::Module& model) {
  BatchNormRecompute scope(model);
  if (scope.empty()) return;
  NoGradGuard no_grad;
  for (auto&& batch : loader) model(detail::batch_input(batch));
}

}  // namespace weft::optim
