// Pairing forwards with backwards (see overlap.h).
#include "parallel/pipe/overlap.h"

#include "core/error.h"
#include "parallel/pipe/validate.h"

namespace weft::parallel::pipe {
namespace {

// Rank r's list with the F at `f` and the B at `b` (only sends and receives
// between) made an overlapped pair.
std::vector<Action> paired(const std::vector<Action>& list, size_t f, size_t b) {
  std::vector<Action> out(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(f));
  for (size_t i = f + 1; i < b; ++i)
    if (is_recv(list[i].kind)) out.push_back(list[i]);
  out.push_back(Action::overlap(list[f].stage));
  out.push_back(list[f]);
  out.push_back(list[b]);
  for (size_t i = f + 1; i < b; ++i)
    if (is_send(list[i].kind)) out.push_back(list[i]);
  out.insert(out.end(), list.begin() + static_cast<std::ptrdiff_t>(b) + 1, list.end());
  return out;
}

// Pairs what validates (and, with costs, does not lengthen the simulated step).
Schedule pair_up(Schedule s, const CostModel* costs) {
  validate(s);
  s.name += "-overlap";
  double best = costs ? simulate(s, *costs).makespan : 0;
  for (int r = 0; r < s.num_ranks; ++r) {
    for (size_t f = 0; f < s.rank_actions[r].size(); ++f) {
      const std::vector<Action>& list = s.rank_actions[r];
      if (list[f].kind != ActionKind::kForward || (f > 0 && list[f - 1].kind == ActionKind::kOverlap)) continue;
      size_t b = f + 1;
      while (b < list.size() && is_comm(list[b].kind)) ++b;
      if (b == list.size() || list[b].kind != ActionKind::kBackward) continue;
      if (list[b].stage == list[f].stage && list[b].microbatch == list[f].microbatch) continue;
      Schedule trial = s;
      trial.rank_actions[r] = paired(list, f, b);
      try {
        validate(trial);
      } catch (const Error&) {
        continue;  // this pair would deadlock or starve an input: keep the F as it was
      }
      if (costs) {
        const double makespan = simulate(trial, *costs).makespan;
        if (makespan > best * (1 + 1e-12)) continue;  // it would lengthen the step
        best = makespan;
      }
      s = std::move(trial);
    }
  }
  return s;
}

}  // namespace

Schedule overlap_forward_backward(Schedule s) { return pair_up(std::move(s), nullptr); }

Schedule overlap_forward_backward(Schedule s, const CostModel& costs) { return pair_up(std::move(s), &costs); }

}  // namespace weft::parallel::pipe
