// Text schedules (parse.h): parse_schedule inverts to_string for every
// generator over a grid of shapes, with tied groups and data-parallel
// reductions; placements in the header (zbv's V, any list); hand-written text
// (comments, spacing, no header); errors naming the line and token; a parsed
// schedule run through Pipe (ranks as threads) trains as the built-in one
// with the same actions (zbv's too), and a broken one is refused.
#include "parallel/pipe/parse.h"

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/nn_ops.h"
#include "core/ops.h"
#include "core/rng.h"
#include "nn/nn.h"
#include "parallel/comm/inproc/testing.h"
#include "parallel/pipe/generators.h"
#include "parallel/pipe/pipe.h"
#include "parallel/pipe/validate.h"
#include "tests/parallel/pipe/schedule_edit.h"
#include "tests/testing.h"

namespace weft::parallel::pipe {
namespace {

void expect_same(const Schedule& got, const Schedule& want) {
  EXPECT_EQ(got.name, want.name);
  EXPECT_EQ(got.num_ranks, want.num_ranks);
  EXPECT_EQ(got.num_microbatches, want.num_microbatches);
  EXPECT_EQ(got.virtual_stages, want.virtual_stages);
  EXPECT_EQ(got.split_backward, want.split_backward);
  EXPECT_EQ(got.stage_to_rank, want.stage_to_rank);
  EXPECT_EQ(got.tied_stages, want.tied_stages);
  EXPECT_EQ(got.reduce_grads, want.reduce_grads);
  ASSERT_EQ(got.rank_actions.size(), want.rank_actions.size());
  for (size_t r = 0; r < want.rank_actions.size(); ++r)
    EXPECT_EQ(to_string(got.rank_actions[r]), to_string(want.rank_actions[r])) << "rank " << r;
  EXPECT_TRUE(got.rank_actions == want.rank_actions);  // every field of every action
}

// The text less its header line.
std::string without_header(const std::string& text) { return text.substr(text.find('\n') + 1); }

TEST(ParseSchedule, InvertsToStringForEveryGeneratorTiedAndReduced) {
  std::map<ScheduleKind, int> checked;
  for (ScheduleKind kind :
       {ScheduleKind::kGPipe, ScheduleKind::k1F1B, ScheduleKind::kInterleaved1F1B, ScheduleKind::kZeroBubbleH1,
        ScheduleKind::kZeroBubbleV, ScheduleKind::kInterleavedZeroBubble})
    for (int p : {1, 2, 3, 4})
      for (int m : {1, 2, 3, 4, 8})
        for (int v : {1, 2, 3}) {
          Schedule base;
          try {
            base = make_schedule(kind, p, m, v);
          } catch (const Error&) {
            continue;  // a shape this generator does not make
          }
          const int S = base.num_stages();
          // Groups across ranks, and with v > 1 one with two stages on rank 0.
          std::vector<std::vector<int>> groups = {{0, S - 1}, {S / 2}};
          if (v > 1) groups.push_back({0, p, S - 1});
          Schedule tied = base, reduced = base, tied_reduced;
          add_tied_grads(tied, groups);
          add_reduce_grads(reduced);
          tied_reduced = tied;
          add_reduce_grads(tied_reduced);
          for (const Schedule* s : {&base, &tied, &reduced, &tied_reduced}) {
            const std::string text = to_string(*s);
            SCOPED_TRACE(text.substr(0, text.find('\n')));
            const Schedule back = parse_schedule(text);
            expect_same(back, *s);
            EXPECT_EQ(to_string(back), text);
            ++checked[kind];
          }
          // Without the header every value is derived from the rank lines
          // (the placement is then the looped one).
          if (base.stage_to_rank != looped_placement(p, v)) continue;
          for (const Schedule* s : {&base, &reduced}) {
            SCOPED_TRACE("no header: " + to_string(*s));
            Schedule want = *s;
            want.name = "custom";
            expect_same(parse_schedule(without_header(to_string(*s))), want);
          }
        }
  EXPECT_EQ(checked.size(), 6u);
  for (auto [kind, n] : checked) EXPECT_GE(n, 4 * 3) << schedule_name(kind);
}

// docs/pipeline.md, "Writing a schedule as text", shows this.
constexpr char kGPipe2x2[] =
    "gpipe: ranks=2 microbatches=2 virtual=1 stages=2 backward=full\n"
    "rank 0: F0.0 SendAct0.0->s1@r1 F0.1 SendAct0.1->s1@r1 RecvGrad0.0<-s1@r1 B0.0 RecvGrad0.1<-s1@r1 B0.1\n"
    "rank 1: RecvAct1.0<-s0@r0 F1.0 RecvAct1.1<-s0@r0 F1.1 B1.0 SendGrad1.0->s0@r0 B1.1 SendGrad1.1->s0@r0\n";

TEST(ParseSchedule, TheDocsExampleIsGPipesText) {
  EXPECT_EQ(to_string(gpipe_schedule(2, 2)), kGPipe2x2);
  expect_same(parse_schedule(kGPipe2x2), gpipe_schedule(2, 2));
}

TEST(ParseSchedule, HandWrittenTextWithCommentsAndSpacing) {
  const std::string text =
      "# GPipe on 2 ranks, 2 micro-batches, written by hand.\n"
      "\n"
      "   mine :  microbatches=2   # the other values come from the rank lines\n"
      "rank 0:  F0.0 SendAct0.0->s1@r1   F0.1 SendAct0.1->s1@r1\tRecvGrad0.0<-s1@r1 B0.0 RecvGrad0.1<-s1@r1 B0.1\n"
      "  # rank 1 receives what rank 0 sends\n"
      "\trank 1 :RecvAct1.0<-s0@r0 F1.0 RecvAct1.1<-s0@r0 F1.1 B1.0 SendGrad1.0->s0@r0 B1.1 SendGrad1.1->s0@r0\r\n"
      "\n";
  Schedule want = gpipe_schedule(2, 2);
  want.name = "mine";
  expect_same(parse_schedule(text), want);
  // A header without a name; actions of every kind.
  const Schedule s = parse_schedule(
      "ranks=1 virtual=2 backward=split reduce=dp tied=0+1\n"
      "rank 0: F0.0 F1.0 B1.0 W1.0 B0.0 W0.0 Tied0@s0 Reduce0 Reduce1 ReduceTied0@s0");
  EXPECT_EQ(s.name, "custom");
  EXPECT_EQ(s.num_stages(), 2);
  EXPECT_EQ(s.num_microbatches, 1);
  EXPECT_TRUE(s.split_backward && s.reduce_grads);
  EXPECT_EQ(s.tied_stages, (std::vector<std::vector<int>>{{0, 1}}));
  EXPECT_EQ(s.rank_actions[0][6], Action::tied_grad(0, 0));
  EXPECT_EQ(s.rank_actions[0][8], Action::reduce_grad(1));
  EXPECT_EQ(s.rank_actions[0][9], Action::reduce_tied_grad(0, 0));
  validate(s);
  // Without tied= the groups come from the Tied actions.
  EXPECT_EQ(parse_schedule("rank 0: F0.0 B0.0 Tied1@s0\nrank 1: F1.0 B1.0 Tied0@s1 Tied1@s1").tied_stages,
            (std::vector<std::vector<int>>{{1}, {0, 1}}));
}

// A placement other than the looped one travels in the header.
TEST(ParseSchedule, PlacementInTheHeader) {
  const std::string zbv = to_string(zero_bubble_v_schedule(2, 4));
  EXPECT_EQ(zbv.substr(0, zbv.find('\n')), "zbv: ranks=2 microbatches=4 virtual=2 stages=4 backward=split placement=v");
  // Any other placement is written stage by stage.
  Schedule odd = make_empty_schedule("odd", 2, 1, 2, false);
  odd.stage_to_rank = {1, 0, 0, 1};
  odd.rank_actions[0] = {Action::forward(1, 0), Action::forward(2, 0), Action::backward(2, 0), Action::backward(1, 0)};
  odd.rank_actions[1] = {Action::forward(0, 0), Action::forward(3, 0), Action::backward(3, 0), Action::backward(0, 0)};
  insert_communication(odd);
  validate(odd);
  const std::string text = to_string(odd);
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "odd: ranks=2 microbatches=1 virtual=2 stages=4 backward=full placement=1,0,0,1");
  expect_same(parse_schedule(text), odd);
  // By hand: a list naming the V, and the looped placement by name.
  EXPECT_EQ(parse_schedule("placement=0,1,1,0\nrank 0: F0.0\nrank 1: F1.0").stage_to_rank, v_placement(2));
  EXPECT_EQ(parse_schedule("placement=looped virtual=2\nrank 0: F0.0\nrank 1: F1.0").stage_to_rank,
            looped_placement(2, 2));
  EXPECT_EQ(parse_schedule("placement=v\nrank 0: F0.0\nrank 1: F1.0").num_stages(), 4);
  EXPECT_WEFT_ERROR(parse_schedule("g: placement=0,2\nrank 0: F0.0\nrank 1: F1.0"),
                    "line 1, token 2 'placement=0,2': stage 1 placed on rank 2, outside [0, 2)");
  EXPECT_WEFT_ERROR(parse_schedule("g: placement=w\nrank 0: F0.0"),
                    "token 2 'placement=w': expected placement=looped, placement=v or each stage's rank");
  EXPECT_WEFT_ERROR(parse_schedule("g: placement=v virtual=3\nrank 0: F0.0\nrank 1: F1.0"),
                    "token 3 'virtual=3': the placement places 4 stages, not ranks * virtual = 2 * 3");
  EXPECT_WEFT_ERROR(parse_schedule("g: placement=0,1,0\nrank 0: F0.0\nrank 1: F1.0"),
                    "the placement places 3 stages, which do not divide over 2 ranks");
  EXPECT_WEFT_ERROR(parse_schedule("g: placement=v stages=6\nrank 0: F0.0\nrank 1: F1.0"),
                    "token 3 'stages=6': the placement places 4 stages but stages=6");
}

// Every action kind to_string(ActionKind) names has a row in parse.cc's table.
TEST(ParseSchedule, KnowsEveryActionKind) {
  int kinds = 0;
  for (int k = 0; k < 256; ++k) {
    const std::string name = to_string(static_cast<ActionKind>(k));
    if (name == "?") continue;
    ++kinds;
    try {
      parse_schedule("rank 0: " + name);
      ADD_FAILURE() << name << " parsed without its numbers";
    } catch (const Error& e) {
      EXPECT_EQ(e.message().find("unknown action kind"), std::string::npos) << e.message();
      EXPECT_NE(e.message().find("expected " + name), std::string::npos) << e.message();
    }
  }
  EXPECT_GE(kinds, 8);
}

TEST(ParseSchedule, ErrorsNameTheLineAndToken) {
  EXPECT_WEFT_ERROR(parse_schedule("# one\n\nrank 0: F0.0 Fx.1 B0.0"),
                    "parse_schedule: line 3, token 4 'Fx.1': unknown action kind 'Fx' (known: F, B, W, SendAct, "
                    "RecvAct, SendGrad, RecvGrad, Tied");
  EXPECT_WEFT_ERROR(parse_schedule("rank 0: F0.0 B0.x"), "line 1, token 4 'B0.x': expected B<stage>.<micro-batch>");
  EXPECT_WEFT_ERROR(parse_schedule("rank 0: F0.0 B0.0\nrank 1: RecvAct1.0<-0@r0"),
                    "line 2, token 3 'RecvAct1.0<-0@r0': expected RecvAct<stage>.<micro-batch><-s<peer stage>@r<peer "
                    "rank>");
  EXPECT_WEFT_ERROR(parse_schedule("rank 0: F0.99999999999"), "line 1, token 3 'F0.99999999999': number out of range");
  EXPECT_WEFT_ERROR(parse_schedule("rank 0: F0.123456789012345678901234567890"), "number out of range");
  EXPECT_WEFT_ERROR(parse_schedule("g: virtual=2000000000\nrank 0: F0.0\nrank 1: F1.0"),
                    "parse_schedule: 4000000000 stages, more than 1048576");
  EXPECT_WEFT_ERROR(parse_schedule("rank 0: F-1.0"), "token 3 'F-1.0': expected F<stage>.<micro-batch>");
  EXPECT_WEFT_ERROR(parse_schedule("rank x: F0.0"), "line 1, token 2 'x': expected a non-negative whole number");
  EXPECT_WEFT_ERROR(
      parse_schedule("g: ranks=3 microbatches=1\nrank 0: F0.0 B0.0\nrank 1: F1.0 B1.0"),
      "parse_schedule: line 1, token 2 'ranks=3': the header says 3 ranks but the text has 2 rank line(s)");
  EXPECT_WEFT_ERROR(parse_schedule("rank 0: F0.0 B0.0\n# next\nrank 2: F1.0 B1.0"),
                    "line 3, token 2 '2': rank line out of order: rank 1 comes next");
  EXPECT_WEFT_ERROR(parse_schedule("rank 0: F0.0\nrank 0: B0.0"),
                    "line 2, token 2 '0': rank line out of order: rank 0 was given before; rank 1 comes next");
  EXPECT_WEFT_ERROR(parse_schedule("rank 0 F0.0"), "line 1: a rank line is 'rank <r>: <actions>' (no ':')");
  EXPECT_WEFT_ERROR(parse_schedule("rank 0 1: F0.0"), "line 1, token 3 '1': a rank line is 'rank <r>: <actions>'");
  EXPECT_WEFT_ERROR(parse_schedule("rank 0: F0.0 B0.0\ng: ranks=1"),
                    "line 2: the header '<name>: key=value ...' must come before the rank lines");
  EXPECT_WEFT_ERROR(parse_schedule("g: ranks=1\ng: ranks=1\nrank 0: F0.0 B0.0"),
                    "line 2: a second header (the first is on line 1)");
  EXPECT_WEFT_ERROR(parse_schedule("hello world\nrank 0: F0.0"), "line 1: expected the header");
  EXPECT_WEFT_ERROR(parse_schedule("g: ranks=1 speed=3\nrank 0: F0.0"),
                    "line 1, token 3 'speed=3': unknown header key 'speed' (known: ranks, microbatches, virtual");
  EXPECT_WEFT_ERROR(parse_schedule("g: ranks=1 ranks=1\nrank 0: F0.0"),
                    "line 1, token 3 'ranks=1': 'ranks' given twice (first as 'ranks=1')");
  EXPECT_WEFT_ERROR(parse_schedule("g: microbatches=0\nrank 0: F0.0"),
                    "token 2 'microbatches=0': microbatches must be a positive integer");
  EXPECT_WEFT_ERROR(parse_schedule("g: backward=half\nrank 0: F0.0"), "backward is 'full' or 'split'");
  EXPECT_WEFT_ERROR(parse_schedule("g: tied=0+,1\nrank 0: F0.0"), "token 2 'tied=0+,1': expected tied=0+3,1+2");
  EXPECT_WEFT_ERROR(parse_schedule("g: virtual=2 stages=3\nrank 0: F0.0"),
                    "token 3 'stages=3': stages must be ranks * virtual = 1 * 2");
  EXPECT_WEFT_ERROR(parse_schedule("# nothing here\n\n"), "parse_schedule: no rank lines");
  EXPECT_WEFT_ERROR(parse_schedule("rank 0: F0.0 F2.0\nrank 1: F1.0"),
                    "the actions name stages 0 to 2, 3 stages that do not divide over 2 ranks");
  EXPECT_WEFT_ERROR(parse_schedule("rank 0: Reduce0"), "give microbatches= in the header");
  EXPECT_WEFT_ERROR(parse_schedule("rank 0: F0.0 Tied1@s0"), "Tied actions name group 1 but not group 0");
}

// --- Pipe runs a parsed schedule ---------------------------------------------

constexpr int64_t kIn = 6, kHidden = 10, kOut = 3;

// An 8-layer MLP (Linear, Tanh, ...), Linear i seeded by i: every build is the same.
std::shared_ptr<nn::Sequential> make_mlp() {
  auto m = std::make_shared<nn::Sequential>();
  for (int i = 0; i < 8; ++i) {
    if (i % 2 == 1) {
      m->push_back(std::make_shared<nn::Tanh>());
      continue;
    }
    manual_seed(1000 + i);
    m->push_back(std::make_shared<nn::Linear>(i == 0 ? kIn : kHidden, i == 6 ? kOut : kHidden));
  }
  return m;
}

Tensor mse(const Tensor& out, const Tensor& target) { return mse_loss(out, target); }

struct StepResult {
  double loss = 0;
  std::map<std::string, Tensor> grads;
  std::string schedule_name;
};

// One step of a fresh model on 2 ranks with `options`.
StepResult pipe_step(const PipeOptions& options, const std::vector<int>& balance = {4, 4}) {
  manual_seed(5);
  const Tensor x = randn({8, kIn}), y = randn({8, kOut});
  auto model = make_mlp();
  StepResult out;
  std::mutex m;
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> g) {
    Pipe pipe(model, balance, g, options);
    const double loss = pipe.step(x, y, mse);
    std::lock_guard<std::mutex> l(m);
    out.loss = loss;
    out.schedule_name = pipe.schedule().name;
    for (auto& [n, t] : pipe.named_parameters()) out.grads[n] = t.grad().clone();
  });
  return out;
}

void expect_same_step(const StepResult& got, const StepResult& want) {
  EXPECT_EQ(got.loss, want.loss);
  ASSERT_EQ(got.grads.size(), want.grads.size());
  for (auto& [n, t] : want.grads) {
    ASSERT_TRUE(got.grads.count(n)) << n;
    EXPECT_TRUE(testing::tensors_near(got.grads.at(n), t, 0)) << n;
  }
}

// 1F1B on 2 ranks, 4 micro-batches, by hand (one line per rank: adjacent
// literals without "\n" continue a line).
std::string hand_1f1b() {
  return "# 1F1B by hand: rank 0 runs one forward ahead, then a forward and a backward at a time.\n"
         "hand: ranks=2 microbatches=4\n"
         "rank 0: F0.0 SendAct0.0->s1@r1"  // warm-up
         "  F0.1 SendAct0.1->s1@r1 RecvGrad0.0<-s1@r1 B0.0  F0.2 SendAct0.2->s1@r1 RecvGrad0.1<-s1@r1 B0.1"
         "  F0.3 SendAct0.3->s1@r1 RecvGrad0.2<-s1@r1 B0.2"
         "  RecvGrad0.3<-s1@r1 B0.3   # drain\n"
         "rank 1: RecvAct1.0<-s0@r0 F1.0 B1.0 SendGrad1.0->s0@r0  RecvAct1.1<-s0@r0 F1.1 B1.1 SendGrad1.1->s0@r0"
         "  RecvAct1.2<-s0@r0 F1.2 B1.2 SendGrad1.2->s0@r0  RecvAct1.3<-s0@r0 F1.3 B1.3 SendGrad1.3->s0@r0\n";
}

TEST(ParseSchedulePipe, HandWritten1F1BTrainsAsTheBuiltIn) {
  const Schedule hand = parse_schedule(hand_1f1b());
  ASSERT_EQ(hand.rank_actions, one_f_one_b_schedule(2, 4).rank_actions);
  PipeOptions builtin;
  builtin.chunks = 4;
  builtin.schedule = ScheduleKind::k1F1B;
  PipeOptions user = builtin;
  user.schedule = ScheduleKind::kGPipe;  // not used: the user schedule replaces it
  user.user_schedule = hand;
  const StepResult want = pipe_step(builtin), got = pipe_step(user);
  EXPECT_EQ(want.schedule_name, "1f1b");
  EXPECT_EQ(got.schedule_name, "hand");
  expect_same_step(got, want);
}

// Whatever the validator accepts trains as the schedule it was edited from:
// of the action-level edits of built-in schedules (shuffle_actions in
// schedule_edit.h), each one validate() accepts runs through Pipe to the end
// and gives the built-in's loss and gradients (to rounding: an edit may change
// the order in which micro-batches' gradients are summed).
TEST(ParseSchedulePipe, EveryEditTheValidatorAcceptsTrainsAsTheOriginal) {
  for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::k1F1B, ScheduleKind::kZeroBubbleH1}) {
    SCOPED_TRACE(schedule_name(kind));
    PipeOptions builtin;
    builtin.chunks = 4;
    builtin.schedule = kind;
    const StepResult want = pipe_step(builtin);
    const Schedule base = make_schedule(kind, 2, 4);
    int accepted = 0;
    for (uint64_t seed = 1; seed <= 300; ++seed) {
      Schedule edited = shuffle_actions(base, seed);
      edited.name = "edited";
      try {
        validate(edited);
      } catch (const Error&) {
        continue;
      }
      ++accepted;
      SCOPED_TRACE(to_string(edited));
      PipeOptions user = builtin;
      user.user_schedule = parse_schedule(to_string(edited));
      const StepResult got = pipe_step(user);
      EXPECT_NEAR(got.loss, want.loss, 1e-6 * std::abs(want.loss));
      ASSERT_EQ(got.grads.size(), want.grads.size());
      for (auto& [n, t] : want.grads) EXPECT_TRUE(testing::tensors_near(got.grads.at(n), t, 1e-5)) << n;
    }
    EXPECT_GE(accepted, 3);
  }
}

// zbv's text, its V placement included, trains as the built-in zbv.
TEST(ParseSchedulePipe, ZeroBubbleVTextTrainsAsTheBuiltIn) {
  PipeOptions builtin;
  builtin.chunks = 4;
  builtin.virtual_stages = 2;
  builtin.schedule = ScheduleKind::kZeroBubbleV;
  PipeOptions user = builtin;
  user.schedule = ScheduleKind::kGPipe;  // not used
  user.user_schedule = parse_schedule(to_string(zero_bubble_v_schedule(2, 4)));
  const StepResult want = pipe_step(builtin, {2, 2, 2, 2}), got = pipe_step(user, {2, 2, 2, 2});
  EXPECT_EQ(got.schedule_name, "zbv");
  expect_same_step(got, want);
}

TEST(ParseSchedulePipe, AScheduleTheValidatorRefusesIsRefused) {
  std::string text = hand_1f1b();
  const std::string recv = "RecvAct1.1<-s0@r0 ";
  text.erase(text.find(recv), recv.size());
  PipeOptions o;
  o.chunks = 4;
  o.user_schedule = parse_schedule(text);
  auto model = make_mlp();
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> g) {
    EXPECT_WEFT_ERROR(Pipe(model, {4, 4}, g, o),
                      "schedule hand: rank 1 action 4 (F1.1): its input from stage 0 on rank 0 was not received "
                      "before (no earlier RecvAct1.1)");
  });
  o.user_schedule = parse_schedule(hand_1f1b());
  o.chunks = 2;
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> g) {
    EXPECT_WEFT_ERROR(Pipe(model, {4, 4}, g, o), "Pipe: the user schedule hand has 4 micro-batch(es) but chunks is 2");
  });
  o.chunks = 4;
  run_ranks(1, [&](std::shared_ptr<ProcessGroup> g) {
    EXPECT_WEFT_ERROR(Pipe(model, {8}, g, o), "Pipe: the user schedule hand is for 2 rank(s) but the group has 1");
  });
}

// The text of Pipe::schedule() (its Tied actions included) with `options`.
std::string pipe_schedule_text(const PipeOptions& options) {
  std::string text;
  auto model = make_mlp();
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> g) {
    Pipe pipe(model, {4, 4}, g, options);
    if (g->rank() == 0) text = to_string(pipe.schedule());
  });
  return text;
}

// A tied schedule's text runs again as a user schedule with the same
// options.tied; tied groups other than options.tied's, or no options.tied,
// are refused.
TEST(ParseSchedulePipe, TiedScheduleTextRunsAgain) {
  PipeOptions o;
  o.chunks = 4;
  o.schedule = ScheduleKind::kZeroBubbleH1;
  o.tied = {{"2.weight", "4.weight"}};  // both 10 x 10, on stages 0 and 1
  const std::string text = pipe_schedule_text(o);
  ASSERT_NE(text.find(" tied=0+1\n"), std::string::npos) << text;
  PipeOptions user = o;
  user.user_schedule = parse_schedule(text);
  expect_same_step(pipe_step(user), pipe_step(o));

  auto model = make_mlp();
  o.schedule = ScheduleKind::k1F1B;
  std::string extra = pipe_schedule_text(o);  // a second group, on stage 1 alone
  const std::string tied = " tied=0+1\n", last = "Tied0@s1\n";
  ASSERT_NE(extra.find(tied), std::string::npos) << extra;
  extra.replace(extra.find(tied), tied.size(), " tied=0+1,1\n");
  ASSERT_EQ(extra.rfind(last), extra.size() - last.size()) << extra;
  extra.replace(extra.rfind(last), last.size(), "Tied0@s1 Tied1@s1\n");
  user = o;
  user.user_schedule = parse_schedule(extra);
  validate(*user.user_schedule);  // valid, but options.tied gives one group
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> g) {
    EXPECT_WEFT_ERROR(
        Pipe(model, {4, 4}, g, user),
        "Pipe: the user schedule 1f1b's tied groups or Tied actions differ from those options.tied gives");
  });
  user.tied.clear();
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> g) {
    EXPECT_WEFT_ERROR(Pipe(model, {4, 4}, g, user),
                      "Pipe: the user schedule 1f1b has 2 tied group(s) but options.tied names no tied parameters");
  });
}

}  // namespace
}  // namespace weft::parallel::pipe
