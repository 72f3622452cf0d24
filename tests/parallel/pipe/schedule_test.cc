// Schedules as data: Action names, placement, communication insertion, and the
// generators' action orders written out by hand for small cases.
#include "parallel/pipe/schedule.h"

#include <gtest/gtest.h>

#include "parallel/pipe/generators.h"
#include "tests/testing.h"

namespace weft::parallel::pipe {
namespace {

// The compute actions of rank r, space-separated.
std::string compute_order(const Schedule& s, int r) { return to_string(s.compute_actions(r)); }

TEST(PipeAction, ToString) {
  EXPECT_EQ(to_string(Action::forward(3, 1)), "F3.1");
  EXPECT_EQ(to_string(Action::backward(0, 12)), "B0.12");
  EXPECT_EQ(to_string(Action::weight(2, 0)), "W2.0");
  EXPECT_EQ(to_string(Action::send_activation(1, 2, 0)), "SendAct1.2->s2@r0");
  EXPECT_EQ(to_string(Action::recv_activation(2, 2, 1)), "RecvAct2.2<-s1@r1");
  EXPECT_EQ(to_string(Action::send_grad(2, 5, 1)), "SendGrad2.5->s1@r1");
  EXPECT_EQ(to_string(Action::recv_grad(1, 5, 0)), "RecvGrad1.5<-s2@r0");
  EXPECT_TRUE(is_compute(ActionKind::kWeight));
  EXPECT_FALSE(is_compute(ActionKind::kRecvGrad));
  EXPECT_TRUE(is_send(ActionKind::kSendGrad) && is_recv(ActionKind::kRecvActivation));
}

TEST(PipeSchedule, LoopedPlacementAndStagesOfRank) {
  Schedule s = make_empty_schedule("x", 2, 4, 3, false);
  EXPECT_EQ(s.num_stages(), 6);
  EXPECT_EQ(s.stage_to_rank, (std::vector<int>{0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(s.stages_of_rank(1), (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(s.rank_of(4), 0);
  EXPECT_EQ(s.local_index(5), 2);
  EXPECT_EQ(s.local_index(0), 0);
  EXPECT_WEFT_ERROR(s.rank_of(6), "stage 6 out of range [0, 6)");
  EXPECT_WEFT_ERROR(s.stages_of_rank(2), "rank 2 out of range [0, 2)");
  EXPECT_WEFT_ERROR(make_empty_schedule("x", 0, 4, 1, false), "ranks must be positive (ranks=0)");
  EXPECT_WEFT_ERROR(make_empty_schedule("x", 2, 0, 1, false), "micro-batches must be positive (microbatches=0)");
}

TEST(PipeSchedule, InsertCommunicationOnlyAcrossRanks) {
  // 4 stages on 2 ranks (looped): 0->1 and 2->3 and 1->2 cross ranks.
  Schedule s = make_empty_schedule("x", 2, 1, 2, false);
  s.rank_actions[0] = {Action::forward(0, 0), Action::forward(2, 0), Action::backward(2, 0), Action::backward(0, 0)};
  s.rank_actions[1] = {Action::forward(1, 0), Action::forward(3, 0), Action::backward(3, 0), Action::backward(1, 0)};
  insert_communication(s);
  EXPECT_EQ(to_string(s.rank_actions[0]),
            "F0.0 SendAct0.0->s1@r1 RecvAct2.0<-s1@r1 F2.0 SendAct2.0->s3@r1 RecvGrad2.0<-s3@r1 B2.0 "
            "SendGrad2.0->s1@r1 RecvGrad0.0<-s1@r1 B0.0");
  EXPECT_EQ(to_string(s.rank_actions[1]),
            "RecvAct1.0<-s0@r0 F1.0 SendAct1.0->s2@r0 RecvAct3.0<-s2@r0 F3.0 B3.0 SendGrad3.0->s2@r0 "
            "RecvGrad1.0<-s2@r0 B1.0 SendGrad1.0->s0@r0");
  // Inserting twice is refused.
  EXPECT_WEFT_ERROR(insert_communication(s), "rank 0 already holds communication action SendAct0.0->s1@r1");
}

TEST(PipeGenerators, GPipeTwoRanksFourMicrobatches) {
  Schedule s = gpipe_schedule(2, 4);
  EXPECT_EQ(s.name, "gpipe");
  EXPECT_FALSE(s.split_backward);
  EXPECT_EQ(to_string(s.rank_actions[0]),
            "F0.0 SendAct0.0->s1@r1 F0.1 SendAct0.1->s1@r1 F0.2 SendAct0.2->s1@r1 F0.3 SendAct0.3->s1@r1 "
            "RecvGrad0.0<-s1@r1 B0.0 RecvGrad0.1<-s1@r1 B0.1 RecvGrad0.2<-s1@r1 B0.2 RecvGrad0.3<-s1@r1 B0.3");
  EXPECT_EQ(to_string(s.rank_actions[1]),
            "RecvAct1.0<-s0@r0 F1.0 RecvAct1.1<-s0@r0 F1.1 RecvAct1.2<-s0@r0 F1.2 RecvAct1.3<-s0@r0 F1.3 "
            "B1.0 SendGrad1.0->s0@r0 B1.1 SendGrad1.1->s0@r0 B1.2 SendGrad1.2->s0@r0 B1.3 SendGrad1.3->s0@r0");
}

TEST(PipeGenerators, OneFOneBTwoRanksFourMicrobatches) {
  Schedule s = one_f_one_b_schedule(2, 4);
  EXPECT_EQ(s.name, "1f1b");
  // Rank 0: one warm-up forward, three F/B pairs, one drain backward.
  EXPECT_EQ(to_string(s.rank_actions[0]),
            "F0.0 SendAct0.0->s1@r1 F0.1 SendAct0.1->s1@r1 RecvGrad0.0<-s1@r1 B0.0 F0.2 SendAct0.2->s1@r1 "
            "RecvGrad0.1<-s1@r1 B0.1 F0.3 SendAct0.3->s1@r1 RecvGrad0.2<-s1@r1 B0.2 RecvGrad0.3<-s1@r1 B0.3");
  EXPECT_EQ(to_string(s.rank_actions[1]),
            "RecvAct1.0<-s0@r0 F1.0 B1.0 SendGrad1.0->s0@r0 RecvAct1.1<-s0@r0 F1.1 B1.1 SendGrad1.1->s0@r0 "
            "RecvAct1.2<-s0@r0 F1.2 B1.2 SendGrad1.2->s0@r0 RecvAct1.3<-s0@r0 F1.3 B1.3 SendGrad1.3->s0@r0");
}

TEST(PipeGenerators, GPipeFourRanksEightMicrobatches) {
  Schedule s = gpipe_schedule(4, 8);
  EXPECT_EQ(compute_order(s, 0), "F0.0 F0.1 F0.2 F0.3 F0.4 F0.5 F0.6 F0.7 B0.0 B0.1 B0.2 B0.3 B0.4 B0.5 B0.6 B0.7");
  EXPECT_EQ(compute_order(s, 2), "F2.0 F2.1 F2.2 F2.3 F2.4 F2.5 F2.6 F2.7 B2.0 B2.1 B2.2 B2.3 B2.4 B2.5 B2.6 B2.7");
  // Middle ranks receive before and send after every compute.
  EXPECT_EQ(s.rank_actions[1].size(), 16u * 3);
  EXPECT_EQ(s.rank_actions[3].size(), 16u * 2);
}

TEST(PipeGenerators, OneFOneBFourRanksEightMicrobatches) {
  Schedule s = one_f_one_b_schedule(4, 8);
  EXPECT_EQ(compute_order(s, 0), "F0.0 F0.1 F0.2 F0.3 B0.0 F0.4 B0.1 F0.5 B0.2 F0.6 B0.3 F0.7 B0.4 B0.5 B0.6 B0.7");
  EXPECT_EQ(compute_order(s, 1), "F1.0 F1.1 F1.2 B1.0 F1.3 B1.1 F1.4 B1.2 F1.5 B1.3 F1.6 B1.4 F1.7 B1.5 B1.6 B1.7");
  EXPECT_EQ(compute_order(s, 2), "F2.0 F2.1 B2.0 F2.2 B2.1 F2.3 B2.2 F2.4 B2.3 F2.5 B2.4 F2.6 B2.5 F2.7 B2.6 B2.7");
  EXPECT_EQ(compute_order(s, 3), "F3.0 B3.0 F3.1 B3.1 F3.2 B3.2 F3.3 B3.3 F3.4 B3.4 F3.5 B3.5 F3.6 B3.6 F3.7 B3.7");
}

TEST(PipeGenerators, OneFOneBFewerMicrobatchesThanRanksIsFillDrain) {
  Schedule s = one_f_one_b_schedule(4, 2);
  EXPECT_EQ(compute_order(s, 0), "F0.0 F0.1 B0.0 B0.1");
  EXPECT_EQ(compute_order(s, 2), "F2.0 F2.1 B2.0 B2.1");
  EXPECT_EQ(compute_order(s, 3), "F3.0 B3.0 F3.1 B3.1");
}

TEST(PipeGenerators, InterleavedTwoRanksFourMicrobatchesTwoChunks) {
  // Stages 0, 2 on rank 0 and 1, 3 on rank 1; micro-batches in groups of 2.
  Schedule s = interleaved_schedule(2, 4, 2);
  EXPECT_EQ(s.num_stages(), 4);
  EXPECT_EQ(s.stages_of_rank(0), (std::vector<int>{0, 2}));
  // Rank 0: warm-up (v-1)p + 2(p-1-r) = 4 forwards.
  EXPECT_EQ(compute_order(s, 0), "F0.0 F0.1 F2.0 F2.1 F0.2 B2.0 F0.3 B2.1 F2.2 B0.0 F2.3 B0.1 B2.2 B2.3 B0.2 B0.3");
  // Rank 1: warm-up 2.
  EXPECT_EQ(compute_order(s, 1), "F1.0 F1.1 F3.0 B3.0 F3.1 B3.1 F1.2 B1.0 F1.3 B1.1 F3.2 B3.2 F3.3 B3.3 B1.2 B1.3");
  // The wrap-around boundary 1 -> 2 goes from rank 1 back to rank 0.
  EXPECT_EQ(to_string(std::vector<Action>(s.rank_actions[0].begin(), s.rank_actions[0].begin() + 5)),
            "F0.0 SendAct0.0->s1@r1 F0.1 SendAct0.1->s1@r1 RecvAct2.0<-s1@r1");
}

TEST(PipeGenerators, InterleavedWithOneChunkIs1F1B) {
  for (int p : {1, 2, 3, 4})
    for (int m : {4, 8, 12}) {
      if (m % p) continue;
      EXPECT_EQ(interleaved_schedule(p, m, 1).rank_actions, one_f_one_b_schedule(p, m).rank_actions)
          << "p=" << p << " m=" << m;
    }
}

TEST(PipeGenerators, ZeroBubbleH1TwoRanksFourMicrobatches) {
  Schedule s = zero_bubble_h1_schedule(2, 4);
  EXPECT_EQ(s.name, "zb-h1");
  EXPECT_TRUE(s.split_backward);
  // Rank 0: 1F1B's F/B order, each W right after its B.
  EXPECT_EQ(compute_order(s, 0), "F0.0 F0.1 B0.0 W0.0 F0.2 B0.1 W0.1 F0.3 B0.2 W0.2 B0.3 W0.3");
  // Rank 1: W lags B by one micro-batch; the deferred W runs in the drain.
  EXPECT_EQ(compute_order(s, 1), "F1.0 B1.0 F1.1 B1.1 W1.0 F1.2 B1.2 W1.1 F1.3 B1.3 W1.2 W1.3");
  // Sends follow B, not W.
  EXPECT_EQ(to_string(std::vector<Action>(s.rank_actions[1].begin(), s.rank_actions[1].begin() + 4)),
            "RecvAct1.0<-s0@r0 F1.0 B1.0 SendGrad1.0->s0@r0");
}

TEST(PipeGenerators, ZeroBubbleH1KeepsOneFOneBForwardBackwardOrder) {
  for (int p : {1, 2, 3, 4, 6})
    for (int m : {1, 2, 5, 8}) {
      Schedule zb = zero_bubble_h1_schedule(p, m), ofob = one_f_one_b_schedule(p, m);
      for (int r = 0; r < p; ++r) {
        std::vector<Action> fb;
        for (const Action& a : zb.compute_actions(r))
          if (a.kind != ActionKind::kWeight) fb.push_back(a);
        EXPECT_EQ(fb, ofob.compute_actions(r)) << "p=" << p << " m=" << m << " r=" << r;
      }
    }
}

TEST(PipeGenerators, ArgumentErrorsNameTheValues) {
  EXPECT_WEFT_ERROR(interleaved_schedule(2, 5, 2),
                    "interleaved 1F1B needs the micro-batch count to be a multiple of the rank count "
                    "(microbatches=5, ranks=2)");
  EXPECT_WEFT_ERROR(one_f_one_b_schedule(2, 4, 2), "1f1b runs one stage per rank (virtual=2)");
  EXPECT_WEFT_ERROR(zero_bubble_h1_schedule(2, 4, 3), "zb-h1 runs one stage per rank (virtual=3)");
  EXPECT_WEFT_ERROR(gpipe_schedule(0, 4), "ranks must be positive (ranks=0)");
  EXPECT_WEFT_ERROR(gpipe_schedule(2, 4, 0), "virtual stages per rank must be positive (virtual=0)");
  EXPECT_WEFT_ERROR(parse_schedule_kind("pipedream"), "unknown pipeline schedule 'pipedream'");
}

TEST(PipeGenerators, MakeScheduleByName) {
  EXPECT_EQ(make_schedule(parse_schedule_kind("gpipe"), 2, 2).name, "gpipe");
  EXPECT_EQ(make_schedule(parse_schedule_kind("1f1b"), 2, 2).name, "1f1b");
  EXPECT_EQ(make_schedule(parse_schedule_kind("interleaved"), 2, 2, 2).name, "interleaved");
  EXPECT_EQ(make_schedule(parse_schedule_kind("zb"), 2, 2).name, "zb-h1");
  EXPECT_EQ(schedule_name(ScheduleKind::kZeroBubbleH1), "zb-h1");
  EXPECT_EQ(to_string(gpipe_schedule(1, 2)),
            "gpipe: ranks=1 microbatches=2 virtual=1 stages=1 backward=full\nrank 0: F0.0 F0.1 B0.0 B0.1\n");
}

}  // namespace
}  // namespace weft::parallel::pipe
