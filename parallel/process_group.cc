// Formatting helpers shared by the ProcessGroup backends' error messages
// (contract in process_group.h).
#include "parallel/process_group.h"

#include <sstream>

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

WorkPtr completed_work() { return std::make_shared<CompletedWork>(); }

}  // namespace weft::parallel
