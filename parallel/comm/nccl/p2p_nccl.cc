// Point-to-point on an NCCL group: send, recv and batch_isend_irecv (contracts
// in process_group.h and process_group_nccl.h).
//
// Note [nccl batched p2p]: batch_isend_irecv puts every ncclSend/ncclRecv of
// the batch between one ncclGroupStart/ncclGroupEnd, so NCCL launches them as
// one operation on the communication stream and the sends and receives
// progress together: two ranks sending to each other at once, or a ring,
// cannot deadlock as separately issued send and recv do. NCCL has no tags:
// between two ranks, the messages of one direction match in issue order. The
// tags are still checked in debug mode: for each peer, in ascending peer order
// (which cannot deadlock: a rank waits only on a peer whose own pending
// exchange is with a lower rank), the two ranks first exchange how many
// messages go each way (batch_p2p_fingerprint), then each message's
// fingerprint (dtype, element count, direction and tag), lower-to-higher
// messages first, so a difference is named on both ranks before anything
// reaches NCCL.
#include <nccl.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "parallel/comm/desync.h"
#include "parallel/comm/nccl/nccl_common.h"
#include "parallel/comm/nccl/process_group_nccl.h"
#include "parallel/comm/nccl/work_nccl.h"

namespace weft::parallel {

using detail::check_tensor;
using detail::Issue;
using detail::nccl_type;
using detail::NCCLGroupState;

namespace {

constexpr int kMaxTag = 32767;

void check_peer(const std::string& what, int peer, const NCCLGroupState& s, int tag) {
  WEFT_CHECK(peer >= 0 && peer < s.size, what, ": rank ", peer, " is not in ", s.name, " (size ", s.size, ")");
  WEFT_CHECK(peer != s.rank, what, ": rank ", peer, " is this rank; send/recv to self is not supported");
  WEFT_CHECK(tag >= 0 && tag <= kMaxTag, what, ": tag must be in [0, ", kMaxTag, "], got ", tag);
}

Fingerprint message_fingerprint(const Tensor& t, int src, int dst, int tag) {
  return {-1, 0, Fingerprint::kSendRecv, int64_t(t.dtype()), t.numel(), send_recv_sub(src, dst, tag)};
}

// Note [nccl batched p2p]: the debug-mode exchanges of a batch, and its peers
// in ascending order.
std::vector<std::pair<int, Fingerprint>> batch_checks(const std::vector<P2POp>& ops, int me, std::vector<int>* peers) {
  for (const P2POp& op : ops)
    if (std::find(peers->begin(), peers->end(), op.peer) == peers->end()) peers->push_back(op.peer);
  std::sort(peers->begin(), peers->end());
  std::vector<std::pair<int, Fingerprint>> checks;
  for (int p : *peers) {
    const int lo = std::min(me, p), hi = std::max(me, p);
    std::vector<Fingerprint> up, down;  // lo -> hi, hi -> lo, in issue order
    for (const P2POp& op : ops) {
      if (op.peer != p) continue;
      const bool is_send = op.kind == P2POp::Kind::Send;
      const int src = is_send ? me : p, dst = is_send ? p : me;
      (src == lo ? up : down).push_back(message_fingerprint(op.tensor, src, dst, op.tag));
    }
    checks.emplace_back(p, batch_p2p_fingerprint(lo, hi, int64_t(up.size()), int64_t(down.size())));
    for (const Fingerprint& f : up) checks.emplace_back(p, f);
    for (const Fingerprint& f : down) checks.emplace_back(p, f);
  }
  return checks;
}

}  // namespace

WorkPtr ProcessGroupNCCL::send(const Tensor& tensor, int dst, const SendRecvOptions& opts) {
  check_tensor("send", tensor, *s_);
  check_peer("send", dst, *s_, opts.tag);
  Issue is(*s_,
           weft::detail::str_cat("send(", tensor.dtype(), ", ", tensor.numel(), " elements, to rank ", dst, ", tag ",
                                 opts.tag, ")"),
           message_fingerprint(tensor, s_->rank, dst, opts.tag), dst, opts.timeout, timeout_);
  is.op().keep = {tensor};
  is.nccl(ncclSend(tensor.raw_data(), static_cast<size_t>(tensor.numel()), nccl_type(tensor.dtype()), dst, is.comm(),
                   is.stream()),
          "ncclSend");
  return is.commit(shared_from_this());
}

WorkPtr ProcessGroupNCCL::recv(Tensor& tensor, int src, const SendRecvOptions& opts) {
  check_tensor("recv", tensor, *s_);
  check_peer("recv", src, *s_, opts.tag);
  Issue is(*s_,
           weft::detail::str_cat("recv(", tensor.dtype(), ", ", tensor.numel(), " elements, from rank ", src, ", tag ",
                                 opts.tag, ")"),
           message_fingerprint(tensor, src, s_->rank, opts.tag), src, opts.timeout, timeout_);
  is.op().keep = {tensor};
  is.nccl(ncclRecv(tensor.raw_data(), static_cast<size_t>(tensor.numel()), nccl_type(tensor.dtype()), src, is.comm(),
                   is.stream()),
          "ncclRecv");
  return is.commit(shared_from_this());
}

WorkPtr ProcessGroupNCCL::batch_isend_irecv(const std::vector<P2POp>& ops, const BatchP2POptions& opts) {
  const std::string what = weft::detail::str_cat("batch_isend_irecv(", ops.size(), " ops)");
  for (size_t i = 0; i < ops.size(); ++i) {
    const std::string op =
        weft::detail::str_cat(what, ": op ", i, " (", ops[i].kind == P2POp::Kind::Send ? "send" : "recv", ")");
    check_tensor(op.c_str(), ops[i].tensor, *s_);
    check_peer(op, ops[i].peer, *s_, ops[i].tag);
  }
  if (ops.empty()) return completed_work();
  std::vector<int> peers;
  auto checks = batch_checks(ops, s_->rank, &peers);
  Issue is(*s_, what, std::move(peers), checks, opts.timeout, timeout_);
  for (const P2POp& op : ops) is.op().keep.push_back(op.tensor);
  is.nccl(ncclGroupStart(), "ncclGroupStart");
  for (const P2POp& op : ops) {
    const auto n = static_cast<size_t>(op.tensor.numel());
    const ncclDataType_t dt = nccl_type(op.tensor.dtype());
    ncclResult_t rc = op.kind == P2POp::Kind::Send
                          ? ncclSend(op.tensor.raw_data(), n, dt, op.peer, is.comm(), is.stream())
                          : ncclRecv(op.tensor.raw_data(), n, dt, op.peer, is.comm(), is.stream());
    if (rc != ncclSuccess && rc != ncclInProgress) {
      (void)ncclGroupEnd();
      is.nccl(rc, op.kind == P2POp::Kind::Send ? "ncclSend" : "ncclRecv");
    }
  }
  is.nccl(ncclGroupEnd(), "ncclGroupEnd");
  return is.commit(shared_from_this());
}

}  // namespace weft::parallel
