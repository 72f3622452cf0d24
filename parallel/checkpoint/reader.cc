// Reading a committed checkpoint (contract in reader.h).
#include "parallel/checkpoint/reader.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include <sys/stat.h>

#include "core/error.h"
#include "core/ops.h"
#include "io/atomic_file.h"
#include "io/crc32.h"
#include "parallel/checkpoint/consistency.h"
#include "parallel/checkpoint/rotation.h"

namespace weft::parallel::checkpoint {

using nlohmann::json;
namespace fs = std::filesystem;

CheckpointReader::CheckpointReader(const std::string& path) {
  std::error_code ec;
  WEFT_CHECK(fs::exists(path, ec), "checkpoint '", path, "' does not exist");
  if (fs::is_regular_file(fs::path(path) / kManifestFile, ec)) {
    dir_ = path;
  } else {
    dir_ = latest_checkpoint(path);
    if (dir_.empty()) {
      // A checkpoint directory whose save never committed, or a root with none.
      const bool looks_like_one = fs::exists(fs::path(path) / kModelIndexFile, ec) ||
                                  fs::exists(fs::path(path) / kTrainerStateFile, ec) ||
                                  fs::path(path).filename().string().rfind("step-", 0) == 0;
      WEFT_CHECK(!looks_like_one, "checkpoint '", path, "' has no ", kManifestFile,
                 ": the save did not commit (interrupted or incomplete), so it is not loaded");
      WEFT_ERROR("'", path, "' holds no committed checkpoint (no step-*/", kManifestFile, ")");
    }
  }
  const std::string where = "checkpoint '" + dir_ + "'";
  const std::string mpath = dir_ + "/" + kManifestFile;
  manifest_ = parse_manifest(io::read_file(mpath), "manifest '" + mpath + "'");
  for (const auto& [name, rec] : manifest_.files) {
    const std::string p = file_path(name);
    struct stat st {};
    WEFT_CHECK(::stat(p.c_str(), &st) == 0, where, ": shard '", p, "' is missing (the manifest lists it with ",
               rec.bytes, " bytes)");
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    WEFT_CHECK(size >= rec.bytes, where, ": shard '", p, "' is truncated: it has ", size, " of ", rec.bytes, " bytes");
    WEFT_CHECK(size == rec.bytes, where, ": shard '", p, "' is corrupted: it has ", size,
               " bytes, more than the manifest's ", rec.bytes);
  }
  // Note [checkpoint cross-checks] (consistency.h): each file against itself, then against the others.
  trainer_state_ = json::parse(read_meta_file(kTrainerStateFile));
  check_trainer_state(trainer_state_, where + ": '" + file_path(kTrainerStateFile) + "'");
  check_agreement(manifest_, trainer_state_, dir_);
  model_ = index_from_json(json::parse(read_meta_file(kModelIndexFile)), "'" + file_path(kModelIndexFile) + "'");
  if (manifest_.has_optimizer)
    optimizer_ =
        index_from_json(json::parse(read_meta_file(kOptimizerIndexFile)), "'" + file_path(kOptimizerIndexFile) + "'");
  for (const PieceMap* pm : {&model_, &optimizer_})
    for (const auto& [name, list] : *pm)
      for (const Piece& p : list) {
        WEFT_CHECK(manifest_.files.count(p.file), where, ": tensor '", name, "' is in '", p.file,
                   "', which the manifest does not list");
        shards_.insert(p.file);
      }
}

const io::SafetensorsHeader& CheckpointReader::header(const std::string& file) {
  auto h = headers_.find(file);
  if (h != headers_.end()) return h->second;
  const std::string path = file_path(file);
  io::SafetensorsHeader header;
  try {
    header = io::read_safetensors_header(path);
  } catch (const Error& e) {
    WEFT_ERROR("checkpoint '", dir_, "': shard '", path, "' is corrupted: ", e.message());
  }
  bytes_read_ += header.data_start;
  return headers_.emplace(file, std::move(header)).first->second;
}

void CheckpointReader::verify_headers(int part, int parts) {
  WEFT_CHECK(parts >= 1 && 0 <= part && part < parts, "verify_headers: part ", part, " of ", parts);
  int i = 0;
  for (const std::string& file : shards_) {
    if (i++ % parts != part) continue;
    const io::SafetensorsHeader& h = header(file);
    const std::string where = "checkpoint '" + dir_ + "': shard '" + file_path(file) + "'";
    check_shard_header(h, file, model_, kModelIndexFile, where);
    check_shard_header(h, file, optimizer_, kOptimizerIndexFile, where);
  }
}

std::string CheckpointReader::read_meta_file(const std::string& name) {
  auto it = manifest_.files.find(name);
  WEFT_CHECK(it != manifest_.files.end(), "checkpoint '", dir_, "': the manifest does not list ", name);
  const std::string bytes = io::read_file(file_path(name));
  const std::string crc = io::crc32_hex(io::crc32(bytes));
  WEFT_CHECK(crc == it->second.crc32, "checkpoint '", dir_, "': '", file_path(name),
             "' is corrupted: checksum mismatch (manifest crc32 ", it->second.crc32, ", computed ", crc, ")");
  try {
    [[maybe_unused]] const json parsed = json::parse(bytes);  // only whether it parses
  } catch (const json::exception& e) {
    WEFT_ERROR("checkpoint '", dir_, "': '", file_path(name), "' is not valid JSON: ", e.what());
  }
  return bytes;
}

Tensor CheckpointReader::read_piece(const std::string& name, const Piece& p) {
  const std::string path = file_path(p.file);
  const std::string where = "checkpoint '" + dir_ + "': shard '" + path + "'";
  const io::SafetensorsHeader& h = header(p.file);
  auto e = h.entries.find(name);
  WEFT_CHECK(e != h.entries.end() && e->second.dtype == p.dtype && e->second.begin == p.data_begin &&
                 e->second.end == p.data_end,
             where, " is corrupted: its header does not hold tensor '", name, "' where the index says");
  const std::string bytes = io::read_file_range(path, h.data_start + p.data_begin, p.data_end - p.data_begin);
  bytes_read_ += bytes.size();
  const std::string crc = io::crc32_hex(io::crc32(bytes));
  WEFT_CHECK(crc == p.crc32, where, " is corrupted: checksum mismatch in tensor '", name, "' (index crc32 ", p.crc32,
             ", computed ", crc, ")");
  Tensor t = empty({p.end - p.begin}, TensorOptions{p.dtype});  // (end - begin,)
  if (!bytes.empty()) std::memcpy(t.raw_data(), bytes.data(), bytes.size());
  return t;
}

Tensor CheckpointReader::read_elements(const std::string& name, const std::vector<Piece>& pieces, int64_t begin,
                                       int64_t end) {
  WEFT_CHECK(!pieces.empty(), "checkpoint '", dir_, "': tensor '", name, "' has no pieces");
  Tensor out = empty({end - begin}, TensorOptions{pieces[0].dtype});  // (end - begin,)
  for (const Piece& p : pieces) {
    const int64_t a = std::max(begin, p.begin), b = std::min(end, p.end);
    if (a >= b) continue;
    Tensor t = read_piece(name, p);
    out.narrow(0, a - begin, b - a).copy_(t.narrow(0, a - p.begin, b - a));
  }
  return out;
}

Tensor CheckpointReader::read(const std::string& name, const std::vector<Piece>& pieces) {
  WEFT_CHECK(!pieces.empty(), "checkpoint '", dir_, "': tensor '", name, "' has no pieces");
  int64_t n = 1;
  for (int64_t d : pieces[0].shape) n *= d;
  return read_elements(name, pieces, 0, n).view(pieces[0].shape);
}

void CheckpointReader::verify_all() {
  for (const auto& [name, rec] : manifest_.files) {
    const std::string bytes = io::read_file(file_path(name));
    const std::string crc = io::crc32_hex(io::crc32(bytes));
    WEFT_CHECK(crc == rec.crc32, "checkpoint '", dir_, "': shard '", file_path(name),
               "' is corrupted: checksum mismatch (manifest crc32 ", rec.crc32, ", computed ", crc, ")");
  }
}

Manifest read_manifest(const std::string& dir) {
  const std::string mpath = dir + "/" + kManifestFile;
  std::error_code ec;
  WEFT_CHECK(fs::is_regular_file(mpath, ec), "checkpoint '", dir, "' has no ", kManifestFile);
  return parse_manifest(io::read_file(mpath), "manifest '" + mpath + "'");
}

std::string read_listed_file(const std::string& dir, const Manifest& manifest, const std::string& name) {
  const std::string p = dir + "/" + name;
  auto it = manifest.files.find(name);
  WEFT_CHECK(it != manifest.files.end(), "'", p, "' is not in ", dir, "/", kManifestFile);
  const FileRecord& rec = it->second;
  struct stat st {};
  WEFT_CHECK(::stat(p.c_str(), &st) == 0, "'", p, "' is missing (the manifest lists it with ", rec.bytes, " bytes)");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  WEFT_CHECK(size >= rec.bytes, "'", p, "' is truncated: it has ", size, " of ", rec.bytes, " bytes");
  WEFT_CHECK(size == rec.bytes, "'", p, "' is corrupted: it has ", size, " bytes, more than the manifest's ",
             rec.bytes);
  std::string bytes = io::read_file(p);
  const std::string crc = io::crc32_hex(io::crc32(bytes));
  WEFT_CHECK(crc == rec.crc32, "'", p, "' is corrupted: checksum mismatch (manifest crc32 ", rec.crc32, ", computed ",
             crc, ")");
  return bytes;
}

}  // namespace weft::parallel::checkpoint
