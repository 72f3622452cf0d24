// The V placement and the list-scheduled zero-bubble schedules (zbv,
// interleaved-zb): placement as data through stages_of_rank, local_index and
// insert_communication; action lists written out for p = 2, m = 4; every
// shape validates; the simulated bubble and memory against ZB-H1 and against
// torch.distributed.pipelining's ScheduleZBVZeroBubble and
// ScheduleInterleavedZeroBubble; the list scheduler's limits and errors.
//
// Units: costs are per stage (F = B = W = 1 for each of a rank's v stages),
// and peak_live_activations counts stage-micro-batches. torch's tables count
// a rank's share of the model for one micro-batch, so a stage activation is
// 1/v of a share: torch's "4 per rank" for ZB-V (v = 2) is 8 here.
#include <gtest/gtest.h>

#include "parallel/pipe/chart.h"
#include "parallel/pipe/generators.h"
#include "parallel/pipe/list_schedule.h"
#include "parallel/pipe/simulate.h"
#include "parallel/pipe/validate.h"
#include "tests/testing.h"

namespace weft::parallel::pipe {
namespace {

Simulation unit_simulation(const Schedule& s) { return simulate(s, CostModel::uniform(s.num_stages(), 1, 1, 1)); }

std::vector<int> peak_live(const Simulation& sim) {
  std::vector<int> out;
  for (const RankTimeline& tl : sim.ranks) out.push_back(tl.peak_live_activations);
  return out;
}

// Peak of live activations plus pending weight-gradient stashes, per rank.
std::vector<int> peak_stash(const Schedule& s) {
  CostModel c = CostModel::uniform(s.num_stages(), 1, 1, 1);
  c.weight_grad_memory.assign(s.num_stages(), 1);
  std::vector<int> out;
  for (const RankTimeline& tl : simulate(s, c).ranks) out.push_back(static_cast<int>(tl.peak_memory));
  return out;
}

TEST(VPlacement, StagesGoOutAndBack) {
  EXPECT_EQ(v_placement(4), (std::vector<int>{0, 1, 2, 3, 3, 2, 1, 0}));
  EXPECT_EQ(v_placement(1), (std::vector<int>{0, 0}));
  EXPECT_WEFT_ERROR(v_placement(0), "v_placement needs positive ranks (ranks=0)");
  const Schedule s = zero_bubble_v_schedule(4, 8);
  EXPECT_EQ(s.stage_to_rank, v_placement(4));
  EXPECT_EQ(s.stages_of_rank(0), (std::vector<int>{0, 7}));
  EXPECT_EQ(s.stages_of_rank(3), (std::vector<int>{3, 4}));
  EXPECT_EQ(s.local_index(7), 1);
  EXPECT_EQ(s.local_index(4), 1);
  EXPECT_EQ(s.local_index(3), 0);
}

TEST(VPlacement, NeighboursOnOneRankExchangeNothing) {
  // Stages 1 and 2 share rank 1 (p = 2): the activation and the gradient stay there.
  Schedule s = make_empty_schedule("v", 2, 1, 2, false);
  s.stage_to_rank = v_placement(2);
  s.rank_actions[0] = {Action::forward(0, 0), Action::forward(3, 0), Action::backward(3, 0), Action::backward(0, 0)};
  s.rank_actions[1] = {Action::forward(1, 0), Action::forward(2, 0), Action::backward(2, 0), Action::backward(1, 0)};
  insert_communication(s);
  EXPECT_EQ(to_string(s.rank_actions[0]),
            "F0.0 SendAct0.0->s1@r1 RecvAct3.0<-s2@r1 F3.0 B3.0 SendGrad3.0->s2@r1 RecvGrad0.0<-s1@r1 B0.0");
  EXPECT_EQ(to_string(s.rank_actions[1]),
            "RecvAct1.0<-s0@r0 F1.0 F2.0 SendAct2.0->s3@r0 RecvGrad2.0<-s3@r0 B2.0 B1.0 SendGrad1.0->s0@r0");
  validate(s);
  EXPECT_EQ(unit_simulation(s).makespan, 12);  // one micro-batch out and back: 4 F of 1, 4 full B of 2
}

TEST(ZeroBubbleV, TwoRanksFourMicrobatches) {
  // Rank 0 holds stages 0 and 3, rank 1 stages 1 and 2. Rank 0 fills its 2p = 4
  // activations (F0.0-F0.2, F3.0), then each B frees room for the next F; a W
  // runs when no B is ready and no F is admitted: W3.0 on rank 0, where 2 live
  // activations, the room kept for F3.2 and 3 pending Ws reach the stash limit
  // 3p = 6. Rank 1 hands F1 -> F2 and B2 -> B1 over locally: no message
  // between stages 1 and 2.
  const Schedule s = zero_bubble_v_schedule(2, 4);
  EXPECT_EQ(s.name, "zbv");
  EXPECT_TRUE(s.split_backward);
  EXPECT_EQ(s.virtual_stages, 2);
  EXPECT_EQ(to_string(s.rank_actions[0]),
            "F0.0 SendAct0.0->s1@r1 F0.1 SendAct0.1->s1@r1 F0.2 SendAct0.2->s1@r1 RecvAct3.0<-s2@r1 F3.0 B3.0 "
            "SendGrad3.0->s2@r1 RecvAct3.1<-s2@r1 F3.1 B3.1 SendGrad3.1->s2@r1 RecvGrad0.0<-s1@r1 B0.0 W3.0 "
            "RecvGrad0.1<-s1@r1 B0.1 F0.3 SendAct0.3->s1@r1 RecvAct3.2<-s2@r1 F3.2 B3.2 SendGrad3.2->s2@r1 W3.1 "
            "W0.0 RecvGrad0.2<-s1@r1 B0.2 W0.1 RecvAct3.3<-s2@r1 F3.3 B3.3 SendGrad3.3->s2@r1 W3.2 W0.2 "
            "RecvGrad0.3<-s1@r1 B0.3 W3.3 W0.3");
  EXPECT_EQ(to_string(s.rank_actions[1]),
            "RecvAct1.0<-s0@r0 F1.0 F2.0 SendAct2.0->s3@r0 RecvAct1.1<-s0@r0 F1.1 F2.1 SendAct2.1->s3@r0 "
            "RecvGrad2.0<-s3@r0 B2.0 B1.0 SendGrad1.0->s0@r0 RecvGrad2.1<-s3@r0 B2.1 B1.1 SendGrad1.1->s0@r0 "
            "RecvAct1.2<-s0@r0 F1.2 F2.2 SendAct2.2->s3@r0 W2.0 RecvAct1.3<-s0@r0 F1.3 RecvGrad2.2<-s3@r0 B2.2 "
            "B1.2 SendGrad1.2->s0@r0 W1.0 F2.3 SendAct2.3->s3@r0 W2.1 W1.1 RecvGrad2.3<-s3@r0 B2.3 B1.3 "
            "SendGrad1.3->s0@r0 W2.2 W1.2 W2.3 W1.3");
  const Simulation sim = unit_simulation(s);
  EXPECT_EQ(sim.makespan, 25);  // 6m of work per rank + the p - 1 units rank 1 waits at the start
  EXPECT_EQ(peak_live(sim), (std::vector<int>{4, 4}));
}

TEST(InterleavedZeroBubble, TwoRanksFourMicrobatchesTwoStagesPerRank) {
  // Looped: rank 0 holds stages 0 and 2 (limit v p - r = 4), rank 1 stages 1 and 3 (limit 3).
  const Schedule s = interleaved_zero_bubble_schedule(2, 4, 2);
  EXPECT_EQ(s.name, "interleaved-zb");
  EXPECT_EQ(s.stage_to_rank, looped_placement(2, 2));
  EXPECT_EQ(to_string(s.compute_actions(0)),
            "F0.0 F0.1 F2.0 F2.1 B2.0 F0.2 B0.0 B2.1 F2.2 B0.1 F0.3 B2.2 F2.3 B0.2 W2.0 W0.0 B2.3 W2.1 B0.3 W0.1 "
            "W2.2 W0.2 W2.3 W0.3");
  EXPECT_EQ(to_string(s.compute_actions(1)),
            "F1.0 F1.1 F3.0 B3.0 F3.1 B1.0 B3.1 F1.2 B1.1 F3.2 B3.2 F1.3 B1.2 W3.0 F3.3 B3.3 W1.0 B1.3 W3.1 W1.1 "
            "W3.2 W1.2 W3.3 W1.3");
  EXPECT_EQ(to_string(std::vector<Action>(s.rank_actions[1].begin(), s.rank_actions[1].begin() + 10)),
            "RecvAct1.0<-s0@r0 F1.0 SendAct1.0->s2@r0 RecvAct1.1<-s0@r0 F1.1 SendAct1.1->s2@r0 RecvAct3.0<-s2@r0 "
            "F3.0 B3.0 SendGrad3.0->s2@r0");
  const Simulation sim = unit_simulation(s);
  EXPECT_EQ(sim.makespan, 25);
  EXPECT_EQ(peak_live(sim), (std::vector<int>{4, 3}));
}

// Every shape validates within its memory limits, and where generators.h says
// so every rank idles only the p - 1 stage-times rank p - 1 waits to start.
TEST(ZeroBubbleV, EveryShapeValidatesWithinItsLimits) {
  for (int p = 1; p <= 8; ++p)
    for (int m = 1; m <= 32; ++m) {
      SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m));
      const Schedule zbv = zero_bubble_v_schedule(p, m);
      validate(zbv);
      const Simulation sim = unit_simulation(zbv);
      const std::vector<int> live = peak_live(sim), stash = peak_stash(zbv);
      for (int r = 0; r < p; ++r) EXPECT_LE(live[r], 2 * p) << "rank " << r;
      for (int r = 0; r < p; ++r) EXPECT_LE(stash[r], 3 * p) << "rank " << r;
      if (m >= p && !(p >= 5 && m == p + 1)) {
        EXPECT_EQ(sim.makespan, 6 * m + p - 1);
      }
      for (int v : {1, 2, 3, 4}) {
        const Schedule izb = interleaved_zero_bubble_schedule(p, m, v);
        validate(izb);
        const Simulation isim = unit_simulation(izb);
        if (m % p == 0) {
          EXPECT_EQ(isim.makespan, 3 * v * m + p - 1) << "v=" << v;
        }
        const std::vector<int> ilive = peak_live(isim), istash = peak_stash(izb);
        for (int r = 0; r < p; ++r) EXPECT_LE(ilive[r], v * p - r) << "v=" << v << " rank " << r;
        for (int r = 0; r < p; ++r) EXPECT_LE(istash[r], v * p - r + 2 * p) << "v=" << v << " rank " << r;
      }
    }
}

TEST(ZeroBubbleV, BeatsTorchsTargetsAtFourRanksEightMicrobatches) {
  const Simulation zb_h1 = unit_simulation(zero_bubble_h1_schedule(4, 8));
  EXPECT_NEAR(zb_h1.bubble_fraction, 3.0 / 27, 1e-12);  // 11.1%
  EXPECT_EQ(peak_live(zb_h1), (std::vector<int>{4, 3, 2, 1}));
  // torch ScheduleZBVZeroBubble: 5.9%, 4 rank shares (8 stage activations) on every rank.
  const Simulation zbv = unit_simulation(zero_bubble_v_schedule(4, 8));
  EXPECT_LE(zbv.bubble_fraction, 0.059);
  EXPECT_NEAR(zbv.bubble_fraction, 3.0 / 51, 1e-12);  // 6m = 48 of work, rank 3 starts at 3
  for (int live : peak_live(zbv)) EXPECT_LE(live / 2.0, 4.0);
  // torch ScheduleInterleavedZeroBubble (v = 2): 5.9%, 4, 3.5, 3, 2.5 rank shares.
  const Simulation izb = unit_simulation(interleaved_zero_bubble_schedule(4, 8, 2));
  EXPECT_NEAR(izb.bubble_fraction, 3.0 / 51, 1e-12);
  EXPECT_EQ(peak_live(izb), (std::vector<int>{8, 7, 6, 5}));
}

TEST(ZeroBubbleV, NoWorseThanZeroBubbleH1AndAtTheLowerBound) {
  // Rank p - 1 cannot start before p - 1 stage-times, so 6m + p - 1 (zbv) and
  // 3vm + p - 1 (interleaved-zb) is the least makespan; both reach it here.
  for (int p : {2, 4, 8})
    for (int m : {p, 2 * p, 4 * p}) {
      SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m));
      const double h1 = unit_simulation(zero_bubble_h1_schedule(p, m)).bubble_fraction;
      const Simulation zbv = unit_simulation(zero_bubble_v_schedule(p, m));
      const Simulation izb = unit_simulation(interleaved_zero_bubble_schedule(p, m, 2));
      EXPECT_EQ(zbv.makespan, 6 * m + p - 1);
      EXPECT_EQ(izb.makespan, 6 * m + p - 1);
      EXPECT_LE(zbv.bubble_fraction, h1);
      EXPECT_LE(izb.bubble_fraction, h1);
    }
}

TEST(ZeroBubbleV, TextChartShowsTheRanksTwoStages) {
  const Schedule s = zero_bubble_v_schedule(2, 4);
  const std::string chart = text_chart(s, unit_simulation(s));
  EXPECT_NE(chart.find("rank 0 |F0a F1a F2a F0b B0b F1b B1b B0a W0b B1a F3a F2b B2b W1b W0a B2a W1a F3b B3b W2b "
                       "W2a B3a W3b W3a ...|"),
            std::string::npos)
      << chart;
  const std::string svg = svg_chart(s, unit_simulation(s));
  size_t boxes = 0;
  for (size_t at = svg.find("<rect class=\"action "); at != std::string::npos;
       at = svg.find("<rect class=\"action ", at + 1))
    ++boxes;
  EXPECT_EQ(boxes, 4u * 4 * 3);
}

TEST(ZeroBubbleV, ArgumentErrorsNameTheValues) {
  EXPECT_WEFT_ERROR(zero_bubble_v_schedule(4, 8, 1), "zbv places two stages per rank in a V (virtual=1)");
  EXPECT_WEFT_ERROR(make_schedule(ScheduleKind::kZeroBubbleV, 4, 8, 3),
                    "zbv places two stages per rank in a V (virtual=3)");
  EXPECT_WEFT_ERROR(zero_bubble_v_schedule(0, 8), "zbv: ranks, micro-batches and virtual stages must be positive");
  EXPECT_WEFT_ERROR(interleaved_zero_bubble_schedule(2, 0, 2),
                    "interleaved-zb: ranks, micro-batches and virtual stages must be positive (ranks=2, "
                    "microbatches=0, virtual=2)");
  EXPECT_EQ(parse_schedule_kind("zbv"), ScheduleKind::kZeroBubbleV);
  EXPECT_EQ(parse_schedule_kind("interleaved-zb"), ScheduleKind::kInterleavedZeroBubble);
  EXPECT_EQ(schedule_name(ScheduleKind::kZeroBubbleV), "zbv");
  EXPECT_EQ(schedule_name(ScheduleKind::kInterleavedZeroBubble), "interleaved-zb");
  EXPECT_EQ(make_schedule(ScheduleKind::kInterleavedZeroBubble, 2, 4, 2).name, "interleaved-zb");
}

TEST(ListSchedule, EitherReserveKeepsTheLimitsAndValidates) {
  for (MemoryReserve reserve : {MemoryReserve::kOldest, MemoryReserve::kAllOlder})
    for (int p : {1, 2, 3, 4})
      for (int m : {1, 3, 8}) {
        for (const std::vector<int>& placement : {looped_placement(p, 3), v_placement(p)}) {
          const int v = static_cast<int>(placement.size()) / p;
          ListScheduleOptions o{placement, p, m, std::vector<int>(p, v), std::vector<int>(p, v + 1), reserve};
          const auto order = list_schedule(o);
          ASSERT_TRUE(order.has_value()) << "p=" << p << " m=" << m;
          Schedule s = make_empty_schedule("list", p, m, v, true);
          s.stage_to_rank = placement;
          s.rank_actions = *order;
          insert_communication(s);
          validate(s);
          for (int live : peak_live(unit_simulation(s))) EXPECT_LE(live, v);
          for (int held : peak_stash(s)) EXPECT_LE(held, v + 1);
        }
      }
}

TEST(ListSchedule, ErrorsNameTheOption) {
  ListScheduleOptions o{v_placement(2), 2, 4, {1, 4}, {}, MemoryReserve::kOldest};
  EXPECT_WEFT_ERROR(list_schedule(o), "rank 0's activation limit 1 is below its 2 stages");
  o.activation_limit = {4, 4};
  o.stash_limit = {4, 3};
  EXPECT_WEFT_ERROR(list_schedule(o), "rank 1's stash limit 3 is below its activation limit 4");
  o.stash_limit = {};
  o.stage_to_rank = {0, 0, 0, 0};
  EXPECT_WEFT_ERROR(list_schedule(o), "rank 1 holds no stage");
  o.activation_limit = {4};
  EXPECT_WEFT_ERROR(list_schedule(o), "1 activation limits for 2 ranks");
}

}  // namespace
}  // namespace weft::parallel::pipe
