// Editing a schedule in tests: erase(s, r, a) removes the first action equal
// to `a` from rank r's list (a gtest failure when the rank does not hold it).
#pragma once

#include <algorithm>

#include <gtest/gtest.h>

#include "parallel/pipe/schedule.h"

namespace weft::parallel::pipe {

inline void erase(Schedule& s, int r, const Action& a) {
  auto& list = s.rank_actions[r];
  auto it = std::find(list.begin(), list.end(), a);
  ASSERT_NE(it, list.end()) << to_string(a);
  list.erase(it);
}

}  // namespace weft::parallel::pipe
