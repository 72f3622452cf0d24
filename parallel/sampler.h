// DistributedSampler: each rank's share of a dataset's indices per epoch
// (fastai's DistributedDL semantics).
//
// Contract:
// - The index list has total = ceil(n / world) * world entries: 0 .. total-1,
//   shuffled (when shuffle) by a permutation seeded by (seed, epoch) only — the
//   same on every rank — then each entry is taken modulo n, so the padding wraps
//   around to the first items (fastai: 50 items on 4 ranks → 52 entries, items 0
//   and 1 appear twice). Rank r takes entries r, r + world, r + 2*world, ...
//   Every rank gets total / world indices; together they cover every item.
// - It is an io::Sampler: DataLoader(dataset, options, sampler) with
//   options.shuffle = false, then loader.set_epoch(e) each epoch, visits this
//   rank's indices(e) in order, and seeds each example's transform by (loader
//   seed, e, dataset index): random augmentation changes every epoch and is the
//   same for an index whichever rank holds it (io/dataloader.h).
// - set_epoch(e) selects the epoch of the no-argument indices() and shard() (it
//   does not advance on its own); a DataLoader passes its own epoch instead.
// - ShardDataset is a Dataset view over one rank's indices of a base dataset
//   (shard()). A loader over it sees shard positions, not dataset indices, so
//   its transforms are seeded by position; prefer the sampler.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "io/dataset.h"
#include "io/sampler.h"

namespace weft::parallel {

struct DistributedSamplerOptions {
  bool shuffle = true;
  uint64_t seed = 0;
};

class DistributedSampler : public io::Sampler {
 public:
  DistributedSampler(int64_t dataset_size, int world_size, int rank, DistributedSamplerOptions options = {});
  void set_epoch(int64_t epoch);
  int64_t epoch() const { return epoch_; }
  int64_t dataset_size() const override { return n_; }
  int64_t total_size() const { return total_; }            // padded to a multiple of world_size
  int64_t num_samples() const { return total_ / world_; }  // per rank
  int64_t size() const override { return num_samples(); }
  // This rank's dataset indices for `epoch` (io::Sampler).
  std::vector<int64_t> indices(int64_t epoch) const override;
  // This rank's dataset indices for the current epoch (set_epoch).
  std::vector<int64_t> indices() const { return indices(epoch_); }
  // This rank's indices of the current epoch as a dataset over `base`.
  std::shared_ptr<io::Dataset> shard(std::shared_ptr<const io::Dataset> base) const;

 private:
  int64_t n_, total_;
  int world_, rank_;
  DistributedSamplerOptions options_;
  int64_t epoch_ = 0;
};

class ShardDataset : public io::Dataset {
 public:
  ShardDataset(std::shared_ptr<const io::Dataset> base, std::vector<int64_t> indices);
  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  io::Example get(int64_t i) const override;
  const std::vector<int64_t>& indices() const { return indices_; }

 private:
  std::shared_ptr<const io::Dataset> base_;
  std::vector<int64_t> indices_;
};

}  // namespace weft::parallel
