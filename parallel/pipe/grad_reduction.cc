// GradReduction (contract in grad_reduction.h).
#include "parallel/pipe/grad_reduction.h"

#include <utility>

#include "core/error.h"

namespace weft::parallel::pipe {

GradReduction::GradReduction(std::shared_ptr<ProcessGroup> data_parallel, const std::vector<int>& stage_ids,
                             const std::vector<std::shared_ptr<nn::Module>>& stages, const std::set<std::string>& tied,
                             GradReductionOptions options)
    : group_(std::move(data_parallel)), options_(options) {
  WEFT_CHECK(group_ != nullptr, "GradReduction: the data-parallel group is null");
  WEFT_CHECK(stage_ids.size() == stages.size(), "GradReduction: ", stage_ids.size(), " stage ids for ", stages.size(),
             " stages");
  for (size_t i = 0; i < stages.size(); ++i) {
    Stage st;
    Reducer::NamedTensors named;
    for (auto& [name, t] : stages[i]->named_parameters()) {
      if (!t.requires_grad() || tied.count(name)) continue;
      st.params.push_back(t);
      named.emplace_back(name, t);
    }
    if (options_.overlap && !named.empty()) {
      ReducerOptions ro;
      ro.bucket_cap_mb = options_.bucket_cap_mb;
      ro.wait_at_end = false;  // the step waits, at its end (wait())
      ro.owner = "PipelineRunner (stage " + std::to_string(stage_ids[i]) + ", data-parallel reduction)";
      st.reducer = std::make_unique<Reducer>(std::move(named), group_, ro);
      st.reducer->set_sync(false);
    }
    stages_.push_back(std::move(st));
  }
}

void GradReduction::before_grad_action(int local, bool last) {
  Stage& st = stages_.at(local);
  if (st.reducer) st.reducer->set_sync(sync_ && last);
}

void GradReduction::reduce(int local) {
  Stage& st = stages_.at(local);
  if (st.reducer) st.reducer->set_sync(false);  // until the next step's last gradient action
  if (!sync_) return;
  // Overlap: the last gradient action launched every bucket. It launched none
  // when that action computed no parameter gradient (a checkpointed last
  // micro-batch's B computes them all, leaving its W nothing): average here.
  if (st.reducer && st.reducer->has_pending()) return;
  for (const Tensor& p : st.params) {
    if (!p.grad().defined()) continue;
    Tensor g = p.grad();
    st.works.push_back(group_->allreduce(g, {ReduceOp::Avg}));
    st.buffers.push_back(g);
  }
}

void GradReduction::wait(int local) {
  Stage& st = stages_.at(local);
  if (st.reducer && st.reducer->has_pending()) st.reducer->wait_all();
  for (auto& w : st.works) w->wait();
  st.works.clear();
  st.buffers.clear();
}

void GradReduction::reduce_tied(const std::vector<Tensor>& params) {
  if (!sync_) return;
  std::vector<WorkPtr> works;
  std::vector<Tensor> grads;
  for (const Tensor& p : params) {
    if (!p.grad().defined()) continue;
    grads.push_back(p.grad());
    works.push_back(group_->allreduce(grads.back(), {ReduceOp::Avg}));
  }
  for (auto& w : works) w->wait();
}

}  // namespace weft::parallel::pipe
