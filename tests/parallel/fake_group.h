// FakeGroup: an in-process ProcessGroup for tests. N "ranks" are threads of one
// process sharing a rendezvous; collective number k of every rank meets in
// round k, and the last rank to arrive computes the result for all (so a
// collective completes only once every rank issued it: real async semantics).
// Supports allreduce (sum, avg, max, min; floating dtypes and int64),
// broadcast, allgather and barrier. run_ranks(n, body) runs body(group) on n
// threads and rethrows the first exception.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/autograd_meta.h"
#include "core/ops.h"
#include "parallel/process_group.h"

namespace weft::parallel::fake {

struct FakeShared {
  struct Round {
    std::string op;
    std::vector<std::function<void()>> parts;  // unused
    std::vector<Tensor> in;                    // one per rank
    std::vector<std::vector<Tensor>> outs;     // allgather outputs per rank
    AllreduceOptions ar;
    int root = 0;
    int arrived = 0;
    bool done = false;
    std::string error;
  };
  explicit FakeShared(int n) : size(n) {}
  int size;
  std::mutex m;
  std::condition_variable cv;
  std::map<uint64_t, std::shared_ptr<Round>> rounds;
};

class FakeWork : public Work {
 public:
  FakeWork(std::shared_ptr<FakeShared> s, std::shared_ptr<FakeShared::Round> r) : s_(std::move(s)), r_(std::move(r)) {}
  bool is_completed() override {
    std::lock_guard<std::mutex> l(s_->m);
    return r_->done;
  }
  void wait(Duration timeout) override {
    std::unique_lock<std::mutex> l(s_->m);
    if (timeout == Duration::zero()) timeout = std::chrono::seconds(60);
    bool ok = s_->cv.wait_for(l, timeout, [&] { return r_->done; });
    WEFT_CHECK(ok, "FakeGroup: ", r_->op, " timed out");
    WEFT_CHECK(r_->error.empty(), r_->error);
  }

 private:
  std::shared_ptr<FakeShared> s_;
  std::shared_ptr<FakeShared::Round> r_;
};

class FakeGroup : public ProcessGroup {
 public:
  FakeGroup(std::shared_ptr<FakeShared> s, int rank) : s_(std::move(s)), rank_(rank) {
    for (int r = 0; r < s_->size; ++r) ranks_.push_back(r);
  }
  int rank() const override { return rank_; }
  int size() const override { return s_->size; }
  const std::vector<int>& global_ranks() const override { return ranks_; }
  std::string backend_name() const override { return "fake"; }

  WorkPtr allreduce(Tensor& t, const AllreduceOptions& o = {}) override {
    return post(
        "allreduce", t, [&](FakeShared::Round& r) { r.ar = o; },
        [](FakeShared::Round& r) {
          NoGradGuard ng;
          Tensor acc = r.in[0].to(DType::Float64);
          if (r.in[0].dtype() == DType::Float64) acc = acc.clone();
          for (size_t k = 1; k < r.in.size(); ++k) {
            Tensor x = r.in[k].to(DType::Float64);
            if (r.ar.op == ReduceOp::Sum || r.ar.op == ReduceOp::Avg) acc.add_(x);
            else if (r.ar.op == ReduceOp::Max) acc = maximum(acc, x);
            else acc = minimum(acc, x);
          }
          if (r.ar.op == ReduceOp::Avg) acc.div_(Scalar(static_cast<double>(r.in.size())));
          for (auto& t : r.in) t.copy_(acc.to(t.dtype()));
        });
  }
  WorkPtr broadcast(Tensor& t, const BroadcastOptions& o = {}) override {
    return post(
        "broadcast", t, [&](FakeShared::Round& r) { r.root = o.root; },
        [](FakeShared::Round& r) {
          NoGradGuard ng;
          Tensor src = r.in[r.root].clone();
          for (auto& t : r.in) t.copy_(src);
        });
  }
  WorkPtr allgather(std::vector<Tensor>& outputs, const Tensor& input, const AllgatherOptions& = {}) override {
    Tensor in = input;
    return post(
        "allgather", in, [&](FakeShared::Round& r) { r.outs[rank_] = outputs; },
        [](FakeShared::Round& r) {
          NoGradGuard ng;
          for (auto& outs : r.outs)
            for (size_t k = 0; k < outs.size(); ++k) outs[k].copy_(r.in[k]);
        });
  }
  WorkPtr barrier(const BarrierOptions& = {}) override {
    Tensor dummy = zeros({1});
    return post(
        "barrier", dummy, [](FakeShared::Round&) {}, [](FakeShared::Round&) {});
  }
  WorkPtr reduce_scatter(Tensor&, const std::vector<Tensor>&, const ReduceScatterOptions& = {}) override {
    WEFT_ERROR("FakeGroup: reduce_scatter not supported");
  }
  WorkPtr send(const Tensor&, int, const SendRecvOptions& = {}) override {
    WEFT_ERROR("FakeGroup: send not supported");
  }
  WorkPtr recv(Tensor&, int, const SendRecvOptions& = {}) override { WEFT_ERROR("FakeGroup: recv not supported"); }
  WorkPtr batch_isend_irecv(const std::vector<P2POp>&, const BatchP2POptions& = {}) override {
    WEFT_ERROR("FakeGroup: batch_isend_irecv not supported");
  }
  std::shared_ptr<ProcessGroup> new_group(const std::vector<int>&) override {
    WEFT_ERROR("FakeGroup: new_group not supported");
  }

 private:
  WorkPtr post(const std::string& op, Tensor& t, const std::function<void(FakeShared::Round&)>& setup,
               const std::function<void(FakeShared::Round&)>& compute) {
    std::shared_ptr<FakeShared::Round> r;
    {
      std::lock_guard<std::mutex> l(s_->m);
      auto& slot = s_->rounds[seq_++];
      if (!slot) {
        slot = std::make_shared<FakeShared::Round>();
        slot->op = op;
        slot->in.resize(s_->size);
        slot->outs.resize(s_->size);
      }
      r = slot;
      if (r->op != op) r->error = "FakeGroup: ranks issued different collectives (" + r->op + " vs " + op + ")";
      r->in[rank_] = t;
      setup(*r);
      if (++r->arrived == s_->size) {
        if (r->error.empty()) {
          try {
            compute(*r);
          } catch (const std::exception& e) {
            r->error = e.what();
          }
        }
        r->done = true;
        s_->cv.notify_all();
      }
    }
    return std::make_shared<FakeWork>(s_, r);
  }

  std::shared_ptr<FakeShared> s_;
  int rank_;
  uint64_t seq_ = 0;
  std::vector<int> ranks_;
};

// Runs body(group) on n threads; rethrows the first exception.
inline void run_ranks(int n, const std::function<void(std::shared_ptr<ProcessGroup>)>& body) {
  auto shared = std::make_shared<FakeShared>(n);
  std::vector<std::exception_ptr> errs(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        body(std::make_shared<FakeGroup>(shared, r));
      } catch (...) {
        errs[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errs)
    if (e) std::rethrow_exception(e);
}

}  // namespace weft::parallel::fake
