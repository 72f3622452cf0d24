// DistributedModel (contract in distributed_model.h).
#include "parallel/hybrid/distributed_model.h"

#include <algorithm>
#include <iostream>
#include <limits>
#include <set>

#include "core/error.h"
#include "core/ops.h"
#include "parallel/hybrid/gather_state.h"
#include "parallel/partition/comm_cost.h"
#include "parallel/partition/contention.h"
#include "parallel/partition/profile.h"
#include "parallel/partition/search.h"

namespace weft::parallel::hybrid {
namespace {

// As even as possible by layer count, earlier stages larger.
std::vector<int> even_balance(int layers, int stages) {
  WEFT_CHECK(layers >= stages, "DistributedModel: ", layers, " layers cannot make ", stages,
             " pipeline stages (pp x virtual stages)");
  std::vector<int> b(stages, layers / stages);
  for (int i = 0; i < layers % stages; ++i) ++b[i];
  return b;
}

}  // namespace

int auto_virtual_stages(pipe::ScheduleKind kind, int virtual_stages) {
  switch (kind) {
    case pipe::ScheduleKind::k1F1B:
    case pipe::ScheduleKind::kZeroBubbleH1:
    case pipe::ScheduleKind::kGPipe: return 1;
    case pipe::ScheduleKind::kZeroBubbleV: return 2;
    case pipe::ScheduleKind::kInterleaved1F1B:
    case pipe::ScheduleKind::kInterleavedZeroBubble: return virtual_stages > 1 ? virtual_stages : 2;
  }
  return 1;
}

std::vector<int> DistributedModel::auto_balance(const Tensor& sample) {
  const int v = options_.pipe.virtual_stages;
  WEFT_CHECK(model_ != nullptr,
             "DistributedModel: automatic partitioning measures the whole model's layers; with "
             "layer factories give options.balance");
  WEFT_CHECK(!options_.pipe.user_schedule,
             "DistributedModel: automatic partitioning plans the built-in schedules (gpipe, 1f1b, interleaved, zb-h1, "
             "interleaved-zb, zbv); with a user schedule (options.pipe.user_schedule, ",
             options_.pipe.user_schedule ? options_.pipe.user_schedule->name : std::string(), ") give options.balance");
  const bool root = grid_.rank() == 0;
  const int chunks0 = options_.pipe.chunks;
  Tensor first;
  if (root) {
    WEFT_CHECK(sample.defined() && sample.dim() >= 1 && sample.sizes()[0] >= chunks0,
               "DistributedModel: automatic partitioning needs a sample batch of at least ", chunks0,
               " rows on rank 0 (the first step()'s input, or partition(sample))");
    first = sample.narrow(0, 0, sample.sizes()[0] / chunks0);
  }
  partition::ProfileOptions po;
  po.optimizer_state_factor = options_.optimizer_state_factor;
  profile_ = partition::profile_on_root(*model_, nn::Tensors{first}, *grid_.world(), 0, po);
  partition::SearchOptions search;
  search.plan.stages = grid_.pp() * v;  // Note [stages per rank] in parallel/partition/balance.h
  search.plan.virtual_stages = v;
  search.plan.method = options_.method;
  search.plan.memory_budget_bytes = options_.memory_budget_bytes;
  search.plan.bandwidth_bytes_per_s = options_.bandwidth_bytes_per_s;
  search.plan.checkpoint = options_.pipe.checkpoint;
  if (grid_.dp() > 1 && !options_.shard_optimizer_state) {  // Note [gradient reduction]: the planner sees it
    search.plan.replicas = grid_.dp();
    const partition::AllreduceCost measured = partition::measure_allreduce(*grid_.data_parallel());
    search.plan.allreduce = partition::broadcast_cost(measured, *grid_.world(), 0);
  }
  // Note [processor sharing] in parallel/pipe/simulate.h: ranks oversubscribing
  // their host's cores compute slower while others compute.
  search.plan.compute_speeds = options_.compute_speeds;
  if (options_.compute_speeds.empty() && options_.measure_compute_speeds) {
    search.plan.compute_speeds =
        partition::plan_compute_speeds(*grid_.world(), grid_.pipeline()->rank(), grid_.pp(),
                                       [&] { return partition::model_workload(*model_, first, *grid_.world(), 0); });
  }
  search.profiled_chunks = chunks0;
  search.schedules = {options_.pipe.schedule};
  search.virtual_stages = {v};
  search.chunks = {chunks0};
  if (options_.auto_schedule) {
    search.schedules = options_.auto_schedules;
    if (search.schedules.empty())
      search.schedules = {pipe::ScheduleKind::kGPipe,
                          pipe::ScheduleKind::k1F1B,
                          pipe::ScheduleKind::kZeroBubbleH1,
                          pipe::ScheduleKind::kInterleaved1F1B,
                          pipe::ScheduleKind::kInterleavedZeroBubble,
                          pipe::ScheduleKind::kZeroBubbleV};
    search.virtual_stages.clear();
    for (pipe::ScheduleKind kind : search.schedules) search.virtual_stages.push_back(auto_virtual_stages(kind, v));
    if (!options_.auto_chunks.empty()) search.chunks = options_.auto_chunks;
  }
  partition::SearchResult chosen = partition::choose_plan(profile_, search);
  plan_ = chosen.plan;
  options_.pipe.schedule = chosen.schedule;
  options_.pipe.virtual_stages = chosen.virtual_stages;
  options_.pipe.chunks = chosen.chunks;
  if (options_.print_table && root) {
    std::ostream& os = options_.table ? *options_.table : std::cout;
    os << partition::partition_table(chosen.layers, plan_);
    // The grid's hosts, when there are several (placement matters there: docs/hybrid.md).
    if (std::set<std::string>(grid_.hosts().begin(), grid_.hosts().end()).size() > 1)
      os << "hosts: " << host_layout(grid_.hosts(), grid_.pp()) << "\n";
    os << std::flush;
  }
  return plan_.balance;
}

DistributedModel::DistributedModel(std::shared_ptr<nn::Sequential> model, std::shared_ptr<ProcessGroup> world,
                                   DistributedModelOptions options)
    : options_(std::move(options)), model_(std::move(model)) {
  WEFT_CHECK(model_ != nullptr, "DistributedModel: the model is null");
  grid_ = make_grid(std::move(world), options_.pp, options_.dp);
  WEFT_CHECK(options_.backward_passes_per_step >= 1,
             "DistributedModel: backward_passes_per_step must be positive, got ", options_.backward_passes_per_step);
}

DistributedModel::DistributedModel(std::vector<pipe::LayerFactory> layers, std::shared_ptr<ProcessGroup> world,
                                   DistributedModelOptions options)
    : options_(std::move(options)), factories_(std::move(layers)) {
  WEFT_CHECK(!factories_.empty(), "DistributedModel: no layer factories");
  grid_ = make_grid(std::move(world), options_.pp, options_.dp);
  WEFT_CHECK(options_.backward_passes_per_step >= 1,
             "DistributedModel: backward_passes_per_step must be positive, got ", options_.backward_passes_per_step);
}

DistributedModel::~DistributedModel() = default;

void DistributedModel::register_post_partition_hook(std::function<void(DistributedModel&)> hook) {
  WEFT_CHECK(!partitioned(), "DistributedModel: register_post_partition_hook after partitioning has no effect");
  post_partition_hooks_.push_back(std::move(hook));
}

void DistributedModel::partition(const Tensor& sample) {
  if (partitioned()) return;
  const int layers = model_ ? static_cast<int>(model_->size()) : static_cast<int>(factories_.size());
  std::vector<int> balance = options_.balance;
  if (options_.plan) {  // a plan made beforehand: run it as it is (its stages per rank too)
    WEFT_CHECK(balance.empty(), "DistributedModel: options.balance and options.plan both given; give one");
    const int planned = grid_.pp() * options_.plan->virtual_stages;
    WEFT_CHECK(static_cast<int>(options_.plan->balance.size()) == planned, "DistributedModel: the plan has ",
               options_.plan->balance.size(), " stages but the pipeline has ", planned, " (pp ", grid_.pp(), " x ",
               options_.plan->virtual_stages, " per rank)");
    plan_ = *options_.plan;
    balance = plan_.balance;
    options_.pipe.schedule = pipe::parse_schedule_kind(plan_.schedule);
    options_.pipe.virtual_stages = plan_.virtual_stages;
    options_.pipe.chunks = plan_.microbatches;
  }
  const int stages = grid_.pp() * options_.pipe.virtual_stages;
  if (balance.empty()) balance = placement_balance();
  if (balance.empty() && options_.auto_partition && stages > 1) balance = auto_balance(sample);
  // Note [stages per rank]: stage s's layers are the s-th slice, wherever the stage lives.
  if (balance.empty()) balance = even_balance(layers, stages);
  pipe::PipeOptions po = options_.pipe;
  // Note [gradient reduction] in parallel/pipe/schedule.h: the schedule averages
  // each stage's gradients over its replicas (ZeRO-1 reduce-scatters them in
  // DistributedOptimizer instead).
  if (grid_.dp() > 1 && !options_.shard_optimizer_state) {
    po.data_parallel = grid_.data_parallel();
    po.reduction = {.overlap = options_.overlapping_allreduce, .bucket_cap_mb = options_.bucket_cap_mb};
  }
  pipe_ = model_ ? std::make_unique<pipe::Pipe>(model_, balance, grid_.pipeline(), po)
                 : std::make_unique<pipe::Pipe>(factories_, balance, grid_.pipeline(), po);
  pipe_->runner().set_keep_output(options_.keep_output);
  whole_ = model_;
  model_.reset();
  factories_.clear();
  // Replicas start equal: data-parallel rank 0's values everywhere.
  ProcessGroup& dp = *grid_.data_parallel();
  if (dp.size() > 1) {
    for (auto& part : pipe_->partitions()) {
      for (auto& [name, t] : part->named_parameters()) {
        Tensor data = t.detach();
        dp.broadcast(data, {0})->wait();
      }
      if (options_.broadcast_buffers)
        for (auto& [name, t] : part->named_buffers()) {
          Tensor data = t.detach();
          dp.broadcast(data, {0})->wait();
        }
    }
  }
  for (auto& hook : post_partition_hooks_) hook(*this);
}

std::vector<int> DistributedModel::placement_balance() const {
  if (!model_) return {};
  const auto children = model_->named_children();
  bool any = false;
  for (const auto& [name, c] : children) any = any || c->placement() >= 0;
  if (!any) return {};
  const int stages = grid_.pp() * options_.pipe.virtual_stages;
  std::vector<int> balance(stages, 0);
  int stage = 0;
  for (size_t i = 0; i < children.size(); ++i) {
    const auto& [name, c] = children[i];
    const int p = c->placement();
    if (p >= 0) {
      WEFT_CHECK(p < stages, "DistributedModel: layer ", i, " ('", name, "', ", c->type_name(), ") is placed on stage ",
                 p, " but the pipeline has ", stages, " stages (pp ", grid_.pp(), " x virtual stages ",
                 options_.pipe.virtual_stages, ")");
      WEFT_CHECK(p >= stage, "DistributedModel: layer ", i, " ('", name, "', ", c->type_name(), ") is placed on stage ",
                 p, " after a layer on stage ", stage, "; placements must follow the layer order");
      stage = p;
    }
    ++balance[stage];
  }
  for (int s = 0; s < stages; ++s)
    WEFT_CHECK(
        balance[s] > 0, "DistributedModel: no layer is placed on stage ", s, " (placements give ",
        [&] {
          std::string out;
          for (int b : balance) out += (out.empty() ? "" : ",") + std::to_string(b);
          return out;
        }(),
        ")");
  return balance;
}

Tensor DistributedModel::last_output() const {
  check_partitioned("last_output");
  WEFT_CHECK(options_.keep_output, "DistributedModel::last_output: construct with options.keep_output = true");
  return pipe_->runner().last_output();
}

double DistributedModel::step(const Tensor& input, const Tensor& target, const pipe::LossFn& loss_fn) {
  partition(input);
  pipe_->runner().set_reduce_grads((steps_ + 1) % options_.backward_passes_per_step == 0);
  const double replica_loss = pipe_->step(input, target, loss_fn);
  ++steps_;
  ProcessGroup& dp = *grid_.data_parallel();
  if (dp.size() == 1) return replica_loss;
  Tensor loss = full({1}, replica_loss, DType::Float64);
  dp.allreduce(loss, {ReduceOp::Avg})->wait();
  return loss.item<double>();
}

Tensor DistributedModel::forward(const Tensor& input) {
  partition(input);
  return pipe_->forward(input);
}

void DistributedModel::check_partitioned(const char* what) const {
  WEFT_CHECK(partitioned(), "DistributedModel::", what,
             ": the model is not partitioned yet (it is at the first step(), or call partition())");
}

const std::vector<int>& DistributedModel::balance() const {
  check_partitioned("balance");
  return pipe_->balance();
}

std::vector<Tensor> DistributedModel::local_parameters() const {
  check_partitioned("local_parameters");
  return pipe_->parameters();
}

std::vector<std::pair<std::string, Tensor>> DistributedModel::local_named_parameters() const {
  check_partitioned("local_named_parameters");
  return pipe_->named_parameters();
}

const std::vector<std::shared_ptr<nn::Sequential>>& DistributedModel::local_modules() const {
  check_partitioned("local_modules");
  return pipe_->partitions();
}

nn::StateDict DistributedModel::local_state_dict() const {
  check_partitioned("local_state_dict");
  nn::StateDict out;
  for (const auto& part : pipe_->partitions()) out.update(part->state_dict());
  return out;
}

nn::StateDict DistributedModel::state_dict() {
  check_partitioned("state_dict");
  std::map<std::string, Tensor> mine;
  if (grid_.dp_rank() == 0) mine = local_state_dict().to_map();
  return nn::StateDict(allgather_tensor_maps(*grid_.world(), mine));
}

nn::Module::LoadResult DistributedModel::load_state_dict(const nn::StateDict& sd, bool strict) {
  check_partitioned("load_state_dict");
  std::set<std::string> used;
  std::vector<std::string> missing;
  for (const auto& part : pipe_->partitions()) {
    nn::StateDict mine;
    for (const auto& [k, t] : part->state_dict()) {
      if (const Tensor* v = sd.find(k)) {
        mine.insert(k, *v);
        used.insert(k);
      } else {
        missing.push_back(k);
      }
    }
    part->load_state_dict(mine, /*strict=*/false);  // shape mismatches are errors naming every key
  }
  if (strict && !missing.empty()) {
    std::string keys;
    for (const auto& k : missing) keys += (keys.empty() ? "" : ", ") + k;
    WEFT_ERROR("DistributedModel::load_state_dict on rank ", grid_.rank(),
               ": missing keys of this rank's stages: ", keys);
  }
  nn::Module::LoadResult result;
  result.missing_keys = std::move(missing);
  for (const auto& [k, t] : sd)
    if (!used.count(k)) result.unexpected_keys.push_back(k);
  return result;
}

std::shared_ptr<nn::Sequential> DistributedModel::gather_whole_model() {
  check_partitioned("gather_whole_model");
  WEFT_CHECK(whole_ != nullptr,
             "DistributedModel::gather_whole_model: the model was built from layer factories; only a model given "
             "as a Sequential can be returned whole");
  nn::StateDict sd = state_dict();
  whole_->load_state_dict(sd);
  return whole_;
}

pipe::Pipe& DistributedModel::pipe() {
  check_partitioned("pipe");
  return *pipe_;
}

}  // namespace weft::parallel::hybrid
