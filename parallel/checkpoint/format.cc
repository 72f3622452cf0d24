// Index and manifest JSON (Note [checkpoint layout] in format.h).
#include "parallel/checkpoint/format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/error.h"
#include "core/ops.h"
#include "io/crc32.h"
#include "io/safetensors.h"

namespace weft::parallel::checkpoint {

using nlohmann::json;

namespace {

constexpr const char* kManifestCrcKey = "manifest_crc32";
constexpr const char* kPlaceholder = "00000000";

int64_t numel_of(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

template <typename T>
T get(const json& j, const char* key, const std::string& where) {
  WEFT_CHECK(j.is_object() && j.contains(key), where, ": missing \"", key, "\"");
  try {
    return j.at(key).get<T>();
  } catch (const json::exception& e) {
    WEFT_ERROR(where, ": \"", key, "\" has the wrong type (", e.what(), ")");
  }
}

// Note [checkpoint cross-checks] (consistency.h): the saving layout's fields, each of its type and range,
// and pp x dp = world; returns the world (0 when the layout does not say).
int64_t check_layout(const json& l, const std::string& where) {
  WEFT_CHECK(l.is_object(), where, ": \"layout\" must be an object (it is ", l.dump(), ")");
  auto positive = [&](const char* key) -> int64_t {
    if (!l.contains(key)) return 0;
    const json& v = l[key];
    WEFT_CHECK(v.is_number_integer() && v.get<int64_t>() >= 1, where, ": \"layout.", key,
               "\" must be a positive integer (it is ", v.dump(), ")");
    return v.get<int64_t>();
  };
  const int64_t world = positive("world"), pp = positive("pp"), dp = positive("dp"), vs = positive("virtual_stages");
  WEFT_CHECK(world == 0 || pp == 0 || dp == 0 || pp * dp == world, where, ": \"layout\" does not add up: pp ", pp,
             " x dp ", dp, " is ", pp * dp, " ranks, but \"layout.world\" is ", world);
  WEFT_CHECK(!l.contains("zero") || l["zero"].is_boolean(), where, ": \"layout.zero\" must be true or false (it is ",
             l.value("zero", json()).dump(), ")");
  if (l.contains("balance")) {
    const json& b = l["balance"];
    bool ok = b.is_array();
    for (size_t i = 0; ok && i < b.size(); ++i) ok = b[i].is_number_integer() && b[i].get<int64_t>() >= 0;
    WEFT_CHECK(ok, where, ": \"layout.balance\" must be a list of layer counts >= 0 (it is ", b.dump(), ")");
    const int64_t stages = static_cast<int64_t>(b.size());
    if (pp > 0 && vs > 0)
      WEFT_CHECK(stages == 0 || stages == pp * vs, where, ": \"layout.balance\" has ", stages, " stages, but pp ", pp,
                 " x virtual_stages ", vs, " is ", pp * vs);
    else if (pp > 0)
      WEFT_CHECK(stages % pp == 0, where, ": \"layout.balance\" has ", stages, " stages, which pp ", pp,
                 " ranks cannot hold evenly");
  }
  return world;
}

}  // namespace

std::string kind_name(Kind k) { return k == Kind::kFull ? "full" : "partial"; }

std::string step_dir_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step-%08lld", static_cast<long long>(step));
  return buf;
}

std::string shard_file_name(const std::string& prefix, int i, int n) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "-%05d-of-%05d.safetensors", i + 1, n);
  return prefix + buf;
}

json piece_to_json(const Piece& p) {
  return json{{"file", p.file}, {"dtype", io::safetensors_dtype(p.dtype)},    {"shape", p.shape}, {"begin", p.begin},
              {"end", p.end},   {"data_offsets", {p.data_begin, p.data_end}}, {"crc32", p.crc32}};
}

Piece piece_from_json(const json& j, const std::string& where) {
  Piece p;
  p.file = get<std::string>(j, "file", where);
  p.dtype = io::dtype_from_safetensors(get<std::string>(j, "dtype", where), where);
  p.shape = get<Shape>(j, "shape", where);
  p.begin = get<int64_t>(j, "begin", where);
  p.end = get<int64_t>(j, "end", where);
  const auto off = get<std::vector<uint64_t>>(j, "data_offsets", where);
  WEFT_CHECK(off.size() == 2 && off[0] <= off[1], where, ": data_offsets must be [begin, end)");
  p.data_begin = off[0];
  p.data_end = off[1];
  p.crc32 = get<std::string>(j, "crc32", where);
  WEFT_CHECK(p.file.find('/') == std::string::npos && !p.file.empty() && p.file[0] != '.', where, ": file '", p.file,
             "' must be a plain name inside the checkpoint directory");
  WEFT_CHECK(0 <= p.begin && p.begin <= p.end && p.end <= numel_of(p.shape), where, ": elements [", p.begin, ", ",
             p.end, ") are outside a tensor of shape ", shape_str(p.shape));
  WEFT_CHECK(p.data_end - p.data_begin == static_cast<uint64_t>(p.end - p.begin) * element_size(p.dtype), where,
             ": data_offsets [", p.data_begin, ", ", p.data_end, ") do not hold ", p.end - p.begin, " elements of ",
             dtype_name(p.dtype));
  return p;
}

json index_to_json(const PieceMap& pieces, const std::string& format) {
  json weight_map = json::object(), all = json::object();
  uint64_t total = 0;
  for (const auto& [name, list] : pieces) {
    json arr = json::array();
    for (const Piece& p : list) {
      arr.push_back(piece_to_json(p));
      total += p.data_end - p.data_begin;
    }
    all[name] = arr;
    if (list.size() == 1 && list[0].begin == 0 && list[0].end == numel_of(list[0].shape))
      weight_map[name] = list[0].file;
  }
  return json{{"metadata", {{"total_size", total}, {"format", format}, {"weft.version", kFormatVersion}}},
              {"weight_map", weight_map},
              {"weft.pieces", all}};
}

PieceMap index_from_json(const json& j, const std::string& where) {
  WEFT_CHECK(j.is_object() && j.contains("weft.pieces") && j["weft.pieces"].is_object(), where,
             " is not a weft checkpoint index (no \"weft.pieces\" object)");
  PieceMap out;
  for (auto it = j["weft.pieces"].begin(); it != j["weft.pieces"].end(); ++it) {
    const std::string name = it.key(), here = where + ", tensor '" + name + "'";
    WEFT_CHECK(it->is_array() && !it->empty(), here, ": expected a non-empty list of pieces");
    std::vector<Piece> list;
    for (const json& pj : *it) list.push_back(piece_from_json(pj, here));
    std::sort(list.begin(), list.end(), [](const Piece& a, const Piece& b) { return a.begin < b.begin; });
    int64_t pos = 0;
    for (const Piece& p : list) {
      WEFT_CHECK(p.dtype == list[0].dtype && p.shape == list[0].shape, here, ": its pieces disagree on dtype or shape");
      WEFT_CHECK(p.begin == pos, here, ": ", p.begin < pos ? "pieces overlap" : "no piece holds", " elements [",
                 std::min(pos, p.begin), ", ", std::max(pos, p.begin), ")");
      pos = p.end;
    }
    WEFT_CHECK(pos == numel_of(list[0].shape), here, ": no piece holds elements [", pos, ", ", numel_of(list[0].shape),
               ")");
    out[name] = std::move(list);
  }
  // Note [checkpoint cross-checks] (consistency.h): Hugging Face tools find a tensor's file by "weight_map"
  // alone, so it must name, for every tensor stored whole, the file of its one piece, and nothing else.
  WEFT_CHECK(j.contains("weight_map") && j["weight_map"].is_object(), where,
             ": \"weight_map\" must be an object of tensor names to file names");
  const json& weight_map = j["weight_map"];
  for (auto it = weight_map.begin(); it != weight_map.end(); ++it) {
    const std::string field = "weight_map[\"" + it.key() + "\"]";
    WEFT_CHECK(it->is_string(), where, ": ", field, " must be a file name (it is ", it->dump(), ")");
    const std::string file = it->get<std::string>();
    auto p = out.find(it.key());
    WEFT_CHECK(p != out.end(), where, ": ", field, " is '", file,
               "', but \"weft.pieces\" holds no tensor of that name");
    WEFT_CHECK(p->second.size() == 1, where, ": ", field, " is '", file, "', but the tensor is stored in ",
               p->second.size(), " pieces (a reader of weight_map would take one file for all of it)");
    WEFT_CHECK(p->second[0].file == file, where, ": ", field, " is '", file, "', but the tensor's piece is in '",
               p->second[0].file, "'");
  }
  for (const auto& [name, list] : out)
    WEFT_CHECK(list.size() != 1 || weight_map.contains(name), where, ": weight_map has no entry for tensor '", name,
               "', stored whole in '", list[0].file, "'");
  return out;
}

std::string manifest_bytes(const Manifest& m) {
  json files = json::object();
  for (const auto& [name, r] : m.files) files[name] = {{"bytes", r.bytes}, {"crc32", r.crc32}, {"rank", r.rank}};
  json j{{"format", kFormatName},
         {"version", kFormatVersion},
         {"kind", kind_name(m.kind)},
         {"step", m.step},
         {"epoch", m.epoch},
         {"batch", m.batch},
         {"layout", m.layout},
         {"optimizer", m.has_optimizer},
         {"files", files},
         {kManifestCrcKey, kPlaceholder}};
  std::string text = j.dump(2) + "\n";
  const std::string needle = std::string("\"") + kManifestCrcKey + "\": \"";
  const size_t pos = text.find(needle);
  WEFT_INTERNAL_ASSERT(pos != std::string::npos, "manifest checksum placeholder");
  text.replace(pos + needle.size(), 8, io::crc32_hex(io::crc32(text)));
  return text;
}

Manifest parse_manifest(const std::string& bytes, const std::string& where) {
  const std::string needle = std::string("\"") + kManifestCrcKey + "\": \"";
  const size_t pos = bytes.find(needle);
  WEFT_CHECK(pos != std::string::npos && pos + needle.size() + 8 <= bytes.size(), where,
             " is corrupted: it has no manifest_crc32");
  std::string copy = bytes;
  const std::string stored = bytes.substr(pos + needle.size(), 8);
  copy.replace(pos + needle.size(), 8, kPlaceholder);
  const std::string computed = io::crc32_hex(io::crc32(copy));
  WEFT_CHECK(stored == computed, where, " is corrupted: checksum mismatch (stored crc32 ", stored, ", computed ",
             computed, ")");
  json j;
  try {
    j = json::parse(bytes);
  } catch (const json::exception& e) {
    WEFT_ERROR(where, " is corrupted: not valid JSON (", e.what(), ")");
  }
  WEFT_CHECK(j.is_object() && j.value("format", "") == kFormatName, where, " is not a weft checkpoint manifest");
  const int version = get<int>(j, "version", where);
  WEFT_CHECK(version == kFormatVersion, where, " has format version ", version, " but this weft reads version ",
             kFormatVersion);
  Manifest m;
  const std::string kind = get<std::string>(j, "kind", where);
  WEFT_CHECK(kind == "partial" || kind == "full", where, ": unknown kind '", kind, "'");
  m.kind = kind == "full" ? Kind::kFull : Kind::kPartial;
  m.step = get<int64_t>(j, "step", where);
  m.epoch = get<int64_t>(j, "epoch", where);
  m.batch = get<int64_t>(j, "batch", where);
  // Note [checkpoint cross-checks] (consistency.h): values that no save writes.
  for (const auto& [key, v] : {std::pair<const char*, int64_t>{"step", m.step}, {"epoch", m.epoch}, {"batch", m.batch}})
    WEFT_CHECK(v >= 0, where, ": \"", key, "\" is ", v, ", but it must be >= 0");
  m.layout = j.value("layout", json::object());
  const int64_t world = check_layout(m.layout, where);
  m.has_optimizer = get<bool>(j, "optimizer", where);
  const json files = get<json>(j, "files", where);
  WEFT_CHECK(files.is_object(), where, ": \"files\" must be an object");
  for (auto it = files.begin(); it != files.end(); ++it) {
    const std::string here = where + ", file '" + it.key() + "'";
    WEFT_CHECK(it.key().find('/') == std::string::npos && !it.key().empty(), here,
               ": must be a plain name inside the checkpoint directory");
    m.files[it.key()] = FileRecord{get<uint64_t>(*it, "bytes", here), get<std::string>(*it, "crc32", here),
                                   get<int>(*it, "rank", here)};
    const int rank = m.files[it.key()].rank;
    WEFT_CHECK(rank >= 0 && (world == 0 || rank < world), here, ": \"rank\" ", rank,
               " is not a rank of the saving world (\"layout.world\" ", world, ")");
  }
  return m;
}

// ---- Note [scheduler JSON] ----

namespace {

json scheduler_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

bool is_scheduler_number(const json& v) {
  return v.is_number() || (v.is_string() && (v == "inf" || v == "-inf" || v == "nan"));
}

double scheduler_number_from(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (v == "nan") return std::numeric_limits<double>::quiet_NaN();
  return v == "inf" ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
}

bool is_scheduler_list(const json& v) {
  return v.is_array() && std::all_of(v.begin(), v.end(), [](const json& x) { return is_scheduler_number(x); });
}

}  // namespace

json scheduler_state_to_json(const std::map<std::string, Tensor>& state) {
  json j = json::object();
  for (const auto& [key, t] : state) {
    WEFT_CHECK(t.dim() <= 1, "checkpoint save: LR scheduler state '", key, "' has shape ", shape_str(t.sizes()),
               ", but only one value or one per param group can be saved");
    if (t.dim() == 0 && !t.is_floating_point()) {
      j[key] = t.item<int64_t>();
    } else if (t.dim() == 0) {
      j[key] = scheduler_number(t.item<double>());
    } else {
      Tensor c = t.to(DType::Float64).contiguous();
      json list = json::array();
      for (int64_t i = 0; i < c.numel(); ++i) list.push_back(scheduler_number(c.data_ptr<double>()[i]));
      j[key] = std::move(list);
    }
  }
  return j;
}

bool is_scheduler_state_json(const json& j) {
  if (!j.is_object() || !j.contains("last_epoch") || !j["last_epoch"].is_number_integer() || !j.contains("base_lrs") ||
      !j["base_lrs"].is_array() || !j.contains("last_lrs") || !j["last_lrs"].is_array())
    return false;
  return std::all_of(j.begin(), j.end(), [](const json& v) { return is_scheduler_number(v) || is_scheduler_list(v); });
}

std::map<std::string, Tensor> scheduler_state_from_json(const json& j, size_t groups, const std::string& where) {
  WEFT_CHECK(is_scheduler_state_json(j), where, ": the LR schedule's state is not one of a scheduler (",
             "Note [scheduler JSON]): ", j.dump().substr(0, 60));
  std::map<std::string, Tensor> sd;
  const int64_t n = static_cast<int64_t>(groups);
  for (auto it = j.begin(); it != j.end(); ++it) {
    const json& v = it.value();
    if (v.is_number_integer()) {
      sd[it.key()] = scalar_tensor(v.get<int64_t>(), TensorOptions{DType::Int64});
    } else if (!v.is_array()) {
      sd[it.key()] = scalar_tensor(scheduler_number_from(v), TensorOptions{DType::Float64});
    } else {
      std::vector<double> xs;
      for (const json& x : v) xs.push_back(scheduler_number_from(x));
      if (xs.size() != groups) {
        const bool uniform = !xs.empty() && std::all_of(xs.begin(), xs.end(), [&](double x) { return x == xs[0]; });
        const bool lrs = it.key() == "base_lrs" || it.key() == "last_lrs";
        WEFT_CHECK(uniform, where, ": the LR schedule was saved with ", xs.size(), " parameter groups of different ",
                   lrs ? std::string("learning rates") : "'" + it.key() + "' values", ", but this optimizer has ",
                   groups, " groups");
        xs.assign(groups, xs[0]);
      }
      sd[it.key()] = tensor<double>(xs, {n});
    }
  }
  return sd;
}

}  // namespace weft::parallel::checkpoint
