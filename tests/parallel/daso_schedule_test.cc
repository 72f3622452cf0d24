// DasoSchedule (parallel/data/daso_schedule.h, Note [daso schedule]) against
// hand-worked sequences: phases, skips and waits epoch by epoch from given
// losses (warm-up, the plateau halvings and heat's reset, cool-down), the
// per-step plans of an epoch, heat's local skips (the node DDP's averages
// thinned out), the state an exact resume restores, the plateau detector, and
// option errors.
// Also the node layout (parallel/data/node_groups.h) and the ring byte counts
// (parallel/data/comm_volume.h), which are pure too.
#include "parallel/data/daso_schedule.h"

#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "parallel/data/comm_volume.h"
#include "parallel/data/node_groups.h"
#include "tests/testing.h"

namespace weft::parallel {
namespace {

// The epoch's plan, one token per step: "." nothing, "S" start, "F" fold,
// "B" blocking, "FS" fold then start.
std::string plan(const DasoSchedule& s, int steps) {
  std::string out;
  for (int i = 0; i < steps; ++i) {
    const DasoStepPlan p = s.step_plan(i, steps);
    std::string t;
    if (p.fold) t += 'F';
    if (p.blocking) t += 'B';
    if (p.start) t += 'S';
    if (i) out += ' ';
    out += t.empty() ? "." : t;
  }
  return out;
}

using State = std::tuple<DasoPhase, int, int>;  // phase, global_skip, batches_to_wait
State state(const DasoSchedule& s) { return {s.phase(), s.global_skip(), s.batches_to_wait()}; }

constexpr auto W = DasoPhase::kWarmup, C = DasoPhase::kCycling, D = DasoPhase::kCooldown;

// T = 10 epochs, 2 warm-up, 2 cool-down, heat's other defaults (8 skips,
// local_skip_factor 4 -> wait 2, patience 2, 5 %).
TEST(DasoSchedule, WarmupPlateauCooldownByHand) {
  DasoScheduleOptions o;
  o.total_epochs = 10;
  o.warmup_epochs = 2;
  o.cooldown_epochs = 2;
  DasoSchedule s(o);
  EXPECT_EQ(state(s), State(W, 1, 0));
  // Each row: the loss ending epoch e, then the state of epoch e + 1 and whether a plateau changed it.
  const std::vector<std::tuple<double, State, bool>> rows = {
      {2.00, {W, 1, 0}, false},  // end 0 -> epoch 1: still warm-up (loss not fed)
      {1.00, {C, 8, 2}, false},  // end 1 -> cycling starts at the maximum; best = 1.00
      {0.90, {C, 8, 2}, false},  // 0.90 < 0.95: improves, best 0.90
      {0.89, {C, 8, 2}, false},  // not below 0.855: bad 1
      {0.88, {C, 8, 2}, false},  // bad 2
      {0.87, {C, 4, 1}, true},   // bad 3 > patience 2: plateau, skips halve, wait 2 -> 1
      {0.86, {C, 4, 1}, false},  // bad 1 (best still 0.90)
      {0.85, {D, 1, 0}, false},  // end 7 -> epoch 8: cool-down, blocking (loss not fed)
      {0.84, {D, 1, 0}, false},  // epoch 9
      {0.83, {D, 1, 0}, false},  // past the last epoch: still blocking
  };
  for (size_t e = 0; e < rows.size(); ++e) {
    const auto& [loss, next, fired] = rows[e];
    EXPECT_EQ(s.end_epoch(loss), fired) << "end of epoch " << e;
    EXPECT_EQ(s.epoch(), static_cast<int>(e) + 1);
    EXPECT_EQ(state(s), next) << "epoch " << e + 1 << ": " << s.describe();
  }
  EXPECT_EQ(s.plateau().best(), 0.90);
}

// No warm-up or cool-down, patience 0 and a flat loss: every epoch after the
// first is a plateau: 8/2 -> 4/1 -> 2/1 -> 1/1 -> reset 8/2 -> 4/1.
TEST(DasoSchedule, SkipsHalveToOneThenReset) {
  DasoScheduleOptions o;
  o.total_epochs = 20;
  o.warmup_epochs = 0;
  o.cooldown_epochs = 0;
  o.patience = 0;
  DasoSchedule s(o);
  EXPECT_EQ(state(s), State(C, 8, 2));
  EXPECT_EQ(s.describe(), "epoch 0 (cycling): global_skip 8, batches_to_wait 2, local_skip 2");
  EXPECT_FALSE(s.end_epoch(1.0));  // the first loss sets the best
  EXPECT_EQ(state(s), State(C, 8, 2));
  const std::vector<State> want = {{C, 4, 1}, {C, 2, 1}, {C, 1, 1}, {C, 8, 2}, {C, 4, 1}};
  for (const State& w : want) {
    EXPECT_TRUE(s.end_epoch(1.0));
    EXPECT_EQ(state(s), w) << s.describe();
  }
  // An improving loss does not fire.
  EXPECT_FALSE(s.end_epoch(0.5));
  EXPECT_EQ(state(s), State(C, 4, 1));
}

TEST(DasoSchedule, ReductionFactorAndInitialWait) {
  DasoScheduleOptions o;
  o.total_epochs = 9;
  o.warmup_epochs = 0;
  o.cooldown_epochs = 0;
  o.patience = 0;
  o.max_global_skips = 27;
  o.skip_reduction_factor = 3;
  o.local_skip_factor = 3;  // wait 9
  DasoSchedule s(o);
  EXPECT_EQ(state(s), State(C, 27, 9));
  s.end_epoch(1.0);
  EXPECT_TRUE(s.end_epoch(1.0));
  EXPECT_EQ(state(s), State(C, 9, 8));
  EXPECT_TRUE(s.end_epoch(1.0));
  EXPECT_EQ(state(s), State(C, 3, 3));  // wait 7 clamped to the skip
  EXPECT_TRUE(s.end_epoch(1.0));
  EXPECT_EQ(state(s), State(C, 1, 1));

  o.local_skip_factor = 100;  // 27 / 100 = 0 -> at least 1
  EXPECT_EQ(DasoSchedule(o).initial_wait(), 1);
  o.local_skip_factor = 1;  // 27: the whole skip
  EXPECT_EQ(DasoSchedule(o).initial_wait(), 27);
}

// Warm-up and cool-down overlapping (heat's defaults with 5 epochs): all blocking.
TEST(DasoSchedule, OverlappingWarmupAndCooldownBlockEveryStep) {
  DasoScheduleOptions o;
  o.total_epochs = 5;
  DasoSchedule s(o);
  const std::vector<DasoPhase> phases = {W, W, W, W, D};
  for (int e = 0; e < 5; ++e) {
    EXPECT_EQ(s.phase(), phases[e]) << e;
    EXPECT_EQ(plan(s, 4), "B B B B");
    s.end_epoch(1.0);
  }
}

TEST(DasoSchedule, StepPlansByHand) {
  DasoScheduleOptions o;
  o.total_epochs = 30;
  o.warmup_epochs = 1;
  o.cooldown_epochs = 1;
  o.patience = 0;
  DasoSchedule s(o);
  EXPECT_EQ(plan(s, 5), "B B B B B");  // warm-up
  s.end_epoch(1.0);
  ASSERT_EQ(state(s), State(C, 8, 2));
  // Starts where s % 8 == 0 and s + 2 < last; folds 2 steps later; the last step blocks.
  EXPECT_EQ(plan(s, 12), "S . F . . . . . S . F B");
  EXPECT_EQ(plan(s, 10), "S . F . . . . . . B");  // no start at 8: its fold would be at the last step
  EXPECT_EQ(plan(s, 3), ". . B");                 // 0 + 2 is not before the last step
  EXPECT_EQ(plan(s, 1), "B");
  s.end_epoch(1.0);
  ASSERT_EQ(state(s), State(C, 4, 1));
  EXPECT_EQ(plan(s, 10), "S F . . S F . . . B");
  s.end_epoch(1.0);
  s.end_epoch(1.0);
  ASSERT_EQ(state(s), State(C, 1, 1));
  // Every step: fold the previous one, start the next (one in flight at a time).
  EXPECT_EQ(plan(s, 5), "S FS FS F B");
  EXPECT_WEFT_ERROR(s.step_plan(5, 5), "step 5 is outside the epoch's 5 steps");
  EXPECT_WEFT_ERROR(s.step_plan(0, 0), "steps_per_epoch must be positive, got 0");
}

// Which steps' gradients the node DDP averages: "A" averaged, "-" skipped.
std::string node_syncs(const DasoSchedule& s, int steps) {
  std::string out;
  for (int i = 0; i < steps; ++i) out += s.step_plan(i, steps).node_sync ? "A" : "-";
  return out;
}

using Skips = std::tuple<int, int, int>;  // global_skip, batches_to_wait, local_skip
Skips skips(const DasoSchedule& s) { return {s.global_skip(), s.batches_to_wait(), s.local_skip()}; }

// local_skip worked out by hand: max_global_skips 16, local_skip_factor 2
// (initial_wait 8), reduction 2, patience 0 and a flat loss (a plateau every
// epoch after the first): 16/8/8 -> 8/7/4 -> 4/4/2 -> 2/2/1 -> 1/1/1 -> reset.
TEST(DasoSchedule, LocalSkipsByHand) {
  DasoScheduleOptions o;
  o.total_epochs = 9;
  o.warmup_epochs = 1;
  o.cooldown_epochs = 1;
  o.patience = 0;
  o.max_global_skips = 16;
  o.local_skip_factor = 2;
  DasoSchedule s(o);
  EXPECT_EQ(skips(s), Skips(1, 0, 1));  // warm-up: every step averages
  EXPECT_EQ(node_syncs(s, 4), "AAAA");
  s.end_epoch(1.0);
  EXPECT_EQ(skips(s), Skips(16, 8, 8));
  // Starts at 0 (16 + 8 is past the last step), fold at 8, blocking at 19;
  // the node averages at multiples of 8 and the last step.
  EXPECT_EQ(plan(s, 20), "S . . . . . . . F . . . . . . . . . . B");
  EXPECT_EQ(node_syncs(s, 20), "A-------A-------A--A");
  const std::vector<Skips> want = {{8, 7, 4}, {4, 4, 2}, {2, 2, 1}, {1, 1, 1}, {16, 8, 8}};
  for (const Skips& w : want) {
    EXPECT_TRUE(s.end_epoch(1.0));
    EXPECT_EQ(skips(s), w) << s.describe();
    if (w == Skips(8, 7, 4)) {
      // Starts at 0 and 8, folds at 7 and 15: averaged at multiples of 4 and there.
      EXPECT_EQ(plan(s, 20), "S . . . . . . F S . . . . . . F . . . B");
      EXPECT_EQ(node_syncs(s, 20), "A---A--AA---A--AA--A");
    }
    if (w == Skips(1, 1, 1)) {
      EXPECT_EQ(node_syncs(s, 5), "AAAAA");
    }
  }
  EXPECT_EQ(s.describe(), "epoch 6 (cycling): global_skip 16, batches_to_wait 8, local_skip 8");
  s.end_epoch(1.0);  // a plateau: 8/7/4
  s.end_epoch(1.0);  // epoch 8: cool-down
  EXPECT_EQ(skips(s), Skips(1, 0, 1));
  EXPECT_EQ(node_syncs(s, 4), "AAAA");

  // heat's defaults (8 skips, factor 4): local_skip 2, then 1 after a plateau.
  DasoScheduleOptions d;
  d.total_epochs = 4;
  d.warmup_epochs = 0;
  d.cooldown_epochs = 0;
  d.patience = 0;
  DasoSchedule h(d);
  EXPECT_EQ(skips(h), Skips(8, 2, 2));
  EXPECT_EQ(node_syncs(h, 12), "A-A-A-A-A-AA");  // starts 0, 8; folds 2, 10; blocking 11
  h.end_epoch(1.0);
  EXPECT_TRUE(h.end_epoch(1.0));
  EXPECT_EQ(skips(h), Skips(4, 1, 1));

  // Switched off: always 1, every step averages.
  d.local_skips = false;
  DasoSchedule off(d);
  EXPECT_EQ(skips(off), Skips(8, 2, 1));
  EXPECT_EQ(node_syncs(off, 12), "AAAAAAAAAAAA");
}

// state() / load_state(): a schedule restored mid-run continues exactly as the
// uninterrupted one (skips, plans, the plateau detector's best and count).
TEST(DasoSchedule, StateRestoresTheRun) {
  DasoScheduleOptions o;
  o.total_epochs = 12;
  o.warmup_epochs = 1;
  o.cooldown_epochs = 2;
  o.max_global_skips = 16;
  o.local_skip_factor = 2;
  const std::vector<double> losses = {3.0, 2.0, 1.5, 1.49, 1.48, 1.47, 1.46, 1.2, 1.19, 1.18, 1.17, 1.16};
  DasoSchedule whole(o);
  std::vector<std::string> want;
  for (double l : losses) {
    whole.end_epoch(l);
    want.push_back(whole.describe() + " best " + std::to_string(whole.plateau().best()) + " bad " +
                   std::to_string(whole.plateau().bad_epochs()));
  }
  for (size_t cut = 0; cut <= losses.size(); ++cut) {
    DasoSchedule a(o);
    for (size_t e = 0; e < cut; ++e) a.end_epoch(losses[e]);
    DasoSchedule b(o);
    b.load_state(a.state());
    EXPECT_EQ(b.describe(), a.describe());
    for (size_t e = cut; e < losses.size(); ++e) {
      b.end_epoch(losses[e]);
      EXPECT_EQ(b.describe() + " best " + std::to_string(b.plateau().best()) + " bad " +
                    std::to_string(b.plateau().bad_epochs()),
                want[e])
          << "restored after epoch " << cut;
    }
  }
  DasoSchedule s(o);
  DasoSchedule::State st = s.state();
  st.global_skip = 17;
  EXPECT_WEFT_ERROR(s.load_state(st), "global_skip 17 is impossible for these options");
  st = s.state();
  st.epoch = 3;  // a cycling epoch with warm-up skips
  EXPECT_WEFT_ERROR(s.load_state(st),
                    "epoch 3 is a cycling epoch, but the state has global_skip 1, batches_to_wait 0, local_skip 1");
}

TEST(DasoSchedule, PlateauDetector) {
  PlateauDetector d(0.1, 1);
  EXPECT_FALSE(d.observe(10.0));  // best 10
  EXPECT_FALSE(d.observe(9.5));   // not below 9: bad 1
  EXPECT_TRUE(d.observe(9.2));    // bad 2 > 1: plateau, count restarts
  EXPECT_EQ(d.bad_epochs(), 0);
  EXPECT_FALSE(d.observe(8.9));  // below 9: improves
  EXPECT_EQ(d.best(), 8.9);
  // A negative best improves below best * (1 + threshold).
  PlateauDetector n(0.1, 0);
  EXPECT_FALSE(n.observe(-1.0));
  EXPECT_FALSE(n.observe(-1.2));  // below -1.1
  EXPECT_TRUE(n.observe(-1.25));  // not below -1.32
}

TEST(DasoSchedule, OptionErrors) {
  DasoScheduleOptions o;
  EXPECT_WEFT_ERROR(DasoSchedule{o}, "total_epochs must be positive, got 0");
  o.total_epochs = 3;
  auto bad = [&](auto set, const char* msg) {
    DasoScheduleOptions b = o;
    set(b);
    EXPECT_WEFT_ERROR(DasoSchedule{b}, msg);
  };
  bad([](auto& b) { b.warmup_epochs = -1; }, "warmup_epochs must be >= 0, got -1");
  bad([](auto& b) { b.cooldown_epochs = -2; }, "cooldown_epochs must be >= 0, got -2");
  bad([](auto& b) { b.stability_level = 1.5; }, "stability_level must be in [0, 1), got 1.5");
  bad([](auto& b) { b.max_global_skips = 0; }, "max_global_skips must be >= 1, got 0");
  bad([](auto& b) { b.skip_reduction_factor = 0; }, "skip_reduction_factor must be >= 1, got 0");
  bad([](auto& b) { b.local_skip_factor = 0; }, "local_skip_factor must be >= 1, got 0");
  bad([](auto& b) { b.patience = -1; }, "patience must be >= 0, got -1");
}

TEST(NodeLayout, BlocksAndNodeIds) {
  NodeLayout l = NodeLayout::blocks(6, 2);
  EXPECT_EQ(l.str(), "3 nodes x 2 ranks: [0, 1] [2, 3] [4, 5]");
  EXPECT_EQ(l.globals, (std::vector<std::vector<int>>{{0, 2, 4}, {1, 3, 5}}));
  EXPECT_EQ(l.node_of(3), 1);
  EXPECT_EQ(l.local_rank_of(3), 1);
  // Interleaved ids (mpirun --map-by node): nodes named by their smallest rank.
  NodeLayout m = NodeLayout::from_node_ids({7, 3, 7, 3});
  EXPECT_EQ(m.str(), "2 nodes x 2 ranks: [0, 2] [1, 3]");
  EXPECT_EQ(m.globals, (std::vector<std::vector<int>>{{0, 1}, {2, 3}}));
  EXPECT_EQ(NodeLayout::from_node_ids({0, 0, 0}).str(), "1 node x 3 ranks: [0, 1, 2]");
  EXPECT_WEFT_ERROR(NodeLayout::blocks(4, 3), "ranks_per_node 3 does not divide the world size 4");
  EXPECT_WEFT_ERROR(NodeLayout::from_node_ids({0, 0, 1}),
                    "nodes hold different numbers of ranks: node 0 has 2 [0, 1], node 1 has 1 [2]");
}

TEST(CommVolume, RingModel) {
  EXPECT_EQ(ring_allreduce_bytes(1000, 1), 0);
  EXPECT_EQ(ring_allreduce_bytes(1000, 2), 1000);
  EXPECT_EQ(ring_allreduce_bytes(1000, 4), 1500);
  EXPECT_EQ(ring_allgather_bytes(1000, 1), 0);
  EXPECT_EQ(ring_allgather_bytes(1000, 3), 2000);
}

}  // namespace
}  // namespace weft::parallel
