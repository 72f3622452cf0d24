// The schedule simulator (see simulate.h).
#include "parallel/pipe/simulate.h"

#include <algorithm>
#include <cmath>
#include <limits>
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
  WEFT_CHECK(c.checkpointed >= 0, "simulate ", s.name, ": checkpointed = ", c.checkpointed, " is negative");
  WEFT_CHECK(c.overlap_speed > 0 && c.overlap_speed <= 1, "simulate ", s.name, ": overlap_speed = ", c.overlap_speed,
             " is not in (0, 1]");
  for (size_t i = 0; i < c.speed.size(); ++i)
    WEFT_CHECK(c.speed[i] > 0 && std::isfinite(c.speed[i]), "simulate ", s.name, ": speed[", i, "] = ", c.speed[i],
               " is not a finite positive number");
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
  const bool recompute = a.microbatch < c.checkpointed;
  switch (a.kind) {
    case ActionKind::kForward: return c.forward.at(a.stage);
    case ActionKind::kBackward:
      return c.backward.at(a.stage) + (s.split_backward && !recompute ? 0.0 : c.weight.at(a.stage)) +
             (recompute ? c.forward.at(a.stage) : 0.0);
    case ActionKind::kWeight: return recompute ? 0.0 : c.weight.at(a.stage);
    default: return 0.0;
  }
}

Simulation simulate(const Schedule& s, const CostModel& c) {
  validate(s);
  check_costs(s, c);
  const int p = s.num_ranks;
  Simulation sim;
  sim.ranks.resize(p);
  // Note [processor sharing]: an event-driven loop. `now` only moves forward,
  // to the earliest of: a computing rank's projected end, a message's
  // arrival, a waiting ReduceTiedGrad's end. Between events the number of
  // computing ranks is constant, so each progresses at one rate.
  enum class State { kReady, kComputing, kWaiting, kDone };
  // A compute action in progress: one per rank, or two for an overlapped F and
  // B (Note [overlapped F and B] in schedule.h).
  struct Job {
    TimedAction t;
    double work = 0;       // its cost (its time alone at full speed)
    double projected = 0;  // its end at `rate`
    double rate = 0;       // its speed since the last event; 0: not yet started
    bool running = false;
  };
  std::vector<State> state(p, State::kReady);
  std::vector<size_t> pc(p, 0);
  std::vector<TimedAction> current(p);  // the action a rank waits in
  std::vector<std::vector<Job>> jobs(p);
  std::vector<double> projected(p, 0.0);  // a waiting ReduceTiedGrad's end
  std::vector<double> clock(p, 0.0);      // when the rank's last action ended
  std::vector<double> channel(p, 0.0);    // when the rank's reductions are done (Note [gradient reduction])
  std::map<std::tuple<bool, int, int>, double> arrival;  // message -> time it arrives
  std::map<std::pair<int, int>, double> tied_arrival;    // (group, rank) -> when the rank reached TiedGrad
  double now = 0;
  auto next_state = [&](int r) { return pc[r] < s.rank_actions[r].size() ? State::kReady : State::kDone; };
  auto finish_action = [&](int r, double end) {
    TimedAction& t = current[r];
    t.end = end;
    clock[r] = end;
    sim.ranks[r].actions.push_back(t);
    ++pc[r];
    state[r] = next_state(r);
  };
  // Rank r's job(s) are all done: record them in list order; busy counts the
  // time the rank computed (a pair's union).
  auto finish_compute = [&](int r) {
    double end = now;
    for (const Job& j : jobs[r]) {
      sim.ranks[r].actions.push_back(j.t);
      end = std::max(end, j.t.end);
    }
    sim.ranks[r].busy += end - jobs[r].front().t.start;
    clock[r] = end;
    pc[r] += jobs[r].size();
    jobs[r].clear();
    state[r] = next_state(r);
  };
  // Starts the compute actions at pc[r] (one, or two after an Overlap); true if it computes.
  auto start_compute = [&](int r, size_t n) {
    for (size_t k = 0; k < n; ++k) {
      const Action& a = s.rank_actions[r][pc[r] + k];
      Job j{TimedAction{a, now, now}, action_cost(s, c, a)};
      j.running = j.work > 0;
      jobs[r].push_back(j);
    }
    const bool any = std::any_of(jobs[r].begin(), jobs[r].end(), [](const Job& j) { return j.running; });
    if (!any) finish_compute(r);
    else state[r] = State::kComputing;
    return any;
  };
  // Runs rank r's actions at `now` until it computes, waits or is done; true if it moved.
  auto advance = [&](int r) {
    bool moved = false;
    while (state[r] == State::kReady || state[r] == State::kWaiting) {
      const Action& a = s.rank_actions[r][pc[r]];
      if (state[r] == State::kReady) current[r] = TimedAction{a, now, now};
      TimedAction& t = current[r];
      if (is_recv(a.kind)) {
        auto it = arrival.find(message_key(a));
        if (it == arrival.end() || it->second > now) {  // not sent yet, or in flight
          state[r] = State::kWaiting;
          return moved;
        }
        finish_action(r, std::max(t.start, it->second));
      } else if (is_tied(a.kind)) {  // a rendezvous: ends when the group's last rank arrives
        tied_arrival.emplace(std::make_pair(a.tie, r), t.start);
        double last = t.start;
        for (int q : s.tied_ranks(a.tie)) {
          auto it = tied_arrival.find({a.tie, q});
          if (it == tied_arrival.end()) {
            state[r] = State::kWaiting;
            return moved;
          }
          last = std::max(last, it->second);
        }
        finish_action(r, last);
      } else if (a.kind == ActionKind::kReduceGrad) {  // asynchronous: the rank goes on
        t.start = std::max(now, channel[r]);
        t.end = t.start + (c.reduce_grad.empty() ? 0.0 : c.reduce_grad[a.stage]);
        channel[r] = t.end;
        sim.ranks[r].actions.push_back(t);
        ++pc[r];
        state[r] = next_state(r);
      } else if (a.kind == ActionKind::kReduceTiedGrad) {  // the rank waits for it
        if (state[r] == State::kReady) {
          projected[r] = std::max(now, channel[r]) + (c.reduce_tied.empty() ? 0.0 : c.reduce_tied[a.tie]);
          channel[r] = projected[r];
        }
        if (projected[r] > now) {
          state[r] = State::kWaiting;
          return moved;
        }
        finish_action(r, projected[r]);
      } else if (is_send(a.kind)) {
        const int boundary = std::min(a.stage, a.peer_stage);
        arrival[message_key(a)] = now + (c.transfer.empty() ? 0.0 : c.transfer[boundary]);
        finish_action(r, now);
      } else if (a.kind == ActionKind::kOverlap) {  // the next two (F, B) start together
        finish_action(r, now);
        if (start_compute(r, 2)) return true;
      } else if (start_compute(r, 1)) {
        return true;
      }
      moved = true;
    }
    return moved;
  };
  for (;;) {
    // Everything that can happen at `now` happens (a send may release a receive, a
    // rank's arrival a tied rendezvous, so sweep until nothing moves).
    for (bool moved = true; moved;) {
      moved = false;
      for (int r = 0; r < p; ++r) moved = advance(r) || moved;
    }
    // The computing ranks' rate (Note [processor sharing]), an overlapped pair
    // sharing its rank's, and the jobs' projected ends under it.
    int active = 0;
    for (int r = 0; r < p; ++r) active += state[r] == State::kComputing;
    const double rank_rate =
        c.speed.empty() || active == 0 ? 1.0 : c.speed[std::min<size_t>(active, c.speed.size()) - 1];
    double next = std::numeric_limits<double>::infinity();
    for (int r = 0; r < p; ++r) {
      const int running =
          static_cast<int>(std::count_if(jobs[r].begin(), jobs[r].end(), [](const Job& j) { return j.running; }));
      for (Job& j : jobs[r]) {
        if (!j.running) continue;
        const double rate = running == 2 ? rank_rate * c.overlap_speed : rank_rate;
        if (j.rate == 0) j.projected = now + j.work / rate;  // started at `now`
        else if (rate != j.rate)
          j.projected = now + (j.projected - now) * j.rate / rate;  // work left: (proj - now) * old
        j.rate = rate;
        next = std::min(next, j.projected);
      }
      if (state[r] == State::kWaiting && s.rank_actions[r][pc[r]].kind == ActionKind::kReduceTiedGrad)
        next = std::min(next, projected[r]);
    }
    for (const auto& [key, t] : arrival)
      if (t > now) next = std::min(next, t);
    if (next == std::numeric_limits<double>::infinity()) break;
    now = next;
    for (int r = 0; r < p; ++r) {
      if (state[r] != State::kComputing) continue;
      bool left = false;
      for (Job& j : jobs[r]) {
        if (j.running && j.projected <= now) {
          j.running = false;
          j.t.end = j.projected;
        }
        left = left || j.running;
      }
      if (!left) finish_compute(r);
    }
  }
  for (int r = 0; r < p; ++r)
    WEFT_INTERNAL_ASSERT(state[r] == State::kDone, "simulate ", s.name, ": rank ", r, " stuck after validation");
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

std::vector<double> sharing_speeds(double cores, int ranks) {
  WEFT_CHECK(cores > 0 && std::isfinite(cores) && ranks >= 1,
             "sharing_speeds: cores must be positive and ranks at "
             "least 1 (cores=",
             cores, ", ranks=", ranks, ")");
  std::vector<double> out;
  for (int k = 1; k <= ranks; ++k) out.push_back(std::min(1.0, cores / k));
  return out;
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
