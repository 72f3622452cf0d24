// The simulator: exact timelines (clock cycles) for small cases worked by hand,
// and the textbook figures: fill-drain and 1F1B bubble (p-1)/(m+p-1), 1F1B's
// p - i live micro-batches on stage i against GPipe's m, interleaving dividing
// the bubble by v, ZB-H1's bubble a third of 1F1B's at 1F1B's live activations.
//
// Cost convention: CostModel::uniform(S, F, B, W) with F = B = W = 1 gives F = 1
// and a full (unsplit) B = 2; a split schedule runs B = 1 and W = 1.
#include "parallel/pipe/simulate.h"

#include <gtest/gtest.h>

#include "parallel/pipe/chart.h"
#include "parallel/pipe/generators.h"
#include "tests/testing.h"

namespace weft::parallel::pipe {
namespace {

// "F0.0[0,1] F0.1[1,2] ..." for rank r's compute actions (with receives when asked).
std::string timeline(const Simulation& sim, int r, bool with_receives = false) {
  std::string out;
  for (const TimedAction& t : sim.ranks[r].actions) {
    if (!is_compute(t.action.kind) && !(with_receives && is_recv(t.action.kind))) continue;
    if (!out.empty()) out += ' ';
    out += to_string(t.action) + "[" + format_number(t.start) + "," + format_number(t.end) + "]";
  }
  return out;
}

std::vector<int> peak_live(const Simulation& sim) {
  std::vector<int> out;
  for (const RankTimeline& tl : sim.ranks) out.push_back(tl.peak_live_activations);
  return out;
}

TEST(PipeSimulate, GPipeTwoRanksFourMicrobatchesClockCycles) {
  Schedule s = gpipe_schedule(2, 4);
  Simulation sim = simulate(s, CostModel::uniform(2, 1, 1, 1));
  EXPECT_EQ(timeline(sim, 0), "F0.0[0,1] F0.1[1,2] F0.2[2,3] F0.3[3,4] B0.0[7,9] B0.1[9,11] B0.2[11,13] B0.3[13,15]");
  EXPECT_EQ(timeline(sim, 1), "F1.0[1,2] F1.1[2,3] F1.2[3,4] F1.3[4,5] B1.0[5,7] B1.1[7,9] B1.2[9,11] B1.3[11,13]");
  EXPECT_EQ(sim.makespan, 15);  // (m + p - 1) (F + B) = 5 * 3
  EXPECT_EQ(sim.ranks[0].busy, 12);
  EXPECT_EQ(sim.ranks[0].idle, 3);
  EXPECT_EQ(sim.ranks[1].idle, 3);
  EXPECT_EQ(sim.ranks[1].finish, 13);
  EXPECT_DOUBLE_EQ(sim.bubble_fraction, 0.2);  // (p-1)/(m+p-1) = 1/5
  EXPECT_EQ(peak_live(sim), (std::vector<int>{4, 4}));
}

TEST(PipeSimulate, OneFOneBTwoRanksFourMicrobatchesClockCycles) {
  Schedule s = one_f_one_b_schedule(2, 4);
  Simulation sim = simulate(s, CostModel::uniform(2, 1, 1, 1));
  EXPECT_EQ(timeline(sim, 0), "F0.0[0,1] F0.1[1,2] B0.0[4,6] F0.2[6,7] B0.1[7,9] F0.3[9,10] B0.2[10,12] B0.3[13,15]");
  EXPECT_EQ(timeline(sim, 1), "F1.0[1,2] B1.0[2,4] F1.1[4,5] B1.1[5,7] F1.2[7,8] B1.2[8,10] F1.3[10,11] B1.3[11,13]");
  // Receives span their wait: rank 0 waits 2..4 for micro-batch 0's gradient.
  EXPECT_EQ(timeline(sim, 0, true).substr(0, 58), "F0.0[0,1] F0.1[1,2] RecvGrad0.0<-s1@r1[2,4] B0.0[4,6] F0.2");
  EXPECT_EQ(sim.makespan, 15);
  EXPECT_EQ(sim.ranks[0].idle, 3);
  EXPECT_EQ(sim.ranks[1].idle, 3);
  EXPECT_DOUBLE_EQ(sim.bubble_fraction, 0.2);
  EXPECT_EQ(peak_live(sim), (std::vector<int>{2, 1}));
}

TEST(PipeSimulate, GPipeForwardClockCyclesMatchFairscale) {
  // fairscale's clock_cycles(m=4, n=3): [(0,0)], [(1,0),(0,1)], [(2,0),(1,1),(0,2)], [(3,0),(2,1),(1,2)],
  // [(3,1),(2,2)], [(3,2)] as (micro-batch, partition).
  Simulation sim = simulate(gpipe_schedule(3, 4), CostModel::uniform(3, 1, 1, 1));
  const auto ticks = clock_cycles(sim, 1);
  ASSERT_EQ(ticks.size(), 18u);  // makespan (4 + 3 - 1) * 3
  const std::vector<std::string> want = {"F0.0",           "F0.1 F1.0", "F0.2 F1.1 F2.0", "F0.3 F1.2 F2.1",
                                         "F1.3 F2.2",      "F2.3",      "B2.0",           "",
                                         "B1.0 B2.1",      "",          "B0.0 B1.1 B2.2", "",
                                         "B0.1 B1.2 B2.3", "",          "B0.2 B1.3",      "",
                                         "B0.3",           ""};
  for (size_t t = 0; t < ticks.size(); ++t) EXPECT_EQ(to_string(ticks[t]), want[t]) << "tick " << t;
}

TEST(PipeSimulate, FillDrainAndOneFOneBBubbleIsTextbook) {
  // Equal stage costs, no transfer time: makespan (m + p - 1)(F + B), every rank idles (p - 1)(F + B),
  // bubble (p-1)/(m+p-1), for F = 1, B = 2 (F = B = W = 1) and for other F, B.
  int cases = 0;
  for (auto [f, b, w] : {std::tuple{1.0, 1.0, 1.0}, std::tuple{1.0, 2.0, 0.0}, std::tuple{2.0, 3.0, 1.0}})
    for (int p : {1, 2, 3, 4, 6, 8})
      for (int m : {1, 2, 3, 4, 8, 16})
        for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::k1F1B}) {
          Schedule s = make_schedule(kind, p, m);
          Simulation sim = simulate(s, CostModel::uniform(p, f, b, w));
          const double fb = f + b + w;
          const std::string at = detail::str_cat(s.name, " p=", p, " m=", m, " F=", f, " B=", b + w);
          EXPECT_DOUBLE_EQ(sim.makespan, (m + p - 1) * fb) << at;
          for (int r = 0; r < p; ++r) EXPECT_DOUBLE_EQ(sim.ranks[r].idle, (p - 1) * fb) << at << " rank " << r;
          EXPECT_DOUBLE_EQ(sim.bubble_fraction, double(p - 1) / (m + p - 1)) << at;
          ++cases;
        }
  EXPECT_EQ(cases, 3 * 6 * 6 * 2);
}

TEST(PipeSimulate, OneFOneBKeepsPMinusIMicrobatchesAliveGPipeKeepsM) {
  EXPECT_EQ(peak_live(simulate(one_f_one_b_schedule(4, 8), CostModel::uniform(4, 1, 1, 1))),
            (std::vector<int>{4, 3, 2, 1}));
  EXPECT_EQ(peak_live(simulate(gpipe_schedule(4, 8), CostModel::uniform(4, 1, 1, 1))), (std::vector<int>{8, 8, 8, 8}));
  EXPECT_EQ(peak_live(simulate(one_f_one_b_schedule(4, 2), CostModel::uniform(4, 1, 1, 1))),
            (std::vector<int>{2, 2, 2, 1}));
  for (int p : {1, 2, 3, 5, 8})
    for (int m : {1, 3, 8, 13}) {
      Simulation a = simulate(one_f_one_b_schedule(p, m), CostModel::uniform(p, 1, 2, 0));
      Simulation g = simulate(gpipe_schedule(p, m), CostModel::uniform(p, 1, 2, 0));
      for (int i = 0; i < p; ++i) {
        EXPECT_EQ(a.ranks[i].peak_live_activations, std::min(p - i, m)) << "p=" << p << " m=" << m << " i=" << i;
        EXPECT_EQ(g.ranks[i].peak_live_activations, m) << "p=" << p << " m=" << m << " i=" << i;
        // Memory defaults: 1 per live activation.
        EXPECT_EQ(a.ranks[i].peak_memory, std::min(p - i, m));
      }
    }
}

TEST(PipeSimulate, InterleavingDividesTheBubbleByV) {
  // The same model on the same ranks: 1F1B with one stage of cost v per rank against interleaved with v stages of
  // cost 1. Every rank's idle time drops from 3 v (p-1) to 3 (p-1), and the bubble is (p-1)/(v m + p - 1).
  int cases = 0;
  for (int p : {2, 3, 4})
    for (int k : {1, 2, 4})
      for (int v : {2, 3, 4}) {
        const int m = k * p;
        const std::string at = detail::str_cat("p=", p, " m=", m, " v=", v);
        Simulation one = simulate(one_f_one_b_schedule(p, m), CostModel::uniform(p, v, v, v));
        Simulation inter = simulate(interleaved_schedule(p, m, v), CostModel::uniform(p * v, 1, 1, 1));
        EXPECT_EQ(one.ranks[0].busy, inter.ranks[0].busy) << at;
        for (int r = 0; r < p; ++r) {
          EXPECT_DOUBLE_EQ(one.ranks[r].idle, 3.0 * v * (p - 1)) << at;
          EXPECT_DOUBLE_EQ(inter.ranks[r].idle, 3.0 * (p - 1)) << at << " rank " << r;
        }
        EXPECT_DOUBLE_EQ(inter.makespan, 3.0 * (v * m + p - 1)) << at;
        EXPECT_DOUBLE_EQ(inter.bubble_fraction, double(p - 1) / (v * m + p - 1)) << at;
        ++cases;
      }
  EXPECT_EQ(cases, 27);
  // p = 4, m = 8, v = 2: bubble 3/11 -> 3/19; each rank keeps (v-1)p + 2(p-1-r) + 1 stage activations alive.
  Simulation inter = simulate(interleaved_schedule(4, 8, 2), CostModel::uniform(8, 1, 1, 1));
  EXPECT_DOUBLE_EQ(inter.bubble_fraction, 3.0 / 19);
  EXPECT_EQ(inter.makespan, 57);
  EXPECT_EQ(peak_live(inter), (std::vector<int>{11, 9, 7, 5}));
}

TEST(PipeSimulate, ZeroBubbleH1IsAThirdOf1F1BAtEqualLiveActivations) {
  // F = B = W = 1: 1F1B idles 3(p-1) per rank (its B costs 2), ZB-H1 idles p - 1, a third. The zero-bubble paper's
  // ZB-H1 bubble (p-1)(T_F + T_B - T_W) = p - 1; makespan 3m + p - 1; bubble fraction (p-1)/(3m+p-1) (that is
  // (p-1)/(3m) of the useful time, against 1F1B's (p-1)/m), for m >= p.
  int cases = 0;
  for (int p : {2, 3, 4, 6, 8})
    for (int m : {p, p + 1, 2 * p, 4 * p, 24}) {
      if (m < p) continue;
      const std::string at = detail::str_cat("p=", p, " m=", m);
      Simulation zb = simulate(zero_bubble_h1_schedule(p, m), CostModel::uniform(p, 1, 1, 1));
      Simulation one = simulate(one_f_one_b_schedule(p, m), CostModel::uniform(p, 1, 1, 1));
      EXPECT_DOUBLE_EQ(zb.makespan, 3 * m + p - 1) << at;
      for (int r = 0; r < p; ++r) {
        EXPECT_DOUBLE_EQ(zb.ranks[r].idle, p - 1) << at << " rank " << r;
        EXPECT_DOUBLE_EQ(zb.ranks[r].idle * 3, one.ranks[r].idle) << at << " rank " << r;
      }
      EXPECT_DOUBLE_EQ(zb.bubble_fraction, double(p - 1) / (3 * m + p - 1)) << at;
      EXPECT_EQ(peak_live(zb), peak_live(one)) << at;
      ++cases;
    }
  EXPECT_EQ(cases, 25);
  Simulation zb = simulate(zero_bubble_h1_schedule(4, 8), CostModel::uniform(4, 1, 1, 1));
  EXPECT_EQ(zb.makespan, 27);
  EXPECT_DOUBLE_EQ(zb.bubble_fraction, 1.0 / 9);
  EXPECT_EQ(peak_live(zb), (std::vector<int>{4, 3, 2, 1}));
}

TEST(PipeSimulate, ZeroBubbleH1FollowsThePaperFormulaForUnequalCosts) {
  // makespan = m (F + B + W) + (p - 1)(F + B - W) for m >= p (and W <= F + B), against 1F1B's (m + p - 1)(F + B + W).
  for (auto [f, b, w] : {std::tuple{2.0, 2.0, 1.0}, std::tuple{1.0, 2.0, 1.0}, std::tuple{1.0, 1.0, 0.5}})
    for (int p : {2, 3, 4, 6})
      for (int m : {p, 2 * p + 1, 16}) {
        if (m < p) continue;
        const std::string at = detail::str_cat("p=", p, " m=", m, " F=", f, " B=", b, " W=", w);
        Simulation zb = simulate(zero_bubble_h1_schedule(p, m), CostModel::uniform(p, f, b, w));
        EXPECT_DOUBLE_EQ(zb.makespan, m * (f + b + w) + (p - 1) * (f + b - w)) << at;
      }
}

TEST(PipeSimulate, ZeroBubbleH1MemoryAccounting) {
  // The live count matches 1F1B; the deferred Ws hold weight-gradient stashes: rank i defers up to i + 1 of them.
  CostModel c = CostModel::uniform(4, 1, 1, 1);
  c.activation_memory.assign(4, 1.0);   // M_B per micro-batch
  c.weight_grad_memory.assign(4, 0.5);  // M_W per micro-batch
  Simulation zb = simulate(zero_bubble_h1_schedule(4, 8), c);
  Simulation one = simulate(one_f_one_b_schedule(4, 8), c);
  std::vector<int> pending;
  std::vector<double> zb_memory, one_memory;
  for (int r = 0; r < 4; ++r) {
    pending.push_back(zb.ranks[r].peak_pending_weights);
    zb_memory.push_back(zb.ranks[r].peak_memory);
    one_memory.push_back(one.ranks[r].peak_memory);
  }
  EXPECT_EQ(pending, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(one_memory, (std::vector<double>{4, 3, 2, 1}));
  EXPECT_EQ(zb_memory, (std::vector<double>{4, 3.5, 3, 2.5}));
  // No rank exceeds 1F1B's peak (p M_B on rank 0).
  for (double m : zb_memory) EXPECT_LE(m, one_memory[0]);
}

TEST(PipeSimulate, TransferTimeDelaysTheReceiver) {
  // p = 2, m = 1, transfer 0.5: the activation leaves at 1 and arrives at 1.5; the gradient leaves at 4.5, arrives 5.
  Simulation sim = simulate(one_f_one_b_schedule(2, 1), CostModel::uniform(2, 1, 1, 1, 0.5));
  EXPECT_EQ(timeline(sim, 0, true), "F0.0[0,1] RecvGrad0.0<-s1@r1[1,5] B0.0[5,7]");
  EXPECT_EQ(timeline(sim, 1, true), "RecvAct1.0<-s0@r0[0,1.5] F1.0[1.5,2.5] B1.0[2.5,4.5]");
  EXPECT_EQ(sim.makespan, 7);
  EXPECT_EQ(sim.ranks[0].idle, 4);
  EXPECT_DOUBLE_EQ(sim.bubble_fraction, 8.0 / 14);
}

TEST(PipeSimulate, UnevenStageCosts) {
  CostModel c;
  c.forward = {1, 2};
  c.backward = {1, 2};
  c.weight = {0, 0};
  Simulation sim = simulate(gpipe_schedule(2, 2), c);
  EXPECT_EQ(timeline(sim, 0), "F0.0[0,1] F0.1[1,2] B0.0[7,8] B0.1[9,10]");
  EXPECT_EQ(timeline(sim, 1), "F1.0[1,3] F1.1[3,5] B1.0[5,7] B1.1[7,9]");
  EXPECT_EQ(sim.makespan, 10);
  EXPECT_EQ(sim.ranks[0].idle, 6);
  EXPECT_EQ(sim.ranks[1].idle, 2);
  EXPECT_DOUBLE_EQ(sim.bubble_fraction, 0.4);
}

// Processor sharing (Note [processor sharing]): two ranks on one core's worth of
// compute. Worked by hand: GPipe, 2 stages, 2 micro-batches, F = 1, full B = 2.
// t=0 F0.0 alone ends at 1; F0.1 and F1.0 share from 1 (speed 1/2) and end at 3;
// F1.1 alone 3-4; B1.0 alone 4-6; B1.1 and B0.0 share from 6 and end at 10;
// B0.1 alone 10-12.
TEST(PipeSimulate, SharedCoresSlowRanksThatComputeTogether) {
  CostModel c = CostModel::uniform(2, 1, 1, 1);
  c.speed = sharing_speeds(1, 2);
  EXPECT_EQ(c.speed, (std::vector<double>{1, 0.5}));
  Simulation sim = simulate(gpipe_schedule(2, 2), c);
  EXPECT_EQ(timeline(sim, 0), "F0.0[0,1] F0.1[1,3] B0.0[6,10] B0.1[10,12]");
  EXPECT_EQ(timeline(sim, 1), "F1.0[1,3] F1.1[3,4] B1.0[4,6] B1.1[6,10]");
  EXPECT_EQ(sim.makespan, 12);
  EXPECT_EQ(sim.ranks[0].busy, 9);
  EXPECT_EQ(sim.ranks[1].busy, 9);
  EXPECT_DOUBLE_EQ(sim.bubble_fraction, 0.25);  // (24 - 18) / 24; without sharing 9 and 1 - 12/18
}

// A rate that changes inside an action: stage 0's forward costs 2. F0.1 runs
// from 2 at half speed beside F1.0 (cost 1, ends at 4, half of F0.1 done),
// then alone: it ends at 5. F1.1 5-6, B1.0 6-8, B1.1 and B0.0 share 8-12,
// B0.1 12-14.
TEST(PipeSimulate, SharedCoresRateChangesInsideAnAction) {
  CostModel c = CostModel::uniform(2, 1, 1, 1);
  c.forward = {2, 1};
  c.speed = {1, 0.5};
  Simulation sim = simulate(gpipe_schedule(2, 2), c);
  EXPECT_EQ(timeline(sim, 0), "F0.0[0,2] F0.1[2,5] B0.0[8,12] B0.1[12,14]");
  EXPECT_EQ(timeline(sim, 1), "F1.0[2,4] F1.1[5,6] B1.0[6,8] B1.1[8,12]");
  EXPECT_EQ(sim.makespan, 14);
  EXPECT_DOUBLE_EQ(sim.bubble_fraction, 8.0 / 28);  // busy 11 + 9 of 2 x 14
}

// Every built-in schedule: cores enough for every rank change nothing, and
// with one core's worth the step is at least the total work (the core never
// does more than one rank's worth per second) and no action runs faster than
// its cost.
TEST(PipeSimulate, SharedCoresBoundsOnEveryBuiltInSchedule) {
  int cases = 0;
  for (ScheduleKind kind :
       {ScheduleKind::kGPipe, ScheduleKind::k1F1B, ScheduleKind::kInterleaved1F1B, ScheduleKind::kZeroBubbleH1,
        ScheduleKind::kZeroBubbleV, ScheduleKind::kInterleavedZeroBubble})
    for (int p : {2, 4})
      for (int m : {4, 8}) {
        const bool v2 = kind == ScheduleKind::kInterleaved1F1B || kind == ScheduleKind::kZeroBubbleV ||
                        kind == ScheduleKind::kInterleavedZeroBubble;
        const Schedule s = make_schedule(kind, p, m, v2 ? 2 : 1);
        const std::string at = s.name + " p=" + std::to_string(p) + " m=" + std::to_string(m);
        CostModel c = CostModel::uniform(s.num_stages(), 1, 1.5, 0.75, 0.25);
        const Simulation own = simulate(s, c);
        c.speed = sharing_speeds(p, p);
        const Simulation enough = simulate(s, c);
        EXPECT_EQ(own.makespan, enough.makespan) << at;
        for (int r = 0; r < p; ++r) EXPECT_EQ(timeline(own, r, true), timeline(enough, r, true)) << at;
        c.speed = sharing_speeds(1, p);
        const Simulation one = simulate(s, c);
        double work = 0;
        for (int r = 0; r < p; ++r) work += own.ranks[r].busy;
        EXPECT_GE(one.makespan, work - 1e-9) << at;
        EXPECT_GE(one.makespan, own.makespan - 1e-9) << at;
        for (int r = 0; r < p; ++r) {
          EXPECT_NEAR(one.ranks[r].busy + one.ranks[r].idle, one.makespan, 1e-9) << at;
          for (const TimedAction& t : one.ranks[r].actions) {
            if (!is_compute(t.action.kind)) continue;
            EXPECT_GE(t.end - t.start, action_cost(s, c, t.action) - 1e-9) << at << " " << to_string(t.action);
          }
        }
        ++cases;
      }
  EXPECT_EQ(cases, 6 * 2 * 2);
}

// Activation checkpointing: a checkpointed micro-batch's B recomputes its F.
// 1F1B, 2 stages, 2 micro-batches, F = 1, full B = 2, micro-batch 0
// checkpointed (B = 3): F0.0 0-1, F1.0 1-2, B1.0 2-5, F0.1 1-2, B0.0 5-8,
// F1.1 5-6, B1.1 6-8, B0.1 8-10. Split (zb-h1), a checkpointed B computes
// the weight gradients too (F + B + W = 3) and its W costs nothing.
TEST(PipeSimulate, CheckpointedMicrobatchesRecomputeTheirForward) {
  CostModel c = CostModel::uniform(2, 1, 1, 1);
  c.checkpointed = 1;
  Simulation sim = simulate(one_f_one_b_schedule(2, 2), c);
  EXPECT_EQ(timeline(sim, 0), "F0.0[0,1] F0.1[1,2] B0.0[5,8] B0.1[8,10]");
  EXPECT_EQ(timeline(sim, 1), "F1.0[1,2] B1.0[2,5] F1.1[5,6] B1.1[6,8]");
  EXPECT_EQ(sim.makespan, 10);
  const Schedule zb = zero_bubble_h1_schedule(2, 2);
  for (const auto& list : zb.rank_actions)
    for (const Action& a : list) {
      if (a.kind == ActionKind::kBackward) {
        EXPECT_EQ(action_cost(zb, c, a), a.microbatch == 0 ? 3 : 1);
      } else if (a.kind == ActionKind::kWeight) {
        EXPECT_EQ(action_cost(zb, c, a), a.microbatch == 0 ? 0 : 1);
      }
    }
  EXPECT_EQ(checkpointed_microbatches(CheckpointMode::kAlways, 4), 4);
  EXPECT_EQ(checkpointed_microbatches(CheckpointMode::kExceptLast, 4), 3);
  EXPECT_EQ(checkpointed_microbatches(CheckpointMode::kNever, 4), 0);
}

TEST(PipeSimulate, CostErrorsAndInvalidSchedulesAreRefused) {
  Schedule s = gpipe_schedule(2, 2);
  CostModel c = CostModel::uniform(2, 1, 1, 1);
  c.forward = {1};
  EXPECT_WEFT_ERROR(simulate(s, c), "simulate gpipe: forward cost has 1 entries for 2 stages");
  c = CostModel::uniform(2, 1, 1, 1);
  c.backward[1] = -1;
  EXPECT_WEFT_ERROR(simulate(s, c), "simulate gpipe: backward cost[1] = -1 is not a finite non-negative number");
  c = CostModel::uniform(2, 1, 1, 1);
  c.transfer = {1, 1};
  EXPECT_WEFT_ERROR(simulate(s, c), "simulate gpipe: transfer has 2 entries for 1 stage boundaries");
  c = CostModel::uniform(2, 1, 1, 1);
  c.checkpointed = -1;
  EXPECT_WEFT_ERROR(simulate(s, c), "simulate gpipe: checkpointed = -1 is negative");
  c = CostModel::uniform(2, 1, 1, 1);
  c.speed = {1, 0};
  EXPECT_WEFT_ERROR(simulate(s, c), "simulate gpipe: speed[1] = 0 is not a finite positive number");
  std::swap(s.rank_actions[1][1], s.rank_actions[1][4]);  // F1.0 <-> B1.0
  EXPECT_WEFT_ERROR(simulate(s, CostModel::uniform(2, 1, 1, 1)), "rank 1 action 1 (B1.0): runs before F1.0");
  EXPECT_WEFT_ERROR(clock_cycles(Simulation{}, 0), "clock_cycles: unit must be positive (unit=0)");
}

}  // namespace
}  // namespace weft::parallel::pipe
