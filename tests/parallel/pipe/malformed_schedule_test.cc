// Damaged schedule text against everything that reads it: parse_schedule, then
// (where it parses) validate, then (where it validates) simulate and both
// charts. For mutants (tests/mutate.h) of built-in schedules' text, with tied
// groups and data-parallel reductions, each step must return or throw
// weft::Error; a schedule that validates must simulate every action it has.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "parallel/pipe/chart.h"
#include "parallel/pipe/generators.h"
#include "parallel/pipe/parse.h"
#include "parallel/pipe/simulate.h"
#include "parallel/pipe/validate.h"
#include "tests/mutate.h"
#include "tests/parallel/pipe/schedule_edit.h"

namespace weft::parallel::pipe {
namespace {

using testing::MutantCounts;
using testing::survives_mutants;

void parse_validate_simulate_chart(const std::string& text) {
  const Schedule s = parse_schedule(text);
  validate(s);
  const CostModel costs = CostModel::uniform(s.num_stages(), 1, 2, s.split_backward ? 1 : 0, 0.25);
  const Simulation sim = simulate(s, costs);
  size_t actions = 0, timed = 0;
  for (const auto& r : s.rank_actions) actions += r.size();
  for (const auto& r : sim.ranks) timed += r.actions.size();
  if (timed != actions) WEFT_ERROR("simulated ", timed, " of ", actions, " actions of a valid schedule");
  text_chart(s, sim);
  svg_chart(s, sim);
}

TEST(MalformedSchedule, MutatedTextOfBuiltInSchedules) {
  std::vector<Schedule> valid = {gpipe_schedule(2, 2), one_f_one_b_schedule(3, 4), interleaved_schedule(2, 4, 2),
                                 zero_bubble_h1_schedule(2, 3), zero_bubble_v_schedule(2, 4)};
  add_reduce_grads(valid[1]);
  add_tied_grads(valid[2], {{0, 3}});
  add_reduce_grads(valid[2]);
  add_tied_grads(valid[4], {{0, 3}});
  uint64_t seed = 1;
  for (const Schedule& s : valid) {
    const std::string text = to_string(s);
    SCOPED_TRACE(text.substr(0, text.find('\n')));
    ASSERT_NO_THROW(parse_validate_simulate_chart(text));
    MutantCounts counts;
    EXPECT_TRUE(survives_mutants(text, 1500, seed, parse_validate_simulate_chart, &counts));
    EXPECT_GT(counts.rejected, 1000);
    seed += 1500;
  }
}

// Schedules edited action by action (schedule_edit.h): mostly still
// parseable, mostly refused by the validator; what it accepts must simulate
// and chart.
TEST(MalformedSchedule, ActionsDeletedMovedAndExchanged) {
  std::vector<Schedule> valid = {gpipe_schedule(2, 3), one_f_one_b_schedule(3, 4), interleaved_schedule(2, 4, 2),
                                 zero_bubble_h1_schedule(3, 3), zero_bubble_v_schedule(2, 4)};
  add_reduce_grads(valid[1]);
  add_tied_grads(valid[2], {{0, 3}});
  add_reduce_grads(valid[2]);
  int parsed = 0, accepted = 0, refused = 0;
  for (const Schedule& s : valid) {
    for (uint64_t seed = 1; seed <= 1000; ++seed) {
      const std::string m = to_string(shuffle_actions(s, seed));
      Schedule p;
      try {
        p = parse_schedule(m);
      } catch (const Error&) {
        continue;  // e.g. a rank line left with no action
      }
      ++parsed;
      try {
        validate(p);
      } catch (const Error& e) {
        ++refused;
        EXPECT_EQ(std::string(e.what()).find("internal assert"), std::string::npos) << e.what();
        continue;
      } catch (const std::exception& e) {
        ADD_FAILURE() << "seed " << seed << ": validate threw a non-weft exception: " << e.what() << "\n" << m;
        continue;
      }
      ++accepted;
      // what the validator accepts runs: the simulator times every action, the charts draw it
      try {
        parse_validate_simulate_chart(m);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "seed " << seed << ": a schedule the validator accepted failed: " << e.what() << "\n" << m;
      }
    }
  }
  // the edits mostly keep the text parseable, and the validator refuses most of what they make
  EXPECT_GT(parsed, 3000);
  EXPECT_GT(refused, parsed / 2);
}

}  // namespace
}  // namespace weft::parallel::pipe
