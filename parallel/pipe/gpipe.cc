// GPipe (fill-drain) and, with several stages per rank, its looped BFS form.
#include "parallel/pipe/generators.h"

namespace weft::parallel::pipe {

Schedule gpipe_schedule(int ranks, int microbatches, int virtual_stages) {
  Schedule s = make_empty_schedule("gpipe", ranks, microbatches, virtual_stages, /*split_backward=*/false);
  for (int r = 0; r < ranks; ++r) {
    const std::vector<int> stages = s.stages_of_rank(r);
    auto& out = s.rank_actions[r];
    for (int stage : stages)
      for (int mb = 0; mb < microbatches; ++mb) out.push_back(Action::forward(stage, mb));
    for (auto it = stages.rbegin(); it != stages.rend(); ++it)
      for (int mb = 0; mb < microbatches; ++mb) out.push_back(Action::backward(*it, mb));
  }
  insert_communication(s);
  return s;
}

}  // namespace weft::parallel::pipe
