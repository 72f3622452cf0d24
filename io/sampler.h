// Samplers: which dataset indices a DataLoader epoch visits, and in which order.
//
// Contract:
// - indices(epoch) is a pure function of the sampler's construction arguments
//   and `epoch`: the same call returns the same list on every call, thread and
//   process. Every entry lies in [0, dataset_size()); entries may repeat (a
//   DistributedSampler pads by wrapping around).
// - size() is the length of indices(epoch) for every epoch.
// - A DataLoader built with a sampler asks it for indices(loader.epoch()) at
//   each epoch start (DataLoader::set_epoch selects the epoch) and seeds each
//   example's transform by (loader seed, epoch, dataset index), so a sample's
//   augmentation does not depend on which sampler, rank or position served it.
// - SequentialSampler visits 0..n-1; RandomSampler a permutation seeded by
//   (seed, epoch) only (io/dataloader.h shuffle_seed, seeded_permutation). They
//   are the DataLoader's own orders for shuffle = false / true.
// - Other packages implement Sampler (parallel::DistributedSampler); io knows
//   nothing about them.
#pragma once

#include <cstdint>
#include <vector>

namespace weft::io {

class Sampler {
 public:
  virtual ~Sampler() = default;
  // The dataset indices of `epoch` in visiting order.
  virtual std::vector<int64_t> indices(int64_t epoch) const = 0;
  // Entries per epoch.
  virtual int64_t size() const = 0;
  // The size of the dataset the indices point into.
  virtual int64_t dataset_size() const = 0;
};

class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(int64_t dataset_size);
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const override { return n_; }
  int64_t dataset_size() const override { return n_; }

 private:
  int64_t n_;
};

class RandomSampler : public Sampler {
 public:
  RandomSampler(int64_t dataset_size, uint64_t seed);
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const override { return n_; }
  int64_t dataset_size() const override { return n_; }

 private:
  int64_t n_;
  uint64_t seed_;
};

}  // namespace weft::io
