// 1F1B (PipeDream-flush): warm-up forwards, one forward one backward, drain.
#include <algorithm>

#include "core/error.h"
#include "parallel/pipe/generators.h"

namespace weft::parallel::pipe {

Schedule one_f_one_b_schedule(int ranks, int microbatches, int virtual_stages) {
  WEFT_CHECK(virtual_stages == 1, "1f1b runs one stage per rank (virtual=", virtual_stages,
             "); use the interleaved schedule for several stages per rank");
  Schedule s = make_empty_schedule("1f1b", ranks, microbatches, 1, /*split_backward=*/false);
  for (int r = 0; r < ranks; ++r) {
    auto& out = s.rank_actions[r];
    const int warmup = std::min(ranks - 1 - r, microbatches);
    for (int mb = 0; mb < warmup; ++mb) out.push_back(Action::forward(r, mb));
    for (int j = 0; j < microbatches - warmup; ++j) {
      out.push_back(Action::forward(r, warmup + j));
      out.push_back(Action::backward(r, j));
    }
    for (int mb = microbatches - warmup; mb < microbatches; ++mb) out.push_back(Action::backward(r, mb));
  }
  insert_communication(s);
  return s;
}

}  // namespace weft::parallel::pipe
