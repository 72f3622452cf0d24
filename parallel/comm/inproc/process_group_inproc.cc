// ProcessGroupInProc: ranks as threads, messages through memory. Contract in
// the header.
//
// Note [inproc rendezvous]: one mutex per world guards every group's state.
// Collective number s of a group is a Round that each rank fills in as it
// issues it (its tensors and a description); the last rank to arrive computes
// the result for all, outside the lock, and marks the round done. A send or
// receive is queued under (source, destination, tag) until the other side
// posts its match; whoever posts second copies the data, outside the lock.
// Completion happens only inside issuing calls, so a waiter just sleeps on the
// world's condition variable, woken by completions, failures and exits
// (mark_exited), and re-checks: done, failed, a missing rank exited, or the
// deadline passed.
#include "parallel/comm/inproc/process_group_inproc.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <tuple>

#include "core/dtype.h"
#include "core/error.h"
#include "parallel/comm/inproc/reduce.h"

namespace weft::parallel {

namespace detail {

struct InProcWorld {
  explicit InProcWorld(int n) : exited(n) {}
  std::mutex m;                                    // guards the world and every group, round and message of it
  std::condition_variable cv;                      // notified on every completion, failure and exit
  std::vector<std::optional<std::string>> exited;  // per global rank: why its thread is gone
};

enum class Kind { Allreduce, Broadcast, Allgather, ReduceScatter, Barrier, NewGroup };

// Collective number `seq` of a group (Note [inproc rendezvous]).
struct Round {
  explicit Round(int n) : arrived(n, false), what(n), tensor(n), list(n) {}
  Kind kind = Kind::Barrier;
  ReduceOp op = ReduceOp::Sum;
  int root = 0;
  std::vector<int> members;  // new_group: the list (group ranks of the parent)
  std::vector<bool> arrived;
  int count = 0;
  std::vector<std::string> what;          // per group rank: what it issued
  std::vector<Tensor> tensor;             // per rank: the tensor, allgather input, reduce_scatter output
  std::vector<std::vector<Tensor>> list;  // per rank: allgather outputs, reduce_scatter inputs
  std::shared_ptr<InProcGroup> created;   // new_group's result
  bool done = false;
  std::string error;    // non-empty: failed (finished too)
  bool desync = false;  // `error` is a desync
};

// One posted send or receive.
struct P2P {
  bool is_send = true;
  Tensor tensor;
  int src = 0, dst = 0, tag = 0;  // group ranks
  std::string what;               // "send(float32, 8 elements, to rank 1, tag 0)"
  bool matched = false, done = false;
  std::string error;
  int peer() const { return is_send ? dst : src; }
};

struct InProcGroup {
  std::string name;
  std::vector<int> global_ranks;
  std::map<int64_t, std::shared_ptr<Round>> rounds;              // issued by some rank, not yet by all
  using Key = std::tuple<int, int, int>;                         // (src, dst, tag)
  std::map<Key, std::deque<std::shared_ptr<P2P>>> sends, recvs;  // posted, unmatched, in issue order
  int size() const { return static_cast<int>(global_ranks.size()); }
};

}  // namespace detail

using detail::InProcGroup;
using detail::InProcWorld;
using detail::Kind;
using detail::P2P;
using detail::Round;

struct ProcessGroupInProc::Issue {
  Kind kind = Kind::Barrier;
  std::string what;
  Tensor tensor;
  std::vector<Tensor> list;
  ReduceOp op = ReduceOp::Sum;
  int root = 0;
  std::vector<int> members;
};

namespace {

using Clock = std::chrono::steady_clock;

// A local copy until the shared helper lands (parallel/mpi has the same).
double seconds(Duration d) { return static_cast<double>(d.count()) / 1000.0; }

void check_tensor(const char* what, const Tensor& t) {
  WEFT_CHECK(t.defined(), what, ": tensor is undefined");
  WEFT_CHECK(t.device().is_cpu(), what, ": the inproc backend takes CPU tensors, got a tensor on ", t.device());
  WEFT_CHECK(t.is_contiguous(), what, ": tensor must be contiguous (shape ", shape_str(t.sizes()), ")");
}

void check_reduce_op(const char* what, DType d, ReduceOp op) {
  WEFT_CHECK(op != ReduceOp::Avg || is_floating(d), what, ": ReduceOp::avg needs a floating dtype, got ", d);
}

void check_peer(const char* what, int peer, const InProcGroup& g, int rank, int tag) {
  WEFT_CHECK(peer >= 0 && peer < g.size(), what, ": rank ", peer, " is not in ", g.name, " (size ", g.size(), ")");
  WEFT_CHECK(peer != rank, what, ": rank ", peer, " is this rank; send/recv to self is not supported");
  WEFT_CHECK(tag >= 0 && tag <= 32767, what, ": tag must be in [0, 32767], got ", tag);
}

std::string describe(const char* what, const Tensor& t, const std::string& extra = "") {
  return weft::detail::str_cat(what, "(", t.dtype(), ", ", t.numel(), " elements", extra, ")");
}

std::string describe_p2p(bool is_send, const Tensor& t, int peer, int tag) {
  return is_send ? describe("send", t, weft::detail::str_cat(", to rank ", peer, ", tag ", tag))
                 : describe("recv", t, weft::detail::str_cat(", from rank ", peer, ", tag ", tag));
}

// "missing ranks: [3, 1] (group ranks [0, 1])": global ranks, and the group
// ranks on a sub-group (ProcessGroupMPI's shape).
std::string missing_text(const InProcGroup& g, const std::vector<int>& group_ranks) {
  std::vector<int> globals;
  for (int r : group_ranks) globals.push_back(g.global_ranks[r]);
  std::string s = "missing ranks: " + ranks_str(globals);
  if (g.name != "world") s += " (group ranks " + ranks_str(group_ranks) + ")";
  return s;
}

// The group ranks among `group_ranks` whose threads exited. Caller holds the lock.
std::vector<int> exited_among(const InProcWorld& w, const InProcGroup& g, const std::vector<int>& group_ranks) {
  std::vector<int> out;
  for (int r : group_ranks)
    if (w.exited[g.global_ranks[r]]) out.push_back(r);
  return out;
}

// "missing ranks: [1] exited <when> (rank 1: its thread threw: ...)". Caller holds the lock.
std::string exited_text(const InProcWorld& w, const InProcGroup& g, const std::vector<int>& gone, const char* when) {
  std::string s = missing_text(g, gone) + " exited " + when + " (";
  for (size_t i = 0; i < gone.size(); ++i) {
    int global = g.global_ranks[gone[i]];
    s += weft::detail::str_cat(i ? "; " : "", "rank ", global, ": ", *w.exited[global]);
  }
  return s + ")";
}

void copy_bytes(const Tensor& dst, const void* src, size_t nb) {
  if (nb > 0 && dst.raw_data() != src) std::memmove(dst.raw_data(), src, nb);
}

// Computes a complete round's results into every rank's tensors.
void compute(Round& r) {
  const int n = static_cast<int>(r.tensor.size());
  switch (r.kind) {
    case Kind::Allreduce: {
      std::vector<const Tensor*> in;
      for (auto& t : r.tensor) in.push_back(&t);
      auto buf = detail::reduce_tensors("allreduce", r.op, in);
      for (auto& t : r.tensor) copy_bytes(t, buf.data(), buf.size());
      break;
    }
    case Kind::Broadcast:
      for (int q = 0; q < n; ++q)
        if (q != r.root) copy_bytes(r.tensor[q], r.tensor[r.root].raw_data(), r.tensor[q].nbytes());
      break;
    case Kind::Allgather:
      for (int q = 0; q < n; ++q)
        for (int k = 0; k < n; ++k) copy_bytes(r.list[q][k], r.tensor[k].raw_data(), r.tensor[k].nbytes());
      break;
    case Kind::ReduceScatter: {
      // Every result first: an output may alias one of its rank's inputs.
      std::vector<std::vector<uint8_t>> bufs;
      for (int q = 0; q < n; ++q) {
        std::vector<const Tensor*> in;
        for (int k = 0; k < n; ++k) in.push_back(&r.list[k][q]);
        bufs.push_back(detail::reduce_tensors("reduce_scatter", r.op, in));
      }
      for (int q = 0; q < n; ++q) copy_bytes(r.tensor[q], bufs[q].data(), bufs[q].size());
      break;
    }
    case Kind::Barrier:
    case Kind::NewGroup: break;
  }
}

// The desync error if the arrived ranks issued different descriptions, naming
// every arrived rank. Caller holds the lock.
std::optional<std::string> desync(const InProcGroup& g, const Round& r, int64_t seq) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<int>> by_what;  // global ranks per description
  for (int q = 0; q < g.size(); ++q) {
    if (!r.arrived[q]) continue;
    if (by_what[r.what[q]].empty()) order.push_back(r.what[q]);
    by_what[r.what[q]].push_back(g.global_ranks[q]);
  }
  if (order.size() < 2) return std::nullopt;
  std::ostringstream os;
  os << "collective desync on " << g.name << " at sequence " << seq << ": ";
  for (size_t i = 0; i < order.size(); ++i)
    os << (i ? "; " : "") << "ranks " << ranks_str(by_what[order[i]]) << " issued " << order[i];
  return os.str();
}

class CollectiveWork final : public Work {
 public:
  CollectiveWork(std::shared_ptr<InProcWorld> w, std::shared_ptr<InProcGroup> g, std::shared_ptr<Round> r, int64_t seq,
                 std::string what, Duration timeout, Clock::time_point issued)
      : w_(std::move(w)),
        g_(std::move(g)),
        r_(std::move(r)),
        seq_(seq),
        what_(std::move(what)),
        timeout_(timeout),
        issued_(issued) {}

  bool is_completed() override {
    std::lock_guard<std::mutex> l(w_->m);
    return r_->done || !r_->error.empty() || !exited_among(*w_, *g_, missing()).empty();
  }

  void wait(Duration timeout) override {
    const Duration limit = timeout == Duration::zero() ? timeout_ : timeout;
    const auto deadline = timeout == Duration::zero() ? issued_ + timeout_ : Clock::now() + timeout;
    std::unique_lock<std::mutex> l(w_->m);
    while (true) {
      if (!r_->error.empty()) WEFT_ERROR(r_->error);
      if (r_->done) return;
      std::vector<int> miss = missing();
      std::vector<int> gone = exited_among(*w_, *g_, miss);
      if (!gone.empty())
        WEFT_ERROR(what_seq(), " on ", g_->name, " failed: ", exited_text(*w_, *g_, gone, "before issuing it"));
      if (Clock::now() >= deadline) {
        if (miss.empty())
          WEFT_ERROR(what_seq(), " on ", g_->name, " timed out after ", seconds(limit),
                     " s: missing ranks: [] (every rank issued it; its result is still being computed)");
        WEFT_ERROR(what_seq(), " on ", g_->name, " timed out after ", seconds(limit), " s: ", missing_text(*g_, miss),
                   " did not arrive");
      }
      w_->cv.wait_until(l, deadline);
    }
  }

 private:
  std::vector<int> missing() const {
    std::vector<int> out;
    for (int q = 0; q < g_->size(); ++q)
      if (!r_->arrived[q]) out.push_back(q);
    return out;
  }
  std::string what_seq() const { return weft::detail::str_cat(what_, " (sequence ", seq_, ")"); }

  std::shared_ptr<InProcWorld> w_;
  std::shared_ptr<InProcGroup> g_;
  std::shared_ptr<Round> r_;
  int64_t seq_;
  std::string what_;
  Duration timeout_;
  Clock::time_point issued_;
};

// One send, one receive, or a batch of them.
class P2PWork final : public Work {
 public:
  P2PWork(std::shared_ptr<InProcWorld> w, std::shared_ptr<InProcGroup> g, std::vector<std::shared_ptr<P2P>> ops,
          std::string what, bool batch, Duration timeout, Clock::time_point issued)
      : w_(std::move(w)),
        g_(std::move(g)),
        ops_(std::move(ops)),
        what_(std::move(what)),
        batch_(batch),
        timeout_(timeout),
        issued_(issued) {}

  bool is_completed() override {
    std::lock_guard<std::mutex> l(w_->m);
    bool all_done = true;
    for (auto& p : ops_) {
      if (!p->error.empty()) return true;
      all_done = all_done && p->done;
    }
    return all_done || !exited_among(*w_, *g_, unmatched_peers()).empty();
  }

  void wait(Duration timeout) override {
    const Duration limit = timeout == Duration::zero() ? timeout_ : timeout;
    const auto deadline = timeout == Duration::zero() ? issued_ + timeout_ : Clock::now() + timeout;
    std::unique_lock<std::mutex> l(w_->m);
    while (true) {
      bool all_done = true;
      for (auto& p : ops_) {
        if (!p->error.empty()) {
          if (batch_) WEFT_ERROR(what_, " on ", g_->name, " failed: ", p->error);
          WEFT_ERROR(p->error);
        }
        all_done = all_done && p->done;
      }
      if (all_done) return;
      std::vector<int> gone = exited_among(*w_, *g_, unmatched_peers());
      if (!gone.empty())
        WEFT_ERROR(what_, " on ", g_->name,
                   " failed: ", exited_text(*w_, *g_, gone, "before posting the matching operation"), pending());
      if (Clock::now() >= deadline) {
        std::vector<int> peers = pending_peers();
        WEFT_ERROR(what_, " on ", g_->name, " timed out after ", seconds(limit), " s: ", missing_text(*g_, peers),
                   peers.size() == 1 ? " (the peer did not post the matching operation)"
                                     : " (the peers did not post the matching operations)",
                   pending());
      }
      w_->cv.wait_until(l, deadline);
    }
  }

 private:
  // Distinct peers of the operations not done yet; of those not matched yet.
  std::vector<int> peers_where(bool unmatched_only) const {
    std::vector<int> out;
    for (auto& p : ops_)
      if (!p->done && (!unmatched_only || !p->matched) && std::find(out.begin(), out.end(), p->peer()) == out.end())
        out.push_back(p->peer());
    return out;
  }
  std::vector<int> unmatched_peers() const { return peers_where(true); }
  std::vector<int> pending_peers() const { return peers_where(false); }
  // "; pending: send(...), recv(...)" for a batch.
  std::string pending() const {
    if (!batch_) return "";
    std::string s = "; pending: ";
    bool first = true;
    for (auto& p : ops_) {
      if (p->done) continue;
      s += (first ? "" : ", ") + p->what;
      first = false;
    }
    return s;
  }

  std::shared_ptr<InProcWorld> w_;
  std::shared_ptr<InProcGroup> g_;
  std::vector<std::shared_ptr<P2P>> ops_;
  std::string what_;
  bool batch_;
  Duration timeout_;
  Clock::time_point issued_;
};

}  // namespace

// ---- ProcessGroupInProc ----

ProcessGroupInProc::ProcessGroupInProc(std::shared_ptr<InProcWorld> world, std::shared_ptr<InProcGroup> group, int rank)
    : world_(std::move(world)), group_(std::move(group)), rank_(rank) {}

ProcessGroupInProc::~ProcessGroupInProc() = default;

std::vector<std::shared_ptr<ProcessGroupInProc>> ProcessGroupInProc::create_world(int n, Duration timeout) {
  WEFT_CHECK(n >= 1, "ProcessGroupInProc::create_world: need at least one rank, got ", n);
  WEFT_CHECK(timeout > Duration::zero(), "ProcessGroupInProc::create_world: the timeout must be positive, got ",
             timeout.count(), " ms");
  auto world = std::make_shared<InProcWorld>(n);
  auto group = std::make_shared<InProcGroup>();
  group->name = "world";
  for (int r = 0; r < n; ++r) group->global_ranks.push_back(r);
  std::vector<std::shared_ptr<ProcessGroupInProc>> out;
  for (int r = 0; r < n; ++r) {
    out.push_back(std::make_shared<ProcessGroupInProc>(world, group, r));
    out.back()->set_timeout(timeout);
  }
  return out;
}

int ProcessGroupInProc::size() const { return group_->size(); }
const std::vector<int>& ProcessGroupInProc::global_ranks() const { return group_->global_ranks; }
const std::string& ProcessGroupInProc::name() const { return group_->name; }

int64_t ProcessGroupInProc::sequence_number() const {
  std::lock_guard<std::mutex> l(world_->m);
  return seq_;
}

void ProcessGroupInProc::mark_exited(const std::string& reason) {
  {
    std::lock_guard<std::mutex> l(world_->m);
    auto& e = world_->exited[group_->global_ranks[rank_]];
    if (!e) e = reason;
  }
  world_->cv.notify_all();
}

WorkPtr ProcessGroupInProc::collective(Issue is, Duration opt_timeout, std::shared_ptr<Round>* round) {
  InProcWorld& w = *world_;
  InProcGroup& g = *group_;
  const int n = g.size();
  const Duration timeout = opt_timeout == Duration::zero() ? timeout_ : opt_timeout;
  const auto issued = Clock::now();
  std::unique_lock<std::mutex> l(w.m);
  const int64_t seq = seq_++;
  auto& slot = g.rounds[seq];
  if (!slot) {
    slot = std::make_shared<Round>(n);
    slot->kind = is.kind;
    slot->op = is.op;
    slot->root = is.root;
    slot->members = is.members;
  }
  std::shared_ptr<Round> r = slot;
  r->arrived[rank_] = true;
  ++r->count;
  r->what[rank_] = is.what;
  r->tensor[rank_] = std::move(is.tensor);
  r->list[rank_] = std::move(is.list);
  bool notify = false;
  if (r->error.empty() || r->desync) {  // a desync message names every rank arrived so far
    if (auto err = desync(g, *r, seq)) {
      r->error = *err;
      r->desync = true;
      notify = true;
    }
  }
  if (r->count == n) {
    g.rounds.erase(seq);
    if (r->error.empty() && r->kind == Kind::NewGroup) {
      auto sub = std::make_shared<InProcGroup>();
      for (int m : r->members) sub->global_ranks.push_back(g.global_ranks[m]);
      sub->name = "group" + ranks_str(sub->global_ranks);
      r->created = std::move(sub);
    } else if (r->error.empty()) {
      l.unlock();  // Note [inproc rendezvous]: compute without the lock
      std::string err;
      try {
        compute(*r);
      } catch (const Error& e) {
        err = e.message();
      } catch (const std::exception& e) {
        err = e.what();
      }
      l.lock();
      if (!err.empty())
        r->error = weft::detail::str_cat(is.what, " (sequence ", seq, ") on ", g.name, " failed: ", err);
    }
    r->done = r->error.empty();
    r->tensor.assign(n, Tensor());
    r->list.assign(n, {});
    notify = true;
  }
  if (round) *round = r;
  l.unlock();
  if (notify) w.cv.notify_all();
  return std::make_shared<CollectiveWork>(world_, group_, r, seq, std::move(is.what), timeout, issued);
}

WorkPtr ProcessGroupInProc::allreduce(Tensor& tensor, const AllreduceOptions& opts) {
  check_tensor("allreduce", tensor);
  check_reduce_op("allreduce", tensor.dtype(), opts.op);
  Issue is;
  is.kind = Kind::Allreduce;
  is.what = describe("allreduce", tensor, std::string(", ") + reduce_op_name(opts.op));
  is.tensor = tensor;
  is.op = opts.op;
  return collective(std::move(is), opts.timeout);
}

WorkPtr ProcessGroupInProc::broadcast(Tensor& tensor, const BroadcastOptions& opts) {
  check_tensor("broadcast", tensor);
  WEFT_CHECK(opts.root >= 0 && opts.root < size(), "broadcast: root ", opts.root, " is not a rank of ", name(),
             " (size ", size(), ")");
  Issue is;
  is.kind = Kind::Broadcast;
  is.what = describe("broadcast", tensor, weft::detail::str_cat(", root ", opts.root));
  is.tensor = tensor;
  is.root = opts.root;
  return collective(std::move(is), opts.timeout);
}

WorkPtr ProcessGroupInProc::allgather(std::vector<Tensor>& outputs, const Tensor& input, const AllgatherOptions& opts) {
  check_tensor("allgather", input);
  WEFT_CHECK(static_cast<int>(outputs.size()) == size(), "allgather: expected ", size(),
             " output tensors (group size), got ", outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    check_tensor("allgather", outputs[i]);
    WEFT_CHECK(outputs[i].sizes() == input.sizes() && outputs[i].dtype() == input.dtype(), "allgather: output ", i,
               " has shape ", shape_str(outputs[i].sizes()), " and dtype ", outputs[i].dtype(), " but the input has ",
               shape_str(input.sizes()), " and ", input.dtype());
  }
  Issue is;
  is.kind = Kind::Allgather;
  is.what = describe("allgather", input);
  is.tensor = input;
  is.list = outputs;
  return collective(std::move(is), opts.timeout);
}

WorkPtr ProcessGroupInProc::reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                           const ReduceScatterOptions& opts) {
  check_tensor("reduce_scatter", output);
  check_reduce_op("reduce_scatter", output.dtype(), opts.op);
  WEFT_CHECK(static_cast<int>(inputs.size()) == size(), "reduce_scatter: expected ", size(),
             " input tensors (group size), got ", inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_tensor("reduce_scatter", inputs[i]);
    WEFT_CHECK(inputs[i].sizes() == output.sizes() && inputs[i].dtype() == output.dtype(), "reduce_scatter: input ", i,
               " has shape ", shape_str(inputs[i].sizes()), " and dtype ", inputs[i].dtype(), " but the output has ",
               shape_str(output.sizes()), " and ", output.dtype());
  }
  Issue is;
  is.kind = Kind::ReduceScatter;
  is.what = describe("reduce_scatter", output, std::string(", ") + reduce_op_name(opts.op));
  is.tensor = output;
  is.list = inputs;
  is.op = opts.op;
  return collective(std::move(is), opts.timeout);
}

WorkPtr ProcessGroupInProc::barrier(const BarrierOptions& opts) {
  Issue is;
  is.kind = Kind::Barrier;
  is.what = "barrier()";
  return collective(std::move(is), opts.timeout);
}

std::shared_ptr<ProcessGroup> ProcessGroupInProc::new_group(const std::vector<int>& ranks) {
  check_new_group_ranks(ranks, size(), name());
  Issue is;
  is.kind = Kind::NewGroup;
  is.what = "new_group" + ranks_str(ranks);
  is.members = ranks;
  std::shared_ptr<Round> r;
  collective(std::move(is), Duration::zero(), &r)->wait();
  auto me = std::find(ranks.begin(), ranks.end(), rank_);
  if (me == ranks.end()) return nullptr;
  std::shared_ptr<InProcGroup> sub;
  {
    std::lock_guard<std::mutex> l(world_->m);
    sub = r->created;
  }
  auto pg = std::make_shared<ProcessGroupInProc>(world_, sub, static_cast<int>(me - ranks.begin()));
  pg->set_timeout(timeout_);
  return pg;
}

WorkPtr ProcessGroupInProc::send(const Tensor& tensor, int dst, const SendRecvOptions& opts) {
  check_tensor("send", tensor);
  check_peer("send", dst, *group_, rank_, opts.tag);
  return post({P2POp::send(tensor, dst, opts.tag)}, "", opts.timeout);
}

WorkPtr ProcessGroupInProc::recv(Tensor& tensor, int src, const SendRecvOptions& opts) {
  check_tensor("recv", tensor);
  check_peer("recv", src, *group_, rank_, opts.tag);
  return post({P2POp::recv(tensor, src, opts.tag)}, "", opts.timeout);
}

WorkPtr ProcessGroupInProc::batch_isend_irecv(const std::vector<P2POp>& ops, const BatchP2POptions& opts) {
  const std::string what = weft::detail::str_cat("batch_isend_irecv(", ops.size(), " ops)");
  for (size_t i = 0; i < ops.size(); ++i) {
    const std::string op =
        weft::detail::str_cat(what, ": op ", i, " (", ops[i].kind == P2POp::Kind::Send ? "send" : "recv", ")");
    check_tensor(op.c_str(), ops[i].tensor);
    check_peer(op.c_str(), ops[i].peer, *group_, rank_, ops[i].tag);
  }
  return post(ops, what, opts.timeout);
}

// Posts `ops` (validated) in order; `what` empty: a single send or receive.
WorkPtr ProcessGroupInProc::post(const std::vector<P2POp>& ops, std::string what, Duration opt_timeout) {
  InProcWorld& w = *world_;
  InProcGroup& g = *group_;
  const Duration timeout = opt_timeout == Duration::zero() ? timeout_ : opt_timeout;
  const auto issued = Clock::now();
  std::vector<std::shared_ptr<P2P>> mine;
  std::vector<std::pair<std::shared_ptr<P2P>, std::shared_ptr<P2P>>> copies;  // (send, recv)
  bool notify = false;
  std::unique_lock<std::mutex> l(w.m);
  for (const P2POp& op : ops) {
    auto p = std::make_shared<P2P>();
    p->is_send = op.kind == P2POp::Kind::Send;
    p->tensor = op.tensor;
    p->src = p->is_send ? rank_ : op.peer;
    p->dst = p->is_send ? op.peer : rank_;
    p->tag = op.tag;
    p->what = describe_p2p(p->is_send, op.tensor, op.peer, op.tag);
    mine.push_back(p);
    const InProcGroup::Key key{p->src, p->dst, p->tag};
    auto& waiting = p->is_send ? g.recvs : g.sends;
    auto it = waiting.find(key);
    if (it == waiting.end()) {
      (p->is_send ? g.sends : g.recvs)[key].push_back(p);
      continue;
    }
    std::shared_ptr<P2P> q = it->second.front();
    it->second.pop_front();
    if (it->second.empty()) waiting.erase(it);
    auto& s = p->is_send ? p : q;
    auto& rv = p->is_send ? q : p;
    s->matched = rv->matched = true;
    if (s->tensor.dtype() != rv->tensor.dtype() || s->tensor.numel() != rv->tensor.numel()) {
      s->error = rv->error =
          weft::detail::str_cat(s->what, " of rank ", s->src, " and ", rv->what, " of rank ", rv->dst, " on ", g.name,
                                " do not match: the send has ", s->tensor.numel(), " ", s->tensor.dtype(),
                                " elements, the receive ", rv->tensor.numel(), " ", rv->tensor.dtype());
      s->tensor = rv->tensor = Tensor();
      notify = true;
    } else {
      copies.emplace_back(s, rv);
    }
  }
  if (!copies.empty()) {
    l.unlock();  // Note [inproc rendezvous]: copy without the lock
    for (auto& [s, rv] : copies) copy_bytes(rv->tensor, s->tensor.raw_data(), s->tensor.nbytes());
    l.lock();
    for (auto& [s, rv] : copies) {
      s->done = rv->done = true;
      s->tensor = rv->tensor = Tensor();
    }
    notify = true;
  }
  l.unlock();
  if (notify) w.cv.notify_all();
  const bool batch = !what.empty();
  if (!batch) what = mine.front()->what;
  return std::make_shared<P2PWork>(world_, group_, std::move(mine), std::move(what), batch, timeout, issued);
}

// ---- run_ranks ----

namespace {
std::string exception_text(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}
}  // namespace

void run_ranks(int n, const std::function<void(std::shared_ptr<ProcessGroup>)>& body, const RunRanksOptions& opts) {
  WEFT_CHECK(n >= 1, "run_ranks: need at least one rank, got ", n);
  auto groups = ProcessGroupInProc::create_world(n, opts.timeout);
  std::mutex m;
  int first = -1;
  std::string first_text;
  std::vector<std::thread> threads;
  auto run = [&](int r) {
    std::string reason = "its thread returned";
    try {
      body(groups[r]);
    } catch (...) {
      std::string text = exception_text(std::current_exception());
      {
        std::lock_guard<std::mutex> l(m);
        if (first < 0) {
          first = r;
          first_text = text;
        }
      }
      reason = "its thread threw: " + text;
    }
    groups[r]->mark_exited(reason);
  };
  try {
    for (int r = 0; r < n; ++r) threads.emplace_back(run, r);
  } catch (const std::exception& e) {  // could not start a thread: let the started ones fail and finish
    for (int r = static_cast<int>(threads.size()); r < n; ++r)
      groups[r]->mark_exited(std::string("its thread could not be started: ") + e.what());
    for (auto& t : threads) t.join();
    WEFT_ERROR("run_ranks: starting the thread of rank ", threads.size(), " of ", n, " failed: ", e.what());
  }
  for (auto& t : threads) t.join();
  if (first >= 0) WEFT_ERROR("run_ranks: rank ", first, " of ", n, " failed: ", first_text);
}

}  // namespace weft::parallel
