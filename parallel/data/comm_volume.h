// Communication volume: what one rank sends in a collective, by the ring
// model, so that DASO's bytes between nodes and a DDP's allreduce bytes are
// counted with one formula.
//
// Contract:
// - ring_allreduce_bytes(bytes, n): a ring allreduce of a `bytes` buffer over
//   n ranks sends 2 (n - 1) / n of it per rank (reduce-scatter then
//   allgather, n chunks each); 0 for n <= 1. Rounded down to whole bytes.
// - ring_allgather_bytes(bytes, n): a ring allgather in which every rank
//   contributes `bytes` sends (n - 1) x bytes per rank; 0 for n <= 1.
// - counting_hook(counter, inner) is a DDP / Reducer comm hook that adds
//   ring_allreduce_bytes(bucket bytes, group size) to *counter, then runs
//   `inner` (empty: allreduce_avg_hook). The count is the bucket's bytes in
//   its own dtype: a compressing inner hook sends less than counted.
//   The counter is not atomic: one rank's backward at a time.
#pragma once

#include <cstdint>
#include <memory>

#include "parallel/data/comm_hooks.h"

namespace weft::parallel {

int64_t ring_allreduce_bytes(int64_t bytes, int n);
int64_t ring_allgather_bytes(int64_t bytes, int n);

CommHook counting_hook(std::shared_ptr<int64_t> counter, CommHook inner = {});

}  // namespace weft::parallel
