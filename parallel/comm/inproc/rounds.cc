// The collectives of the in-process group: each is a Round that every rank of
// the group fills in as it issues it; the last to arrive computes the result
// for all (Note [inproc rendezvous] in world.h). A collective's Work waits for
// its round: done, failed (desync, a compute error), a missing rank exited, or
// the timeout passed, each failure naming the collective, its sequence number,
// the group and the missing ranks. Contract in process_group_inproc.h.
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/inproc/reduce.h"
#include "parallel/comm/inproc/world.h"

namespace weft::parallel {

using detail::InProcGroup;
using detail::InProcWorld;
using detail::Kind;
using detail::Round;
using namespace detail::inproc;

namespace {

void check_reduce_op(const char* what, DType d, ReduceOp op) {
  WEFT_CHECK(op != ReduceOp::Avg || is_floating(d), what, ": ReduceOp::avg needs a floating dtype, got ", d);
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
        WEFT_ERROR(what_seq(), " on ", g_->name, " timed out after ", seconds(limit),
                   " s: ", missing_ranks_text(miss, g_->global_ranks), " did not arrive");
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

}  // namespace

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
    slot->created = std::move(is.created);
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
    if (r->error.empty() && r->kind != Kind::NewGroup) {
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

}  // namespace weft::parallel
