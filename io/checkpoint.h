// Training checkpoints: model, optimizer and LR-scheduler state, RNG state, step
// and epoch in one safetensors file, written atomically and checksummed.
//
// Contract:
// - File layout (a valid safetensors file, readable by other tools): tensors
//   "model.<key>", "optim.<key>", "sched.<key>"; __metadata__ holds strings:
//   weft.format = "checkpoint", weft.version, weft.step, weft.epoch,
//   weft.rng_seed, weft.rng_offset, weft.data_bytes, weft.data_crc32 (zlib CRC32
//   of the data section, 8 hex digits), weft.header_crc32 (CRC32 of the JSON
//   header with this value written as "00000000"), and "user.<key>" for
//   CheckpointContents::metadata.
// - save_checkpoint writes through io::write_atomically (temp file, fsync,
//   rename): an exception or crash during a save leaves the previous checkpoint
//   at `path` intact and no temporary file behind.
// - load_checkpoint verifies before it trusts anything and reports which failure
//   it found, naming the path: "is truncated", "is corrupted: checksum mismatch"
//   (header or data), "is not a weft checkpoint" (no weft metadata), or a format
//   version mismatch. A checkpoint that loads is bit-identical to what was saved.
// - The contents are plain maps, so this layer depends on neither nn nor optim.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"

namespace weft::io {

inline constexpr int kCheckpointVersion = 1;

struct CheckpointContents {
  std::map<std::string, Tensor> model;      // model state dict
  std::map<std::string, Tensor> optimizer;  // optimizer state (0-dim tensors for scalars)
  std::map<std::string, Tensor> scheduler;  // LR-scheduler state
  GeneratorState rng;                       // e.g. get_rng_state()
  int64_t step = 0;
  int64_t epoch = 0;
  std::map<std::string, std::string> metadata;  // free-form strings
};

// The checkpoint file's bytes (format_version is a parameter for tests of
// version handling; leave it at the default).
std::string serialize_checkpoint(const CheckpointContents& contents, int format_version = kCheckpointVersion);
// Parses and verifies checkpoint bytes; `path` names the origin in errors.
CheckpointContents deserialize_checkpoint(const std::string& bytes, const std::string& path);

void save_checkpoint(const std::string& path, const CheckpointContents& contents);
CheckpointContents load_checkpoint(const std::string& path);

// Checks a loaded model state against a model's expected state (names, shapes,
// dtypes; e.g. nn::Module::state_dict().items()). Throws one weft::Error listing
// every missing, unexpected and mismatched key, naming `path`.
void check_model_state(const std::map<std::string, Tensor>& loaded,
                       const std::vector<std::pair<std::string, Tensor>>& expected, const std::string& path);
void check_model_state(const std::map<std::string, Tensor>& loaded, const std::map<std::string, Tensor>& expected,
                       const std::string& path);

namespace detail {
// Fault injection for tests: called after each chunk save_checkpoint writes,
// with the bytes written so far; throwing from it interrupts the save.
void set_checkpoint_write_hook(std::function<void(size_t bytes_written)> hook);
}  // namespace detail

}  // namespace weft::io
