// Shared pieces of the multi-process examples (contract in rank_data.h).
#include "examples/rank_data.h"

#include "core/ops.h"

namespace weft::examples {

std::shared_ptr<io::TensorDataset> slice_rows(const io::TensorDataset& ds, int64_t begin, int64_t end) {
  return std::make_shared<io::TensorDataset>(ds.data().narrow(0, begin, end - begin),
                                             ds.targets().narrow(0, begin, end - begin));
}

std::array<double, 3> allreduce_sum(parallel::ProcessGroup& g, double a, double b, double c) {
  Tensor t = tensor<double>({a, b, c}, {3});  // (3,)
  g.allreduce(t)->wait();
  const double* p = t.data_ptr<double>();
  return {p[0], p[1], p[2]};
}

}  // namespace weft::examples
