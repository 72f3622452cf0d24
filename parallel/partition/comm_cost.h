// Measuring what the planner charges for a data-parallel gradient average.
//
// Contract:
// - measure_allreduce(group, bytes, repeats) is collective over `group`: it
//   times an averaging allreduce of one float32 and of `bytes` bytes of
//   float32, each `repeats` times after one warm-up, takes the fastest of
//   each and fits AllreduceCost (balance.h): latency_s = the one-float time,
//   bytes_per_s = bytes / (large - small) (0 when the difference is not
//   positive: bytes then cost nothing measurable). Every rank of the group
//   returns the same fit (the slowest rank's times, by a Max allreduce). A
//   group of one rank costs nothing: {0, 0}.
// - broadcast_cost(cost, group, root): the root's cost on every rank of
//   `group` (so ranks of different data-parallel groups plan alike).
#pragma once

#include <cstdint>

#include "parallel/comm/process_group.h"
#include "parallel/partition/balance.h"

namespace weft::parallel::partition {

AllreduceCost measure_allreduce(ProcessGroup& group, int64_t bytes = int64_t{4} << 20, int repeats = 3);
AllreduceCost broadcast_cost(const AllreduceCost& cost, ProcessGroup& group, int root);

}  // namespace weft::parallel::partition
