// ZB-H1 (zero bubble, Qi et al. 2023): 1F1B's F/B order with the weight gradient
// split off and deferred into the drain bubble (see generators.h).
#include <algorithm>

#include "core/error.h"
#include "parallel/pipe/generators.h"

namespace weft::parallel::pipe {

Schedule zero_bubble_h1_schedule(int ranks, int microbatches, int virtual_stages) {
  WEFT_CHECK(virtual_stages == 1, "zb-h1 runs one stage per rank (virtual=", virtual_stages, ")");
  Schedule s = make_empty_schedule("zb-h1", ranks, microbatches, 1, /*split_backward=*/true);
  for (int r = 0; r < ranks; ++r) {
    auto& out = s.rank_actions[r];
    int next_w = 0;
    // After B of micro-batch j, run the W of micro-batch j - r if it is due.
    auto backward_then_due_weight = [&](int j) {
      out.push_back(Action::backward(r, j));
      if (next_w <= j - r) out.push_back(Action::weight(r, next_w++));
    };
    const int warmup = std::min(ranks - 1 - r, microbatches);
    for (int mb = 0; mb < warmup; ++mb) out.push_back(Action::forward(r, mb));
    for (int j = 0; j < microbatches - warmup; ++j) {
      out.push_back(Action::forward(r, warmup + j));
      backward_then_due_weight(j);
    }
    for (int mb = microbatches - warmup; mb < microbatches; ++mb) backward_then_due_weight(mb);
    while (next_w < microbatches) out.push_back(Action::weight(r, next_w++));
  }
  insert_communication(s);
  return s;
}

}  // namespace weft::parallel::pipe
