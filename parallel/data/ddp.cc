// DistributedDataParallel (parallel/data/ddp.h): parameter checks across ranks,
// broadcasts, the non-blocking mode's per-module updates; the reductions are
// the Reducer's (parallel/data/reducer.cc: Note [bucket order], Note [ready twice],
// Note [progress]).
#include "parallel/data/ddp.h"

#include <algorithm>
#include <sstream>
#include <unordered_map>

#include "core/autograd_meta.h"
#include "parallel/comm/rank_agreement.h"

namespace weft::parallel {
namespace {

std::string describe(const std::string& kind, const std::string& name, const Tensor& t) {
  std::ostringstream os;
  os << kind << " '" << name << "' " << shape_str(t.sizes()) << " " << t.dtype();
  return os.str();
}

}  // namespace

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

  Reducer::NamedTensors params;
  for (auto& [name, p] : module_->named_parameters())
    if (p.requires_grad()) {
      WEFT_CHECK(p.is_floating_point(), "DistributedDataParallel: parameter '", name, "' has dtype ", p.dtype(),
                 "; only floating-point parameters can be reduced");
      params.emplace_back(name, p);
    }
  verify_same_parameters();
  broadcast_state(/*params_too=*/true);
  ReducerOptions ro;
  ro.bucket_cap_mb = options_.bucket_cap_mb;
  ro.first_bucket_cap_mb = options_.first_bucket_cap_mb;
  ro.find_unused_parameters = options_.find_unused_parameters;
  ro.gradient_as_bucket_view = options_.gradient_as_bucket_view;
  ro.comm_hook = options_.comm_hook;
  ro.wait_at_end = !options_.non_blocking;
  ro.owner = "DistributedDataParallel";
  ro.unused_hint = "construct DDP with DDPOptions::find_unused_parameters = true";
  reducer_ = std::make_unique<Reducer>(std::move(params), group_, std::move(ro));

  if (options_.non_blocking) {
    std::unordered_map<const TensorImpl*, int> index;
    for (int i = 0; i < reducer_->num_params(); ++i) index[reducer_->param(i).impl()] = i;
    std::vector<char> owned(reducer_->num_params(), 0);
    for (auto& [mname, m] : module_->named_modules()) {
      std::vector<int> own;
      for (auto& [pname, p] : m->named_parameters(/*recurse=*/false)) {
        auto it = index.find(p.impl());
        if (it != index.end() && !owned[it->second]) {
          owned[it->second] = 1;
          own.push_back(it->second);
        }
      }
      if (own.empty()) continue;
      const int o = static_cast<int>(owners_.size());
      owners_.push_back(own);
      handles_.push_back(m->register_forward_pre_hook([this, o](nn::Module&, const Tensor&) {
        if (reducer_->has_pending()) finish_module(o);
      }));
    }
  }
  updated_.assign(reducer_->num_params(), 1);
}

DistributedDataParallel::~DistributedDataParallel() {
  for (auto& h : handles_) h.remove();
}
void DistributedDataParallel::verify_same_parameters() {
  std::vector<std::string> desc;
  for (auto& [name, p] : module_->named_parameters()) desc.push_back(describe("parameter", name, p));
  for (auto& [name, b] : module_->named_buffers()) desc.push_back(describe("buffer", name, b));
  const auto d = first_disagreement(*group_, desc);
  if (!d) return;
  std::ostringstream os;
  os << "DistributedDataParallel: ranks hold different parameters; first mismatch at entry #" << d->index << ":";
  for (size_t r = 0; r < d->entries.size(); ++r) os << (r ? "," : "") << " rank " << r << " has " << d->entries[r];
  os << " (ranks differing from rank 0:";
  for (int r : d->differing) os << " " << r;
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

// A new step's updates begin after each non-blocking backward.
void DistributedDataParallel::begin_updates() {
  const int64_t backward = reducer_->generation();
  if (updates_for_ == backward) return;
  updates_for_ = backward;
  std::fill(updated_.begin(), updated_.end(), 0);
}

void DistributedDataParallel::finish_module(int owner) {
  begin_updates();
  std::vector<Tensor> todo;
  for (int i : owners_[owner]) {
    if (updated_[i]) continue;
    reducer_->wait_param(i);
    updated_[i] = 1;
    if (reducer_->param(i).grad().defined()) todo.push_back(reducer_->param(i));
  }
  if (todo.empty()) return;
  options_.update(todo);
  for (auto& t : todo) t.zero_grad();  // the reducer consumed this step's gradient
}

void DistributedDataParallel::finish() {
  if (!reducer_->has_pending()) return;
  for (int o = 0; o < static_cast<int>(owners_.size()); ++o) finish_module(o);
  reducer_->wait_all();
}

Tensor DistributedDataParallel::forward(const Tensor& input) {
  if (options_.broadcast_buffers && reducer_->sync() && GradMode::is_enabled()) broadcast_state(/*params_too=*/false);
  Tensor out = (*module_)(input);
  if (reducer_->has_pending()) finish();  // modules this forward did not enter
  return out;
}

}  // namespace weft::parallel
