// What the Fashion-MNIST examples (fashion_mnist, _ddp, _pipe, _hybrid) share
// around the library's training loop, train::Trainer: the data, the loss and
// optimizer from the shared flags, the run's callbacks and its last lines.
//
// Contract:
// - normalize: Fashion-MNIST's mean/std (0.2860, 0.3530), the loaders' transform.
// - load_fashion(flags): the training and test sets of --data, each cut to
//   --limit-train / --limit-test rows (0: all).
// - cross_entropy_loss(), optimizer_from(flags): the examples' loss and their
//   optimizer (--optimizer with --lr, --weight-decay and, for sgd and rmsprop,
//   --momentum; the others keep PyTorch's defaults).
// - add_run_callbacks(trainer, flags, spec): on every rank, the cosine LR
//   schedule stepped per epoch over --epochs, the progress bar (--no-progress)
//   and epoch lines in images, the metrics file, the plot titled spec.title,
//   partitioned checkpoints under --save (spec.checkpoint: every epoch) and
//   --stop-after-epoch K (spec.stop_after: the run stops after epoch K < --epochs
//   as if interrupted, saying so on stderr).
// - fit_and_report(trainer, train, test, flags, after_fit): fit over --epochs
//   evaluating on `test`, then after_fit (on every rank: collective work and
//   the example's own reports), then, unless stopped by --stop-after-epoch,
//   the lead names the metrics and plot files on stderr and prints the last
//   line, `test_accuracy=0.XXXX`; every rank waits for the lead's files.
//   Returns the exit status, 0.
// - prepare_on_first_batch(trainer, train): places the model now (collective;
//   automatic partitioning measures the lead's first batch of epoch 0), so
//   that a partition table is printed before anything else.
// - add_stop_after_flag, add_device_flags (--device D, --amp none|bf16) and
//   autocast_of("bf16") = bfloat16 ("none": full precision): the flags
//   fashion_mnist and fashion_mnist_ddp share.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/dtype.h"
#include "core/rng.h"
#include "examples/flags.h"
#include "examples/train_flags.h"
#include "io/dataloader.h"
#include "io/dataset.h"
#include "train/callbacks.h"
#include "train/trainer.h"

namespace weft::examples {

io::Example normalize(const io::Example& e, Generator&);

struct FashionData {
  std::shared_ptr<io::TensorDataset> train, test;
};
FashionData load_fashion(const TrainFlags& f);

train::LossFn cross_entropy_loss();
train::OptimizerFactory optimizer_from(const TrainFlags& f);

struct RunSpec {
  std::string title;                    // the plot's
  int64_t stop_after = 0;               // --stop-after-epoch; 0: none
  train::CheckpointOptions checkpoint;  // its root is --save (none without)
};
void add_run_callbacks(train::Trainer& t, const TrainFlags& f, RunSpec spec);

int fit_and_report(train::Trainer& t, io::DataLoader& train, io::DataLoader& test, const TrainFlags& f,
                   const std::function<void()>& after_fit = {});

void prepare_on_first_batch(train::Trainer& t, io::DataLoader& train);

void add_stop_after_flag(FlagParser& p, int64_t* stop_after);
void add_device_flags(FlagParser& p, std::string* device, std::string* amp, const std::string& device_help);
std::optional<DType> autocast_of(const std::string& amp);

}  // namespace weft::examples
