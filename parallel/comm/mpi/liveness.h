// The MPI world's heartbeat thread (Note [liveness] in liveness.cc) and the
// queries the process groups build their "who did not arrive" errors on. The
// MPI backend uses it, and so does NCCL, whose ranks are MPI world ranks.
//
// Contract:
// - init_process_group() starts the thread when the world has more than one
//   rank: every 100 ms an empty message to each peer on a private duplicate of
//   MPI_COMM_WORLD, recording when each peer was last heard from.
//   destroy_process_group stops it (not to be called while holding
//   mpi_mutex()), and so do MPI_Finalize (an MPI_COMM_SELF attribute callback)
//   and exit().
// - A Work waiting on a peer that has sent no heartbeat for
//   liveness_threshold(timeout) fails at once with "... failed: missing ranks:
//   [r] stopped responding (...)": a killed rank is named even if it died after
//   issuing the collective, well before the timeout.
// - While MPI operations are pending the thread also drives MPI progress
//   (Note [progress thread]).
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "parallel/comm/process_group.h"

namespace weft::parallel {

// The mutex every MPI call of the MPI backend holds (Note [mpi threading] in
// process_group_mpi.h).
std::recursive_mutex& mpi_mutex();

// Half the collective timeout, clamped to [1 s, 30 s]; WEFT_HEARTBEAT_TIMEOUT_S
// (seconds) overrides it.
Duration liveness_threshold(Duration timeout);
// True while the heartbeat thread runs.
bool liveness_monitor_running();
// The global ranks among `global_ranks` that sent no heartbeat for at least
// `threshold` (none without a monitor); *longest_s gets the longest silence.
std::vector<int> unresponsive_ranks(const std::vector<int>& global_ranks, Duration threshold,
                                    double* longest_s = nullptr);
// The same for group ranks: those among `peers` (group ranks; global rank of
// group rank p is group_globals[p]) silent for at least `threshold`.
std::vector<int> unresponsive_group_ranks(const std::vector<int>& peers, const std::vector<int>& group_globals,
                                          Duration threshold, double* longest_s = nullptr);

namespace detail {

// An operation the heartbeat thread progresses while it is pending (Note
// [progress thread]). pending() is called with mpi_mutex() held and must
// neither complete nor free MPI requests.
class Progressable {
 public:
  virtual ~Progressable() = default;
  virtual bool pending() = 0;
};

// Starts the heartbeat thread unless it runs (collective over
// MPI_COMM_WORLD). The caller holds mpi_mutex().
void start_liveness_monitor();
// Stops and joins it, if it runs. The caller must not hold mpi_mutex().
void stop_liveness_monitor();
// Has the thread progress `op` until it is no longer pending (a no-op without
// a thread, or with WEFT_MPI_PROGRESS_US=0). The caller holds mpi_mutex().
void watch_progress(const std::shared_ptr<Progressable>& op);

}  // namespace detail

}  // namespace weft::parallel
