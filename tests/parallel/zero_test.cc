// ZeroOptimizer (parallel/data/zero.h) with ranks as threads over the in-process
// group: every case of tests/parallel/zero_cases.h at dp 1, 2, 3 and 4 (3 and
// 4 pad the 275-parameter MLP's flat buffer; dp 1 is the degenerate group).
#include <gtest/gtest.h>

#include "parallel/comm/inproc/testing.h"
#include "tests/parallel/zero_cases.h"

namespace weft::parallel {
namespace {

#define WEFT_INPROC_ZERO_CASE(Name, fn)                                         \
  TEST(Zero, Name) {                                                            \
    for (int n : {1, 2, 3, 4}) {                                                \
      SCOPED_TRACE("dp " + std::to_string(n));                                  \
      run_ranks(n, [](std::shared_ptr<ProcessGroup> g) { zero_cases::fn(g); }); \
    }                                                                           \
  }
WEFT_ZERO_CASES(WEFT_INPROC_ZERO_CASE)
#undef WEFT_INPROC_ZERO_CASE

}  // namespace
}  // namespace weft::parallel
