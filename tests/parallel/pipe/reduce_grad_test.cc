// Data-parallel gradient reduction as schedule actions (Note [gradient
// reduction] in parallel/pipe/schedule.h): where add_reduce_grads puts
// ReduceGrad and ReduceTiedGrad, the validator refusing a schedule that omits
// or misplaces them, and the simulator's timing against hand-computed cases.
#include <gtest/gtest.h>

#include "parallel/pipe/chart.h"
#include "parallel/pipe/generators.h"
#include "parallel/pipe/simulate.h"
#include "parallel/pipe/validate.h"
#include "tests/parallel/pipe/schedule_edit.h"
#include "tests/testing.h"

namespace weft::parallel::pipe {
namespace {

TEST(ReduceGrad, AddedRightAfterEachStagesLastGradientAction) {
  Schedule s = one_f_one_b_schedule(2, 3);
  add_reduce_grads(s);
  EXPECT_TRUE(s.reduce_grads);
  EXPECT_EQ(to_string(s.rank_actions[0]),
            "F0.0 SendAct0.0->s1@r1 F0.1 SendAct0.1->s1@r1 RecvGrad0.0<-s1@r1 B0.0 F0.2 SendAct0.2->s1@r1 "
            "RecvGrad0.1<-s1@r1 B0.1 RecvGrad0.2<-s1@r1 B0.2 Reduce0");
  EXPECT_EQ(to_string(s.rank_actions[1]),
            "RecvAct1.0<-s0@r0 F1.0 B1.0 SendGrad1.0->s0@r0 RecvAct1.1<-s0@r0 F1.1 B1.1 SendGrad1.1->s0@r0 "
            "RecvAct1.2<-s0@r0 F1.2 B1.2 Reduce1 SendGrad1.2->s0@r0");
  EXPECT_NE(to_string(s).find("reduce=dp"), std::string::npos) << to_string(s);
  EXPECT_WEFT_ERROR(add_reduce_grads(s), "already reduces");
}

TEST(ReduceGrad, SplitSchedulesReduceAfterTheLastW) {
  Schedule s = zero_bubble_h1_schedule(2, 2);
  add_reduce_grads(s);
  for (int r = 0; r < 2; ++r) {
    const auto& list = s.rank_actions[r];
    int last_w = -1, reduce = -1;
    for (int i = 0; i < static_cast<int>(list.size()); ++i) {
      if (list[i].kind == ActionKind::kWeight) last_w = i;
      if (list[i].kind == ActionKind::kReduceGrad) reduce = i;
    }
    EXPECT_EQ(reduce, last_w + 1) << to_string(list);
  }
  EXPECT_NO_THROW(validate(s));
}

TEST(ReduceGrad, EveryGeneratorWithReductionsValidates) {
  for (int p = 1; p <= 4; ++p)
    for (int m = 1; m <= 8; ++m)
      for (ScheduleKind k : {ScheduleKind::kGPipe, ScheduleKind::k1F1B, ScheduleKind::kZeroBubbleH1}) {
        Schedule s = make_schedule(k, p, m);
        if (p > 1) add_tied_grads(s, {{0, p - 1}});
        add_reduce_grads(s);
        EXPECT_NO_THROW(validate(s)) << s;
      }
}

TEST(ReduceGrad, ValidatorRefusesAMissingReduction) {
  Schedule s = one_f_one_b_schedule(2, 2);
  add_reduce_grads(s);
  erase(s, 1, Action::reduce_grad(1));
  EXPECT_WEFT_ERROR(validate(s), "stage 1 has no Reduce1 on rank 1");
}

TEST(ReduceGrad, ValidatorRefusesAReductionBeforeTheLastBackward) {
  Schedule s = one_f_one_b_schedule(2, 2);
  add_reduce_grads(s);
  auto& list = s.rank_actions[0];
  erase(s, 0, Action::reduce_grad(0));
  list.insert(list.begin() + 1, Action::reduce_grad(0));  // right after F0.0
  EXPECT_WEFT_ERROR(validate(s), "reduces stage 0's gradients before B0.0 produced its part");
}

TEST(ReduceGrad, ValidatorRefusesAReductionInAScheduleWithoutDataParallelism) {
  Schedule s = gpipe_schedule(2, 2);
  s.rank_actions[0].push_back(Action::reduce_grad(0));
  EXPECT_WEFT_ERROR(validate(s), "does not reduce gradients");
}

TEST(ReduceGrad, ValidatorRefusesATwiceReducedStage) {
  Schedule s = gpipe_schedule(2, 2);
  add_reduce_grads(s);
  s.rank_actions[0].push_back(Action::reduce_grad(0));
  EXPECT_WEFT_ERROR(validate(s), "repeats action");
}

TEST(ReduceGrad, ValidatorRefusesATiedAverageBeforeTheTiedSum) {
  Schedule s = gpipe_schedule(2, 2);
  add_tied_grads(s, {{0, 1}});
  add_reduce_grads(s);
  auto& list = s.rank_actions[1];
  const Action avg = Action::reduce_tied_grad(1, 0);
  erase(s, 1, avg);
  list.insert(list.end() - 1, avg);  // before Tied0@s1
  EXPECT_WEFT_ERROR(validate(s), "averages tied group 0 before its sum over stages");
  erase(s, 1, avg);
  EXPECT_WEFT_ERROR(validate(s), "has no ReduceTied0 action");
}

// GPipe, 2 ranks, 2 micro-batches, F = 1, full B = 2, no transfer time,
// reductions of 3 (stage 0) and 1 (stage 1):
//   rank 1: F1.0 [1,2] F1.1 [2,3] B1.0 [3,5] B1.1 [5,7]; Reduce1 [7,8]
//   rank 0: F0.0 [0,1] F0.1 [1,2] B0.0 [5,7] B0.1 [7,9]; Reduce0 [9,12]
// makespan 12; busy 6 per rank, bubble 1 - 12 / 24 = 0.5 (0.333 without).
TEST(ReduceGrad, SimulatorTimesReductionsOnTheCommunicationChannel) {
  Schedule s = gpipe_schedule(2, 2);
  add_reduce_grads(s);
  CostModel c = CostModel::uniform(2, 1, 1, 1);
  c.reduce_grad = {3, 1};
  const Simulation sim = simulate(s, c);
  EXPECT_DOUBLE_EQ(sim.makespan, 12);
  EXPECT_DOUBLE_EQ(sim.bubble_fraction, 0.5);
  EXPECT_DOUBLE_EQ(sim.ranks[0].finish, 12);
  EXPECT_DOUBLE_EQ(sim.ranks[1].finish, 8);
  const TimedAction& r0 = sim.ranks[0].actions.back();
  ASSERT_EQ(r0.action, Action::reduce_grad(0));
  EXPECT_DOUBLE_EQ(r0.start, 9);
  EXPECT_DOUBLE_EQ(r0.end, 12);
  EXPECT_DOUBLE_EQ(sim.ranks[0].busy, 6);
  c.reduce_grad.clear();
  EXPECT_DOUBLE_EQ(simulate(s, c).makespan, 9);
}

// One rank with two stages (virtual 2), one micro-batch: the two reductions
// share the channel. F0.0 [0,1] F1.0 [1,2] B1.0 [2,4] Reduce1 [4,7] (the rank
// goes on) B0.0 [4,6] Reduce0 waits for the channel: [7,8]. Makespan 8.
TEST(ReduceGrad, ReductionsOnOneRankGoOneAfterAnother) {
  Schedule s = gpipe_schedule(1, 1, 2);
  add_reduce_grads(s);
  CostModel c = CostModel::uniform(2, 1, 1, 1);
  c.reduce_grad = {1, 3};
  const Simulation sim = simulate(s, c);
  EXPECT_DOUBLE_EQ(sim.makespan, 8);
  EXPECT_DOUBLE_EQ(sim.bubble_fraction, 0.25);
  const auto& acts = sim.ranks[0].actions;
  ASSERT_EQ(acts.back().action, Action::reduce_grad(0));
  EXPECT_DOUBLE_EQ(acts.back().start, 7);
}

// A tied average blocks its rank: GPipe 2 x 1 with group {0, 1}, reduce_tied 2.
// rank 1: F1.0 [1,2] B1.0 [2,4] Reduce1 [4,4] Tied0 waits for rank 0.
// rank 0: F0.0 [0,1] B0.0 [4,6] Reduce0 [6,6] Tied0 [6,6] ReduceTied0 [6,8].
TEST(ReduceGrad, TiedAverageBlocksItsRank) {
  Schedule s = gpipe_schedule(2, 1);
  add_tied_grads(s, {{0, 1}});
  add_reduce_grads(s);
  CostModel c = CostModel::uniform(2, 1, 1, 1);
  c.reduce_tied = {2};
  const Simulation sim = simulate(s, c);
  EXPECT_DOUBLE_EQ(sim.makespan, 8);
  EXPECT_DOUBLE_EQ(sim.ranks[1].finish, 8);
  c.reduce_tied = {2, 2};
  EXPECT_WEFT_ERROR(simulate(s, c), "reduce_tied has 2 entries for 1 tied groups");
}

}  // namespace
}  // namespace weft::parallel::pipe

namespace weft::parallel::pipe {
namespace {

// The charts show the reductions: a "dp" row under each rank in text, an
// orange strip in SVG (the case of SimulatorTimesReductionsOnTheCommunicationChannel).
TEST(ReduceGrad, ChartsShowTheReductions) {
  Schedule s = gpipe_schedule(2, 2);
  add_reduce_grads(s);
  CostModel c = CostModel::uniform(2, 1, 1, 1);
  c.reduce_grad = {3, 1};
  const Simulation sim = simulate(s, c);
  ChartOptions o;
  o.unit = 1;
  const std::string text = text_chart(s, sim, o);
  EXPECT_NE(text.find("rank 0 |F0 F1 .. .. .. B0 B0 B1 B1 .. .. ..|\n  dp   |                           R0 R0 R0|\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rank 1 |.. F0 F1 B0 B0 B1 B1 .. .. .. .. ..|\n  dp   |                     R1            |\n"),
            std::string::npos)
      << text;
  const std::string svg = svg_chart(s, sim, o);
  EXPECT_NE(svg.find("class=\"action Reduce\""), std::string::npos);
  EXPECT_NE(svg.find("gradient average"), std::string::npos);
}

}  // namespace
}  // namespace weft::parallel::pipe
