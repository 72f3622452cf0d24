// Loading a partitioned checkpoint (contract in load.h).
#include "parallel/checkpoint/load.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "core/autograd_meta.h"
#include "core/error.h"
#include "core/ops.h"
#include "parallel/checkpoint/commit.h"
#include "parallel/checkpoint/load_plan.h"
#include "parallel/checkpoint/reader.h"
#include "parallel/comm/collectives.h"

namespace weft::parallel::checkpoint {

using nlohmann::json;

namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

CheckpointMetadata metadata_of(const CheckpointReader& reader) {
  CheckpointMetadata ck{reader.dir(), reader.model(), reader.optimizer(), {}};
  const json& l = reader.manifest().layout;
  if (l.is_object()) {
    ck.layout.world = l.value("world", 1);
    ck.layout.pp = l.value("pp", 1);
    ck.layout.dp = l.value("dp", 1);
    ck.layout.zero = l.value("zero", false);
    ck.layout.balance = l.value("balance", std::vector<int>{});
  }
  return ck;
}

// What this rank loads: its stages' model tensors and, when asked, its
// optimizer's state (with ZeRO: the shard of the layout it has now).
RankNeeds rank_needs(const nn::StateDict& local, const Stateful& state, bool optimizer) {
  hybrid::DistributedModel& model = *state.model;
  RankNeeds needs;
  for (const auto& [k, t] : local) needs.model.push_back({k, t.sizes(), t.dtype()});
  needs.tied = model.options().pipe.tied;
  needs.optimizer = optimizer && state.optimizer && state.optimizer->has_parameters();
  if (!needs.optimizer) return needs;
  for (const auto& [name, p] : model.local_named_parameters()) needs.params.push_back({name, p.sizes(), p.dtype()});
  if (state.optimizer->sharded()) {
    const optim::OptimizerStateDict fresh = state.optimizer->local_state_dict();
    RankNeeds::Zero zero{ZeroLayout::from_state(fresh), {}};
    const std::string op = "options." + ZeroLayout::shard_name(0) + ".";
    for (const auto& [k, t] : fresh)
      if (k.rfind(op, 0) == 0) zero.options.push_back(k.substr(op.size()));
    needs.zero = std::move(zero);
  }
  return needs;
}

// Executes the plan: each target filled from the elements its items name
// (each piece's CRC-32 checked by the reader), in the target's shape.
std::vector<Tensor> read_plan(CheckpointReader& reader, const LoadPlan& plan) {
  std::vector<Tensor> out;
  for (const LoadTarget& t : plan.targets) out.push_back(zeros({numel_of(t.shape)}, TensorOptions{t.dtype}));
  for (const LoadItem& it : plan.items) {
    const PieceMap& index = it.index == Index::kModel ? reader.model() : reader.optimizer();
    const Tensor v = reader.read_elements(it.key, index.at(it.key), it.src_begin, it.src_begin + it.length);
    Tensor& dst = out[it.target];
    dst.narrow(0, it.dst_begin, it.length).copy_(v.to(dst.dtype()));
  }
  for (size_t i = 0; i < out.size(); ++i) out[i] = out[i].view(plan.targets[i].shape);
  return out;
}

void load_scheduler(const json& js, optim::LRScheduler& sched, const std::string& where) {
  sched.load_state_dict(scheduler_state_from_json(js, sched.base_lrs().size(), where));
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
    reader->verify_headers(world.rank(), world.size());  // Note [checkpoint cross-checks]: the ranks share the shards
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
    // The plan decides what to read (load_plan.h); here it is only executed.
    const RankNeeds needs = rank_needs(local, state, options.optimizer);
    const LoadPlan plan = plan_load(metadata_of(*reader), needs);
    const std::vector<Tensor> got = read_plan(*reader, plan);
    nn::StateDict sd;
    optim::OptimizerStateDict osd;
    for (size_t i = 0; i < got.size(); ++i) {
      if (plan.targets[i].optimizer) osd[plan.targets[i].key] = got[i];
      else sd.insert(plan.targets[i].key, got[i]);
    }
    model.load_state_dict(sd);
    if (needs.optimizer) {
      if (plan.zero) {
        plan.zero->to_state(osd);  // Note [zero state dicts]: the local dict carries its layout
        state.optimizer->load_local_state_dict(osd);
      } else {
        state.optimizer->load_state_dict(osd);
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
  reader.verify_headers();
  std::map<std::string, Tensor> out;
  for (const auto& [k, pieces] : reader.model()) out[k] = reader.read(k, pieces);
  return out;
}

optim::OptimizerStateDict load_optimizer_state(const std::string& path) {
  CheckpointReader reader(path);
  WEFT_CHECK(reader.has_optimizer(), "checkpoint '", reader.dir(), "' holds no optimizer state");
  reader.verify_headers();
  optim::OptimizerStateDict out;
  for (const auto& [k, pieces] : reader.optimizer()) out[k] = reader.read(k, pieces);
  return out;
}

}  // namespace weft::parallel::checkpoint
