// The Fashion-MNIST examples' shared run (contract in fashion_run.h).
#include "examples/fashion_run.h"

#include <cstdio>
#include <iostream>

#include "core/nn_ops.h"
#include "examples/rank_data.h"
#include "io/fashion_mnist.h"
#include "optim/lr_scheduler.h"

namespace weft::examples {

io::Example normalize(const io::Example& e, Generator&) {
  return {.data = (e.data - 0.2860) / 0.3530, .target = e.target};
}

namespace {
std::shared_ptr<io::TensorDataset> head(const io::TensorDataset& ds, int64_t limit) {
  return slice_rows(ds, 0, limit > 0 ? std::min(limit, ds.size()) : ds.size());
}
}  // namespace

FashionData load_fashion(const TrainFlags& f) {
  return {head(io::load_fashion_mnist(f.data, true), f.limit_train),
          head(io::load_fashion_mnist(f.data, false), f.limit_test)};
}

train::LossFn cross_entropy_loss() {
  return [](const Tensor& logits, const Tensor& y) { return cross_entropy(logits, y); };
}

train::OptimizerFactory optimizer_from(const TrainFlags& f) {
  if (f.optimizer == "adam") return train::adam({.lr = f.lr, .weight_decay = f.weight_decay});
  if (f.optimizer == "adamw") {
    optim::AdamWOptions o;
    o.lr = f.lr;
    o.weight_decay = f.weight_decay;
    return train::adamw(o);
  }
  if (f.optimizer == "rmsprop")
    return train::rmsprop({.lr = f.lr, .weight_decay = f.weight_decay, .momentum = f.momentum});
  if (f.optimizer == "adagrad") return train::adagrad({.lr = f.lr, .weight_decay = f.weight_decay});
  WEFT_CHECK(f.optimizer == "sgd", "--optimizer ", f.optimizer, ": expected one of sgd, adam, adamw, rmsprop, adagrad");
  return train::sgd({.lr = f.lr, .momentum = f.momentum, .weight_decay = f.weight_decay});
}

void add_run_callbacks(train::Trainer& t, const TrainFlags& f, RunSpec spec) {
  const int64_t epochs = f.epochs;
  t.add<train::LRSchedule>(
      [epochs](optim::Optimizer& o) { return std::make_unique<optim::CosineAnnealingLR>(o, epochs); });
  t.add<train::Progress>(train::ProgressOptions{.bar = f.progress, .unit = "img"});
  t.add<train::MetricsLog>(f.metrics);
  t.add<train::Plot>(f.plot, spec.title);
  if (!f.step_log.empty()) t.add<train::StepLog>(f.step_log);
  if (f.ema > 0)
    t.add<train::WeightAveraging>(train::WeightAveragingOptions{.multi_avg_fn = optim::ema_multi_avg_fn(f.ema)});
  if (!f.save.empty()) {
    spec.checkpoint.root = f.save;
    spec.checkpoint.keep_last = f.keep_last;
    if (f.save_every_minutes > 0) {  // the epochs' saves stay
      spec.checkpoint.every_minutes = f.save_every_minutes;
      if (spec.checkpoint.every_steps == 0 && spec.checkpoint.every_epochs == 0) spec.checkpoint.every_epochs = 1;
    }
    auto& ck = t.add<train::Checkpoint>(spec.checkpoint);
    t.add<train::Preemption>(train::PreemptionOptions{.checkpoint = &ck});  // SIGTERM, SIGUSR1: save and stop
  }
  const int64_t stop_after = spec.stop_after;
  t.add<train::Lambda>(train::Lambda::Events{.epoch_end = [stop_after, epochs](train::Trainer& tr) {
    if (stop_after <= 0 || tr.state().epoch < stop_after || tr.state().epoch >= epochs) return;
    if (tr.lead())
      std::cerr << tr.options().name << ": stopping after epoch " << tr.state().epoch << " (--stop-after-epoch)\n";
    tr.request_stop();
  }});
}

int fit_and_report(train::Trainer& t, io::DataLoader& train, io::DataLoader& test, const TrainFlags& f,
                   const std::function<void()>& after_fit) {
  t.fit(train, &test, f.epochs);
  if (const train::Preemption* pre = t.find<train::Preemption>(); pre && pre->preempted()) {
    t.barrier();  // every rank's part of the stop's checkpoint is committed
    if (t.lead())
      std::cerr << t.options().name << ": preempted; resume with --resume " << f.save << " (exit status "
                << train::kResumeExitCode << ")\n";
    return train::kResumeExitCode;
  }
  if (after_fit) after_fit();
  t.barrier();                                // the lead's files are complete before anyone exits
  if (t.state().stop || !t.lead()) return 0;  // interrupted by --stop-after-epoch
  std::cerr << t.options().name << ": metrics in " << f.metrics << ", plot in " << f.plot << "\n";
  const auto& history = t.state().history;
  std::printf("test_accuracy=%.4f\n", history.empty() ? 0.0 : history.back().valid_metric);
  std::fflush(stdout);
  return 0;
}

void prepare_on_first_batch(train::Trainer& t, io::DataLoader& train) {
  Tensor sample;
  if (t.lead()) {
    train.set_epoch(0);
    sample = train.next()->data;
    train.reset();
  }
  t.prepare(sample);
  std::cout << std::flush;
}

void add_stop_after_flag(FlagParser& p, int64_t* stop_after) {
  p.add("--stop-after-epoch K", stop_after, "stop after epoch K as if interrupted (to test --resume)", "none");
}

void add_device_flags(FlagParser& p, std::string* device, std::string* amp, const std::string& device_help) {
  p.add("--device D", device, device_help)
      .add_choice("--amp", amp, {"none", "bf16"}, "bfloat16 autocast for forward passes");
}

std::optional<DType> autocast_of(const std::string& amp) {
  return amp == "bf16" ? std::optional(DType::BFloat16) : std::nullopt;
}

}  // namespace weft::examples
