// Completion, timeouts and liveness errors of MPI operations (work_mpi.h).
#include "parallel/comm/mpi/work_mpi.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "core/error.h"
#include "parallel/comm/mpi/mpi_common.h"

namespace weft::parallel::detail {

void WorkState::expect(size_t n) {
  reqs.assign(n, MPI_REQUEST_NULL);
  statuses.resize(n);
  rcs.assign(n, MPI_SUCCESS);
  finished.assign(n, 0);
}

bool WorkState::test_all() {
  bool all = true;
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (finished[i]) continue;
    int flag = 0;
    int rc = MPI_Test(&reqs[i], &flag, &statuses[i]);
    if (rc != MPI_SUCCESS) {  // e.g. MPI_ERR_TRUNCATE: the request is over
      rcs[i] = rc;
      finished[i] = 1;
      continue;
    }
    if (flag) finished[i] = 1;
    else all = false;
  }
  return all;
}

// Note [progress thread]: progresses MPI (every outstanding request) and says
// whether this operation is still unfinished, without completing or freeing
// its requests.
bool WorkState::pending() {
  if (done) return false;
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (finished[i] || reqs[i] == MPI_REQUEST_NULL) continue;
    int flag = 0;
    if (MPI_Request_get_status(reqs[i], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
    if (!flag) return true;
  }
  return false;
}

void check_alive(MPIGroupState& gs, const std::vector<int>& peers, const std::string& what, Duration timeout,
                 Clock::time_point issued) {
  double longest = 0;
  std::vector<int> dead = gs.silent(peers, liveness_threshold(timeout), &longest);
  if (dead.empty()) return;
  failure_flag() = true;  // the request stays pending
  double since = std::chrono::duration<double>(Clock::now() - issued).count();
  WEFT_ERROR(what, " on ", gs.name, " failed: ", gs.missing_text(dead), " stopped responding (no heartbeat for ",
             std::round(longest * 10) / 10, " s: the process died or is stuck), ", std::round(since * 10) / 10,
             " s after it was issued (timeout ", timeout.count() / 1000.0, " s)");
}

bool poll_until(MPI_Request* reqs, int n, MPIGroupState& gs, const std::vector<int>& peers, const std::string& what_seq,
                Duration timeout, Clock::time_point issued) {
  auto start = Clock::now();
  auto deadline = issued + timeout;
  auto next_check = start + kLivenessPollPeriod;
  while (true) {
    int done = 0;
    {
      std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
      WEFT_MPI_CHECK(MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE), what_seq);
    }
    if (done) return true;
    auto now = Clock::now();
    if (now >= deadline) return false;
    if (now >= next_check) {
      check_alive(gs, peers, what_seq, timeout, issued);
      next_check = now + kLivenessPollPeriod;
    }
    if (now - start < std::chrono::milliseconds(1)) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

namespace {

class WorkMPI final : public Work {
 public:
  explicit WorkMPI(std::shared_ptr<WorkState> st) : st_(std::move(st)) {}
  ~WorkMPI() override {
    // An unfinished request still owns its buffers: leak them rather than let
    // MPI write into freed memory (this only happens after an error).
    if (!st_->done) {
      failure_flag() = true;
      static auto* graveyard = new std::vector<std::shared_ptr<WorkState>>;
      std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
      graveyard->push_back(st_);
    }
  }

  bool is_completed() override {
    std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
    if (st_->done) return true;
    if (!st_->test_all()) return false;
    st_->done = true;
    // A collective's MPI error is the error (and MPI's state is then
    // suspect); point-to-point finishes read their requests' results
    // themselves (Note [p2p headers]): a truncated receive is over and leaves
    // nothing pending.
    auto failed = std::find_if(st_->rcs.begin(), st_->rcs.end(), [](int rc) { return rc != MPI_SUCCESS; });
    if (failed != st_->rcs.end() && st_->seq >= 0) failure_flag() = true;
    try {
      if (failed != st_->rcs.end() && st_->seq >= 0) {
        WEFT_ERROR(what_seq(), " on ", st_->gs->name, " failed in MPI: ", mpi_error_string(*failed));
      }
      if (st_->finish) st_->finish(*st_);
      if (failed != st_->rcs.end()) {
        WEFT_ERROR(what_seq(), " on ", st_->gs->name, " failed in MPI: ", mpi_error_string(*failed));
      }
    } catch (const Error& e) {
      st_->error = e.message();
    }
    st_->keep.clear();
    st_->buffer.clear();
    st_->buffer.shrink_to_fit();
    return true;
  }

  void wait(Duration timeout) override {
    auto start = Clock::now();
    auto deadline = timeout == Duration::zero() ? st_->issued + st_->timeout : start + timeout;
    Duration limit = timeout == Duration::zero() ? st_->timeout : timeout;
    auto next_check = start + kLivenessPollPeriod;
    while (!is_completed()) {
      auto now = Clock::now();
      if (now >= deadline) timed_out(limit);
      if (now >= next_check) {  // Note [liveness]
        std::vector<int> waited_on;
        {
          std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
          waited_on = peers();
        }
        check_alive(*st_->gs, waited_on, what_seq(), st_->timeout, st_->issued);
        next_check = now + kLivenessPollPeriod;
      }
      if (now - start < std::chrono::milliseconds(1)) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    if (!st_->error.empty()) WEFT_ERROR(st_->error);
  }

 private:
  // The ranks this operation still waits on (group ranks): every peer for a
  // collective, the peers of unfinished requests for point-to-point.
  std::vector<int> peers() const {
    if (st_->seq >= 0) return st_->gs->peers();
    std::vector<int> out;
    for (size_t i = 0; i < st_->reqs.size(); ++i)
      if (!st_->finished[i] && std::find(out.begin(), out.end(), st_->req_peer[i]) == out.end())
        out.push_back(st_->req_peer[i]);
    return out;
  }
  std::string what_seq() const {
    if (st_->seq < 0) return st_->what;
    return weft::detail::str_cat(st_->what, " (sequence ", st_->seq, ")");
  }
  // "; pending: send(...), recv(...)" for a batch.
  std::string pending_ops() const {
    if (!st_->batch) return "";
    std::vector<std::string> labels;
    for (size_t i = 0; i < st_->reqs.size(); ++i)
      if (!st_->finished[i] && std::find(labels.begin(), labels.end(), st_->req_label[i]) == labels.end())
        labels.push_back(st_->req_label[i]);
    std::string s = "; pending: ";
    for (size_t i = 0; i < labels.size(); ++i) s += (i ? ", " : "") + labels[i];
    return s;
  }

  [[noreturn]] void timed_out(Duration limit) {
    std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
    auto& gs = *st_->gs;
    double secs = limit.count() / 1000.0;
    if (st_->seq < 0) {
      std::vector<int> waited_on = peers();
      WEFT_ERROR(st_->what, " on ", gs.name, " timed out after ", secs, " s: ", gs.missing_text(waited_on),
                 waited_on.size() == 1 ? " (the peer did not post the matching operation)"
                                       : " (the peers did not post the matching operations)",
                 pending_ops());
    }
    std::vector<int> miss = gs.missing(st_->seq);
    if (!miss.empty()) {
      WEFT_ERROR(what_seq(), " on ", gs.name, " timed out after ", secs, " s: ", gs.missing_text(miss),
                 " did not arrive");
    }
    // Everyone announced it: name the peers that went silent since (they died
    // or hang inside it; Note [liveness]), with a shorter bar than check_alive's.
    double longest = 0;
    std::vector<int> dead =
        gs.silent(peers(), std::min<Duration>(std::chrono::seconds(1), liveness_threshold(st_->timeout)), &longest);
    if (!dead.empty()) {
      WEFT_ERROR(what_seq(), " on ", gs.name, " timed out after ", secs, " s: ", gs.missing_text(dead),
                 " stopped responding (no heartbeat for ", std::round(longest * 10) / 10,
                 " s: the process died or is stuck)");
    }
    WEFT_ERROR(what_seq(), " on ", gs.name, " timed out after ", secs,
               " s: missing ranks: [] (every rank issued it and is alive; a rank may have issued a different "
               "collective or be slow inside it; WEFT_DEBUG_COLLECTIVES=1 checks the sequence)");
  }
  std::shared_ptr<WorkState> st_;
};

}  // namespace

WorkPtr launch_work(const std::shared_ptr<WorkState>& st, int rc) {
  if (rc != MPI_SUCCESS) {
    failure_flag() = true;
    st->done = true;
    // Requests posted before the failing one still own their buffers.
    if (std::any_of(st->reqs.begin(), st->reqs.end(), [](MPI_Request r) { return r != MPI_REQUEST_NULL; })) {
      static auto* graveyard = new std::vector<std::shared_ptr<WorkState>>;
      graveyard->push_back(st);
    }
    WEFT_ERROR(st->what, " failed to start in MPI: ", mpi_error_string(rc));
  }
  watch_progress(st);  // Note [progress thread]
  return std::make_shared<WorkMPI>(st);
}

}  // namespace weft::parallel::detail
