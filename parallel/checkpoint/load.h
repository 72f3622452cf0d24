// Loading a partitioned checkpoint into a DistributedModel of any layout, and
// into a single process.
//
// Contract:
// - load(path, state) is collective over the model's world (partition the
//   model, and build the optimizer and scheduler, first). `path` is a
//   checkpoint directory or a root of them (the latest committed one;
//   reader.h). Each rank reads the index, then only its stages' tensors:
//   the model's parameters and buffers by global name; the optimizer state
//   of its parameters by name, without ZeRO whole, with ZeRO only the
//   elements of its owned shard of each flat buffer (from whichever pieces
//   hold them: a checkpoint saved with ZeRO at any dp, or without). What to
//   read is decided first, as data (plan_load, load_plan.h), then read. Then the
//   LR schedule (the saved one; when the number of parameter groups differs
//   the saved values must be equal across groups and are given to every
//   group) and its RNG state: rank r of the loading world gets the saved
//   rank r's; a rank beyond the saved world (W ranks) gets seed
//   splitmix64(saved[r mod W].seed + r) at offset 0 (documented, not a
//   resumption: the data order does not depend on it, GlobalBatchSampler).
//   Returns the TrainingState (step, epoch, batch, metadata).
// - Before anything is changed the ranks compare the checkpoint with the
//   model: every missing key (of any rank's stages), every unexpected key
//   (in the checkpoint, in no rank's stages) and every shape or dtype
//   mismatch are listed in one error, the same on every rank:
//   "checkpoint '<dir>' does not match the model: missing keys [...];
//   unexpected keys [...]; mismatched keys [k: checkpoint [10, 6] float32
//   vs model [10, 5] float32]". Any rank's failure (a corrupted or missing
//   shard, named with its file, or metadata that disagrees with itself:
//   Note [checkpoint cross-checks] in consistency.h, each shard's header
//   checked by one rank) is reported by every rank ("rank R: ...");
//   after a failure in the reading phase the model may be partly loaded.
// - load_model_state(path) / load_optimizer_state(path): one process, no
//   group: the whole model's state dict (load it into a plain nn::Module)
//   and the whole by-name optimizer state, from a partial or full
//   checkpoint of any layout.
// - Tied parameters (Note [tied parameters in checkpoints] in load_plan.cc): where
//   the checkpoint has no optimizer entry for a parameter of a tied group
//   (DistributedModelOptions::pipe.tied), e.g. a head saved by one process
//   that held it as the embedding's tensor, the entries of the group's first
//   member that has some are taken.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/rng.h"
#include "optim/optimizer.h"
#include "parallel/checkpoint/snapshot.h"

namespace weft::parallel::checkpoint {

struct LoadOptions {
  bool optimizer = true;  // load the optimizer state (when state.optimizer is given)
  bool scheduler = true;
  bool rng = true;
  uint64_t* bytes_read = nullptr;  // when given: the bytes this rank read from the checkpoint's files
};

TrainingState load(const std::string& path, const Stateful& state, const LoadOptions& options = {});

std::map<std::string, Tensor> load_model_state(const std::string& path);
optim::OptimizerStateDict load_optimizer_state(const std::string& path);

// The RNG state rank `rank` resumes with, from the saved ranks' states.
GeneratorState rng_for_rank(const std::vector<GeneratorState>& saved, int rank);

}  // namespace weft::parallel::checkpoint
