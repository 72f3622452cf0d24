// ProcessGroupMPI: non-blocking MPI collectives with timeouts, arrival
// announcements and the debug-mode fingerprint check. Contract in the header.
//
// Note [arrival announcements]: every group owns two communicators duplicated
// from its parent: `comm` carries the data, `side` carries bookkeeping. When a
// rank issues collective number s it sends the 8-byte value s to every peer on
// `side` (MPI_Isend, tag kAnnounceTag) and drains the announcements that
// reached it (MPI_Iprobe + MPI_Recv), remembering per peer the highest number
// seen. Messages between two ranks on one communicator and tag do not overtake
// each other, so on a timeout of collective s the peers whose highest number is
// below s are exactly those that never issued it: the missing ranks.
// Announcements are tiny eager sends; a dead peer never blocks them.
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
#include "parallel/mpi/process_group_mpi.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <sstream>
#include <thread>

#include "core/dtype.h"
#include "core/error.h"
#include "core/half.h"

namespace weft::parallel {

namespace {

constexpr int kAnnounceTag = 7;
constexpr int kCreateGroupTag = 11;
constexpr int kHeartbeatTag = 13;
constexpr int kFingerprintTag = 17;  // send/recv pairs of check_fingerprint
constexpr auto kHeartbeatPeriod = std::chrono::milliseconds(100);
// How often a waiting Work looks at the heartbeats.
constexpr auto kLivenessPollPeriod = std::chrono::milliseconds(10);
constexpr int64_t kDefaultProgressUs = 100;  // Note [progress thread]
std::atomic<bool> g_failure{false};
std::atomic<int> g_thread_level{-1};

std::string mpi_error_string(int rc) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(buf, len);
}

#define WEFT_MPI_CHECK(call, ...)                                               \
  do {                                                                          \
    int rc_ = (call);                                                           \
    if (rc_ != MPI_SUCCESS) {                                                   \
      g_failure = true;                                                         \
      WEFT_ERROR(__VA_ARGS__, ": ", #call, " failed: ", mpi_error_string(rc_)); \
    }                                                                           \
  } while (0)

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

// ---- dtypes and reduction ops ----

MPI_Datatype mpi_type(DType d) {
  switch (d) {
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::BFloat16:
    case DType::Float16: return MPI_UINT16_T;
    case DType::Int64: return MPI_INT64_T;
    case DType::Int32: return MPI_INT32_T;
    case DType::UInt8: return MPI_UINT8_T;
    case DType::Bool: return MPI_C_BOOL;
  }
  return MPI_DATATYPE_NULL;
}

// float16/bfloat16 reductions: load as float, combine, round back.
template <typename T, int Kind>  // Kind: 0 sum, 1 max, 2 min
void half_reduce(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) {
    float x = static_cast<float>(a[i]), y = static_cast<float>(b[i]);
    float r;
    if constexpr (Kind == 0) r = x + y;
    else if constexpr (Kind == 1) r = (std::isnan(x) || x > y) ? x : y;
    else r = (std::isnan(x) || x < y) ? x : y;
    b[i] = T(r);
  }
}

MPI_Op half_op(DType d, ReduceOp op) {
  static MPI_Op ops[2][3];
  static bool made = false;
  if (!made) {
    MPI_User_function* fns[2][3] = {{half_reduce<BFloat16, 0>, half_reduce<BFloat16, 1>, half_reduce<BFloat16, 2>},
                                    {half_reduce<Half, 0>, half_reduce<Half, 1>, half_reduce<Half, 2>}};
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 3; ++k) WEFT_MPI_CHECK(MPI_Op_create(fns[i][k], /*commute=*/1, &ops[i][k]), "mpi");
    made = true;
  }
  int i = d == DType::BFloat16 ? 0 : 1;
  int k = (op == ReduceOp::Max) ? 1 : (op == ReduceOp::Min) ? 2 : 0;
  return ops[i][k];
}

MPI_Op mpi_op(const char* what, DType d, ReduceOp op) {
  WEFT_CHECK(op != ReduceOp::Avg || is_floating(d), what, ": ReduceOp::avg needs a floating dtype, got ", d);
  if (d == DType::BFloat16 || d == DType::Float16) return half_op(d, op);
  if (d == DType::Bool) return op == ReduceOp::Min ? MPI_LAND : MPI_LOR;
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return MPI_SUM;
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Min: return MPI_MIN;
  }
  return MPI_OP_NULL;
}

// In place x /= n for a contiguous floating buffer.
void divide_in_place(void* data, int64_t n, DType d, int size) {
  dispatch<kFloatingTypes>(d, "allreduce avg", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(data);
    using M = opmath_t<T>;
    for (int64_t i = 0; i < n; ++i) p[i] = T(static_cast<M>(p[i]) / static_cast<M>(size));
  });
}

void check_tensor(const char* what, const Tensor& t) {
  WEFT_CHECK(t.defined(), what, ": tensor is undefined");
  WEFT_CHECK(t.device().is_cpu(), what, ": the MPI backend takes CPU tensors, got a tensor on ", t.device());
  WEFT_CHECK(t.is_contiguous(), what, ": tensor must be contiguous (shape ", shape_str(t.sizes()), ")");
  WEFT_CHECK(t.numel() <= INT32_MAX, what, ": tensor has ", t.numel(), " elements; at most 2^31-1 per call");
}

std::string describe(const char* what, const Tensor& t) {
  return weft::detail::str_cat(what, "(", t.dtype(), ", ", t.numel(), " elements)");
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct WorkState;
bool work_pending(WorkState& st);  // caller holds mpi_mutex()

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
    if (!g_failure) MPI_Comm_free(&comm_);
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
  void watch(const std::shared_ptr<WorkState>& st) {
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
    std::erase_if(watched_, [](const std::weak_ptr<WorkState>& w) {
      auto st = w.lock();
      return !st || !work_pending(*st);
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
  std::vector<std::weak_ptr<WorkState>> watched_;  // guarded by m_
};

// The running monitor, or nullptr. Read and used under mpi_mutex().
LivenessMonitor*& monitor_slot() {
  static LivenessMonitor* m = nullptr;
  return m;
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
    WEFT_CHECK(end != v && *end == '\0' && s > 0,
               "WEFT_HEARTBEAT_TIMEOUT_S must be a positive number of seconds, got '", v, "'");
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
int mpi_thread_level() { return g_thread_level; }
bool had_collective_failure() { return g_failure; }

Duration default_timeout_from_env() {
  const char* v = std::getenv("WEFT_COLLECTIVE_TIMEOUT_S");
  if (v == nullptr || *v == '\0') return kDefaultTimeout;
  char* end = nullptr;
  double s = std::strtod(v, &end);
  WEFT_CHECK(end != v && *end == '\0' && s > 0, "WEFT_COLLECTIVE_TIMEOUT_S must be a positive number of seconds, got '",
             v, "'");
  return Duration(static_cast<int64_t>(s * 1000.0));
}

bool debug_collectives_from_env() {
  const char* v = std::getenv("WEFT_DEBUG_COLLECTIVES");
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

int local_rank() {
  const char* v = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  return v ? std::atoi(v) : 0;
}
int local_size() {
  const char* v = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  return v ? std::atoi(v) : 1;
}

namespace detail {

struct PendingAnnouncement {
  MPI_Request req;
  std::unique_ptr<int64_t> value;
};

struct MPIGroupState {
  MPI_Comm comm = MPI_COMM_NULL;  // data
  MPI_Comm side = MPI_COMM_NULL;  // announcements and fingerprints
  int rank = 0, size = 1;
  std::vector<int> global_ranks;
  std::string name;
  uint64_t id = 0;
  int64_t seq = 0;
  std::vector<int64_t> last_seen;  // per group rank: highest announced sequence number
  std::vector<PendingAnnouncement> sends;
  bool debug = false;

  // Receives every announcement already here (Note [arrival announcements]).
  void drain() {
    while (true) {
      int flag = 0;
      MPI_Status st;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kAnnounceTag, side, &flag, &st) != MPI_SUCCESS || !flag) break;
      int64_t v = -1;
      if (MPI_Recv(&v, 1, MPI_INT64_T, st.MPI_SOURCE, kAnnounceTag, side, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
      last_seen[st.MPI_SOURCE] = std::max(last_seen[st.MPI_SOURCE], v);
    }
    // Reap finished announcement sends.
    sends.erase(std::remove_if(sends.begin(), sends.end(),
                               [](PendingAnnouncement& p) {
                                 int done = 0;
                                 MPI_Test(&p.req, &done, MPI_STATUS_IGNORE);
                                 return done != 0;
                               }),
                sends.end());
  }

  void announce(int64_t s) {
    for (int p = 0; p < size; ++p) {
      if (p == rank) continue;
      PendingAnnouncement a{MPI_REQUEST_NULL, std::make_unique<int64_t>(s)};
      WEFT_MPI_CHECK(MPI_Isend(a.value.get(), 1, MPI_INT64_T, p, kAnnounceTag, side, &a.req), name,
                     ": announcing collective ", s);
      sends.push_back(std::move(a));
    }
    drain();
  }

  // Group ranks that have not announced collective `s`.
  std::vector<int> missing(int64_t s) {
    drain();
    std::vector<int> out;
    for (int p = 0; p < size; ++p)
      if (p != rank && last_seen[p] < s) out.push_back(p);
    return out;
  }

  // Group ranks among `peers` silent for at least `threshold` (Note [liveness]);
  // *longest_s: the longest silence among them.
  std::vector<int> silent(const std::vector<int>& peers, Duration threshold, double* longest_s) const {
    return unresponsive_group_ranks(peers, global_ranks, threshold, longest_s);
  }

  // Every group rank but this one.
  std::vector<int> peers() const {
    std::vector<int> out;
    for (int p = 0; p < size; ++p)
      if (p != rank) out.push_back(p);
    return out;
  }

  std::string missing_text(const std::vector<int>& group_ranks) const {
    std::vector<int> g;
    for (int r : group_ranks) g.push_back(global_ranks[r]);
    std::string s = "missing ranks: " + ranks_str(g);
    if (name != "world") s += " (group ranks " + ranks_str(group_ranks) + ")";
    return s;
  }
};

}  // namespace detail

namespace {

using detail::MPIGroupState;

// Throws if one of `peers` (group ranks) has been silent for the liveness
// threshold of `timeout` (Note [liveness]). `what` names the operation with its
// sequence number; `issued` is when it started.
void check_alive(MPIGroupState& gs, const std::vector<int>& peers, const std::string& what, Duration timeout,
                 std::chrono::steady_clock::time_point issued) {
  double longest = 0;
  std::vector<int> dead = gs.silent(peers, liveness_threshold(timeout), &longest);
  if (dead.empty()) return;
  g_failure = true;  // the request stays pending
  double since = std::chrono::duration<double>(std::chrono::steady_clock::now() - issued).count();
  WEFT_ERROR(what, " on ", gs.name, " failed: ", gs.missing_text(dead), " stopped responding (no heartbeat for ",
             std::round(longest * 10) / 10, " s: the process died or is stuck), ", std::round(since * 10) / 10,
             " s after it was issued (timeout ", timeout.count() / 1000.0, " s)");
}

// Waits for `n` requests on the calling thread, polling; used where the caller
// must block (debug fingerprints). Returns false on timeout; throws if one of
// `peers` (group ranks) stops responding (check_alive).
bool poll_until(MPI_Request* reqs, int n, MPIGroupState& gs, const std::vector<int>& peers, const std::string& what_seq,
                Duration timeout, std::chrono::steady_clock::time_point issued) {
  auto start = std::chrono::steady_clock::now();
  auto deadline = issued + timeout;
  auto next_check = start + kLivenessPollPeriod;
  while (true) {
    int done = 0;
    {
      std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
      WEFT_MPI_CHECK(MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE), what_seq);
    }
    if (done) return true;
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    if (now >= next_check) {
      check_alive(gs, peers, what_seq, timeout, issued);
      next_check = now + kLivenessPollPeriod;
    }
    if (now - start < std::chrono::milliseconds(1)) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// Debug mode (parallel/desync.h): exchanges `mine` on the side communicator
// with every rank of `gs` (peer < 0: MPI_Iallgather) or with group rank `peer`
// only (MPI_Isend + MPI_Irecv). Returns the fingerprints in group-rank order
// (for a pair: the lower group rank's first), or nothing after `timeout` from
// `issued`; throws if a peer stops responding. Buffers are on the heap: on a
// timeout MPI may still write them, so they are leaked (and g_failure set).
std::optional<std::vector<Fingerprint>> exchange_fingerprints(MPIGroupState& gs, const Fingerprint& mine, int peer,
                                                              const std::string& what_seq, Duration timeout,
                                                              std::chrono::steady_clock::time_point issued) {
  const int n = peer < 0 ? gs.size : 2;
  auto* own = new Fingerprint(mine);
  auto* all = new std::vector<Fingerprint>(n);
  auto* reqs = new MPI_Request[2]{MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  {
    std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
    if (peer < 0) {
      WEFT_MPI_CHECK(MPI_Iallgather(own, kFingerprintLen, MPI_INT64_T, all->data(), kFingerprintLen, MPI_INT64_T,
                                    gs.side, &reqs[0]),
                     what_seq, ": exchanging debug fingerprints");
    } else {
      Fingerprint* theirs = &(*all)[peer < gs.rank ? 0 : 1];
      (*all)[peer < gs.rank ? 1 : 0] = mine;
      WEFT_MPI_CHECK(MPI_Isend(own, kFingerprintLen, MPI_INT64_T, peer, kFingerprintTag, gs.side, &reqs[0]), what_seq,
                     ": exchanging debug fingerprints");
      WEFT_MPI_CHECK(MPI_Irecv(theirs, kFingerprintLen, MPI_INT64_T, peer, kFingerprintTag, gs.side, &reqs[1]),
                     what_seq, ": exchanging debug fingerprints");
    }
  }
  if (!poll_until(reqs, peer < 0 ? 1 : 2, gs, peer < 0 ? gs.peers() : std::vector<int>{peer}, what_seq, timeout,
                  issued)) {
    g_failure = true;  // a request stays pending
    return std::nullopt;
  }
  std::vector<Fingerprint> out = std::move(*all);
  delete all;
  delete own;
  delete[] reqs;
  return out;
}

// The state of one issued operation. Owned by the Work and, while MPI may still
// touch its buffers, never freed before completion (see ~WorkMPI).
struct WorkState {
  MPI_Request req = MPI_REQUEST_NULL;
  std::shared_ptr<ProcessGroupMPI> group;  // keeps the communicators alive
  MPIGroupState* gs = nullptr;
  std::string what;  // "allreduce(float32, 10 elements, sum)"
  int64_t seq = -1;  // -1 for point-to-point
  int peer = -1;     // group rank of the peer for send/recv
  Duration timeout{};
  std::chrono::steady_clock::time_point issued;
  std::vector<Tensor> keep;                       // tensors MPI reads or writes
  std::vector<uint8_t> buffer;                    // staging (allgather, reduce_scatter)
  std::function<void(const MPI_Status&)> finish;  // runs once on success
  bool done = false;
  std::string error;
};

// Note [progress thread]: progresses MPI (every outstanding request) and says
// whether `st` is still unfinished, without completing or freeing its request.
bool work_pending(WorkState& st) {
  if (st.done || st.req == MPI_REQUEST_NULL) return false;
  int flag = 0;
  if (MPI_Request_get_status(st.req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
  return !flag;
}

class WorkMPI final : public Work {
 public:
  explicit WorkMPI(std::shared_ptr<WorkState> st) : st_(std::move(st)) {}
  ~WorkMPI() override {
    // An unfinished request still owns its buffers: leak them rather than let
    // MPI write into freed memory (this only happens after an error).
    if (!st_->done) {
      g_failure = true;
      static std::vector<std::shared_ptr<WorkState>>* graveyard = new std::vector<std::shared_ptr<WorkState>>;
      std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
      graveyard->push_back(st_);
    }
  }

  bool is_completed() override {
    std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
    if (st_->done) return true;
    int flag = 0;
    MPI_Status status;
    int rc = MPI_Test(&st_->req, &flag, &status);
    if (rc != MPI_SUCCESS) {
      g_failure = true;
      st_->done = true;
      st_->error = weft::detail::str_cat(st_->what, " failed in MPI: ", mpi_error_string(rc));
      return true;
    }
    if (!flag) return false;
    st_->done = true;
    try {
      if (st_->finish) st_->finish(status);
    } catch (const Error& e) {
      st_->error = e.message();
    }
    st_->keep.clear();
    st_->buffer.clear();
    st_->buffer.shrink_to_fit();
    return true;
  }

  void wait(Duration timeout) override {
    auto start = std::chrono::steady_clock::now();
    auto deadline = timeout == Duration::zero() ? st_->issued + st_->timeout : start + timeout;
    Duration limit = timeout == Duration::zero() ? st_->timeout : timeout;
    auto next_check = start + kLivenessPollPeriod;
    while (!is_completed()) {
      auto now = std::chrono::steady_clock::now();
      if (now >= deadline) timed_out(limit);
      if (now >= next_check) {  // Note [liveness]
        check_alive(*st_->gs, peers(), what_seq(), st_->timeout, st_->issued);
        next_check = now + kLivenessPollPeriod;
      }
      if (now - start < std::chrono::milliseconds(1)) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    if (!st_->error.empty()) WEFT_ERROR(st_->error);
  }

 private:
  // The ranks this operation waits on (group ranks).
  std::vector<int> peers() const { return st_->seq < 0 ? std::vector<int>{st_->peer} : st_->gs->peers(); }
  std::string what_seq() const {
    if (st_->seq < 0) return st_->what;
    return weft::detail::str_cat(st_->what, " (sequence ", st_->seq, ")");
  }

  [[noreturn]] void timed_out(Duration limit) {
    std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
    auto& gs = *st_->gs;
    double secs = limit.count() / 1000.0;
    if (st_->seq < 0) {
      WEFT_ERROR(st_->what, " on ", gs.name, " timed out after ", secs, " s: ", gs.missing_text({st_->peer}),
                 " (the peer did not post the matching operation)");
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

// ---- ProcessGroupMPI ----

ProcessGroupMPI::ProcessGroupMPI(std::unique_ptr<detail::MPIGroupState> state) : s_(std::move(state)) {
  timeout_ = default_timeout_from_env();
}

ProcessGroupMPI::~ProcessGroupMPI() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized || g_failure) return;  // requests may still reference the communicators
  std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
  for (auto& a : s_->sends) MPI_Request_free(&a.req);
  if (s_->side != MPI_COMM_NULL) MPI_Comm_free(&s_->side);
  if (s_->comm != MPI_COMM_NULL) MPI_Comm_free(&s_->comm);
}

namespace {
std::unique_ptr<MPIGroupState> make_state(MPI_Comm parent_data, std::vector<int> global_ranks, std::string name,
                                          uint64_t id) {
  auto s = std::make_unique<MPIGroupState>();
  WEFT_MPI_CHECK(MPI_Comm_dup(parent_data, &s->comm), name, ": duplicating the communicator");
  WEFT_MPI_CHECK(MPI_Comm_dup(parent_data, &s->side), name, ": duplicating the communicator");
  MPI_Comm_set_errhandler(s->comm, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(s->side, MPI_ERRORS_RETURN);
  MPI_Comm_rank(s->comm, &s->rank);
  MPI_Comm_size(s->comm, &s->size);
  s->global_ranks = std::move(global_ranks);
  s->name = std::move(name);
  s->id = id;
  s->last_seen.assign(s->size, -1);
  s->debug = debug_collectives_from_env();
  return s;
}
}  // namespace

std::shared_ptr<ProcessGroupMPI> ProcessGroupMPI::create_world() {
  int inited = 0;
  MPI_Initialized(&inited);
  WEFT_CHECK(inited, "ProcessGroupMPI: MPI is not initialised (use init_process_group or DistributedContext)");
  std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  std::vector<int> ranks(n);
  for (int i = 0; i < n; ++i) ranks[i] = i;
  auto s = make_state(MPI_COMM_WORLD, std::move(ranks), "world", 1);
  return std::shared_ptr<ProcessGroupMPI>(new ProcessGroupMPI(std::move(s)));
}

int ProcessGroupMPI::rank() const { return s_->rank; }
int ProcessGroupMPI::size() const { return s_->size; }
const std::vector<int>& ProcessGroupMPI::global_ranks() const { return s_->global_ranks; }
const std::string& ProcessGroupMPI::name() const { return s_->name; }
int64_t ProcessGroupMPI::sequence_number() const { return s_->seq; }
bool ProcessGroupMPI::debug_mode() const { return s_->debug; }
void ProcessGroupMPI::set_debug_mode(bool on) { s_->debug = on; }

void ProcessGroupMPI::progress() {
  std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
  int flag = 0;
  MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, s_->side, &flag, MPI_STATUS_IGNORE);
}

namespace {

// Starts a sequenced collective: numbers it, announces it and, in debug mode,
// checks the fingerprints. Caller holds mpi_mutex().
std::shared_ptr<WorkState> begin_collective(ProcessGroupMPI& pg, MPIGroupState& gs, Duration opt_timeout,
                                            Fingerprint fp, std::string what) {
  auto st = std::make_shared<WorkState>();
  st->gs = &gs;
  st->what = std::move(what);
  st->seq = gs.seq++;
  st->timeout = opt_timeout == Duration::zero() ? pg.timeout() : opt_timeout;
  st->issued = std::chrono::steady_clock::now();
  gs.announce(st->seq);
  if (gs.debug && gs.size > 1) {
    fp.seq = st->seq;
    fp.group = static_cast<int64_t>(gs.id);
    auto all = exchange_fingerprints(gs, fp, -1, weft::detail::str_cat(st->what, " (sequence ", st->seq, ")"),
                                     st->timeout, st->issued);
    if (!all) {
      WEFT_ERROR(st->what, " (sequence ", st->seq, ") on ", gs.name, " timed out after ", st->timeout.count() / 1000.0,
                 " s in the debug fingerprint exchange: ", gs.missing_text(gs.missing(st->seq)), " did not arrive");
    }
    if (auto err = first_divergence(gs.name, st->seq, *all, gs.global_ranks)) WEFT_ERROR(*err);
  }
  return st;
}

WorkPtr launch(const std::shared_ptr<WorkState>& st, int rc) {
  if (rc != MPI_SUCCESS) {
    g_failure = true;
    st->done = true;
    WEFT_ERROR(st->what, " failed to start in MPI: ", mpi_error_string(rc));
  }
  if (LivenessMonitor* m = monitor_slot()) m->watch(st);  // Note [progress thread]
  return std::make_shared<WorkMPI>(st);
}

}  // namespace

void ProcessGroupMPI::check_fingerprint(const Fingerprint& fp, int peer, const std::string& group_name,
                                        const std::string& what_seq, Duration timeout) {
  WEFT_CHECK(peer < s_->size && peer != s_->rank, "check_fingerprint: rank ", peer, " is not a peer in ", s_->name,
             " (size ", s_->size, ", this rank ", s_->rank, ")");
  if (s_->size == 1) return;
  auto all = exchange_fingerprints(*s_, fp, peer, what_seq + " on " + group_name + ": debug fingerprint exchange",
                                   timeout, std::chrono::steady_clock::now());
  if (!all) {
    WEFT_ERROR(what_seq, " on ", group_name, " timed out after ", timeout.count() / 1000.0,
               " s in the debug fingerprint exchange: missing ranks: unknown (",
               peer < 0 ? "a peer has" : "the peer has", " not issued it, or issued an operation of another group)");
  }
  std::vector<int> globals = s_->global_ranks;
  if (peer >= 0) globals = {s_->global_ranks[std::min(peer, s_->rank)], s_->global_ranks[std::max(peer, s_->rank)]};
  if (auto err = first_divergence(group_name, fp.seq, *all, globals)) WEFT_ERROR(*err);
}

WorkPtr ProcessGroupMPI::allreduce(Tensor& tensor, const AllreduceOptions& opts) {
  check_tensor("allreduce", tensor);
  std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
  MPI_Op op = mpi_op("allreduce", tensor.dtype(), opts.op);
  std::string what = weft::detail::str_cat("allreduce(", tensor.dtype(), ", ", tensor.numel(), " elements, ",
                                           reduce_op_name(opts.op), ")");
  auto st = begin_collective(*this, *s_, opts.timeout,
                             {0, 0, Fingerprint::kAllreduce, int64_t(tensor.dtype()), tensor.numel(), int64_t(opts.op)},
                             what);
  st->group = shared_from_this();
  st->keep = {tensor};
  if (opts.op == ReduceOp::Avg) {
    Tensor t = tensor;
    int n = s_->size;
    st->finish = [t, n](const MPI_Status&) { divide_in_place(t.raw_data(), t.numel(), t.dtype(), n); };
  }
  int rc = MPI_Iallreduce(MPI_IN_PLACE, tensor.raw_data(), int(tensor.numel()), mpi_type(tensor.dtype()), op, s_->comm,
                          &st->req);
  return launch(st, rc);
}

WorkPtr ProcessGroupMPI::broadcast(Tensor& tensor, const BroadcastOptions& opts) {
  check_tensor("broadcast", tensor);
  WEFT_CHECK(opts.root >= 0 && opts.root < s_->size, "broadcast: root ", opts.root, " is not a rank of ", s_->name,
             " (size ", s_->size, ")");
  std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
  std::string what =
      weft::detail::str_cat("broadcast(", tensor.dtype(), ", ", tensor.numel(), " elements, root ", opts.root, ")");
  auto st = begin_collective(*this, *s_, opts.timeout,
                             {0, 0, Fingerprint::kBroadcast, int64_t(tensor.dtype()), tensor.numel(), opts.root}, what);
  st->group = shared_from_this();
  st->keep = {tensor};
  int rc = MPI_Ibcast(tensor.raw_data(), int(tensor.numel()), mpi_type(tensor.dtype()), opts.root, s_->comm, &st->req);
  return launch(st, rc);
}

WorkPtr ProcessGroupMPI::allgather(std::vector<Tensor>& outputs, const Tensor& input, const AllgatherOptions& opts) {
  check_tensor("allgather", input);
  WEFT_CHECK(int(outputs.size()) == s_->size, "allgather: expected ", s_->size, " output tensors (group size), got ",
             outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    check_tensor("allgather", outputs[i]);
    WEFT_CHECK(outputs[i].sizes() == input.sizes() && outputs[i].dtype() == input.dtype(), "allgather: output ", i,
               " has shape ", shape_str(outputs[i].sizes()), " and dtype ", outputs[i].dtype(), " but the input has ",
               shape_str(input.sizes()), " and ", input.dtype());
  }
  std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
  auto st = begin_collective(*this, *s_, opts.timeout,
                             {0, 0, Fingerprint::kAllgather, int64_t(input.dtype()), input.numel(), 0},
                             describe("allgather", input));
  st->group = shared_from_this();
  size_t nb = input.nbytes();
  st->buffer.resize(nb * s_->size);
  st->keep = outputs;
  st->keep.push_back(input);
  std::vector<Tensor> outs = outputs;
  WorkState* raw = st.get();
  st->finish = [raw, outs, nb](const MPI_Status&) {
    for (size_t i = 0; i < outs.size(); ++i)
      if (nb) std::memcpy(outs[i].raw_data(), raw->buffer.data() + i * nb, nb);
  };
  int rc = MPI_Iallgather(input.raw_data(), int(input.numel()), mpi_type(input.dtype()), st->buffer.data(),
                          int(input.numel()), mpi_type(input.dtype()), s_->comm, &st->req);
  return launch(st, rc);
}

WorkPtr ProcessGroupMPI::reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                        const ReduceScatterOptions& opts) {
  check_tensor("reduce_scatter", output);
  WEFT_CHECK(int(inputs.size()) == s_->size, "reduce_scatter: expected ", s_->size, " input tensors (group size), got ",
             inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_tensor("reduce_scatter", inputs[i]);
    WEFT_CHECK(inputs[i].sizes() == output.sizes() && inputs[i].dtype() == output.dtype(), "reduce_scatter: input ", i,
               " has shape ", shape_str(inputs[i].sizes()), " and dtype ", inputs[i].dtype(), " but the output has ",
               shape_str(output.sizes()), " and ", output.dtype());
  }
  std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
  MPI_Op op = mpi_op("reduce_scatter", output.dtype(), opts.op);
  std::string what = weft::detail::str_cat("reduce_scatter(", output.dtype(), ", ", output.numel(), " elements, ",
                                           reduce_op_name(opts.op), ")");
  auto st = begin_collective(
      *this, *s_, opts.timeout,
      {0, 0, Fingerprint::kReduceScatter, int64_t(output.dtype()), output.numel(), int64_t(opts.op)}, what);
  st->group = shared_from_this();
  size_t nb = output.nbytes();
  st->buffer.resize(nb * s_->size);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (nb) std::memcpy(st->buffer.data() + i * nb, inputs[i].raw_data(), nb);
  st->keep = {output};
  if (opts.op == ReduceOp::Avg) {
    Tensor t = output;
    int n = s_->size;
    st->finish = [t, n](const MPI_Status&) { divide_in_place(t.raw_data(), t.numel(), t.dtype(), n); };
  }
  int rc = MPI_Ireduce_scatter_block(st->buffer.data(), output.raw_data(), int(output.numel()),
                                     mpi_type(output.dtype()), op, s_->comm, &st->req);
  return launch(st, rc);
}

WorkPtr ProcessGroupMPI::barrier(const BarrierOptions& opts) {
  std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
  auto st = begin_collective(*this, *s_, opts.timeout, {0, 0, Fingerprint::kBarrier, -1, 0, 0}, "barrier()");
  st->group = shared_from_this();
  int rc = MPI_Ibarrier(s_->comm, &st->req);
  return launch(st, rc);
}

namespace {
void check_peer(const char* what, int peer, const MPIGroupState& s, int tag) {
  WEFT_CHECK(peer >= 0 && peer < s.size, what, ": rank ", peer, " is not in ", s.name, " (size ", s.size, ")");
  WEFT_CHECK(peer != s.rank, what, ": rank ", peer, " is this rank; send/recv to self is not supported");
  WEFT_CHECK(tag >= 0 && tag <= 32767, what, ": tag must be in [0, 32767], got ", tag);
}
}  // namespace

WorkPtr ProcessGroupMPI::send(const Tensor& tensor, int dst, const SendRecvOptions& opts) {
  check_tensor("send", tensor);
  check_peer("send", dst, *s_, opts.tag);
  std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
  auto st = std::make_shared<WorkState>();
  st->gs = s_.get();
  st->group = shared_from_this();
  st->what = weft::detail::str_cat("send(", tensor.dtype(), ", ", tensor.numel(), " elements, to rank ", dst, ", tag ",
                                   opts.tag, ")");
  st->peer = dst;
  st->timeout = opts.timeout == Duration::zero() ? timeout_ : opts.timeout;
  st->issued = std::chrono::steady_clock::now();
  st->keep = {tensor};
  int rc =
      MPI_Isend(tensor.raw_data(), int(tensor.numel()), mpi_type(tensor.dtype()), dst, opts.tag, s_->comm, &st->req);
  return launch(st, rc);
}

WorkPtr ProcessGroupMPI::recv(Tensor& tensor, int src, const SendRecvOptions& opts) {
  check_tensor("recv", tensor);
  check_peer("recv", src, *s_, opts.tag);
  std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
  auto st = std::make_shared<WorkState>();
  st->gs = s_.get();
  st->group = shared_from_this();
  st->what = weft::detail::str_cat("recv(", tensor.dtype(), ", ", tensor.numel(), " elements, from rank ", src,
                                   ", tag ", opts.tag, ")");
  st->peer = src;
  st->timeout = opts.timeout == Duration::zero() ? timeout_ : opts.timeout;
  st->issued = std::chrono::steady_clock::now();
  st->keep = {tensor};
  int64_t n = tensor.numel();
  MPI_Datatype dt = mpi_type(tensor.dtype());
  std::string what = st->what;
  st->finish = [n, dt, what](const MPI_Status& status) {
    int count = 0;
    MPI_Get_count(&status, dt, &count);
    WEFT_CHECK(count == n, what, ": received ", count, " elements but the tensor holds ", n);
  };
  int rc = MPI_Irecv(tensor.raw_data(), int(n), dt, src, opts.tag, s_->comm, &st->req);
  return launch(st, rc);
}

std::shared_ptr<ProcessGroup> ProcessGroupMPI::new_group(const std::vector<int>& ranks) {
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
  std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
  // A sequenced, timed barrier over the parent first: every parent rank is
  // present, so the blocking MPI_Comm_create_group below cannot hang on a
  // dead member.
  auto st = begin_collective(*this, *s_, Duration::zero(),
                             {0, 0, Fingerprint::kNewGroup, -1, int64_t(ranks.size()), int64_t(h & 0x7fffffffffffull)},
                             "new_group" + ranks_str(ranks));
  st->group = shared_from_this();
  WorkPtr w = launch(st, MPI_Ibarrier(s_->comm, &st->req));
  w->wait();
  auto me = std::find(ranks.begin(), ranks.end(), s_->rank);
  if (me == ranks.end()) return nullptr;
  MPI_Group parent_group, sub_group;
  MPI_Comm sub = MPI_COMM_NULL;
  WEFT_MPI_CHECK(MPI_Comm_group(s_->comm, &parent_group), "new_group");
  WEFT_MPI_CHECK(MPI_Group_incl(parent_group, int(ranks.size()), ranks.data(), &sub_group), "new_group");
  WEFT_MPI_CHECK(MPI_Comm_create_group(s_->comm, sub_group, kCreateGroupTag, &sub), "new_group");
  MPI_Group_free(&sub_group);
  MPI_Group_free(&parent_group);
  auto s = make_state(sub, globals, "group" + ranks_str(globals), h);
  MPI_Comm_free(&sub);
  auto pg = std::shared_ptr<ProcessGroupMPI>(new ProcessGroupMPI(std::move(s)));
  pg->set_timeout(timeout_);
  pg->s_->debug = s_->debug;
  return pg;
}

// ---- the world group ----

namespace {
std::shared_ptr<ProcessGroupMPI>& world_slot() {
  static std::shared_ptr<ProcessGroupMPI> w;
  return w;
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

std::shared_ptr<ProcessGroup> init_process_group() {
  std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
  if (world_slot()) return world_slot();
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided = 0;
    WEFT_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "init_process_group");
    g_thread_level = provided;
  } else if (g_thread_level < 0) {
    int provided = 0;
    MPI_Query_thread(&provided);
    g_thread_level = provided;
  }
  world_slot() = ProcessGroupMPI::create_world();
  // Note [liveness]: the heartbeat thread calls MPI from its own thread, which
  // MPI_THREAD_SERIALIZED allows given mpi_mutex().
  if (world_slot()->size() > 1 && g_thread_level >= MPI_THREAD_SERIALIZED && monitor_slot() == nullptr) {
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
  return world_slot();
}

void destroy_process_group() {
  {
    std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
    world_slot().reset();
  }
  stop_monitor();
}

bool is_initialized() { return world_slot() != nullptr; }

WorkPtr ProcessGroupMPI::batch_isend_irecv(const std::vector<P2POp>&, const BatchP2POptions&) {
  WEFT_ERROR("batch_isend_irecv is not implemented on mpi yet");
}

}  // namespace weft::parallel
