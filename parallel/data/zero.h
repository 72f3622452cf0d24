// ZeroOptimizer: ZeRO stage 1 (DeepSpeed's optimizer-state partitioning;
// PyTorch's ZeroRedundancyOptimizer in purpose): any weft optimizer's state
// divided over a data-parallel group. Each rank updates only its shard of the
// parameters and keeps only that shard's optimizer state (momentum, exp_avg,
// exp_avg_sq), then the updated parameters are all-gathered.
//
// Design (Note [zero flat shards]): flat buffers, not per-parameter ownership.
// The parameters are grouped by (dtype, device) into "flats", in list order;
// a flat of N elements is padded to P = ceil(N / dp) * dp and rank r owns the
// contiguous elements [r * S, (r + 1) * S), S = P / dp. The inner optimizer is
// made (by the caller's factory) over one 1-d shard tensor (S,) per flat, so
// SGD, Adam and AdamW work unchanged. Why flat: the split is exact (every
// rank holds S elements of state; per-parameter ownership can only balance
// greedily, and a model with one huge matrix cannot be split at all), the
// gradient reduction is one reduce_scatter and the parameter exchange one
// allgather per flat (their volume is one allreduce's, the ZeRO-1 claim), and
// results equal the unsharded optimizer's for optimizers whose update is
// elementwise (SGD, Adam, AdamW: the same arithmetic on the same elements).
// The price is paid in the state dicts: they are re-sliced per parameter.
//
// Contract:
// - Construction is collective over `group`: every rank passes the same named
//   parameters (names, shapes, dtypes, devices, in the same order); a
//   difference is an error on every rank naming the first differing entry and
//   what each rank holds. Parameters: defined floating-point leaves with
//   distinct, non-empty names, each tensor once. The factory is called once
//   with the shard tensors (one per flat, in flat order) and must return an
//   optimizer holding exactly those tensors; per-parameter groups are not
//   possible (a shard mixes parameters), hyper-parameters are per flat.
// - step() (collective): per flat, the parameters' gradients are reduced into
//   this rank's shard gradient according to ZeroOptions::grads: kAverage
//   (local gradients, e.g. of the rank's mean loss: reduce_scatter Avg, the
//   gradient DDP would have made), kSum (reduce_scatter Sum), kReduced (the
//   gradients are already averaged over the group by DDP or a Reducer: the
//   owned slice is copied, no gradient communication). The shard's values
//   are refreshed from the parameters (so edits between steps are honoured),
//   the inner optimizer steps, and the shards are all-gathered and written
//   into every parameter (bumping its version), bitwise equal on all ranks.
//   Every parameter is updated at every step: a missing .grad counts as zeros
//   (DeepSpeed's convention; a plain optimizer would skip that parameter). A
//   gradient of another shape, dtype or device is an error naming the
//   parameter. Padding elements stay zero and are never written back.
// - zero_grad(set_to_none) acts on the parameters' gradients.
// - state_bytes(): the bytes of optimizer state this rank holds (its shards'
//   state tensors). unsharded_state_bytes(): what the unsharded optimizer
//   holds for the same state (elementwise state for N, not P, elements; the
//   0-dim "step" once per parameter). memory_summary() prints both.
// - Note [zero state dicts]: state_dict() is collective and returns the
//   unsharded optimizer's by-name dict (Note [optimizer state by name] in
//   optim/optimizer.h): "state.<param>.<state>" with the parameter's shape
//   (elementwise state gathered and sliced), "state.<param>.step" (0-dim, the
//   flat's count, shared by its parameters), "options.<param>.<opt>" (the
//   flat's group options). With root >= 0 only that rank receives it (a gather
//   by point-to-point, tag kZeroGatherTag); the others return an empty dict.
//   "step" is the only state treated as a scalar, as in Optimizer.
//   load_state_dict(sd) (local, no communication) takes such a dict, from any
//   dp, and builds this rank's shards from it; it checks, before changing
//   anything, that every parameter has its options and that a flat's
//   parameters agree on them, that a flat's parameters all have the same state
//   names (or none), shapes, and equal "step" values; errors name the
//   parameter. Entries of other parameters are returned (e.g. another pipeline
//   stage's), as load_state_dict_by_name does; keys of a positional or a local
//   dict are errors.
//   local_state_dict() is this rank's shard without communication: the inner
//   optimizer's by-name dict over the shard names "shard<f>" plus the layout
//   ("layout.dp", "layout.rank" int64 0-dim; "layout.shard<f>" int64 (3,):
//   N, P, dtype code; "layout.param.<name>" int64 (3,): flat, offset, numel;
//   written and read only by ZeroLayout, zero_layout.h).
//   load_local_state_dict() requires the same layout (same dp, rank and
//   parameters), else an error naming the first difference.
// - Every rank must call the collective methods in the same order. Not
//   thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "optim/optimizer.h"
#include "parallel/comm/process_group.h"
#include "parallel/data/zero_layout.h"

namespace weft::parallel {

// Makes the inner optimizer over the shard tensors, e.g.
//   [](std::vector<Tensor> s) { return std::make_unique<optim::AdamW>(std::move(s), opts); }
using ShardOptimizerFactory = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor> shards)>;

// How step() turns the parameters' gradients into the shard gradient.
enum class ZeroGrads {
  kAverage,  // local gradients: reduce_scatter Avg over the group
  kSum,      // local gradients: reduce_scatter Sum
  kReduced,  // already averaged over the group (DDP, a Reducer): take the owned slice
};

struct ZeroOptions {
  ZeroGrads grads = ZeroGrads::kAverage;
};

// The point-to-point tag of state_dict(root)'s gather.
inline constexpr int kZeroGatherTag = 0x2e20;

class ZeroOptimizer {
 public:
  // One flat buffer's layout: parameters `params` (indices into params()).
  struct Flat {
    DType dtype;
    Device device;
    int64_t numel = 0;   // N: the parameters' elements
    int64_t padded = 0;  // P = ceil(N / dp) * dp
    int64_t shard = 0;   // S = P / dp
    std::vector<int> params;
    Tensor shard_param;  // (S,): this rank's elements [rank * S, (rank + 1) * S)
  };
  struct Param {
    std::string name;
    Tensor tensor;
    int flat = 0;
    int64_t offset = 0;  // within the flat
  };

  ZeroOptimizer(optim::NamedParameters params, std::shared_ptr<ProcessGroup> group, ShardOptimizerFactory factory,
                ZeroOptions options = {});
  ZeroOptimizer(const ZeroOptimizer&) = delete;
  ZeroOptimizer& operator=(const ZeroOptimizer&) = delete;

  void step();
  void zero_grad(bool set_to_none = true);

  // The optimizer over the shards (hyper-parameters, LR schedulers).
  optim::Optimizer& inner() { return *inner_; }
  const optim::Optimizer& inner() const { return *inner_; }
  ProcessGroup& group() { return *group_; }
  const ZeroOptions& options() const { return options_; }
  const std::vector<Param>& params() const { return params_; }
  const std::vector<Flat>& flats() const { return flats_; }

  int64_t state_bytes() const;
  int64_t unsharded_state_bytes() const;
  // "optimizer state: 0.0042 MiB per rank (0.0168 MiB unsharded, dp 4)"
  std::string memory_summary() const;

  // Note [zero state dicts].
  optim::OptimizerStateDict state_dict(int root = -1);  // collective
  std::vector<std::string> load_state_dict(const optim::OptimizerStateDict& sd);
  optim::OptimizerStateDict local_state_dict() const;
  void load_local_state_dict(const optim::OptimizerStateDict& sd);
  // This rank's layout, as local_state_dict() records it (zero_layout.h).
  ZeroLayout layout() const;

 private:
  void verify_same_parameters();
  // The shard tensors named "shard<f>" for the inner optimizer's by-name dicts.
  optim::NamedParameters shard_names() const;
  // Gathers flat f's shard-shaped `t` into a (P,) tensor on every rank (root < 0) or on `root`.
  Tensor gather_flat(int f, const Tensor& t, int root);

  std::shared_ptr<ProcessGroup> group_;
  ZeroOptions options_;
  std::vector<Param> params_;
  std::vector<Flat> flats_;
  std::unique_ptr<optim::Optimizer> inner_;
};

}  // namespace weft::parallel
