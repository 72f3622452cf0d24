// Daso (contract, Note [daso wire] in daso.h; the schedule's rules in
// daso_schedule.h, Note [daso schedule]).
#include "parallel/data/daso.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <utility>

#include "core/autograd_meta.h"
#include "core/ops.h"
#include "parallel/comm/rank_agreement.h"
#include "parallel/data/comm_volume.h"

namespace weft::parallel {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

Daso::Daso(NodeDataParallel& model, optim::Optimizer& local_optimizer, DasoOptions options)
    : model_(model), opt_(local_optimizer), o_(options), schedule_(options.schedule) {
  WEFT_CHECK(o_.steps_per_epoch > 0, "Daso: steps_per_epoch must be positive (the training batches per epoch), got ",
             o_.steps_per_epoch);
  WEFT_CHECK(o_.downcast == DType::BFloat16 || o_.downcast == DType::Float16 || o_.downcast == DType::Float32,
             "Daso: downcast must be bfloat16, float16 or float32, got ", o_.downcast);
  for (auto& [name, p] : model_.module().named_parameters()) {
    if (!p.requires_grad()) continue;
    WEFT_CHECK(p.dtype() == DType::Float32, "Daso: parameter '", name, "' is ", p.dtype(),
               "; DASO averages float32 parameters");
    params_.push_back(p);
    numel_ += p.numel();
  }
  WEFT_CHECK(!params_.empty(), "Daso: the model has no trainable parameters");
  verify_same_options();
  const int r = model_.groups().ranks_per_node();
  slice_ = (numel_ + r - 1) / r;
  anchor_ = flatten_params();
  arm_node_ddp();
}

Daso::~Daso() {
  if (!pending_) return;
  try {
    pending_->work->wait();
  } catch (...) {  // NOLINT(bugprone-empty-catch): dropping; the collective's error was or will be reported
  }
}

void Daso::verify_same_options() {
  const DasoScheduleOptions& s = o_.schedule;
  std::vector<std::string> desc;
  auto add = [&](const char* name, const auto& v) {
    std::ostringstream os;
    os << name << " " << v;
    desc.push_back(os.str());
  };
  add("total_epochs", s.total_epochs);
  add("warmup_epochs", s.warmup_epochs);
  add("cooldown_epochs", s.cooldown_epochs);
  add("stability_level", s.stability_level);
  add("patience", s.patience);
  add("max_global_skips", s.max_global_skips);
  add("skip_reduction_factor", s.skip_reduction_factor);
  add("local_skip_factor", s.local_skip_factor);
  add("local_skips", s.local_skips);
  add("steps_per_epoch", o_.steps_per_epoch);
  add("downcast", o_.downcast);
  add("trainable elements", numel_);
  const auto d = first_disagreement(*model_.groups().world, desc);
  if (!d) return;
  std::ostringstream os;
  os << "Daso: ranks passed different options; first difference:";
  for (size_t r = 0; r < d->entries.size(); ++r) os << (r ? "," : "") << " rank " << r << " has " << d->entries[r];
  WEFT_ERROR(os.str());
}

Tensor Daso::flatten_params() const {
  NoGradGuard ng;
  const int r = model_.groups().ranks_per_node();
  Tensor flat = zeros({r * slice_});  // (R * S,) float32 on the CPU
  int64_t off = 0;
  for (const Tensor& p : params_) {
    const int64_t n = p.numel();
    flat.narrow(0, off, n).copy_(p.detach().reshape({n}).to(kCPU));
    off += n;
  }
  return flat;
}

void Daso::write_params(const Tensor& flat) {
  NoGradGuard ng;
  int64_t off = 0;
  for (const Tensor& p : params_) {
    const int64_t n = p.numel();
    Tensor dst = p.detach();
    dst.copy_(flat.narrow(0, off, n).view(p.sizes()).to(p.device()));
    dst.bump_version();
    off += n;
  }
}

// Note [daso wire]: this rank's slice of p - A on the wire, all-gathered over
// its global group.
std::unique_ptr<Daso::Pending> Daso::launch() {
  NoGradGuard ng;
  const NodeGroups& g = model_.groups();
  const int nodes = g.num_nodes();
  const int64_t lo = g.local_rank * slice_;
  auto p = std::make_unique<Pending>();
  Tensor diff = flatten_params().narrow(0, lo, slice_).sub(anchor_.narrow(0, lo, slice_));  // (S,) float32
  p->wire = diff.to(o_.downcast).contiguous();
  p->parts.reserve(nodes);
  for (int n = 0; n < nodes; ++n) p->parts.push_back(empty({slice_}, {o_.downcast}));
  p->work = g.global_group->allgather(p->parts, p->wire);
  stats_.bytes_between_nodes += ring_allgather_bytes(static_cast<int64_t>(p->wire.nbytes()), nodes);
  return p;
}

// Waits for `p` and sums the nodes' differences in float32 (node order) into
// the new average of this rank's slice, (S,).
Tensor Daso::receive(Pending& p, bool blocking) {
  NoGradGuard ng;
  const NodeGroups& g = model_.groups();
  const int64_t lo = g.local_rank * slice_;
  const bool arrived = p.seen_complete || !p.work || p.work->is_completed();
  const auto t0 = Clock::now();
  if (p.work) p.work->wait();
  Tensor avg = zeros({slice_});  // (S,) float32
  for (const Tensor& part : p.parts) avg.add_(part.to(DType::Float32));
  avg.div_(static_cast<double>(g.num_nodes())).add_(anchor_.narrow(0, lo, slice_));
  if (blocking || !arrived) {
    ++stats_.steps_waiting;
    stats_.seconds_waiting += seconds_since(t0);
  }
  ++stats_.global_syncs;
  return avg;
}

// Note [daso wire]: every rank's slice of each of `mine` ((S,) each), all-
// gathered inside the node in one message; returns each whole, (R * S,).
std::vector<Tensor> Daso::node_allgather(const std::vector<Tensor>& mine) {
  NoGradGuard ng;
  const NodeGroups& g = model_.groups();
  const int r = g.ranks_per_node();
  if (r == 1) return mine;
  const int64_t k = static_cast<int64_t>(mine.size());
  Tensor packed = mine.size() == 1 ? mine[0] : cat(mine, 0);  // (k * S,)
  std::vector<Tensor> slices;
  slices.reserve(r);
  for (int i = 0; i < r; ++i) slices.push_back(empty({k * slice_}));
  g.node_group->allgather(slices, packed)->wait();
  stats_.bytes_within_node += ring_allgather_bytes(static_cast<int64_t>(packed.nbytes()), r);
  std::vector<Tensor> out;
  out.reserve(k);
  for (int64_t j = 0; j < k; ++j) {
    Tensor whole = empty({r * slice_});
    for (int i = 0; i < r; ++i) whole.narrow(0, i * slice_, slice_).copy_(slices[i].narrow(0, j * slice_, slice_));
    out.push_back(whole);
  }
  return out;
}

bool Daso::local_skipping() const {
  const NodeGroups& g = model_.groups();
  return g.num_nodes() > 1 && g.ranks_per_node() > 1;
}

// Note [daso schedule]: the node DDP averages the next step's gradients or not.
void Daso::arm_node_ddp() {
  bool sync = true;
  if (local_skipping() && step_ < o_.steps_per_epoch) sync = schedule_.step_plan(step_, o_.steps_per_epoch).node_sync;
  model_.ddp().reducer().set_sync(sync);
}

void Daso::poll() {
  if (pending_ && !pending_->seen_complete) pending_->seen_complete = pending_->work->is_completed();
}

void Daso::step() {
  const int n = o_.steps_per_epoch;
  WEFT_CHECK(step_ < n, "Daso.step: epoch ", schedule_.epoch(), " has ", n,
             " steps (steps_per_epoch) and all were taken; call end_epoch(loss) first");
  opt_.step();
  const int nodes = model_.groups().num_nodes();
  if (nodes > 1) {
    poll();
    const DasoStepPlan plan = schedule_.step_plan(step_, n);
    if (local_skipping() && !plan.node_sync) {
      node_apart_ = true;  // this step's gradients were not averaged in the node
      ++stats_.node_syncs_skipped;
    }
    if (plan.fold) {
      WEFT_INTERNAL_ASSERT(pending_ != nullptr, "Daso: a fold at step ", step_, " without an average in flight");
      Tensor avg = receive(*pending_, /*blocking=*/false);  // (S,)
      // p = (2w p + G A') / (2w + G): the local parameters weigh 2w, each node's stale ones 1.
      const double local = 2.0 * pending_->wait, denom = local + nodes;
      NoGradGuard ng;
      Tensor flat = flatten_params();
      if (!node_apart_) {  // the node's ranks hold the same parameters: each blends the whole
        Tensor next = node_allgather({avg})[0];
        flat.mul_(local / denom).add_(next, static_cast<double>(nodes) / denom);
        write_params(flat);
        anchor_ = next;
      } else {  // each rank blends the slice it owns, and the node takes the owners' slices
        const int64_t lo = model_.groups().local_rank * slice_;
        Tensor mine = flat.narrow(0, lo, slice_).clone();  // (S,)
        mine.mul_(local / denom).add_(avg, static_cast<double>(nodes) / denom);
        std::vector<Tensor> both = node_allgather({avg, mine});
        write_params(both[1]);
        anchor_ = both[0];
        node_apart_ = false;
      }
      pending_.reset();
    }
    if (plan.blocking) {
      WEFT_INTERNAL_ASSERT(pending_ == nullptr, "Daso: a blocking average at step ", step_, " with another in flight");
      auto p = launch();
      Tensor next = node_allgather({receive(*p, /*blocking=*/true)})[0];
      write_params(next);
      anchor_ = next;
      node_apart_ = false;
      ++stats_.blocking_syncs;
    }
    if (plan.start) {
      WEFT_INTERNAL_ASSERT(pending_ == nullptr, "Daso: a start at step ", step_, " with another in flight");
      pending_ = launch();
      pending_->wait = schedule_.batches_to_wait();
    }
    in_sync_ = plan.blocking;
  }
  ++step_;
  arm_node_ddp();
}

bool Daso::end_epoch(double local_loss) {
  const int n = o_.steps_per_epoch;
  WEFT_CHECK(step_ == n, "Daso.end_epoch: epoch ", schedule_.epoch(), " ended after ", step_, " of its ", n,
             " steps (steps_per_epoch)");
  WEFT_INTERNAL_ASSERT(pending_ == nullptr, "Daso: an average still in flight at the end of an epoch");
  ProcessGroup& world = *model_.groups().world;
  Tensor mine = full({1}, local_loss, {DType::Float64});
  std::vector<Tensor> all;
  all.reserve(world.size());
  for (int r = 0; r < world.size(); ++r) all.push_back(empty({1}, {DType::Float64}));
  world.allgather(all, mine)->wait();
  double sum = 0;
  for (const Tensor& t : all) sum += t.item<double>();
  step_ = 0;
  const bool fired = schedule_.end_epoch(sum / world.size());
  arm_node_ddp();
  return fired;
}

// ---- Note [daso state] ----

namespace {

Tensor i64(int64_t v) { return scalar_tensor(v, TensorOptions{DType::Int64}); }
Tensor f64(double v) { return scalar_tensor(v, TensorOptions{DType::Float64}); }

const char* const kOptimizerPrefix = "optimizer.";
const char* const kBufferPrefix = "buffer.";

std::string layout_text(int64_t world, int64_t rpn) {
  const int64_t nodes = rpn > 0 ? world / rpn : 0;
  std::ostringstream os;
  os << nodes << (nodes == 1 ? " node" : " nodes") << " x " << rpn << " ranks per node (" << world << " ranks)";
  return os.str();
}

}  // namespace

std::map<std::string, Tensor> Daso::state_dict() {
  NoGradGuard ng;
  const NodeGroups& g = model_.groups();
  std::map<std::string, Tensor> sd;
  sd["layout.world"] = i64(g.world->size());
  sd["layout.ranks_per_node"] = i64(g.ranks_per_node());
  sd["layout.rank"] = i64(g.world->rank());
  sd["layout.numel"] = i64(numel_);
  sd["steps_per_epoch"] = i64(o_.steps_per_epoch);
  const DasoSchedule::State st = schedule_.state();
  sd["schedule.epoch"] = i64(st.epoch);
  sd["schedule.global_skip"] = i64(st.global_skip);
  sd["schedule.batches_to_wait"] = i64(st.batches_to_wait);
  sd["schedule.local_skip"] = i64(st.local_skip);
  sd["schedule.best"] = f64(st.best);
  sd["schedule.bad_epochs"] = i64(st.bad_epochs);
  sd["step_in_epoch"] = i64(step_);
  sd["node_apart"] = i64(node_apart_ ? 1 : 0);
  sd["anchor"] = anchor_.clone();
  sd["stats.global_syncs"] = i64(stats_.global_syncs);
  sd["stats.blocking_syncs"] = i64(stats_.blocking_syncs);
  sd["stats.bytes_between_nodes"] = i64(stats_.bytes_between_nodes);
  sd["stats.bytes_within_node"] = i64(stats_.bytes_within_node);
  sd["stats.steps_waiting"] = i64(stats_.steps_waiting);
  sd["stats.seconds_waiting"] = f64(stats_.seconds_waiting);
  sd["stats.node_syncs_skipped"] = i64(stats_.node_syncs_skipped);
  if (pending_) {  // wait for it here: its received parts are what the fold after the resume needs
    if (pending_->work) {
      pending_->seen_complete = pending_->seen_complete || pending_->work->is_completed();
      pending_->work->wait();
    }
    sd["pending.wait"] = i64(pending_->wait);
    sd["pending.parts"] = stack(pending_->parts, 0).clone();  // (G, S) in the wire dtype
  }
  if (!in_sync_) sd["params"] = flatten_params().narrow(0, 0, numel_).clone();  // (P,)
  for (auto& [name, b] : model_.module().named_buffers()) sd[kBufferPrefix + name] = b.detach().to(kCPU).clone();
  for (auto& [k, t] : opt_.state_dict()) sd[kOptimizerPrefix + k] = t.detach().to(kCPU).clone();
  return sd;
}

void Daso::load_state_dict(const std::map<std::string, Tensor>& sd) {
  NoGradGuard ng;
  const NodeGroups& g = model_.groups();
  auto get = [&](const std::string& key) -> const Tensor& {
    auto it = sd.find(key);
    WEFT_CHECK(it != sd.end(), "Daso.load_state_dict: the state has no '", key, "' (not a Daso state_dict?)");
    return it->second;
  };
  auto int_of = [&](const std::string& key) { return get(key).to(DType::Int64).item<int64_t>(); };
  // Check everything before changing anything.
  const int64_t world = int_of("layout.world"), rpn = int_of("layout.ranks_per_node");
  WEFT_CHECK(world == g.world->size() && rpn == g.ranks_per_node(), "Daso.load_state_dict: the state was saved by ",
             "DASO over ", layout_text(world, rpn), ", this run is DASO over ",
             layout_text(g.world->size(), g.ranks_per_node()),
             ": DASO's state (each rank's parameters, optimizer state and share of an average in flight) resumes "
             "only on the layout that saved it; resume with ",
             world, " ranks, ", rpn,
             " per node, or without DASO (plain data parallelism takes rank 0's model and "
             "optimizer state)");
  const int64_t saver = int_of("layout.rank");
  WEFT_CHECK(saver == g.world->rank(), "Daso.load_state_dict: rank ", g.world->rank(), " was given the state of rank ",
             saver);
  WEFT_CHECK(int_of("layout.numel") == numel_, "Daso.load_state_dict: the state is of a model with ",
             int_of("layout.numel"), " trainable elements, this one has ", numel_);
  WEFT_CHECK(int_of("steps_per_epoch") == o_.steps_per_epoch, "Daso.load_state_dict: the state was saved with ",
             int_of("steps_per_epoch"), " steps per epoch, this run has ", o_.steps_per_epoch,
             " (the same data and batch size are needed to resume)");
  const int64_t step = int_of("step_in_epoch");
  WEFT_CHECK(step >= 0 && step <= o_.steps_per_epoch, "Daso.load_state_dict: step_in_epoch ", step,
             " is outside the epoch's ", o_.steps_per_epoch, " steps");
  const Tensor& anchor = get("anchor");
  WEFT_CHECK(anchor.dtype() == DType::Float32 && anchor.sizes() == anchor_.sizes(),
             "Daso.load_state_dict: 'anchor' is ", anchor.dtype(), " ", shape_str(anchor.sizes()),
             ", expected float32 ", shape_str(anchor_.sizes()));
  const bool pending = sd.count("pending.parts") > 0;
  if (pending) {
    const Tensor& parts = get("pending.parts");
    const Shape want{g.num_nodes(), slice_};
    WEFT_CHECK(parts.dtype() == o_.downcast && parts.sizes() == want, "Daso.load_state_dict: 'pending.parts' is ",
               parts.dtype(), " ", shape_str(parts.sizes()), ", expected ", o_.downcast, " ", shape_str(want),
               " (the wire dtype must not change across a resume)");
  }
  auto params = sd.find("params");
  if (params != sd.end())
    WEFT_CHECK(params->second.dtype() == DType::Float32 && params->second.sizes() == Shape{numel_},
               "Daso.load_state_dict: 'params' is ", params->second.dtype(), " ", shape_str(params->second.sizes()),
               ", expected float32 [", numel_, "]");
  std::vector<std::pair<std::string, Tensor>> buffers = model_.module().named_buffers();
  for (auto& [name, b] : buffers) {
    const Tensor& t = get(kBufferPrefix + name);
    WEFT_CHECK(t.dtype() == b.dtype() && t.sizes() == b.sizes(), "Daso.load_state_dict: buffer '", name, "' is ",
               t.dtype(), " ", shape_str(t.sizes()), ", the model's ", b.dtype(), " ", shape_str(b.sizes()));
  }
  optim::OptimizerStateDict osd;
  for (const auto& [k, t] : sd)
    if (k.rfind(kOptimizerPrefix, 0) == 0) osd[k.substr(std::string(kOptimizerPrefix).size())] = t;
  DasoSchedule schedule(o_.schedule);
  schedule.load_state(
      {static_cast<int>(int_of("schedule.epoch")), static_cast<int>(int_of("schedule.global_skip")),
       static_cast<int>(int_of("schedule.batches_to_wait")), static_cast<int>(int_of("schedule.local_skip")),
       get("schedule.best").to(DType::Float64).item<double>(), static_cast<int>(int_of("schedule.bad_epochs"))});
  WEFT_CHECK(!pending || schedule.phase() == DasoPhase::kCycling, "Daso.load_state_dict: the state has an average ",
             "in flight in a ", daso_phase_name(schedule.phase()), " epoch, which never starts one");
  opt_.load_state_dict(osd);  // checks before it changes anything

  // Apply.
  if (pending_) {
    try {
      if (pending_->work) pending_->work->wait();
    } catch (...) {  // NOLINT(bugprone-empty-catch): replaced by the loaded state
    }
    pending_.reset();
  }
  schedule_ = schedule;
  step_ = static_cast<int>(step);
  node_apart_ = int_of("node_apart") != 0;
  anchor_ = anchor.to(kCPU).contiguous().clone();
  stats_.global_syncs = int_of("stats.global_syncs");
  stats_.blocking_syncs = int_of("stats.blocking_syncs");
  stats_.bytes_between_nodes = int_of("stats.bytes_between_nodes");
  stats_.bytes_within_node = int_of("stats.bytes_within_node");
  stats_.steps_waiting = int_of("stats.steps_waiting");
  stats_.seconds_waiting = get("stats.seconds_waiting").to(DType::Float64).item<double>();
  stats_.node_syncs_skipped = int_of("stats.node_syncs_skipped");
  if (pending) {
    pending_ = std::make_unique<Pending>();
    const Tensor parts = get("pending.parts").to(kCPU).contiguous();
    for (int64_t k = 0; k < g.num_nodes(); ++k) pending_->parts.push_back(parts.select(0, k).clone());
    pending_->wait = static_cast<int>(int_of("pending.wait"));
    pending_->seen_complete = true;
  }
  in_sync_ = params == sd.end();
  if (!in_sync_) {
    Tensor flat = zeros({anchor_.numel()});
    flat.narrow(0, 0, numel_).copy_(params->second.to(kCPU));
    write_params(flat);
  }
  for (auto& [name, b] : buffers) {
    Tensor dst = b.detach();
    dst.copy_(get(kBufferPrefix + name).to(b.device()));
    dst.bump_version();
  }
  arm_node_ddp();
}

}  // namespace weft::parallel
