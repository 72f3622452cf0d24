// The GPT example's command line: every flag with its default, parsed by
// examples/flags.h's FlagParser (--flag value or --flag=value; --help lists
// them; an unknown flag, a missing value or a bad number is an error naming
// the flag), then checked (check_options): every error is a FlagError
// (reported once under mpirun) naming the flag at fault, its value and what
// was allowed. The pipeline flags (--pp ... --balance) and --keep-last are the
// shared ones (examples/grid_flags.h, examples/train_flags.h).
//
// Paths (--data, --save, --resume, --metrics, --plot) are resolved against
// the directory `bazel run` was started from (examples/train_report.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "examples/gpt/corpus.h"
#include "examples/gpt/model.h"
#include "examples/grid_flags.h"
#include "examples/train_flags.h"

namespace weft::examples::gpt {

// GridFlags: pp, dp (0: world size / pp), chunks, schedule, virtual_stages
// (0: 2 for interleaved, interleaved-zb and zbv, else 1), balance (auto or
// layers per stage).
struct Options : GridFlags {
  // Data.
  std::string data = kFortunesDir;
  double val_fraction = 0.1;
  // Model.
  GptConfig model;
  bool untied = false;
  // Training.
  int64_t steps = 3000;
  int64_t batch_size = 32;  // global: rows of --context tokens per step
  double lr = 6e-3;         // peak
  double min_lr_ratio = 0.1;
  int64_t warmup = 100;
  double weight_decay = 0.1;
  double beta2 = 0.99;
  double clip = 1.0;  // 0: off
  uint64_t seed = 0;
  int threads = 0;
  int64_t eval_interval = 250;
  int64_t eval_batches = 8;  // global batches of validation windows
  int64_t stop_after = 0;    // stop after this step as if interrupted (0: never)
  // Reporting and checkpoints.
  std::string metrics = "gpt_metrics.jsonl", plot = "gpt.svg";
  std::string save, resume;          // checkpoint directories
  int keep_last = kDefaultKeepLast;  // checkpoints kept under --save (0: all)
  double save_every_minutes = 0;     // --save-every-minutes (0: none)
  bool progress = true;
  // Sampling.
  int64_t sample = 0;  // >0: generate this many tokens from --resume's checkpoint, no training
  int64_t final_sample = 300;
  std::string prompt;
  double temperature = 0.8;
  int64_t top_k = 0;
  uint64_t sample_seed = 0;
  // Pipeline x data parallel (under mpirun): GridFlags' and
  bool zero = false;
  std::string amp = "none";  // --amp: none or bf16 (autocast for forward passes and the loss)
};

// The options, or std::nullopt after --help (printed to stdout).
std::optional<Options> parse_options(int argc, char** argv);

// Each flag's value and the flags' combinations (FlagErrors naming the flags);
// --data and --resume must exist. `world`: the number of processes.
void check_options(const Options& o, int world);

// Whether this process runs under mpirun (Open MPI's environment).
bool under_mpirun();

}  // namespace weft::examples::gpt
