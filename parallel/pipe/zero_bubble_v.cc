// ZB-V (the zero-bubble paper's V-shaped schedule) and interleaved zero
// bubble: split backward, ordered by the greedy list scheduler
// (list_schedule.h) under each rank's activation limit (see generators.h).
#include "core/error.h"
#include "parallel/pipe/generators.h"
#include "parallel/pipe/list_schedule.h"

namespace weft::parallel::pipe {

namespace {

void check_counts(const char* name, int ranks, int microbatches, int virtual_stages) {
  WEFT_CHECK(ranks > 0 && microbatches > 0 && virtual_stages > 0, name,
             ": ranks, micro-batches and virtual stages must be positive (ranks=", ranks,
             ", microbatches=", microbatches, ", virtual=", virtual_stages, ")");
}

}  // namespace

Schedule zero_bubble_v_schedule(int ranks, int microbatches, int virtual_stages) {
  check_counts("zbv", ranks, microbatches, virtual_stages);
  WEFT_CHECK(virtual_stages == 2, "zbv places two stages per rank in a V (virtual=", virtual_stages,
             "); set the virtual stages per rank to 2");
  // 2p live stage activations per rank (1F1B's p micro-batches of a rank's
  // share) and 3p with the pending weight-gradient stashes.
  return zero_bubble_list_schedule("zbv", ranks, microbatches, 2, v_placement(ranks),
                                   std::vector<int>(ranks, 2 * ranks), std::vector<int>(ranks, 3 * ranks));
}

Schedule interleaved_zero_bubble_schedule(int ranks, int microbatches, int virtual_stages) {
  check_counts("interleaved-zb", ranks, microbatches, virtual_stages);
  // Rank r keeps at most v p - r stage activations (torch's interleaved zero
  // bubble: (v-1) p + p - r), and 2p more with the pending weight-gradient stashes.
  std::vector<int> limit(ranks), stash(ranks);
  for (int r = 0; r < ranks; ++r) {
    limit[r] = virtual_stages * ranks - r;
    stash[r] = limit[r] + 2 * ranks;
  }
  return zero_bubble_list_schedule("interleaved-zb", ranks, microbatches, virtual_stages,
                                   looped_placement(ranks, virtual_stages), std::move(limit), std::move(stash));
}

}  // namespace weft::parallel::pipe
