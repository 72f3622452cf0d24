// LoadPlan: what one rank reads from a partitioned checkpoint, computed as
// data before any byte is read (PyTorch DCP's load planning).
//
// Contract:
// - plan_load(metadata, needs) is a pure function: no file I/O, no process
//   group. From what the checkpoint holds (its indexes: every tensor's
//   pieces, each a range of the flattened tensor in one file; the saving
//   layout) and what this rank needs (its stages' model tensors, its
//   parameters, with ZeRO its shard under the loading layout), it returns
//   the targets (tensors to fill: the model's by name, the optimizer
//   dict's by key) and the items that fill them, each {file, saved key,
//   source element range, target, destination offset}. load.cc executes a
//   plan (allocates the targets, reads each item's elements, checked by
//   their pieces' CRC-32) and hands the targets to the model and optimizer.
// - The items of a target cover each element it needs exactly once, and an
//   item's source range lies in one piece (one file): a model tensor or a
//   plain optimizer entry needs all its elements; a ZeRO shard's
//   elementwise state "state.shard<f>.<leaf>" (S,) needs the elements of
//   [rank * S, (rank + 1) * S) that hold a parameter (padding stays zero),
//   taken from each parameter's saved state, however the saving run split
//   it; its "step" and "options.shard<f>.<opt>" come whole from the flat's
//   first parameter (Note [zero state dicts] in parallel/data/zero.h).
// - Without ZeRO a parameter's optimizer entries are every "state.<p>.*" and
//   "options.<p>.*" the checkpoint has for it, none if it has none (the
//   optimizer names what it misses). Tied parameters: Note [tied parameters
//   in checkpoints] in load_plan.cc.
// - Errors name the checkpoint and the tensor: a needed model tensor that
//   the checkpoint lacks or holds with another shape or dtype; optimizer
//   state needed but not saved; a ZeRO shard's entry missing ("has no
//   optimizer entry '<key>'") or saved with another shape than its
//   parameter's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "parallel/checkpoint/format.h"
#include "parallel/data/zero_layout.h"

namespace weft::parallel::checkpoint {

// The saving run's layout (manifest.json's "layout").
struct SavedLayout {
  int world = 1, pp = 1, dp = 1;
  bool zero = false;
  std::vector<int> balance;
};

// What a checkpoint holds (CheckpointReader's manifest and indexes).
struct CheckpointMetadata {
  std::string dir;     // names the checkpoint in errors
  PieceMap model;      // model.safetensors.index.json's pieces
  PieceMap optimizer;  // optimizer.safetensors.index.json's; empty without optimizer state
  SavedLayout layout;
};

struct TensorSpec {
  std::string name;
  Shape shape;
  DType dtype = DType::Float32;
};

// What this rank needs.
struct RankNeeds {
  std::vector<TensorSpec> model;   // its stages' parameters and buffers
  bool optimizer = false;          // read optimizer state for `params`
  std::vector<TensorSpec> params;  // its parameters (optimizer state is keyed by their names)
  struct Zero {
    ZeroLayout layout;                 // this rank's shard under the loading layout
    std::vector<std::string> options;  // the inner optimizer's hyper-parameter names
  };
  std::optional<Zero> zero;  // with ZeRO
  std::vector<std::vector<std::string>> tied;
};

enum class Index { kModel, kOptimizer };

// A tensor the plan fills: zeros of `shape` and `dtype`, then its items' elements.
struct LoadTarget {
  std::string key;  // model: the state-dict key; optimizer: the key of the dict given to the optimizer
  Shape shape;
  DType dtype = DType::Float32;
  bool optimizer = false;  // for the optimizer, else the model
};

// `length` elements of saved tensor `key` (in `index`), from its element
// `src_begin` on, held by `file`, into target `target` from its element `dst_begin` on.
struct LoadItem {
  std::string file;
  Index index = Index::kModel;
  std::string key;
  int64_t src_begin = 0, length = 0;
  int target = 0;
  int64_t dst_begin = 0;
};

struct LoadPlan {
  SavedLayout saved;
  std::vector<LoadTarget> targets;  // the model's in needs order, then the optimizer's
  std::vector<LoadItem> items;      // by target, then by destination offset
  std::optional<ZeroLayout> zero;   // with ZeRO: the layout the optimizer's local dict carries
};

LoadPlan plan_load(const CheckpointMetadata& checkpoint, const RankNeeds& needs);

// One line per item, "file key[a, b) -> target[c, d)", under a header
// naming the saved layout: for logs and test failures.
std::string describe(const LoadPlan& plan);

}  // namespace weft::parallel::checkpoint
