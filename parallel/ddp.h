// DistributedDataParallel: data-parallel training of an nn::Module over a
// ProcessGroup, with gradient reductions overlapping backward.
//
// Contract:
// - Construction checks that every rank holds the same parameter names, shapes
//   and dtypes (an error naming the first mismatching parameter and what each
//   rank holds), then broadcasts parameters and buffers from rank 0.
// - Parameters that require grad are bucketed (Note [bucket order]). Each
//   parameter's post-accumulate-grad hook marks it ready; when all of a bucket's
//   parameters are ready (and every earlier bucket has been launched), its
//   gradients are copied into the flat bucket and its asynchronous reduction
//   (the comm hook, default: allreduce Avg) starts while backward goes on. An
//   end-of-backward callback waits for every bucket and writes the averaged
//   gradients back into .grad (or, with gradient_as_bucket_view, makes .grad a
//   view of the bucket memory).
// - no_sync() returns a scope in which backward only accumulates locally; the
//   next synced backward reduces the accumulated sum.
// - broadcast_buffers: rank 0's buffers are broadcast before each forward run
//   with grad mode on (outside no_sync).
// - find_unused_parameters off: a parameter that got no gradient in a synced
//   backward is an error at the end of that backward, listing the names and
//   suggesting the flag. On: at the end of backward the missing parameters are
//   marked ready (their local contribution is zero, or what no_sync accumulated),
//   and an allreduced "used" map leaves .grad untouched (undefined stays
//   undefined) for parameters no rank used, so optimizers skip them as they would
//   in one process.
// - Activation checkpointing (Note [ready twice]): a parameter whose hook fires
//   again in the same backward is not marked ready twice.
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
// - All ranks must issue the same sequence of synced backwards; the DDP object
//   removes its hooks when destroyed. Not thread-safe; one backward at a time.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"
#include "parallel/comm_hooks.h"
#include "parallel/process_group.h"

namespace weft::optim {
class Optimizer;
}

namespace weft::parallel {

// Applies one optimizer update to exactly `params` (their .grad holds the
// averaged gradient).
using ParamUpdateFn = std::function<void(const std::vector<Tensor>& params)>;

// An update function stepping `opt` for a subset of its parameters: the other
// parameters' gradients are hidden during the step. `opt` must outlive it.
ParamUpdateFn optimizer_update(optim::Optimizer& opt);

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

// Communication timing, accumulated over synced backwards (blocking mode):
// the window runs from the first bucket's launch to the last bucket's
// completion; `blocked` is the part of it spent waiting after backward ended.
struct DDPCommStats {
  int64_t backwards = 0;
  int64_t reductions = 0;
  double window_seconds = 0;
  double blocked_seconds = 0;
  // Share of the communication window hidden behind backward.
  double overlap() const { return window_seconds > 0 ? 1.0 - blocked_seconds / window_seconds : 0.0; }
};

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
    explicit NoSync(DistributedDataParallel& d) : d_(&d), prev_(d.sync_) { d.sync_ = false; }
    ~NoSync() {
      if (d_) d_->sync_ = prev_;
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
  bool has_pending() const { return pending_; }

  nn::Module& module() { return *module_; }
  const std::shared_ptr<nn::Module>& module_ptr() const { return module_; }
  ProcessGroup& group() { return *group_; }
  const DDPOptions& options() const { return options_; }

  // Bucket layout: for each bucket, the parameter names in bucket order.
  std::vector<std::vector<std::string>> bucket_names() const;
  const DDPCommStats& comm_stats() const { return stats_; }
  void reset_comm_stats() { stats_ = {}; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Param {
    std::string name;
    Tensor tensor;
    int bucket = -1;
    int64_t offset = 0;  // in elements, in the bucket
    int owner = -1;      // index into owners_ (non-blocking mode)
  };
  struct Bucket {
    std::vector<int> params;  // indices into params_, in bucket order
    Tensor flat;              // (numel,) contiguous
    int pending = 0;          // parameters not yet ready in this backward
    bool launched = false, waited = false, stale = false;
    WorkPtr work;
  };

  void verify_same_parameters();
  void broadcast_state(bool params_too);
  void build_buckets();
  void on_grad_ready(int index);
  void start_backward();
  void launch_ready_buckets();
  void poll_launched();
  void launch(int b);
  void wait_bucket(int b);
  void end_of_backward();
  void finish_module(int owner);
  void reset_backward_state();

  std::shared_ptr<nn::Module> module_;
  std::shared_ptr<ProcessGroup> group_;
  DDPOptions options_;
  std::vector<Param> params_;
  std::vector<Bucket> buckets_;
  std::vector<RemovableHandle> handles_;
  std::vector<std::vector<int>> owners_;  // per module with parameters: its parameter indices

  bool sync_ = true;
  bool in_backward_ = false;  // a synced backward is running and its callback is queued
  bool pending_ = false;      // non-blocking: reductions in flight, updates not applied
  std::vector<char> ready_, updated_;
  int next_bucket_ = 0;
  int poll_next_ = 0;  // oldest launched bucket not yet seen complete (Note [progress])
  Clock::time_point first_launch_;
  DDPCommStats stats_;
};

}  // namespace weft::parallel
