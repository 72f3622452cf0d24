// A rank's part of a checkpoint (contract in snapshot.h).
#include "parallel/checkpoint/snapshot.h"

#include <algorithm>

#include "core/autograd_meta.h"
#include "core/error.h"
#include "core/ops.h"
#include "parallel/data/zero_layout.h"

namespace weft::parallel::checkpoint {
namespace {

StoredTensor whole(const Tensor& t) {
  Tensor c = t.detach().to(kCPU).contiguous().clone();
  return StoredTensor{c, c.sizes(), 0, c.numel()};
}

// ZeRO: this rank's owned elements of each parameter's state, from the shard
// dict with its layout (Note [zero state dicts] in parallel/data/zero.h).
void zero_pieces(const optim::OptimizerStateDict& sd, const std::map<std::string, Shape>& shapes, bool scalars,
                 FileSnapshot& file) {
  const ZeroLayout layout = ZeroLayout::from_state(sd);
  for (const ZeroParamSpan& p : layout.params) {
    const std::string shard = ZeroLayout::shard_name(p.flat);
    const int64_t lo = layout.owned_begin(p.flat), s = layout.shard_numel(p.flat);
    const int64_t a = std::max(lo, p.offset), b = std::min(lo + s, p.offset + p.numel);
    auto shape = shapes.find(p.name);
    WEFT_INTERNAL_ASSERT(shape != shapes.end(), "ZeRO parameter '", p.name, "' is not a local parameter");
    const std::string sp = "state." + shard + ".", op = "options." + shard + ".";
    for (const auto& [k2, v] : sd) {
      if (k2.rfind(sp, 0) == 0) {
        const std::string leaf = k2.substr(sp.size());
        if (leaf == "step") {
          if (scalars) file.tensors["state." + p.name + ".step"] = whole(v);
        } else if (a < b) {
          Tensor part = v.detach().to(kCPU).contiguous().narrow(0, a - lo, b - a).clone();  // (b - a,)
          file.tensors["state." + p.name + "." + leaf] = StoredTensor{part, shape->second, a - p.offset, b - p.offset};
        }
      } else if (scalars && k2.rfind(op, 0) == 0) {
        file.tensors["options." + p.name + "." + k2.substr(op.size())] = whole(v);
      }
    }
  }
}

}  // namespace

nlohmann::json scheduler_to_json(const optim::LRScheduler& s) { return scheduler_state_to_json(s.state_dict()); }

Snapshot take_snapshot(const Stateful& state, const TrainingState& training, Kind kind) {
  WEFT_CHECK(state.model != nullptr, "checkpoint save: no model given");
  hybrid::DistributedModel& model = *state.model;
  WEFT_CHECK(model.partitioned(),
             "checkpoint save: the model is not partitioned yet (save after its first step(), "
             "or call partition() first)");
  const hybrid::Grid& grid = model.grid();
  NoGradGuard no_grad;
  Snapshot snap;
  snap.kind = kind;
  snap.rank = grid.rank();
  snap.world = grid.world()->size();
  snap.training = training;
  snap.rng = get_rng_state();
  snap.has_optimizer = state.optimizer != nullptr;
  if (state.scheduler) snap.scheduler = scheduler_to_json(*state.scheduler);
  for (const ExtraFile& f : state.extra_files) {
    const bool plain = !f.name.empty() && f.name[0] != '.' && f.name.find('/') == std::string::npos;
    const bool reserved = f.name == kManifestFile || f.name == kTrainerStateFile || f.name == kModelIndexFile ||
                          f.name == kOptimizerIndexFile || f.name.rfind("model", 0) == 0 ||
                          f.name.rfind("optimizer", 0) == 0;
    WEFT_CHECK(plain && !reserved, "checkpoint save: extra file name '", f.name,
               "' is not a plain file name of its own (no '/', no leading '.', not manifest.json, "
               "trainer_state.json, model* or optimizer*)");
  }
  snap.extra_files = state.extra_files;
  const auto& po = model.options().pipe;
  snap.layout = {{"world", snap.world},
                 {"pp", grid.pp()},
                 {"dp", grid.dp()},
                 {"zero", state.optimizer && state.optimizer->sharded()},
                 {"balance", model.balance()},
                 {"virtual_stages", po.virtual_stages},
                 {"schedule", pipe::schedule_name(po.schedule)}};
  const std::map<std::string, std::string> pt{{"format", "pt"}};

  if (kind == Kind::kFull) {
    nn::StateDict sd = model.state_dict();  // collective
    optim::OptimizerStateDict osd;
    if (state.optimizer) osd = state.optimizer->state_dict();  // collective
    if (snap.rank != 0) return snap;
    FileSnapshot m{"model.safetensors", true, {}, pt};
    for (const auto& [k, t] : sd) m.tensors[k] = whole(t);
    snap.files.push_back(std::move(m));
    if (state.optimizer) {
      FileSnapshot o{"optimizer.safetensors", false, {}, {}};
      for (const auto& [k, t] : osd) o.tensors[k] = whole(t);
      snap.files.push_back(std::move(o));
    }
    return snap;
  }

  if (grid.dp_rank() == 0) {
    FileSnapshot m{shard_file_name("model", grid.pp_rank(), grid.pp()), true, {}, pt};
    for (const auto& [k, t] : model.local_state_dict()) m.tensors[k] = whole(t);
    if (!m.tensors.empty()) snap.files.push_back(std::move(m));
  }
  if (state.optimizer && state.optimizer->has_parameters()) {
    hybrid::DistributedOptimizer& opt = *state.optimizer;
    if (opt.sharded()) {
      std::map<std::string, Shape> shapes;
      for (const auto& [n, p] : model.local_named_parameters()) shapes[n] = p.sizes();
      const int writer = grid.pp_rank() * grid.dp() + grid.dp_rank();
      FileSnapshot o{shard_file_name("optimizer", writer, snap.world), false, {}, {}};
      zero_pieces(opt.local_state_dict(), shapes, grid.dp_rank() == 0, o);
      if (!o.tensors.empty()) snap.files.push_back(std::move(o));
    } else if (grid.dp_rank() == 0) {
      FileSnapshot o{shard_file_name("optimizer", grid.pp_rank(), grid.pp()), false, {}, {}};
      for (const auto& [k, t] : opt.local_state_dict()) o.tensors[k] = whole(t);
      if (!o.tensors.empty()) snap.files.push_back(std::move(o));
    }
  }
  return snap;
}

}  // namespace weft::parallel::checkpoint
