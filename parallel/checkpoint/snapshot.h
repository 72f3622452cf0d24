// What one rank contributes to a checkpoint, copied at the step boundary
// (Note [checkpoint layout] in format.h).
//
// Contract:
// - take_snapshot(state, training, kind) copies, to CPU memory, everything
//   this rank writes, so training may go on while a background thread
//   writes it (checkpointer.h):
//   partial: data-parallel rank 0 of each pipeline position writes its
//   stages' parameters and buffers (model-<pp_rank>-of-<pp>) and, without
//   ZeRO, its optimizer state by parameter name (optimizer-<pp_rank>-of-<pp>);
//   with ZeRO every data-parallel rank writes the slice of each parameter's
//   elementwise state it owns, under the parameter's name with the element
//   range in the index, and data-parallel rank 0 adds the per-parameter
//   scalars (step, options) (optimizer-<world rank>-of-<world>).
//   full (collective over the world: DistributedModel::state_dict() and
//   DistributedOptimizer::state_dict() gather): world rank 0 writes the whole
//   model to model.safetensors (names as the model's, {"format": "pt"}
//   metadata: PyTorch's safetensors.torch.load_file and a single-process
//   weft model read it) and the whole by-name optimizer state to
//   optimizer.safetensors.
//   Every rank records its RNG state (get_rng_state()) and its LR
//   scheduler's state (when it has one) for trainer_state.json.
//   Stateful's extra_files (any rank, either kind) are copied as they are:
//   files in no index, written by this rank and listed in the manifest
//   with their size and CRC-32 like every file (Note [checkpoint layout]);
//   their names must be plain file names, not the checkpoint's own.
// - Stateful's optimizer and scheduler may be null (a rank whose stages have
//   no parameters has no scheduler); the optimizer must be null on every
//   rank or on none.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/rng.h"
#include "optim/lr_scheduler.h"
#include "parallel/checkpoint/format.h"
#include "parallel/hybrid/distributed_model.h"
#include "parallel/hybrid/distributed_optimizer.h"

namespace weft::parallel::checkpoint {

// A file of a checkpoint beyond the model and the optimizer, as bytes (e.g.
// the Trainer's per-rank state, Note [rank state] in train/trainer.h).
struct ExtraFile {
  std::string name;
  std::string bytes;
};

// What a checkpoint covers on this rank.
struct Stateful {
  hybrid::DistributedModel* model = nullptr;
  hybrid::DistributedOptimizer* optimizer = nullptr;  // null: model only
  optim::LRScheduler* scheduler = nullptr;            // null on ranks without one
  std::vector<ExtraFile> extra_files;                 // written by this rank
};

// Where training stands: `batch` global batches of `epoch` are done (the
// GlobalBatchSampler's start_batch on resume); an end-of-epoch save stores
// the next epoch with batch 0.
struct TrainingState {
  int64_t step = 0;  // optimizer steps taken
  int64_t epoch = 0;
  int64_t batch = 0;
  std::map<std::string, std::string> metadata;
};

struct StoredTensor {
  Tensor data;  // the stored values: the whole tensor, or 1-d elements [begin, end)
  Shape shape;  // the whole tensor's
  int64_t begin = 0, end = 0;
};

struct FileSnapshot {
  std::string name;
  bool model = true;  // model or optimizer index
  std::map<std::string, StoredTensor> tensors;
  std::map<std::string, std::string> metadata;
};

struct Snapshot {
  Kind kind = Kind::kPartial;
  int rank = 0, world = 1;
  TrainingState training;
  std::vector<FileSnapshot> files;
  GeneratorState rng;
  nlohmann::json scheduler;  // null without one
  nlohmann::json layout;
  bool has_optimizer = false;
  std::vector<ExtraFile> extra_files;
};

Snapshot take_snapshot(const Stateful& state, const TrainingState& training, Kind kind);

// An LRScheduler's state_dict() as JSON (Note [scheduler JSON] in format.h:
// "last_epoch", "base_lrs", "last_lrs" and the scheduler's own entries).
nlohmann::json scheduler_to_json(const optim::LRScheduler& s);

}  // namespace weft::parallel::checkpoint
