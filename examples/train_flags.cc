// The examples' shared training flags (examples/train_flags.h).
#include "examples/train_flags.h"

#include <algorithm>
#include <thread>

#include "core/error.h"
#include "examples/train_report.h"

namespace weft::examples {

void add_train_flags(FlagParser& p, TrainFlags& f, const TrainFlagsSpec& spec) {
  if (f.metrics.empty()) f.metrics = spec.program + "_metrics.jsonl";
  if (f.plot.empty()) f.plot = spec.program + ".svg";
  const bool ranks = spec.multi_process;
  p.add("--data DIR", &f.data, spec.data_help)
      .add_choice("--model", &f.model, spec.models, "model")
      .add("--epochs N", &f.epochs, "epochs")
      .add("--batch-size N", &f.batch_size, spec.batch_size_help)
      .add("--lr X", &f.lr, "SGD learning rate, cosine-annealed per epoch")
      .add("--momentum X", &f.momentum, "SGD momentum")
      .add("--weight-decay X", &f.weight_decay, "SGD weight decay")
      .add("--seed N", &f.seed, "seed for init and data order")
      .add("--threads N", &f.threads, ranks ? "CPU threads per rank" : "CPU threads",
           ranks ? "cores / ranks on this node, at least 1" : "all cores")
      .add("--workers N", &f.workers, ranks ? "data-loader threads per rank" : "data-loader threads");
  if (spec.checkpoints) {
    p.add("--save PATH", &f.save,
          ranks ? "rank 0 writes a checkpoint after every epoch" : "write a checkpoint after every epoch")
        .add("--resume PATH", &f.resume, "continue from a checkpoint written by --save");
  }
  p.add("--metrics PATH", &f.metrics, "JSON-lines metrics")
      .add("--plot PATH", &f.plot, "SVG plot of loss and accuracy")
      .add("--limit-train N", &f.limit_train, "use the first N training images (quick runs)", "all")
      .add("--limit-test N", &f.limit_test, "use the first N test images", "all")
      .add_switch("--no-progress", &f.progress, false, "no progress bar");
}

void resolve_train_flags(TrainFlags& f, std::initializer_list<std::string*> more_paths) {
  WEFT_CHECK(f.epochs >= 1 && f.batch_size >= 1, "--epochs and --batch-size must be positive");
  for (std::string* path : {&f.data, &f.save, &f.resume, &f.metrics, &f.plot}) *path = user_path(*path);
  for (std::string* path : more_paths) *path = user_path(*path);
}

int resolve_threads(int threads_flag, int ranks_on_node) {
  if (threads_flag > 0) return threads_flag;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, ranks_on_node));
}

}  // namespace weft::examples
