// Formatting helpers shared by the ProcessGroup backends' error messages
// (contract in process_group.h).
#include "parallel/comm/process_group.h"

#include <algorithm>
#include <sstream>

#include "core/error.h"

namespace weft::parallel {

std::string ranks_str(const std::vector<int>& ranks) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < ranks.size(); ++i) os << (i ? ", " : "") << ranks[i];
  os << "]";
  return os.str();
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

namespace {
class CompletedWork final : public Work {
 public:
  bool is_completed() override { return true; }
  void wait(Duration) override {}
};
}  // namespace

void check_new_group_ranks(const std::vector<int>& ranks, int size, const std::string& group) {
  WEFT_CHECK(!ranks.empty(), "new_group: the rank list is empty");
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    WEFT_CHECK(sorted[i] >= 0 && sorted[i] < size, "new_group: rank ", sorted[i], " is not in ", group, " (size ", size,
               ")");
    WEFT_CHECK(i == 0 || sorted[i] != sorted[i - 1], "new_group: rank ", sorted[i], " is listed twice");
  }
}

WorkPtr completed_work() { return std::make_shared<CompletedWork>(); }

}  // namespace weft::parallel
