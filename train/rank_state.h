// Per-rank state in the Trainer's checkpoints: what differs between ranks
// and is not in the model and optimizer files of a checkpoint (under
// DataParallel only rank 0 writes those): in weft, DASO's state
// (parallel/data/daso.h, Note [daso state]).
//
// Note [rank state]: Trainer::add_rank_state(RankState) registers a named part
// of every rank's state (the same names, in the same order, on every rank),
// with functions that save and load it and this run's layout as the state
// depends on it (e.g. DASO's nodes).
// - Every checkpoint save (Checkpoint::save, collective) calls each part's
//   save() on every rank and packs rank r's parts into
//   rank-state-<r>-of-<n>.safetensors (r counts from 0; tensors
//   "<name>.<key>", metadata: rank, world, the rank's RNG state, and
//   "layout.<name>" for each part). The files are gathered to the lead
//   (world rank 0), whose checkpoint save writes them as extra files
//   (parallel/checkpoint/snapshot.h): listed in the manifest with their size
//   and CRC-32 and committed with the rest, all or nothing (Note
//   [checkpoint commit]).
// - A resume with parts registered (Trainer::resume), before the model is
//   loaded: every rank reads its own file and checks it against the
//   manifest; a file missing, truncated or corrupted is an error naming the
//   rank and the file, which every rank reports (agreed over the Trainer's
//   ranks). A checkpoint without per-rank state, saved by another number of
//   ranks, lacking a part this run registers, or whose part was saved over
//   another layout is refused naming what the checkpoint holds, what this
//   run has, and how to proceed. After the model, optimizer (rank 0's) and
//   LR schedule are loaded, each part's load() gets this rank's tensors
//   (keys without "<name>.") and the rank's own RNG state comes back; load()
//   errors are agreed on too. Parts in the checkpoint that this run does
//   not register are ignored: resuming without them takes rank 0's model and
//   optimizer state alone.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/safetensors.h"
#include "parallel/checkpoint/snapshot.h"
#include "parallel/comm/process_group.h"

namespace weft::train {

struct RankState {
  std::string name;    // "daso"; a plain name (letters, digits, '_')
  std::string layout;  // this run's layout, as the state depends on it ("2 nodes x 2 ranks: [0, 1] [2, 3]")
  std::function<std::map<std::string, Tensor>()> save;
  std::function<void(const std::map<std::string, Tensor>&)> load;
};

namespace detail {

// "rank-state-00002-of-00004.safetensors": world rank 2's of 4.
std::string rank_state_file(int rank, int world);

// Collective over `group` (null: this rank alone): every rank's file, on
// the group's rank 0; nothing on the others.
std::vector<parallel::checkpoint::ExtraFile> gather_rank_states(const std::vector<RankState>& parts,
                                                                parallel::ProcessGroup* group);

// This rank's file of the checkpoint directory `dir`, read and checked
// (Note [rank state]); throws naming the rank and the file.
io::SafetensorsFile read_rank_state(const std::string& dir, const std::vector<RankState>& parts, int rank, int world);

// Each part's load() with its tensors, then the rank's RNG state.
void load_rank_state(const std::vector<RankState>& parts, const io::SafetensorsFile& file);

}  // namespace detail
}  // namespace weft::train
