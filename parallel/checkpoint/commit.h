// Writing a checkpoint as one commit across ranks.
//
// Note [checkpoint commit]: commit_snapshot(group, root, snapshot, keep_last)
// is collective over `group` (every rank of the world, each with its own
// snapshot of the same step):
//   1. world rank 0 creates `root`, deletes leftovers of interrupted saves
//      (rotation.h) and creates root/.tmp-step-<step>; the ranks agree.
//   2. every rank writes its files (snapshot.h) into that directory, each
//      fsynced, recording each file's size and CRC-32 and each tensor's
//      piece (format.h); the ranks gather their descriptions (an allgather:
//      the agreement that every rank succeeded; a rank's failure is
//      reported by every rank, naming it and its error; a rank that dies is
//      named by the process group's missing-rank error).
//   3. world rank 0 writes the two indexes and trainer_state.json, then
//      manifest.json (every file's size and CRC-32, the layout, the step),
//      fsyncs them and the directory, and renames it to root/step-<step> (an
//      existing checkpoint of that step is moved aside first and deleted
//      after), then fsyncs `root`; the ranks agree on the outcome.
//   4. with keep_last > 0, world rank 0 deletes the oldest committed
//      checkpoints beyond keep_last (only now, after the commit).
// Whatever fails or dies before the rename, root/step-<step> does not
// appear and every earlier checkpoint is untouched; a loader never sees a
// directory without its manifest as a checkpoint. All ranks must see the
// same file system at `root`.
#pragma once

#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "parallel/checkpoint/snapshot.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/process_group.h"

namespace weft::parallel::checkpoint {

// Returns the committed checkpoint's directory.
std::string commit_snapshot(ProcessGroup& group, const std::string& root, const Snapshot& snapshot, int keep_last);

// Every rank's string, in rank order (collective): allgather_bytes under the
// name the loader uses. agree and combine_errors come from the toolkit too
// (parallel/comm/collectives.h).
inline std::vector<std::string> allgather_strings(ProcessGroup& group, const std::string& mine) {
  return allgather_bytes(group, mine);
}
// An exception's message for another rank's report (a weft::Error's without its file:line),
// bytes that are not UTF-8 (a damaged file's, quoted by a parser) replaced by U+FFFD.
std::string error_text(const std::exception& e);

namespace detail {
// Fault injection for tests: called on each rank with "prepared", "wrote
// <file>" after each of its files, "written" before the ranks gather, and
// on world rank 0 "manifest" before the manifest is written and "committed".
void set_save_hook(std::function<void(const std::string& event)> hook);
}  // namespace detail

}  // namespace weft::parallel::checkpoint
