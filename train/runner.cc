// The per-layout runners (train/runner.h).
#include "train/runner.h"

#include <functional>
#include <optional>

#include "core/autocast.h"
#include "core/autograd_meta.h"
#include "core/error.h"
#include "core/ops.h"
#include "optim/clip_grad.h"
#include "parallel/comm/inproc/process_group_inproc.h"
#include "parallel/data/ddp.h"
#include "parallel/hybrid/clip_grad.h"

namespace weft::train::detail {
namespace {

namespace hy = parallel::hybrid;

std::vector<std::string> names_of(const nn::Sequential& model) {
  std::vector<std::string> names;
  for (const auto& [name, p] : model.named_parameters()) names.push_back(name);
  return names;
}

// Local and DataParallel: the whole model in this process.
class ReplicaRunner : public Runner {
 public:
  ReplicaRunner(std::shared_ptr<nn::Sequential> model, Device device, std::optional<DType> autocast,
                std::shared_ptr<parallel::ProcessGroup> ddp_group, const parallel::DDPOptions& ddp_options,
                std::shared_ptr<parallel::ProcessGroup> metrics_group, parallel::pipe::LossFn loss,
                const OptimizerFactory& optimizer, double clip, parallel::DistributedDataParallel* wrapped = nullptr,
                std::function<void(optim::Optimizer&)> step = nullptr)
      : model_(std::move(model)),
        device_(device),
        autocast_(autocast),
        metrics_group_(metrics_group ? std::move(metrics_group) : ddp_group),
        loss_(std::move(loss)),
        clip_(clip),
        wrapped_(wrapped),
        step_(std::move(step)) {
    WEFT_CHECK(model_ != nullptr, "Trainer: the model is null");
    if (!device_.is_cpu()) model_->to(device_);
    param_names_ = names_of(*model_);
    params_ = model_->parameters();
    dm_world_ = parallel::ProcessGroupInProc::create_world(1)[0];
    hy::DistributedModelOptions o;
    o.print_table = false;
    o.auto_partition = false;
    o.pipe.device = device_;
    dm_ = std::make_unique<hy::DistributedModel>(model_, dm_world_, o);
    dopt_ = std::make_unique<hy::DistributedOptimizer>(
        *dm_, [optimizer](const optim::NamedParameters& p) { return optimizer(p, nullptr); });
    dm_->partition();  // one stage: the model's own modules and tensors
    if (ddp_group && !wrapped_)
      ddp_ = std::make_unique<parallel::DistributedDataParallel>(model_, ddp_group, ddp_options);
  }

  void prepare(const Tensor&) override {}

  StepResult train_step(const io::Batch& b) override {
    Tensor x = b.data.to(device_), y = b.target.to(device_);
    Tensor out, loss;
    {
      std::optional<AutocastGuard> autocast;
      if (autocast_) autocast.emplace(device_.type, *autocast_);
      out = wrapped_ ? wrapped_->forward(x) : ddp_ ? ddp_->forward(x) : (*model_)(x);
      loss = loss_(out, y);
    }
    dopt_->zero_grad();
    loss.backward();  // DataParallel: DDP averages the gradients over the group
    if (clip_ > 0) optim::clip_grad_norm_(params_, clip_);
    if (step_) step_(dopt_->inner());
    else dopt_->step();
    return {loss.item<double>(), out.detach(), y, static_cast<double>(x.size(0)), true};
  }

  StepResult eval_step(const io::Batch& b) override {
    NoGradGuard no_grad;
    Tensor x = b.data.to(device_), y = b.target.to(device_);
    std::optional<AutocastGuard> autocast;
    if (autocast_) autocast.emplace(device_.type, *autocast_);
    Tensor out = (*model_)(x);
    return {loss_(out, y).item<double>(), out, y, static_cast<double>(x.size(0)), true};
  }

  void set_training(bool on) override { model_->train(on); }
  bool skip(const io::Batch&, bool, bool) override { return false; }
  parallel::ProcessGroup* metrics_group() override { return metrics_group_.get(); }
  int rank() const override { return metrics_group_ ? metrics_group_->rank() : 0; }
  int world_size() const override { return metrics_group_ ? metrics_group_->size() : 1; }
  bool writes_checkpoints() const override { return rank() == 0; }
  std::shared_ptr<nn::Sequential> whole_model() override { return model_; }
  parallel::DistributedDataParallel* ddp() override { return wrapped_ ? wrapped_ : ddp_.get(); }

 private:
  std::shared_ptr<nn::Sequential> model_;
  Device device_;
  std::optional<DType> autocast_;
  std::shared_ptr<parallel::ProcessGroup> metrics_group_;
  parallel::pipe::LossFn loss_;
  double clip_;
  std::vector<Tensor> params_;
  parallel::DistributedDataParallel* wrapped_;
  std::function<void(optim::Optimizer&)> step_;
  std::unique_ptr<parallel::DistributedDataParallel> ddp_;
};

// Pipeline and Hybrid: a DistributedModel over the group.
class DistributedRunner : public Runner {
 public:
  DistributedRunner(std::shared_ptr<nn::Sequential> model, std::shared_ptr<parallel::ProcessGroup> world,
                    hy::DistributedModelOptions o, parallel::pipe::LossFn loss, const OptimizerFactory& optimizer,
                    double clip)
      : loss_(std::move(loss)), zero_(o.shard_optimizer_state), chunks_(o.pipe.chunks) {
    WEFT_CHECK(model != nullptr, "Trainer: the model is null");
    WEFT_CHECK(world != nullptr, "Trainer: the Pipeline or Hybrid layout has no process group");
    param_names_ = names_of(*model);
    needs_sample_ = o.balance.empty() && o.auto_partition && o.pp > 1;
    o.keep_output = true;  // the last stage's outputs score the metric
    dm_world_ = world;
    dm_ = std::make_unique<hy::DistributedModel>(std::move(model), world, o);
    if (clip > 0) clipper_ = std::make_unique<hy::GlobalNormClipper>(*dm_, clip);
    dopt_ = std::make_unique<hy::DistributedOptimizer>(
        *dm_, [this, optimizer](const optim::NamedParameters& p) -> std::unique_ptr<optim::Optimizer> {
          BeforeStep before;
          if (zero_ && clipper_) before = [this](optim::Optimizer& shard) { clipper_->clip_shards(shard); };
          return optimizer(p, before);
        });
    if (!needs_sample_) dm_->partition();
  }

  void prepare(const Tensor& sample) override {
    WEFT_CHECK(!needs_sample_ || dm_->partitioned() || rank() != 0 || sample.defined(),
               "Trainer: automatic partitioning measures a sample batch on world rank 0: call prepare(sample) or "
               "fit() first");
    dm_->partition(sample);
  }

  StepResult train_step(const io::Batch& b) override {
    dopt_->zero_grad();
    const double loss = dm_->step(b.data, b.target, loss_);  // the global batch's mean, on every rank
    if (clipper_ && !zero_) clipper_->clip();
    dopt_->step();
    return scored(loss, dm_->last_output(), b.target);
  }

  StepResult eval_step(const io::Batch& b) override {
    Tensor out = dm_->forward(b.data);  // (B, ...) on the last stage's ranks
    if (!out.defined()) return {};
    NoGradGuard no_grad;
    Tensor y = b.target.to(out.device());
    std::optional<AutocastGuard> autocast;  // the loss as in training: a float32 op under autocast
    if (const auto& ac = dm_->pipe().options().autocast) autocast.emplace(out.device().type, *ac);
    return scored(loss_(out, y).item<double>(), out, y);
  }

  void set_training(bool on) override {
    for (auto& stage : dm_->local_modules()) stage->train(on);
  }

  bool skip(const io::Batch& b, bool last, bool training) override {
    const int64_t rows = b.data.size(0);
    if (!training || dm_->grid().dp() == 1 || !last) return rows < chunks_;
    // Every replica must skip the epoch's last global batch together.
    Tensor t = full({1}, static_cast<double>(rows), DType::Float64);
    dm_world_->allreduce(t, {parallel::ReduceOp::Min})->wait();
    return t.item<double>() < chunks_;
  }

  parallel::ProcessGroup* metrics_group() override { return dm_world_->size() > 1 ? dm_world_.get() : nullptr; }
  int rank() const override { return dm_world_->rank(); }
  int world_size() const override { return dm_world_->size(); }
  bool writes_checkpoints() const override { return true; }
  std::shared_ptr<nn::Sequential> whole_model() override { return dm_->gather_whole_model(); }

 private:
  StepResult scored(double loss, const Tensor& out, const Tensor& target) const {
    StepResult r;
    r.loss = loss;
    // The last stage's rank scores (under zbv's V that is pipeline rank 0).
    const auto& schedule = dm_->pipe().schedule();
    if (schedule.rank_of(schedule.num_stages() - 1) != dm_->pp_rank() || !out.defined()) return r;
    r.output = out;
    r.target = target.to(out.device());
    r.rows = static_cast<double>(target.size(0));
    r.scored = true;
    return r;
  }

  parallel::pipe::LossFn loss_;
  bool zero_;
  int chunks_;
  bool needs_sample_ = false;
  std::unique_ptr<hy::GlobalNormClipper> clipper_;
};

}  // namespace

std::unique_ptr<Runner> make_runner(const Layout& layout, std::shared_ptr<nn::Sequential> model,
                                    parallel::pipe::LossFn loss, OptimizerFactory optimizer, double clip) {
  WEFT_CHECK(static_cast<bool>(optimizer), "Trainer: no optimizer factory given");
  WEFT_CHECK(static_cast<bool>(loss), "Trainer: no loss function given");
  WEFT_CHECK(clip >= 0, "Trainer: clip_grad_norm must be >= 0 (0: no clipping), got ", clip);
  if (const auto* l = std::get_if<Local>(&layout))
    return std::make_unique<ReplicaRunner>(std::move(model), l->device, l->autocast, nullptr, parallel::DDPOptions{},
                                           nullptr, std::move(loss), optimizer, clip);
  if (const auto* d = std::get_if<DataParallel>(&layout)) {
    WEFT_CHECK(d->group != nullptr, "Trainer: the DataParallel layout has no process group");
    return std::make_unique<ReplicaRunner>(std::move(model), d->device, d->autocast, d->group, d->ddp, d->metrics_group,
                                           std::move(loss), optimizer, clip, d->wrapped, d->step);
  }
  if (const auto* p = std::get_if<Pipeline>(&layout)) {
    WEFT_CHECK(p->group != nullptr, "Trainer: the Pipeline layout has no process group");
    hy::DistributedModelOptions o;
    o.pp = p->group->size();
    o.dp = 1;
    o.balance = p->balance;
    o.pipe = p->pipe;
    o.auto_partition = false;
    o.print_table = false;
    return std::make_unique<DistributedRunner>(std::move(model), p->group, o, std::move(loss), optimizer, clip);
  }
  const auto& h = std::get<Hybrid>(layout);
  return std::make_unique<DistributedRunner>(std::move(model), h.world, h.options, std::move(loss), optimizer, clip);
}

}  // namespace weft::train::detail
