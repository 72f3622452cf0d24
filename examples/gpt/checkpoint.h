// The GPT example's checkpoints: parallel/checkpoint's layout-free
// partitioned format (safetensors shards under the model's global names, an
// index, trainer_state.json, a manifest committed last), so a run saved in
// one process resumes on any pp x dp grid, with or without ZeRO, and back.
// The one-process run saves through a DistributedModel of one stage over a
// one-rank in-process group that shares its model and optimizer
// (trainer_single.cc).
//
// Contract:
// - gpt_metadata(config, history) is what a checkpoint carries besides the
//   tensors (TrainingState::metadata, in trainer_state.json): the model's
//   sizes ("gpt.layers", "gpt.heads", "gpt.dim", "gpt.context", "gpt.vocab",
//   "gpt.tied", "gpt.dropout") and the evaluation history (report.h's
//   encoding, so a resumed run's chart covers the whole run).
//   read_saved_run(path) reads them (and the step and directory) from the
//   latest committed checkpoint under `path` (or that checkpoint), without
//   the tensors; "not a GPT example checkpoint" when they are missing.
//   check_same_model names each size flag that differs from the saved run's.
// - load_run(path, state, config) (collective over the model's world): the
//   model's parameters and buffers, the optimizer state (with ZeRO its
//   shard), the LR schedule and the RNG state through
//   parallel::checkpoint::load, each rank reading its own pieces; a tied
//   head's optimizer state saved by one process under the embedding's name
//   is found there (Note [tied parameters in checkpoints]).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "examples/gpt/model.h"
#include "examples/gpt/report.h"
#include "optim/optimizer.h"
#include "parallel/checkpoint/snapshot.h"

namespace weft::examples::gpt {

std::map<std::string, std::string> gpt_metadata(const GptConfig& config, const std::vector<EvalRecord>& history);

struct SavedRun {
  std::string dir;  // the checkpoint directory (root/step-<step>)
  int64_t step = 0;
  GptConfig config;
  std::vector<EvalRecord> history;
};
SavedRun read_saved_run(const std::string& path);
void check_same_model(const GptConfig& flags, const GptConfig& saved, const std::string& path);

parallel::checkpoint::TrainingState load_run(const std::string& path, const parallel::checkpoint::Stateful& state,
                                             const GptConfig& config);

}  // namespace weft::examples::gpt
