// fashion_mnist: trains the reference CNN on Fashion-MNIST on the CPU or a GPU
// (--device cuda[:N]; --amp bf16 for bfloat16 autocast) with the library's
// training loop, train::Trainer (train/trainer.h), in one process.
//
//   ./bazelw run //examples:fashion_mnist -- [flags]
//
// Reads Debian's dataset-fashion-mnist (or --data DIR), shows a progress bar per
// epoch, evaluates on the test set after each epoch, writes metrics (JSON lines)
// and an SVG plot, optionally checkpoints every epoch (--save DIR: partitioned
// checkpoints DIR/step-<N>, parallel/checkpoint) and resumes (--resume: such a
// directory or its root, or a single-file checkpoint of the older --save), and
// ends with the line `test_accuracy=0.XXXX`. A resumed run reproduces the
// uninterrupted run's per-epoch losses exactly: the data order is seeded by
// (seed, epoch), kernels do not depend on the thread count, and the checkpoint
// holds model, optimizer, schedule, RNG state, step, epoch and history.
#include "io/fashion_mnist.h"

#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include "core/nn_ops.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "examples/device_support.h"
#include "examples/flags.h"
#include "examples/models.h"
#include "examples/train_flags.h"
#include "io/dataloader.h"
#include "optim/lr_scheduler.h"
#include "train/callbacks.h"
#include "train/trainer.h"

namespace weft::examples {
namespace {

// The shared training flags (examples/train_flags.h) and this example's own.
struct Flags : TrainFlags {
  int64_t stop_after = 0;  // 0 = run all epochs
  std::string device = "cpu";
  std::string amp = "none";
};

// The flags, or std::nullopt after --help printed them.
std::optional<Flags> parse(int argc, char** argv) {
  Flags f;
  FlagParser p("usage: fashion_mnist [flags]");
  add_train_flags(p, f, {.program = "fashion_mnist"});
  p.add("--stop-after-epoch K", &f.stop_after, "stop after epoch K as if interrupted (to test --resume)", "none")
      .add("--device D", &f.device, "cpu, cuda or cuda:N")
      .add_choice("--amp", &f.amp, {"none", "bf16"}, "bfloat16 autocast for forward passes");
  if (!p.parse(argc, argv, std::cout)) return std::nullopt;
  resolve_train_flags(f);
  return f;
}

std::shared_ptr<io::TensorDataset> limit(const io::TensorDataset& ds, int64_t n) {
  if (n <= 0 || n >= ds.size()) return std::make_shared<io::TensorDataset>(ds.data(), ds.targets());
  return std::make_shared<io::TensorDataset>(ds.data().narrow(0, 0, n), ds.targets().narrow(0, 0, n));
}

int run(const Flags& f) {
  const Device dev = parse_device(f.device);  // fails early and clearly without a GPU
  if (f.threads > 0) set_num_threads(f.threads);
  std::cerr << "fashion_mnist: loading " << f.data << "\n";
  auto train_ds = limit(io::load_fashion_mnist(f.data, true), f.limit_train);
  auto test_ds = limit(io::load_fashion_mnist(f.data, false), f.limit_test);
  // Normalise with Fashion-MNIST's mean/std (0.2860, 0.3530).
  auto normalize = [](const io::Example& e, Generator&) { return io::Example{(e.data - 0.2860) / 0.3530, e.target}; };
  io::DataLoader train(
      train_ds, {.batch_size = f.batch_size, .shuffle = true, .seed = f.seed, .num_workers = f.workers}, normalize);
  io::DataLoader test(test_ds, {.batch_size = 1000, .num_workers = f.workers}, normalize);

  manual_seed(f.seed);
  std::shared_ptr<nn::Sequential> model = f.model == "cnn" ? fashion_cnn() : fashion_mlp();
  const std::optional<DType> autocast = f.amp == "bf16" ? std::optional(DType::BFloat16) : std::nullopt;
  train::Trainer trainer(train::Local{.device = dev, .autocast = autocast}, model,
                         [](const Tensor& logits, const Tensor& y) { return cross_entropy(logits, y); },
                         train::sgd({.lr = f.lr, .momentum = f.momentum, .weight_decay = f.weight_decay}),
                         {.valid_name = "test", .name = "fashion_mnist"});
  trainer.add<train::LRSchedule>(
      [&](optim::Optimizer& o) { return std::make_unique<optim::CosineAnnealingLR>(o, f.epochs); });
  trainer.add<train::Progress>(train::ProgressOptions{.bar = f.progress, .unit = "img"});
  trainer.add<train::MetricsLog>(f.metrics);
  trainer.add<train::Plot>(f.plot, "weft: Fashion-MNIST " + f.model);
  if (!f.save.empty()) trainer.add<train::Checkpoint>(train::CheckpointOptions{.root = f.save, .quiet = true});
  bool interrupted = false;
  trainer.add<train::Lambda>(train::Lambda::Events{.epoch_end = [&](train::Trainer& t) {
    if (f.stop_after <= 0 || t.state().epoch < f.stop_after || t.state().epoch >= f.epochs) return;
    std::cerr << "fashion_mnist: stopping after epoch " << t.state().epoch << " (--stop-after-epoch)\n";
    t.request_stop();
    interrupted = true;
  }});
  if (!f.resume.empty()) trainer.resume(f.resume);
  std::cerr << "fashion_mnist: " << f.model << " with " << model->num_parameters() << " parameters, "
            << train_ds->size() << " training / " << test_ds->size() << " test images, " << get_num_threads()
            << " threads, device " << dev << (f.amp == "none" ? "" : ", autocast " + f.amp) << "\n";

  trainer.fit(train, &test, f.epochs);
  if (interrupted) return 0;
  std::cerr << "fashion_mnist: metrics in " << f.metrics << ", plot in " << f.plot << "\n";
  const auto& history = trainer.state().history;
  std::printf("test_accuracy=%.4f\n", history.empty() ? 0.0 : history.back().valid_metric);
  return 0;
}

}  // namespace
}  // namespace weft::examples

int main(int argc, char** argv) {
  return weft::examples::run_main("fashion_mnist", [&] {
    auto flags = weft::examples::parse(argc, argv);
    return flags ? weft::examples::run(*flags) : 0;
  });
}
