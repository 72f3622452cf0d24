// Cross-checks of a checkpoint's metadata (Note [checkpoint cross-checks] in consistency.h).
#include "parallel/checkpoint/consistency.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "core/error.h"

namespace weft::parallel::checkpoint {

using nlohmann::json;

namespace {

// A JSON value for a message, cut short.
std::string shown(const json& v) {
  std::string s = v.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

const json& field(const json& j, const char* key, const std::string& where) {
  WEFT_CHECK(j.contains(key), where, ": \"", key, "\" is missing");
  return j[key];
}

int64_t integer_at_least(const json& j, const char* key, int64_t least, const std::string& where) {
  const json& v = field(j, key, where);
  WEFT_CHECK(v.is_number_integer(), where, ": \"", key, "\" must be an integer (it is ", shown(v), ")");
  const int64_t n = v.get<int64_t>();
  WEFT_CHECK(n >= least, where, ": \"", key, "\" is ", n, ", but it must be >= ", least);
  return n;
}

std::string describe(DType d, const Shape& s, uint64_t begin, uint64_t end) {
  std::ostringstream os;
  os << d << " " << shape_str(s) << " at data_offsets [" << begin << ", " << end << ")";
  return os.str();
}

}  // namespace

void check_trainer_state(const json& ts, const std::string& where) {
  WEFT_CHECK(ts.is_object(), where, " must hold a JSON object (it holds ", shown(ts), ")");
  for (const char* key : {"step", "epoch", "batch"}) integer_at_least(ts, key, 0, where);
  if (ts.contains("world")) integer_at_least(ts, "world", 1, where);
  const json& rng = field(ts, "rng", where);
  WEFT_CHECK(rng.is_array() && !rng.empty(), where, ": \"rng\" must be a non-empty list of every rank's {seed, offset}",
             " (it is ", shown(rng), ")");
  for (size_t r = 0; r < rng.size(); ++r) {
    const json& e = rng[r];
    WEFT_CHECK(e.is_object() && e.contains("seed") && e["seed"].is_number_unsigned() && e.contains("offset") &&
                   e["offset"].is_number_unsigned(),
               where, ": \"rng\"[", r, "] must be {\"seed\": n, \"offset\": n} with integers >= 0 (it is ", shown(e),
               ")");
  }
  if (ts.contains("metadata")) {
    const json& m = ts["metadata"];
    WEFT_CHECK(m.is_object(), where, ": \"metadata\" must be an object of strings (it is ", shown(m), ")");
    for (auto it = m.begin(); it != m.end(); ++it)
      WEFT_CHECK(it->is_string(), where, ": \"metadata\"[\"", it.key(), "\"] must be a string (it is ", shown(*it),
                 ")");
  }
  if (ts.contains("scheduler") && !ts["scheduler"].is_null()) {
    const json& s = ts["scheduler"];
    WEFT_CHECK(is_scheduler_state_json(s), where,
               ": \"scheduler\" must be null or {\"last_epoch\": integer, \"base_lrs\": [numbers], \"last_lrs\": "
               "[numbers], and the scheduler's own numbers or lists of numbers (\"inf\", \"-inf\" and \"nan\" as "
               "strings)} (it is ",
               shown(s), ")");
  }
}

void check_agreement(const Manifest& m, const json& ts, const std::string& dir) {
  const std::string where = "checkpoint '" + dir + "': ";
  for (const auto& [key, mine] :
       {std::pair<const char*, int64_t>{"step", m.step}, {"epoch", m.epoch}, {"batch", m.batch}}) {
    const int64_t theirs = ts.at(key).get<int64_t>();
    WEFT_CHECK(mine == theirs, where, kManifestFile, " ", key, " ", mine, " disagrees with ", kTrainerStateFile, " ",
               key, " ", theirs);
  }
  int64_t world = m.layout.is_object() && m.layout.contains("world") ? m.layout["world"].get<int64_t>() : 0;
  if (ts.contains("world")) {
    const int64_t theirs = ts["world"].get<int64_t>();
    WEFT_CHECK(world == 0 || world == theirs, where, kManifestFile, " layout.world ", world, " disagrees with ",
               kTrainerStateFile, " world ", theirs);
    world = theirs;
  }
  const int64_t states = static_cast<int64_t>(ts.at("rng").size());
  WEFT_CHECK(world == 0 || states == world, where, kTrainerStateFile, " rng has ", states,
             " entries, but the saving world has ", world, " ranks (one each)");
  // The latest checkpoint is chosen by its directory's name (rotation.h): it must be the manifest's step.
  std::string name = dir;
  while (name.size() > 1 && name.back() == '/') name.pop_back();
  name = std::filesystem::path(name).filename().string();
  if (name.size() > 5 && name.size() <= 5 + 18 && name.rfind("step-", 0) == 0 &&
      std::all_of(name.begin() + 5, name.end(), [](char c) { return c >= '0' && c <= '9'; }))
    WEFT_CHECK(std::stoll(name.substr(5)) == m.step, where, kManifestFile, " step ", m.step,
               " disagrees with the directory name '", name, "'");
}

void check_shard_header(const io::SafetensorsHeader& header, const std::string& file, const PieceMap& index,
                        const std::string& index_name, const std::string& where) {
  for (const auto& [name, pieces] : index) {
    for (const Piece& p : pieces) {
      if (p.file != file) continue;
      auto e = header.entries.find(name);
      WEFT_CHECK(e != header.entries.end(), where, " is corrupted: its header does not hold tensor '", name,
                 "', which ", index_name, " places in it");
      const io::SafetensorsEntry& h = e->second;
      // A piece is stored in the tensor's shape, or 1-d (a ZeRO slice, or a whole tensor held by one rank's slice).
      const bool shape_ok = h.shape == p.shape || h.shape == Shape{p.end - p.begin};
      WEFT_CHECK(h.dtype == p.dtype && shape_ok && h.begin == p.data_begin && h.end == p.data_end, where,
                 " is corrupted: its header holds tensor '", name, "' as ", describe(h.dtype, h.shape, h.begin, h.end),
                 ", but ", index_name, " says ", describe(p.dtype, p.shape, p.data_begin, p.data_end));
    }
  }
}

}  // namespace weft::parallel::checkpoint
