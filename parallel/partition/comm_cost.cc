// Measuring the data-parallel gradient average (contract in comm_cost.h).
#include "parallel/partition/comm_cost.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "core/error.h"
#include "core/ops.h"

namespace weft::parallel::partition {
namespace {

double fastest_allreduce(ProcessGroup& group, int64_t elements, int repeats) {
  Tensor t = ones({elements}, DType::Float32);  // (elements,)
  group.allreduce(t, {ReduceOp::Avg})->wait();  // warm-up
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < repeats; ++i) {
    group.barrier()->wait();
    const auto t0 = std::chrono::steady_clock::now();
    group.allreduce(t, {ReduceOp::Avg})->wait();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

AllreduceCost measure_allreduce(ProcessGroup& group, int64_t bytes, int repeats) {
  WEFT_CHECK(bytes >= 4 && repeats >= 1,
             "measure_allreduce: bytes must be at least 4 and repeats positive (bytes=", bytes, ", repeats=", repeats,
             ")");
  if (group.size() == 1) return {};
  const double small = fastest_allreduce(group, 1, repeats);
  const double large = fastest_allreduce(group, bytes / 4, repeats);
  Tensor times = zeros({2}, DType::Float64);  // (small, large)
  times.data_ptr<double>()[0] = small;
  times.data_ptr<double>()[1] = large;
  group.allreduce(times, {ReduceOp::Max})->wait();
  const double s = times.data_ptr<double>()[0], l = times.data_ptr<double>()[1];
  return {s, l > s ? static_cast<double>(bytes / 4 * 4) / (l - s) : 0.0};
}

AllreduceCost broadcast_cost(const AllreduceCost& cost, ProcessGroup& group, int root) {
  Tensor t = zeros({2}, DType::Float64);  // (latency_s, bytes_per_s)
  t.data_ptr<double>()[0] = cost.latency_s;
  t.data_ptr<double>()[1] = cost.bytes_per_s;
  if (group.size() > 1) group.broadcast(t, {root})->wait();
  return {t.data_ptr<double>()[0], t.data_ptr<double>()[1]};
}

}  // namespace weft::parallel::partition
