// The training flags the example programs share (--data, --model, --epochs,
// --batch-size, --optimizer, --lr, --momentum, --weight-decay, --seed,
// --threads, --workers,
// --save, --resume, --metrics, --plot, --step-log, --limit-train,
// --limit-test, --no-progress): one struct with their defaults, one registration on a
// FlagParser (examples/flags.h) and one check that runs after parsing. Each
// example keeps its own flags (--device, --chunks, ...) in a struct that holds
// a TrainFlags and registers them on the same parser.
//
// Contract:
// - add_train_flags() registers the flags in the order above (--save and
//   --resume only with TrainFlagsSpec::checkpoints). A flag's default is the
//   field's value at registration, as FlagParser's are, except that an empty
//   metrics or plot path becomes "<program>_metrics.jsonl" or "<program>.svg"
//   first (TrainFlagsSpec::program).
// - TrainFlagsSpec::multi_process (a program run under mpirun, one process per
//   rank) words --threads and --workers per rank, --threads' default as
//   "cores / ranks on this node, at least 1" (resolve_threads()), and --save as
//   rank 0's.
// - resolve_train_flags() after parsing checks each value and throws a
//   FlagError (examples/flags.h) naming the one flag at fault and its value:
//   --epochs and --batch-size positive; --lr positive; --momentum,
//   --weight-decay, --threads, --workers, --limit-train and --limit-test
//   >= 0. Every path (data, save, resume, metrics, plot, step log and
//   `more_paths`) then goes through user_path() (examples/train_report.h): relative to where
//   `bazel run` was started; empty paths stay empty. Then the paths that are
//   read: --data must be a directory (a file, or nothing there, is an error
//   saying so and what was expected: the four *-ubyte.gz IDX files), and
//   --resume, when given, must exist ("--resume PATH: no such file or
//   directory").
// - --keep-last (every example that writes checkpoints: with --save and
//   --resume here, or registered by the example itself, as
//   fashion_mnist_hybrid and gpt do) has one default, kDefaultKeepLast, and
//   one registration (add_keep_last_flag); check_keep_last_flag wants >= 0.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "examples/flags.h"
#include "io/fashion_mnist.h"

namespace weft::examples {

// --keep-last's default: the newest two checkpoints, so that disk use stays
// bounded on long runs and the one before the newest is still there to go
// back to (a run that diverged, a checkpoint from the wrong flags).
inline constexpr int kDefaultKeepLast = 2;

// --optimizer's choices (examples/fashion_run.h optimizer_from).
inline const std::vector<std::string> kOptimizers = {"sgd", "adam", "adamw", "rmsprop", "adagrad"};

struct TrainFlags {
  std::string data = io::kFashionMnistDir;
  std::string model = "cnn";
  int64_t epochs = 5;
  int64_t batch_size = 128;
  std::string optimizer = "sgd";  // --optimizer: one of kOptimizers
  double lr = 0.05;
  double momentum = 0.9;
  double weight_decay = 5e-4;
  double ema = 0;  // --ema DECAY: an exponential moving average of the weights (train::WeightAveraging); 0: none
  uint64_t seed = 0;
  int threads = 0;  // 0: all cores (per rank: resolve_threads())
  int workers = 1;
  std::string save, resume;                 // empty: none
  int keep_last = kDefaultKeepLast;         // checkpoints kept under --save (0: all)
  double save_every_minutes = 0;            // --save-every-minutes (0: none)
  std::string metrics, plot;                // empty at registration: "<program>_metrics.jsonl", "<program>.svg"
  std::string step_log;                     // --step-log: each step's loss (train/step_log.h); empty: none
  int64_t limit_train = 0, limit_test = 0;  // 0: all
  bool progress = true;
};

// Where the examples' flags differ.
struct TrainFlagsSpec {
  std::string program;  // names the default metrics and plot files
  std::string batch_size_help = "batch size";
  std::string data_help = "Fashion-MNIST IDX files";
  std::vector<std::string> models = {"cnn", "mlp"};
  bool multi_process = false;  // under mpirun: threads and workers per rank, rank 0 saves
  bool checkpoints = true;     // --save and --resume
};

void add_train_flags(FlagParser& parser, TrainFlags& flags, const TrainFlagsSpec& spec);

// Checks and resolves the parsed flags; `more_paths` are the example's own paths.
void resolve_train_flags(TrainFlags& flags, std::initializer_list<std::string*> more_paths = {});

// "--keep-last N": checkpoints kept under --save (0: all); sets *keep_last to
// kDefaultKeepLast first.
void add_keep_last_flag(FlagParser& parser, int* keep_last);
// "--save-every-minutes X": also checkpoint once X minutes have passed since
// the last save (0: only at the usual points); check_save_every_minutes_flag
// wants >= 0.
void add_save_every_minutes_flag(FlagParser& parser, double* minutes);
void check_save_every_minutes_flag(double minutes);
void check_keep_last_flag(int keep_last);

// A path that is read must exist: otherwise a FlagError
// "<flag> <path>: no such file or directory". An empty path passes.
void check_path_exists(const std::string& flag, const std::string& path);

// --threads for one of `ranks_on_node` processes: the flag when given (> 0),
// else the cores divided among the node's ranks, at least 1.
int resolve_threads(int threads_flag, int ranks_on_node);

}  // namespace weft::examples
