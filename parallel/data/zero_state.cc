// ZeroOptimizer's state dicts (Note [zero state dicts] in zero.h): the
// gathered by-name dict, loading one at any dp, and the local shard with its
// layout.
#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "core/autograd_meta.h"
#include "parallel/data/zero.h"

namespace weft::parallel {
namespace {

std::string names_str(const std::map<std::string, Tensor>& m) {
  std::string s = "{";
  for (const auto& [k, t] : m) s += (s.size() > 1 ? ", " : "") + k;
  return s + "}";
}

std::string int_values_str(const Tensor& t) {
  Tensor c = t.to(DType::Int64).contiguous();
  std::string s = "[";
  for (int64_t i = 0; i < c.numel(); ++i) s += (i ? ", " : "") + std::to_string(c.data_ptr<int64_t>()[i]);
  return s + "]";
}

}  // namespace

Tensor ZeroOptimizer::gather_flat(int fi, const Tensor& t, int root) {
  const Flat& f = flats_[fi];
  const int dp = group_->size(), rank = group_->rank();
  Tensor src = t.contiguous();
  if (root < 0) {
    Tensor out = empty({f.padded}, src.options());  // (P,)
    std::vector<Tensor> outputs;
    for (int r = 0; r < dp; ++r) outputs.push_back(out.narrow(0, r * f.shard, f.shard));
    group_->allgather(outputs, src)->wait();
    return out;
  }
  if (rank != root) {
    group_->batch_isend_irecv({P2POp::send(src, root, kZeroGatherTag)})->wait();
    return Tensor();
  }
  Tensor out = empty({f.padded}, src.options());  // (P,)
  out.narrow(0, rank * f.shard, f.shard).copy_(src);
  std::vector<P2POp> ops;
  for (int r = 0; r < dp; ++r)
    if (r != root) ops.push_back(P2POp::recv(out.narrow(0, r * f.shard, f.shard), r, kZeroGatherTag));
  group_->batch_isend_irecv(ops)->wait();
  return out;
}

optim::OptimizerStateDict ZeroOptimizer::state_dict(int root) {
  const int dp = group_->size();
  WEFT_CHECK(root >= -1 && root < dp, "ZeroOptimizer.state_dict: root ", root, " is not a rank of the group of ", dp,
             " (or -1 for every rank)");
  NoGradGuard no_grad;
  const bool receives = root < 0 || root == group_->rank();
  optim::OptimizerStateDict sd;
  for (size_t fi = 0; fi < flats_.size(); ++fi) {
    const Flat& f = flats_[fi];
    for (const auto& [leaf, t] : inner_->state(f.shard_param)) {
      if (leaf == "step") {
        if (receives)
          for (int i : f.params) sd["state." + params_[i].name + ".step"] = t.clone();
        continue;
      }
      WEFT_INTERNAL_ASSERT(t.numel() == f.shard, "state '", leaf, "' of shard ", fi, " has ", t.numel(),
                           " elements, the shard ", f.shard);
      Tensor all = gather_flat(static_cast<int>(fi), t, root);  // (P,) where received
      if (!receives) continue;
      for (int i : f.params) {
        const Param& p = params_[i];
        sd["state." + p.name + "." + leaf] = all.narrow(0, p.offset, p.tensor.numel()).view(p.tensor.sizes()).clone();
      }
    }
    if (!receives) continue;
    const optim::ParamGroup* group = nullptr;
    for (const auto& g : inner_->param_groups())
      for (const auto& t : g.params)
        if (t.is_same(f.shard_param)) group = &g;
    WEFT_INTERNAL_ASSERT(group != nullptr, "shard ", fi, " is in no parameter group");
    for (int i : f.params)
      for (const auto& [key, value] : group->options)
        sd["options." + params_[i].name + "." + key] = scalar_tensor(value, TensorOptions{DType::Float64});
  }
  return sd;
}

std::vector<std::string> ZeroOptimizer::load_state_dict(const optim::OptimizerStateDict& sd) {
  const std::string op = "ZeroOptimizer.load_state_dict";
  std::map<std::string, int> index;
  for (int i = 0; i < static_cast<int>(params_.size()); ++i) index[params_[i].name] = i;
  // ---- sort the keys: this optimizer's state and options, and the rest ----
  std::vector<std::map<std::string, Tensor>> state_of(params_.size()), options_of(params_.size());
  std::vector<std::string> unused;
  for (const auto& [key, t] : sd) {
    WEFT_CHECK(t.defined(), op, ": entry '", key, "' is an undefined tensor");
    WEFT_CHECK(key.rfind("layout.", 0) != 0, op, ": '", key,
               "' is a key of a local (sharded) state dict; load it with load_local_state_dict, or load the gathered "
               "state_dict()");
    WEFT_CHECK(key.rfind("param_groups.", 0) != 0, op, ": '", key,
               "' is a key of a positional state dict (Note [optimizer state dict]); save the unsharded optimizer "
               "with state_dict_by_name");
    std::string param, leaf;
    const bool is_state = key.rfind("state.", 0) == 0 && optim::detail::split_state_key(key.substr(6), param, leaf);
    const bool is_option =
        !is_state && key.rfind("options.", 0) == 0 && optim::detail::split_state_key(key.substr(8), param, leaf);
    WEFT_CHECK(is_state || is_option, op, ": unexpected key '", key,
               "' (expected state.<param name>.<state> or options.<param name>.<option>)");
    auto it = index.find(param);
    if (it == index.end()) {
      unused.push_back(key);
      continue;
    }
    (is_state ? state_of : options_of)[it->second][leaf] = t;
  }

  // ---- per flat: options complete and equal, the same state names, shapes, equal steps ----
  NoGradGuard no_grad;
  const int rank = group_->rank();
  optim::OptimizerStateDict inner_sd;
  for (size_t fi = 0; fi < flats_.size(); ++fi) {
    const Flat& f = flats_[fi];
    const std::string shard = "shard" + std::to_string(fi);
    const Param& first = params_[f.params.front()];
    optim::OptionMap options;
    for (int i : f.params) {
      const Param& p = params_[i];
      WEFT_CHECK(!options_of[i].empty(), op, ": no entry for parameter '", p.name, "' (missing 'options.", p.name,
                 ".lr' and its other hyper-parameters): is the state dict from a model with these parameter names?");
      optim::OptionMap mine;
      for (const auto& [key, t] : options_of[i]) {
        WEFT_CHECK(inner_->defaults().count(key), op, ": unknown hyper-parameter 'options.", p.name, ".", key, "' for ",
                   inner_->name());
        WEFT_CHECK(t.numel() == 1, op, ": hyper-parameter 'options.", p.name, ".", key,
                   "' must have one element, got shape ", shape_str(t.sizes()));
        mine[key] = t.item<double>();
      }
      for (const auto& [key, value] : inner_->defaults())
        WEFT_CHECK(mine.count(key), op, ": missing hyper-parameter 'options.", p.name, ".", key, "'");
      if (i == f.params.front()) {
        options = mine;
        continue;
      }
      for (const auto& [key, value] : mine)
        WEFT_CHECK(value == options.at(key), op, ": parameters '", first.name, "' and '", p.name, "' share a shard (",
                   f.dtype, ") but were saved with different ", key, " (",
                   optim::detail::format_option_value(options.at(key)), " and ",
                   optim::detail::format_option_value(value),
                   "); a sharded optimizer has one set of hyper-parameters per dtype");
    }
    for (const auto& [key, value] : options)
      inner_sd["options." + shard + "." + key] = scalar_tensor(value, TensorOptions{DType::Float64});

    const auto& names = state_of[f.params.front()];
    for (int i : f.params) {
      const Param& p = params_[i];
      WEFT_CHECK(state_of[i].size() == names.size() &&
                     std::equal(state_of[i].begin(), state_of[i].end(), names.begin(),
                                [](const auto& a, const auto& b) { return a.first == b.first; }),
                 op, ": parameter '", p.name, "' has state ", names_str(state_of[i]), " but '", first.name, "' has ",
                 names_str(names), "; a sharded optimizer keeps the same state for every parameter of a dtype (",
                 f.dtype, ")");
      for (const auto& [leaf, t] : state_of[i]) {
        const std::string key = "state." + p.name + "." + leaf;
        if (leaf == "step") {
          WEFT_CHECK(t.numel() == 1, op, ": '", key, "' must have one element, got shape ", shape_str(t.sizes()));
          const double mine = t.item<double>(), theirs = names.at("step").item<double>();
          WEFT_CHECK(mine == theirs, op, ": parameters '", first.name, "' and '", p.name,
                     "' were saved with different step counts (", optim::detail::format_option_value(theirs), " and ",
                     optim::detail::format_option_value(mine),
                     "); a sharded optimizer steps every parameter of a dtype (", f.dtype, ") together");
          continue;
        }
        WEFT_CHECK(t.sizes() == p.tensor.sizes(), op, ": '", key, "' has shape ", shape_str(t.sizes()),
                   " but parameter '", p.name, "' has shape ", shape_str(p.tensor.sizes()));
        WEFT_CHECK(t.is_floating_point(), op, ": '", key, "' has non-floating dtype ", t.dtype());
      }
    }
    // ---- this rank's slice of each elementwise state ----
    const int64_t lo = rank * f.shard, hi = lo + f.shard;
    for (const auto& [leaf, t0] : names) {
      if (leaf == "step") {
        inner_sd["state." + shard + ".step"] = t0;
        continue;
      }
      Tensor s = zeros({f.shard}, TensorOptions{f.dtype, f.device});  // (S,)
      for (int i : f.params) {
        const Param& p = params_[i];
        const int64_t a = std::max(lo, p.offset), b = std::min(hi, p.offset + p.tensor.numel());
        if (a >= b) continue;
        Tensor src = state_of[i].at(leaf).to(TensorOptions{f.dtype, f.device}).reshape({-1});
        s.narrow(0, a - lo, b - a).copy_(src.narrow(0, a - p.offset, b - a));
      }
      inner_sd["state." + shard + "." + leaf] = s;
    }
  }

  // ---- everything checked here: the inner optimizer checks its own state names and options ----
  try {
    auto left = inner_->load_state_dict_by_name(inner_sd, shard_names());
    WEFT_INTERNAL_ASSERT(left.empty(), "the shards' state dict has ", left.size(), " entries left");
  } catch (const Error& e) {
    WEFT_ERROR(op, ": ", e.message(), " (shard<f> holds the parameters of the f-th dtype)");
  }
  return unused;
}

optim::OptimizerStateDict ZeroOptimizer::local_state_dict() const {
  optim::OptimizerStateDict sd;
  for (const auto& [key, t] : inner_->state_dict_by_name(shard_names())) sd[key] = t.clone();
  layout().to_state(sd);
  return sd;
}

ZeroLayout ZeroOptimizer::layout() const {
  ZeroLayout out;
  out.dp = group_->size();
  out.rank = group_->rank();
  for (const Flat& f : flats_) out.shards.push_back({f.numel, f.padded, f.dtype});
  for (const Param& p : params_) out.params.push_back({p.name, p.flat, p.offset, p.tensor.numel()});
  std::stable_sort(out.params.begin(), out.params.end(), [](const ZeroParamSpan& a, const ZeroParamSpan& b) {
    return a.flat != b.flat ? a.flat < b.flat : a.offset < b.offset;
  });
  return out;
}

void ZeroOptimizer::load_local_state_dict(const optim::OptimizerStateDict& sd) {
  const std::string op = "ZeroOptimizer.load_local_state_dict";
  const optim::OptimizerStateDict mine = local_state_dict();
  auto value_of = [&](const std::string& key) {
    auto it = sd.find(key);
    WEFT_CHECK(it != sd.end(), op, ": missing '", key, "': is this a local state dict of a ZeroOptimizer?");
    WEFT_CHECK(it->second.defined(), op, ": entry '", key, "' is an undefined tensor");
    return it->second;
  };
  const int64_t dp = value_of("layout.dp").item<int64_t>(), rank = value_of("layout.rank").item<int64_t>();
  WEFT_CHECK(dp == group_->size() && rank == group_->rank(), op, ": the shard was saved by rank ", rank, " of dp ", dp,
             " but this is rank ", group_->rank(), " of dp ", group_->size(),
             "; a shard loads only into the same layout (load the gathered state_dict() instead)");
  optim::OptimizerStateDict rest;
  std::set<std::string> shards;
  for (const auto& [name, t] : shard_names()) shards.insert(name);
  for (const auto& [key, t] : sd) {
    if (key.rfind("layout.", 0) != 0) {
      std::string shard, leaf;
      const bool ok = (key.rfind("state.", 0) == 0 && optim::detail::split_state_key(key.substr(6), shard, leaf)) ||
                      (key.rfind("options.", 0) == 0 && optim::detail::split_state_key(key.substr(8), shard, leaf));
      WEFT_CHECK(ok && shards.count(shard), op, ": unexpected key '", key,
                 "' (a local state dict holds state.shard<f>.*, options.shard<f>.* and layout.*)");
      rest[key] = t;
      continue;
    }
    auto it = mine.find(key);
    WEFT_CHECK(it != mine.end(), op, ": unexpected '", key, "' (", int_values_str(t),
               "): the shard was saved with a parameter or dtype this optimizer does not have");
  }
  for (const auto& [key, t] : mine) {
    if (key.rfind("layout.", 0) != 0) continue;
    const Tensor saved = value_of(key);
    const std::string a = int_values_str(saved), b = int_values_str(t);
    WEFT_CHECK(a == b, op, ": '", key, "' is ", a, " in the state dict but ", b,
               " here (flat, offset, numel; for a shard: numel, padded, dtype): the parameters differ from the "
               "saving run's");
  }
  try {
    auto left = inner_->load_state_dict_by_name(rest, shard_names());
    WEFT_INTERNAL_ASSERT(left.empty(), "the shards' state dict has ", left.size(), " entries left");
  } catch (const Error& e) {
    WEFT_ERROR(op, ": ", e.message());
  }
}

}  // namespace weft::parallel
