// The checkpoints under a root directory: which are committed, the latest,
// leftovers of interrupted saves, and keep-last-N rotation.
//
// Contract:
// - A committed checkpoint is a directory root/step-<8 digits> holding a
//   manifest.json (format.h); anything else (".tmp-*" directories of a save
//   that did not commit, other files) is not one. committed_checkpoints()
//   lists them by step, oldest first; latest_checkpoint() is the newest's
//   path or "" when there is none.
// - remove_incomplete(root) deletes the ".tmp-*" and ".old-*" directories
//   interrupted saves left (commit.h calls it on world rank 0 before a save).
// - prune(root, keep_last) deletes all but the newest keep_last committed
//   checkpoints (keep_last <= 0 keeps all) and returns the deleted paths; it
//   is called only after a new checkpoint is committed, so a failure at any
//   point leaves at least the newest keep_last.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace weft::parallel::checkpoint {

std::vector<std::pair<int64_t, std::string>> committed_checkpoints(const std::string& root);
std::string latest_checkpoint(const std::string& root);
void remove_incomplete(const std::string& root);
std::vector<std::string> prune(const std::string& root, int keep_last);

}  // namespace weft::parallel::checkpoint
