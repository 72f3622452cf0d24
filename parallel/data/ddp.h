// DistributedDataParallel: data-parallel training of an nn::Module over a
// ProcessGroup, with gradient reductions overlapping backward. A thin wrapper:
// the bucketing, readiness and overlap are the Reducer's (parallel/data/reducer.h).
//
// Contract:
// - Construction checks that every rank holds the same parameter names, shapes
//   and dtypes (an error naming the first mismatching parameter and what each
//   rank holds), then broadcasts parameters and buffers from rank 0, then
//   attaches a Reducer to the parameters that require grad (bucketing, hooks,
//   overlap, find_unused_parameters, gradient_as_bucket_view, comm hooks and
//   activation checkpointing as the Reducer's contract says).
// - no_sync() returns a scope in which backward only accumulates locally; the
//   next synced backward reduces the accumulated sum.
// - broadcast_buffers: rank 0's buffers are broadcast before each forward run
//   with grad mode on (outside no_sync).
// - Non-blocking mode (heat's): the end of backward launches what is left but
//   does not wait. In the next forward, each module's forward pre-hook waits for
//   the buckets of the module's own parameters, writes their averaged gradients
//   and applies `update` to them (then drops their .grad), so communication
//   overlaps the forward. Parameters of modules the forward did not enter are
//   finished after it; finish() finishes everything (call it before evaluating
//   or saving). Final parameters equal the blocking mode's for optimizers whose
//   update of one parameter depends only on that parameter (SGD, Adam, AdamW).
//   Requires that children run through Module::operator() (so pre-hooks fire)
//   and that a module's parameters are used only inside its own forward.
//   optimizer_update (parallel/data/ddp_optim.h, //parallel/data:ddp_optim) makes
//   `update` from an optimizer; //parallel/data:ddp itself does not depend on optim.
// - All ranks must issue the same sequence of synced backwards; the DDP object
//   removes its hooks when destroyed. Not thread-safe; one backward at a time.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"
#include "parallel/comm/process_group.h"
#include "parallel/data/comm_hooks.h"
#include "parallel/data/reducer.h"

namespace weft::parallel {

// Applies one optimizer update to exactly `params` (their .grad holds the
// averaged gradient).
using ParamUpdateFn = std::function<void(const std::vector<Tensor>& params)>;

struct DDPOptions {
  double bucket_cap_mb = 25;
  double first_bucket_cap_mb = 1;
  bool broadcast_buffers = true;
  bool find_unused_parameters = false;
  bool gradient_as_bucket_view = false;
  CommHook comm_hook;         // empty: allreduce_avg_hook
  bool non_blocking = false;  // heat's mode; needs `update`
  ParamUpdateFn update;       // used only in non-blocking mode
};

// Communication timing of the synced backwards (blocking mode): the Reducer's.
using DDPCommStats = CommStats;

class DistributedDataParallel {
 public:
  DistributedDataParallel(std::shared_ptr<nn::Module> module, std::shared_ptr<ProcessGroup> group,
                          DDPOptions options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  Tensor forward(const Tensor& input);
  Tensor operator()(const Tensor& input) { return forward(input); }

  // Gradient accumulation scope: backwards inside it do not communicate.
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& d) : d_(&d), prev_(d.reducer_->sync()) { d.reducer_->set_sync(false); }
    ~NoSync() {
      if (d_) d_->reducer_->set_sync(prev_);
    }
    NoSync(NoSync&& o) noexcept : d_(o.d_), prev_(o.prev_) { o.d_ = nullptr; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;
    NoSync& operator=(NoSync&&) = delete;

   private:
    DistributedDataParallel* d_;
    bool prev_;
  };
  [[nodiscard]] NoSync no_sync() { return NoSync(*this); }

  // Non-blocking mode: waits for every pending reduction and applies the updates.
  void finish();
  bool has_pending() const { return reducer_->has_pending(); }

  nn::Module& module() { return *module_; }
  const std::shared_ptr<nn::Module>& module_ptr() const { return module_; }
  ProcessGroup& group() { return *group_; }
  const DDPOptions& options() const { return options_; }

  // Bucket layout: for each bucket, the parameter names in bucket order.
  std::vector<std::vector<std::string>> bucket_names() const { return reducer_->bucket_names(); }
  const DDPCommStats& comm_stats() const { return reducer_->stats(); }
  void reset_comm_stats() { reducer_->reset_stats(); }
  Reducer& reducer() { return *reducer_; }

 private:
  void verify_same_parameters();
  void broadcast_state(bool params_too);
  void finish_module(int owner);
  void begin_updates();

  std::shared_ptr<nn::Module> module_;
  std::shared_ptr<ProcessGroup> group_;
  DDPOptions options_;
  std::unique_ptr<Reducer> reducer_;
  std::vector<RemovableHandle> handles_;  // forward pre-hooks (non-blocking mode)
  // Non-blocking mode: per module with parameters, its reducer parameter
  // indices; which parameters this step has updated, and for which backward.
  std::vector<std::vector<int>> owners_;
  std::vector<char> updated_;
  int64_t updates_for_ = -1;
};

}  // namespace weft::parallel
