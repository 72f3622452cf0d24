// The schedule validator (see validate.h).
#include "parallel/pipe/validate.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include "core/error.h"

namespace weft::parallel::pipe {
namespace {

// A position in the schedule, printed as "rank R action I (<action>)".
struct Where {
  int rank;
  int index;
  Action action;
};

std::string where(const Where& w) {
  return detail::str_cat("rank ", w.rank, " action ", w.index, " (", to_string(w.action), ")");
}

// (payload is a gradient, sending stage, micro-batch): what a send and its receive share.
using MessageKey = std::tuple<bool, int, int>;

MessageKey message_key(const Action& a) {
  const bool grad = a.kind == ActionKind::kSendGrad || a.kind == ActionKind::kRecvGrad;
  const int sender = is_send(a.kind) ? a.stage : a.peer_stage;
  return {grad, sender, a.microbatch};
}

std::string describe(const MessageKey& k) {
  return detail::str_cat(std::get<0>(k) ? "gradient" : "activation", " of micro-batch ", std::get<2>(k), " from stage ",
                         std::get<1>(k));
}

void check_shape(const Schedule& s) {
  WEFT_CHECK(s.num_ranks > 0 && s.num_microbatches > 0 && s.virtual_stages > 0, "schedule ", s.name,
             ": ranks, micro-batches and virtual stages must be positive (ranks=", s.num_ranks,
             ", microbatches=", s.num_microbatches, ", virtual=", s.virtual_stages, ")");
  WEFT_CHECK(static_cast<int>(s.rank_actions.size()) == s.num_ranks, "schedule ", s.name, ": ", s.rank_actions.size(),
             " action lists for ", s.num_ranks, " ranks");
  WEFT_CHECK(s.num_stages() > 0, "schedule ", s.name, ": no stages placed");
  for (int st = 0; st < s.num_stages(); ++st)
    WEFT_CHECK(s.stage_to_rank[st] >= 0 && s.stage_to_rank[st] < s.num_ranks, "schedule ", s.name, ": stage ", st,
               " placed on rank ", s.stage_to_rank[st], ", outside [0, ", s.num_ranks, ")");
}

void check_action(const Schedule& s, const Where& w) {
  const Action& a = w.action;
  const int S = s.num_stages();
  WEFT_CHECK(a.stage >= 0 && a.stage < S, "schedule ", s.name, ": ", where(w), ": stage ", a.stage,
             " out of range [0, ", S, ")");
  WEFT_CHECK(s.stage_to_rank[a.stage] == w.rank, "schedule ", s.name, ": ", where(w), ": stage ", a.stage,
             " lives on rank ", s.stage_to_rank[a.stage], ", not rank ", w.rank);
  WEFT_CHECK(a.microbatch >= 0 && a.microbatch < s.num_microbatches, "schedule ", s.name, ": ", where(w),
             ": micro-batch ", a.microbatch, " out of range [0, ", s.num_microbatches, ")");
  WEFT_CHECK(a.kind != ActionKind::kWeight || s.split_backward, "schedule ", s.name, ": ", where(w),
             ": W in a schedule whose B is the full backward");
  if (is_reduce(a.kind))
    WEFT_CHECK(s.reduce_grads, "schedule ", s.name, ": ", where(w),
               ": a data-parallel reduction in a schedule that does not reduce gradients (reduce_grads is false)");
  if (is_tied(a.kind) || a.kind == ActionKind::kReduceTiedGrad) {
    WEFT_CHECK(a.tie >= 0 && a.tie < static_cast<int>(s.tied_stages.size()), "schedule ", s.name, ": ", where(w),
               ": tied group ", a.tie, " out of range [0, ", s.tied_stages.size(), ")");
    const auto& stages = s.tied_stages[a.tie];
    WEFT_CHECK(std::find(stages.begin(), stages.end(), a.stage) != stages.end(), "schedule ", s.name, ": ", where(w),
               ": stage ", a.stage, " holds no parameter of tied group ", a.tie);
    return;
  }
  if (!is_comm(a.kind)) return;
  const bool to_next = a.kind == ActionKind::kSendActivation || a.kind == ActionKind::kRecvGrad;
  const int want_peer = to_next ? a.stage + 1 : a.stage - 1;
  WEFT_CHECK(want_peer >= 0 && want_peer < S, "schedule ", s.name, ": ", where(w), ": stage ", a.stage,
             " has no neighbour stage ", want_peer, " to ", is_send(a.kind) ? "send to" : "receive from");
  WEFT_CHECK(a.peer_stage == want_peer, "schedule ", s.name, ": ", where(w), ": peer stage ", a.peer_stage,
             " should be ", want_peer);
  WEFT_CHECK(a.peer_rank == s.stage_to_rank[want_peer], "schedule ", s.name, ": ", where(w), ": peer rank ",
             a.peer_rank, " but stage ", want_peer, " lives on rank ", s.stage_to_rank[want_peer]);
  WEFT_CHECK(a.peer_rank != w.rank, "schedule ", s.name, ": ", where(w), ": stages ", a.stage, " and ", want_peer,
             " share rank ", w.rank, " and exchange nothing");
}

// Step 3: order and local availability on one rank.
void check_rank_order(const Schedule& s, int r) {
  const int last = s.num_stages() - 1;
  std::map<std::tuple<ActionKind, int, int>, int> seen;  // (kind, stage, mb) -> index
  auto has = [&](ActionKind k, int stage, int mb) { return seen.count({k, stage, mb}) > 0; };
  const auto& list = s.rank_actions[r];
  for (int i = 0; i < static_cast<int>(list.size()); ++i) {
    const Action& a = list[i];
    const Where w{r, i, a};
    const int st = a.stage, mb = a.microbatch;
    const bool by_group = is_tied(a.kind) || a.kind == ActionKind::kReduceTiedGrad;
    auto [it, fresh] = seen.emplace(std::make_tuple(a.kind, by_group ? a.tie : st, mb), i);
    WEFT_CHECK(fresh, "schedule ", s.name, ": ", where(w), ": repeats action ", it->second);
    switch (a.kind) {
      case ActionKind::kForward:
        if (st > 0) {
          if (s.stage_to_rank[st - 1] == r)
            WEFT_CHECK(has(ActionKind::kForward, st - 1, mb), "schedule ", s.name, ": ", where(w), ": runs before F",
                       st - 1, ".", mb, ", which produces its input on this rank");
          else
            WEFT_CHECK(has(ActionKind::kRecvActivation, st, mb), "schedule ", s.name, ": ", where(w),
                       ": its input from stage ", st - 1, " on rank ", s.stage_to_rank[st - 1],
                       " was not received before (no earlier RecvAct", st, ".", mb, ")");
        }
        break;
      case ActionKind::kBackward:
        WEFT_CHECK(has(ActionKind::kForward, st, mb), "schedule ", s.name, ": ", where(w), ": runs before F", st, ".",
                   mb);
        if (st < last) {
          if (s.stage_to_rank[st + 1] == r)
            WEFT_CHECK(has(ActionKind::kBackward, st + 1, mb), "schedule ", s.name, ": ", where(w), ": runs before B",
                       st + 1, ".", mb, ", which produces its output gradient on this rank");
          else
            WEFT_CHECK(has(ActionKind::kRecvGrad, st, mb), "schedule ", s.name, ": ", where(w),
                       ": its output gradient from stage ", st + 1, " on rank ", s.stage_to_rank[st + 1],
                       " was not received before (no earlier RecvGrad", st, ".", mb, ")");
        }
        break;
      case ActionKind::kWeight:
        WEFT_CHECK(has(ActionKind::kBackward, st, mb), "schedule ", s.name, ": ", where(w), ": runs before B", st, ".",
                   mb);
        break;
      case ActionKind::kSendActivation:
        WEFT_CHECK(has(ActionKind::kForward, st, mb), "schedule ", s.name, ": ", where(w), ": sends before F", st, ".",
                   mb, " produced the activation");
        break;
      case ActionKind::kSendGrad:
        WEFT_CHECK(has(ActionKind::kBackward, st, mb), "schedule ", s.name, ": ", where(w), ": sends before B", st, ".",
                   mb, " produced the gradient");
        break;
      case ActionKind::kRecvActivation:
      case ActionKind::kRecvGrad: break;
      case ActionKind::kTiedGrad:  // after every gradient of the group's stages on this rank
        for (int t : s.tied_stages[a.tie]) {
          if (s.stage_to_rank[t] != r) continue;
          const ActionKind last_grad = s.split_backward ? ActionKind::kWeight : ActionKind::kBackward;
          for (int m = 0; m < s.num_microbatches; ++m)
            WEFT_CHECK(has(last_grad, t, m), "schedule ", s.name, ": ", where(w), ": sums tied group ", a.tie,
                       "'s gradient before ", to_string(last_grad), t, ".", m, " produced its part");
        }
        break;
      case ActionKind::kReduceGrad: {  // after every gradient of its stage (Note [gradient reduction])
        const ActionKind last_grad = s.split_backward ? ActionKind::kWeight : ActionKind::kBackward;
        for (int m = 0; m < s.num_microbatches; ++m)
          WEFT_CHECK(has(last_grad, st, m), "schedule ", s.name, ": ", where(w), ": reduces stage ", st,
                     "'s gradients before ", to_string(last_grad), st, ".", m, " produced its part");
        break;
      }
      case ActionKind::kReduceTiedGrad:
        WEFT_CHECK(seen.count({ActionKind::kTiedGrad, a.tie, 0}) > 0, "schedule ", s.name, ": ", where(w),
                   ": averages tied group ", a.tie, " before its sum over stages (no earlier Tied", a.tie, ")");
        break;
      case ActionKind::kOverlap: {  // Note [overlapped F and B]: F(st, .) then a B, adjacent and independent
        const bool pair = i + 2 < static_cast<int>(list.size()) && list[i + 1].kind == ActionKind::kForward &&
                          list[i + 1].stage == st && list[i + 2].kind == ActionKind::kBackward;
        WEFT_CHECK(pair, "schedule ", s.name, ": ", where(w), ": is not followed by F", st,
                   ".<micro-batch> and then a B (an overlap pairs the next two actions)");
        const Action& f = list[i + 1];
        const Action& b = list[i + 2];
        WEFT_CHECK(f.stage != b.stage || f.microbatch != b.microbatch, "schedule ", s.name, ": ", where(w), ": ",
                   to_string(b), " needs ", to_string(f), "'s result and cannot run at the same time");
        break;
      }
    }
  }
}

void check_complete(const Schedule& s) {
  std::set<std::tuple<ActionKind, int, int>> present;
  for (const auto& list : s.rank_actions)
    for (const Action& a : list)
      if (is_compute(a.kind)) present.insert({a.kind, a.stage, a.microbatch});
  for (int st = 0; st < s.num_stages(); ++st)
    for (int mb = 0; mb < s.num_microbatches; ++mb) {
      for (ActionKind k : {ActionKind::kForward, ActionKind::kBackward, ActionKind::kWeight}) {
        if (k == ActionKind::kWeight && !s.split_backward) continue;
        WEFT_CHECK(present.count({k, st, mb}), "schedule ", s.name, ": stage ", st, " micro-batch ", mb, " has no ",
                   to_string(k), " on rank ", s.stage_to_rank[st]);
      }
    }
  for (int g = 0; g < static_cast<int>(s.tied_stages.size()); ++g)
    for (int r : s.tied_ranks(g)) {
      bool found = false;
      for (const Action& a : s.rank_actions[r]) found = found || (is_tied(a.kind) && a.tie == g);
      WEFT_CHECK(found, "schedule ", s.name, ": rank ", r, " holds a stage of tied group ", g, " but has no Tied", g,
                 " action");
    }
  if (!s.reduce_grads) return;
  for (int st = 0; st < s.num_stages(); ++st) {
    const int r = s.stage_to_rank[st];
    bool found = false;
    for (const Action& a : s.rank_actions[r]) found = found || (a.kind == ActionKind::kReduceGrad && a.stage == st);
    WEFT_CHECK(found, "schedule ", s.name, ": stage ", st, " has no Reduce", st, " on rank ", r,
               " (the schedule reduces gradients over data parallelism)");
  }
  for (int g = 0; g < static_cast<int>(s.tied_stages.size()); ++g)
    for (int r : s.tied_ranks(g)) {
      bool found = false;
      for (const Action& a : s.rank_actions[r]) found = found || (a.kind == ActionKind::kReduceTiedGrad && a.tie == g);
      WEFT_CHECK(found, "schedule ", s.name, ": rank ", r, " holds a stage of tied group ", g, " but has no ReduceTied",
                 g, " action (the schedule reduces gradients over data parallelism)");
    }
}

// Where each rank's TiedGrad(g) sits: tied_index[g][r], or -1.
std::vector<std::vector<int>> tied_index(const Schedule& s) {
  std::vector<std::vector<int>> out(s.tied_stages.size(), std::vector<int>(s.num_ranks, -1));
  for (int r = 0; r < s.num_ranks; ++r)
    for (int i = 0; i < static_cast<int>(s.rank_actions[r].size()); ++i)
      if (is_tied(s.rank_actions[r][i].kind)) out[s.rank_actions[r][i].tie][r] = i;
  return out;
}

struct Messages {
  std::map<MessageKey, Where> send, recv;
};

Messages match_messages(const Schedule& s) {
  Messages m;
  for (int r = 0; r < s.num_ranks; ++r)
    for (int i = 0; i < static_cast<int>(s.rank_actions[r].size()); ++i) {
      const Action& a = s.rank_actions[r][i];
      if (!is_comm(a.kind)) continue;
      auto& side = is_send(a.kind) ? m.send : m.recv;
      const Where w{r, i, a};
      auto [it, fresh] = side.emplace(message_key(a), w);
      WEFT_CHECK(fresh, "schedule ", s.name, ": ", where(w), ": ", is_send(a.kind) ? "sends" : "receives", " the ",
                 describe(message_key(a)), " a second time (first at ", where(it->second), ")");
    }
  for (const auto& [key, w] : m.send) {
    auto it = m.recv.find(key);
    WEFT_CHECK(it != m.recv.end() && it->second.rank == w.action.peer_rank, "schedule ", s.name, ": ", where(w),
               ": no matching ", std::get<0>(key) ? "RecvGrad" : "RecvAct", " on rank ", w.action.peer_rank,
               " for the ", describe(key));
  }
  for (const auto& [key, w] : m.recv) {
    auto it = m.send.find(key);
    WEFT_CHECK(it != m.send.end() && it->second.rank == w.action.peer_rank, "schedule ", s.name, ": ", where(w),
               ": no matching ", std::get<0>(key) ? "SendGrad" : "SendAct", " on rank ", w.action.peer_rank,
               " for the ", describe(key));
  }
  return m;
}

// Step 6: run the lists against each other; a receive proceeds once its send was issued.
void check_deadlock(const Schedule& s, const Messages& m) {
  const int p = s.num_ranks;
  std::vector<int> pc(p, 0);
  const std::vector<std::vector<int>> tied_at = tied_index(s);
  auto done = [&](int r) { return pc[r] >= static_cast<int>(s.rank_actions[r].size()); };
  // What a rank at a receive or a TiedGrad waits for: the send, or the first
  // rank of the tied group that has not reached its TiedGrad; nullopt if nothing.
  auto awaited = [&](int r) -> std::optional<Where> {
    const Action& a = s.rank_actions[r][pc[r]];
    if (is_recv(a.kind)) {
      const Where& send = m.send.at(message_key(a));
      if (pc[send.rank] <= send.index) return send;
    } else if (is_tied(a.kind)) {
      for (int q : s.tied_ranks(a.tie)) {
        const int at = tied_at[a.tie][q];
        if (pc[q] < at) return Where{q, at, s.rank_actions[q][at]};
      }
    }
    return std::nullopt;
  };
  bool progress = true;
  while (progress) {
    progress = false;
    for (int r = 0; r < p; ++r)
      while (!done(r) && !awaited(r)) {
        ++pc[r];
        progress = true;
      }
  }
  int first = -1;
  for (int r = 0; r < p && first < 0; ++r)
    if (!done(r)) first = r;
  if (first < 0) return;
  // Every unfinished rank waits on a send of another unfinished rank: follow the waits to a cycle.
  std::vector<int> chain{first};
  std::vector<int> pos(p, -1);
  pos[first] = 0;
  for (;;) {
    const int next = awaited(chain.back())->rank;
    if (pos[next] >= 0) {
      chain.push_back(next);
      break;
    }
    pos[next] = static_cast<int>(chain.size());
    chain.push_back(next);
  }
  std::ostringstream cycle;
  const size_t cycle_start = static_cast<size_t>(pos[chain.back()]);
  for (size_t i = cycle_start; i < chain.size(); ++i) cycle << (i > cycle_start ? " -> " : "") << "rank " << chain[i];
  const Where blocked{first, pc[first], s.rank_actions[first][pc[first]]};
  const Where send = *awaited(first);
  const Where peer{send.rank, pc[send.rank], s.rank_actions[send.rank][pc[send.rank]]};
  WEFT_ERROR("schedule ", s.name, ": deadlock: ", where(blocked), " waits forever for ", where(send), ", which rank ",
             send.rank, " never reaches: it is blocked at ", where(peer), "; wait cycle: ", cycle.str());
}

}  // namespace

void validate(const Schedule& schedule) {
  check_shape(schedule);
  for (int r = 0; r < schedule.num_ranks; ++r)
    for (int i = 0; i < static_cast<int>(schedule.rank_actions[r].size()); ++i)
      check_action(schedule, Where{r, i, schedule.rank_actions[r][i]});
  for (int r = 0; r < schedule.num_ranks; ++r) check_rank_order(schedule, r);
  check_complete(schedule);
  const Messages messages = match_messages(schedule);
  check_deadlock(schedule, messages);
}

}  // namespace weft::parallel::pipe
