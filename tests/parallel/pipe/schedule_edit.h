// Editing a schedule in tests: erase(s, r, a) removes the first action equal
// to `a` from rank r's list (a gtest failure when the rank does not hold it).
// shuffle_actions(s, seed) makes one to three random edits at the level of
// actions: one deleted, duplicated, or moved within its rank or to another
// rank, or two actions of a rank exchanging their micro-batches. What it
// makes is the validator's to judge (deadlocks, a send without its receive,
// a backward before its forward); the same seed makes the same edits.
#pragma once

#include <algorithm>
#include <utility>

#include <gtest/gtest.h>

#include "parallel/pipe/schedule.h"
#include "tests/mutate.h"

namespace weft::parallel::pipe {

inline void erase(Schedule& s, int r, const Action& a) {
  auto& list = s.rank_actions[r];
  auto it = std::find(list.begin(), list.end(), a);
  ASSERT_NE(it, list.end()) << to_string(a);
  list.erase(it);
}

inline Schedule shuffle_actions(Schedule s, uint64_t seed) {
  testing::Mutator rng(seed);
  auto& ranks = s.rank_actions;
  const size_t edits = 1 + rng.below(3);
  for (size_t k = 0; k < edits && !ranks.empty(); ++k) {
    auto& from = ranks[rng.below(ranks.size())];
    auto& to = ranks[rng.below(ranks.size())];
    if (from.empty()) continue;
    const auto i = static_cast<std::ptrdiff_t>(rng.below(from.size()));
    const Action a = from[i];
    switch (rng.below(4)) {
      case 0: from.erase(from.begin() + i); break;
      case 1: to.insert(to.begin() + static_cast<std::ptrdiff_t>(rng.below(to.size() + 1)), a); break;
      case 2:
        from.erase(from.begin() + i);
        to.insert(to.begin() + static_cast<std::ptrdiff_t>(rng.below(to.size() + 1)), a);
        break;
      case 3: std::swap(from[i].microbatch, from[rng.below(from.size())].microbatch); break;
    }
  }
  return s;
}

}  // namespace weft::parallel::pipe
