// The MPI heartbeat thread and the liveness queries built on it (contract in
// liveness.h).
//
// Note [liveness]: announcements cannot tell a rank that died (or hangs) after
// issuing collective s from one that is merely slow: without ULFM, Open MPI
// 4.1 reports nothing to the survivors (MPI_ERRORS_RETURN or not, the pending
// request just never completes; measured with SIGKILL under --enable-recovery).
// So the world group runs a heartbeat thread (LivenessMonitor, started by
// init_process_group, stopped by destroy_process_group, or at the latest by
// MPI_Finalize through an MPI_COMM_SELF attribute callback, or by exit()):
// every kHeartbeatPeriod it sends an empty message to every peer on its own
// duplicate of MPI_COMM_WORLD and receives the peers' ones, recording per
// global rank when it last heard from it. The thread keeps beating while the
// rank computes, so a live process is silent only if it is stopped or starved
// for seconds. A Work waiting on peers checks, every few milliseconds, whether
// one of them has been silent for liveness_threshold(timeout) (half the
// timeout, between 1 s and 30 s; WEFT_HEARTBEAT_TIMEOUT_S overrides) and then
// fails at once, naming those ranks, well before the timeout. At a timeout,
// peers silent for over a second are named too (they died late in it).
//
// Note [progress thread]: Open MPI 4.1 advances a non-blocking collective
// (libnbc) only while some thread of the process is inside an MPI call, so an
// allreduce issued early in a long computation would otherwise mostly run when
// the caller finally tests or waits on it. While issued operations are
// pending, the heartbeat thread therefore also polls them every
// progress_period() (MPI_Request_get_status under mpi_mutex(): it progresses
// every outstanding request but frees none, so completion and the finish step
// stay with the Work's own is_completed()/wait()); with nothing pending it
// sleeps until the next beat. WEFT_MPI_PROGRESS_US sets the period (0 turns
// the polling off).
#include "parallel/comm/mpi/liveness.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <thread>

#include "core/error.h"
#include "parallel/comm/mpi/mpi_common.h"

namespace weft::parallel {

using detail::failure_flag;
using detail::kHeartbeatTag;
using detail::now_ns;
using detail::Progressable;

namespace {

constexpr auto kHeartbeatPeriod = std::chrono::milliseconds(100);
constexpr int64_t kDefaultProgressUs = 100;  // Note [progress thread]

// Note [progress thread]: the polling period; zero means no polling.
std::chrono::microseconds progress_period() {
  static const std::chrono::microseconds p = [] {
    const char* v = std::getenv("WEFT_MPI_PROGRESS_US");
    if (v == nullptr || *v == '\0') return std::chrono::microseconds(kDefaultProgressUs);
    char* end = nullptr;
    long long us = std::strtoll(v, &end, 10);
    WEFT_CHECK(end != v && *end == '\0' && us >= 0,
               "WEFT_MPI_PROGRESS_US must be a non-negative number of microseconds, got '", v, "'");
    return std::chrono::microseconds(us);
  }();
  return p;
}

// The heartbeat thread of Note [liveness], which also progresses pending
// operations (Note [progress thread]).
class LivenessMonitor {
 public:
  // Collective over MPI_COMM_WORLD (duplicates it); the caller holds mpi_mutex().
  LivenessMonitor() {
    WEFT_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "heartbeat monitor: duplicating MPI_COMM_WORLD");
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    const int64_t t = now_ns();
    last_ = std::make_unique<std::atomic<int64_t>[]>(size_);
    for (int r = 0; r < size_; ++r) last_[r] = t;  // a peer that never beats counts from here
    sends_.assign(size_, MPI_REQUEST_NULL);
    thread_ = std::thread([this] { run(); });
  }
  LivenessMonitor(const LivenessMonitor&) = delete;
  LivenessMonitor& operator=(const LivenessMonitor&) = delete;

  // Stops and joins the thread, then releases its MPI objects. The caller
  // must not hold mpi_mutex() (the thread takes it to beat).
  void stop() {
    {
      std::lock_guard<std::mutex> l(m_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    for (auto& r : sends_)
      if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
    if (!failure_flag()) MPI_Comm_free(&comm_);
  }

  // Receives the heartbeats that arrived. Caller holds mpi_mutex().
  void drain() {
    for (int k = 0; k < 1024; ++k) {
      int flag = 0;
      MPI_Status st;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kHeartbeatTag, comm_, &flag, &st) != MPI_SUCCESS || !flag) return;
      if (MPI_Recv(nullptr, 0, MPI_BYTE, st.MPI_SOURCE, kHeartbeatTag, comm_, MPI_STATUS_IGNORE) != MPI_SUCCESS) return;
      last_[st.MPI_SOURCE] = now_ns();
    }
  }

  // Has the thread progress `st` until it completes (Note [progress thread]).
  // Caller holds mpi_mutex().
  void watch(const std::shared_ptr<Progressable>& st) {
    if (progress_period().count() == 0) return;
    {
      std::lock_guard<std::mutex> l(m_);
      watched_.push_back(st);
    }
    cv_.notify_all();
  }

  // Seconds since global rank r was last heard from (after drain()).
  double silence_s(int r) const { return static_cast<double>(now_ns() - last_[r].load()) * 1e-9; }
  int size() const { return size_; }

 private:
  // Lock order: mpi_mutex() before m_; the thread never takes mpi_mutex()
  // while holding m_.
  void run() {
    auto next_beat = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> l(m_);
    while (!stop_) {
      const bool busy = !watched_.empty();
      l.unlock();
      if (std::chrono::steady_clock::now() >= next_beat) {
        beat();
        next_beat = std::chrono::steady_clock::now() + kHeartbeatPeriod;
      }
      if (busy) poll();
      l.lock();
      if (watched_.empty()) cv_.wait_until(l, next_beat, [this] { return stop_ || !watched_.empty(); });
      else cv_.wait_for(l, progress_period(), [this] { return stop_; });
    }
  }

  // One progress call for the watched operations; forgets finished ones.
  void poll() {
    std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
    std::lock_guard<std::mutex> l(m_);
    std::erase_if(watched_, [](const std::weak_ptr<Progressable>& w) {
      auto st = w.lock();
      return !st || !st->pending();
    });
  }

  void beat() {
    std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      int done = 1;
      if (sends_[p] != MPI_REQUEST_NULL && MPI_Test(&sends_[p], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) continue;
      if (!done) continue;  // one beat in flight per peer (a dead peer's queue does not grow)
      MPI_Isend(nullptr, 0, MPI_BYTE, p, kHeartbeatTag, comm_, &sends_[p]);
    }
    drain();
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::unique_ptr<std::atomic<int64_t>[]> last_;  // per global rank: now_ns() when last heard
  std::vector<MPI_Request> sends_;
  std::thread thread_;
  std::mutex m_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<std::weak_ptr<Progressable>> watched_;  // guarded by m_
};

// The running monitor, or nullptr. Read and used under mpi_mutex().
LivenessMonitor*& monitor_slot() {
  static LivenessMonitor* m = nullptr;
  return m;
}

// Stops and joins the heartbeat thread, if any. The caller must not hold
// mpi_mutex() (the thread takes it to beat).
void stop_monitor() {
  LivenessMonitor* m = nullptr;
  {
    std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
    std::swap(m, monitor_slot());
  }
  if (m != nullptr) {
    m->stop();
    delete m;
  }
}

int stop_monitor_at_finalize(MPI_Comm, int, void*, void*) {
  stop_monitor();
  return MPI_SUCCESS;
}

}  // namespace

std::recursive_mutex& mpi_mutex() {
  static std::recursive_mutex m;
  return m;
}

Duration liveness_threshold(Duration timeout) {
  const char* v = std::getenv("WEFT_HEARTBEAT_TIMEOUT_S");
  if (v != nullptr && *v != '\0') {
    char* end = nullptr;
    double s = std::strtod(v, &end);
    WEFT_CHECK(end != v && *end == '\0' && s > 0 && s <= 1e9,
               "WEFT_HEARTBEAT_TIMEOUT_S must be a positive number of seconds (at most 1e9), got '", v, "'");
    return Duration(static_cast<int64_t>(s * 1000.0));
  }
  return std::clamp<Duration>(timeout / 2, std::chrono::seconds(1), std::chrono::seconds(30));
}

bool liveness_monitor_running() {
  std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
  return monitor_slot() != nullptr;
}

std::vector<int> unresponsive_ranks(const std::vector<int>& global_ranks, Duration threshold, double* longest_s) {
  std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
  std::vector<int> out;
  if (longest_s) *longest_s = 0;
  LivenessMonitor* m = monitor_slot();
  if (m == nullptr) return out;
  m->drain();
  const double limit = static_cast<double>(threshold.count()) / 1000.0;
  for (int r : global_ranks) {
    if (r < 0 || r >= m->size()) continue;
    double s = m->silence_s(r);
    if (s >= limit) {
      out.push_back(r);
      if (longest_s) *longest_s = std::max(*longest_s, s);
    }
  }
  return out;
}

std::vector<int> unresponsive_group_ranks(const std::vector<int>& peers, const std::vector<int>& group_globals,
                                          Duration threshold, double* longest_s) {
  std::vector<int> globals;
  for (int p : peers) globals.push_back(group_globals[p]);
  std::vector<int> dead = unresponsive_ranks(globals, threshold, longest_s);
  std::vector<int> out;
  for (int p : peers)
    if (std::find(dead.begin(), dead.end(), group_globals[p]) != dead.end()) out.push_back(p);
  return out;
}

namespace detail {

void start_liveness_monitor() {
  if (monitor_slot() != nullptr) return;
  monitor_slot() = new LivenessMonitor();
  static bool hooks = false;
  if (!hooks) {
    hooks = true;
    // Stop the thread before MPI goes away even when the program skips
    // destroy_process_group: MPI_Finalize first deletes MPI_COMM_SELF's
    // attributes (MPI standard), and exit() runs atexit handlers.
    int key = MPI_KEYVAL_INVALID;
    if (MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, stop_monitor_at_finalize, &key, nullptr) == MPI_SUCCESS)
      MPI_Comm_set_attr(MPI_COMM_SELF, key, nullptr);
    std::atexit([] { stop_monitor(); });
  }
}

void stop_liveness_monitor() { stop_monitor(); }

void watch_progress(const std::shared_ptr<Progressable>& op) {
  if (LivenessMonitor* m = monitor_slot()) m->watch(op);
}

}  // namespace detail

}  // namespace weft::parallel
