// Polling, timeouts and aborts of NCCL operations; issuing them (work_nccl.h).
#include "parallel/comm/nccl/work_nccl.h"

#include <chrono>
#include <thread>

#include "core/cuda/stream.h"

namespace weft::parallel::detail {

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
    auto next_check = start + kNcclLivenessPollPeriod;
    while (true) {
      {
        std::lock_guard<std::mutex> l(gs_->m);
        if (poll_locked()) break;
      }
      auto now = Clock::now();
      if (now >= deadline) timed_out(limit, now >= op_->issued + op_->timeout);
      if (now >= next_check) {
        gs_->check_alive(peers(), op_->what_seq(), op_->timeout, op_->issued);
        next_check = now + kNcclLivenessPollPeriod;
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
  std::vector<int> peers() const { return op_->seq < 0 ? op_->peers : gs_->peers(); }

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

}  // namespace

void check_tensor(const char* what, const Tensor& t, const NCCLGroupState& gs) {
  WEFT_CHECK(t.defined(), what, ": tensor is undefined");
  WEFT_CHECK(t.device().is_cuda(), what, ": the NCCL backend takes CUDA tensors, got a tensor on ", t.device(),
             " (use the MPI group for CPU tensors)");
  WEFT_CHECK(t.device().index == gs.device, what, ": tensor is on ", t.device(), " but this rank's NCCL group ",
             gs.name, " uses cuda:", gs.device);
  WEFT_CHECK(t.is_contiguous(), what, ": tensor must be contiguous (shape ", shape_str(t.sizes()), ")");
}

Issue::Issue(NCCLGroupState& gs, std::string what, Fingerprint fp, int peer, Duration timeout, Duration group_timeout)
    : gs_(gs), lock_(gs.m), guard_(gs.device) {
  gs_.check_usable(what);
  op_ = std::make_shared<NCCLOpState>();
  op_->what = std::move(what);
  op_->seq = peer < 0 ? gs_.seq++ : -1;
  if (peer >= 0) op_->peers = {peer};
  fp.seq = op_->seq;
  start(timeout, group_timeout, {{peer, fp}});
}

Issue::Issue(NCCLGroupState& gs, std::string what, std::vector<int> peers,
             const std::vector<std::pair<int, Fingerprint>>& checks, Duration timeout, Duration group_timeout)
    : gs_(gs), lock_(gs.m), guard_(gs.device) {
  gs_.check_usable(what);
  op_ = std::make_shared<NCCLOpState>();
  op_->what = std::move(what);
  op_->peers = std::move(peers);
  start(timeout, group_timeout, checks);
}

void Issue::start(Duration timeout, Duration group_timeout, const std::vector<std::pair<int, Fingerprint>>& checks) {
  op_->timeout = timeout == Duration::zero() ? group_timeout : timeout;
  op_->issued = Clock::now();
  if (gs_.debug_mpi != nullptr && gs_.size > 1) {  // Note [nccl desync check]
    for (auto [peer, fp] : checks) {
      fp.group = static_cast<int64_t>(gs_.id);
      gs_.debug_mpi->check_fingerprint(fp, peer, gs_.name, op_->what_seq(), op_->timeout);
    }
  }
  // Note [nccl ordering] (core/cuda/stream.h rule 2).
  weft::cuda::Event ready;
  ready.record(ca::compute_stream(gs_.device));
  ready.block(gs_.stream);
  op_->done_owner = std::make_shared<EventOwner>();
  WEFT_CUDA_CHECK(cudaEventCreateWithFlags(&op_->done_owner->event, cudaEventDisableTiming));
  op_->done_event = op_->done_owner->event;
}

void Issue::nccl(ncclResult_t rc, const char* call) {
  // Note [nccl non-blocking]: the call may be in progress while a peer is dead;
  // the heartbeats name it long before the timeout (the group's mutex is held).
  const std::vector<int> peer_list = op_->seq < 0 ? op_->peers : gs_.peers();
  const std::string while_doing = weft::detail::str_cat("while ", call, " was being queued");
  rc = settle(gs_.comm, rc, op_->issued + op_->timeout, [&] {
    gs_.check_alive(peer_list, op_->what_seq(), op_->timeout, op_->issued, /*locked=*/true, while_doing);
  });
  if (rc == ncclSuccess) return;
  std::string msg =
      rc == ncclInProgress
          ? weft::detail::str_cat(op_->what_seq(), " on ", gs_.name, ": ", call,
                                  " did not return within the timeout of ", seconds(op_->timeout), " s")
          : weft::detail::str_cat(op_->what_seq(), " on ", gs_.name, ": ", call, " failed: ", nccl_text(rc, gs_.comm));
  msg += "; communicator aborted";
  gs_.abort_locked(msg);
  WEFT_ERROR(msg);
}

WorkPtr Issue::commit(std::shared_ptr<ProcessGroupNCCL> self) {
  WEFT_CUDA_CHECK(cudaEventRecord(op_->done_event, gs_.stream));
  // Note [cudaFree and communication] (core/cuda/caching_allocator.h): the
  // registry holds the event only, never the operation's tensors.
  ca::note_communication(gs_.device, [owner = op_->done_owner] { return ca::event_finished(owner->event); });
  gs_.reap_locked();
  gs_.inflight.push_back(op_);
  return std::make_shared<WorkNCCL>(std::move(self), &gs_, op_);
}

// A communicator's group state: stream, scratch, rank/size from NCCL.
std::unique_ptr<NCCLGroupState> make_state(ncclComm_t comm, int device, std::vector<int> global_ranks,
                                           std::string name) {
  auto s = std::make_unique<NCCLGroupState>();
  s->comm = comm;
  s->device = device;
  s->global_ranks = std::move(global_ranks);
  s->name = std::move(name);
  WEFT_CHECK(comm != nullptr, s->name, ": no NCCL communicator to read the rank and size of");
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

}  // namespace weft::parallel::detail
