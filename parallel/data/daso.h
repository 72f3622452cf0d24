// Daso: heat's DASO optimizer ("distributed asynchronous and selective
// optimisation") over any weft optimizer, for a NodeDataParallel model
// (parallel/data/node_ddp.h): the node DDP averages gradients inside each node
// (at every step, or in the cycling phase every local_skip steps: heat's local
// skips); Daso averages the parameters between nodes, blocking in the
// warm-up and cool-down epochs, and otherwise only every global_skip steps,
// started without blocking and folded in batches_to_wait steps later, more
// often when the loss stops improving (the schedule: DasoSchedule,
// parallel/data/daso_schedule.h, Note [daso schedule]).
//
// Contract:
// - Construction is collective over the model's world: every rank passes the
//   same options (an error naming the first differing option and each rank's
//   value otherwise). The trainable parameters must be float32 and on one
//   device. steps_per_epoch (heat's last_batch + 1) is required; the schedule
//   options are DasoScheduleOptions with heat's defaults.
// - Per training step: zero_grad(), forward and backward through the model
//   (the node DDP), then step(): the local optimizer steps, then the step's
//   plan runs (fold, blocking average, start). After steps_per_epoch steps,
//   end_epoch(loss) with this rank's training loss of the epoch: the losses
//   are all-gathered over the world and averaged in rank order (every rank
//   feeds the schedule the same value), and the schedule moves to the next
//   epoch. Calling step() past the epoch's steps, or end_epoch() before its
//   last step, is an error naming the counts.
// - Note [daso wire]: what travels between nodes. The parameters are
//   flattened (P floats, padded to a multiple of the node size R) and split
//   into R equal slices; local rank i owns slice i and exchanges it on global
//   group i, so the R ranks of a node share the inter-node traffic and each
//   node sends its parameters once per average. Every rank keeps the anchor
//   A, the last global average (bitwise equal on every rank, initially the
//   unified parameters). A rank sends its slice's difference from the anchor,
//   d = p - A, cast to the wire dtype (bfloat16 by default, heat's
//   downcast_type; float32 and float16 possible), by an allgather on its
//   global group; the G nodes' differences are widened to float32 and summed
//   in node order, giving the new average A' = A + (sum d) / G of the slice,
//   and an allgather of float32 slices inside the node completes A' on every
//   rank (at a fold while the node's ranks are apart, see local skips below,
//   the same allgather also carries each rank's folded slice). Why differences
//   and not parameters: a blocking average every step would otherwise round
//   the weights themselves to bfloat16 (8 significant bits, a relative step of
//   2^-8, larger than most SGD updates), while the rounding error of a
//   difference is 2^-8 of the distance travelled since the last average:
//   |A' - exact| <= 2^-8 max_n |d_n| per element (plus float32 rounding). Why an
//   allgather and a float32 sum rather than a bfloat16 allreduce: the sum is a
//   true float32 accumulation of the bfloat16 values, identical on every rank
//   by construction; the price is volume beyond two nodes: a ring allgather
//   sends (G - 1) x the slice per rank, a ring allreduce 2 (G - 1) / G x the
//   slice (equal at G = 2, G / 2 times more beyond).
// - A blocking average sets every parameter to A' (every rank holds the same
//   parameters afterwards; after the cool-down's last step they stay so). A
//   fold of an average started w steps earlier blends, as heat does, the
//   stale average with the local progress: p = (2w p + G A') / (2w + G)
//   (the local parameters weigh 2w, each node's stale ones 1); then A = A'.
// - Local skips (Note [daso schedule]; with more than one node and more than
//   one rank per node, unless options.schedule.local_skips is false): Daso
//   arms the node DDP one step ahead (Reducer::set_sync, heat's
//   require_backward_grad_sync) with the step plan's node_sync, so on the
//   other cycling steps each rank steps on its own gradients and the ranks
//   of a node drift apart. The steps that start, fold or block an average
//   and the last step of an epoch always average in the node. A fold while
//   the node's ranks are apart blends per owner: local rank i blends slice
//   i of its own parameters, p_i = (2w p_i + G A'_i) / (2w + G), and the
//   node allgather carries (A'_i, p_i), so every rank of the node ends with
//   the owners' slices, bitwise identical (heat broadcasts the sending
//   rank's parameters in the node instead); while they are not apart the
//   allgather carries A'_i alone and each rank blends the whole, as above.
//   A blocking average unifies them too (every parameter is A').
// - The exchange runs on CPU tensors over the node groups' MPI (or
//   in-process) groups; parameters on a GPU are copied to the host for it.
// - One node (G = 1): nothing is exchanged; the node DDP is the whole data
//   parallelism and step() only steps the optimizer.
// - Counters (stats()): global averages done (blocking and folded), bytes
//   this rank sent between nodes (ring_allgather_bytes of its wire slice per
//   average, parallel/data/comm_volume.h) and inside the node for DASO's own
//   allgathers, steps at which this rank waited for an average (every
//   blocking one, and a fold whose data had not arrived yet), the seconds
//   spent waiting there, and the steps whose node gradient average was
//   skipped (the node DDP's own bytes, NodeDataParallel::node_bytes(), fall
//   by one allreduce for each).
// - The optimizer's state (momentum) is local and never averaged, as in
//   heat. An average still in flight when Daso is destroyed is waited for
//   (errors swallowed) and dropped. Not thread-safe.
// - Note [daso state]: state_dict() is everything an exact resume of this rank
//   needs beyond the model state that rank 0 holds, as a flat name -> CPU
//   tensor map (safetensors-ready, like the optimizers' and LR schedules'):
//   the layout (world, ranks per node, this rank, trainable elements, steps
//   per epoch), the schedule (DasoSchedule::State), the step in the epoch
//   (steps_per_epoch after the last step, before end_epoch), whether the
//   node's ranks are apart, the anchor, the counters, an average in flight
//   (waited for here, not folded: its wait and every node's received
//   difference, "pending.parts" (G, S) in the wire dtype, so the fold after a
//   resume computes the same numbers), this rank's parameters ("params", (P,))
//   unless every rank holds the same (after a blocking average: at every
//   epoch's end, in warm-up and cool-down, or with one node), the model's
//   buffers (never averaged between nodes) and the local optimizer's state
//   ("optimizer." + its positional state_dict, which differs between ranks).
//   load_state_dict(sd) (local, not collective) restores it into a Daso built
//   with the same options over the same layout, after the model's state (rank
//   0's) is loaded: it checks everything first (an error naming the layout the
//   state was saved by and this one's, with how to proceed; the rank; the
//   model's size; the steps per epoch; the shapes and dtypes), then overwrites
//   what it holds and arms the node DDP for the next step. Resumed on every
//   rank, the run continues bitwise as the uninterrupted one (steps_waiting
//   and seconds_waiting aside: a restored average counts as arrived).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "optim/optimizer.h"
#include "parallel/data/daso_schedule.h"
#include "parallel/data/node_ddp.h"

namespace weft::parallel {

struct DasoOptions {
  DasoScheduleOptions schedule;
  int steps_per_epoch = 0;
  DType downcast = DType::BFloat16;  // the wire dtype between nodes
};

struct DasoStats {
  int64_t global_syncs = 0;    // global averages completed (blocking + folded)
  int64_t blocking_syncs = 0;  // of which blocking
  int64_t bytes_between_nodes = 0;
  int64_t bytes_within_node = 0;  // DASO's node allgathers (not the node DDP's)
  int64_t steps_waiting = 0;
  double seconds_waiting = 0;
  int64_t node_syncs_skipped = 0;  // steps whose gradients the node DDP did not average (local skips)
};

class Daso {
 public:
  Daso(NodeDataParallel& model, optim::Optimizer& local_optimizer, DasoOptions options);
  ~Daso();
  Daso(const Daso&) = delete;
  Daso& operator=(const Daso&) = delete;

  void zero_grad(bool set_to_none = true) { opt_.zero_grad(set_to_none); }
  void step();
  // Returns true when the plateau detector changed the skips.
  bool end_epoch(double local_loss);

  const DasoSchedule& schedule() const { return schedule_; }
  const DasoStats& stats() const { return stats_; }
  const DasoOptions& options() const { return o_; }
  int step_in_epoch() const { return step_; }
  optim::Optimizer& local_optimizer() { return opt_; }
  // The last global average (P floats, padded).
  const Tensor& anchor() const { return anchor_; }

  // Note [daso state]. state_dict() waits for an average in flight.
  std::map<std::string, Tensor> state_dict();
  void load_state_dict(const std::map<std::string, Tensor>& sd);

 private:
  struct Pending {
    WorkPtr work;
    Tensor wire;                 // (S,) what this rank sent
    std::vector<Tensor> parts;   // (S,) x G: every node's difference
    int wait = 0;                // batches_to_wait it was started with
    bool seen_complete = false;  // is_completed() said so before the fold
  };
  void verify_same_options();
  Tensor flatten_params() const;  // (padded,) float32
  void write_params(const Tensor& flat);
  std::unique_ptr<Pending> launch();
  Tensor receive(Pending& p, bool blocking);  // (S,) this rank's slice of the new anchor
  std::vector<Tensor> node_allgather(const std::vector<Tensor>& mine);
  bool local_skipping() const;
  void arm_node_ddp();
  void poll();

  NodeDataParallel& model_;
  optim::Optimizer& opt_;
  DasoOptions o_;
  DasoSchedule schedule_;
  DasoStats stats_;
  std::vector<Tensor> params_;
  int64_t numel_ = 0, slice_ = 0;
  Tensor anchor_;  // (R * slice_,) float32
  std::unique_ptr<Pending> pending_;
  int step_ = 0;
  bool node_apart_ = false;  // a node gradient average was skipped since the node's ranks were last unified
  bool in_sync_ = true;      // every rank holds the same parameters (the last step blocked, or one node)
};

}  // namespace weft::parallel
