// Reading a committed checkpoint (Note [checkpoint layout] in format.h):
// verified before it is trusted, and only the bytes a caller asks for.
//
// Contract:
// - CheckpointReader(path): `path` is a checkpoint directory, or a root
//   holding step-* checkpoints (the latest committed one is taken;
//   rotation.h). It reads manifest.json (its CRC-32 checked), checks that
//   every file it lists exists with the listed size (stat only), then reads
//   the indexes and trainer_state.json (small; CRC-32 checked) and
//   cross-checks them (Note [checkpoint cross-checks] in consistency.h).
//   Refusals name the file: "has no manifest.json (the save did not
//   commit)", "shard '<dir>/<file>' is missing", "is truncated: it has N of
//   M bytes", "is corrupted: checksum mismatch", "is longer than the
//   manifest says", "is not valid JSON: <the parser's message>", and the
//   field: "manifest.json step 12 disagrees with trainer_state.json step 10".
// - verify_headers(part, parts) reads the header of every shard file the
//   indexes name whose position (in name order) is `part` mod `parts` (ranks
//   share the work: load() gives rank r of W part r of W) and checks it
//   against every piece the indexes place in that file ("is corrupted: its
//   header does not hold tensor '<name>', which <index> places in it").
// - read(...) and read_elements(...) read a tensor, or elements [b, e) of
//   its flattened values, from the pieces that hold them: the file's
//   header (two small reads, cached per file, verify_headers' too; its
//   entry must agree with the index) and each overlapping piece's bytes, whose CRC-32 is checked
//   (a piece is read whole to check it, never more). bytes_read() counts
//   every byte read from shard files (headers included), for tests of
//   "a rank reads only what it needs".
// - verify_all() reads every file and checks its CRC-32 against the
//   manifest (an offline check; loading does not need it).
// - Not thread-safe.
// - read_manifest(dir) and read_listed_file(dir, manifest, name): one file
//   the manifest lists (an extra file, snapshot.h, in no index), read whole
//   without opening the rest of the checkpoint and checked against its
//   record: "'<dir>/<name>' is not in <dir>/manifest.json", "is missing",
//   "is truncated: it has N of M bytes", "is corrupted: it has N bytes, more
//   than the manifest's M", "is corrupted: checksum mismatch".
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "parallel/checkpoint/format.h"

namespace weft::parallel::checkpoint {

class CheckpointReader {
 public:
  explicit CheckpointReader(const std::string& path);

  const std::string& dir() const { return dir_; }
  const Manifest& manifest() const { return manifest_; }
  const nlohmann::json& trainer_state() const { return trainer_state_; }
  const PieceMap& model() const { return model_; }
  const PieceMap& optimizer() const { return optimizer_; }
  bool has_optimizer() const { return manifest_.has_optimizer; }

  // `pieces` is an entry of model() or optimizer(); `name` names it in errors.
  Tensor read(const std::string& name, const std::vector<Piece>& pieces);
  Tensor read_elements(const std::string& name, const std::vector<Piece>& pieces, int64_t begin, int64_t end);
  uint64_t bytes_read() const { return bytes_read_; }

  void verify_all();
  void verify_headers(int part = 0, int parts = 1);

 private:
  std::string file_path(const std::string& file) const { return dir_ + "/" + file; }
  std::string read_meta_file(const std::string& name);
  const io::SafetensorsHeader& header(const std::string& file);  // read once, counted in bytes_read_
  Tensor read_piece(const std::string& name, const Piece& p);

  std::string dir_;
  Manifest manifest_;
  nlohmann::json trainer_state_;
  PieceMap model_, optimizer_;
  std::set<std::string> shards_;  // the files the indexes' pieces are in
  std::map<std::string, io::SafetensorsHeader> headers_;
  uint64_t bytes_read_ = 0;
};

// `dir` is a checkpoint directory (with manifest.json; its CRC-32 checked).
Manifest read_manifest(const std::string& dir);
std::string read_listed_file(const std::string& dir, const Manifest& manifest, const std::string& name);

}  // namespace weft::parallel::checkpoint
