// The GPT example's checkpoints: train::Checkpoint's layout-free partitioned
// directories (root/step-<N>, parallel/checkpoint), which Trainer::resume
// loads on any pp x dp grid, with or without ZeRO, or in one process (the
// tied head's optimizer state saved by one process under the embedding's
// name is found there: Note [tied parameters in checkpoints]). Besides the
// trainer's state they carry the model's sizes and the run's --steps.
//
// Contract:
// - gpt_metadata(config, steps): the entries a save adds to trainer_state.json's
//   metadata (CheckpointOptions::metadata): "gpt.layers", "gpt.heads",
//   "gpt.dim", "gpt.context", "gpt.vocab", "gpt.tied", "gpt.dropout" and
//   "gpt.steps" (the --steps the run was training to).
// - read_saved_run(path): the step, sizes and --steps (0 when unknown) of
//   the latest committed checkpoint under `path` (or that checkpoint), without
//   the tensors; "not a GPT example checkpoint" when the sizes are missing.
// - check_same_model names each size flag that differs from the saved run's.
#pragma once

#include <map>
#include <string>

#include "examples/gpt/model.h"

namespace weft::examples::gpt {

std::map<std::string, std::string> gpt_metadata(const GptConfig& config, int64_t steps);

struct SavedRun {
  std::string dir;  // the checkpoint directory (root/step-<step>)
  int64_t step = 0;
  int64_t steps = 0;  // the --steps it was saved under; 0: not recorded
  GptConfig config;
};
SavedRun read_saved_run(const std::string& path);
void check_same_model(const GptConfig& flags, const GptConfig& saved, const std::string& path);

}  // namespace weft::examples::gpt
