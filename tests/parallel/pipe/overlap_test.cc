// Overlapped F and B (Note [overlapped F and B] in parallel/pipe/schedule.h):
// the pairing transform's exact action lists, the validator's checks, the
// simulator's timing of a pair worked by hand, the cost-aware pairing, the
// text form and the charts.
#include "parallel/pipe/overlap.h"

#include <gtest/gtest.h>

#include "parallel/pipe/chart.h"
#include "parallel/pipe/generators.h"
#include "parallel/pipe/parse.h"
#include "parallel/pipe/simulate.h"
#include "parallel/pipe/validate.h"
#include "tests/testing.h"

namespace weft::parallel::pipe {
namespace {

std::string timeline(const Simulation& sim, int r) {
  std::string out;
  for (const TimedAction& t : sim.ranks[r].actions) {
    if (!is_compute(t.action.kind)) continue;
    if (!out.empty()) out += ' ';
    out += to_string(t.action) + "[" + format_number(t.start) + "," + format_number(t.end) + "]";
  }
  return out;
}

// 1F1B on 2 ranks with 2 micro-batches: rank 0's F0.1 pairs with B0.0 (its
// RecvGrad moves before the pair, its SendAct after); rank 1's F and B are
// of the same micro-batch and stage, so nothing pairs there.
TEST(Overlap, PairsAForwardWithTheBackwardAfterIt) {
  const Schedule s = overlap_forward_backward(one_f_one_b_schedule(2, 2));
  EXPECT_EQ(s.name, "1f1b-overlap");
  EXPECT_EQ(to_string(s.rank_actions[0]),
            "F0.0 SendAct0.0->s1@r1 RecvGrad0.0<-s1@r1 Overlap0 F0.1 B0.0 SendAct0.1->s1@r1 RecvGrad0.1<-s1@r1 B0.1");
  EXPECT_EQ(s.rank_actions[1], one_f_one_b_schedule(2, 2).rank_actions[1]);
  validate(s);
  // The text form carries the pair (parse.h round trip).
  EXPECT_EQ(to_string(parse_schedule(to_string(s))), to_string(s));
}

// The pair timed by hand, F = 1, full B = 2. Rank 0: F0.0 0-1; it waits for
// B0.0's gradient until 4 (F1.0 1-2, B1.0 2-4). At overlap_speed 1 the pair
// runs F0.1 4-5 and B0.0 4-6; SendAct0.1 goes at 6, so F1.1 6-7, B1.1 7-9,
// B0.1 9-11. At 0.5, F0.1 runs 4-6 at half speed beside B0.0, which does 1
// of its 2 by then and ends alone at 7: F1.1 7-8, B1.1 8-10, B0.1 10-12.
// (Unpaired 1F1B takes 9: this pair delays the send rank 1 waits for.)
TEST(Overlap, SimulatorTimesThePairTogether) {
  const Schedule s = overlap_forward_backward(one_f_one_b_schedule(2, 2));
  CostModel c = CostModel::uniform(2, 1, 1, 1);
  c.overlap_speed = 1;
  Simulation sim = simulate(s, c);
  EXPECT_EQ(timeline(sim, 0), "F0.0[0,1] F0.1[4,5] B0.0[4,6] B0.1[9,11]");
  EXPECT_EQ(timeline(sim, 1), "F1.0[1,2] B1.0[2,4] F1.1[6,7] B1.1[7,9]");
  EXPECT_EQ(sim.makespan, 11);
  EXPECT_EQ(sim.ranks[0].busy, 1 + 2 + 2);  // the pair's span counts once
  c.overlap_speed = 0.5;
  sim = simulate(s, c);
  EXPECT_EQ(timeline(sim, 0), "F0.0[0,1] F0.1[4,6] B0.0[4,7] B0.1[10,12]");
  EXPECT_EQ(sim.makespan, 12);
  EXPECT_EQ(simulate(one_f_one_b_schedule(2, 2), c).makespan, 9);
  c.overlap_speed = 0;
  EXPECT_WEFT_ERROR(simulate(s, c), "simulate 1f1b-overlap: overlap_speed = 0 is not in (0, 1]");
}

// With costs, a pair that lengthens the step is dropped: at no gain (0.5)
// nothing pairs on 1F1B; on every built-in schedule the cost-aware pairing
// never simulates slower than the schedule itself.
TEST(Overlap, CostAwarePairingNeverLengthensTheStep) {
  CostModel c = CostModel::uniform(2, 1, 1, 1);
  const Schedule none = overlap_forward_backward(one_f_one_b_schedule(2, 2), c);
  for (const auto& list : none.rank_actions)
    for (const Action& a : list) EXPECT_NE(a.kind, ActionKind::kOverlap);
  int pairs = 0;
  for (ScheduleKind kind :
       {ScheduleKind::kGPipe, ScheduleKind::k1F1B, ScheduleKind::kInterleaved1F1B, ScheduleKind::kZeroBubbleH1,
        ScheduleKind::kZeroBubbleV, ScheduleKind::kInterleavedZeroBubble})
    for (int p : {2, 4}) {
      const bool v2 = kind == ScheduleKind::kInterleaved1F1B || kind == ScheduleKind::kZeroBubbleV ||
                      kind == ScheduleKind::kInterleavedZeroBubble;
      const Schedule s = make_schedule(kind, p, 2 * p, v2 ? 2 : 1);
      CostModel costs = CostModel::uniform(s.num_stages(), 1, 1, 1);
      costs.overlap_speed = 0.8;
      const Schedule o = overlap_forward_backward(s, costs);
      validate(o);
      EXPECT_LE(simulate(o, costs).makespan, simulate(s, costs).makespan + 1e-9) << s.name << " p=" << p;
      for (const auto& list : o.rank_actions)
        for (const Action& a : list) pairs += a.kind == ActionKind::kOverlap;
    }
  EXPECT_GT(pairs, 0);  // somewhere a pair pays at 0.8
}

TEST(Overlap, ValidatorChecksThePair) {
  Schedule s = overlap_forward_backward(one_f_one_b_schedule(2, 2));
  Schedule swapped = s;
  std::swap(swapped.rank_actions[0][4], swapped.rank_actions[0][5]);  // Overlap0 B0.0 F0.1
  EXPECT_WEFT_ERROR(validate(swapped), "rank 0 action 3 (Overlap0): is not followed by F0.<micro-batch> and then a B");
  Schedule same = one_f_one_b_schedule(2, 2);
  auto& r1 = same.rank_actions[1];  // RecvAct1.0 F1.0 B1.0 ...: pair F1.0 with B1.0 of the same micro-batch
  r1.insert(r1.begin() + 1, Action::overlap(1));
  EXPECT_WEFT_ERROR(validate(same),
                    "rank 1 action 1 (Overlap1): B1.0 needs F1.0's result and cannot run at the same time");
}

TEST(Overlap, ChartsDrawThePair) {
  const Schedule s = overlap_forward_backward(one_f_one_b_schedule(2, 2));
  CostModel c = CostModel::uniform(2, 1, 1, 1);
  c.overlap_speed = 1;
  const Simulation sim = simulate(s, c);
  const std::string text = text_chart(s, sim);
  EXPECT_NE(text.find("rank 0 |F0    ..... ..... ..... F1+B0 B0    ..... ..... ..... B1    B1   |"), std::string::npos)
      << text;
  EXPECT_NE(text.find("F+B = an overlapped pair"), std::string::npos) << text;
  const std::string svg = svg_chart(s, sim);
  EXPECT_NE(svg.find("height=\"12\" fill=\"#2f6fb0\""), std::string::npos);  // the pair's F: the lane's top half
}

}  // namespace
}  // namespace weft::parallel::pipe
