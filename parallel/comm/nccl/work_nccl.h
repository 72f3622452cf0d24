// The state of an NCCL group and of each operation issued on it, the Work that
// polls an operation, and Issue, the scope in which an operation is put on
// the communication stream. Internal to the NCCL backend.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <cmath>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/desync.h"
#include "parallel/comm/mpi/process_group_mpi.h"
#include "parallel/comm/nccl/cuda_adapter.h"
#include "parallel/comm/nccl/nccl_common.h"
#include "parallel/comm/nccl/nccl_wait.h"
#include "parallel/comm/nccl/process_group_nccl.h"

namespace weft::parallel::detail {

namespace ca = cuda_adapter;

// An event destroyed with its last owner: the operation's state and the
// process's registry of communication in flight (Note [cudaFree and
// communication] in core/cuda/caching_allocator.h), which must not own the
// operation's tensors (dropping them frees device memory).
struct EventOwner {
  cudaEvent_t event = nullptr;
  ~EventOwner() {
    if (event != nullptr) (void)cudaEventDestroy(event);
  }
};

// The per-operation state. The group's `inflight` list and the Work share it;
// it keeps the operation's tensors alive until the GPU is done with them.
struct NCCLOpState {
  std::string what;        // "allreduce(float32, 10 elements, sum)"
  int64_t seq = -1;        // -1 for point-to-point
  std::vector<int> peers;  // point-to-point: the peers' group ranks (a collective waits on all)
  Duration timeout{};
  Clock::time_point issued;
  cudaEvent_t done_event = nullptr;  // owned by done_owner
  std::shared_ptr<EventOwner> done_owner;
  std::vector<Tensor> keep;
  bool done = false;
  std::string error;
  std::string what_seq() const { return seq < 0 ? what : weft::detail::str_cat(what, " (sequence ", seq, ")"); }
};

struct NCCLGroupState {
  ncclComm_t comm = nullptr;
  int rank = 0, size = 1, device = 0;
  std::vector<int> global_ranks;
  std::string name;
  cudaStream_t stream = nullptr;  // the communication stream
  Tensor one;                     // barrier scratch: 4 bytes = one float32
  std::mutex m;                   // serialises this group's NCCL/CUDA calls; guards what follows
  int64_t seq = 0;
  bool aborted = false;
  std::string abort_reason;
  std::vector<std::shared_ptr<NCCLOpState>> inflight;
  // Debug mode (Note [nccl desync check]): fingerprints go through debug_mpi
  // (null when off); `id` is this group's id in them.
  std::shared_ptr<ProcessGroupMPI> debug_mpi;
  uint64_t id = 0;

  // Aborts the communicator (Note [nccl non-blocking]). Caller holds m.
  void abort_locked(const std::string& reason) {
    if (aborted) return;
    aborted = true;
    abort_reason = reason;
    if (comm != nullptr) {
      ca::DeviceGuard g(device);
      (void)ncclCommAbort(comm);
      comm = nullptr;
    }
  }

  // Drops finished operations. Caller holds m.
  void reap_locked() {
    inflight.erase(std::remove_if(inflight.begin(), inflight.end(),
                                  [](const std::shared_ptr<NCCLOpState>& op) {
                                    if (op->done) return true;
                                    cudaError_t e = cudaEventQuery(op->done_event);
                                    if (e == cudaErrorNotReady) return false;
                                    if (e != cudaSuccess) (void)cudaGetLastError();
                                    op->keep.clear();
                                    return true;
                                  }),
                   inflight.end());
  }

  // "missing ranks: [2] (group ranks [1])" for group ranks `r` (missing_ranks_text).
  std::string ranks_text(const std::vector<int>& r) const { return missing_ranks_text(r, global_ranks); }

  // Peers (group ranks) silent for `threshold` by the MPI heartbeats.
  std::vector<int> silent(const std::vector<int>& peers, Duration threshold, double* longest) const {
    return unresponsive_group_ranks(peers, global_ranks, threshold, longest);
  }

  std::vector<int> peers() const {
    std::vector<int> out;
    for (int p = 0; p < size; ++p)
      if (p != rank) out.push_back(p);
    return out;
  }

  void check_usable(const std::string& what) const {
    WEFT_CHECK(!aborted, what, " on ", name, ": the NCCL communicator was aborted earlier (", abort_reason, ")");
  }

  // Throws (after aborting) if a peer stopped sending heartbeats. `locked`:
  // the caller holds m (a wait inside Issue, Note [nccl non-blocking]).
  // `while_doing` says what was waiting ("" for a Work's wait).
  void check_alive(const std::vector<int>& peer_list, const std::string& what_seq, Duration timeout,
                   Clock::time_point issued, bool locked = false, const std::string& while_doing = "") {
    double longest = 0;
    std::vector<int> dead = silent(peer_list, liveness_threshold(timeout), &longest);
    if (dead.empty()) return;
    double since = std::chrono::duration<double>(Clock::now() - issued).count();
    std::string msg = liveness_error(what_seq, name, ranks_text(dead), longest, since, seconds(timeout), while_doing);
    if (locked) {
      abort_locked(msg);
    } else {
      std::lock_guard<std::mutex> l(m);
      abort_locked(msg);
    }
    WEFT_ERROR(msg);
  }
};

// A defined, contiguous CUDA tensor on the group's GPU, or an error naming `what`.
void check_tensor(const char* what, const Tensor& t, const NCCLGroupState& gs);

// One operation being issued: holds the group's mutex and the device, orders
// the communication stream after the compute stream, and on commit() records
// the completion event (Note [nccl ordering]).
class Issue {
 public:
  // A sequenced collective (peer -1) or a send/recv with group rank `peer`.
  // `fp`: the debug-mode fingerprint, seq and group filled in here.
  Issue(NCCLGroupState& gs, std::string what, Fingerprint fp, int peer, Duration timeout, Duration group_timeout);
  // Point-to-point with `peers` (group ranks): in debug mode, exchanges each
  // of `checks` (peer, fingerprint) in order, group filled in here.
  Issue(NCCLGroupState& gs, std::string what, std::vector<int> peers,
        const std::vector<std::pair<int, Fingerprint>>& checks, Duration timeout, Duration group_timeout);

  NCCLOpState& op() { return *op_; }
  cudaStream_t stream() const { return gs_.stream; }
  ncclComm_t comm() const { return gs_.comm; }

  // Checks an NCCL call (settling ncclInProgress); on failure aborts and throws.
  void nccl(ncclResult_t rc, const char* call);
  WorkPtr commit(std::shared_ptr<ProcessGroupNCCL> self);

 private:
  void start(Duration timeout, Duration group_timeout, const std::vector<std::pair<int, Fingerprint>>& checks);

  NCCLGroupState& gs_;
  std::lock_guard<std::mutex> lock_;
  cuda_adapter::DeviceGuard guard_;
  std::shared_ptr<NCCLOpState> op_;
};

// A communicator's group state: stream, scratch, rank/size from NCCL.
std::unique_ptr<NCCLGroupState> make_state(ncclComm_t comm, int device, std::vector<int> global_ranks,
                                           std::string name);

}  // namespace weft::parallel::detail
