// ProcessGroupNCCL: NCCL collectives on a per-group communication stream, with
// deadlines, aborts and error messages naming collective, sequence number and
// (from the MPI heartbeats) missing ranks. Contract in the header.
//
// Note [nccl ordering]: an operation records an event on the compute stream
// (cuda_adapter::compute_stream) and makes the communication stream wait on it,
// so the collective reads what earlier kernels wrote; it then records a
// completion event on the communication stream. Work::wait() polls that event
// on the host (so it can time out) and finally makes the compute stream wait on
// it, so later kernels see the result even if the host did not block.
//
// Note [nccl non-blocking]: the communicator is created with blocking = 0, so
// NCCL calls return ncclInProgress instead of blocking the host (connection
// set-up, a dead peer during initialisation or ncclCommSplit). settle() polls
// ncclCommGetAsyncError until the call is through or a deadline passes, and the
// caller aborts the communicator then; no NCCL call can hang the process.
//
// Note [nccl desync check]: in debug mode the group holds an MPI group with
// the same ranks in the same order (`debug_mpi`: the bootstrap group, or for a
// sub-group the MPI sub-group made alongside the ncclCommSplit, both ordered
// by the `ranks` list), and each operation exchanges its fingerprint there
// (ProcessGroupMPI::check_fingerprint) while Issue holds the group's mutex,
// after taking its sequence number and before any CUDA or NCCL call: a
// divergence throws on every rank with nothing queued on the GPU.
#include "parallel/nccl/process_group_nccl.h"

#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>

#include "core/cuda/stream.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/ops.h"
#include "parallel/desync.h"
#include "parallel/mpi/process_group_mpi.h"
#include "parallel/nccl/cuda_adapter.h"

namespace weft::parallel {

namespace ca = cuda_adapter;

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kLivenessPollPeriod = std::chrono::milliseconds(10);

std::string nccl_text(ncclResult_t rc, ncclComm_t comm) {
  std::string s = ncclGetErrorString(rc);
  if (comm != nullptr) {
    const char* last = ncclGetLastError(comm);
    if (last != nullptr && *last != '\0') s += std::string(" (") + last + ")";
  }
  return s;
}

std::string ranks_str(const std::vector<int>& r) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < r.size(); ++i) os << (i ? ", " : "") << r[i];
  os << "]";
  return os.str();
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

ncclDataType_t nccl_type(DType d) {
  switch (d) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Float16: return ncclFloat16;
    case DType::Int64: return ncclInt64;
    case DType::Int32: return ncclInt32;
    case DType::UInt8:
    case DType::Bool: return ncclUint8;
  }
  return ncclUint8;
}

// bool: sum and max are logical or, min is logical and (values are 0 or 1).
ncclRedOp_t nccl_op(const char* what, DType d, ReduceOp op) {
  WEFT_CHECK(op != ReduceOp::Avg || is_floating(d), what, ": ReduceOp::avg needs a floating dtype, got ", d);
  if (d == DType::Bool) return op == ReduceOp::Min ? ncclMin : ncclMax;
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
  }
  return ncclSum;
}

// Note [nccl non-blocking]: waits out ncclInProgress until `deadline`;
// `on_poll` (may throw) runs every kLivenessPollPeriod meanwhile.
ncclResult_t settle(ncclComm_t comm, ncclResult_t rc, Clock::time_point deadline,
                    const std::function<void()>& on_poll = nullptr) {
  auto next = Clock::now() + kLivenessPollPeriod;
  while (rc == ncclInProgress) {
    auto now = Clock::now();
    if (now >= deadline) return ncclInProgress;
    if (on_poll && now >= next) {
      on_poll();
      next = now + kLivenessPollPeriod;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    ncclResult_t state = ncclSuccess;
    ncclResult_t q = ncclCommGetAsyncError(comm, &state);
    if (q != ncclSuccess) return q;
    rc = state;
  }
  return rc;
}

double seconds(Duration d) { return static_cast<double>(d.count()) / 1000.0; }

}  // namespace

int cuda_device_count() { return ca::cuda_device_count(); }

namespace detail {

// The per-operation state. The group's `inflight` list and the Work share it;
// it keeps the operation's tensors alive until the GPU is done with them.
struct NCCLOpState {
  std::string what;  // "allreduce(float32, 10 elements, sum)"
  int64_t seq = -1;  // -1 for send/recv
  int peer = -1;     // group rank of the peer for send/recv
  Duration timeout{};
  Clock::time_point issued;
  cudaEvent_t done_event = nullptr;
  std::vector<Tensor> keep;
  bool done = false;
  std::string error;
  ~NCCLOpState() {
    if (done_event != nullptr) (void)cudaEventDestroy(done_event);
  }
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

  // "missing ranks: [1] (group ranks [1])" for group ranks `r`.
  std::string ranks_text(const std::vector<int>& r) const {
    std::vector<int> g;
    for (int x : r) g.push_back(global_ranks[x]);
    std::string s = "missing ranks: " + ranks_str(g);
    if (g != r) s += " (group ranks " + ranks_str(r) + ")";
    return s;
  }

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

  // Throws (after aborting) if a peer stopped sending heartbeats. Caller does
  // not hold m.
  void check_alive(const std::vector<int>& peer_list, const std::string& what_seq, Duration timeout,
                   Clock::time_point issued) {
    double longest = 0;
    std::vector<int> dead = silent(peer_list, liveness_threshold(timeout), &longest);
    if (dead.empty()) return;
    double since = std::chrono::duration<double>(Clock::now() - issued).count();
    std::string msg = weft::detail::str_cat(
        what_seq, " on ", name, " failed: ", ranks_text(dead), " stopped responding (no heartbeat for ",
        std::round(longest * 10) / 10, " s: the process died or is stuck), ", std::round(since * 10) / 10,
        " s after it was issued (timeout ", seconds(timeout), " s); communicator aborted");
    {
      std::lock_guard<std::mutex> l(m);
      abort_locked(msg);
    }
    WEFT_ERROR(msg);
  }
};

}  // namespace detail

using detail::NCCLGroupState;
using detail::NCCLOpState;

namespace {

class WorkNCCL final : public Work {
 public:
  WorkNCCL(std::shared_ptr<ProcessGroupNCCL> group, NCCLGroupState* gs, std::shared_ptr<NCCLOpState> op)
      : group_(std::move(group)), gs_(gs), op_(std::move(op)) {}

  bool is_completed() override {
    std::lock_guard<std::mutex> l(gs_->m);
    return poll_locked();
  }

  void wait(Duration timeout) override {
    auto start = Clock::now();
    const bool own_deadline = timeout == Duration::zero();
    auto deadline = own_deadline ? op_->issued + op_->timeout : start + timeout;
    Duration limit = own_deadline ? op_->timeout : timeout;
    auto next_check = start + kLivenessPollPeriod;
    while (true) {
      {
        std::lock_guard<std::mutex> l(gs_->m);
        if (poll_locked()) break;
      }
      auto now = Clock::now();
      if (now >= deadline) timed_out(limit, now >= op_->issued + op_->timeout);
      if (now >= next_check) {
        gs_->check_alive(peers(), op_->what_seq(), op_->timeout, op_->issued);
        next_check = now + kLivenessPollPeriod;
      }
      if (now - start < std::chrono::milliseconds(1)) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    if (!op_->error.empty()) WEFT_ERROR(op_->error);
    // Note [nccl ordering]: later compute-stream work comes after the collective.
    std::lock_guard<std::mutex> l(gs_->m);
    ca::DeviceGuard g(gs_->device);
    WEFT_CUDA_CHECK(cudaStreamWaitEvent(ca::compute_stream(gs_->device), op_->done_event, 0));
  }

 private:
  std::vector<int> peers() const { return op_->seq < 0 ? std::vector<int>{op_->peer} : gs_->peers(); }

  // Caller holds gs_->m.
  bool poll_locked() {
    if (op_->done) return true;
    ca::DeviceGuard g(gs_->device);
    cudaError_t e = cudaEventQuery(op_->done_event);  // first: it may have finished before an abort
    if (e == cudaSuccess) {
      op_->done = true;
      op_->keep.clear();
      return true;
    }
    if (e != cudaErrorNotReady) {
      (void)cudaGetLastError();
      op_->done = true;
      op_->error = weft::detail::str_cat(op_->what_seq(), " on ", gs_->name,
                                         " failed in CUDA: ", ca::cuda_error_text(e), "; communicator aborted");
      gs_->abort_locked(op_->error);
      return true;
    }
    if (gs_->aborted) {
      op_->done = true;
      op_->error =
          weft::detail::str_cat(op_->what_seq(), " on ", gs_->name,
                                " did not complete: the NCCL communicator was aborted (", gs_->abort_reason, ")");
      return true;
    }
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(gs_->comm, &state) == ncclSuccess && state != ncclSuccess && state != ncclInProgress) {
      op_->done = true;
      op_->error = weft::detail::str_cat(op_->what_seq(), " on ", gs_->name,
                                         " failed in NCCL: ", nccl_text(state, gs_->comm), "; communicator aborted");
      gs_->abort_locked(op_->error);
      return true;
    }
    return false;
  }

  // `fatal`: the operation's own deadline passed (not just a shorter wait):
  // the communicator is aborted.
  [[noreturn]] void timed_out(Duration limit, bool fatal) {
    double longest = 0;
    std::vector<int> dead =
        gs_->silent(peers(), std::min<Duration>(std::chrono::seconds(1), liveness_threshold(op_->timeout)), &longest);
    std::string who;
    if (!dead.empty()) {
      who = weft::detail::str_cat(gs_->ranks_text(dead), " stopped responding (no heartbeat for ",
                                  std::round(longest * 10) / 10, " s: the process died or is stuck)");
    } else if (liveness_monitor_running()) {
      who =
          "missing ranks: unknown (NCCL does not report which ranks arrived; every peer is alive by its "
          "heartbeat: one may be slow or have issued a different collective)";
    } else {
      who = "missing ranks: unknown (NCCL does not report which ranks arrived)";
    }
    std::string msg =
        weft::detail::str_cat(op_->what_seq(), " on ", gs_->name, " timed out after ", seconds(limit), " s: ", who);
    if (fatal) {
      msg += "; communicator aborted";
      std::lock_guard<std::mutex> l(gs_->m);
      gs_->abort_locked(msg);
    }
    WEFT_ERROR(msg);
  }

  std::shared_ptr<ProcessGroupNCCL> group_;  // keeps the communicator alive
  NCCLGroupState* gs_;
  std::shared_ptr<NCCLOpState> op_;
};

void check_tensor(const char* what, const Tensor& t, const NCCLGroupState& gs) {
  WEFT_CHECK(t.defined(), what, ": tensor is undefined");
  WEFT_CHECK(t.device().is_cuda(), what, ": the NCCL backend takes CUDA tensors, got a tensor on ", t.device(),
             " (use the MPI group for CPU tensors)");
  WEFT_CHECK(t.device().index == gs.device, what, ": tensor is on ", t.device(), " but this rank's NCCL group ",
             gs.name, " uses cuda:", gs.device);
  WEFT_CHECK(t.is_contiguous(), what, ": tensor must be contiguous (shape ", shape_str(t.sizes()), ")");
}

// One operation being issued: holds the group's mutex and the device, orders
// the communication stream after the compute stream, and on commit() records
// the completion event (Note [nccl ordering]).
class Issue {
 public:
  // `peer`: the group rank of a send/recv's peer, -1 for a (sequenced)
  // collective. `fp`: the debug-mode fingerprint, seq and group filled in here.
  Issue(NCCLGroupState& gs, std::string what, Fingerprint fp, int peer, Duration timeout, Duration group_timeout)
      : gs_(gs), lock_(gs.m), guard_(gs.device) {
    gs_.check_usable(what);
    op_ = std::make_shared<NCCLOpState>();
    op_->what = std::move(what);
    op_->seq = peer < 0 ? gs_.seq++ : -1;
    op_->peer = peer;
    op_->timeout = timeout == Duration::zero() ? group_timeout : timeout;
    op_->issued = Clock::now();
    if (gs_.debug_mpi != nullptr && gs_.size > 1) {  // Note [nccl desync check]
      fp.seq = op_->seq;
      fp.group = static_cast<int64_t>(gs_.id);
      gs_.debug_mpi->check_fingerprint(fp, peer, gs_.name, op_->what_seq(), op_->timeout);
    }
    // Note [nccl ordering] (core/cuda/stream.h rule 2).
    weft::cuda::Event ready;
    ready.record(ca::compute_stream(gs_.device));
    ready.block(gs_.stream);
    WEFT_CUDA_CHECK(cudaEventCreateWithFlags(&op_->done_event, cudaEventDisableTiming));
  }

  NCCLOpState& op() { return *op_; }
  cudaStream_t stream() const { return gs_.stream; }
  ncclComm_t comm() const { return gs_.comm; }

  // Checks an NCCL call (settling ncclInProgress); on failure aborts and throws.
  void nccl(ncclResult_t rc, const char* call) {
    rc = settle(gs_.comm, rc, op_->issued + op_->timeout);
    if (rc == ncclSuccess) return;
    std::string msg = rc == ncclInProgress
                          ? weft::detail::str_cat(op_->what_seq(), " on ", gs_.name, ": ", call,
                                                  " did not return within the timeout of ", seconds(op_->timeout), " s")
                          : weft::detail::str_cat(op_->what_seq(), " on ", gs_.name, ": ", call,
                                                  " failed: ", nccl_text(rc, gs_.comm));
    msg += "; communicator aborted";
    gs_.abort_locked(msg);
    WEFT_ERROR(msg);
  }

  WorkPtr commit(std::shared_ptr<ProcessGroupNCCL> self) {
    WEFT_CUDA_CHECK(cudaEventRecord(op_->done_event, gs_.stream));
    gs_.reap_locked();
    gs_.inflight.push_back(op_);
    return std::make_shared<WorkNCCL>(std::move(self), &gs_, op_);
  }

 private:
  NCCLGroupState& gs_;
  std::lock_guard<std::mutex> lock_;
  ca::DeviceGuard guard_;
  std::shared_ptr<NCCLOpState> op_;
};

// A communicator's group state: stream, scratch, rank/size from NCCL.
std::unique_ptr<NCCLGroupState> make_state(ncclComm_t comm, int device, std::vector<int> global_ranks,
                                           std::string name) {
  auto s = std::make_unique<NCCLGroupState>();
  s->comm = comm;
  s->device = device;
  s->global_ranks = std::move(global_ranks);
  s->name = std::move(name);
  ca::DeviceGuard g(device);
  int r = 0, n = 0;
  ncclResult_t rc = ncclCommUserRank(comm, &r);
  if (rc == ncclSuccess) rc = ncclCommCount(comm, &n);
  WEFT_CHECK(rc == ncclSuccess, s->name, ": reading rank and size: ", nccl_text(rc, comm));
  s->rank = r;
  s->size = n;
  WEFT_CUDA_CHECK(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
  s->one = ca::scratch(sizeof(float), device, s->stream);
  WEFT_CUDA_CHECK(cudaMemsetAsync(s->one.raw_data(), 0, sizeof(float), s->stream));
  return s;
}

}  // namespace

// ---- ProcessGroupNCCL ----

ProcessGroupNCCL::ProcessGroupNCCL(std::unique_ptr<NCCLGroupState> state) : s_(std::move(state)) {}

ProcessGroupNCCL::~ProcessGroupNCCL() {
  try {
    release();
  } catch (...) {  // a destructor must not throw; the process is likely exiting
  }
}

void ProcessGroupNCCL::release() {
  std::lock_guard<std::mutex> l(s_->m);
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) return;  // the CUDA runtime is gone (process exit)
  ca::DeviceGuard g(s_->device);
  if (!s_->aborted && s_->comm != nullptr) {
    // Let queued operations finish (bounded), then release the communicator.
    auto deadline = Clock::now() + std::min<Duration>(timeout_, std::chrono::seconds(10));
    bool drained = false;
    while (Clock::now() < deadline) {
      cudaError_t e = cudaStreamQuery(s_->stream);
      if (e != cudaErrorNotReady) {
        drained = e == cudaSuccess;
        if (!drained) (void)cudaGetLastError();
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    ncclResult_t rc = drained ? settle(s_->comm, ncclCommFinalize(s_->comm), deadline) : ncclInternalError;
    if (rc == ncclSuccess) {
      (void)settle(s_->comm, ncclCommDestroy(s_->comm), Clock::now() + std::chrono::seconds(10));
    } else {
      (void)ncclCommAbort(s_->comm);
    }
    s_->comm = nullptr;
  }
  s_->inflight.clear();
  s_->one = Tensor();
  if (s_->stream != nullptr) (void)cudaStreamDestroy(s_->stream);
}

std::shared_ptr<ProcessGroupNCCL> ProcessGroupNCCL::create(const std::shared_ptr<ProcessGroup>& bootstrap,
                                                           NCCLOptions options) {
  WEFT_CHECK(bootstrap != nullptr, "ProcessGroupNCCL::create: the bootstrap group is null");
  const int n_dev = ca::cuda_device_count();
  WEFT_CHECK(n_dev > 0, "ProcessGroupNCCL: no CUDA device is visible (cudaGetDeviceCount reports none)");
  const int device = options.device >= 0 ? options.device : local_rank() % n_dev;
  WEFT_CHECK(device < n_dev, "ProcessGroupNCCL: device ", device, " requested but only ", n_dev, " visible");
  const Duration timeout = default_timeout_from_env();
  auto mpi = std::dynamic_pointer_cast<ProcessGroupMPI>(bootstrap);
  std::string name = "nccl:" + (mpi != nullptr ? mpi->name() : "group" + ranks_str(bootstrap->global_ranks()));
  // Note [nccl desync check]: NCCL ranks are bootstrap ranks.
  const bool debug = debug_collectives_from_env() && bootstrap->size() > 1;
  WEFT_CHECK(!debug || mpi != nullptr, name,
             ": WEFT_DEBUG_COLLECTIVES needs an MPI bootstrap group to exchange fingerprints, got a ",
             bootstrap->backend_name(), " group");

  // The unique id: made by rank 0, broadcast through the bootstrap group.
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  Tensor id_bytes = zeros({static_cast<int64_t>(sizeof(ncclUniqueId))}, {DType::UInt8});  // (128,)
  if (bootstrap->rank() == 0) {
    ncclResult_t rc = ncclGetUniqueId(&id);
    WEFT_CHECK(rc == ncclSuccess, name, ": ncclGetUniqueId failed: ", nccl_text(rc, nullptr));
    std::memcpy(id_bytes.raw_data(), &id, sizeof(id));
  }
  if (bootstrap->size() > 1) bootstrap->broadcast(id_bytes, {0})->wait();
  std::memcpy(&id, id_bytes.raw_data(), sizeof(id));

  ca::DeviceGuard g(device);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // Note [nccl non-blocking]
  ncclComm_t comm = nullptr;
  const auto issued = Clock::now();
  ncclResult_t rc = ncclCommInitRankConfig(&comm, bootstrap->size(), id, bootstrap->rank(), &config);
  std::vector<int> globals = bootstrap->global_ranks();
  auto alive = [&] {
    double longest = 0;
    std::vector<int> g_peers;
    for (int p = 0; p < bootstrap->size(); ++p)
      if (p != bootstrap->rank()) g_peers.push_back(globals[p]);
    std::vector<int> dead = unresponsive_ranks(g_peers, liveness_threshold(timeout), &longest);
    if (dead.empty()) return;
    if (comm != nullptr) (void)ncclCommAbort(comm);
    WEFT_ERROR(name, ": initialising the communicator failed: missing ranks: ", ranks_str(dead),
               " stopped responding (no heartbeat for ", std::round(longest * 10) / 10,
               " s: the process died or is stuck)");
  };
  if (comm != nullptr) rc = settle(comm, rc, issued + timeout, alive);
  if (rc != ncclSuccess) {
    std::string why =
        rc == ncclInProgress ? weft::detail::str_cat("timed out after ", seconds(timeout), " s") : nccl_text(rc, comm);
    if (comm != nullptr) (void)ncclCommAbort(comm);
    WEFT_ERROR(name, ": initialising the communicator (rank ", bootstrap->rank(), " of ", bootstrap->size(),
               " on cuda:", device, ") failed: ", why);
  }
  auto pg = std::shared_ptr<ProcessGroupNCCL>(new ProcessGroupNCCL(make_state(comm, device, globals, name)));
  pg->set_timeout(timeout);
  pg->s_->id = 0x6e63636cull;  // "nccl"
  for (int r : globals) pg->s_->id = mix_group_id(pg->s_->id, uint64_t(r) + 1);
  if (debug) pg->s_->debug_mpi = mpi;
  return pg;
}

int ProcessGroupNCCL::rank() const { return s_->rank; }
int ProcessGroupNCCL::size() const { return s_->size; }
const std::vector<int>& ProcessGroupNCCL::global_ranks() const { return s_->global_ranks; }
const std::string& ProcessGroupNCCL::name() const { return s_->name; }
Device ProcessGroupNCCL::device() const { return Device(DeviceType::CUDA, s_->device); }
void* ProcessGroupNCCL::communication_stream() const { return s_->stream; }

int64_t ProcessGroupNCCL::sequence_number() const {
  std::lock_guard<std::mutex> l(s_->m);
  return s_->seq;
}

bool ProcessGroupNCCL::aborted() const {
  std::lock_guard<std::mutex> l(s_->m);
  return s_->aborted;
}

void ProcessGroupNCCL::abort(const std::string& reason) {
  std::lock_guard<std::mutex> l(s_->m);
  s_->abort_locked(reason);
}

WorkPtr ProcessGroupNCCL::allreduce(Tensor& tensor, const AllreduceOptions& opts) {
  check_tensor("allreduce", tensor, *s_);
  ncclRedOp_t op = nccl_op("allreduce", tensor.dtype(), opts.op);
  Issue is(*s_,
           weft::detail::str_cat("allreduce(", tensor.dtype(), ", ", tensor.numel(), " elements, ",
                                 reduce_op_name(opts.op), ")"),
           {0, 0, Fingerprint::kAllreduce, int64_t(tensor.dtype()), tensor.numel(), int64_t(opts.op)}, -1, opts.timeout,
           timeout_);
  is.op().keep = {tensor};
  if (tensor.numel() > 0)
    is.nccl(ncclAllReduce(tensor.raw_data(), tensor.raw_data(), static_cast<size_t>(tensor.numel()),
                          nccl_type(tensor.dtype()), op, is.comm(), is.stream()),
            "ncclAllReduce");
  return is.commit(shared_from_this());
}

WorkPtr ProcessGroupNCCL::broadcast(Tensor& tensor, const BroadcastOptions& opts) {
  check_tensor("broadcast", tensor, *s_);
  WEFT_CHECK(opts.root >= 0 && opts.root < s_->size, "broadcast: root ", opts.root, " is not a rank of ", s_->name,
             " (size ", s_->size, ")");
  Issue is(
      *s_,
      weft::detail::str_cat("broadcast(", tensor.dtype(), ", ", tensor.numel(), " elements, root ", opts.root, ")"),
      {0, 0, Fingerprint::kBroadcast, int64_t(tensor.dtype()), tensor.numel(), opts.root}, -1, opts.timeout, timeout_);
  is.op().keep = {tensor};
  if (tensor.numel() > 0)
    is.nccl(ncclBroadcast(tensor.raw_data(), tensor.raw_data(), static_cast<size_t>(tensor.numel()),
                          nccl_type(tensor.dtype()), opts.root, is.comm(), is.stream()),
            "ncclBroadcast");
  return is.commit(shared_from_this());
}

WorkPtr ProcessGroupNCCL::allgather(std::vector<Tensor>& outputs, const Tensor& input, const AllgatherOptions& opts) {
  check_tensor("allgather", input, *s_);
  WEFT_CHECK(static_cast<int>(outputs.size()) == s_->size, "allgather: expected ", s_->size,
             " output tensors (group size), got ", outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    check_tensor("allgather", outputs[i], *s_);
    WEFT_CHECK(outputs[i].sizes() == input.sizes() && outputs[i].dtype() == input.dtype(), "allgather: output ", i,
               " has shape ", shape_str(outputs[i].sizes()), " and dtype ", outputs[i].dtype(), " but the input has ",
               shape_str(input.sizes()), " and ", input.dtype());
  }
  Issue is(*s_, weft::detail::str_cat("allgather(", input.dtype(), ", ", input.numel(), " elements)"),
           {0, 0, Fingerprint::kAllgather, int64_t(input.dtype()), input.numel(), 0}, -1, opts.timeout, timeout_);
  is.op().keep = outputs;
  is.op().keep.push_back(input);
  const size_t nb = input.nbytes();
  if (nb > 0) {
    // Staging on the communication stream, then one copy per output.
    Tensor scratch = ca::scratch(nb * s_->size, s_->device, is.stream());  // (size * nbytes,)
    is.op().keep.push_back(scratch);
    char* flat = static_cast<char*>(scratch.raw_data());
    is.nccl(ncclAllGather(input.raw_data(), flat, static_cast<size_t>(input.numel()), nccl_type(input.dtype()),
                          is.comm(), is.stream()),
            "ncclAllGather");
    for (size_t i = 0; i < outputs.size(); ++i)
      WEFT_CUDA_CHECK(cudaMemcpyAsync(outputs[i].raw_data(), flat + i * nb, nb, cudaMemcpyDeviceToDevice, is.stream()));
  }
  return is.commit(shared_from_this());
}

WorkPtr ProcessGroupNCCL::reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                         const ReduceScatterOptions& opts) {
  check_tensor("reduce_scatter", output, *s_);
  WEFT_CHECK(static_cast<int>(inputs.size()) == s_->size, "reduce_scatter: expected ", s_->size,
             " input tensors (group size), got ", inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_tensor("reduce_scatter", inputs[i], *s_);
    WEFT_CHECK(inputs[i].sizes() == output.sizes() && inputs[i].dtype() == output.dtype(), "reduce_scatter: input ", i,
               " has shape ", shape_str(inputs[i].sizes()), " and dtype ", inputs[i].dtype(), " but the output has ",
               shape_str(output.sizes()), " and ", output.dtype());
  }
  ncclRedOp_t op = nccl_op("reduce_scatter", output.dtype(), opts.op);
  Issue is(*s_,
           weft::detail::str_cat("reduce_scatter(", output.dtype(), ", ", output.numel(), " elements, ",
                                 reduce_op_name(opts.op), ")"),
           {0, 0, Fingerprint::kReduceScatter, int64_t(output.dtype()), output.numel(), int64_t(opts.op)}, -1,
           opts.timeout, timeout_);
  is.op().keep = inputs;
  is.op().keep.push_back(output);
  const size_t nb = output.nbytes();
  if (nb > 0) {
    Tensor scratch = ca::scratch(nb * s_->size, s_->device, is.stream());  // (size * nbytes,)
    is.op().keep.push_back(scratch);
    char* flat = static_cast<char*>(scratch.raw_data());
    for (size_t i = 0; i < inputs.size(); ++i)
      WEFT_CUDA_CHECK(cudaMemcpyAsync(flat + i * nb, inputs[i].raw_data(), nb, cudaMemcpyDeviceToDevice, is.stream()));
    is.nccl(ncclReduceScatter(flat, output.raw_data(), static_cast<size_t>(output.numel()), nccl_type(output.dtype()),
                              op, is.comm(), is.stream()),
            "ncclReduceScatter");
  }
  return is.commit(shared_from_this());
}

namespace {
void check_peer(const char* what, int peer, const NCCLGroupState& s, int tag) {
  WEFT_CHECK(peer >= 0 && peer < s.size, what, ": rank ", peer, " is not in ", s.name, " (size ", s.size, ")");
  WEFT_CHECK(peer != s.rank, what, ": rank ", peer, " is this rank; send/recv to self is not supported");
  WEFT_CHECK(tag == 0, what, ": NCCL send/recv has no tags; tag must be 0, got ", tag);
}
}  // namespace

WorkPtr ProcessGroupNCCL::send(const Tensor& tensor, int dst, const SendRecvOptions& opts) {
  check_tensor("send", tensor, *s_);
  check_peer("send", dst, *s_, opts.tag);
  Issue is(*s_, weft::detail::str_cat("send(", tensor.dtype(), ", ", tensor.numel(), " elements, to rank ", dst, ")"),
           {-1, 0, Fingerprint::kSendRecv, int64_t(tensor.dtype()), tensor.numel(), send_recv_sub(s_->rank, dst)}, dst,
           opts.timeout, timeout_);
  is.op().keep = {tensor};
  is.nccl(ncclSend(tensor.raw_data(), static_cast<size_t>(tensor.numel()), nccl_type(tensor.dtype()), dst, is.comm(),
                   is.stream()),
          "ncclSend");
  return is.commit(shared_from_this());
}

WorkPtr ProcessGroupNCCL::recv(Tensor& tensor, int src, const SendRecvOptions& opts) {
  check_tensor("recv", tensor, *s_);
  check_peer("recv", src, *s_, opts.tag);
  Issue is(*s_, weft::detail::str_cat("recv(", tensor.dtype(), ", ", tensor.numel(), " elements, from rank ", src, ")"),
           {-1, 0, Fingerprint::kSendRecv, int64_t(tensor.dtype()), tensor.numel(), send_recv_sub(src, s_->rank)}, src,
           opts.timeout, timeout_);
  is.op().keep = {tensor};
  is.nccl(ncclRecv(tensor.raw_data(), static_cast<size_t>(tensor.numel()), nccl_type(tensor.dtype()), src, is.comm(),
                   is.stream()),
          "ncclRecv");
  return is.commit(shared_from_this());
}

WorkPtr ProcessGroupNCCL::barrier(const BarrierOptions& opts) {
  Issue is(*s_, "barrier()", {0, 0, Fingerprint::kBarrier, -1, 0, 0}, -1, opts.timeout, timeout_);
  is.nccl(ncclAllReduce(s_->one.raw_data(), s_->one.raw_data(), 1, ncclFloat32, ncclSum, is.comm(), is.stream()),
          "ncclAllReduce");
  return is.commit(shared_from_this());
}

std::shared_ptr<ProcessGroup> ProcessGroupNCCL::new_group(const std::vector<int>& ranks) {
  WEFT_CHECK(!ranks.empty(), "new_group: the rank list is empty");
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    WEFT_CHECK(sorted[i] >= 0 && sorted[i] < s_->size, "new_group: rank ", sorted[i], " is not in ", s_->name,
               " (size ", s_->size, ")");
    WEFT_CHECK(i == 0 || sorted[i] != sorted[i - 1], "new_group: rank ", sorted[i], " is listed twice");
  }
  std::vector<int> globals;
  uint64_t h = s_->id;
  for (int r : ranks) {
    globals.push_back(s_->global_ranks[r]);
    h = mix_group_id(h, uint64_t(s_->global_ranks[r]) + 1);
  }
  auto me = std::find(ranks.begin(), ranks.end(), s_->rank);
  const bool member = me != ranks.end();
  ncclComm_t child = nullptr;
  {
    std::lock_guard<std::mutex> l(s_->m);
    std::string what = weft::detail::str_cat("new_group", ranks_str(ranks), " (sequence ", s_->seq, ")");
    s_->check_usable(what);
    const int64_t seq = s_->seq++;
    if (s_->debug_mpi != nullptr) {  // Note [nccl desync check]
      const int64_t list_hash = int64_t(h & 0x7fffffffffffull);
      Fingerprint fp{seq, int64_t(s_->id), Fingerprint::kNewGroup, -1, int64_t(ranks.size()), list_hash};
      s_->debug_mpi->check_fingerprint(fp, -1, s_->name, what, timeout_);
    }
    ca::DeviceGuard g(s_->device);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // Note [nccl non-blocking]
    const auto deadline = Clock::now() + timeout_;
    ncclResult_t rc = ncclCommSplit(s_->comm, member ? 0 : NCCL_SPLIT_NOCOLOR,
                                    member ? static_cast<int>(me - ranks.begin()) : 0, &child, &config);
    rc = settle(s_->comm, rc, deadline);
    if (rc == ncclSuccess && child != nullptr) rc = settle(child, ncclInProgress, deadline);
    if (rc != ncclSuccess) {
      std::string msg = weft::detail::str_cat(what, " on ", s_->name, ": ncclCommSplit ",
                                              rc == ncclInProgress
                                                  ? weft::detail::str_cat("timed out after ", seconds(timeout_), " s")
                                                  : "failed: " + nccl_text(rc, s_->comm),
                                              "; communicator aborted");
      if (child != nullptr) (void)ncclCommAbort(child);
      s_->abort_locked(msg);
      WEFT_ERROR(msg);
    }
  }
  std::shared_ptr<ProcessGroupNCCL> pg;
  if (member) {
    pg = std::shared_ptr<ProcessGroupNCCL>(
        new ProcessGroupNCCL(make_state(child, s_->device, globals, "nccl:group" + ranks_str(globals))));
    pg->set_timeout(timeout_);
    pg->s_->id = h;
  }
  // Note [nccl desync check]: the child's MPI group, made by every parent rank
  // (MPI_Group_incl keeps the order of `ranks`, as the split key does).
  if (s_->debug_mpi != nullptr) {
    auto sub = std::static_pointer_cast<ProcessGroupMPI>(s_->debug_mpi->new_group(ranks));
    if (pg != nullptr) pg->s_->debug_mpi = std::move(sub);
  }
  return pg;
}

WorkPtr ProcessGroupNCCL::batch_isend_irecv(const std::vector<P2POp>&, const BatchP2POptions&) {
  WEFT_ERROR("batch_isend_irecv is not implemented on nccl yet");
}

}  // namespace weft::parallel
