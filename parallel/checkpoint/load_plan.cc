// Planning a checkpoint load as data (contract in load_plan.h).
#include "parallel/checkpoint/load_plan.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "core/error.h"

namespace weft::parallel::checkpoint {
namespace {

using KeysByParam = std::map<std::string, std::vector<std::string>>;

// Optimizer keys by parameter name ("state.<p>.<leaf>", "options.<p>.<opt>": split at the last dot).
KeysByParam keys_by_param(const PieceMap& optimizer) {
  KeysByParam out;
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
std::string saved_name(const std::string& name, const KeysByParam& by_param,
                       const std::vector<std::vector<std::string>>& tied) {
  if (by_param.count(name)) return name;
  for (const auto& group : tied)
    if (std::find(group.begin(), group.end(), name) != group.end())
      for (const auto& member : group)
        if (by_param.count(member)) return member;
  return name;
}

std::string shape_dtype(const Shape& s, DType d) {
  std::ostringstream os;
  os << shape_str(s) << " " << d;
  return os.str();
}

class Planner {
 public:
  Planner(const CheckpointMetadata& ck, LoadPlan& plan) : ck_(ck), plan_(plan), where_("checkpoint '" + ck.dir + "'") {}

  const std::string& where() const { return where_; }

  const std::vector<Piece>& find(Index index, const std::string& key) const {
    const PieceMap& m = index == Index::kModel ? ck_.model : ck_.optimizer;
    auto it = m.find(key);
    WEFT_CHECK(it != m.end() && !it->second.empty(), where_,
               index == Index::kModel ? " has no tensor '" : " has no optimizer entry '", key, "'");
    return it->second;
  }

  int add_target(LoadTarget t) {
    plan_.targets.push_back(std::move(t));
    return static_cast<int>(plan_.targets.size()) - 1;
  }

  // Elements [begin, end) of saved `key` into `target` from `dst` on: one item per overlapping piece.
  void add_range(Index index, const std::string& key, int64_t begin, int64_t end, int target, int64_t dst) {
    for (const Piece& p : find(index, key)) {
      const int64_t a = std::max(begin, p.begin), b = std::min(end, p.end);
      if (a < b) plan_.items.push_back({p.file, index, key, a, b - a, target, dst + (a - begin)});
    }
  }

  // The whole of saved `key` into a new target `dest` of the saved shape and dtype.
  void add_whole(Index index, const std::string& key, const std::string& dest) {
    const Piece& p = find(index, key).front();
    const int t = add_target({dest, p.shape, p.dtype, index == Index::kOptimizer});
    add_range(index, key, 0, numel_of(p.shape), t, 0);
  }

 private:
  const CheckpointMetadata& ck_;
  LoadPlan& plan_;
  std::string where_;
};

// The ZeRO shard dict's tensors (Note [zero state dicts] in parallel/data/zero.h):
// per flat, the elements of this rank's shard from each parameter's saved state.
void plan_zero(Planner& pl, const CheckpointMetadata& ck, const RankNeeds& needs) {
  const ZeroLayout& layout = needs.zero->layout;
  const KeysByParam by_param = keys_by_param(ck.optimizer);
  std::map<std::string, Shape> shapes;
  for (const TensorSpec& p : needs.params) shapes[p.name] = p.shape;
  for (int f = 0; f < static_cast<int>(layout.shards.size()); ++f) {
    std::vector<const ZeroParamSpan*> params;  // by offset (ZeroLayout's order)
    for (const ZeroParamSpan& p : layout.params)
      if (p.flat == f) params.push_back(&p);
    if (params.empty()) continue;
    const std::string shard = ZeroLayout::shard_name(f);
    const int64_t s = layout.shard_numel(f), lo = layout.owned_begin(f), hi = lo + s;
    const std::string first = saved_name(params.front()->name, by_param, needs.tied);
    for (const std::string& opt : needs.zero->options)
      pl.add_whole(Index::kOptimizer, "options." + first + "." + opt, "options." + shard + "." + opt);
    auto it = by_param.find(first);
    if (it == by_param.end()) continue;  // no state saved yet: the options only
    for (const std::string& key : it->second) {
      if (key.rfind("state.", 0) != 0) continue;
      const std::string leaf = key.substr(7 + first.size());
      if (leaf == "step") {
        pl.add_whole(Index::kOptimizer, key, "state." + shard + ".step");
        continue;
      }
      const int t = pl.add_target({"state." + shard + "." + leaf, {s}, layout.shards[f].dtype, true});  // (S,)
      for (const ZeroParamSpan* p : params) {
        const std::string pk = "state." + saved_name(p->name, by_param, needs.tied) + "." + leaf;
        const Shape& saved = pl.find(Index::kOptimizer, pk).front().shape;
        auto shape = shapes.find(p->name);
        WEFT_CHECK(
            shape == shapes.end() ? numel_of(saved) == p->numel : saved == shape->second, pl.where(),
            ": optimizer entry '", pk, "' has shape ", shape_str(saved), " but parameter '", p->name, "' has ",
            shape == shapes.end() ? std::to_string(p->numel) + " elements" : "shape " + shape_str(shape->second));
        const int64_t a = std::max(lo, p->offset), b = std::min(hi, p->offset + p->numel);
        if (a < b) pl.add_range(Index::kOptimizer, pk, a - p->offset, b - p->offset, t, a - lo);
      }
    }
  }
}

}  // namespace

LoadPlan plan_load(const CheckpointMetadata& ck, const RankNeeds& needs) {
  LoadPlan plan;
  plan.saved = ck.layout;
  Planner pl(ck, plan);
  for (const TensorSpec& m : needs.model) {
    const Piece& p = pl.find(Index::kModel, m.name).front();
    WEFT_CHECK(p.shape == m.shape && p.dtype == m.dtype, pl.where(), ": tensor '", m.name, "' is ",
               shape_dtype(p.shape, p.dtype), " in the checkpoint but ", shape_dtype(m.shape, m.dtype),
               " in the model");
    const int t = pl.add_target({m.name, m.shape, m.dtype, false});
    pl.add_range(Index::kModel, m.name, 0, numel_of(m.shape), t, 0);
  }
  if (!needs.optimizer) return plan;
  WEFT_CHECK(!ck.optimizer.empty() || needs.params.empty(), pl.where(),
             " holds no optimizer state (it was saved without an optimizer)");
  if (needs.zero) {
    plan.zero = needs.zero->layout;
    plan_zero(pl, ck, needs);
    return plan;
  }
  const KeysByParam by_param = keys_by_param(ck.optimizer);
  for (const TensorSpec& p : needs.params) {
    const std::string src = saved_name(p.name, by_param, needs.tied);
    auto it = by_param.find(src);
    if (it == by_param.end()) continue;          // the optimizer names what it misses
    for (const std::string& key : it->second) {  // "state.<src>.<leaf>" -> "state.<name>.<leaf>"
      const size_t head = key.rfind("state.", 0) == 0 ? 6 : 8;
      pl.add_whole(Index::kOptimizer, key, key.substr(0, head) + p.name + key.substr(head + src.size()));
    }
  }
  return plan;
}

std::string describe(const LoadPlan& plan) {
  std::ostringstream os;
  const SavedLayout& s = plan.saved;
  os << "load plan from pp " << s.pp << " x dp " << s.dp << (s.zero ? " ZeRO" : "") << ": " << plan.targets.size()
     << " targets, " << plan.items.size() << " items\n";
  for (const LoadItem& it : plan.items) {
    const LoadTarget& t = plan.targets.at(it.target);
    os << "  " << it.file << " " << it.key << "[" << it.src_begin << ", " << it.src_begin + it.length << ") -> "
       << t.key << "[" << it.dst_begin << ", " << it.dst_begin + it.length << ")\n";
  }
  return os.str();
}

}  // namespace weft::parallel::checkpoint
