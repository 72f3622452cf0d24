// GlobalNormClipper (contract in clip_grad.h).
#include "parallel/hybrid/clip_grad.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <unordered_set>

#include "core/autograd_meta.h"
#include "core/error.h"
#include "core/ops.h"
#include "optim/kernels.h"
#include "parallel/comm/collectives.h"

namespace weft::parallel::hybrid {
namespace {

double sum_of_squares(const Tensor& g) {
  Tensor gc = g.contiguous();
  return optim::grad_norm_table()(gc.device(), gc.dtype(), gc, 2.0);  // sum of squares (no root)
}

// The tied names that are copies: every member of a group but its first.
std::set<std::string> tied_copies(const DistributedModel& model) {
  std::set<std::string> out;
  for (const auto& group : model.options().pipe.tied)
    for (size_t i = 1; i < group.size(); ++i)
      if (group[i] != group[0]) out.insert(group[i]);
  return out;
}

}  // namespace

GlobalNormClipper::GlobalNormClipper(DistributedModel& model, double max_norm) : model_(model), max_norm_(max_norm) {
  WEFT_CHECK(max_norm > 0 && std::isfinite(max_norm), "GlobalNormClipper: max_norm must be positive and finite, got ",
             max_norm);
}

double GlobalNormClipper::counted_sum_of_squares(std::vector<Tensor>& all_grads) const {
  const std::set<std::string> copies = tied_copies(model_);
  std::unordered_set<const TensorImpl*> seen;
  double sq = 0;
  // local_named_parameters() lists a tensor shared by several names once.
  for (const auto& [name, p] : model_.local_named_parameters()) {
    if (!seen.insert(p.impl()).second || !p.grad().defined()) continue;
    all_grads.push_back(p.grad());
    if (!copies.count(name)) sq += sum_of_squares(p.grad());
  }
  return sq;
}

double GlobalNormClipper::finish(double local_sq, double divide_by, const std::vector<Tensor>& grads) {
  const Tensor t = allreduce_host(*model_.grid().world(), full({1}, local_sq, DType::Float64), ReduceOp::Sum);  // (1,)
  const double total = std::sqrt(t.item<double>() / divide_by);
  last_norm_ = total;
  if (grads.empty()) return total;
  // optim::clip_grad_norm_'s factor, in the gradients' dtype.
  double coef;
  if (grads[0].dtype() == DType::Float32) {
    const float c = (1.0f / (static_cast<float>(total) + static_cast<float>(1e-6))) * static_cast<float>(max_norm_);
    coef = c > 1.0f ? 1.0f : c;
  } else {
    const double c = (1.0 / (total + 1e-6)) * max_norm_;
    coef = c > 1.0 ? 1.0 : c;
  }
  for (Tensor g : grads) {
    if (g.is_contiguous()) {
      optim::grad_scale_table()(g.device(), g.dtype(), g, coef);
    } else {
      Tensor gc = g.contiguous();
      optim::grad_scale_table()(gc.device(), gc.dtype(), gc, coef);
      g.copy_(gc);
    }
    g.bump_version();
  }
  return total;
}

double GlobalNormClipper::clip() {
  WEFT_CHECK(!model_.options().shard_optimizer_state,
             "GlobalNormClipper::clip: the model shards its optimizer state (ZeRO), so the averaged gradients exist "
             "only inside the optimizer's step; clip there with clip_shards (ClipBeforeStep)");
  NoGradGuard no_grad;
  std::vector<Tensor> grads;  // every local gradient, tied copies included: all get the factor
  const double sq = counted_sum_of_squares(grads);
  // Replicas hold equal gradients: the world's sum counts each stage dp times.
  return finish(sq, static_cast<double>(model_.grid().dp()), grads);
}

double GlobalNormClipper::clip_shards(optim::Optimizer& shard_optimizer) {
  WEFT_CHECK(model_.options().shard_optimizer_state,
             "GlobalNormClipper::clip_shards: the model does not shard its optimizer state; call clip() after "
             "model.step() instead");
  NoGradGuard no_grad;
  // The shard tensors in flat order ("shard0", "shard1", ...: DistributedOptimizer's names).
  std::vector<Tensor> shards;
  for (const auto& g : shard_optimizer.param_groups())
    for (const Tensor& t : g.params) shards.push_back(t);
  std::vector<Tensor> grads;
  double sq = 0;
  for (const Tensor& s : shards)
    if (s.grad().defined()) {
      grads.push_back(s.grad());
      sq += sum_of_squares(s.grad());
    }
  // Tied copies: their elements inside this rank's slice of each flat (Note [zero flat shards]).
  const std::set<std::string> copies = tied_copies(model_);
  if (!copies.empty()) {
    const int dp = model_.grid().dp(), r = model_.dp_rank();
    struct FlatLayout {
      DType dtype;
      Device device;
      int64_t numel = 0;
    };
    std::vector<FlatLayout> flats;
    std::vector<std::tuple<int, int64_t, int64_t>> spans;  // (flat, offset, numel) of the copies
    for (const auto& [name, p] : model_.local_named_parameters()) {
      auto it = std::find_if(flats.begin(), flats.end(),
                             [&](const FlatLayout& f) { return f.dtype == p.dtype() && f.device == p.device(); });
      if (it == flats.end()) {
        flats.push_back(FlatLayout{p.dtype(), p.device(), 0});
        it = flats.end() - 1;
      }
      if (copies.count(name)) spans.emplace_back(static_cast<int>(it - flats.begin()), it->numel, p.numel());
      it->numel += p.numel();
    }
    WEFT_CHECK(flats.size() == shards.size(), "GlobalNormClipper::clip_shards: the optimizer holds ", shards.size(),
               " shard tensors but the model's local parameters make ", flats.size(),
               " flats; pass the shard optimizer of this model's DistributedOptimizer");
    for (const auto& [f, offset, numel] : spans) {
      const int64_t s = (flats[f].numel + dp - 1) / dp;  // shard size
      const int64_t lo = std::max(offset, r * s), hi = std::min(offset + numel, (r + 1) * s);
      const Tensor& g = shards[f].grad();
      if (hi > lo && g.defined()) sq -= sum_of_squares(g.narrow(0, lo - r * s, hi - lo));
    }
    sq = std::max(sq, 0.0);
  }
  return finish(sq, 1.0, grads);
}

}  // namespace weft::parallel::hybrid
