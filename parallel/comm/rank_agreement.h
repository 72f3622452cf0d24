// Do the ranks of a group hold the same list? DDP and ZeroOptimizer check at
// construction that every rank passes the same parameters (names, shapes,
// dtypes) before anything is reduced, and name the first difference.
//
// Contract: first_disagreement(group, descriptions) is collective; each rank
// passes its list of one-line descriptions (e.g. "parameter '0.weight' [8, 4]
// float32"). Lists are compared by hash, entry by entry; the result is empty
// when every rank holds the same list, else the first differing index and,
// for every rank, its entry there (`past_end` when its list is shorter; the
// first 255 characters) and its list length. Every rank gets the same result.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "parallel/comm/process_group.h"

namespace weft::parallel {

struct Disagreement {
  int64_t index = -1;
  std::vector<std::string> entries;  // per rank, at `index`
  std::vector<int64_t> counts;       // per rank, the list's length
  std::vector<int> differing;        // ranks whose entry differs from rank 0's
};

std::optional<Disagreement> first_disagreement(ProcessGroup& group, const std::vector<std::string>& descriptions,
                                               const std::string& past_end = "nothing");

}  // namespace weft::parallel
