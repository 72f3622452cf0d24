// DataLoader: batches of a Dataset in a Sampler's order, optionally
// transformed, built synchronously or by background prefetch threads.
//
// Contract:
// - An epoch visits the indices of its sampler's indices(epoch) in that order
//   (drop_last drops the final partial batch); set_epoch(e) selects the epoch
//   (it does not advance on its own, like PyTorch's DistributedSampler). Without
//   a sampler the loader makes its own (io/sampler.h): with shuffle a
//   RandomSampler(seed), a permutation seeded by (seed, epoch) only; without,
//   a SequentialSampler, 0..N-1. A sampler and shuffle = true together are an
//   error (shuffling is the sampler's job), as is a sampler built for a dataset
//   of another size.
// - The transform (optional) is applied to each example with a Generator seeded by
//   (seed, epoch, dataset index) (example_seed), so batches are identical for any
//   num_workers, including 0, and an example's augmentation depends only on its
//   dataset index and the epoch, not on the sampler or its position (a
//   DistributedSampler's rank gets the same augmentation for an index as a
//   single-process loader with the same seed). While the transform runs, that
//   Generator is also its thread's default generator (GeneratorScope,
//   core/rng.h), so random ops it calls (rand, randn, dropout) draw from it
//   too and never from, or move, the process's stream.
// - num_workers = 0 builds batches on the consumer's thread. num_workers > 0
//   starts that many threads per epoch; at most num_workers * prefetch_factor
//   batches are built ahead of the consumer, and batches are delivered in order.
// - An exception thrown while building a batch (dataset, transform or collate) is
//   rethrown to the consumer when it reaches that batch; the epoch then ends.
// - Workers are stopped and joined when the epoch ends, when the iterator of an
//   epoch is destroyed early (a `break` out of a range-for), when begin()/reset()
//   starts over, and on destruction. No thread outlives the DataLoader.
// - One consumer: the DataLoader itself is not thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "io/dataset.h"
#include "io/sampler.h"

namespace weft::io {

struct DataLoaderOptions {
  int64_t batch_size = 1;
  bool shuffle = false;  // without a sampler: RandomSampler(seed) instead of SequentialSampler
  uint64_t seed = 0;
  bool drop_last = false;
  int num_workers = 0;      // background threads; 0 = synchronous
  int prefetch_factor = 2;  // batches in flight per worker
};

// Seeds derived from the loader seed: the epoch's shuffle and each example's transform.
uint64_t shuffle_seed(uint64_t seed, uint64_t epoch);
uint64_t example_seed(uint64_t seed, uint64_t epoch, uint64_t index);

// A uniformly shuffled permutation of 0..n-1 (Fisher-Yates on Philox values).
std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed);

class DataLoader {
 public:
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options, ExampleTransform transform = nullptr);
  // Visits `sampler`'s indices (options.shuffle must be false).
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options, std::shared_ptr<const Sampler> sampler,
             ExampleTransform transform = nullptr);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  void set_epoch(int64_t epoch);  // takes effect at the next epoch start
  int64_t epoch() const { return epoch_; }
  const DataLoaderOptions& options() const { return options_; }
  const Dataset& dataset() const { return *dataset_; }
  const Sampler& sampler() const { return *sampler_; }
  int64_t num_batches() const;  // batches per epoch
  int64_t size() const { return num_batches(); }
  // The dataset indices of `epoch` in visiting order (before drop_last): the sampler's.
  std::vector<int64_t> indices(int64_t epoch) const;

  // Next batch of the current epoch (starting one if none is running);
  // std::nullopt once the epoch is exhausted, after which the next call starts
  // the same epoch again (call set_epoch to change it).
  std::optional<Batch> next();
  // Ends the current epoch early, joining the workers.
  void reset();

  class Iterator {
   public:
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    Iterator(Iterator&& o) noexcept;
    Iterator& operator=(Iterator&& o) noexcept;
    Iterator(const Iterator&) = delete;
    Iterator& operator=(const Iterator&) = delete;
    ~Iterator();
    Batch& operator*() { return *current_; }
    Batch* operator->() { return &*current_; }
    Iterator& operator++();
    bool operator==(const Iterator& o) const { return done() == o.done(); }
    bool operator!=(const Iterator& o) const { return !(*this == o); }

   private:
    friend class DataLoader;
    Iterator() = default;  // end
    Iterator(DataLoader* loader, uint64_t generation);
    bool done() const { return !current_.has_value(); }
    DataLoader* loader_ = nullptr;
    uint64_t generation_ = 0;
    std::optional<Batch> current_;
  };
  // Starts a new epoch (ending any running one) and returns its first batch.
  Iterator begin();
  Iterator end() { return Iterator(); }

 private:
  struct Epoch;
  void start_epoch();
  void stop_epoch();
  Batch build_batch(const Epoch& ep, int64_t b) const;
  void worker_loop(Epoch* ep);

  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  std::shared_ptr<const Sampler> sampler_;
  ExampleTransform transform_;
  int64_t epoch_ = 0;
  uint64_t generation_ = 0;  // bumped at each epoch start
  std::unique_ptr<Epoch> running_;
};

}  // namespace weft::io
