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
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include "core/parallel.h"
#include "core/rng.h"
#include "examples/device_support.h"
#include "examples/fashion_run.h"
#include "examples/flags.h"
#include "examples/models.h"
#include "examples/train_flags.h"
#include "io/dataloader.h"
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
  add_train_flags(p, f, {.program = "fashion_mnist", .models = {"cnn", "mlp", "lstm"}});
  add_stop_after_flag(p, &f.stop_after);
  add_device_flags(p, &f.device, &f.amp, "cpu, cuda or cuda:N");
  if (!p.parse(argc, argv, std::cout)) return std::nullopt;
  resolve_train_flags(f);
  return f;
}

int run(const Flags& f) {
  const Device dev = parse_device(f.device);  // fails early and clearly without a GPU
  if (f.threads > 0) set_num_threads(f.threads);
  std::cerr << "fashion_mnist: loading " << f.data << "\n";
  const FashionData data = load_fashion(f);
  io::DataLoader train(
      data.train, {.batch_size = f.batch_size, .shuffle = true, .seed = f.seed, .num_workers = f.workers}, normalize);
  io::DataLoader test(data.test, {.batch_size = 1000, .num_workers = f.workers}, normalize);

  manual_seed(f.seed);
  std::shared_ptr<nn::Sequential> model = f.model == "cnn"    ? fashion_cnn()
                                          : f.model == "lstm" ? fashion_lstm()
                                                              : fashion_mlp();
  train::Trainer trainer(train::Local{.device = dev, .autocast = autocast_of(f.amp)}, model, cross_entropy_loss(),
                         optimizer_from(f), {.valid_name = "test", .name = "fashion_mnist"});
  add_run_callbacks(
      trainer, f,
      {.title = "weft: Fashion-MNIST " + f.model, .stop_after = f.stop_after, .checkpoint = {.quiet = true}});
  if (!f.resume.empty()) trainer.resume(f.resume);
  std::cerr << "fashion_mnist: " << f.model << " with " << model->num_parameters() << " parameters, "
            << data.train->size() << " training / " << data.test->size() << " test images, " << get_num_threads()
            << " threads, device " << dev << (f.amp == "none" ? "" : ", autocast " + f.amp) << "\n";
  return fit_and_report(trainer, train, test, f);
}

}  // namespace
}  // namespace weft::examples

int main(int argc, char** argv) {
  return weft::examples::run_main("fashion_mnist", [&] {
    auto flags = weft::examples::parse(argc, argv);
    return flags ? weft::examples::run(*flags) : 0;
  });
}
