// Editing a committed checkpoint's file and re-signing it, as a buggy writer
// or a hand edit would leave it: the file's size and CRC-32 in manifest.json
// and the manifest's own CRC-32 made to agree with the new bytes, so that
// what a test sees refused is the edit itself, not a checksum (Note
// [checkpoint cross-checks] in parallel/checkpoint/consistency.h).
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "io/crc32.h"

namespace weft::parallel::checkpoint::tamper {

// manifest.json's text with its own CRC-32 recomputed over whatever the text
// now is (as manifest_bytes writes it: "manifest_crc32" is "00000000" while
// computing); unchanged when the key is gone (a damaged manifest).
inline std::string reseal_manifest_text(std::string text) {
  const std::string needle = "\"manifest_crc32\": \"";
  const size_t pos = text.find(needle);
  if (pos == std::string::npos || pos + needle.size() + 8 > text.size()) return text;
  text.replace(pos + needle.size(), 8, "00000000");
  text.replace(pos + needle.size(), 8, io::crc32_hex(io::crc32(text)));
  return text;
}

// Rewrites manifest.json with edit(manifest) applied and its CRC-32 recomputed.
inline void edit_manifest(const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
  const std::string path = dir + "/manifest.json";
  nlohmann::json m = nlohmann::json::parse(io::read_file(path));
  edit(m);
  m["manifest_crc32"] = "00000000";
  io::write_file_synced(path, reseal_manifest_text(m.dump(2) + "\n"));
}

// Rewrites file `name` of checkpoint `dir` with edit(bytes) applied and re-signs it in the manifest.
inline void edit_file(const std::string& dir, const std::string& name, const std::function<void(std::string&)>& edit) {
  std::string bytes = io::read_file(dir + "/" + name);
  edit(bytes);
  io::write_file_synced(dir + "/" + name, bytes);
  edit_manifest(dir, [&](nlohmann::json& m) {
    m["files"][name]["bytes"] = bytes.size();
    m["files"][name]["crc32"] = io::crc32_hex(io::crc32(bytes));
  });
}

// File `name` of checkpoint `dir` replaced by `bytes` and re-signed: the
// manifest's own CRC-32 when it is manifest.json, else its record there.
inline void replace_file(const std::string& dir, const std::string& name, const std::string& bytes) {
  if (name == "manifest.json") {
    io::write_file_synced(dir + "/" + name, reseal_manifest_text(bytes));
  } else {
    edit_file(dir, name, [&](std::string& b) { b = bytes; });
  }
}

// The same for a JSON file (the indexes, trainer_state.json): edit(json), written back as JSON.
inline void edit_json(const std::string& dir, const std::string& name,
                      const std::function<void(nlohmann::json&)>& edit) {
  edit_file(dir, name, [&](std::string& bytes) {
    nlohmann::json j = nlohmann::json::parse(bytes);
    edit(j);
    bytes = j.dump(2) + "\n";
  });
}

}  // namespace weft::parallel::checkpoint::tamper
