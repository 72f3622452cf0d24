// Point-to-point on an MPI group: send, recv and batch_isend_irecv, all made
// of non-blocking MPI_Isend/MPI_Irecv (contracts in process_group.h and
// process_group_mpi.h).
//
// Note [batched p2p]: batch_isend_irecv posts every request of every operation
// before it returns, and posting never waits (MPI_Isend/MPI_Irecv), so two
// ranks that send to each other in one batch each have their receive posted
// alongside their send: the exchange cannot deadlock however large the
// messages (a rendezvous send waits only for the peer's receive, which is
// already posted). The one Work completes when every request has finished;
// its timeout names the peers and operations still pending. Plain send and
// recv are batches of one, so they match batched operations of the peer.
//
// Note [p2p headers]: every point-to-point message is two MPI messages: a
// header of two int64s (dtype, element count) on the group's side
// communicator with tag kP2PHeaderTag + tag, and the payload on its data
// communicator with the user's tag. MPI delivers messages of one (source,
// communicator, tag) in order, so the k-th header from a peer matches the
// k-th payload. The receiver posts both receives at once (nothing waits for
// the header) and, once both finished, compares the header with its own
// tensor: a dtype or size difference is an error naming both sides, also when
// MPI truncated a larger payload or the byte counts happen to agree (float32
// and int32). The sender's Work completes normally: only the receiver can see
// the mismatch.
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "parallel/comm/mpi/group_state.h"
#include "parallel/comm/mpi/mpi_common.h"
#include "parallel/comm/mpi/process_group_mpi.h"
#include "parallel/comm/mpi/work_mpi.h"

namespace weft::parallel {

using detail::check_tensor;
using detail::kMaxUserTag;
using detail::kP2PHeaderTag;
using detail::MPIGroupState;
using detail::WorkState;

namespace {

void check_peer(const std::string& what, int peer, const MPIGroupState& s, int tag) {
  WEFT_CHECK(peer >= 0 && peer < s.size, what, ": rank ", peer, " is not in ", s.name, " (size ", s.size, ")");
  WEFT_CHECK(peer != s.rank, what, ": rank ", peer, " is this rank; send/recv to self is not supported");
  WEFT_CHECK(tag >= 0 && tag <= kMaxUserTag, what, ": tag must be in [0, ", kMaxUserTag, "], got ", tag);
}

// Note [p2p headers]: header tags go up to kP2PHeaderTag + kMaxUserTag, above
// the 32767 MPI guarantees (Open MPI allows 2^31 - 1).
void check_tag_room() {
  static const int tag_ub = [] {
    void* v = nullptr;
    int flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &v, &flag);
    return flag ? *static_cast<int*>(v) : 32767;
  }();
  WEFT_CHECK(tag_ub >= kP2PHeaderTag + kMaxUserTag,
             "point-to-point on MPI needs MPI_TAG_UB >= ", kP2PHeaderTag + kMaxUserTag,
             " for its headers; this MPI allows ", tag_ub);
}

std::string describe_p2p(bool is_send, DType d, int64_t n, int peer, int tag) {
  return weft::detail::str_cat(is_send ? "send(" : "recv(", d, ", ", n, " elements, ", is_send ? "to" : "from",
                               " rank ", peer, ", tag ", tag, ")");
}

// What finish() needs to know of each operation.
struct OpMeta {
  bool is_send;
  DType dtype;
  int64_t numel;
  int peer, tag;
  std::string label;
};

// Note [p2p headers]: checks each receive against its header. Requests 2i and
// 2i+1 are operation i's header and payload.
void check_receives(WorkState& w, const std::vector<OpMeta>& ops, int me) {
  const std::string prefix = w.batch ? weft::detail::str_cat(w.what, " on ", w.gs->name, " failed: ") : "";
  for (size_t i = 0; i < ops.size(); ++i) {
    const OpMeta& op = ops[i];
    const int head_rc = w.rcs[2 * i], body_rc = w.rcs[2 * i + 1];
    if (head_rc != MPI_SUCCESS || (op.is_send && body_rc != MPI_SUCCESS)) {
      WEFT_ERROR(prefix, op.label, " on ", w.gs->name,
                 " failed in MPI: ", detail::mpi_error_string(head_rc != MPI_SUCCESS ? head_rc : body_rc));
    }
    if (op.is_send) continue;
    const int64_t sent_dtype = w.headers[2 * i], sent_numel = w.headers[2 * i + 1];
    WEFT_CHECK(sent_dtype >= 0 && sent_dtype < kNumDTypes && sent_numel >= 0, prefix, op.label, " on ", w.gs->name,
               ": the header from rank ", op.peer, " is not one weft wrote (dtype ", sent_dtype, ", count ", sent_numel,
               "): another library used this communicator's tags");
    const DType sd = static_cast<DType>(sent_dtype);
    if (sd == op.dtype && sent_numel == op.numel) {
      if (body_rc != MPI_SUCCESS) {
        WEFT_ERROR(prefix, op.label, " on ", w.gs->name, " failed in MPI: ", detail::mpi_error_string(body_rc));
      }
      continue;
    }
    std::string detail =
        sd == op.dtype ? weft::detail::str_cat("received ", sent_numel, " elements but the tensor holds ", op.numel)
                       : weft::detail::str_cat("the send has ", sent_numel, " ", sd, " elements, the receive ",
                                               op.numel, " ", op.dtype);
    WEFT_ERROR(prefix, describe_p2p(true, sd, sent_numel, me, op.tag), " of rank ", op.peer, " and ", op.label,
               " of rank ", me, " on ", w.gs->name, " do not match: ", detail);
  }
}

}  // namespace

WorkPtr ProcessGroupMPI::send(const Tensor& tensor, int dst, const SendRecvOptions& opts) {
  check_tensor("send", tensor);
  check_peer("send", dst, *s_, opts.tag);
  return post_p2p({P2POp::send(tensor, dst, opts.tag)}, "", opts.timeout);
}

WorkPtr ProcessGroupMPI::recv(Tensor& tensor, int src, const SendRecvOptions& opts) {
  check_tensor("recv", tensor);
  check_peer("recv", src, *s_, opts.tag);
  return post_p2p({P2POp::recv(tensor, src, opts.tag)}, "", opts.timeout);
}

WorkPtr ProcessGroupMPI::batch_isend_irecv(const std::vector<P2POp>& ops, const BatchP2POptions& opts) {
  const std::string what = weft::detail::str_cat("batch_isend_irecv(", ops.size(), " ops)");
  for (size_t i = 0; i < ops.size(); ++i) {
    const std::string op =
        weft::detail::str_cat(what, ": op ", i, " (", ops[i].kind == P2POp::Kind::Send ? "send" : "recv", ")");
    check_tensor(op.c_str(), ops[i].tensor);
    check_peer(op, ops[i].peer, *s_, ops[i].tag);
  }
  return post_p2p(ops, what, opts.timeout);
}

// Posts `ops` (validated) as one Work (Note [batched p2p]); `what` empty: a
// single send or receive, named by itself.
WorkPtr ProcessGroupMPI::post_p2p(const std::vector<P2POp>& ops, std::string what, Duration opt_timeout) {
  std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
  check_tag_room();
  auto st = std::make_shared<WorkState>();
  st->gs = s_.get();
  st->group = shared_from_this();
  st->batch = !what.empty();
  st->timeout = opt_timeout == Duration::zero() ? timeout_ : opt_timeout;
  st->issued = detail::Clock::now();
  const size_t n = ops.size();
  st->expect(2 * n);
  st->req_peer.resize(2 * n);
  st->req_label.resize(2 * n);
  st->headers.assign(2 * n, 0);
  std::vector<OpMeta> meta;
  for (size_t i = 0; i < n; ++i) {
    const P2POp& op = ops[i];
    const bool is_send = op.kind == P2POp::Kind::Send;
    meta.push_back({is_send, op.tensor.dtype(), op.tensor.numel(), op.peer, op.tag,
                    describe_p2p(is_send, op.tensor.dtype(), op.tensor.numel(), op.peer, op.tag)});
    st->req_peer[2 * i] = st->req_peer[2 * i + 1] = op.peer;
    st->req_label[2 * i] = st->req_label[2 * i + 1] = meta.back().label;
    st->keep.push_back(op.tensor);
  }
  st->what = st->batch ? std::move(what) : meta.front().label;
  int rc = MPI_SUCCESS;
  for (size_t i = 0; i < n && rc == MPI_SUCCESS; ++i) {
    const P2POp& op = ops[i];
    int64_t* head = &st->headers[2 * i];
    void* data = op.tensor.raw_data();
    const int count = static_cast<int>(op.tensor.numel());
    const MPI_Datatype dt = detail::mpi_type(op.tensor.dtype());
    if (meta[i].is_send) {
      head[0] = static_cast<int64_t>(op.tensor.dtype());
      head[1] = op.tensor.numel();
      rc = MPI_Isend(head, 2, MPI_INT64_T, op.peer, kP2PHeaderTag + op.tag, s_->side, &st->reqs[2 * i]);
      if (rc == MPI_SUCCESS) rc = MPI_Isend(data, count, dt, op.peer, op.tag, s_->comm, &st->reqs[2 * i + 1]);
    } else {
      rc = MPI_Irecv(head, 2, MPI_INT64_T, op.peer, kP2PHeaderTag + op.tag, s_->side, &st->reqs[2 * i]);
      if (rc == MPI_SUCCESS) rc = MPI_Irecv(data, count, dt, op.peer, op.tag, s_->comm, &st->reqs[2 * i + 1]);
    }
  }
  const int me = s_->rank;
  st->finish = [meta = std::move(meta), me](WorkState& w) { check_receives(w, meta, me); };
  return detail::launch_work(st, rc);
}

}  // namespace weft::parallel
