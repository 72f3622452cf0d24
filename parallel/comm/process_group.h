// ProcessGroup: collectives over a group of ranks, returning asynchronous Work.
//
// Contract (PyTorch c10d's shape, weft's words):
// - Every collective returns a Work immediately; wait() blocks until it is done
//   or its timeout passes, then throws weft::Error naming the collective, its
//   sequence number in this group, and the ranks that did not arrive.
// - Collectives are issued in the same order on every rank of the group
//   (sequence numbers count them). WEFT_DEBUG_COLLECTIVES=1 makes each rank
//   compare its plan (op, dtype, element count, group) with its peers before
//   running a collective and report the first divergence with the ranks involved.
// - Tensors must be contiguous. Results are written in place (allreduce,
//   broadcast, reduce_scatter output, allgather outputs, recv).
// - Backends: MPI for CPU tensors (parallel/mpi), NCCL for CUDA tensors
//   (parallel/nccl, built only where the CUDA toolkit exists).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace weft::parallel {

using Duration = std::chrono::milliseconds;
inline constexpr Duration kDefaultTimeout = std::chrono::minutes(10);

enum class ReduceOp { Sum, Avg, Max, Min };

// For error messages: "sum", "avg", "max", "min" ("?" for anything else).
const char* reduce_op_name(ReduceOp op);
// For error messages: "[0, 2, 3]".
std::string ranks_str(const std::vector<int>& ranks);

struct AllreduceOptions {
  ReduceOp op = ReduceOp::Sum;
  Duration timeout = Duration::zero();  // zero: the group's default timeout
};
struct BroadcastOptions {
  int root = 0;
  Duration timeout = Duration::zero();
};
struct AllgatherOptions {
  Duration timeout = Duration::zero();
};
struct ReduceScatterOptions {
  ReduceOp op = ReduceOp::Sum;
  Duration timeout = Duration::zero();
};
struct SendRecvOptions {
  int tag = 0;
  Duration timeout = Duration::zero();
};
struct BarrierOptions {
  Duration timeout = Duration::zero();
};

// One send or receive of a batched point-to-point exchange (batch_isend_irecv;
// PyTorch's dist.P2POp). `peer` is a group rank; `tensor` must be contiguous
// and, for a receive, is written in place.
struct P2POp {
  enum class Kind { Send, Recv };
  Kind kind = Kind::Send;
  Tensor tensor;
  int peer = -1;
  int tag = 0;

  static P2POp send(const Tensor& t, int peer, int tag = 0) { return P2POp{Kind::Send, t, peer, tag}; }
  static P2POp recv(const Tensor& t, int peer, int tag = 0) { return P2POp{Kind::Recv, t, peer, tag}; }
};
struct BatchP2POptions {
  Duration timeout = Duration::zero();
};

class Work {
 public:
  virtual ~Work() = default;
  // True once the operation finished (successfully or not); never blocks.
  virtual bool is_completed() = 0;
  // Blocks until done; throws weft::Error on failure or after `timeout`
  // (zero: the timeout the collective was issued with).
  virtual void wait(Duration timeout = Duration::zero()) = 0;
};
using WorkPtr = std::shared_ptr<Work>;

// A Work that is already complete (an empty batch, a no-op on one rank).
WorkPtr completed_work();

// new_group's argument checks for a group of `size` ranks called `group`: a
// non-empty list of distinct ranks in [0, size), or an error naming the rank.
void check_new_group_ranks(const std::vector<int>& ranks, int size, const std::string& group);

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The global ranks of this group's members, in group-rank order.
  virtual const std::vector<int>& global_ranks() const = 0;
  virtual std::string backend_name() const = 0;
  // Where the tensors handed to this group's operations must live: the CPU for
  // MPI and the in-process group, the group's GPU for NCCL. Helpers that send
  // host data (allgather_bytes, broadcast_tensor, ...) stage it there.
  virtual Device device() const { return kCPU; }
  Duration timeout() const { return timeout_; }
  void set_timeout(Duration t) { timeout_ = t; }

  virtual WorkPtr allreduce(Tensor& tensor, const AllreduceOptions& opts = {}) = 0;
  virtual WorkPtr broadcast(Tensor& tensor, const BroadcastOptions& opts = {}) = 0;
  // outputs.size() == size(); each like `input`.
  virtual WorkPtr allgather(std::vector<Tensor>& outputs, const Tensor& input, const AllgatherOptions& opts = {}) = 0;
  // inputs.size() == size(); output like each input; output = reduce(inputs[rank] over ranks).
  virtual WorkPtr reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                 const ReduceScatterOptions& opts = {}) = 0;
  virtual WorkPtr send(const Tensor& tensor, int dst, const SendRecvOptions& opts = {}) = 0;
  virtual WorkPtr recv(Tensor& tensor, int src, const SendRecvOptions& opts = {}) = 0;
  virtual WorkPtr barrier(const BarrierOptions& opts = {}) = 0;

  // Batched point-to-point (Note [batched p2p]): issues every send and receive
  // of `ops` at once and returns one Work that completes when all of them have.
  // A rank may send to and receive from the same peer (or both neighbours of a
  // ring) in one batch: nothing in a batch waits for anything else in it, so
  // two ranks exchanging both ways never deadlock. Between two ranks, the
  // sends of one (peer, tag) match the other side's receives of that (peer,
  // tag) in issue order; a receive whose size or dtype differs from the
  // matching send is an error naming both. Only the peers named take part (not
  // a collective); an empty batch completes at once. wait() throws on
  // timeout naming the operations still pending and their peers.
  virtual WorkPtr batch_isend_irecv(const std::vector<P2POp>& ops, const BatchP2POptions& opts = {}) = 0;

  // A sub-group of this group's ranks (group-local rank numbers). Every member
  // of this group must call it with the same list; non-members get nullptr.
  virtual std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks) = 0;

 protected:
  Duration timeout_ = kDefaultTimeout;
};

}  // namespace weft::parallel
