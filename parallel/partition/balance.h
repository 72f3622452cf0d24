// Balances: how many consecutive layers each pipeline stage gets, chosen from
// per-layer costs (layer_profile.h). Pure functions of the costs, so every rank
// holding the same profile computes the same balance.
//
// Note [stage cost model]: stage s of p holds layers [b, e) (every stage at
// least one layer, in order) and
// - compute(s) = sum over its layers of forward_s + backward_s (one micro-batch);
// - transfer(s) = output_bytes of layer e - 1 / bandwidth for s < p - 1, else 0
//   (bandwidth 0: transfers are free);
// - time(s) = compute(s) + transfer(s), per micro-batch;
// - memory(s) = sum of resident_bytes + live[s] * sum of activation_bytes, where
//   live[s] is how many micro-batches' activations the schedule keeps alive on
//   stage s at its peak (live_microbatches: 1F1B and ZB-H1 min(p - s, m), GPipe
//   m). ZB-H1's weight-gradient stashes are not counted.
// The budget (bytes per device, 0 = none) holds when memory(s) <= budget for
// every stage.
//
// Note [stages per rank]: with virtual_stages v > 1 the S = p v stages
// (options.stages) sit on p ranks as options.schedule places them (looped,
// stage s on rank s % p; zbv's V, rank r holding stages r and 2p - 1 - r),
// read from the generated schedule (StageCosts::rank_of). Each stage costs
// as above, except that a boundary between two stages of one rank transfers
// nothing, and live[s] is stage s's own peak of live micro-batches. A rank
// sums its stages:
// - time(r) = the sum of time(s) over rank r's stages (its work per micro-batch);
// - memory(r) = the sum of memory(s) over rank r's stages: every chunk's
//   resident bytes plus its peak activations (the chunks' peaks need not
//   coincide, so this bounds the rank's peak from above);
// and the budget holds when memory(r) <= budget for every rank. With v = 1
// both reduce to the per-stage model above.
//
// Contract:
// - optimal_balance minimises the bottleneck max_s time(s) subject to the
//   budget, exactly (dynamic programming over (stage, first layer), O(p n^2)).
//   Ties: among balances with the smallest bottleneck, the smallest sum of
//   squared stage times (accumulated from the last stage back: t0^2 + (t1^2 +
//   (... + t_{p-1}^2))); among those, the lexicographically smallest balance
//   (earliest boundaries). brute_force_balance enumerates every balance with
//   the same stage costs and the same rule, so the two agree exactly.
// - Several stages per rank (Note [stages per rank]): optimal_balance
//   minimises the bottleneck max_s time(s) as above, subject to every
//   rank's memory(r); ties: the smallest busiest rank max_r time(r), then
//   the smallest sum of squared stage times, then the lexicographically
//   smallest balance. It is exact, by branch and bound over the balances
//   (each branch bounded by its partial key and by what the layers left
//   must add: their average over the stages left and over the ranks still
//   holding one, their squares), with times counted in integer ticks of
//   2^-24 of the whole model's (each layer's and each transfer's rounded:
//   sums are exact, so balances equal to rounding tie); brute_force_balance
//   agrees exactly. (A search past kMaxSearchNodes keeps the best balance
//   found.) min_memory_balance minimises max_r memory(r) the same way.
// - solve_balance is optimal_balance that explains failure: a layer that fits
//   on no stage it could occupy is named (index, name, type, its bytes and the
//   budget); otherwise the error gives the smallest achievable peak memory
//   (with several stages per rank: of a rank, naming it and its stages).
// - balance_by_time / balance_by_size are fairscale's (fairscale.nn.pipe.
//   balance): per-layer cost forward_s + backward_s, resp. resident_bytes +
//   activation_bytes (fairscale's latent size of one micro-batch plus
//   param_scale x parameter size, the scale being the profile's gradient and
//   optimizer-state bytes; buffers count too), split by fairscale's block partition
//   (block_partition: Bárány et al.'s heuristic on costs normalised to [0, 1],
//   not exact, ignoring memory). Same results as fairscale for the same costs.
// - Errors name the values: fewer layers than stages, negative or non-finite
//   costs, a live vector of the wrong size.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "parallel/partition/layer_profile.h"
#include "parallel/pipe/generators.h"

namespace weft::parallel::partition {

// The time of an average over the data-parallel group: latency_s + bytes /
// bytes_per_s (bytes_per_s 0: the bytes cost nothing). measure_allreduce
// (comm_cost.h) fits it on the group.
struct AllreduceCost {
  double latency_s = 0;
  double bytes_per_s = 0;
  double seconds(int64_t bytes) const {
    return latency_s + (bytes_per_s > 0 ? static_cast<double>(bytes) / bytes_per_s : 0.0);
  }
};

struct BalanceOptions {
  int stages = 1;  // all stages: ranks x virtual_stages
  int microbatches = 1;
  pipe::ScheduleKind schedule = pipe::ScheduleKind::k1F1B;
  // Stages per rank, placed as `schedule` places them (Note [stages per rank]).
  int virtual_stages = 1;
  // Live micro-batches per stage; empty: live_microbatches(schedule, stages, microbatches, virtual_stages).
  std::vector<int> live;
  int64_t memory_budget_bytes = 0;   // per device; 0: unlimited
  double bandwidth_bytes_per_s = 0;  // between neighbour stages; 0: transfers take no time
  // Data parallelism (Note [gradient reduction] in parallel/pipe/schedule.h):
  // with replicas > 1 the simulated schedule carries a ReduceGrad per stage,
  // costing allreduce.seconds(the stage's gradient bytes).
  int replicas = 1;
  AllreduceCost allreduce;
  // Each computing rank's speed while k of the pipeline's ranks compute at
  // once, k = 1, 2, ... (contention.h; Note [processor sharing] in
  // parallel/pipe/simulate.h); empty: every rank at full speed.
  std::vector<double> compute_speeds;
  // The runner's activation checkpointing: checkpointed micro-batches
  // recompute their forward in the backward (the simulator's `checkpointed`).
  pipe::CheckpointMode checkpoint = pipe::CheckpointMode::kNever;
};

// The peak number of micro-batches whose activations `kind` keeps alive on each
// stage, read from the simulator (parallel/pipe/simulate.h) with one stage per
// rank; with virtual_stages > 1 (stages = ranks x virtual_stages), each
// stage's own peak over its rank's action list (F adds one, B frees one).
std::vector<int> live_microbatches(pipe::ScheduleKind kind, int stages, int microbatches, int virtual_stages = 1);
// The same from a generated schedule, per stage.
std::vector<int> stage_live_microbatches(const pipe::Schedule& schedule);

// The stage costs of Note [stage cost model] for one profile and options, with
// prefix sums so each query is O(1).
class StageCosts {
 public:
  StageCosts(const std::vector<LayerProfile>& layers, const BalanceOptions& options);
  int num_layers() const { return static_cast<int>(layers_.size()); }
  int num_stages() const { return options_.stages; }
  int num_ranks() const { return options_.stages / options_.virtual_stages; }
  bool several_per_rank() const { return options_.virtual_stages > 1; }
  // Stage s's rank (s with one stage per rank; else the schedule's placement).
  int rank_of(int stage) const { return placement_[stage]; }
  const std::vector<int>& placement() const { return placement_; }
  const std::vector<int>& live() const { return live_; }
  const BalanceOptions& options() const { return options_; }
  const std::vector<LayerProfile>& layers() const { return layers_; }

  double compute_s(int begin, int end) const;
  double transfer_s(int end, int stage) const;  // after layer end - 1, leaving `stage` (0 within a rank)
  double time_s(int begin, int end, int stage) const { return compute_s(begin, end) + transfer_s(end, stage); }
  int64_t resident_bytes(int begin, int end) const;
  int64_t activation_bytes(int begin, int end) const;
  int64_t memory_bytes(int begin, int end, int stage) const;
  bool fits(int begin, int end, int stage) const;

 private:
  std::vector<LayerProfile> layers_;
  BalanceOptions options_;
  std::vector<int> placement_;
  std::vector<int> live_;
  std::vector<double> time_prefix_;
  std::vector<int64_t> resident_prefix_, activation_prefix_;
};

// Per-stage times and bottleneck of `balance` under `costs` (no budget check).
std::vector<double> stage_times(const StageCosts& costs, const std::vector<int>& balance);
// Per rank: the sums over its stages of time(s) and of memory(s) (Note [stages per rank]).
std::vector<double> rank_times(const StageCosts& costs, const std::vector<int>& balance);
std::vector<int64_t> rank_memory_bytes(const StageCosts& costs, const std::vector<int>& balance);

// The node limit of the search with several stages per rank.
inline constexpr int64_t kMaxSearchNodes = 5'000'000;

// The exact optimum (see the contract), or nullopt when no balance fits the budget.
std::optional<std::vector<int>> optimal_balance(const StageCosts& costs);
std::optional<std::vector<int>> optimal_balance(const std::vector<LayerProfile>& layers, const BalanceOptions& options);
// Every composition of n into p positive parts, for tests (C(n-1, p-1) of them).
std::optional<std::vector<int>> brute_force_balance(const StageCosts& costs);
// optimal_balance, or an error naming the layer that fits nowhere or the smallest
// achievable peak memory.
std::vector<int> solve_balance(const std::vector<LayerProfile>& layers, const BalanceOptions& options);
// The balance with the smallest peak memory over stages (over ranks with
// several stages per rank; ignoring time; ties as optimal_balance's, by sum of
// squared memory then earliest boundaries).
std::vector<int> min_memory_balance(const StageCosts& costs);

// fairscale's balance_by_time and balance_by_size (see the contract).
std::vector<int> balance_by_time(const std::vector<LayerProfile>& layers, int stages);
std::vector<int> balance_by_size(const std::vector<LayerProfile>& layers, int stages);
// fairscale's blockpartition.solve: sizes of `parts` consecutive blocks of `costs`.
std::vector<int> block_partition(const std::vector<double>& costs, int parts);

// "[3, 2, 5]".
std::string balance_str(const std::vector<int>& balance);
// "12.0 MiB" (one decimal).
std::string mib_str(int64_t bytes);

}  // namespace weft::parallel::partition
