// Per-rank state in checkpoints (Note [rank state] in train/rank_state.h).
#include "train/rank_state.h"

#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "core/ops.h"
#include "core/rng.h"
#include "parallel/checkpoint/reader.h"

namespace weft::train::detail {
namespace {

namespace ck = parallel::checkpoint;

constexpr const char* kPrefix = "rank-state-";

std::string names_of(const std::vector<RankState>& parts) {
  std::string s;
  for (const RankState& p : parts) s += (s.empty() ? "" : ", ") + p.name;
  return s;
}

// "daso: 2 nodes x 2 ranks: [0, 1] [2, 3]; ..." from a file's metadata (or this run's parts).
std::string layouts_of(const std::vector<RankState>& parts, const std::map<std::string, std::string>* meta) {
  std::string s;
  for (const RankState& p : parts) {
    std::string l = p.layout;
    if (meta) {
      auto it = meta->find("layout." + p.name);
      l = it == meta->end() ? "none" : it->second;
    }
    s += (s.empty() ? "" : "; ") + p.name + ": " + l;
  }
  return s;
}

std::string encode(const std::vector<RankState>& parts, int rank, int world) {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> meta{
      {"format", "weft.rank_state"}, {"rank", std::to_string(rank)}, {"world", std::to_string(world)}};
  const GeneratorState rng = get_rng_state();
  meta["rng"] = std::to_string(rng.seed) + " " + std::to_string(rng.offset);
  meta["parts"] = names_of(parts);
  for (const RankState& p : parts) {
    for (auto& [k, t] : p.save()) tensors[p.name + "." + k] = t.detach().to(kCPU).contiguous();
    meta["layout." + p.name] = p.layout;
  }
  return io::safetensors_serialize(tensors, meta);
}

}  // namespace

std::string rank_state_file(int rank, int world) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s%05d-of-%05d.safetensors", kPrefix, rank, world);
  return buf;
}

std::vector<ck::ExtraFile> gather_rank_states(const std::vector<RankState>& parts, parallel::ProcessGroup* group) {
  const int rank = group ? group->rank() : 0, world = group ? group->size() : 1;
  const std::string mine = encode(parts, rank, world);
  if (world == 1) return {{rank_state_file(0, 1), mine}};
  // The lengths to every rank, then each rank's bytes to rank 0 alone.
  Tensor len = full({1}, static_cast<int64_t>(mine.size()), DType::Int64);
  std::vector<Tensor> lens(world);
  for (auto& l : lens) l = empty({1}, DType::Int64);
  group->allgather(lens, len)->wait();
  if (rank != 0) {
    Tensor buf = empty({static_cast<int64_t>(mine.size())}, DType::UInt8);  // (bytes,)
    std::memcpy(buf.data_ptr<uint8_t>(), mine.data(), mine.size());
    group->send(buf, 0)->wait();
    return {};
  }
  std::vector<ck::ExtraFile> out{{rank_state_file(0, world), mine}};
  for (int r = 1; r < world; ++r) {
    Tensor buf = empty({lens[r].item<int64_t>()}, DType::UInt8);  // (bytes,)
    group->recv(buf, r)->wait();
    out.push_back({rank_state_file(r, world), std::string(reinterpret_cast<const char*>(buf.data_ptr<uint8_t>()),
                                                          static_cast<size_t>(buf.numel()))});
  }
  return out;
}

io::SafetensorsFile read_rank_state(const std::string& dir, const std::vector<RankState>& parts, int rank, int world) {
  const ck::Manifest m = ck::read_manifest(dir);
  const std::string name = rank_state_file(rank, world);
  const std::string how = "; resume it without " + names_of(parts) + ", or start afresh";
  if (!m.files.count(name)) {
    int saved = 0;
    for (const auto& [file, rec] : m.files) {
      const size_t of = file.find("-of-");
      if (file.rfind(kPrefix, 0) == 0 && of != std::string::npos) saved = std::atoi(file.c_str() + of + 4);
    }
    WEFT_CHECK(saved > 0, "resume: checkpoint '", dir, "' holds no per-rank state, which this run's ", names_of(parts),
               " needs (it was saved by a run without it)", how);
    std::string saved_layouts = "unknown";
    try {
      const io::SafetensorsFile f0 = io::safetensors_deserialize(
          ck::read_listed_file(dir, m, rank_state_file(0, saved)), dir + "/" + rank_state_file(0, saved));
      saved_layouts = layouts_of(parts, &f0.metadata);
    } catch (const Error&) {  // NOLINT(bugprone-empty-catch): the layouts are only named in the error below
    }
    WEFT_ERROR("resume: checkpoint '", dir, "' holds the per-rank state of ", saved, " ranks (", saved_layouts,
               "); this run has ", world, " ranks (", layouts_of(parts, nullptr),
               "): per-rank state resumes only on the layout that saved it; resume on ", saved,
               " ranks with that layout, or without ", names_of(parts),
               " (rank 0's model and optimizer state then resume alone)");
  }
  io::SafetensorsFile f;
  try {
    f = io::safetensors_deserialize(ck::read_listed_file(dir, m, name), dir + "/" + name);
  } catch (const Error& e) {
    WEFT_ERROR("the per-rank state of rank ", rank, ": ", e.message());
  }
  const std::string path = dir + "/" + name;
  auto meta = [&](const std::string& key) {
    auto it = f.metadata.find(key);
    WEFT_CHECK(it != f.metadata.end(), "the per-rank state of rank ", rank, ": '", path, "' has no '", key,
               "' in its metadata");
    return it->second;
  };
  WEFT_CHECK(meta("rank") == std::to_string(rank) && meta("world") == std::to_string(world),
             "the per-rank state of rank ", rank, ": '", path, "' holds rank ", meta("rank"), " of ", meta("world"),
             ", expected rank ", rank, " of ", world);
  for (const RankState& p : parts) {
    auto it = f.metadata.find("layout." + p.name);
    WEFT_CHECK(it != f.metadata.end(), "resume: checkpoint '", dir, "' holds no per-rank state '", p.name,
               "' (it holds: ", meta("parts"), ")", how);
    WEFT_CHECK(it->second == p.layout, "resume: checkpoint '", dir, "' holds per-rank state '", p.name, "' saved over ",
               it->second, "; this run has ", p.layout,
               ": per-rank state resumes only on the layout that saved it; resume with that layout, or without ",
               p.name, " (rank 0's model and optimizer state then resume alone)");
  }
  return f;
}

void load_rank_state(const std::vector<RankState>& parts, const io::SafetensorsFile& file) {
  for (const RankState& p : parts) {
    const std::string prefix = p.name + ".";
    std::map<std::string, Tensor> sd;
    for (const auto& [k, t] : file.tensors)
      if (k.rfind(prefix, 0) == 0) sd[k.substr(prefix.size())] = t;
    p.load(sd);
  }
  auto it = file.metadata.find("rng");
  unsigned long long seed = 0, offset = 0;
  WEFT_CHECK(it != file.metadata.end() && std::sscanf(it->second.c_str(), "%llu %llu", &seed, &offset) == 2,
             "the per-rank state has a malformed RNG state");
  set_rng_state(GeneratorState{seed, offset});
}

}  // namespace weft::train::detail
