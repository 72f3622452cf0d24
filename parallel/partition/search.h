// Choosing a pipeline's plan: the balance, schedule and micro-batch count for
// a measured profile (the planning half of DistributedModel's automatic
// partitioning; DistributedModel runs the plan it gets).
//
// Contract:
// - scaled(layers, factor): the profile of micro-batches `factor` times as
//   large: times, activations and boundary outputs scale with rows;
//   parameters, gradients and optimizer state do not.
// - choose_plan(profile, options): for every schedule in options.schedules and
//   micro-batch count in options.chunks, plans the partition (plan_partition
//   on the profile scaled from options.profiled_chunks micro-batches to that
//   count) and keeps the fastest simulated step. Ties keep the earlier
//   candidate (fewer chunks first, then the order of schedules). With one
//   candidate its error is rethrown as is; otherwise candidates that fail
//   (over the memory budget) are skipped, listed with their reasons in the
//   result's `skipped`, and when none fits the error lists each one's
//   reason. The data-parallel reduction (options.plan.replicas,
//   options.plan.allreduce) is part of every simulated step, so it weighs in
//   the choice.
// - Stages per rank (Note [stages per rank] in balance.h): options.plan.stages
//   is the pipeline's ranks times options.plan.virtual_stages; candidate i
//   runs options.schedules[i] with options.virtual_stages[i] stages per rank
//   (empty: options.plan.virtual_stages for every candidate), so its plan has
//   ranks x that many stages and its memory is checked per rank. A failing
//   candidate with more than one stage per rank is listed as e.g. "zbv (2
//   stages per rank) with 4 micro-batches: ...".
#pragma once

#include <string>
#include <vector>

#include "parallel/partition/layer_profile.h"
#include "parallel/partition/plan.h"
#include "parallel/pipe/generators.h"

namespace weft::parallel::partition {

std::vector<LayerProfile> scaled(std::vector<LayerProfile> layers, double factor);

struct SearchOptions {
  // stages (ranks x virtual_stages), method, budget, bandwidth, replicas, allreduce
  // (schedule, microbatches and virtual_stages: set per candidate)
  PlanOptions plan;
  std::vector<pipe::ScheduleKind> schedules{pipe::ScheduleKind::k1F1B};
  std::vector<int> virtual_stages;  // stages per rank of each schedule; empty: plan.virtual_stages
  std::vector<int> chunks{1};       // candidate micro-batch counts
  int profiled_chunks = 1;          // the profile was measured on a micro-batch of batch / profiled_chunks rows
};

struct SearchResult {
  PartitionPlan plan;
  pipe::ScheduleKind schedule = pipe::ScheduleKind::k1F1B;
  int virtual_stages = 1;
  int chunks = 1;
  std::vector<LayerProfile> layers;  // the profile scaled to `chunks` (what the plan's table shows)
  // The candidates that failed, each "<schedule> with <m> micro-batches: <error>".
  std::vector<std::string> skipped;
};

SearchResult choose_plan(const std::vector<LayerProfile>& profile, const SearchOptions& options);

}  // namespace weft::parallel::partition
