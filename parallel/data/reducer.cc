// Reducer (contract in reducer.h).
//
// Note [bucket order]: parameters are taken in reverse order of the list
// (backward usually produces the last layer's gradients first) and appended to
// the open bucket of their (dtype, device); a bucket is closed when adding the
// next parameter would pass the cap (first_bucket_cap_mb for the first bucket
// of each (dtype, device), bucket_cap_mb after), so a parameter larger than the
// cap gets a bucket of its own. Buckets are numbered in creation order. The
// layout depends only on the parameter list, which the caller keeps the same on
// every rank, so it is identical everywhere. Buckets are launched strictly in
// index order (a ready bucket waits for every earlier one), so every rank
// issues the same sequence of collectives even if gradients become ready in
// different orders.
//
// Note [ready twice]: with activation checkpointing, a parameter used both inside
// and outside a checkpointed segment accumulates once per (nested) graph, so its
// post-accumulate hook fires more than once per backward. It is marked ready
// only the first time. Gradients are copied into a bucket when it launches; if a
// later firing arrives after its bucket launched, the bucket is marked stale and
// reduced again (with the final local gradients) at the end of backward. Ranks
// run the same graph, so they agree on which buckets are stale.
//
// Note [progress]: MPI backends without a progress thread (Open MPI) advance a
// non-blocking collective only while some thread is inside an MPI call. So that
// reductions launched early in backward actually proceed while backward runs,
// every gradient hook polls is_completed() on the oldest launched bucket not
// yet seen complete (one test call progresses all outstanding requests).
#include "parallel/data/reducer.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <tuple>

#include "autograd/engine.h"
#include "core/autograd_meta.h"
#include "core/hooks.h"
#include "core/ops.h"
#include "parallel/comm/collectives.h"

namespace weft::parallel {

Reducer::Reducer(NamedTensors params, std::shared_ptr<ProcessGroup> group, ReducerOptions options)
    : group_(std::move(group)), options_(std::move(options)) {
  const std::string& who = options_.owner;
  WEFT_CHECK(group_ != nullptr, who, ": process group is null");
  WEFT_CHECK(options_.bucket_cap_mb > 0 && options_.first_bucket_cap_mb > 0, who,
             ": bucket caps must be positive, got bucket_cap_mb=", options_.bucket_cap_mb,
             " first_bucket_cap_mb=", options_.first_bucket_cap_mb);
  if (!options_.comm_hook) options_.comm_hook = allreduce_avg_hook;
  for (auto& [name, p] : params) {
    WEFT_CHECK(p.defined(), who, ": parameter '", name, "' is undefined");
    WEFT_CHECK(p.requires_grad(), who, ": parameter '", name, "' does not require grad");
    WEFT_CHECK(p.is_floating_point(), who, ": parameter '", name, "' has dtype ", p.dtype(),
               "; only floating-point parameters can be reduced");
    params_.push_back(Param{name, p});
  }
  build_buckets();
  for (size_t i = 0; i < params_.size(); ++i) {
    const int idx = static_cast<int>(i);
    handles_.push_back(params_[i].tensor.register_post_accumulate_grad_hook([this, idx](const Tensor&) { add(idx); }));
  }
  ready_.assign(params_.size(), 0);
}

Reducer::~Reducer() {
  for (auto& h : handles_) h.remove();
  // Drain reductions still in flight so no collective outlives its buffers.
  for (auto& b : buckets_)
    if (b.launched && !b.waited && b.work) {
      try {
        b.work->wait();
      } catch (...) {
      }
    }
}

void Reducer::build_buckets() {
  const double mb = 1024.0 * 1024.0;
  struct Open {
    int bucket = -1;
    int64_t bytes = 0;
    bool had_first = false;
  };
  std::map<std::tuple<int, int, int>, Open> open;
  for (int i = static_cast<int>(params_.size()) - 1; i >= 0; --i) {
    Param& p = params_[i];
    auto key = std::make_tuple(static_cast<int>(p.tensor.dtype()), static_cast<int>(p.tensor.device().type),
                               p.tensor.device().index);
    Open& o = open[key];
    int64_t bytes = static_cast<int64_t>(p.tensor.nbytes());
    double cap = (o.had_first ? options_.bucket_cap_mb : options_.first_bucket_cap_mb) * mb;
    if (o.bucket >= 0 && o.bytes > 0 && static_cast<double>(o.bytes + bytes) > cap) {
      o.bucket = -1;
      o.bytes = 0;
      o.had_first = true;
    }
    if (o.bucket < 0) {
      o.bucket = static_cast<int>(buckets_.size());
      buckets_.emplace_back();
    }
    Bucket& b = buckets_[o.bucket];
    p.bucket = o.bucket;
    p.offset = o.bytes / static_cast<int64_t>(p.tensor.element_size());
    b.params.push_back(i);
    o.bytes += bytes;
  }
  for (auto& b : buckets_) {
    const Tensor& t0 = params_[b.params.front()].tensor;
    const Param& last = params_[b.params.back()];
    b.flat = zeros({last.offset + last.tensor.numel()}, {t0.dtype(), t0.device()});
  }
}

std::vector<std::vector<std::string>> Reducer::bucket_names() const {
  std::vector<std::vector<std::string>> out;
  for (auto& b : buckets_) {
    out.emplace_back();
    for (int i : b.params) out.back().push_back(params_[i].name);
  }
  return out;
}

void Reducer::reset_backward_state() {
  in_backward_ = false;
  next_bucket_ = 0;
  std::fill(ready_.begin(), ready_.end(), 0);
}

void Reducer::start_backward() {
  WEFT_CHECK(!pending_, options_.owner,
             ": a backward started while the previous step's reductions are still pending; wait for them "
             "(wait_all(), or for DDP a forward or finish()) in between");
  in_backward_ = true;
  next_bucket_ = 0;
  poll_next_ = 0;
  std::fill(ready_.begin(), ready_.end(), 0);
  for (auto& b : buckets_) {
    b.pending = static_cast<int>(b.params.size());
    b.launched = b.waited = b.stale = false;
    b.work.reset();
  }
  autograd::queue_callback([this] { finalize(); });
}

void Reducer::add(int index) {
  if (!sync_) return;
  if (!in_backward_) start_backward();
  Bucket& b = buckets_[params_[index].bucket];
  if (ready_[index]) {  // Note [ready twice]
    if (b.launched) b.stale = true;
    return;
  }
  ready_[index] = 1;
  if (--b.pending == 0) launch_ready_buckets();
  poll_launched();
}

void Reducer::poll_launched() {  // Note [progress]
  while (poll_next_ < next_bucket_) {
    Bucket& b = buckets_[poll_next_];
    if (!b.work || !b.work->is_completed()) return;
    ++poll_next_;
  }
}

void Reducer::launch_ready_buckets() {
  while (next_bucket_ < static_cast<int>(buckets_.size()) && buckets_[next_bucket_].pending == 0)
    launch(next_bucket_++);
}

void Reducer::launch(int bi) {
  Bucket& b = buckets_[bi];
  NoGradGuard ng;
  for (int i : b.params) {
    const Param& p = params_[i];
    Tensor slot = b.flat.narrow(0, p.offset, p.tensor.numel());
    Tensor g = p.tensor.grad();
    if (!g.defined()) {
      slot.zero_();
    } else if (g.raw_data() != slot.raw_data() || !g.is_contiguous()) {
      slot.view(p.tensor.sizes()).copy_(g);
    }
  }
  if (bi == 0 && !b.launched) first_launch_ = Clock::now();  // bucket 0 always launches first
  b.launched = true;
  b.waited = false;
  b.work = options_.comm_hook(*group_, b.flat);
  ++stats_.reductions;
}

void Reducer::wait_bucket(int bi) {
  Bucket& b = buckets_[bi];
  if (b.waited || !b.launched) return;
  b.work->wait();
  b.waited = true;
  NoGradGuard ng;
  for (int i : b.params) {
    Param& p = params_[i];
    if (options_.find_unused_parameters && !ready_[i]) continue;  // unused on every rank
    Tensor view = b.flat.narrow(0, p.offset, p.tensor.numel()).view(p.tensor.sizes());
    Tensor g = p.tensor.grad();
    if (options_.gradient_as_bucket_view) {
      if (!g.defined() || g.raw_data() != view.raw_data()) p.tensor.set_grad(view);
    } else if (g.defined()) {
      g.copy_(view);
    } else {
      p.tensor.set_grad(view.clone());
    }
  }
}

void Reducer::wait_param(int index) { wait_bucket(params_[index].bucket); }

void Reducer::wait_all() {
  for (int bi = 0; bi < static_cast<int>(buckets_.size()); ++bi) wait_bucket(bi);
  pending_ = false;
}

void Reducer::finalize() {
  if (!in_backward_) return;
  const auto t_end = Clock::now();
  std::vector<std::string> missing;
  for (size_t i = 0; i < params_.size(); ++i)
    if (!ready_[i]) missing.push_back(params_[i].name);
  if (!missing.empty() && !options_.find_unused_parameters) {
    for (int bi = 0; bi < next_bucket_; ++bi) {
      try {
        buckets_[bi].work->wait();
      } catch (...) {
      }
      buckets_[bi].waited = true;
    }
    reset_backward_state();
    std::ostringstream os;
    os << options_.owner << ": " << missing.size() << " parameter(s) received no gradient in this backward: ";
    for (size_t i = 0; i < missing.size(); ++i) os << (i ? ", " : "") << missing[i];
    os << ". Every parameter must take part in the loss on every rank; if some parameters are unused in a "
          "forward, "
       << options_.unused_hint;
    WEFT_ERROR(os.str());
  }
  if (options_.find_unused_parameters) {
    // Local use map, then mark the missing parameters ready so every bucket launches.
    Tensor used = zeros({static_cast<int64_t>(std::max<size_t>(params_.size(), 1))}, {DType::Float32});
    float* u = used.data_ptr<float>();
    for (size_t i = 0; i < params_.size(); ++i) u[i] = ready_[i] ? 1.0f : 0.0f;
    for (size_t i = 0; i < params_.size(); ++i)
      if (!ready_[i]) --buckets_[params_[i].bucket].pending;
    launch_ready_buckets();
    used = allreduce_host(*group_, used, ReduceOp::Max);
    u = used.data_ptr<float>();
    // From here on ready_ means "used on some rank".
    for (size_t i = 0; i < params_.size(); ++i) ready_[i] = u[i] > 0.5f ? 1 : 0;
  }
  WEFT_CHECK(next_bucket_ == static_cast<int>(buckets_.size()), options_.owner,
             ": internal error: ", buckets_.size() - next_bucket_, " bucket(s) not launched");
  // Note [ready twice]: re-reduce buckets whose gradients changed after launch.
  for (int bi = 0; bi < static_cast<int>(buckets_.size()); ++bi)
    if (buckets_[bi].stale) {
      buckets_[bi].work->wait();
      launch(bi);
    }
  in_backward_ = false;
  ++stats_.backwards;
  ++generation_;
  if (!options_.wait_at_end) {
    pending_ = true;
    return;
  }
  for (int bi = 0; bi < static_cast<int>(buckets_.size()); ++bi) wait_bucket(bi);
  const auto t_done = Clock::now();
  stats_.window_seconds += std::chrono::duration<double>(t_done - first_launch_).count();
  stats_.blocked_seconds += std::chrono::duration<double>(t_done - t_end).count();
}

}  // namespace weft::parallel
