// The Work of the MPI backend: the state of one issued operation (any number
// of MPI requests that must all finish), its completion and its timeout and
// liveness errors. Internal to the MPI backend.
#pragma once

#include <mpi.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "parallel/comm/mpi/group_state.h"
#include "parallel/comm/mpi/liveness.h"
#include "parallel/comm/process_group.h"

namespace weft::parallel {
class ProcessGroupMPI;
}

namespace weft::parallel::detail {

using Clock = std::chrono::steady_clock;

// The state of one issued operation: a collective (one request, sequenced) or
// point-to-point messages (any number of requests, unsequenced). Owned by the
// Work and, while MPI may still touch its buffers, never freed before
// completion (see ~WorkMPI). Fields are read and written under mpi_mutex().
struct WorkState final : Progressable {
  std::vector<MPI_Request> reqs;
  std::vector<MPI_Status> statuses;  // each request's, once it finished
  std::vector<int> rcs;              // MPI_Test's result for each request
  std::vector<char> finished;
  std::shared_ptr<ProcessGroupMPI> group;  // keeps the communicators alive
  MPIGroupState* gs = nullptr;
  std::string what;  // "allreduce(float32, 10 elements, sum)", "batch_isend_irecv(4 ops)"
  int64_t seq = -1;  // -1 for point-to-point
  // Point-to-point: each request's peer (group rank) and the operation it
  // belongs to ("recv(float32, 8 elements, from rank 1, tag 0)").
  std::vector<int> req_peer;
  std::vector<std::string> req_label;
  bool batch = false;  // timeouts list the pending operations
  Duration timeout{};
  Clock::time_point issued;
  std::vector<Tensor> keep;                // tensors MPI reads or writes
  std::vector<uint8_t> buffer;             // staging (allgather, reduce_scatter)
  std::vector<int64_t> headers;            // p2p headers (Note [p2p headers])
  std::function<void(WorkState&)> finish;  // runs once, after every request finished
  bool done = false;
  std::string error;

  // Room for n requests (before any is posted: pointers into reqs must stay valid).
  void expect(size_t n);
  // Tests every unfinished request once; true when all have finished.
  bool test_all();
  bool pending() override;  // Note [progress thread]
};

// Throws if one of `peers` (group ranks) has been silent for the liveness
// threshold of `timeout` (Note [liveness]). `what` names the operation with its
// sequence number; `issued` is when it started.
void check_alive(MPIGroupState& gs, const std::vector<int>& peers, const std::string& what, Duration timeout,
                 Clock::time_point issued);

// Waits for `n` requests on the calling thread, polling; used where the caller
// must block (debug fingerprints). Returns false on timeout; throws if one of
// `peers` (group ranks) stops responding (check_alive).
bool poll_until(MPI_Request* reqs, int n, MPIGroupState& gs, const std::vector<int>& peers, const std::string& what_seq,
                Duration timeout, Clock::time_point issued);

// The Work of `st` once its requests are posted (`rc`: the result of posting
// them; a failure marks it done and throws). Hands it to the progress thread.
WorkPtr launch_work(const std::shared_ptr<WorkState>& st, int rc);

}  // namespace weft::parallel::detail
