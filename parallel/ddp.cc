// DistributedDataParallel (parallel/ddp.h).
//
// Note [bucket order]: parameters that require grad are taken in reverse
// registration order (backward usually produces the last layer's gradients
// first) and appended to the open bucket of their (dtype, device); a bucket is
// closed when adding the next parameter would pass the cap (first_bucket_cap_mb
// for the first bucket of each (dtype, device), bucket_cap_mb after), so a
// parameter larger than the cap gets a bucket of its own. Buckets are numbered
// in creation order. The layout depends only on the parameter list, which
// construction checks is the same on every rank, so it is identical everywhere.
// Buckets are launched strictly in index order (a ready bucket waits for every
// earlier one), so every rank issues the same sequence of collectives even if
// gradients become ready in different orders.
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
#include "parallel/ddp.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "autograd/engine.h"
#include "core/autograd_meta.h"
#include "optim/optimizer.h"

namespace weft::parallel {
namespace {

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h >> 1;  // fits int64
}

std::string describe(const std::string& kind, const std::string& name, const Tensor& t) {
  std::ostringstream os;
  os << kind << " '" << name << "' " << shape_str(t.sizes()) << " " << t.dtype();
  return os.str();
}

constexpr int64_t kDescLen = 256;

}  // namespace

ParamUpdateFn optimizer_update(optim::Optimizer& opt) {
  optim::Optimizer* o = &opt;
  return [o](const std::vector<Tensor>& params) {
    std::unordered_set<const TensorImpl*> keep;
    for (const auto& p : params) keep.insert(p.impl());
    std::vector<std::pair<Tensor, Tensor>> hidden;
    for (auto& g : o->param_groups())
      for (auto& p : g.params)
        if (!keep.count(p.impl()) && p.grad().defined()) {
          hidden.emplace_back(p, p.grad());
          p.zero_grad();
        }
    auto restore = [&] {
      for (auto& [p, grad] : hidden) p.set_grad(grad);
    };
    try {
      o->step();
    } catch (...) {
      restore();
      throw;
    }
    restore();
  };
}

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                                 std::shared_ptr<ProcessGroup> group, DDPOptions options)
    : module_(std::move(module)), group_(std::move(group)), options_(std::move(options)) {
  WEFT_CHECK(module_ != nullptr, "DistributedDataParallel: module is null");
  WEFT_CHECK(group_ != nullptr, "DistributedDataParallel: process group is null");
  WEFT_CHECK(options_.bucket_cap_mb > 0 && options_.first_bucket_cap_mb > 0,
             "DistributedDataParallel: bucket caps must be positive, got bucket_cap_mb=", options_.bucket_cap_mb,
             " first_bucket_cap_mb=", options_.first_bucket_cap_mb);
  WEFT_CHECK(!options_.non_blocking || options_.update,
             "DistributedDataParallel: non_blocking mode needs DDPOptions::update (e.g. optimizer_update(opt))");
  if (!options_.comm_hook) options_.comm_hook = allreduce_avg_hook;

  for (auto& [name, p] : module_->named_parameters())
    if (p.requires_grad()) {
      WEFT_CHECK(p.is_floating_point(), "DistributedDataParallel: parameter '", name, "' has dtype ", p.dtype(),
                 "; only floating-point parameters can be reduced");
      params_.push_back(Param{name, p});
    }
  verify_same_parameters();
  broadcast_state(/*params_too=*/true);
  build_buckets();

  for (size_t i = 0; i < params_.size(); ++i) {
    int idx = static_cast<int>(i);
    handles_.push_back(
        params_[i].tensor.register_post_accumulate_grad_hook([this, idx](const Tensor&) { on_grad_ready(idx); }));
  }
  if (options_.non_blocking) {
    std::unordered_map<const TensorImpl*, int> index;
    for (size_t i = 0; i < params_.size(); ++i) index[params_[i].tensor.impl()] = static_cast<int>(i);
    for (auto& [mname, m] : module_->named_modules()) {
      std::vector<int> own;
      for (auto& [pname, p] : m->named_parameters(/*recurse=*/false)) {
        auto it = index.find(p.impl());
        if (it != index.end() && params_[it->second].owner < 0) own.push_back(it->second);
      }
      if (own.empty()) continue;
      int o = static_cast<int>(owners_.size());
      for (int i : own) params_[i].owner = o;
      owners_.push_back(own);
      handles_.push_back(m->register_forward_pre_hook([this, o](nn::Module&, const Tensor&) {
        if (pending_) finish_module(o);
      }));
    }
  }
  ready_.assign(params_.size(), 0);
  updated_.assign(params_.size(), 1);
}

DistributedDataParallel::~DistributedDataParallel() {
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

void DistributedDataParallel::verify_same_parameters() {
  std::vector<std::string> desc;
  for (auto& [name, p] : module_->named_parameters()) desc.push_back(describe("parameter", name, p));
  for (auto& [name, b] : module_->named_buffers()) desc.push_back(describe("buffer", name, b));
  const int n = group_->size();
  if (n == 1) return;

  auto gather = [&](const Tensor& mine) {
    std::vector<Tensor> outs;
    for (int r = 0; r < n; ++r) outs.push_back(empty_like(mine));
    group_->allgather(outs, mine)->wait();
    return outs;
  };
  Tensor count = full({1}, static_cast<int64_t>(desc.size()), {DType::Int64});
  auto counts = gather(count);
  int64_t maxc = 0;
  for (auto& c : counts) maxc = std::max(maxc, c.item<int64_t>());
  Tensor hashes = full({std::max<int64_t>(maxc, 1)}, static_cast<int64_t>(-1), {DType::Int64});
  for (size_t i = 0; i < desc.size(); ++i) hashes.data_ptr<int64_t>()[i] = static_cast<int64_t>(fnv1a(desc[i]));
  auto all = gather(hashes);
  int64_t first = -1;
  for (int64_t k = 0; k < maxc && first < 0; ++k)
    for (int r = 1; r < n; ++r)
      if (all[r].data_ptr<int64_t>()[k] != all[0].data_ptr<int64_t>()[k]) {
        first = k;
        break;
      }
  if (first < 0) return;

  std::string mine = first < static_cast<int64_t>(desc.size()) ? desc[first] : std::string("nothing");
  Tensor enc = zeros({kDescLen}, {DType::Int64});
  for (size_t i = 0; i < mine.size() && i < static_cast<size_t>(kDescLen); ++i)
    enc.data_ptr<int64_t>()[i] = static_cast<unsigned char>(mine[i]);
  auto names = gather(enc);
  std::ostringstream os;
  os << "DistributedDataParallel: ranks hold different parameters; first mismatch at entry #" << first << ":";
  std::vector<int> differ;
  for (int r = 0; r < n; ++r) {
    std::string s;
    for (int64_t i = 0; i < kDescLen; ++i) {
      int64_t c = names[r].data_ptr<int64_t>()[i];
      if (c == 0) break;
      s.push_back(static_cast<char>(c));
    }
    os << (r ? "," : "") << " rank " << r << " has " << s;
    if (all[r].data_ptr<int64_t>()[first] != all[0].data_ptr<int64_t>()[first]) differ.push_back(r);
  }
  os << " (ranks differing from rank 0:";
  for (int r : differ) os << " " << r;
  os << ")";
  WEFT_ERROR(os.str());
}

void DistributedDataParallel::broadcast_state(bool params_too) {
  if (group_->size() == 1) return;
  NoGradGuard ng;
  std::vector<Tensor> ts;
  if (params_too)
    for (auto& p : module_->parameters()) ts.push_back(p.detach());
  for (auto& b : module_->buffers()) ts.push_back(b.detach());
  std::vector<WorkPtr> works;
  for (auto& t : ts) {
    WEFT_CHECK(t.is_contiguous(), "DistributedDataParallel: parameters and buffers must be contiguous to broadcast");
    BroadcastOptions o;
    o.root = 0;
    works.push_back(group_->broadcast(t, o));
  }
  for (auto& w : works) w->wait();
  for (auto& t : ts) t.bump_version();
}

void DistributedDataParallel::build_buckets() {
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

std::vector<std::vector<std::string>> DistributedDataParallel::bucket_names() const {
  std::vector<std::vector<std::string>> out;
  for (auto& b : buckets_) {
    out.emplace_back();
    for (int i : b.params) out.back().push_back(params_[i].name);
  }
  return out;
}

void DistributedDataParallel::reset_backward_state() {
  in_backward_ = false;
  next_bucket_ = 0;
  std::fill(ready_.begin(), ready_.end(), 0);
}

void DistributedDataParallel::start_backward() {
  WEFT_CHECK(!pending_,
             "DistributedDataParallel: a backward started while the previous step's non-blocking "
             "reductions are unfinished; run a forward through DDP (or call finish()) in between");
  in_backward_ = true;
  next_bucket_ = 0;
  poll_next_ = 0;
  std::fill(ready_.begin(), ready_.end(), 0);
  for (auto& b : buckets_) {
    b.pending = static_cast<int>(b.params.size());
    b.launched = b.waited = b.stale = false;
    b.work.reset();
  }
  autograd::queue_callback([this] { end_of_backward(); });
}

void DistributedDataParallel::on_grad_ready(int index) {
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

void DistributedDataParallel::poll_launched() {  // Note [progress]
  while (poll_next_ < next_bucket_) {
    Bucket& b = buckets_[poll_next_];
    if (!b.work || !b.work->is_completed()) return;
    ++poll_next_;
  }
}

void DistributedDataParallel::launch_ready_buckets() {
  while (next_bucket_ < static_cast<int>(buckets_.size()) && buckets_[next_bucket_].pending == 0)
    launch(next_bucket_++);
}

void DistributedDataParallel::launch(int bi) {
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

void DistributedDataParallel::wait_bucket(int bi) {
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

void DistributedDataParallel::end_of_backward() {
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
    os << "DistributedDataParallel: " << missing.size() << " parameter(s) received no gradient in this backward: ";
    for (size_t i = 0; i < missing.size(); ++i) os << (i ? ", " : "") << missing[i];
    os << ". Every parameter must take part in the loss on every rank; if some parameters are unused in a "
          "forward, construct DDP with DDPOptions::find_unused_parameters = true";
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
    AllreduceOptions o;
    o.op = ReduceOp::Max;
    group_->allreduce(used, o)->wait();
    // From here on ready_ means "used on some rank".
    for (size_t i = 0; i < params_.size(); ++i) ready_[i] = u[i] > 0.5f ? 1 : 0;
  }
  WEFT_CHECK(next_bucket_ == static_cast<int>(buckets_.size()),
             "DistributedDataParallel: internal error: ", buckets_.size() - next_bucket_, " bucket(s) not launched");
  // Note [ready twice]: re-reduce buckets whose gradients changed after launch.
  for (int bi = 0; bi < static_cast<int>(buckets_.size()); ++bi)
    if (buckets_[bi].stale) {
      buckets_[bi].work->wait();
      launch(bi);
    }
  in_backward_ = false;
  ++stats_.backwards;
  if (options_.non_blocking) {
    pending_ = true;
    std::fill(updated_.begin(), updated_.end(), 0);
    return;
  }
  for (int bi = 0; bi < static_cast<int>(buckets_.size()); ++bi) wait_bucket(bi);
  const auto t_done = Clock::now();
  stats_.window_seconds += std::chrono::duration<double>(t_done - first_launch_).count();
  stats_.blocked_seconds += std::chrono::duration<double>(t_done - t_end).count();
}

void DistributedDataParallel::finish_module(int owner) {
  std::vector<Tensor> todo;
  std::vector<int> idx;
  for (int i : owners_[owner]) {
    if (updated_[i]) continue;
    wait_bucket(params_[i].bucket);
    updated_[i] = 1;
    if (params_[i].tensor.grad().defined()) {
      todo.push_back(params_[i].tensor);
      idx.push_back(i);
    }
  }
  if (todo.empty()) return;
  options_.update(todo);
  for (auto& t : todo) t.zero_grad();  // the reducer consumed this step's gradient
}

void DistributedDataParallel::finish() {
  if (!pending_) return;
  for (int o = 0; o < static_cast<int>(owners_.size()); ++o) finish_module(o);
  for (int bi = 0; bi < static_cast<int>(buckets_.size()); ++bi) wait_bucket(bi);
  pending_ = false;
}

Tensor DistributedDataParallel::forward(const Tensor& input) {
  if (options_.broadcast_buffers && sync_ && GradMode::is_enabled()) broadcast_state(/*params_too=*/false);
  Tensor out = (*module_)(input);
  if (pending_) finish();  // modules this forward did not enter
  return out;
}

}  // namespace weft::parallel
