// A greedy list scheduler for split-backward pipelines under an activation
// limit: how the zbv and interleaved-zb generators (generators.h) order F, B
// and W on any placement.
//
// Contract (Note [greedy zero bubble]):
// - Input: a placement (stage -> rank), the micro-batch count m, and per rank
//   an activation limit in stage-micro-batches (an activation of (s, mb) is
//   live from F(s, mb) to B(s, mb), the simulator's peak_live_activations)
//   and a stash limit on live activations plus pending Ws (B ran, W not yet:
//   its weight-gradient stash is held), so that the stash does not grow with
//   m.
// - It plays the step out with unit costs (F = B = W = 1) and free
//   communication. Whenever a rank is free it runs, in this order of
//   preference: a ready B (its F ran here and the gradient of B(s+1, mb) is
//   there, or s is the last stage); else a ready F (the activation of
//   F(s-1, mb) is there, or s = 0) that the limit admits; else its oldest
//   pending W (in the order the Bs ran); else it idles one unit. Each stage
//   runs its Fs and its Bs in micro-batch order; among ready candidates the
//   smallest micro-batch wins, then the higher stage.
// - The limits admit F(s, mb) when live + reserve < activation limit and
//   live + pending + reserve < stash limit (a rank held back only by the
//   stash limit has a W to run), where reserve is
//   what older micro-batches still need on this rank: with
//   MemoryReserve::kOldest the forwards still to run here of the oldest
//   micro-batch before mb that has any, with kAllOlder those of every
//   micro-batch before mb. kAllOlder cannot stall when every activation
//   limit is at least the rank's stage count and no stash limit is below it
//   (the oldest unfinished micro-batch always finds room); kOldest admits
//   more and reaches lower bubbles (interleaved),
//   and has not been seen to stall, but when it does list_schedule returns
//   nullopt and zero_bubble_list_schedule falls back to kAllOlder.
// - The result is deterministic and each rank's peaks of live activations
//   and of live activations plus pending Ws stay within its limits.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "parallel/pipe/schedule.h"

namespace weft::parallel::pipe {

enum class MemoryReserve { kOldest, kAllOlder };

struct ListScheduleOptions {
  std::vector<int> stage_to_rank;     // the placement: stage -> rank
  int num_ranks = 0;                  // every rank in [0, num_ranks) holds at least one stage
  int num_microbatches = 0;           // m > 0
  std::vector<int> activation_limit;  // per rank, at least its stage count
  std::vector<int> stash_limit;       // per rank, at least its activation limit; empty: none
  MemoryReserve reserve = MemoryReserve::kOldest;
};

// Each rank's compute actions (F, B, W), or nullopt when every rank waits
// and none can act (see the contract above). Errors name a bad option.
std::optional<std::vector<std::vector<Action>>> list_schedule(const ListScheduleOptions& options);

// A split-backward Schedule named `name` on `stage_to_rank`, its compute
// order from list_schedule (kOldest, else kAllOlder), its communication
// inserted.
Schedule zero_bubble_list_schedule(std::string name, int ranks, int microbatches, int virtual_stages,
                                   std::vector<int> stage_to_rank, std::vector<int> activation_limit,
                                   std::vector<int> stash_limit);

}  // namespace weft::parallel::pipe
