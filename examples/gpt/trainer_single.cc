// Training in one process (contract in trainer.h): the plain loop (the
// model's forward, backward, optim::clip_grad_norm_, AdamW). For checkpoints
// the model is also wrapped in a DistributedModel of one stage over a
// one-rank in-process group (it shares the model's modules and tensors), whose
// DistributedOptimizer holds the AdamW this loop steps: parallel/checkpoint
// saves and loads them in the format every layout reads.
#include <memory>

#include "core/autograd_meta.h"
#include "core/nn_ops.h"
#include "core/rng.h"
#include "examples/gpt/trainer.h"
#include "optim/adam.h"
#include "optim/clip_grad.h"
#include "optim/lr_scheduler.h"
#include "parallel/checkpoint/checkpointer.h"
#include "parallel/hybrid/distributed_model.h"
#include "parallel/hybrid/distributed_optimizer.h"
#include "parallel/inproc/process_group_inproc.h"

namespace weft::examples::gpt {
namespace {

namespace hy = parallel::hybrid;
namespace ck = parallel::checkpoint;

class SingleTrainer : public Trainer {
 public:
  SingleTrainer(const Options& o, const Corpus& c) : o_(o), corpus_(c) {
    manual_seed(o.seed);
    model_ = make_gpt(o.model);
    params_ = model_->parameters();
    world_ = parallel::ProcessGroupInProc::create_world(1)[0];
    hy::DistributedModelOptions dmo;
    dmo.print_table = false;
    dm_ = std::make_unique<hy::DistributedModel>(model_, world_, dmo);
    optim::AdamWOptions a;
    a.lr = o.lr;
    a.beta2 = o.beta2;
    a.weight_decay = o.weight_decay;
    dopt_ = std::make_unique<hy::DistributedOptimizer>(
        *dm_, [a](const optim::NamedParameters& p) { return std::make_unique<optim::AdamW>(p, a); });
    dm_->partition();  // one stage: the model itself (its modules, its tensors)
    sched_ = std::make_unique<optim::LinearWarmupCosine>(dopt_->inner(), o.warmup, o.steps,
                                                         o.warmup > 0 ? 1.0 / o.warmup : 1.0, o.lr * o.min_lr_ratio);
  }

  bool lead() const override { return true; }

  double train_step(int64_t k) override {
    Batch b = draw_batch(corpus_.train, o_.batch_size, o_.model.context, o_.seed, k, 0, o_.batch_size);
    dopt_->zero_grad();
    Tensor loss = lm_loss((*model_)(b.x), b.y);  // mean over (B, T) tokens
    loss.backward();
    if (o_.clip > 0) optim::clip_grad_norm_(params_, o_.clip);
    dopt_->step();  // the AdamW over the model's parameters
    sched_->step();
    return loss.item<double>();
  }

  double validate(const Batch& w) override {
    NoGradGuard ng;
    model_->eval();
    double sum = 0;
    const int64_t rows = w.x.size(0), B = o_.batch_size;
    for (int64_t i = 0; i < rows; i += B) {
      Tensor logits = (*model_)(w.x.narrow(0, i, B));  // (B, T, V)
      sum += cross_entropy(logits.reshape({-1, logits.size(-1)}), w.y.narrow(0, i, B).reshape({-1}), Reduction::Sum)
                 .item<double>();
    }
    model_->train();
    return sum / static_cast<double>(w.y.numel());
  }

  double lr() override { return dopt_->inner().param_groups()[0].lr(); }

  void save(const std::string& root, int64_t step, const std::vector<EvalRecord>& history) override {
    ck::save(root, {dm_.get(), dopt_.get(), sched_.get()}, {step, 0, step, gpt_metadata(o_.model, history)},
             {ck::Kind::kPartial, o_.keep_last, false});
  }

  int64_t load(const std::string& path) override {
    return load_run(path, {dm_.get(), dopt_.get(), sched_.get()}, o_.model).step;
  }

  nn::Sequential& whole_model() override { return *model_; }

 private:
  const Options& o_;
  const Corpus& corpus_;
  std::shared_ptr<nn::Sequential> model_;
  std::vector<Tensor> params_;
  std::shared_ptr<parallel::ProcessGroup> world_;
  std::unique_ptr<hy::DistributedModel> dm_;
  std::unique_ptr<hy::DistributedOptimizer> dopt_;
  std::unique_ptr<optim::LinearWarmupCosine> sched_;
};

}  // namespace

std::unique_ptr<Trainer> make_single_trainer(const Options& o, const Corpus& corpus) {
  return std::make_unique<SingleTrainer>(o, corpus);
}

}  // namespace weft::examples::gpt
