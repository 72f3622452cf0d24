// Cross-checks of a checkpoint's metadata against itself, made when it is
// opened, so that a restart resumes only from a checkpoint whose files agree.
//
// Note [checkpoint cross-checks]: the CRC-32s prove that the bytes are the
// ones the writer wrote, not that the writer (or a hand edit re-signed
// after) wrote sense. A restart trusts the newest committed checkpoint, so
// the loader also refuses, naming the file and the field:
//   manifest.json (format.cc, parse_manifest): step, epoch or batch < 0; a
//     layout whose world, pp, dp or virtual_stages is not a positive
//     integer, whose pp x dp is not its world, whose balance is not a list
//     of layer counts >= 0 for pp x virtual_stages stages, whose zero is not
//     a boolean; a file whose writer's rank is outside that world.
//   the indexes (format.cc, index_from_json): a "weight_map" entry whose
//     file is not the one that holds the tensor's piece, that names a tensor
//     the pieces do not hold or hold in several pieces, or a tensor stored
//     whole that weight_map lacks (Hugging Face tools read weight_map alone).
//   trainer_state.json (check_trainer_state): not JSON (reader.cc), or a
//     field the loader uses missing or of the wrong type or range (step,
//     epoch, batch integers >= 0; world > 0; rng a non-empty list of
//     {seed, offset}; metadata strings; scheduler null or its state).
//   across files (check_agreement): manifest.json's step, epoch or batch
//     other than trainer_state.json's; its layout.world other than
//     trainer_state.json's world; an rng list not of one entry per rank; a
//     step-<N> directory whose manifest says another step.
//   each shard (check_shard_header): its own safetensors header lacking a
//     tensor that an index places in it, or holding it with another dtype,
//     shape or data_offsets (CheckpointReader::verify_headers; load()
//     spreads the shards over the ranks).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "parallel/checkpoint/format.h"

namespace weft::parallel::checkpoint {

// trainer_state.json's fields, each of its type and range; `where` names the file.
void check_trainer_state(const nlohmann::json& ts, const std::string& where);

// manifest.json against trainer_state.json (already checked) and the name of
// the directory `dir` (a step-<N> name must be the manifest's step).
void check_agreement(const Manifest& m, const nlohmann::json& ts, const std::string& dir);

// The header of shard `file` against every piece that `index` (`index_name`
// names it) places in that file; `where` names the shard.
void check_shard_header(const io::SafetensorsHeader& header, const std::string& file, const PieceMap& index,
                        const std::string& index_name, const std::string& where);

}  // namespace weft::parallel::checkpoint
