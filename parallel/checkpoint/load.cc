// Loading a partitioned checkpoint (contract in load.h).
#include "parallel/checkpoint/load.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "core/autograd_meta.h"
#include "core/error.h"
#include "core/ops.h"
#include "parallel/checkpoint/commit.h"
#include "parallel/checkpoint/reader.h"

namespace weft::parallel::checkpoint {

using nlohmann::json;

namespace {

// Optimizer keys by parameter name ("state.<p>.<leaf>", "options.<p>.<opt>": split at the last dot).
std::map<std::string, std::vector<std::string>> keys_by_param(const PieceMap& optimizer) {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& [key, pieces] : optimizer) {
    size_t start = key.rfind("state.", 0) == 0 ? 6 : (key.rfind("options.", 0) == 0 ? 8 : 0);
    const size_t dot = key.rfind('.');
    if (start == 0 || dot == std::string::npos || dot <= start) continue;
    out[key.substr(start, dot - start)].push_back(key);
  }
  return out;
}

// Note [tied parameters in checkpoints]: a layout that holds a tied group in
// one stage (one process) has one tensor for it, so the optimizer state is
// saved under one member's name only. A loading stage that holds another
// member takes that member's entries: where the checkpoint has no entry for
// `name`, the first member of its tied group that has one (the copies' states
// are equal: they get the same summed gradients). Otherwise `name` itself.
std::string saved_name(const std::string& name, const std::map<std::string, std::vector<std::string>>& by_param,
                       const std::vector<std::vector<std::string>>& tied) {
  if (by_param.count(name)) return name;
  for (const auto& group : tied)
    if (std::find(group.begin(), group.end(), name) != group.end())
      for (const auto& member : group)
        if (by_param.count(member)) return member;
  return name;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

int64_t int_at(const optim::OptimizerStateDict& sd, const std::string& key, int64_t i = -1) {
  Tensor t = sd.at(key).to(DType::Int64).contiguous();
  return i < 0 ? t.item<int64_t>() : t.data_ptr<int64_t>()[i];
}

// The ZeRO shard dict (Note [zero state dicts] in parallel/zero.h) of this
// rank, assembled from the elements of each parameter that its shard owns.
optim::OptimizerStateDict zero_shard_dict(CheckpointReader& reader, const optim::OptimizerStateDict& fresh,
                                          const std::vector<std::vector<std::string>>& tied) {
  const std::string where = "checkpoint '" + reader.dir() + "'";
  const auto& ck = reader.optimizer();
  const auto by_param = keys_by_param(ck);
  optim::OptimizerStateDict out;
  for (const auto& [k, t] : fresh)
    if (k.rfind("layout.", 0) == 0) out[k] = t;
  const int64_t dp = int_at(fresh, "layout.dp"), rank = int_at(fresh, "layout.rank");
  struct P {
    int64_t offset, numel;
    std::string name;
  };
  std::map<int64_t, std::vector<P>> flats;
  const std::string lp = "layout.param.";
  for (const auto& [k, t] : fresh)
    if (k.rfind(lp, 0) == 0)
      flats[int_at(fresh, k, 0)].push_back({int_at(fresh, k, 1), int_at(fresh, k, 2), k.substr(lp.size())});
  auto find = [&](const std::string& key) -> const std::vector<Piece>& {
    auto it = ck.find(key);
    WEFT_CHECK(it != ck.end(), where, " has no optimizer entry '", key, "'");
    return it->second;
  };
  for (auto& [f, params] : flats) {
    std::sort(params.begin(), params.end(), [](const P& a, const P& b) { return a.offset < b.offset; });
    const std::string shard = "shard" + std::to_string(f);
    const int64_t padded = int_at(fresh, "layout." + shard, 1), s = padded / dp, lo = rank * s, hi = lo + s;
    const DType dtype = static_cast<DType>(int_at(fresh, "layout." + shard, 2));
    const std::string first = saved_name(params.front().name, by_param, tied);
    const std::string op = "options." + shard + ".";
    for (const auto& [k, t] : fresh)
      if (k.rfind(op, 0) == 0) {
        const std::string key = "options." + first + "." + k.substr(op.size());
        out[k] = reader.read(key, find(key));
      }
    auto it = by_param.find(first);
    if (it == by_param.end()) continue;
    for (const std::string& key : it->second) {
      if (key.rfind("state.", 0) != 0) continue;
      const std::string leaf = key.substr(7 + first.size());
      if (leaf == "step") {
        out["state." + shard + ".step"] = reader.read(key, find(key));
        continue;
      }
      Tensor buf = zeros({s}, TensorOptions{dtype});  // (S,): this rank's elements [lo, hi) of the flat
      for (const P& p : params) {
        const int64_t a = std::max(lo, p.offset), b = std::min(hi, p.offset + p.numel);
        if (a >= b) continue;
        const std::string pk = "state." + saved_name(p.name, by_param, tied) + "." + leaf;
        buf.narrow(0, a - lo, b - a).copy_(reader.read_elements(pk, find(pk), a - p.offset, b - p.offset).to(dtype));
      }
      out["state." + shard + "." + leaf] = buf;
    }
  }
  return out;
}

void load_scheduler(const json& js, optim::LRScheduler& sched, const std::string& where) {
  const auto base = js.at("base_lrs").get<std::vector<double>>(), last = js.at("last_lrs").get<std::vector<double>>();
  std::vector<double> b = base, l = last;
  const size_t n = sched.base_lrs().size();
  if (base.size() != n) {
    const bool uniform = !base.empty() &&
                         std::all_of(base.begin(), base.end(), [&](double v) { return v == base[0]; }) &&
                         std::all_of(last.begin(), last.end(), [&](double v) { return v == last[0]; });
    WEFT_CHECK(uniform, where, ": the LR schedule was saved with ", base.size(),
               " parameter groups of different learning rates, but this optimizer has ", n, " groups");
    b.assign(n, base[0]);
    l.assign(n, last[0]);
  }
  sched.load_state_dict({{"last_epoch", scalar_tensor(js.at("last_epoch").get<int64_t>(), TensorOptions{DType::Int64})},
                         {"base_lrs", tensor<double>(b, {static_cast<int64_t>(n)})},
                         {"last_lrs", tensor<double>(l, {static_cast<int64_t>(n)})}});
}

std::string describe(const Shape& s, DType d) {
  std::ostringstream os;
  os << shape_str(s) << " " << d;
  return os.str();
}

}  // namespace

GeneratorState rng_for_rank(const std::vector<GeneratorState>& saved, int rank) {
  WEFT_CHECK(!saved.empty(), "rng_for_rank: no saved RNG states");
  if (rank < static_cast<int>(saved.size())) return saved[rank];
  uint64_t z = saved[rank % saved.size()].seed + static_cast<uint64_t>(rank) + 0x9e3779b97f4a7c15ull;  // splitmix64
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return GeneratorState{z ^ (z >> 31), 0};
}

TrainingState load(const std::string& path, const Stateful& state, const LoadOptions& options) {
  WEFT_CHECK(state.model != nullptr, "checkpoint load: no model given");
  hybrid::DistributedModel& model = *state.model;
  WEFT_CHECK(model.partitioned(), "checkpoint load from '", path,
             "': the model is not partitioned yet (call partition() first, then load)");
  ProcessGroup& world = *model.grid().world();
  const std::string what = "checkpoint load from '" + path + "'";
  NoGradGuard no_grad;

  // ---- phase 1: read the index, compare it with this rank's stages ----
  std::unique_ptr<CheckpointReader> reader;
  const nn::StateDict local = model.local_state_dict();
  json mine{{"error", ""}, {"keys", json::array()}, {"missing", json::array()}, {"mismatched", json::array()}};
  for (const auto& [k, t] : local) mine["keys"].push_back(k);
  try {
    reader = std::make_unique<CheckpointReader>(path);
    for (const auto& [k, t] : local) {
      auto it = reader->model().find(k);
      if (it == reader->model().end()) {
        mine["missing"].push_back(k);
      } else if (it->second[0].shape != t.sizes() || it->second[0].dtype != t.dtype()) {
        mine["mismatched"].push_back(k + ": checkpoint " + describe(it->second[0].shape, it->second[0].dtype) +
                                     " vs model " + describe(t.sizes(), t.dtype()));
      }
    }
    if (options.optimizer && state.optimizer && state.optimizer->has_parameters())
      WEFT_CHECK(reader->has_optimizer(), "checkpoint '", reader->dir(),
                 "' holds no optimizer state (it was saved without an optimizer)");
  } catch (const std::exception& e) {
    mine["error"] = error_text(e);
  }
  std::vector<std::string> errors;
  std::set<std::string> keys, missing_set, mismatched_set;
  for (const std::string& s : allgather_strings(world, mine.dump())) {
    const json j = json::parse(s);
    errors.push_back(j["error"].get<std::string>());
    for (const auto& k : j["keys"]) keys.insert(k.get<std::string>());
    for (const auto& k : j["missing"]) missing_set.insert(k.get<std::string>());
    for (const auto& k : j["mismatched"]) mismatched_set.insert(k.get<std::string>());
  }
  const std::string failed = combine_errors(errors);
  WEFT_CHECK(failed.empty(), what, " failed: ", failed);
  std::vector<std::string> unexpected;
  for (const auto& [k, pieces] : reader->model())
    if (!keys.count(k)) unexpected.push_back(k);
  if (!missing_set.empty() || !unexpected.empty() || !mismatched_set.empty()) {
    std::string msg = "checkpoint '" + reader->dir() + "' does not match the model:";
    if (!missing_set.empty()) msg += " missing keys [" + join({missing_set.begin(), missing_set.end()}) + "];";
    if (!unexpected.empty()) msg += " unexpected keys [" + join(unexpected) + "];";
    if (!mismatched_set.empty())
      msg += " mismatched keys [" + join({mismatched_set.begin(), mismatched_set.end()}) + "];";
    WEFT_ERROR(msg);
  }

  // ---- phase 2: read what this rank needs and load it ----
  std::string error;
  try {
    nn::StateDict sd;
    for (const auto& [k, t] : local) sd.insert(k, reader->read(k, reader->model().at(k)));
    model.load_state_dict(sd);
    if (options.optimizer && state.optimizer && state.optimizer->has_parameters()) {
      hybrid::DistributedOptimizer& opt = *state.optimizer;
      if (opt.sharded()) {
        opt.load_local_state_dict(zero_shard_dict(*reader, opt.local_state_dict(), model.options().pipe.tied));
      } else {
        const auto by_param = keys_by_param(reader->optimizer());
        optim::OptimizerStateDict osd;
        for (const auto& [name, p] : model.local_named_parameters()) {
          const std::string src = saved_name(name, by_param, model.options().pipe.tied);
          auto it = by_param.find(src);
          if (it == by_param.end()) continue;          // the optimizer names what it misses
          for (const std::string& key : it->second) {  // "state.<src>.<leaf>" -> "state.<name>.<leaf>"
            const size_t head = key.rfind("state.", 0) == 0 ? 6 : 8;
            osd[key.substr(0, head) + name + key.substr(head + src.size())] =
                reader->read(key, reader->optimizer().at(key));
          }
        }
        opt.load_state_dict(osd);
      }
    }
    const json& ts = reader->trainer_state();
    if (options.scheduler && state.scheduler && ts.contains("scheduler") && !ts["scheduler"].is_null())
      load_scheduler(ts["scheduler"], *state.scheduler, "checkpoint '" + reader->dir() + "'");
    if (options.rng) {
      std::vector<GeneratorState> saved;
      for (const auto& r : ts.at("rng"))
        saved.push_back({r.at("seed").get<uint64_t>(), r.at("offset").get<uint64_t>()});
      set_rng_state(rng_for_rank(saved, world.rank()));
    }
  } catch (const std::exception& e) {
    error = error_text(e);
  }
  agree(world, what, error);
  if (options.bytes_read) *options.bytes_read = reader->bytes_read();
  const json& ts = reader->trainer_state();
  TrainingState out;
  out.step = ts.at("step").get<int64_t>();
  out.epoch = ts.at("epoch").get<int64_t>();
  out.batch = ts.at("batch").get<int64_t>();
  out.metadata = ts.value("metadata", std::map<std::string, std::string>{});
  return out;
}

std::map<std::string, Tensor> load_model_state(const std::string& path) {
  CheckpointReader reader(path);
  std::map<std::string, Tensor> out;
  for (const auto& [k, pieces] : reader.model()) out[k] = reader.read(k, pieces);
  return out;
}

optim::OptimizerStateDict load_optimizer_state(const std::string& path) {
  CheckpointReader reader(path);
  WEFT_CHECK(reader.has_optimizer(), "checkpoint '", reader.dir(), "' holds no optimizer state");
  optim::OptimizerStateDict out;
  for (const auto& [k, pieces] : reader.optimizer()) out[k] = reader.read(k, pieces);
  return out;
}

}  // namespace weft::parallel::checkpoint
