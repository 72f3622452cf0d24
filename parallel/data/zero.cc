// ZeroOptimizer: construction (checks, the cross-rank parameter comparison,
// the flat layout of Note [zero flat shards]), step, zero_grad and the memory
// accounting. The state dicts are in zero_state.cc.
#include "parallel/data/zero.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>
#include <unordered_set>
#include <utility>

#include "core/autograd_meta.h"
#include "parallel/comm/rank_agreement.h"

namespace weft::parallel {
namespace {

std::string describe(const std::string& name, const Tensor& t) {
  std::ostringstream os;
  os << "'" << name << "' " << shape_str(t.sizes()) << " " << t.dtype() << " on " << t.device();
  return os.str();
}

}  // namespace

ZeroOptimizer::ZeroOptimizer(optim::NamedParameters params, std::shared_ptr<ProcessGroup> group,
                             ShardOptimizerFactory factory, ZeroOptions options)
    : group_(std::move(group)), options_(options) {
  WEFT_CHECK(group_ != nullptr, "ZeroOptimizer: the process group is null");
  WEFT_CHECK(factory != nullptr, "ZeroOptimizer: the optimizer factory is empty");
  WEFT_CHECK(!params.empty(), "ZeroOptimizer: got an empty parameter list");
  std::set<std::string> names;
  std::unordered_set<const TensorImpl*> seen;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& [name, p] = params[i];
    WEFT_CHECK(!name.empty(), "ZeroOptimizer: parameter ", i, " has an empty name");
    WEFT_CHECK(names.insert(name).second, "ZeroOptimizer: parameter name '", name, "' appears more than once");
    WEFT_CHECK(p.defined(), "ZeroOptimizer: parameter '", name, "' is undefined");
    WEFT_CHECK(p.is_floating_point(), "ZeroOptimizer: can only optimize floating-point tensors, parameter '", name,
               "' has dtype ", p.dtype());
    WEFT_CHECK(p.is_leaf(), "ZeroOptimizer: can't optimize a non-leaf tensor (parameter '", name, "')");
    WEFT_CHECK(seen.insert(p.impl()).second, "ZeroOptimizer: parameter '", name,
               "' is the same tensor as an earlier parameter");
  }
  for (auto& [name, p] : params) params_.push_back(Param{name, p, 0, 0});
  verify_same_parameters();

  // ---- the flats: (dtype, device) in order of first appearance ----
  const int dp = group_->size();
  for (int i = 0; i < static_cast<int>(params_.size()); ++i) {
    Param& p = params_[i];
    auto it = std::find_if(flats_.begin(), flats_.end(),
                           [&](const Flat& f) { return f.dtype == p.tensor.dtype() && f.device == p.tensor.device(); });
    if (it == flats_.end()) {
      flats_.push_back(Flat{});
      flats_.back().dtype = p.tensor.dtype();
      flats_.back().device = p.tensor.device();
      it = flats_.end() - 1;
    }
    p.flat = static_cast<int>(it - flats_.begin());
    p.offset = it->numel;
    it->numel += p.tensor.numel();
    it->params.push_back(i);
  }
  NoGradGuard no_grad;
  std::vector<Tensor> shards;
  for (Flat& f : flats_) {
    f.shard = (f.numel + dp - 1) / dp;
    f.padded = f.shard * dp;
    f.shard_param = zeros({f.shard}, TensorOptions{f.dtype, f.device});  // (S,)
    shards.push_back(f.shard_param);
  }
  inner_ = factory(shards);
  WEFT_CHECK(inner_ != nullptr, "ZeroOptimizer: the optimizer factory returned null");
  std::unordered_set<const TensorImpl*> held;
  size_t count = 0;
  for (const auto& g : inner_->param_groups())
    for (const auto& t : g.params) {
      held.insert(t.impl());
      ++count;
    }
  for (size_t f = 0; f < flats_.size(); ++f)
    WEFT_CHECK(held.count(flats_[f].shard_param.impl()), "ZeroOptimizer: the factory's ", inner_->name(),
               " does not hold shard ", f, " (", flats_[f].dtype, "); build it over the tensors the factory gets");
  WEFT_CHECK(count == flats_.size(), "ZeroOptimizer: the factory's ", inner_->name(), " holds ", count,
             " tensors but there are ", flats_.size(), " shards; build it over exactly the tensors the factory gets");
}

void ZeroOptimizer::verify_same_parameters() {
  std::vector<std::string> desc;
  for (const Param& p : params_) desc.push_back(describe(p.name, p.tensor));
  const auto d = first_disagreement(*group_, desc, "no parameter");
  if (!d) return;
  std::ostringstream os;
  os << "ZeroOptimizer: ranks of the group hold different parameter lists; first difference at parameter #" << d->index
     << ":";
  for (size_t r = 0; r < d->entries.size(); ++r)
    os << (r ? "," : "") << " rank " << r << " has " << d->entries[r] << " (of " << d->counts[r] << ")";
  WEFT_ERROR(os.str());
}

void ZeroOptimizer::step() {
  NoGradGuard no_grad;
  const int dp = group_->size(), rank = group_->rank();
  // Gradient checks first: a bad gradient is an error before any communication.
  for (const Param& p : params_) {
    const Tensor g = p.tensor.grad();
    if (!g.defined()) continue;
    WEFT_CHECK(g.sizes() == p.tensor.sizes() && g.dtype() == p.tensor.dtype() && g.device() == p.tensor.device(),
               "ZeroOptimizer.step: the gradient of parameter '", p.name, "' is ", shape_str(g.sizes()), " ", g.dtype(),
               " on ", g.device(), " but the parameter is ", shape_str(p.tensor.sizes()), " ", p.tensor.dtype(), " on ",
               p.tensor.device());
  }

  // ---- the shard gradients: reduce_scatter of the flat gradients, or the owned slices ----
  std::vector<Tensor> shard_grads, keep;  // keep: the flat gradients until their reductions finish
  std::vector<WorkPtr> works;
  for (Flat& f : flats_) {
    const int64_t lo = rank * f.shard, hi = lo + f.shard;
    if (options_.grads == ZeroGrads::kReduced) {
      Tensor sg = zeros({f.shard}, TensorOptions{f.dtype, f.device});  // (S,)
      for (int i : f.params) {
        const Param& p = params_[i];
        const int64_t a = std::max(lo, p.offset), b = std::min(hi, p.offset + p.tensor.numel());
        const Tensor g = p.tensor.grad();
        if (a >= b || !g.defined()) continue;
        sg.narrow(0, a - lo, b - a).copy_(g.reshape({-1}).narrow(0, a - p.offset, b - a));
      }
      shard_grads.push_back(sg);
      continue;
    }
    Tensor flat = zeros({f.padded}, TensorOptions{f.dtype, f.device});  // (P,)
    for (int i : f.params) {
      const Param& p = params_[i];
      const Tensor g = p.tensor.grad();
      if (g.defined() && p.tensor.numel() > 0)
        flat.narrow(0, p.offset, p.tensor.numel()).copy_(g.reshape({p.tensor.numel()}));
    }
    std::vector<Tensor> inputs;
    for (int r = 0; r < dp; ++r) inputs.push_back(flat.narrow(0, r * f.shard, f.shard));
    Tensor sg = empty({f.shard}, TensorOptions{f.dtype, f.device});  // (S,)
    ReduceScatterOptions o;
    o.op = options_.grads == ZeroGrads::kSum ? ReduceOp::Sum : ReduceOp::Avg;
    works.push_back(group_->reduce_scatter(sg, inputs, o));
    shard_grads.push_back(sg);
    keep.push_back(flat);
  }
  for (auto& w : works) w->wait();
  keep.clear();

  // ---- the shards' values from the parameters, then the update ----
  for (size_t fi = 0; fi < flats_.size(); ++fi) {
    Flat& f = flats_[fi];
    const int64_t lo = rank * f.shard, hi = lo + f.shard;
    for (int i : f.params) {
      const Param& p = params_[i];
      const int64_t a = std::max(lo, p.offset), b = std::min(hi, p.offset + p.tensor.numel());
      if (a < b)
        f.shard_param.narrow(0, a - lo, b - a).copy_(p.tensor.detach().reshape({-1}).narrow(0, a - p.offset, b - a));
    }
    f.shard_param.set_grad(shard_grads[fi]);
  }
  shard_grads.clear();
  try {
    inner_->step();
  } catch (...) {
    for (Flat& f : flats_) f.shard_param.zero_grad();
    throw;
  }
  for (Flat& f : flats_) f.shard_param.zero_grad();

  // ---- allgather the shards and write every parameter ----
  std::vector<Tensor> flats;
  works.clear();
  for (Flat& f : flats_) {
    Tensor flat = empty({f.padded}, TensorOptions{f.dtype, f.device});  // (P,)
    std::vector<Tensor> outputs;
    for (int r = 0; r < dp; ++r) outputs.push_back(flat.narrow(0, r * f.shard, f.shard));
    works.push_back(group_->allgather(outputs, f.shard_param));
    flats.push_back(flat);
  }
  for (auto& w : works) w->wait();
  for (size_t fi = 0; fi < flats_.size(); ++fi)
    for (int i : flats_[fi].params) {
      Param& p = params_[i];
      if (p.tensor.numel() == 0) continue;
      p.tensor.copy_(flats[fi].narrow(0, p.offset, p.tensor.numel()).view(p.tensor.sizes()));
    }
}

void ZeroOptimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (Param& p : params_) {
    Tensor g = p.tensor.grad();
    if (!g.defined()) continue;
    if (set_to_none) {
      p.tensor.zero_grad();
    } else {
      g.zero_();
    }
  }
}

int64_t ZeroOptimizer::state_bytes() const {
  int64_t bytes = 0;
  for (const Flat& f : flats_)
    for (const auto& [name, t] : inner_->state(f.shard_param)) bytes += static_cast<int64_t>(t.nbytes());
  return bytes;
}

int64_t ZeroOptimizer::unsharded_state_bytes() const {
  int64_t bytes = 0;
  for (const Flat& f : flats_)
    for (const auto& [name, t] : inner_->state(f.shard_param))
      bytes += name == "step" ? static_cast<int64_t>(t.nbytes() * f.params.size())
                              : f.numel * static_cast<int64_t>(t.element_size());
  return bytes;
}

std::string ZeroOptimizer::memory_summary() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "optimizer state: %.4f MiB per rank (%.4f MiB unsharded, dp %d)",
                static_cast<double>(state_bytes()) / (1024.0 * 1024.0),
                static_cast<double>(unsharded_state_bytes()) / (1024.0 * 1024.0), group_->size());
  return buf;
}

optim::NamedParameters ZeroOptimizer::shard_names() const {
  optim::NamedParameters out;
  for (size_t f = 0; f < flats_.size(); ++f) out.emplace_back("shard" + std::to_string(f), flats_[f].shard_param);
  return out;
}

}  // namespace weft::parallel
