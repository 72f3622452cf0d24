// A program that calls MPI_Finalize itself, without destroy_process_group or a
// DistributedContext: the heartbeat thread (Note [liveness] in
// parallel/comm/mpi/liveness.cc) must stop inside MPI_Finalize (an
// MPI_COMM_SELF attribute callback), or it would call MPI after finalisation
// and Open MPI would abort the run. Run by mpi_test.sh with 2 and 4 ranks;
// exits 0 when everything worked.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "core/ops.h"
#include "parallel/comm/mpi/process_group_mpi.h"

int main() {
  using namespace weft;
  using namespace weft::parallel;
  try {
    auto pg = init_process_group();
    const int n = pg->size();
    if (pg->size() > 1 && !liveness_monitor_running()) {
      std::fprintf(stderr, "rank %d: the heartbeat monitor is not running\n", pg->rank());
      return 1;
    }
    Tensor t = full({4}, 1.0);
    pg->allreduce(t)->wait();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a few heartbeats
    pg.reset();
    if (MPI_Finalize() != MPI_SUCCESS) return 1;
    if (liveness_monitor_running()) {
      std::fprintf(stderr, "the heartbeat monitor survived MPI_Finalize\n");
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a stray beat would abort here
    const double sum = t.sum().item<double>();                    // 4 elements, each the number of ranks
    std::fprintf(stderr, "done: sum %g\n", sum);
    return sum == 4.0 * n ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
