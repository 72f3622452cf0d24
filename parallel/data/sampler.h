// DistributedSampler: each rank's share of a dataset's indices per epoch
// (PyTorch's DistributedSampler semantics). GlobalBatchSampler: the same global
// batches in the same order whatever the number of data-parallel replicas,
// each dealt to the replicas.
//
// Contract (DistributedSampler(n, world, rank, options)):
// - Epoch e's list: with shuffle, seeded_permutation(n, shuffle_seed(seed, e))
//   (io/dataloader.h; the single-process shuffled loader's order, the same on
//   every rank), else 0 .. n-1. Then, as PyTorch's DistributedSampler:
//   drop_last = false (the default) pads the list to total = ceil(n / world) * world
//   entries by repeating its own first entries (list += list[:padding], the list
//   repeated as often as needed when padding > n), so 50 items on 4 ranks give 52
//   entries whose last two repeat the epoch's first two; drop_last = true cuts the
//   list's tail to total = floor(n / world) * world entries (an error when that
//   leaves the ranks nothing, n < world). Rank r takes entries r, r + world,
//   r + 2*world, ...: every rank gets total / world indices; without drop_last
//   they cover every item, and exactly once when world divides n.
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
//
// Contract (GlobalBatchSampler(n, B, R, d, options)):
// - Epoch e's order is the single-process DataLoader's with the same seed:
//   with shuffle, seeded_permutation(n, shuffle_seed(seed, e)) (io/dataloader.h,
//   io::RandomSampler), else 0..n-1. Global batch k is positions
//   [k*B, (k+1)*B) of that order, whatever R is.
// - Dealing: B must be a multiple of R (an error naming B, R and the
//   remainder otherwise); replica d takes rows [d*B/R, (d+1)*B/R) of each full
//   global batch, so the replicas' local batches k, concatenated in replica
//   order, are global batch k. With R = 1 the sampler is the single-process
//   loader's order.
// - The last global batch when B does not divide n (r = n mod B rows):
//   drop_last drops it. Otherwise it is dealt as torch.tensor_split deals r
//   rows into R parts: replica d gets r / R rows, plus one when d < r mod R,
//   in replica order. When r < R some replica would get no row, and a replica
//   without a batch would fall out of step with the others' collectives, so
//   then the partial batch is dropped too (only then do grids with different R
//   see different data). shares(k) gives every replica's row count for global
//   batch k, the same on every rank: skip a batch on all ranks by it, never by
//   the local row count alone. (Replicas that average their mean-loss
//   gradients with equal weight reproduce the global batch's mean only when
//   the shares are equal, i.e. when R divides r.)
// - num_batches() counts an epoch's global batches (the kept partial one
//   included). options.start_batch = K skips the first K global batches of
//   every epoch this sampler serves (resuming mid-epoch at global step K: use
//   such a sampler for the interrupted epoch, one with K = 0 for the next);
//   the loader's batch b is then global batch K + b. 0 <= K <= num_batches().
// - It is an io::Sampler: indices(e) is this replica's local batches K ..
//   num_batches()-1 concatenated; use it in a DataLoader with batch_size =
//   local_batch() (B / R) and drop_last = false, so that the loader's batches
//   are exactly the local batches (only the last may be smaller). Transforms
//   are seeded by (loader seed, e, dataset index) as for DistributedSampler.
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
  bool drop_last = false;  // cut the tail to floor(n / world) per rank (else pad to ceil(n / world))
};

class DistributedSampler : public io::Sampler {
 public:
  DistributedSampler(int64_t dataset_size, int world_size, int rank, DistributedSamplerOptions options = {});
  void set_epoch(int64_t epoch);
  int64_t epoch() const { return epoch_; }
  int64_t dataset_size() const override { return n_; }
  int64_t total_size() const { return total_; }            // padded (or cut) to a multiple of world_size
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

struct GlobalBatchSamplerOptions {
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;   // drop a last partial global batch (else dealt as tensor_split)
  int64_t start_batch = 0;  // skip the first start_batch global batches of each epoch
};

class GlobalBatchSampler : public io::Sampler {
 public:
  GlobalBatchSampler(int64_t dataset_size, int64_t global_batch, int replicas, int replica,
                     GlobalBatchSamplerOptions options = {});
  int64_t dataset_size() const override { return n_; }
  int64_t global_batch() const { return batch_; }
  int replicas() const { return replicas_; }
  int replica() const { return replica_; }
  const GlobalBatchSamplerOptions& options() const { return options_; }
  // The DataLoader's batch_size: global_batch() / replicas().
  int64_t local_batch() const { return batch_ / replicas_; }
  // Global batches per epoch (full ones, plus the partial one when kept).
  int64_t num_batches() const { return num_batches_; }
  int64_t start_batch() const { return options_.start_batch; }
  // Rows of global batch k (B, or r for a kept partial last batch).
  int64_t batch_rows(int64_t k) const;
  // Rows of global batch k for each replica, in replica order.
  std::vector<int64_t> shares(int64_t k) const;
  // The dataset indices of global batch k of `epoch` (all replicas), and this replica's part of it.
  std::vector<int64_t> global_indices(int64_t epoch, int64_t k) const;
  std::vector<int64_t> local_indices(int64_t epoch, int64_t k) const;
  // io::Sampler: this replica's local batches start_batch .. num_batches()-1 of `epoch`, concatenated.
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const override { return size_; }

 private:
  std::vector<int64_t> order(int64_t epoch) const;  // the epoch's permutation
  int64_t local_offset(int64_t k) const;            // first row of this replica within global batch k
  void check_batch(int64_t k, const char* what) const;

  int64_t n_, batch_;
  int replicas_, replica_;
  GlobalBatchSamplerOptions options_;
  int64_t num_batches_ = 0, size_ = 0;
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
