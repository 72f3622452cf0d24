// Which checkpoint a path names, for Trainer::resume: one story for both
// formats weft writes.
//
// Contract:
// - locate_checkpoint(path): a directory holding manifest.json is a
//   partitioned checkpoint (parallel/checkpoint); a directory holding
//   committed step-<N> directories is a root (its latest committed one is
//   taken); a regular file is a single-file checkpoint (io/checkpoint),
//   verified by loading it. Errors name the path: "resume: '<p>': no such
//   file or directory"; "resume: '<p>' is a directory with no committed
//   checkpoint: expected a partitioned checkpoint directory (with
//   manifest.json) or a root holding step-<N> directories" (a directory whose
//   save did not commit says so); "resume: '<p>' is not a checkpoint: <why>"
//   for a file io/checkpoint refuses (truncated, corrupted, not weft's).
// - optimizer_state_by_name(positional, names, where): a positional optimizer
//   state dict (Note [optimizer state dict] in optim/optimizer.h) of an
//   optimizer over parameters named `names` in order, keyed by name instead
//   (Note [optimizer state by name]), so any layout's optimizer loads it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "optim/optimizer.h"

namespace weft::train {

struct CheckpointLocation {
  enum class Kind { kPartitioned, kSingleFile } kind = Kind::kPartitioned;
  std::string path;                                // the checkpoint directory, or the file
  std::optional<io::CheckpointContents> contents;  // the single file's, loaded
};

CheckpointLocation locate_checkpoint(const std::string& path);

optim::OptimizerStateDict optimizer_state_by_name(const optim::OptimizerStateDict& positional,
                                                  const std::vector<std::string>& names, const std::string& where);

}  // namespace weft::train
