// The commit protocol of Note [checkpoint commit] (commit.h).
#include "parallel/checkpoint/commit.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <mutex>

#include "core/error.h"
#include "core/ops.h"
#include "io/atomic_file.h"
#include "io/crc32.h"
#include "io/safetensors.h"
#include "parallel/checkpoint/rotation.h"
#include "parallel/comm/collectives.h"

namespace weft::parallel::checkpoint {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::mutex g_hook_mu;
std::function<void(const std::string&)> g_hook;

void hook(const std::string& event) {
  std::function<void(const std::string&)> h;
  {
    std::lock_guard<std::mutex> lock(g_hook_mu);
    h = g_hook;
  }
  if (h) h(event);
}

// Writes one file of the snapshot; returns its description and adds its pieces to `desc`.
void write_file(const std::string& dir, const FileSnapshot& f, int rank, json& desc) {
  std::map<std::string, Tensor> data;
  for (const auto& [name, st] : f.tensors) data[name] = st.data;
  const std::string bytes = io::safetensors_serialize(data, f.metadata);
  const io::SafetensorsHeader h = io::parse_safetensors_header(bytes, f.name);
  json& pieces = desc[f.model ? "model" : "optimizer"];
  for (const auto& [name, st] : f.tensors) {
    const io::SafetensorsEntry& e = h.entries.at(name);
    Piece p{f.name,   st.data.dtype(),
            st.shape, st.begin,
            st.end,   e.begin,
            e.end,    io::crc32_hex(io::crc32(bytes.data() + h.data_start + e.begin, e.end - e.begin))};
    pieces[name].push_back(piece_to_json(p));
  }
  io::write_file_synced(dir + "/" + f.name, bytes);
  desc["files"][f.name] = {{"bytes", bytes.size()}, {"crc32", io::crc32_hex(io::crc32(bytes))}, {"rank", rank}};
  hook("wrote " + f.name);
}

// Writes a small file of rank 0's and records it in the manifest.
void write_meta_file(const std::string& dir, const std::string& name, const std::string& bytes, Manifest& m) {
  io::write_file_synced(dir + "/" + name, bytes);
  m.files[name] = FileRecord{bytes.size(), io::crc32_hex(io::crc32(bytes)), 0};
}

std::string commit_on_root(const std::string& root, const std::string& tmp, const std::string& final_dir,
                           const Snapshot& snap, const std::vector<json>& descs) {
  Manifest m;
  m.kind = snap.kind;
  m.step = snap.training.step;
  m.epoch = snap.training.epoch;
  m.batch = snap.training.batch;
  m.layout = snap.layout;
  PieceMap model, optimizer;
  json rng = json::array(), scheduler;
  for (const json& d : descs) {
    for (auto it = d["files"].begin(); it != d["files"].end(); ++it) {
      WEFT_CHECK(!m.files.count(it.key()), "ranks ", m.files[it.key()].rank, " and ", (*it)["rank"].get<int>(),
                 " both wrote '", it.key(), "'");
      m.files[it.key()] =
          FileRecord{(*it)["bytes"].get<uint64_t>(), (*it)["crc32"].get<std::string>(), (*it)["rank"].get<int>()};
    }
    for (auto [key, target] : {std::pair<const char*, PieceMap*>{"model", &model}, {"optimizer", &optimizer}})
      for (auto it = d[key].begin(); it != d[key].end(); ++it)
        for (const json& pj : *it) (*target)[it.key()].push_back(piece_from_json(pj, "rank description"));
    rng.push_back(d["rng"]);
    if (scheduler.is_null() && !d["scheduler"].is_null()) scheduler = d["scheduler"];
    m.has_optimizer = m.has_optimizer || d["has_optimizer"].get<bool>();
  }
  for (PieceMap* pm : {&model, &optimizer})
    for (auto& [name, list] : *pm)
      std::sort(list.begin(), list.end(), [](const Piece& a, const Piece& b) { return a.begin < b.begin; });
  write_meta_file(tmp, kModelIndexFile, index_to_json(model, "weft.model").dump(1) + "\n", m);
  if (m.has_optimizer)
    write_meta_file(tmp, kOptimizerIndexFile, index_to_json(optimizer, "weft.optimizer").dump(1) + "\n", m);
  json ts{{"step", snap.training.step},
          {"epoch", snap.training.epoch},
          {"batch", snap.training.batch},
          {"metadata", snap.training.metadata},
          {"world", static_cast<int>(descs.size())},
          {"rng", rng},
          {"scheduler", scheduler}};
  write_meta_file(tmp, kTrainerStateFile, ts.dump(2) + "\n", m);
  hook("manifest");
  io::write_file_synced(tmp + "/" + kManifestFile, manifest_bytes(m));
  io::fsync_directory(tmp);
  std::error_code ec;
  const std::string old = root + "/.old-" + fs::path(final_dir).filename().string();
  const bool replacing = fs::exists(final_dir, ec);
  if (replacing) {
    fs::remove_all(old, ec);
    fs::rename(final_dir, old, ec);
    WEFT_CHECK(!ec, "cannot move the earlier checkpoint '", final_dir, "' aside: ", ec.message());
  }
  fs::rename(tmp, final_dir, ec);
  WEFT_CHECK(!ec, "cannot rename '", tmp, "' to '", final_dir, "': ", ec.message());
  io::fsync_directory(root);
  if (replacing) fs::remove_all(old, ec);
  hook("committed");
  return final_dir;
}

}  // namespace

namespace detail {
void set_save_hook(std::function<void(const std::string&)> h) {
  std::lock_guard<std::mutex> lock(g_hook_mu);
  g_hook = std::move(h);
}
}  // namespace detail

std::string error_text(const std::exception& e) {
  const std::string text = dynamic_cast<const Error*>(&e) ? static_cast<const Error&>(e).message() : e.what();
  // A parser's message may quote bytes of a damaged file that are not UTF-8;
  // the text travels between ranks as JSON, whose dump() would throw on them.
  const std::string quoted = nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return nlohmann::json::parse(quoted).get<std::string>();
}

namespace {

std::string commit_impl(ProcessGroup& group, const std::string& root, const Snapshot& snap, int keep_last,
                        const std::string& what);

}  // namespace

std::string commit_snapshot(ProcessGroup& group, const std::string& root, const Snapshot& snap, int keep_last) {
  const std::string what = "checkpoint save to '" + root + "/" + step_dir_name(snap.training.step) + "'";
  try {
    return commit_impl(group, root, snap, keep_last, what);
  } catch (const Error& e) {
    if (e.message().rfind(what, 0) == 0) throw;
    WEFT_ERROR(what, " failed: ", e.message());  // a collective's error (a rank died or froze)
  }
}

namespace {

std::string commit_impl(ProcessGroup& group, const std::string& root, const Snapshot& snap, int keep_last,
                        const std::string& what) {
  const std::string name = step_dir_name(snap.training.step);
  const std::string tmp = root + "/.tmp-" + name, final_dir = root + "/" + name;
  const bool lead = group.rank() == 0;
  // 1. Prepare.
  std::string error;
  try {
    if (lead) {
      std::error_code ec;
      fs::create_directories(root, ec);
      WEFT_CHECK(!ec && fs::is_directory(root), "cannot create the checkpoint directory '", root, "': ", ec.message());
      remove_incomplete(root);
      fs::create_directory(tmp, ec);
      WEFT_CHECK(!ec, "cannot create '", tmp, "': ", ec.message());
    }
    hook("prepared");
  } catch (const std::exception& e) {
    error = error_text(e);
  }
  agree(group, what, error);
  // 2. Every rank writes its files.
  json desc{{"error", ""},
            {"files", json::object()},
            {"model", json::object()},
            {"optimizer", json::object()},
            {"rng", {{"seed", snap.rng.seed}, {"offset", snap.rng.offset}}},
            {"scheduler", snap.scheduler},
            {"has_optimizer", snap.has_optimizer}};
  try {
    for (const FileSnapshot& f : snap.files) write_file(tmp, f, snap.rank, desc);
    for (const ExtraFile& f : snap.extra_files) {
      io::write_file_synced(tmp + "/" + f.name, f.bytes);
      desc["files"][f.name] = {
          {"bytes", f.bytes.size()}, {"crc32", io::crc32_hex(io::crc32(f.bytes))}, {"rank", snap.rank}};
      hook("wrote " + f.name);
    }
    hook("written");
  } catch (const std::exception& e) {
    desc["error"] = error_text(e);
  }
  std::vector<json> descs;
  std::vector<std::string> errors;
  for (const std::string& s : allgather_bytes(group, desc.dump())) {
    descs.push_back(json::parse(s));
    errors.push_back(descs.back()["error"].get<std::string>());
  }
  const std::string failed = combine_errors(errors);
  WEFT_CHECK(failed.empty(), what, " failed: ", failed);
  // 3. Rank 0 commits.
  error.clear();
  try {
    if (lead) commit_on_root(root, tmp, final_dir, snap, descs);
  } catch (const std::exception& e) {
    error = error_text(e);
  }
  agree(group, what, error);
  // 4. Rotation, after the commit.
  if (lead && keep_last > 0) {
    try {
      prune(root, keep_last);
    } catch (const std::exception& e) {
      std::cerr << "checkpoint: rotation under '" << root << "' failed (the new checkpoint is committed): " << e.what()
                << "\n";
    }
  }
  return final_dir;
}

}  // namespace

}  // namespace weft::parallel::checkpoint
