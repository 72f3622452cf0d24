// Pipe (contract in pipe.h).
#include "parallel/pipe/pipe.h"

#include <algorithm>
#include <numeric>
#include <sstream>

#include "core/error.h"
#include "nn/layers.h"
#include "parallel/pipe/validate.h"

namespace weft::parallel::pipe {

namespace {

std::string list_str(const std::vector<int>& v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}

}  // namespace

Schedule plan_pipeline(size_t num_layers, const std::vector<int>& balance, int ranks, const PipeOptions& options) {
  WEFT_CHECK(!balance.empty(), "Pipe: balance is empty");
  for (int b : balance)
    WEFT_CHECK(b > 0, "Pipe: all balance numbers must be positive integers (balance: ", list_str(balance), ")");
  const int64_t total = std::accumulate(balance.begin(), balance.end(), int64_t(0));
  WEFT_CHECK(total == static_cast<int64_t>(num_layers),
             "Pipe: the module and the sum of balance have different "
             "lengths (module: ",
             num_layers, ", sum of balance: ", total, ")");
  WEFT_CHECK(options.chunks > 0, "Pipe: the number of chunks must be a positive integer, got ", options.chunks);
  WEFT_CHECK(options.virtual_stages > 0, "Pipe: virtual_stages must be a positive integer, got ",
             options.virtual_stages);
  const int64_t need = static_cast<int64_t>(ranks) * options.virtual_stages;
  WEFT_CHECK(static_cast<int64_t>(balance.size()) == need, "Pipe: balance ", list_str(balance), " has ", balance.size(),
             " stages but the group has ", ranks, " rank(s) with ", options.virtual_stages, " stage(s) each (", need,
             " stages)");
  if (!options.user_schedule) return make_schedule(options.schedule, ranks, options.chunks, options.virtual_stages);
  Schedule s = *options.user_schedule;
  validate(s);
  WEFT_CHECK(s.num_ranks == ranks, "Pipe: the user schedule ", s.name, " is for ", s.num_ranks,
             " rank(s) but the group has ", ranks);
  WEFT_CHECK(s.num_microbatches == options.chunks, "Pipe: the user schedule ", s.name, " has ", s.num_microbatches,
             " micro-batch(es) but chunks is ", options.chunks);
  WEFT_CHECK(s.virtual_stages == options.virtual_stages, "Pipe: the user schedule ", s.name, " has ", s.virtual_stages,
             " stage(s) per rank but virtual_stages is ", options.virtual_stages);
  WEFT_CHECK(s.tied_stages.empty() || !options.tied.empty(), "Pipe: the user schedule ", s.name, " has ",
             s.tied_stages.size(), " tied group(s) but options.tied names no tied parameters");
  // The runner adds the tied groups and their Tied actions from options.tied
  // (Pipe::start checks it comes back to the user's schedule).
  s.tied_stages.clear();
  for (auto& list : s.rank_actions)
    list.erase(std::remove_if(list.begin(), list.end(), [](const Action& a) { return is_tied(a.kind); }), list.end());
  return s;
}

std::vector<int> stage_bounds(const std::vector<int>& balance) {
  std::vector<int> b(balance.size() + 1, 0);
  std::partial_sum(balance.begin(), balance.end(), b.begin() + 1);
  return b;
}

RunnerOptions runner_options(const PipeOptions& options) {
  RunnerOptions r;
  r.checkpoint = options.checkpoint;
  r.device = options.device;
  r.transfer_device = options.transfer_device;
  r.tied = options.tied;
  r.average_microbatches = options.average_microbatches;
  r.data_parallel = options.data_parallel;
  r.reduction = options.reduction;
  r.autocast = options.autocast;
  return r;
}

void Pipe::start(std::shared_ptr<ProcessGroup> group, Schedule schedule) {
  for (auto& part : partitions_)
    for (auto& layer : part->modules()) layers_.push_back(layer);
  if (options_.deferred_batch_norm) {
    for (auto& part : partitions_)
      part->apply([this](nn::Module& m) {
        if (auto* bn = dynamic_cast<nn::BatchNorm*>(&m)) bn->set_deferred(options_.chunks);
      });
  }
  for (auto& part : partitions_)
    if (options_.device != kCPU) part->to(options_.device);
  std::vector<std::shared_ptr<nn::Module>> stages(partitions_.begin(), partitions_.end());
  runner_ = std::make_unique<PipelineRunner>(std::move(schedule), std::move(stages), std::move(group),
                                             runner_options(options_));
  if (const auto& user = options_.user_schedule; user && !user->tied_stages.empty()) {
    Schedule ran = runner_->schedule();  // less the reductions the runner added (data_parallel)
    if (!user->reduce_grads)
      for (auto& list : ran.rank_actions)
        list.erase(std::remove_if(list.begin(), list.end(), [](const Action& a) { return is_reduce(a.kind); }),
                   list.end());
    WEFT_CHECK(ran.tied_stages == user->tied_stages && ran.rank_actions == user->rank_actions,
               "Pipe: the user schedule ", user->name,
               "'s tied groups or Tied actions differ from those options.tied gives (the groups of the stages holding "
               "the names, a Tied action at the end of each holder's list):\n",
               to_string(ran));
  }
}

Pipe::Pipe(const std::shared_ptr<nn::Sequential>& module, std::vector<int> balance, std::shared_ptr<ProcessGroup> group,
           PipeOptions options)
    : balance_(std::move(balance)), options_(options) {
  WEFT_CHECK(module != nullptr, "Pipe: module is null");
  WEFT_CHECK(group != nullptr, "Pipe: process group is null");
  Schedule sched = plan_pipeline(module->size(), balance_, group->size(), options_);
  const std::vector<int> bounds = stage_bounds(balance_);
  for (int s : sched.stages_of_rank(group->rank())) partitions_.push_back(module->slice(bounds[s], bounds[s + 1]));
  start(std::move(group), std::move(sched));
}

Pipe::Pipe(const std::vector<LayerFactory>& layers, std::vector<int> balance, std::shared_ptr<ProcessGroup> group,
           PipeOptions options)
    : balance_(std::move(balance)), options_(options) {
  WEFT_CHECK(group != nullptr, "Pipe: process group is null");
  Schedule sched = plan_pipeline(layers.size(), balance_, group->size(), options_);
  const std::vector<int> bounds = stage_bounds(balance_);
  for (int s : sched.stages_of_rank(group->rank())) {
    auto part = std::make_shared<nn::Sequential>();
    for (int i = bounds[s]; i < bounds[s + 1]; ++i) {
      WEFT_CHECK(layers[i] != nullptr, "Pipe: the factory of layer ", i, " is empty");
      std::shared_ptr<nn::Module> layer = layers[i]();
      WEFT_CHECK(layer != nullptr, "Pipe: the factory of layer ", i, " returned null");
      part->push_back(std::to_string(i), std::move(layer));
    }
    partitions_.push_back(std::move(part));
  }
  start(std::move(group), std::move(sched));
}

std::vector<Tensor> Pipe::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, p] : named_parameters()) out.push_back(p);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Pipe::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::vector<const TensorImpl*> seen;  // a tensor two of this rank's stages share (a tie), once
  for (auto& part : partitions_)
    for (auto& np : part->named_parameters()) {
      if (std::find(seen.begin(), seen.end(), np.second.impl()) != seen.end()) continue;
      seen.push_back(np.second.impl());
      out.push_back(np);
    }
  return out;
}

std::shared_ptr<nn::Module> Pipe::operator[](size_t i) const {
  WEFT_CHECK(i < layers_.size(), "Pipe: layer ", i, " is out of range: this rank holds ", layers_.size(), " layer(s)");
  return layers_[i];
}

}  // namespace weft::parallel::pipe
