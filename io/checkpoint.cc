// Checkpoint save/load with checksums (io/checkpoint.h).
//
// Note [checkpoint checksums]: the file is serialised once with fixed-width
// placeholders ("00000000") for weft.data_crc32 and weft.header_crc32. The data
// CRC is computed over the data section and patched into the header text; then
// the header CRC is computed over the header text (its own value still
// "00000000") and patched in. Patching keeps every length, so offsets stay valid.
// Loading reverses this: it finds the header CRC text, zeroes it in a copy, and
// compares, before parsing anything else.
#include "io/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/ops.h"
#include "io/atomic_file.h"
#include "io/crc32.h"
#include "io/safetensors.h"

namespace weft::io {
namespace {

constexpr const char* kHeaderCrcKey = "weft.header_crc32";
constexpr const char* kDataCrcKey = "weft.data_crc32";
constexpr const char* kPlaceholder = "00000000";

struct Prefix {
  const char* prefix;
  std::map<std::string, Tensor> CheckpointContents::*member;
};
const Prefix kPrefixes[] = {{"model.", &CheckpointContents::model},
                            {"optim.", &CheckpointContents::optimizer},
                            {"sched.", &CheckpointContents::scheduler}};

// Position of the 8-character value of `key` in the header text, or npos.
size_t find_value(const std::string& bytes, size_t header_end, const std::string& key) {
  const std::string needle = "\"" + key + "\":\"";
  size_t pos = bytes.find(needle, 8);
  if (pos == std::string::npos || pos + needle.size() + 8 > header_end) return std::string::npos;
  return pos + needle.size();
}

std::mutex g_hook_mu;
std::function<void(size_t)> g_write_hook;

int64_t parse_int(const std::map<std::string, std::string>& meta, const std::string& key, const std::string& where) {
  auto it = meta.find(key);
  WEFT_CHECK(it != meta.end(), where, " has no '", key, "' entry in its metadata");
  const std::string& s = it->second;
  size_t used = 0;
  long long v = 0;
  bool ok = !s.empty();
  try {
    v = std::stoll(s, &used);
  } catch (const std::exception&) {
    ok = false;
  }
  WEFT_CHECK(ok && used == s.size(), where, ": metadata '", key, "' = '", s, "' is not an integer");
  return static_cast<int64_t>(v);
}

uint64_t parse_u64(const std::map<std::string, std::string>& meta, const std::string& key, const std::string& where) {
  auto it = meta.find(key);
  WEFT_CHECK(it != meta.end(), where, " has no '", key, "' entry in its metadata");
  const std::string& s = it->second;
  size_t used = 0;
  unsigned long long v = 0;
  bool ok = !s.empty() && s[0] != '-';
  try {
    v = std::stoull(s, &used);
  } catch (const std::exception&) {
    ok = false;
  }
  WEFT_CHECK(ok && used == s.size(), where, ": metadata '", key, "' = '", s, "' is not an unsigned integer");
  return static_cast<uint64_t>(v);
}

}  // namespace

namespace detail {
void set_checkpoint_write_hook(std::function<void(size_t)> hook) {
  std::lock_guard<std::mutex> lock(g_hook_mu);
  g_write_hook = std::move(hook);
}
}  // namespace detail

std::string serialize_checkpoint(const CheckpointContents& c, int format_version) {
  std::map<std::string, Tensor> tensors;
  uint64_t data_bytes = 0;
  for (const Prefix& p : kPrefixes)
    for (const auto& [key, t] : c.*(p.member)) {
      WEFT_CHECK(t.defined(), "save_checkpoint: ", p.prefix, key, " is an undefined tensor");
      tensors[p.prefix + key] = t;
      data_bytes += t.nbytes();
    }
  std::map<std::string, std::string> meta;
  for (const auto& [k, v] : c.metadata) meta["user." + k] = v;
  meta["weft.format"] = "checkpoint";
  meta["weft.version"] = std::to_string(format_version);
  meta["weft.step"] = std::to_string(c.step);
  meta["weft.epoch"] = std::to_string(c.epoch);
  meta["weft.rng_seed"] = std::to_string(c.rng.seed);
  meta["weft.rng_offset"] = std::to_string(c.rng.offset);
  meta["weft.data_bytes"] = std::to_string(data_bytes);
  meta[kDataCrcKey] = kPlaceholder;
  meta[kHeaderCrcKey] = kPlaceholder;
  std::string bytes = safetensors_serialize(tensors, meta);
  uint64_t hl = 0;
  for (int i = 0; i < 8; ++i) hl |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  const size_t header_end = 8 + hl;
  WEFT_INTERNAL_ASSERT(bytes.size() - header_end == data_bytes, "data section size");
  const size_t dpos = find_value(bytes, header_end, kDataCrcKey);
  const size_t hpos = find_value(bytes, header_end, kHeaderCrcKey);
  WEFT_INTERNAL_ASSERT(dpos != std::string::npos && hpos != std::string::npos, "checksum placeholders not found");
  bytes.replace(dpos, 8, crc32_hex(io::crc32(bytes.data() + header_end, data_bytes)));
  bytes.replace(hpos, 8, crc32_hex(io::crc32(bytes.data() + 8, hl)));
  return bytes;
}

CheckpointContents deserialize_checkpoint(const std::string& bytes, const std::string& path) {
  const std::string where = "checkpoint '" + path + "'";
  WEFT_CHECK(bytes.size() >= 8, where, " is truncated: it has only ", bytes.size(),
             " bytes, less than the 8-byte header length");
  uint64_t hl = 0;
  for (int i = 0; i < 8; ++i) hl |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  WEFT_CHECK(hl <= (100u << 20), where, " is corrupted or not a checkpoint: its header length ", hl,
             " is larger than the 100 MB limit");
  WEFT_CHECK(hl <= bytes.size() - 8, where, " is truncated: its header needs ", hl, " bytes but only ",
             bytes.size() - 8, " follow the header length");
  const size_t header_end = 8 + hl;
  const size_t hpos = find_value(bytes, header_end, kHeaderCrcKey);
  if (hpos == std::string::npos) {
    // No checksum: either a foreign file or a header damaged where the checksum lives.
    nlohmann::json header;
    try {
      header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + static_cast<int64_t>(header_end));
    } catch (const nlohmann::json::exception&) {
      WEFT_ERROR(where, " is corrupted or not a weft checkpoint: its header is not valid JSON");
    }
    const bool weft = header.is_object() && header.contains("__metadata__") && header["__metadata__"].is_object() &&
                      header["__metadata__"].contains("weft.format");
    WEFT_CHECK(!weft, where, " is corrupted: its header checksum (", kHeaderCrcKey, ") is missing or damaged");
    WEFT_ERROR(where,
               " is not a weft checkpoint: its safetensors header has no weft metadata (weft.format); "
               "use io::load_safetensors for plain tensor files");
  }
  {
    const std::string stored = bytes.substr(hpos, 8);
    std::string copy = bytes.substr(8, hl);
    copy.replace(hpos - 8, 8, kPlaceholder);
    const std::string computed = crc32_hex(io::crc32(copy.data(), copy.size()));
    WEFT_CHECK(stored == computed, where, " is corrupted: checksum mismatch in the header (stored crc32 ", stored,
               ", computed ", computed, ")");
  }
  // the checksum matched, but a writer other than weft may have sealed text that is not JSON
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + static_cast<int64_t>(header_end));
  } catch (const nlohmann::json::exception& e) {
    WEFT_ERROR(where, " is corrupted: its header matches its checksum but is not valid JSON: ", e.what());
  }
  std::map<std::string, std::string> meta;
  if (header.contains("__metadata__") && header["__metadata__"].is_object())
    for (auto it = header["__metadata__"].begin(); it != header["__metadata__"].end(); ++it)
      if (it->is_string()) meta[it.key()] = it->get<std::string>();
  auto fmt = meta.find("weft.format");
  WEFT_CHECK(fmt != meta.end() && fmt->second == "checkpoint", where,
             " is not a weft checkpoint: weft.format is missing or not 'checkpoint'");
  const int64_t version = parse_int(meta, "weft.version", where);
  WEFT_CHECK(version == kCheckpointVersion, where, " has format version ", version, " but this weft reads version ",
             kCheckpointVersion, " (version mismatch)");
  const uint64_t expected_data = parse_u64(meta, "weft.data_bytes", where);
  const uint64_t actual_data = bytes.size() - header_end;
  WEFT_CHECK(actual_data >= expected_data, where, " is truncated: its data section has ", actual_data, " of ",
             expected_data, " bytes");
  WEFT_CHECK(actual_data == expected_data, where, " is corrupted: ", actual_data - expected_data,
             " unexpected bytes follow the data section");
  {
    auto it = meta.find(kDataCrcKey);
    WEFT_CHECK(it != meta.end(), where, " is corrupted: it has no data checksum (", kDataCrcKey, ")");
    const std::string computed = crc32_hex(io::crc32(bytes.data() + header_end, actual_data));
    WEFT_CHECK(it->second == computed, where, " is corrupted: checksum mismatch in the data section (stored crc32 ",
               it->second, ", computed ", computed, ")");
  }
  SafetensorsFile file = safetensors_deserialize(bytes, where);
  CheckpointContents c;
  for (auto& [name, t] : file.tensors) {
    bool placed = false;
    for (const Prefix& p : kPrefixes) {
      const std::string pre = p.prefix;
      if (name.compare(0, pre.size(), pre) == 0) {
        (c.*(p.member))[name.substr(pre.size())] = t;
        placed = true;
        break;
      }
    }
    WEFT_CHECK(placed, where, ": tensor '", name, "' has none of the prefixes model., optim., sched.");
  }
  for (const auto& [k, v] : meta)
    if (k.compare(0, 5, "user.") == 0) c.metadata[k.substr(5)] = v;
  c.step = parse_int(meta, "weft.step", where);
  c.epoch = parse_int(meta, "weft.epoch", where);
  c.rng.seed = parse_u64(meta, "weft.rng_seed", where);
  c.rng.offset = parse_u64(meta, "weft.rng_offset", where);
  WEFT_CHECK(c.rng.offset % 4 == 0, where, ": weft.rng_offset ", c.rng.offset, " is not a multiple of 4");
  return c;
}

void save_checkpoint(const std::string& path, const CheckpointContents& contents) {
  std::function<void(size_t)> hook;
  {
    std::lock_guard<std::mutex> lock(g_hook_mu);
    hook = g_write_hook;
  }
  write_atomically(path, [&](std::ostream& os) {
    const std::string bytes = serialize_checkpoint(contents);
    constexpr size_t kChunk = 1 << 20;
    for (size_t pos = 0; pos < bytes.size(); pos += kChunk) {
      const size_t n = std::min(kChunk, bytes.size() - pos);
      os.write(bytes.data() + pos, static_cast<std::streamsize>(n));
      WEFT_CHECK(os.good(), "save_checkpoint: writing '", path, "' failed after ", pos, " bytes (disk full?)");
      if (hook) {
        os.flush();
        hook(pos + n);
      }
    }
  });
}

CheckpointContents load_checkpoint(const std::string& path) { return deserialize_checkpoint(read_file(path), path); }

void check_model_state(const std::map<std::string, Tensor>& loaded,
                       const std::vector<std::pair<std::string, Tensor>>& expected, const std::string& path) {
  std::vector<std::string> missing, unexpected, mismatched;
  std::map<std::string, const Tensor*> want;
  for (const auto& [k, t] : expected) want[k] = &t;
  for (const auto& [k, t] : expected) {
    auto it = loaded.find(k);
    if (it == loaded.end()) {
      missing.push_back(k);
      continue;
    }
    const Tensor& got = it->second;
    if (got.sizes() != t.sizes() || got.dtype() != t.dtype()) {
      std::ostringstream os;
      os << k << ": checkpoint " << shape_str(got.sizes()) << " " << got.dtype() << " vs model " << shape_str(t.sizes())
         << " " << t.dtype();
      mismatched.push_back(os.str());
    }
  }
  for (const auto& [k, t] : loaded)
    if (!want.count(k)) unexpected.push_back(k);
  if (missing.empty() && unexpected.empty() && mismatched.empty()) return;
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
    return s;
  };
  std::ostringstream msg;
  msg << "checkpoint '" << path << "' does not match the model:";
  if (!missing.empty()) msg << " missing keys [" << join(missing) << "];";
  if (!unexpected.empty()) msg << " unexpected keys [" << join(unexpected) << "];";
  if (!mismatched.empty()) msg << " mismatched keys [" << join(mismatched) << "];";
  WEFT_ERROR(msg.str());
}

void check_model_state(const std::map<std::string, Tensor>& loaded, const std::map<std::string, Tensor>& expected,
                       const std::string& path) {
  check_model_state(loaded, std::vector<std::pair<std::string, Tensor>>(expected.begin(), expected.end()), path);
}

}  // namespace weft::io
