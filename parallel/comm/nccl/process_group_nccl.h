// ProcessGroupNCCL: the ProcessGroup backend for CUDA tensors, on NCCL. Built
// only where the CUDA toolkit exists (parallel/BUILD selects it at load time).
//
// Contract:
// - create(bootstrap) is collective over `bootstrap`, a CPU process group
//   (normally the MPI world, init_process_group()): NCCL ranks are bootstrap
//   ranks. Rank 0 makes the ncclUniqueId and broadcasts it through the
//   bootstrap group (MPI_Ibcast for MPI). Each rank uses GPU
//   NCCLOptions::device, default the process device if one was set
//   (weft::cuda::set_process_device), else local_rank() % visible GPUs
//   (OMPI_COMM_WORLD_LOCAL_RANK), and makes it the process device (Note
//   [process device] in core/cuda/device_logic.h: set once, so no rank creates
//   a context on GPU 0). The communicator is non-blocking
//   (ncclConfig_t::blocking = 0), so that no NCCL call can hang the host: every
//   wait for NCCL (initialisation, queueing an operation, ncclCommSplit) has a
//   deadline and watches the peers' MPI heartbeats, so a dead peer is named
//   after the liveness threshold rather than the whole timeout. create() prints
//   the loaded NCCL version once (core/cuda/library_versions.h), and every
//   operation is registered with weft::cuda::comm_activity() until its
//   completion event fires (Note [cudaFree and communication]).
// - Collectives take contiguous CUDA tensors on the group's GPU and run on the
//   group's own communication stream (non-blocking, created per group), after
//   the work already queued on the compute stream (weft::cuda::current_stream
//   of the GPU: an event recorded there and waited on by the communication
//   stream; core/cuda/stream.h rule 2). Each returns a Work at once.
//   Work::is_completed() polls the completion event and ncclCommGetAsyncError;
//   Work::wait() polls the same until done, then orders the compute stream
//   after the collective; on a timeout (the group's, default 10 minutes or
//   WEFT_COLLECTIVE_TIMEOUT_S) or an asynchronous NCCL error it aborts the
//   communicator (ncclCommAbort) and throws weft::Error naming the collective,
//   its sequence number, the group and, where knowable, the missing ranks:
//   peers that stopped sending MPI heartbeats (Note [liveness] in
//   parallel/comm/mpi/liveness.cc) are named, earlier than the timeout.
//   NCCL itself does not report which ranks did not arrive. After an abort
//   every operation on the group throws.
// - Tensors handed to a collective are kept alive until the GPU finished with
//   them, whether or not the Work is waited on.
// - Ops: allreduce (sum, avg, max, min), broadcast, allgather,
//   reduce_scatter, send/recv, barrier (an allreduce of one element), and
//   new_group (ncclCommSplit; members get their own communicator and stream).
//   dtypes: float32/64, bfloat16, float16, int64, int32, uint8, and bool as
//   uint8 with sum/max = logical or, min = logical and (as in the MPI
//   backend). Avg only for floating dtypes.
// - send/recv: a send runs only once the peer's matching recv runs; single
//   sends and recvs are queued on the one communication stream in issue
//   order, so two ranks that both send first deadlock until the timeout.
//   batch_isend_irecv issues a list of sends and receives as one NCCL group
//   (Note [nccl batched p2p] in p2p_nccl.cc): ranks exchanging both ways, or
//   around a ring, do it in one batch. NCCL has no tags: between two ranks the
//   messages of one direction match in issue order, whatever their tags (0 to
//   32767 accepted); debug mode checks tags, dtypes and sizes pairwise.
// - Debug mode: WEFT_DEBUG_COLLECTIVES, with the MPI backend's meaning (set to
//   anything but "" or "0"; read when create() runs; sub-groups inherit it).
//   Before each collective, send, recv and new_group, the ranks exchange a
//   fingerprint (op, dtype, element count, reduce op / root / peers, group id,
//   sequence number) through an MPI group with the same ranks
//   (ProcessGroupMPI::check_fingerprint: the bootstrap group, or an MPI
//   sub-group that new_group makes alongside; an allgather on its side
//   communicator, or an exchange between the two ranks of a send/recv), within
//   the operation's timeout, and every rank throws the first divergence and
//   the ranks on each side of it (parallel/comm/desync.h) before anything reaches
//   NCCL. It needs an MPI bootstrap group: create() throws otherwise (with
//   more than one rank).
// - Thread safety: calls on one group are serialised by a mutex; Works may be
//   polled from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "parallel/comm/process_group.h"

namespace weft::parallel {

// Visible CUDA devices; 0 without a GPU or driver (never throws).
int cuda_device_count();

struct NCCLOptions {
  int device = -1;  // GPU index; -1: local_rank() % cuda_device_count()
};

namespace detail {
struct NCCLGroupState;
}

class ProcessGroupNCCL final : public ProcessGroup, public std::enable_shared_from_this<ProcessGroupNCCL> {
 public:
  // Collective over `bootstrap` (see the contract). Throws if no GPU is visible.
  static std::shared_ptr<ProcessGroupNCCL> create(const std::shared_ptr<ProcessGroup>& bootstrap,
                                                  NCCLOptions options = {});
  ~ProcessGroupNCCL() override;

  int rank() const override;
  int size() const override;
  const std::vector<int>& global_ranks() const override;
  std::string backend_name() const override { return "nccl"; }
  // "nccl:world" or "nccl:group[0,2]" (global ranks), as used in error messages.
  const std::string& name() const;
  // The GPU this rank's communicator uses.
  Device device() const override;
  // Collectives issued on this group so far (the next one gets this number).
  int64_t sequence_number() const;
  // True once the communicator was aborted (timeout, NCCL error, abort()).
  bool aborted() const;
  // Aborts the communicator: pending operations stop, later ones throw.
  void abort(const std::string& reason);

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

  // Test hook: the group's communication stream (a cudaStream_t).
  void* communication_stream() const;

 private:
  explicit ProcessGroupNCCL(std::unique_ptr<detail::NCCLGroupState> state);
  void release();  // the destructor's work: drain (bounded), finalize or abort, free
  std::unique_ptr<detail::NCCLGroupState> s_;
};

}  // namespace weft::parallel
