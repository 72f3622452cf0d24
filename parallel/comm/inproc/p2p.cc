// Point-to-point on the in-process group: send, recv and batch_isend_irecv.
// Each operation is queued under (source, destination, tag) until the peer
// posts its match; whoever posts second checks size and dtype and copies the
// data (Note [inproc rendezvous] in world.h), so a send completes only once
// the matching receive exists, and posting never waits (exchanges both ways
// cannot deadlock). A Work waits for its operations: done, failed (a
// mismatch), an unmatched peer exited, or the timeout passed, naming the
// peers and, for a batch, the operations still pending. Contract in
// process_group_inproc.h.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/inproc/world.h"

namespace weft::parallel {

using detail::InProcGroup;
using detail::InProcWorld;
using detail::P2P;
using namespace detail::inproc;

namespace {

void check_peer(const char* what, int peer, const InProcGroup& g, int rank, int tag) {
  WEFT_CHECK(peer >= 0 && peer < g.size(), what, ": rank ", peer, " is not in ", g.name, " (size ", g.size(), ")");
  WEFT_CHECK(peer != rank, what, ": rank ", peer, " is this rank; send/recv to self is not supported");
  WEFT_CHECK(tag >= 0 && tag <= 32767, what, ": tag must be in [0, 32767], got ", tag);
}

std::string describe_p2p(bool is_send, const Tensor& t, int peer, int tag) {
  return is_send ? describe("send", t, weft::detail::str_cat(", to rank ", peer, ", tag ", tag))
                 : describe("recv", t, weft::detail::str_cat(", from rank ", peer, ", tag ", tag));
}

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
        WEFT_ERROR(what_, " on ", g_->name, " timed out after ", seconds(limit),
                   " s: ", missing_ranks_text(peers, g_->global_ranks),
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

}  // namespace weft::parallel
