// The collective toolkit (parallel/comm/collectives.h) over the in-process
// group: allgather_bytes with empty strings, a different length on every rank
// and binary bytes ('\0' included), on the world and on a reversed sub-group;
// combine_errors' text; agree when every rank succeeds and when one or several
// fail (every rank throws the same text); missing_ranks_text's shapes; and
// plan_new_group (members, name, id, this rank's place, argument errors).
#include "parallel/comm/collectives.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "parallel/comm/desync.h"
#include "parallel/comm/inproc/testing.h"
#include "tests/testing.h"

namespace weft::parallel {
namespace {

using GroupPtr = std::shared_ptr<ProcessGroup>;

// The message of the weft::Error `f` throws, or "" if it throws none.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}

// Rank r's string in the bytes tests: r bytes with a '\0' in the middle and
// bytes above 127 (rank 0: empty).
std::string bytes_of(int r) {
  std::string s;
  for (int i = 0; i < r; ++i) s.push_back(i == r / 2 ? '\0' : static_cast<char>(0x80 + 16 * r + i));
  return s;
}

TEST(AllgatherBytes, EveryRankGetsEveryRanksBytesInOrder) {
  for (int n : {1, 2, 4}) {
    std::mutex m;
    std::vector<std::vector<std::string>> got(n);
    run_ranks(n, [&](GroupPtr g) {
      auto all = allgather_bytes(*g, bytes_of(g->rank()));
      std::lock_guard<std::mutex> l(m);
      got[g->rank()] = std::move(all);
    });
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(got[r].size(), size_t(n)) << "rank " << r << " of " << n;
      for (int k = 0; k < n; ++k) {
        EXPECT_EQ(got[r][k], bytes_of(k)) << "rank " << r << " of " << n << ", entry " << k;
        EXPECT_EQ(got[r][k].size(), size_t(k));  // the '\0' does not cut the string short
      }
    }
  }
}

TEST(AllgatherBytes, EmptyStringsEverywhere) {
  run_ranks(3, [](GroupPtr g) {
    EXPECT_EQ(allgather_bytes(*g, ""), (std::vector<std::string>{"", "", ""}));
    // and once more, so the two collectives of each call stay in step
    EXPECT_EQ(allgather_bytes(*g, g->rank() == 1 ? std::string(1, '\0') : ""),
              (std::vector<std::string>{"", std::string(1, '\0'), ""}));
  });
}

TEST(AllgatherBytes, OneLongStringAmongShortOnes) {
  const std::string big(100000, 'x');
  run_ranks(3, [&](GroupPtr g) {
    auto all = allgather_bytes(*g, g->rank() == 2 ? big : std::to_string(g->rank()));
    ASSERT_EQ(all.size(), 3u);
    EXPECT_EQ(all[0], "0");
    EXPECT_EQ(all[1], "1");
    EXPECT_EQ(all[2], big);
  });
}

TEST(AllgatherBytes, OnASubGroupInGroupRankOrder) {
  run_ranks(4, [](GroupPtr g) {
    auto sub = g->new_group({3, 1});
    if (sub == nullptr) return;
    auto all = allgather_bytes(*sub, "from " + std::to_string(g->rank()));
    EXPECT_EQ(all, (std::vector<std::string>{"from 3", "from 1"}));
  });
}

TEST(CombineErrors, GroupsRanksWithTheSameMessage) {
  EXPECT_EQ(combine_errors({}), "");
  EXPECT_EQ(combine_errors({"", "", ""}), "");
  EXPECT_EQ(combine_errors({"", "disk full"}), "rank 1: disk full");
  EXPECT_EQ(combine_errors({"no space", "disk full", "no space", ""}), "ranks 0, 2: no space; rank 1: disk full");
  EXPECT_EQ(combine_errors({"", "b", "a", "b"}), "ranks 1, 3: b; rank 2: a");
}

TEST(Agree, ReturnsWhenEveryRankSucceeded) {
  run_ranks(3, [](GroupPtr g) { agree(*g, "saving", ""); });
}

TEST(Agree, OneRankFailsEveryRankThrowsItsMessage) {
  std::vector<std::string> errs(4);
  run_ranks(4, [&](GroupPtr g) {
    const std::string mine = g->rank() == 2 ? "cannot write 'x': disk full" : "";
    errs[g->rank()] = error_of([&] { agree(*g, "checkpoint save to 'ck'", mine); });
  });
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(errs[r], "checkpoint save to 'ck' failed: rank 2: cannot write 'x': disk full") << "rank " << r;
}

TEST(Agree, SeveralRanksFailEveryRankThrowsTheCombinedText) {
  std::vector<std::string> errs(3);
  run_ranks(3, [&](GroupPtr g) {
    const std::string mine = g->rank() == 1 ? "b" : "a";
    errs[g->rank()] = error_of([&] { agree(*g, "loading", mine); });
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(errs[r], "loading failed: ranks 0, 2: a; rank 1: b") << "rank " << r;
}

TEST(MissingRanksText, GlobalRanksAndGroupRanksWhereTheyDiffer) {
  const std::vector<int> world{0, 1, 2, 3};
  EXPECT_EQ(missing_ranks_text({2}, world), "missing ranks: [2]");
  EXPECT_EQ(missing_ranks_text({1, 3}, world), "missing ranks: [1, 3]");
  EXPECT_EQ(missing_ranks_text({}, world), "missing ranks: []");
  const std::vector<int> sub{3, 1, 0};  // group[3, 1, 0]
  EXPECT_EQ(missing_ranks_text({2}, sub), "missing ranks: [0] (group ranks [2])");
  EXPECT_EQ(missing_ranks_text({0, 1}, sub), "missing ranks: [3, 1] (group ranks [0, 1])");
  EXPECT_EQ(missing_ranks_text({1}, sub), "missing ranks: [1]");  // group rank 1 is global rank 1
  const std::vector<int> odd{1, 3};
  EXPECT_EQ(missing_ranks_text({1}, odd), "missing ranks: [3] (group ranks [1])");
}

TEST(MissingRanksText, InTheInProcessGroupsErrors) {
  std::vector<std::string> errs(3);
  run_ranks(3, [&](GroupPtr g) {
    if (g->rank() == 0) return;  // never issues the barrier
    g->set_timeout(std::chrono::milliseconds(100));
    errs[g->rank()] = error_of([&] { g->barrier()->wait(); });
  });
  for (int r : {1, 2})
    EXPECT_EQ(errs[r],
              "barrier() (sequence 0) on world failed: missing ranks: [0] exited before issuing it (rank 0: its "
              "thread returned)");
}

TEST(PlanNewGroup, MembersNameIdAndPlace) {
  const std::vector<int> parent{4, 5, 6, 7};  // a group of global ranks 4..7
  NewGroupPlan p = plan_new_group({3, 1}, 1, parent, "group[4, 5, 6, 7]", 42);
  EXPECT_EQ(p.what, "new_group[3, 1]");
  EXPECT_EQ(p.global_ranks, (std::vector<int>{7, 5}));
  EXPECT_EQ(p.name, "group[7, 5]");
  EXPECT_EQ(p.id, mix_group_id(mix_group_id(42, 8), 6));
  EXPECT_EQ(p.list_hash(), static_cast<int64_t>(p.id & 0x7fffffffffffull));
  EXPECT_TRUE(p.member());
  EXPECT_EQ(p.rank, 1);
  EXPECT_EQ(plan_new_group({3, 1}, 3, parent, "g").rank, 0);
  NewGroupPlan out = plan_new_group({3, 1}, 0, parent, "g");
  EXPECT_FALSE(out.member());
  EXPECT_EQ(out.rank, -1);
  // the list's order makes a different group
  EXPECT_NE(plan_new_group({1, 3}, 0, parent, "g").id, plan_new_group({3, 1}, 0, parent, "g").id);
}

TEST(PlanNewGroup, ArgumentErrors) {
  const std::vector<int> parent{0, 1, 2};
  EXPECT_WEFT_ERROR(plan_new_group({}, 0, parent, "world"), "new_group: the rank list is empty");
  EXPECT_WEFT_ERROR(plan_new_group({0, 3}, 0, parent, "world"), "new_group: rank 3 is not in world (size 3)");
  EXPECT_WEFT_ERROR(plan_new_group({1, 1}, 0, parent, "world"), "new_group: rank 1 is listed twice");
}

}  // namespace
}  // namespace weft::parallel
