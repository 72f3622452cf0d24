// The schedule simulator: times a Schedule under given per-stage costs.
//
// Contract:
// - Costs are per stage (they may differ by stage): forward[s] is F's time;
//   backward[s] the input-gradient part and weight[s] the weight-gradient part of
//   the backward. A split schedule charges B = backward[s] and W = weight[s]; a
//   full one charges B = backward[s] + weight[s]. So F = B = W = 1 means F = 1 and
//   a full B = 2 (the textbook "backward costs twice the forward").
// - Activation checkpointing: micro-batches below `checkpointed` recompute
//   their forward in their backward, so their B also costs forward[s]; split,
//   such a B computes the weight gradients too (the recomputed segment's
//   backward yields them all), so it costs forward + backward + weight and
//   its W costs 0.
// - transfer[b] is the time a message between stages b and b+1 takes (either
//   direction); empty means 0. Neighbour stages on one rank exchange nothing.
// - Timing model (what a runner with posted receives does): each rank runs its
//   actions in order, one at a time. A compute action starts when the previous
//   action ends and lasts its cost. A send is non-blocking and takes no time; its
//   message arrives transfer[b] after it is issued (no link contention). A
//   receive starts when reached and ends when its message has arrived (at once if
//   it already has): the wait is idle time. A TiedGrad (Note [tied
//   parameters]) ends when the last of its group's ranks reaches its own; the
//   sum itself is not charged.
// - Gradient reduction (Note [gradient reduction]): a ReduceGrad(s) is issued
//   when reached and runs on the rank's communication channel, not its compute:
//   it starts when the channel is free (reductions on a rank go one after
//   another) and lasts reduce_grad[s]; the rank goes on at once. A
//   ReduceTiedGrad(g) waits for the channel, lasts reduce_tied[g], and the
//   rank waits for it (it is idle meanwhile). A rank finishes when its last
//   action has ended and its channel is idle, so a reduction that outlasts
//   the compute lengthens the step.
// - Processor sharing (Note [processor sharing]): ranks that share cores
//   compute slower together. speed[k-1] is the speed of each computing rank
//   (work done per second, the costs being the work) while k ranks compute
//   at once; k past the vector's end uses its last entry; empty: 1 always.
//   A compute action of cost x thus lasts x / speed[0] alone and longer
//   while others compute; its rate changes whenever a rank starts or ends a
//   compute action. Ranks that share C cores' worth of compute perfectly
//   have speed[k-1] = min(1, C / k) (sharing_speeds(C, ranks)); measured
//   speeds also carry what waiting ranks and shared caches take. Waiting
//   ranks compute nothing; communication is not slowed.
// - Overlapped F and B (Note [overlapped F and B] in schedule.h): at an
//   Overlap the rank starts the next two actions together; while both run
//   each progresses at overlap_speed times the rank's speed (0.5, the
//   default: the rank's cores split between them, so the pair lasts F + B;
//   1: each as if alone, the pair lasts max(F, B)); when one ends the other
//   goes on at the rank's speed. The rank's next action starts when both
//   have ended; busy counts the pair's span once.
// - busy = total compute time of the rank (wall time, sharing included); idle = makespan - busy (waiting before
//   the first action, inside receives and after the rank's last action);
//   makespan = the latest end of any action; bubble_fraction = sum of idle over
//   ranks / (ranks * makespan) = 1 - total compute / (ranks * makespan). For
//   fill-drain and 1F1B with equal stage costs and no transfer time this is the
//   textbook (p-1)/(m+p-1).
// - Memory: an activation of (stage, mb) is live from its F until its B (the input
//   gradient frees the stashed activations; with a full B that is the whole
//   backward). When split, B leaves a weight-gradient stash (the layer inputs and
//   output gradients W needs) pending until W. Per rank, peak_live_activations and
//   peak_pending_weights count (stage, mb) pairs, and peak_memory is the largest
//   sum of activation_memory[s] over live pairs plus weight_grad_memory[s] over
//   pending pairs, all taken after each action in the rank's order. This is the
//   zero-bubble paper's accounting (F: +M_B, B: -M_B + M_W, W: -M_W): ZB-H1 keeps
//   1F1B's live activations (p - i on stage i) and adds only W stashes.
// - simulate() validates the schedule first (validate.h), so it never deadlocks.
#pragma once

#include <vector>

#include "parallel/pipe/schedule.h"

namespace weft::parallel::pipe {

struct CostModel {
  std::vector<double> forward;             // per stage
  std::vector<double> backward;            // per stage: input gradient
  std::vector<double> weight;              // per stage: weight gradient
  std::vector<double> transfer;            // per boundary (stages - 1 entries) or empty (= 0)
  std::vector<double> activation_memory;   // per stage, per micro-batch; empty: 1
  std::vector<double> weight_grad_memory;  // per stage, per micro-batch; empty: 0
  std::vector<double> reduce_grad;         // per stage: its data-parallel gradient average; empty: 0
  std::vector<double> reduce_tied;         // per tied group: its data-parallel average; empty: 0
  std::vector<double> speed;               // per number of computing ranks - 1; empty: 1
  int checkpointed = 0;                    // micro-batches [0, checkpointed) recompute F in B
  double overlap_speed = 0.5;              // each of an overlapped F and B, relative to running alone

  // The same costs on every stage of a `stages`-stage pipeline.
  static CostModel uniform(int stages, double forward, double backward, double weight, double transfer = 0);
};

struct TimedAction {
  Action action;
  double start = 0;
  double end = 0;
};

struct RankTimeline {
  std::vector<TimedAction> actions;  // the rank's actions in order, timed
  double busy = 0;
  double idle = 0;
  double finish = 0;  // end of the rank's last action (or of its last reduction, when later)
  int peak_live_activations = 0;
  int peak_pending_weights = 0;
  double peak_memory = 0;
};

struct Simulation {
  double makespan = 0;
  double bubble_fraction = 0;
  std::vector<RankTimeline> ranks;
};

// The time a compute action takes under `costs` (0 for communication).
double action_cost(const Schedule& schedule, const CostModel& costs, const Action& a);

Simulation simulate(const Schedule& schedule, const CostModel& costs);

// min(1, cores / k) for k = 1 .. ranks: ranks sharing `cores` ranks' worth of
// compute perfectly (CostModel::speed).
std::vector<double> sharing_speeds(double cores, int ranks);

// fairscale's clock cycles: tick t lists the compute actions (rank by rank) that
// start in [t * unit, (t + 1) * unit).
std::vector<std::vector<Action>> clock_cycles(const Simulation& sim, double unit);

}  // namespace weft::parallel::pipe
