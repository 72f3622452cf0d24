// DistributedSampler and ShardDataset (parallel/sampler.h).
#include "parallel/sampler.h"

#include "core/error.h"
#include "io/dataloader.h"

namespace weft::parallel {

DistributedSampler::DistributedSampler(int64_t dataset_size, int world_size, int rank,
                                       DistributedSamplerOptions options)
    : n_(dataset_size), world_(world_size), rank_(rank), options_(options) {
  WEFT_CHECK(dataset_size > 0, "DistributedSampler: dataset is empty");
  WEFT_CHECK(world_size >= 1, "DistributedSampler: world_size must be at least 1, got ", world_size);
  WEFT_CHECK(rank >= 0 && rank < world_size, "DistributedSampler: rank ", rank, " is outside [0, ", world_size, ")");
  total_ = (n_ + world_ - 1) / world_ * world_;
}

void DistributedSampler::set_epoch(int64_t epoch) {
  WEFT_CHECK(epoch >= 0, "DistributedSampler::set_epoch: epoch must be >= 0, got ", epoch);
  epoch_ = epoch;
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  WEFT_CHECK(epoch >= 0, "DistributedSampler::indices: epoch must be >= 0, got ", epoch);
  std::vector<int64_t> all;
  if (options_.shuffle) {
    all = io::seeded_permutation(total_, io::shuffle_seed(options_.seed, static_cast<uint64_t>(epoch)));
  } else {
    all.resize(total_);
    for (int64_t i = 0; i < total_; ++i) all[i] = i;
  }
  std::vector<int64_t> mine;
  mine.reserve(total_ / world_);
  for (int64_t i = rank_; i < total_; i += world_) mine.push_back(all[i] % n_);
  return mine;
}

std::shared_ptr<io::Dataset> DistributedSampler::shard(std::shared_ptr<const io::Dataset> base) const {
  WEFT_CHECK(base != nullptr, "DistributedSampler::shard: dataset is null");
  WEFT_CHECK(base->size() == n_, "DistributedSampler::shard: sampler was built for ", n_, " items but the dataset has ",
             base->size());
  return std::make_shared<ShardDataset>(std::move(base), indices());
}

ShardDataset::ShardDataset(std::shared_ptr<const io::Dataset> base, std::vector<int64_t> indices)
    : base_(std::move(base)), indices_(std::move(indices)) {
  WEFT_CHECK(base_ != nullptr, "ShardDataset: dataset is null");
  for (int64_t i : indices_)
    WEFT_CHECK(i >= 0 && i < base_->size(), "ShardDataset: index ", i, " is outside [0, ", base_->size(), ")");
}

io::Example ShardDataset::get(int64_t i) const {
  WEFT_CHECK(i >= 0 && i < size(), "ShardDataset: index ", i, " is outside [0, ", size(), ")");
  return base_->get(indices_[i]);
}

}  // namespace weft::parallel
