// Gradient clipping by the global norm for a DistributedModel: the 2-norm of
// the whole model's gradient (every stage's, each tied parameter once), as
// optim::clip_grad_norm_ would compute it on the unpartitioned model after
// one process trained on the global batch.
//
// Contract:
// - GlobalNormClipper(model, max_norm) on every rank of the model's world.
//   The model must be partitioned before clip() or clip_shards() run (the
//   clipper reads its local parameters and grid then).
// - clip() (collective over the world): without ZeRO, after model.step()
//   and before the optimizer's step. Each stage's gradients are the averaged
//   ones (equal on every replica), so the squared norm is the sum over the
//   pipeline of each rank's local sum of squares; it is summed over the
//   whole world and divided by dp, so that every rank, replicas included,
//   computes bitwise the same number and applies the same factor. Tied
//   parameters (options().pipe.tied) count once: only the holder of a
//   group's first-named member counts it (its other members are copies with
//   the same summed gradient), and a tensor shared by several names on one
//   rank counts once. Every gradient is then multiplied by
//   min(1, max_norm / (norm + 1e-6)), computed in the gradients' dtype as
//   optim::clip_grad_norm_ does, so one process and any grid clip alike.
//   Returns the norm before clipping. An error with shard_optimizer_state.
// - clip_shards(shard_optimizer) (collective over the world): with ZeRO
//   (DistributedModelOptions::shard_optimizer_state), called by the shard
//   optimizer before it updates (ClipBeforeStep below): at that point each
//   rank holds, in its shard tensors' gradients, its slice of its stage's
//   averaged flat gradient (parallel/data/zero.h, Note [zero flat shards]), so the
//   squared norm is the world's sum of the shards' sums of squares, less the
//   elements of tied members other than a group's first-named one (found
//   from the flat layout: the local parameters grouped by (dtype, device) in
//   order, each flat padded to a multiple of dp). The shard gradients are
//   scaled by the same factor. Returns the norm. An error without ZeRO.
// - last_norm(): the norm the latest clip computed (0 before any).
// - max_norm must be positive (an error naming it). Non-finite norms are
//   not errors: the factor is NaN then, as in optim::clip_grad_norm_.
#pragma once

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "optim/optimizer.h"
#include "parallel/hybrid/distributed_model.h"

namespace weft::parallel::hybrid {

class GlobalNormClipper {
 public:
  GlobalNormClipper(DistributedModel& model, double max_norm);
  double clip();
  double clip_shards(optim::Optimizer& shard_optimizer);
  double max_norm() const { return max_norm_; }
  double last_norm() const { return last_norm_; }

 private:
  // The local sum of squares that counts towards the norm (tied copies left
  // out); appends every local gradient (copies included) to `all_grads`.
  double counted_sum_of_squares(std::vector<Tensor>& all_grads) const;
  double finish(double local_sq, double divide_by, const std::vector<Tensor>& grads);

  DistributedModel& model_;
  double max_norm_;
  double last_norm_ = 0;
};

// An optimizer Opt (SGD, Adam, AdamW, ...) that calls `before` on itself at
// the start of every step(), before any parameter group updates: how a ZeRO
// shard optimizer clips, e.g. as a DistributedOptimizer factory
//   [&](const optim::NamedParameters& p) {
//     return std::make_unique<ClipBeforeStep<optim::AdamW>>(
//         [&](optim::Optimizer& o) { clipper.clip_shards(o); }, p, options); }
// It is an Opt in every other respect (state dicts, LR schedulers).
template <class Opt>
class ClipBeforeStep : public Opt {
 public:
  template <class... Args>
  explicit ClipBeforeStep(std::function<void(optim::Optimizer&)> before, Args&&... args)
      : Opt(std::forward<Args>(args)...), before_(std::move(before)) {}

 protected:
  void update(optim::ParamGroup& group) override {
    if (before_ && &group == &this->param_groups().front()) before_(*this);
    Opt::update(group);
  }

 private:
  std::function<void(optim::Optimizer&)> before_;
};

}  // namespace weft::parallel::hybrid
