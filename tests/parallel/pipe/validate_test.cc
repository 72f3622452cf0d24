// The validator: every generated schedule passes over a grid of (p, m, v);
// deliberately broken schedules are refused with messages naming the rank, the
// action index and the action.
#include "parallel/pipe/validate.h"

#include <gtest/gtest.h>

#include "parallel/pipe/generators.h"
#include "tests/parallel/pipe/schedule_edit.h"
#include "tests/testing.h"

namespace weft::parallel::pipe {
namespace {

TEST(PipeValidate, EveryGeneratorPassesOverAGrid) {
  int checked = 0;
  for (int p = 1; p <= 6; ++p)
    for (int m = 1; m <= 12; ++m)
      for (int v = 1; v <= 4; ++v) {
        const std::string at = detail::str_cat("p=", p, " m=", m, " v=", v);
        EXPECT_NO_THROW(validate(gpipe_schedule(p, m, v))) << at;
        ++checked;
        if (m % p == 0) {
          EXPECT_NO_THROW(validate(interleaved_schedule(p, m, v))) << at;
          ++checked;
        }
        if (v == 1) {
          EXPECT_NO_THROW(validate(one_f_one_b_schedule(p, m))) << at;
          EXPECT_NO_THROW(validate(zero_bubble_h1_schedule(p, m))) << at;
          checked += 2;
        }
      }
  EXPECT_EQ(checked, 6 * 12 * 4 + (12 + 6 + 4 + 3 + 2 + 2) * 4 + 2 * 6 * 12);
}

TEST(PipeValidate, MissingSendIsRefused) {
  Schedule s = one_f_one_b_schedule(2, 2);
  erase(s, 0, Action::send_activation(0, 1, 1));
  // Rank 1: RecvAct1.0 F1.0 B1.0 SendGrad1.0 RecvAct1.1 ...
  EXPECT_WEFT_ERROR(validate(s),
                    "schedule 1f1b: rank 1 action 4 (RecvAct1.1<-s0@r0): no matching SendAct on rank 0 for the "
                    "activation of micro-batch 1 from stage 0");
}

TEST(PipeValidate, MissingReceiveIsRefused) {
  Schedule s = one_f_one_b_schedule(2, 2);
  erase(s, 1, Action::recv_activation(1, 1, 0));
  EXPECT_WEFT_ERROR(validate(s),
                    "schedule 1f1b: rank 1 action 4 (F1.1): its input from stage 0 on rank 0 was not received "
                    "before (no earlier RecvAct1.1)");
  Schedule g = gpipe_schedule(2, 2);
  erase(g, 0, Action::recv_grad(0, 0, 1));
  EXPECT_WEFT_ERROR(validate(g),
                    "rank 0 action 4 (B0.0): its output gradient from stage 1 on rank 1 was not "
                    "received before (no earlier RecvGrad0.0)");
}

TEST(PipeValidate, SendWithoutANeighbourIsRefused) {
  // (A send to a real neighbour can only lack its receive when that neighbour's compute lacks its input, which the
  // order check reports first; see MissingReceiveIsRefused.)
  Schedule s = gpipe_schedule(2, 1);
  s.rank_actions[1].push_back(Action::send_activation(1, 0, 0));  // stage 1 is the last stage
  EXPECT_WEFT_ERROR(validate(s), "rank 1 action 4 (SendAct1.0->s2@r0): stage 1 has no neighbour stage 2 to send to");
}

TEST(PipeValidate, BackwardBeforeForwardIsRefused) {
  Schedule s = one_f_one_b_schedule(2, 2);
  auto& r1 = s.rank_actions[1];  // RecvAct1.0 F1.0 B1.0 ...
  std::swap(r1[1], r1[2]);
  EXPECT_WEFT_ERROR(validate(s), "schedule 1f1b: rank 1 action 1 (B1.0): runs before F1.0");
}

TEST(PipeValidate, WeightBeforeBackwardAndWInAFullScheduleAreRefused) {
  Schedule z = zero_bubble_h1_schedule(2, 2);
  auto& r0 = z.rank_actions[0];
  // F0.0 SendAct0.0 F0.1 SendAct0.1 RecvGrad0.0 B0.0 W0.0 ...: move W0.0 before B0.0.
  ASSERT_EQ(to_string(r0[6]), "W0.0");
  std::swap(r0[5], r0[6]);
  EXPECT_WEFT_ERROR(validate(z), "schedule zb-h1: rank 0 action 5 (W0.0): runs before B0.0");
  Schedule g = gpipe_schedule(1, 1);
  g.rank_actions[0].push_back(Action::weight(0, 0));
  EXPECT_WEFT_ERROR(validate(g), "rank 0 action 2 (W0.0): W in a schedule whose B is the full backward");
  Schedule z2 = zero_bubble_h1_schedule(1, 2);
  erase(z2, 0, Action::weight(0, 1));
  EXPECT_WEFT_ERROR(validate(z2), "schedule zb-h1: stage 0 micro-batch 1 has no W on rank 0");
}

TEST(PipeValidate, MissingComputeAndRepeatsAreRefused) {
  Schedule s = gpipe_schedule(1, 3);
  erase(s, 0, Action::backward(0, 2));
  EXPECT_WEFT_ERROR(validate(s), "schedule gpipe: stage 0 micro-batch 2 has no B on rank 0");
  Schedule t = gpipe_schedule(1, 2);
  t.rank_actions[0].push_back(Action::backward(0, 1));
  EXPECT_WEFT_ERROR(validate(t), "rank 0 action 4 (B0.1): repeats action 3");
}

TEST(PipeValidate, LocalNeighbourMustRunFirst) {
  // Interleaved on one rank: stages 0 and 1 both local; F1.0 needs F0.0 earlier.
  Schedule s = gpipe_schedule(1, 1, 2);  // F0.0 F1.0 B1.0 B0.0
  ASSERT_EQ(to_string(s.rank_actions[0]), "F0.0 F1.0 B1.0 B0.0");
  std::swap(s.rank_actions[0][0], s.rank_actions[0][1]);
  EXPECT_WEFT_ERROR(validate(s), "rank 0 action 0 (F1.0): runs before F0.0, which produces its input on this rank");
  Schedule t = gpipe_schedule(1, 1, 2);
  std::swap(t.rank_actions[0][2], t.rank_actions[0][3]);
  EXPECT_WEFT_ERROR(validate(t),
                    "rank 0 action 2 (B0.0): runs before B1.0, which produces its output gradient on this rank");
}

TEST(PipeValidate, PlacementAndPeersAreChecked) {
  Schedule s = gpipe_schedule(2, 1);
  s.rank_actions[0].push_back(Action::forward(1, 0));
  EXPECT_WEFT_ERROR(validate(s), "rank 0 action 4 (F1.0): stage 1 lives on rank 1, not rank 0");
  Schedule t = gpipe_schedule(2, 1);
  t.rank_actions[0][1].peer_rank = 0;  // SendAct0.0 to itself
  EXPECT_WEFT_ERROR(validate(t), "rank 0 action 1 (SendAct0.0->s1@r0): peer rank 0 but stage 1 lives on rank 1");
  Schedule u = gpipe_schedule(2, 1);
  u.rank_actions[0][0].microbatch = 1;
  EXPECT_WEFT_ERROR(validate(u), "rank 0 action 0 (F0.1): micro-batch 1 out of range [0, 1)");
  Schedule w = gpipe_schedule(2, 1);
  w.stage_to_rank[1] = 2;
  EXPECT_WEFT_ERROR(validate(w), "schedule gpipe: stage 1 placed on rank 2, outside [0, 2)");
  Schedule x = gpipe_schedule(2, 1);
  x.rank_actions.pop_back();
  EXPECT_WEFT_ERROR(validate(x), "schedule gpipe: 1 action lists for 2 ranks");
}

TEST(PipeValidate, CyclicWaitIsReportedWithTheCycle) {
  // Rank 1 takes micro-batch 1 before micro-batch 0, rank 0 waits for micro-batch 0's gradient before it sends
  // micro-batch 1: each waits for the other.
  Schedule s = make_empty_schedule("cyclic", 2, 2, 1, false);
  s.rank_actions[0] = {Action::forward(0, 0), Action::backward(0, 0), Action::forward(0, 1), Action::backward(0, 1)};
  s.rank_actions[1] = {Action::forward(1, 1), Action::backward(1, 1), Action::forward(1, 0), Action::backward(1, 0)};
  insert_communication(s);
  ASSERT_EQ(to_string(s.rank_actions[1]),
            "RecvAct1.1<-s0@r0 F1.1 B1.1 SendGrad1.1->s0@r0 RecvAct1.0<-s0@r0 F1.0 B1.0 SendGrad1.0->s0@r0");
  EXPECT_WEFT_ERROR(validate(s),
                    "schedule cyclic: deadlock: rank 0 action 2 (RecvGrad0.0<-s1@r1) waits forever for rank 1 action "
                    "7 (SendGrad1.0->s0@r0), which rank 1 never reaches: it is blocked at rank 1 action 0 "
                    "(RecvAct1.1<-s0@r0); wait cycle: rank 0 -> rank 1 -> rank 0");
}

TEST(PipeValidate, MixingWarmupsDeadlocks) {
  // Rank 0 without 1F1B's warm-up forward (F B F B) against a rank 1 that runs every forward first.
  Schedule s = make_empty_schedule("mixed", 2, 2, 1, false);
  s.rank_actions[0] = {Action::forward(0, 0), Action::backward(0, 0), Action::forward(0, 1), Action::backward(0, 1)};
  s.rank_actions[1] = {Action::forward(1, 0), Action::forward(1, 1), Action::backward(1, 0), Action::backward(1, 1)};
  insert_communication(s);
  EXPECT_WEFT_ERROR(validate(s), "deadlock: rank 0 action 2 (RecvGrad0.0<-s1@r1) waits forever for rank 1 action 5");
  EXPECT_WEFT_ERROR(validate(s), "wait cycle: rank 0 -> rank 1 -> rank 0");
}

TEST(PipeValidate, ThreeRankCycleNamesEveryRank) {
  // Rank 2 takes micro-batch 1 first while rank 1 runs micro-batch 0's backward before micro-batch 1's forward:
  // ranks 1 and 2 wait for each other, and rank 0 (off the cycle) waits for rank 1.
  Schedule s = make_empty_schedule("three", 3, 2, 1, false);
  s.rank_actions[0] = {Action::forward(0, 0), Action::forward(0, 1), Action::backward(0, 0), Action::backward(0, 1)};
  s.rank_actions[1] = {Action::forward(1, 0), Action::backward(1, 0), Action::forward(1, 1), Action::backward(1, 1)};
  s.rank_actions[2] = {Action::forward(2, 1), Action::backward(2, 1), Action::forward(2, 0), Action::backward(2, 0)};
  insert_communication(s);
  EXPECT_WEFT_ERROR(validate(s),
                    "schedule three: deadlock: rank 0 action 4 (RecvGrad0.0<-s1@r1) waits forever for rank 1 action "
                    "5 (SendGrad1.0->s0@r0), which rank 1 never reaches: it is blocked at rank 1 action 3 "
                    "(RecvGrad1.0<-s2@r2); wait cycle: rank 1 -> rank 2 -> rank 1");
}

}  // namespace
}  // namespace weft::parallel::pipe
