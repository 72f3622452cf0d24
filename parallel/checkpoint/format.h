// The on-disk format of partitioned checkpoints (Note [checkpoint layout]):
// file names, the tensor indexes (Hugging Face's model.safetensors.index.json
// shape plus weft's per-piece records) and the manifest, to and from JSON.
//
// Note [checkpoint layout]: a checkpoint is a directory, committed by
// renaming it into place once its manifest is written (commit.h):
//   manifest.json                      written last: kind, step, epoch,
//                                      batch, the saving layout, and every
//                                      other file's size and CRC-32; its own
//                                      CRC-32 in "manifest_crc32" (computed
//                                      with that value written "00000000")
//   trainer_state.json                 step, epoch, batch (the global batch
//                                      within the epoch), the LR schedule
//                                      (Note [scheduler JSON]), every rank's
//                                      RNG state, user metadata
//   model.safetensors.index.json       {"metadata": {"total_size": ...},
//                                      "weight_map": {name: file},
//                                      "weft.pieces": {name: [piece, ...]}}
//   optimizer.safetensors.index.json   the same for optimizer state keyed by
//                                      parameter name (Note [optimizer state
//                                      by name]: state.<param>.<leaf>,
//                                      options.<param>.<opt>)
//   model-0000i-of-0000n.safetensors   partial: one per pipeline stage
//   optimizer-0000i-of-0000n.safetensors  (ZeRO: one per data-parallel rank)
//   model.safetensors, optimizer.safetensors   full: the whole model in one
//                                      file, plain safetensors with the
//                                      model's own parameter names
//   extra files (snapshot.h)           in no index, listed in the manifest
//                                      like every file: the Trainer's
//                                      rank-state-<r>-of-<n>.safetensors,
//                                      world rank r's own state (r counts
//                                      from 0; Note [rank state] in
//                                      train/trainer.h)
// Every tensor is stored under its global name, never a stage or position.
// A piece is a range of elements [begin, end) of the flattened tensor held
// by one file (a ZeRO rank's owned slice of a parameter's state, stored 1-d
// under the same name), with its dtype, the whole tensor's shape, its
// data_offsets in the file's data section and its CRC-32. A tensor stored
// whole has one piece [0, numel) and also appears in "weight_map" (so
// Hugging Face tools read the model index); a sliced one only in
// "weft.pieces". The pieces of a name tile [0, numel) without overlap.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tensor.h"

namespace weft::parallel::checkpoint {

inline constexpr int kFormatVersion = 1;
inline constexpr const char* kFormatName = "weft.partitioned_checkpoint";
inline constexpr const char* kManifestFile = "manifest.json";
inline constexpr const char* kTrainerStateFile = "trainer_state.json";
inline constexpr const char* kModelIndexFile = "model.safetensors.index.json";
inline constexpr const char* kOptimizerIndexFile = "optimizer.safetensors.index.json";

enum class Kind { kPartial, kFull };
std::string kind_name(Kind k);

// "step-00000042": the directory of the checkpoint of training step 42.
std::string step_dir_name(int64_t step);
// "model-00002-of-00004.safetensors" (i counts from 0; the name from 1).
std::string shard_file_name(const std::string& prefix, int i, int n);

struct Piece {
  std::string file;
  DType dtype = DType::Float32;
  Shape shape;  // the whole tensor's
  int64_t begin = 0, end = 0;
  uint64_t data_begin = 0, data_end = 0;  // data_offsets within the file's data section
  std::string crc32;
};

// name -> its pieces, sorted by begin.
using PieceMap = std::map<std::string, std::vector<Piece>>;

nlohmann::json index_to_json(const PieceMap& pieces, const std::string& format);
// `where` names the file in errors; checks dtypes, shapes, that the pieces tile each tensor and that
// "weight_map" names the file of each whole tensor's piece (Note [checkpoint cross-checks] in consistency.h).
PieceMap index_from_json(const nlohmann::json& j, const std::string& where);

struct FileRecord {
  uint64_t bytes = 0;
  std::string crc32;
  int rank = 0;  // the world rank that wrote it
};

struct Manifest {
  Kind kind = Kind::kPartial;
  int64_t step = 0, epoch = 0, batch = 0;
  nlohmann::json layout;  // world, pp, dp, zero, balance, virtual_stages
  std::map<std::string, FileRecord> files;
  bool has_optimizer = false;
};

// The manifest's bytes (pretty JSON with its own CRC patched in) and back;
// parsing checks the CRC, the format name and version, and the values' ranges
// (Note [checkpoint cross-checks] in consistency.h), naming `where`.
std::string manifest_bytes(const Manifest& m);
Manifest parse_manifest(const std::string& bytes, const std::string& where);

// Piece <-> JSON (for the ranks' descriptions gathered before the commit).
nlohmann::json piece_to_json(const Piece& p);
Piece piece_from_json(const nlohmann::json& j, const std::string& where);

// Note [scheduler JSON]: trainer_state.json's "scheduler" holds an LR
// scheduler's state_dict() (optim/lr_scheduler.h) as a JSON object, each entry
// under its key: an integer 0-dim tensor as an integer ("last_epoch",
// ReduceLROnPlateau's counters), a floating 0-dim tensor as a number, a 1-d
// tensor (one value per param group: "base_lrs", "last_lrs", OneCycleLR's
// "max_lrs", ...) as a list of numbers; a value that is not finite (e.g.
// ReduceLROnPlateau's "best" before its first step) as the string "inf",
// "-inf" or "nan". JSON doubles round-trip exactly. Loaded into an optimizer
// with another number of param groups (another pipeline partition), each list
// must hold one value repeated, which every group gets.
nlohmann::json scheduler_state_to_json(const std::map<std::string, Tensor>& state);
// Whether `j` has that shape, with "last_epoch" an integer and "base_lrs" and
// "last_lrs" lists (the check of check_trainer_state).
bool is_scheduler_state_json(const nlohmann::json& j);
// The state dict for a scheduler over `groups` param groups; errors name `where`.
std::map<std::string, Tensor> scheduler_state_from_json(const nlohmann::json& j, size_t groups,
                                                        const std::string& where);

}  // namespace weft::parallel::checkpoint
