// The greedy list scheduler (contract and Note [greedy zero bubble] in
// list_schedule.h).
#include "parallel/pipe/list_schedule.h"

#include <algorithm>
#include <deque>

#include "core/error.h"

namespace weft::parallel::pipe {

namespace {

void check_options(const ListScheduleOptions& o) {
  const int p = o.num_ranks, S = static_cast<int>(o.stage_to_rank.size());
  WEFT_CHECK(p > 0 && S > 0 && o.num_microbatches > 0, "list_schedule: ranks (", p, "), stages (", S,
             ") and micro-batches (", o.num_microbatches, ") must be positive");
  WEFT_CHECK(static_cast<int>(o.activation_limit.size()) == p, "list_schedule: ", o.activation_limit.size(),
             " activation limits for ", p, " ranks");
  std::vector<int> held(p, 0);
  for (int s = 0; s < S; ++s) {
    WEFT_CHECK(o.stage_to_rank[s] >= 0 && o.stage_to_rank[s] < p, "list_schedule: stage ", s, " placed on rank ",
               o.stage_to_rank[s], ", outside [0, ", p, ")");
    ++held[o.stage_to_rank[s]];
  }
  WEFT_CHECK(o.stash_limit.empty() || static_cast<int>(o.stash_limit.size()) == p,
             "list_schedule: ", o.stash_limit.size(), " stash limits for ", p, " ranks");
  for (int r = 0; r < p; ++r) {
    WEFT_CHECK(held[r] > 0, "list_schedule: rank ", r, " holds no stage");
    WEFT_CHECK(o.activation_limit[r] >= held[r], "list_schedule: rank ", r, "'s activation limit ",
               o.activation_limit[r], " is below its ", held[r], " stages (one micro-batch must fit)");
    WEFT_CHECK(o.stash_limit.empty() || o.stash_limit[r] >= o.activation_limit[r], "list_schedule: rank ", r,
               "'s stash limit ", o.stash_limit.empty() ? 0 : o.stash_limit[r], " is below its activation limit ",
               o.activation_limit[r]);
  }
}

}  // namespace

std::optional<std::vector<std::vector<Action>>> list_schedule(const ListScheduleOptions& o) {
  check_options(o);
  const int p = o.num_ranks, m = o.num_microbatches, S = static_cast<int>(o.stage_to_rank.size());
  std::vector<std::vector<int>> stages(p);  // per rank, increasing
  for (int s = 0; s < S; ++s) stages[o.stage_to_rank[s]].push_back(s);
  // End times (-1: not run) of F and B per (stage, micro-batch).
  std::vector<std::vector<int>> f_end(S, std::vector<int>(m, -1)), b_end = f_end;
  std::vector<int> next_f(S, 0), next_b(S, 0);  // each stage runs F and B in micro-batch order
  std::vector<int> busy_until(p, 0), live(p, 0), oldest(p, 0);
  std::vector<std::vector<int>> left(p);  // per rank, per micro-batch: its forwards still to run there
  for (int r = 0; r < p; ++r) left[r].assign(m, static_cast<int>(stages[r].size()));
  std::vector<std::deque<Action>> pending_w(p);
  std::vector<std::vector<Action>> out(p);
  const int64_t total = 3 * int64_t{S} * m;
  int64_t ran = 0;
  for (int t = 0; ran < total; ++t) {
    bool active = false;
    for (int r = 0; r < p; ++r) {
      if (busy_until[r] > t) {
        active = true;
        continue;
      }
      auto ended = [t](int end) { return end >= 0 && end <= t; };
      auto reserve = [&](int mb) {
        int need = 0;
        for (int j = oldest[r]; j < mb; ++j) {
          need += left[r][j];
          if (need > 0 && o.reserve == MemoryReserve::kOldest) break;
        }
        return need;
      };
      // Candidates: (micro-batch, -stage) smallest first.
      std::optional<Action> best_b, best_f;
      auto better = [](const std::optional<Action>& cur, int s, int mb) {
        return !cur || mb < cur->microbatch || (mb == cur->microbatch && s > cur->stage);
      };
      for (int s : stages[r]) {
        const int bm = next_b[s];
        if (bm < m && ended(f_end[s][bm]) && (s == S - 1 || ended(b_end[s + 1][bm])) && better(best_b, s, bm))
          best_b = Action::backward(s, bm);
        const int fm = next_f[s];
        if (fm < m && (s == 0 || ended(f_end[s - 1][fm])) && better(best_f, s, fm)) {
          const int held = live[r] + reserve(fm);
          const int stash = held + static_cast<int>(pending_w[r].size());
          if (held < o.activation_limit[r] && (o.stash_limit.empty() || stash < o.stash_limit[r]))
            best_f = Action::forward(s, fm);
        }
      }
      Action a;
      if (best_b) {
        a = *best_b;
        b_end[a.stage][a.microbatch] = t + 1;
        ++next_b[a.stage];
        --live[r];
        pending_w[r].push_back(Action::weight(a.stage, a.microbatch));
      } else if (best_f) {
        a = *best_f;
        f_end[a.stage][a.microbatch] = t + 1;
        ++next_f[a.stage];
        ++live[r];
        --left[r][a.microbatch];
        while (oldest[r] < m && left[r][oldest[r]] == 0) ++oldest[r];
      } else if (!pending_w[r].empty()) {
        a = pending_w[r].front();
        pending_w[r].pop_front();
      } else {
        continue;
      }
      out[r].push_back(a);
      busy_until[r] = t + 1;
      active = true;
      ++ran;
    }
    if (!active) return std::nullopt;  // every rank waits on another: a stall
  }
  return out;
}

Schedule zero_bubble_list_schedule(std::string name, int ranks, int microbatches, int virtual_stages,
                                   std::vector<int> stage_to_rank, std::vector<int> activation_limit,
                                   std::vector<int> stash_limit) {
  Schedule s = make_empty_schedule(std::move(name), ranks, microbatches, virtual_stages, /*split_backward=*/true);
  s.stage_to_rank = std::move(stage_to_rank);
  ListScheduleOptions o;
  o.stage_to_rank = s.stage_to_rank;
  o.num_ranks = ranks;
  o.num_microbatches = microbatches;
  o.activation_limit = std::move(activation_limit);
  o.stash_limit = std::move(stash_limit);
  auto order = list_schedule(o);
  if (!order) {
    o.reserve = MemoryReserve::kAllOlder;
    order = list_schedule(o);
  }
  WEFT_INTERNAL_ASSERT(order.has_value(), "schedule ", s.name, ": the list scheduler stalled (ranks=", ranks,
                       ", microbatches=", microbatches, ")");
  s.rank_actions = std::move(*order);
  insert_communication(s);
  return s;
}

}  // namespace weft::parallel::pipe
