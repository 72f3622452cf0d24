// DistributedSampler, GlobalBatchSampler and ShardDataset (parallel/data/sampler.h).
#include "parallel/data/sampler.h"

#include <algorithm>

#include "core/error.h"
#include "io/dataloader.h"

namespace weft::parallel {

DistributedSampler::DistributedSampler(int64_t dataset_size, int world_size, int rank,
                                       DistributedSamplerOptions options)
    : n_(dataset_size), world_(world_size), rank_(rank), options_(options) {
  WEFT_CHECK(dataset_size > 0, "DistributedSampler: dataset is empty");
  WEFT_CHECK(world_size >= 1, "DistributedSampler: world_size must be at least 1, got ", world_size);
  WEFT_CHECK(rank >= 0 && rank < world_size, "DistributedSampler: rank ", rank, " is outside [0, ", world_size, ")");
  WEFT_CHECK(!options_.drop_last || n_ >= world_, "DistributedSampler: drop_last with ", n_, " items on ", world_,
             " replicas leaves every replica without an index (floor(", n_, " / ", world_,
             ") = 0); use drop_last = false or fewer replicas");
  const int64_t per_rank = options_.drop_last ? n_ / world_ : (n_ + world_ - 1) / world_;
  total_ = per_rank * world_;
}

void DistributedSampler::set_epoch(int64_t epoch) {
  WEFT_CHECK(epoch >= 0, "DistributedSampler::set_epoch: epoch must be >= 0, got ", epoch);
  epoch_ = epoch;
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  WEFT_CHECK(epoch >= 0, "DistributedSampler::indices: epoch must be >= 0, got ", epoch);
  std::vector<int64_t> all;
  if (options_.shuffle) {
    all = io::seeded_permutation(n_, io::shuffle_seed(options_.seed, static_cast<uint64_t>(epoch)));
  } else {
    all.resize(n_);
    for (int64_t i = 0; i < n_; ++i) all[i] = i;
  }
  // pad with the list's own first entries (repeated when total - n > n), or cut the tail
  all.reserve(total_);
  for (int64_t i = n_; i < total_; ++i) all.push_back(all[i % n_]);
  all.resize(total_);
  std::vector<int64_t> mine;
  mine.reserve(total_ / world_);
  for (int64_t i = rank_; i < total_; i += world_) mine.push_back(all[i]);
  return mine;
}

std::shared_ptr<io::Dataset> DistributedSampler::shard(std::shared_ptr<const io::Dataset> base) const {
  WEFT_CHECK(base != nullptr, "DistributedSampler::shard: dataset is null");
  WEFT_CHECK(base->size() == n_, "DistributedSampler::shard: sampler was built for ", n_, " items but the dataset has ",
             base->size());
  return std::make_shared<ShardDataset>(std::move(base), indices());
}

GlobalBatchSampler::GlobalBatchSampler(int64_t dataset_size, int64_t global_batch, int replicas, int replica,
                                       GlobalBatchSamplerOptions options)
    : n_(dataset_size), batch_(global_batch), replicas_(replicas), replica_(replica), options_(options) {
  WEFT_CHECK(dataset_size > 0, "GlobalBatchSampler: dataset is empty");
  WEFT_CHECK(global_batch >= 1, "GlobalBatchSampler: the global batch must be at least 1, got ", global_batch);
  WEFT_CHECK(replicas >= 1, "GlobalBatchSampler: replicas must be at least 1, got ", replicas);
  WEFT_CHECK(replica >= 0 && replica < replicas, "GlobalBatchSampler: replica ", replica, " is outside [0, ", replicas,
             ")");
  WEFT_CHECK(global_batch % replicas == 0, "GlobalBatchSampler: the global batch ", global_batch,
             " does not divide among ", replicas, " replicas (remainder ", global_batch % replicas,
             "); make it a multiple of ", replicas);
  const int64_t rest = n_ % batch_;
  num_batches_ = n_ / batch_ + (rest > 0 && !options_.drop_last && rest >= replicas_ ? 1 : 0);
  WEFT_CHECK(options_.start_batch >= 0 && options_.start_batch <= num_batches_, "GlobalBatchSampler: start_batch ",
             options_.start_batch, " is outside [0, ", num_batches_, "] (", num_batches_, " global batches of ", batch_,
             " in an epoch of ", n_, " items)");
  for (int64_t k = options_.start_batch; k < num_batches_; ++k) size_ += shares(k)[replica_];
}

void GlobalBatchSampler::check_batch(int64_t k, const char* what) const {
  WEFT_CHECK(k >= 0 && k < num_batches_, "GlobalBatchSampler::", what, ": global batch ", k, " is outside [0, ",
             num_batches_, ")");
}

int64_t GlobalBatchSampler::batch_rows(int64_t k) const {
  check_batch(k, "batch_rows");
  return std::min(batch_, n_ - k * batch_);
}

std::vector<int64_t> GlobalBatchSampler::shares(int64_t k) const {
  const int64_t rows = batch_rows(k);
  std::vector<int64_t> out(static_cast<size_t>(replicas_), rows / replicas_);
  for (int64_t d = 0; d < rows % replicas_; ++d) ++out[d];  // torch.tensor_split: the first parts are larger
  return out;
}

int64_t GlobalBatchSampler::local_offset(int64_t k) const {
  const std::vector<int64_t> s = shares(k);
  int64_t off = 0;
  for (int d = 0; d < replica_; ++d) off += s[d];
  return off;
}

std::vector<int64_t> GlobalBatchSampler::order(int64_t epoch) const {
  WEFT_CHECK(epoch >= 0, "GlobalBatchSampler: epoch must be >= 0, got ", epoch);
  if (options_.shuffle)
    return io::seeded_permutation(n_, io::shuffle_seed(options_.seed, static_cast<uint64_t>(epoch)));
  std::vector<int64_t> all(static_cast<size_t>(n_));
  for (int64_t i = 0; i < n_; ++i) all[i] = i;
  return all;
}

std::vector<int64_t> GlobalBatchSampler::global_indices(int64_t epoch, int64_t k) const {
  check_batch(k, "global_indices");
  const std::vector<int64_t> all = order(epoch);
  const int64_t begin = k * batch_;
  return std::vector<int64_t>(all.begin() + begin, all.begin() + begin + batch_rows(k));
}

std::vector<int64_t> GlobalBatchSampler::local_indices(int64_t epoch, int64_t k) const {
  check_batch(k, "local_indices");
  const std::vector<int64_t> all = order(epoch);
  const int64_t begin = k * batch_ + local_offset(k);
  return std::vector<int64_t>(all.begin() + begin, all.begin() + begin + shares(k)[replica_]);
}

std::vector<int64_t> GlobalBatchSampler::indices(int64_t epoch) const {
  const std::vector<int64_t> all = order(epoch);
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(size_));
  for (int64_t k = options_.start_batch; k < num_batches_; ++k) {
    const int64_t begin = k * batch_ + local_offset(k);
    mine.insert(mine.end(), all.begin() + begin, all.begin() + begin + shares(k)[replica_]);
  }
  return mine;
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
