// LocalPipe (contract in local_pipe.h).
#include "parallel/pipe/local_pipe.h"

#include "core/error.h"
#include "nn/layers.h"
#include "parallel/comm/inproc/testing.h"

namespace weft::parallel::pipe {

LocalPipe::LocalPipe(const std::shared_ptr<nn::Sequential>& module, std::vector<int> balance,
                     std::vector<Device> devices, PipeOptions options)
    : balance_(std::move(balance)), devices_(std::move(devices)), options_(options) {
  WEFT_CHECK(module != nullptr, "LocalPipe: module is null");
  WEFT_CHECK(!devices_.empty(), "LocalPipe: no devices");
  schedule_ = plan_pipeline(module->size(), balance_, static_cast<int>(devices_.size()), options_);
  const std::vector<int> bounds = stage_bounds(balance_);
  for (int s = 0; s < schedule_.num_stages(); ++s) {
    partitions_.push_back(module->slice(bounds[s], bounds[s + 1]));
    if (device_of_stage(s) != kCPU) partitions_.back()->to(device_of_stage(s));
  }
  if (options_.deferred_batch_norm) {
    for (auto& part : partitions_)
      part->apply([this](nn::Module& m) {
        if (auto* bn = dynamic_cast<nn::BatchNorm*>(&m)) bn->set_deferred(options_.chunks);
      });
  }
}

template <typename F>
void LocalPipe::run(F&& body) {
  RunRanksOptions ro;
  ro.timeout = timeout_;
  run_ranks(
      static_cast<int>(devices_.size()),
      [&](std::shared_ptr<ProcessGroup> g) {
        const int r = g->rank();
        std::vector<std::shared_ptr<nn::Module>> stages;
        for (int s : schedule_.stages_of_rank(r)) stages.push_back(partitions_[s]);
        RunnerOptions opts = runner_options(options_);
        opts.device = devices_[r];
        opts.transfer_device = kCPU;
        PipelineRunner runner(schedule_, std::move(stages), g, opts);
        body(runner, r);
      },
      ro);
}

double LocalPipe::step(const Tensor& input, const Tensor& target, const LossFn& loss_fn) {
  double loss = 0;
  run([&](PipelineRunner& runner, int r) {
    const double l = runner.step(input, target, loss_fn);
    if (r == 0) loss = l;
  });
  return loss;
}

Tensor LocalPipe::forward(const Tensor& input) {
  Tensor out;
  const int last = schedule_.rank_of(schedule_.num_stages() - 1);
  run([&](PipelineRunner& runner, int r) {
    Tensor o = runner.forward(input);
    if (r == last) out = o;
  });
  return out;
}

std::vector<Tensor> LocalPipe::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, p] : named_parameters()) out.push_back(p);
  return out;
}

std::vector<std::pair<std::string, Tensor>> LocalPipe::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& part : partitions_)
    for (auto& np : part->named_parameters()) out.push_back(np);
  return out;
}

}  // namespace weft::parallel::pipe
