// The examples' shared training flags (examples/train_flags.h).
#include "examples/train_flags.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
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
      .add_choice("--optimizer", &f.optimizer, kOptimizers, "optimizer")
      .add("--lr X", &f.lr, "learning rate, cosine-annealed per epoch")
      .add("--momentum X", &f.momentum, "momentum of sgd and rmsprop")
      .add("--weight-decay X", &f.weight_decay, "weight decay (decoupled for adamw)")
      .add("--ema DECAY", &f.ema,
           "evaluate with, and end with, an exponential moving average of the weights (e.g. 0.999), updated "
           "after every step",
           "none")
      .add("--seed N", &f.seed, "seed for init and data order")
      .add("--threads N", &f.threads, ranks ? "CPU threads per rank" : "CPU threads",
           ranks ? "cores / ranks on this node, at least 1" : "all cores")
      .add("--workers N", &f.workers, ranks ? "data-loader threads per rank" : "data-loader threads");
  if (spec.checkpoints) {
    p.add("--save PATH", &f.save,
          ranks ? "rank 0 writes a checkpoint after every epoch" : "write a checkpoint after every epoch")
        .add("--resume PATH", &f.resume, "continue from a checkpoint written by --save");
    add_keep_last_flag(p, &f.keep_last);
    add_save_every_minutes_flag(p, &f.save_every_minutes);
  }
  p.add("--metrics PATH", &f.metrics, "JSON-lines metrics")
      .add("--plot PATH", &f.plot, "SVG plot of loss and accuracy")
      .add("--step-log PATH", &f.step_log, "JSON lines of every training step's loss (a resumed run keeps its steps)",
           "none")
      .add("--limit-train N", &f.limit_train, "use the first N training images (quick runs)", "all")
      .add("--limit-test N", &f.limit_test, "use the first N test images", "all")
      .add_switch("--no-progress", &f.progress, false, "no progress bar");
}

namespace {

constexpr const char* kIdxFiles =
    "a directory of the four Fashion-MNIST IDX files (train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, "
    "t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz; apt-get install dataset-fashion-mnist puts them in "
    "/usr/share/datasets/fashion-mnist)";

void check_data_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  WEFT_FLAG_CHECK(fs::exists(st), "--data ", dir, ": no such directory; expected ", kIdxFiles);
  WEFT_FLAG_CHECK(fs::is_directory(st), "--data ", dir, " is a file; expected ", kIdxFiles);
}

}  // namespace

void resolve_train_flags(TrainFlags& f, std::initializer_list<std::string*> more_paths) {
  WEFT_FLAG_CHECK(f.epochs >= 1, "--epochs must be positive (got ", f.epochs, ")");
  WEFT_FLAG_CHECK(f.batch_size >= 1, "--batch-size must be positive (got ", f.batch_size, ")");
  WEFT_FLAG_CHECK(f.lr > 0, "--lr must be positive (got ", f.lr, ")");
  WEFT_FLAG_CHECK(f.momentum >= 0, "--momentum must be >= 0 (got ", f.momentum, ")");
  WEFT_FLAG_CHECK(f.weight_decay >= 0, "--weight-decay must be >= 0 (got ", f.weight_decay, ")");
  WEFT_FLAG_CHECK(f.ema >= 0 && f.ema < 1, "--ema must be in [0, 1) (0: none; got ", f.ema, ")");
  WEFT_FLAG_CHECK(f.threads >= 0, "--threads must be >= 0 (0: all cores; got ", f.threads, ")");
  WEFT_FLAG_CHECK(f.workers >= 0, "--workers must be >= 0 (got ", f.workers, ")");
  WEFT_FLAG_CHECK(f.limit_train >= 0, "--limit-train must be >= 0 (0: all; got ", f.limit_train, ")");
  WEFT_FLAG_CHECK(f.limit_test >= 0, "--limit-test must be >= 0 (0: all; got ", f.limit_test, ")");
  check_keep_last_flag(f.keep_last);
  check_save_every_minutes_flag(f.save_every_minutes);
  for (std::string* path : {&f.data, &f.save, &f.resume, &f.metrics, &f.plot, &f.step_log}) *path = user_path(*path);
  for (std::string* path : more_paths) *path = user_path(*path);
  check_data_dir(f.data);
  check_path_exists("--resume", f.resume);
}

void add_keep_last_flag(FlagParser& p, int* keep_last) {
  *keep_last = kDefaultKeepLast;
  p.add("--keep-last N", keep_last,
        "keep only the newest N checkpoints under --save (0: all); 2 keeps disk use bounded and the one before the "
        "newest to go back to");
}

void add_save_every_minutes_flag(FlagParser& p, double* minutes) {
  p.add("--save-every-minutes X", minutes,
        "with --save, also checkpoint once X minutes have passed since the last save (SIGTERM or SIGUSR1 on any "
        "rank always saves and stops at the next step, exit status 75)",
        "0: none");
}

void check_save_every_minutes_flag(double minutes) {
  WEFT_FLAG_CHECK(minutes >= 0, "--save-every-minutes must be >= 0 (0: none; got ", minutes, ")");
}

void check_keep_last_flag(int keep_last) {
  WEFT_FLAG_CHECK(keep_last >= 0, "--keep-last must be >= 0 (0: keep all; got ", keep_last, ")");
}

void check_path_exists(const std::string& flag, const std::string& path) {
  if (path.empty()) return;
  std::error_code ec;
  WEFT_FLAG_CHECK(std::filesystem::exists(path, ec), flag, " ", path, ": no such file or directory");
}

int resolve_threads(int threads_flag, int ranks_on_node) {
  if (threads_flag > 0) return threads_flag;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, ranks_on_node));
}

}  // namespace weft::examples
