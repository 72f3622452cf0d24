// The schedule simulator (see simulate.h).
#include "parallel/pipe/simulate.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "core/error.h"
#include "parallel/pipe/validate.h"

namespace weft::parallel::pipe {
namespace {

void check_costs(const Schedule& s, const CostModel& c) {
  const size_t S = static_cast<size_t>(s.num_stages());
  auto per_stage = [&](const std::vector<double>& v, const char* what, bool may_be_empty) {
    WEFT_CHECK(v.size() == S || (may_be_empty && v.empty()), "simulate ", s.name, ": ", what, " has ", v.size(),
               " entries for ", S, " stages");
    for (size_t i = 0; i < v.size(); ++i)
      WEFT_CHECK(v[i] >= 0 && std::isfinite(v[i]), "simulate ", s.name, ": ", what, "[", i, "] = ", v[i],
                 " is not a finite non-negative number");
  };
  per_stage(c.forward, "forward cost", false);
  per_stage(c.backward, "backward cost", false);
  per_stage(c.weight, "weight cost", false);
  per_stage(c.activation_memory, "activation memory", true);
  per_stage(c.weight_grad_memory, "weight-gradient memory", true);
  per_stage(c.reduce_grad, "reduce_grad cost", true);
  WEFT_CHECK(c.reduce_tied.empty() || c.reduce_tied.size() == s.tied_stages.size(), "simulate ", s.name,
             ": reduce_tied has ", c.reduce_tied.size(), " entries for ", s.tied_stages.size(), " tied groups");
  for (size_t i = 0; i < c.reduce_tied.size(); ++i)
    WEFT_CHECK(c.reduce_tied[i] >= 0 && std::isfinite(c.reduce_tied[i]), "simulate ", s.name, ": reduce_tied[", i,
               "] = ", c.reduce_tied[i], " is not a finite non-negative number");
  WEFT_CHECK(c.transfer.empty() || c.transfer.size() + 1 == S, "simulate ", s.name, ": transfer has ",
             c.transfer.size(), " entries for ", S - 1, " stage boundaries");
  for (size_t i = 0; i < c.transfer.size(); ++i)
    WEFT_CHECK(c.transfer[i] >= 0 && std::isfinite(c.transfer[i]), "simulate ", s.name, ": transfer[", i,
               "] = ", c.transfer[i], " is not a finite non-negative number");
}

// (payload is a gradient, sending stage, micro-batch), as the validator matches them.
std::tuple<bool, int, int> message_key(const Action& a) {
  const bool grad = a.kind == ActionKind::kSendGrad || a.kind == ActionKind::kRecvGrad;
  return {grad, is_send(a.kind) ? a.stage : a.peer_stage, a.microbatch};
}

}  // namespace

CostModel CostModel::uniform(int stages, double forward, double backward, double weight, double transfer) {
  WEFT_CHECK(stages > 0, "CostModel::uniform: stages must be positive (stages=", stages, ")");
  CostModel c;
  c.forward.assign(stages, forward);
  c.backward.assign(stages, backward);
  c.weight.assign(stages, weight);
  c.transfer.assign(stages - 1, transfer);
  return c;
}

double action_cost(const Schedule& s, const CostModel& c, const Action& a) {
  switch (a.kind) {
    case ActionKind::kForward: return c.forward.at(a.stage);
    case ActionKind::kBackward: return c.backward.at(a.stage) + (s.split_backward ? 0.0 : c.weight.at(a.stage));
    case ActionKind::kWeight: return c.weight.at(a.stage);
    default: return 0.0;
  }
}

Simulation simulate(const Schedule& s, const CostModel& c) {
  validate(s);
  check_costs(s, c);
  const int p = s.num_ranks;
  Simulation sim;
  sim.ranks.resize(p);
  std::vector<size_t> pc(p, 0);
  std::vector<double> clock(p, 0.0);
  std::vector<double> channel(p, 0.0);  // when the rank's reductions are done (Note [gradient reduction])
  std::map<std::tuple<bool, int, int>, double> arrival;  // message -> time it arrives
  std::map<std::pair<int, int>, double> tied_arrival;    // (group, rank) -> when the rank reached TiedGrad
  bool progress = true;
  while (progress) {
    progress = false;
    for (int r = 0; r < p; ++r) {
      const auto& list = s.rank_actions[r];
      while (pc[r] < list.size()) {
        const Action& a = list[pc[r]];
        TimedAction t{a, clock[r], clock[r]};
        if (is_recv(a.kind)) {
          auto it = arrival.find(message_key(a));
          if (it == arrival.end()) break;  // its send is not issued yet
          t.end = std::max(clock[r], it->second);
        } else if (is_tied(a.kind)) {  // a rendezvous: ends when the group's last rank arrives
          tied_arrival.emplace(std::make_pair(a.tie, r), clock[r]);
          bool all = true;
          double last = clock[r];
          for (int q : s.tied_ranks(a.tie)) {
            auto it = tied_arrival.find({a.tie, q});
            if (it == tied_arrival.end()) {
              all = false;
              break;
            }
            last = std::max(last, it->second);
          }
          if (!all) break;
          t.end = last;
        } else if (a.kind == ActionKind::kReduceGrad) {  // asynchronous: the rank goes on
          t.start = std::max(clock[r], channel[r]);
          t.end = t.start + (c.reduce_grad.empty() ? 0.0 : c.reduce_grad[a.stage]);
          channel[r] = t.end;
          sim.ranks[r].actions.push_back(t);
          ++pc[r];
          progress = true;
          continue;
        } else if (a.kind == ActionKind::kReduceTiedGrad) {  // the rank waits for it
          t.end = std::max(clock[r], channel[r]) + (c.reduce_tied.empty() ? 0.0 : c.reduce_tied[a.tie]);
          channel[r] = t.end;
        } else if (is_send(a.kind)) {
          const int boundary = std::min(a.stage, a.peer_stage);
          arrival[message_key(a)] = clock[r] + (c.transfer.empty() ? 0.0 : c.transfer[boundary]);
        } else {
          t.end = clock[r] + action_cost(s, c, a);
          sim.ranks[r].busy += t.end - t.start;
        }
        clock[r] = t.end;
        sim.ranks[r].actions.push_back(t);
        ++pc[r];
        progress = true;
      }
    }
  }
  for (int r = 0; r < p; ++r)
    WEFT_INTERNAL_ASSERT(pc[r] == s.rank_actions[r].size(), "simulate ", s.name, ": rank ", r,
                         " stuck after validation");
  for (int r = 0; r < p; ++r) clock[r] = std::max(clock[r], channel[r]);
  for (int r = 0; r < p; ++r) sim.makespan = std::max(sim.makespan, clock[r]);
  double idle = 0;
  for (int r = 0; r < p; ++r) {
    RankTimeline& tl = sim.ranks[r];
    tl.finish = clock[r];
    tl.idle = sim.makespan - tl.busy;
    idle += tl.idle;
    int live = 0, pending = 0;
    double memory = 0;
    for (const TimedAction& t : tl.actions) {
      const int st = t.action.stage;
      const double act = c.activation_memory.empty() ? 1.0 : c.activation_memory[st];
      const double wgt = c.weight_grad_memory.empty() ? 0.0 : c.weight_grad_memory[st];
      switch (t.action.kind) {
        case ActionKind::kForward:
          ++live;
          memory += act;
          break;
        case ActionKind::kBackward:
          --live;
          memory -= act;
          if (s.split_backward) {
            ++pending;
            memory += wgt;
          }
          break;
        case ActionKind::kWeight:
          --pending;
          memory -= wgt;
          break;
        default: break;
      }
      tl.peak_live_activations = std::max(tl.peak_live_activations, live);
      tl.peak_pending_weights = std::max(tl.peak_pending_weights, pending);
      tl.peak_memory = std::max(tl.peak_memory, memory);
    }
  }
  sim.bubble_fraction = sim.makespan > 0 ? idle / (p * sim.makespan) : 0.0;
  return sim;
}

std::vector<std::vector<Action>> clock_cycles(const Simulation& sim, double unit) {
  WEFT_CHECK(unit > 0, "clock_cycles: unit must be positive (unit=", unit, ")");
  const int ticks = static_cast<int>(std::ceil(sim.makespan / unit - 1e-9));
  std::vector<std::vector<Action>> out(std::max(ticks, 0));
  for (const RankTimeline& tl : sim.ranks)
    for (const TimedAction& t : tl.actions) {
      if (!is_compute(t.action.kind)) continue;
      const int tick = static_cast<int>(std::floor(t.start / unit + 1e-9));
      if (tick >= 0 && tick < ticks) out[tick].push_back(t.action);
    }
  return out;
}

}  // namespace weft::parallel::pipe
