// DistributedOptimizer (contract in distributed_optimizer.h).
#include "parallel/hybrid/distributed_optimizer.h"

#include <iomanip>
#include <sstream>

#include "core/error.h"
#include "parallel/hybrid/gather_state.h"

namespace weft::parallel::hybrid {

DistributedOptimizer::DistributedOptimizer(DistributedModel& model, Factory factory)
    : model_(model), factory_(std::move(factory)) {
  WEFT_CHECK(factory_ != nullptr, "DistributedOptimizer: the optimizer factory is empty");
  if (model_.partitioned()) {
    build();
  } else {
    model_.register_post_partition_hook([this](DistributedModel&) { build(); });
  }
}

void DistributedOptimizer::build() {
  built_ = true;
  optim::NamedParameters params = model_.local_named_parameters();
  if (params.empty()) return;  // a stage of parameter-free layers: no optimizer (a data-parallel group agrees)
  if (model_.options().shard_optimizer_state) {
    Factory f = factory_;
    auto shard_factory = [f](std::vector<Tensor> shards) {
      optim::NamedParameters named;
      for (size_t i = 0; i < shards.size(); ++i) named.emplace_back("shard" + std::to_string(i), shards[i]);
      return f(named);
    };
    zero_ = std::make_unique<ZeroOptimizer>(std::move(params), model_.grid().data_parallel(), shard_factory,
                                            ZeroOptions{ZeroGrads::kAverage});
  } else {
    plain_ = factory_(params);
    WEFT_CHECK(plain_ != nullptr, "DistributedOptimizer: the factory returned no optimizer");
  }
}

void DistributedOptimizer::check_built(const char* what) const {
  WEFT_CHECK(built_, "DistributedOptimizer::", what,
             ": the model is not partitioned yet (it is at its first step(), or call partition())");
}

void DistributedOptimizer::step() {
  check_built("step");
  if (zero_) zero_->step();
  else if (plain_) plain_->step();
}

void DistributedOptimizer::zero_grad(bool set_to_none) {
  if (zero_) zero_->zero_grad(set_to_none);
  else if (plain_) plain_->zero_grad(set_to_none);
  // Not partitioned yet: no gradients exist.
}

optim::Optimizer& DistributedOptimizer::inner() {
  check_built("inner");
  WEFT_CHECK(plain_ || zero_, "DistributedOptimizer::inner: rank ", model_.grid().rank(),
             " holds no parameters (its stages are parameter-free), so it has no optimizer");
  return zero_ ? zero_->inner() : *plain_;
}

optim::OptimizerStateDict DistributedOptimizer::local_state_dict() const {
  check_built("local_state_dict");
  if (!plain_ && !zero_) return {};
  return zero_ ? zero_->local_state_dict() : plain_->state_dict_by_name();
}

optim::OptimizerStateDict DistributedOptimizer::state_dict() {
  check_built("state_dict");
  // The stage's whole by-name dict, from data-parallel rank 0 of each stage.
  optim::OptimizerStateDict stage =
      zero_ ? zero_->state_dict(/*root=*/0) : (plain_ ? plain_->state_dict_by_name() : optim::OptimizerStateDict{});
  if (model_.dp_rank() != 0) stage.clear();
  return allgather_tensor_maps(*model_.grid().world(), stage);
}

std::vector<std::string> DistributedOptimizer::load_state_dict(const optim::OptimizerStateDict& sd) {
  check_built("load_state_dict");
  if (!plain_ && !zero_) {
    std::vector<std::string> keys;
    for (const auto& [k, t] : sd) keys.push_back(k);
    return keys;
  }
  return zero_ ? zero_->load_state_dict(sd) : plain_->load_state_dict_by_name(sd);
}

void DistributedOptimizer::load_local_state_dict(const optim::OptimizerStateDict& sd) {
  check_built("load_local_state_dict");
  if (zero_) return zero_->load_local_state_dict(sd);
  if (!plain_) {
    WEFT_CHECK(sd.empty(), "DistributedOptimizer::load_local_state_dict: rank ", model_.grid().rank(),
               " holds no parameters but got ", sd.size(), " entries (first '", sd.begin()->first, "')");
    return;
  }
  const std::vector<std::string> left = plain_->load_state_dict_by_name(sd);
  WEFT_CHECK(left.empty(), "DistributedOptimizer::load_local_state_dict on rank ", model_.grid().rank(), ": '",
             left.empty() ? "" : left.front(), "' (and ", left.size() - 1,
             " more) is not an entry of this rank's parameters");
}

int64_t DistributedOptimizer::state_bytes() const {
  check_built("state_bytes");
  if (zero_) return zero_->state_bytes();
  int64_t n = 0;
  if (!plain_) return 0;
  for (const auto& [k, t] : plain_->state_dict_by_name())
    if (k.rfind("state.", 0) == 0) n += static_cast<int64_t>(t.nbytes());
  return n;
}

std::string DistributedOptimizer::memory_summary() const {
  check_built("memory_summary");
  if (zero_) return zero_->memory_summary();
  std::ostringstream os;
  os << "optimizer state: " << std::fixed << std::setprecision(4) << static_cast<double>(state_bytes()) / (1 << 20)
     << " MiB per rank (not sharded)";
  return os.str();
}

}  // namespace weft::parallel::hybrid
