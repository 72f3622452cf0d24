// Communication volume by the ring model (contract in comm_volume.h).
#include "parallel/data/comm_volume.h"

#include <utility>

#include "core/error.h"

namespace weft::parallel {

int64_t ring_allreduce_bytes(int64_t bytes, int n) {
  if (n <= 1) return 0;
  return 2 * (n - 1) * bytes / n;
}

int64_t ring_allgather_bytes(int64_t bytes, int n) { return n <= 1 ? 0 : (n - 1) * bytes; }

CommHook counting_hook(std::shared_ptr<int64_t> counter, CommHook inner) {
  WEFT_CHECK(counter != nullptr, "counting_hook: the counter is null");
  if (!inner) inner = allreduce_avg_hook;
  return [counter = std::move(counter), inner = std::move(inner)](ProcessGroup& group, Tensor& bucket) {
    *counter += ring_allreduce_bytes(static_cast<int64_t>(bucket.nbytes()), group.size());
    return inner(group, bucket);
  };
}

}  // namespace weft::parallel
