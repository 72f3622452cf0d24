// ProcessGroupInProc: the whole ProcessGroup contract (parallel/comm/process_group.h)
// with ranks as threads of one process and messages passed through memory, so
// multi-rank logic (DDP, pipeline schedules, pipeline x data parallel grids) is
// testable without mpirun, and a single process can drive several ranks.
//
// Contract, beyond process_group.h:
// - create_world(n) returns one world group per rank (index = rank) sharing one
//   in-memory world; hand each to the thread playing that rank.
// - Collectives complete when every rank of the group issued them: the last to
//   arrive computes the result for all and writes it into every rank's tensors
//   (so, as with MPI, a tensor must not be touched between issue and wait()).
//   Reductions run in float64 for floating dtypes, exactly (wrapping) for
//   integers, as or/and for bool; avg needs a floating dtype.
// - Ranks issuing different collectives (op, dtype, count, reduce op, root,
//   new_group list) at one sequence number fail with "collective desync"
//   naming both; there is no debug mode to turn on.
// - send/recv/batch_isend_irecv: a send completes only once the peer posted
//   the matching receive (and the data is copied), never earlier; matching is
//   per (source, destination, tag) in issue order; nothing waits at issue time,
//   so exchanges both ways never deadlock. Size or dtype mismatch fails both
//   sides naming both operations.
// - wait() fails after the timeout naming the operation, its sequence number,
//   the group and the missing ranks (global; group ranks too where they
//   differ: missing_ranks_text, parallel/comm/collectives.h), shaped like
//   ProcessGroupMPI's errors. A rank marked exited (mark_exited; run_ranks,
//   testing.h, does it when a rank's body returns or throws) makes every
//   operation still waiting on it fail at once, naming it and why it exited.
// - new_group is a collective of the parent group (every parent rank calls it
//   with the same list; it blocks until all did); members get the sub-group
//   (group rank i = list[i]), others nullptr.
// - CPU tensors only; tensors must be contiguous.
// The harness that plays n ranks as threads, run_ranks, is in testing.h
// (//parallel/comm/inproc:testing).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "parallel/comm/process_group.h"

namespace weft::parallel {

namespace detail {
struct InProcWorld;
struct InProcGroup;
struct Round;
}  // namespace detail

class ProcessGroupInProc final : public ProcessGroup {
 public:
  // The world groups of `n` in-process ranks (element r is rank r's), each with
  // default timeout `timeout`.
  static std::vector<std::shared_ptr<ProcessGroupInProc>> create_world(int n, Duration timeout = kDefaultTimeout);

  int rank() const override { return rank_; }
  int size() const override;
  const std::vector<int>& global_ranks() const override;
  std::string backend_name() const override { return "inproc"; }
  // "world", or "group[2, 0]" (the members' global ranks) for a sub-group.
  const std::string& name() const;
  // How many collectives this rank has issued on this group.
  int64_t sequence_number() const;

  // Marks this rank's thread as gone (for every group of the world): every
  // operation waiting on this rank, now or later, fails at once naming it and
  // `reason` (e.g. "its thread threw: ..."). The first reason sticks.
  void mark_exited(const std::string& reason);

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

  ProcessGroupInProc(std::shared_ptr<detail::InProcWorld> world, std::shared_ptr<detail::InProcGroup> group, int rank);
  ~ProcessGroupInProc() override;

 private:
  struct Issue;
  WorkPtr collective(Issue issue, Duration opt_timeout, std::shared_ptr<detail::Round>* round = nullptr);
  WorkPtr post(const std::vector<P2POp>& ops, std::string what, Duration opt_timeout);

  std::shared_ptr<detail::InProcWorld> world_;
  std::shared_ptr<detail::InProcGroup> group_;
  int rank_;
  int64_t seq_ = 0;  // guarded by the world's mutex
};

}  // namespace weft::parallel
