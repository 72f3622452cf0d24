// ProcessGroupMPI: the ProcessGroup backend for CPU tensors, on Open MPI.
//
// Contract:
// - init_process_group() initialises MPI from mpirun's environment if nobody
//   did (MPI_Init_thread asking for MPI_THREAD_MULTIPLE) and returns the world
//   group (one shared instance per process). DistributedContext
//   (parallel/comm/mpi/context.h) is the RAII owner that also finalises.
// - Every collective is non-blocking (MPI_Iallreduce, MPI_Ibcast, ...) and
//   returns a Work; wait() polls MPI_Test until done or the deadline, then
//   throws weft::Error naming the collective, its sequence number, the group
//   and the ranks that did not arrive (Note [arrival announcements]); a peer
//   that stops sending heartbeats (it died or is stuck) fails the wait
//   earlier, naming it (Note [liveness]).
// - Point-to-point (send, recv, batch_isend_irecv): non-blocking
//   MPI_Isend/MPI_Irecv with tags 0..32767. A batch posts all its sends and
//   receives before returning and completes as one Work (Note [batched p2p]
//   in p2p_mpi.cc); send and recv are batches of one. Each message carries a
//   small header, so a receive whose dtype or size differs from the send is
//   an error naming both (Note [p2p headers]).
// - Communicators use MPI_ERRORS_RETURN: an MPI failure becomes a weft::Error
//   carrying MPI's own error string, never an MPI abort.
// - dtypes: all of weft's. float16/bfloat16 reduce through user-defined MPI
//   ops that compute in float; bool reduces with logical or (sum, max) and
//   and (min). Avg = sum then divide by size (floating dtypes only).
// - Timeout: kDefaultTimeout (10 min), or WEFT_COLLECTIVE_TIMEOUT_S (seconds,
//   may be fractional) read when a group is created, or set_timeout(), or the
//   per-call option. Sub-groups inherit their parent's timeout.
// - Debug mode (WEFT_DEBUG_COLLECTIVES=1, read when a group is created):
//   before each collective the ranks allgather a fingerprint (op, reduce op or
//   root, dtype, element count, group id, sequence number) on the side
//   communicator and every rank throws an error naming the first divergence
//   and the ranks on each side of it (parallel/comm/desync.h). check_fingerprint
//   offers the same exchange to other backends on these ranks (NCCL).
//
// Threading (Note [mpi threading]): all MPI calls of this backend go through
// one process-wide mutex, so the backend is correct with MPI_THREAD_SERIALIZED
// as well as MPI_THREAD_MULTIPLE. Collectives of one group must be issued in
// the same order on every rank; issuing from several threads at once is
// allowed (each call is atomic) but the order is then up to the caller. Work
// objects may be waited on / polled from any thread. Open MPI has no progress
// thread: a non-blocking collective advances only while some thread is inside
// MPI (wait, is_completed, or any other call of this backend), so callers who
// want communication to overlap compute should poll is_completed() now and then
// (DDP does at each gradient hook) or run a thread that calls progress().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "parallel/comm/desync.h"
#include "parallel/comm/mpi/liveness.h"
#include "parallel/comm/process_group.h"

namespace weft::parallel {

// Initialises MPI if needed and returns the world group (same instance on
// every call until finalize_process_group()).
std::shared_ptr<ProcessGroup> init_process_group();
// Drops the world group (collectives on it afterwards are an error).
void destroy_process_group();
// True when the world group exists.
bool is_initialized();

// Rank among the processes on this node (OMPI_COMM_WORLD_LOCAL_RANK; 0 when
// not launched by mpirun), and the number of such processes. Picks a GPU.
int local_rank();
int local_size();

// Timeout read from WEFT_COLLECTIVE_TIMEOUT_S, else kDefaultTimeout.
Duration default_timeout_from_env();
// True when WEFT_DEBUG_COLLECTIVES is set to a non-empty value other than "0".
bool debug_collectives_from_env();

// Liveness: the heartbeat thread, liveness_threshold, unresponsive_ranks and
// mpi_mutex() are declared in parallel/comm/mpi/liveness.h.

// The thread level MPI provided (MPI_THREAD_*), or -1 before initialisation.
int mpi_thread_level();
// True once an MPI call of this backend failed or an unfinished Work was
// dropped (e.g. unwinding after a timeout): MPI requests may then never
// finish, so MPI_Finalize could hang; DistributedContext skips it. A timeout
// whose Work is later waited to completion does not count.
bool had_collective_failure();

class ProcessGroupMPI;
namespace detail {
struct MPIGroupState;
}

class ProcessGroupMPI final : public ProcessGroup, public std::enable_shared_from_this<ProcessGroupMPI> {
 public:
  // Wraps the world communicator (MPI must be initialised).
  static std::shared_ptr<ProcessGroupMPI> create_world();
  ~ProcessGroupMPI() override;

  int rank() const override;
  int size() const override;
  const std::vector<int>& global_ranks() const override;
  std::string backend_name() const override { return "mpi"; }
  // "world" or "group[0,2]" (global ranks), as used in error messages.
  const std::string& name() const;
  // Collectives issued on this group so far (the next one gets this number).
  int64_t sequence_number() const;
  bool debug_mode() const;
  void set_debug_mode(bool on);

  WorkPtr allreduce(Tensor& tensor, const AllreduceOptions& opts = {}) override;
  WorkPtr broadcast(Tensor& tensor, const BroadcastOptions& opts = {}) override;
  WorkPtr allgather(std::vector<Tensor>& outputs, const Tensor& input, const AllgatherOptions& opts = {}) override;
  WorkPtr reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                         const ReduceScatterOptions& opts = {}) override;
  WorkPtr send(const Tensor& tensor, int dst, const SendRecvOptions& opts = {}) override;
  WorkPtr recv(Tensor& tensor, int src, const SendRecvOptions& opts = {}) override;
  WorkPtr barrier(const BarrierOptions& opts = {}) override;
  WorkPtr batch_isend_irecv(const std::vector<P2POp>& ops, const BatchP2POptions& opts = {}) override;
  std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks) override;

  // The debug-mode check for an operation of another backend whose group has
  // exactly this group's ranks in this order (ProcessGroupNCCL): exchanges
  // `fp` on the side communicator with every rank (peer < 0; every rank calls
  // it, like a collective) or with group rank `peer` only (a send/recv pair:
  // both sides call it with the same fp.sub), then throws first_divergence's
  // error (parallel/comm/desync.h) naming `group_name`. Throws after `timeout`
  // naming `what_seq` and `group_name`, earlier if a peer stops sending
  // heartbeats. Not a collective of this group: its sequence number stays.
  void check_fingerprint(const Fingerprint& fp, int peer, const std::string& group_name, const std::string& what_seq,
                         Duration timeout);

  // Drives MPI progress once (MPI_Test on an internal request); cheap.
  void progress();

 private:
  explicit ProcessGroupMPI(std::unique_ptr<detail::MPIGroupState> state);
  // Sends and receives of `ops` as one Work (p2p_mpi.cc); `what` empty: one op.
  WorkPtr post_p2p(const std::vector<P2POp>& ops, std::string what, Duration timeout);
  std::unique_ptr<detail::MPIGroupState> s_;
};

}  // namespace weft::parallel
