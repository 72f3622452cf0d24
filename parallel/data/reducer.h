// Reducer: averages the gradients of a list of named parameters over a
// ProcessGroup while backward runs, bucket by bucket. The machinery of data
// parallelism, apart from any module: DistributedDataParallel wraps one for a
// whole model; a pipeline stage attaches one for its own parameters on its
// data-parallel group.
//
// Contract:
// - Construction takes the parameters that require grad (floating dtypes, in
//   the same order with the same shapes on every rank of `group`: the caller
//   checks that) and buckets them (Note [bucket order] in reducer.cc). It
//   registers a post-accumulate-grad hook on each; the destructor removes
//   them and drains reductions still in flight.
// - Two methods carry a synced backward (Flashlight's reducer): add(i), run by
//   parameter i's hook when its gradient is accumulated, marks it ready; when
//   every parameter of a bucket is ready (and every earlier bucket launched),
//   the bucket's gradients are copied into its flat buffer and its
//   asynchronous reduction (the comm hook, default allreduce Avg) starts while
//   backward goes on. finalize(), queued by the first add() of a backward to
//   run when the backward ends, launches what is left, waits for every bucket
//   and writes the averaged gradients back into .grad (or, with
//   gradient_as_bucket_view, makes .grad a view of the bucket).
// - set_sync(false): backwards only accumulate locally (no hook does
//   anything); the next synced backward reduces the sum. This is also the
//   micro-batch mode of a pipeline: sync only the last micro-batch's backward
//   of a step, so the step's gradient is reduced once, overlapping that
//   backward.
// - find_unused_parameters off: a parameter that got no gradient in a synced
//   backward is an error at its end naming it. On: missing parameters are
//   marked ready at the end (their contribution is what they hold: zero, or
//   what unsynced backwards accumulated), and an allreduced "used" map leaves
//   .grad untouched (undefined stays undefined) for parameters no rank used.
// - Note [ready twice]: a hook firing again in the same backward (activation
//   checkpointing) does not mark a parameter ready twice.
// - wait_at_end = false (DDP's non-blocking mode): finalize() launches every
//   bucket but waits for none; wait_param(i) / wait_all() later wait and write
//   back. A synced backward while reductions are pending is an error.
// - Every rank must run the same sequence of synced backwards. Not
//   thread-safe; one backward at a time.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "parallel/comm/process_group.h"
#include "parallel/data/comm_hooks.h"

namespace weft::parallel {

struct ReducerOptions {
  double bucket_cap_mb = 25;
  double first_bucket_cap_mb = 1;
  bool find_unused_parameters = false;
  bool gradient_as_bucket_view = false;
  CommHook comm_hook;       // empty: allreduce_avg_hook
  bool wait_at_end = true;  // false: finalize() launches but does not wait
  // Error messages: who is speaking, and how to turn find_unused_parameters on.
  std::string owner = "Reducer";
  std::string unused_hint = "construct the Reducer with ReducerOptions::find_unused_parameters = true";
};

// Communication timing, accumulated over synced backwards that wait at the
// end: the window runs from the first bucket's launch to the last bucket's
// completion; `blocked` is the part of it spent waiting after backward ended.
struct CommStats {
  int64_t backwards = 0;
  int64_t reductions = 0;
  double window_seconds = 0;
  double blocked_seconds = 0;
  // Share of the communication window hidden behind backward.
  double overlap() const { return window_seconds > 0 ? 1.0 - blocked_seconds / window_seconds : 0.0; }
};

class Reducer {
 public:
  using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

  Reducer(NamedTensors params, std::shared_ptr<ProcessGroup> group, ReducerOptions options = {});
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Parameter `index`'s gradient is ready (its hook calls this).
  void add(int index);
  // The end of a synced backward (queued by its first add()).
  void finalize();

  void set_sync(bool on) { sync_ = on; }
  bool sync() const { return sync_; }

  // wait_at_end = false: waits for the bucket holding parameter `index` and
  // writes its averaged gradients back (idempotent until the next backward).
  void wait_param(int index);
  // Waits for every bucket and writes back; ends the pending state.
  void wait_all();
  // Reductions launched by finalize() and not all waited for yet.
  bool has_pending() const { return pending_; }
  // Synced backwards finalized so far (reset_stats() leaves it).
  int64_t generation() const { return generation_; }

  int num_params() const { return static_cast<int>(params_.size()); }
  const std::string& name(int index) const { return params_[index].name; }
  const Tensor& param(int index) const { return params_[index].tensor; }
  ProcessGroup& group() { return *group_; }
  const ReducerOptions& options() const { return options_; }

  // Bucket layout: for each bucket, the parameter names in bucket order.
  std::vector<std::vector<std::string>> bucket_names() const;
  const CommStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Param {
    std::string name;
    Tensor tensor;
    int bucket = -1;
    int64_t offset = 0;  // in elements, in the bucket
  };
  struct Bucket {
    std::vector<int> params;  // indices into params_, in bucket order
    Tensor flat;              // (numel,) contiguous
    int pending = 0;          // parameters not yet ready in this backward
    bool launched = false, waited = false, stale = false;
    WorkPtr work;
  };

  void build_buckets();
  void start_backward();
  void launch_ready_buckets();
  void poll_launched();
  void launch(int b);
  void wait_bucket(int b);
  void reset_backward_state();

  std::shared_ptr<ProcessGroup> group_;
  ReducerOptions options_;
  std::vector<Param> params_;
  std::vector<Bucket> buckets_;
  std::vector<RemovableHandle> handles_;

  bool sync_ = true;
  bool in_backward_ = false;  // a synced backward is running and finalize() is queued
  bool pending_ = false;      // wait_at_end = false: reductions launched, not all waited
  std::vector<char> ready_;
  int next_bucket_ = 0;
  int poll_next_ = 0;  // oldest launched bucket not yet seen complete (Note [progress])
  Clock::time_point first_launch_;
  CommStats stats_;
  int64_t generation_ = 0;
};

}  // namespace weft::parallel
