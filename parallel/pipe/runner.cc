// PipelineRunner (contract in runner.h).
//
// Note [boundary messages]: an activation or gradient crossing ranks is two
// messages with one tag: a header of kTensorHeaderLen int64s (dtype, number
// of dimensions, the sizes: tensor_header in parallel/comm/collectives.h)
// and the contiguous payload. Both go out in one batch_isend_irecv that is
// not waited for until the end of the step (sends are buffered in the
// validator's model); the receiver takes the header, makes
// the tensor and takes the payload. The tag names the payload, ((micro-batch *
// stages + sending stage) * 2 + is-gradient) mod 32768, so messages between
// two ranks match by what they carry, not by the order the two ranks happen to
// issue them in (interleaved schedules send several stages' activations
// between the same ranks). Tags only repeat 16256 (stage, micro-batch) pairs
// apart, and messages with the same tag travel in order. Tags 32512 and up
// are the tied-gradient sums' (TiedParameters::kTagBase, tied.h).
//
// Note [stage boundaries]: every stage's input is a leaf. For stage 0 it is
// the micro-batch; for the others the received (or, from a stage on this
// rank, the handed-over and detached) activation, with requires_grad when
// floating, so B(s, mb) backpropagates the stage's own graph only and its
// input's .grad is the gradient stage s - 1 needs. The last stage's output is
// its weighted micro-batch loss.
#include "parallel/pipe/runner.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <set>
#include <utility>

#include "autograd/checkpoint.h"
#include "autograd/engine.h"
#include "core/autocast.h"
#include "core/autograd_meta.h"
#include "core/error.h"
#include "core/ops.h"
#include "parallel/comm/collectives.h"
#include "parallel/pipe/validate.h"

namespace weft::parallel::pipe {

namespace {

int message_tag(bool grad, int sending_stage, int mb, int num_stages) {
  const int64_t t = ((int64_t(mb) * num_stages + sending_stage) * 2 + (grad ? 1 : 0)) % TiedParameters::kTagBase;
  return static_cast<int>(t);
}

}  // namespace

struct PipelineRunner::StepState {
  const LossFn* loss_fn = nullptr;
  std::vector<Tensor> inputs, targets;  // per micro-batch (stage 0's rank; the last stage's)
  std::vector<double> weights;          // rows_mb / rows
  // Per local stage, per micro-batch (Note [stage boundaries]).
  std::vector<std::vector<Tensor>> in, out, grad_out, grad_in;
  std::vector<std::pair<WorkPtr, std::vector<Tensor>>> sends;  // buffers kept until the end
  double loss = 0;
  std::vector<std::vector<autograd::DeferredGrads>> deferred;  // split schedules: W's half, per stage, per mb
  bool forward_only = false;                                   // forward(): no loss, no backward
  std::vector<Tensor> outputs;                                 // the last stage's outputs (forward(), keep_output)
  std::vector<std::pair<int, size_t>> reductions;              // ReduceGrad issued: (local stage, trace index)
};

PipelineRunner::PipelineRunner(Schedule schedule, std::vector<std::shared_ptr<nn::Module>> stages,
                               std::shared_ptr<ProcessGroup> group, RunnerOptions options)
    : schedule_(std::move(schedule)), stages_(std::move(stages)), group_(std::move(group)), options_(options) {
  WEFT_CHECK(group_ != nullptr, "PipelineRunner: process group is null");
  WEFT_CHECK(group_->size() == schedule_.num_ranks, "PipelineRunner: schedule ", schedule_.name, " is for ",
             schedule_.num_ranks, " ranks but the group has ", group_->size());
  stage_ids_ = schedule_.stages_of_rank(group_->rank());
  WEFT_CHECK(stages_.size() == stage_ids_.size(), "PipelineRunner: rank ", group_->rank(), " runs ", stage_ids_.size(),
             " stage(s) of schedule ", schedule_.name, " but was given ", stages_.size(), " module(s)");
  for (size_t i = 0; i < stages_.size(); ++i)
    WEFT_CHECK(stages_[i] != nullptr, "PipelineRunner: the module for stage ", stage_ids_[i], " is null");
  if (!options_.tied.empty()) {  // Note [tied parameters] in schedule.h
    tied_ = TiedParameters(options_.tied, stage_ids_, stages_, *group_);
    add_tied_grads(schedule_, tied_.stages());
  }
  if (options_.data_parallel && options_.data_parallel->size() > 1) {  // Note [gradient reduction]
    std::set<std::string> tied_names;
    for (const auto& g : options_.tied) tied_names.insert(g.begin(), g.end());
    reduction_ = GradReduction(options_.data_parallel, stage_ids_, stages_, tied_names, options_.reduction);
    if (!schedule_.reduce_grads) add_reduce_grads(schedule_);
  }
  WEFT_CHECK(!schedule_.reduce_grads || reduction_.active(), "PipelineRunner: schedule ", schedule_.name,
             " reduces gradients over data parallelism but RunnerOptions::data_parallel has no second rank");
  validate(schedule_);
  const ActionKind grad_kind = schedule_.split_backward ? ActionKind::kWeight : ActionKind::kBackward;
  last_grad_action_.assign(stages_.size(), -1);
  const auto& mine = schedule_.rank_actions[group_->rank()];
  for (int i = 0; i < static_cast<int>(mine.size()); ++i)
    if (mine[i].kind == grad_kind) last_grad_action_[local(mine[i].stage)] = i;
}

int PipelineRunner::local(int stage) const {
  auto it = std::find(stage_ids_.begin(), stage_ids_.end(), stage);
  return it == stage_ids_.end() ? -1 : static_cast<int>(it - stage_ids_.begin());
}

std::vector<int64_t> PipelineRunner::microbatch_rows(int64_t rows) const {
  const int64_t m = schedule_.num_microbatches;
  WEFT_CHECK(rows >= m, "PipelineRunner: a batch of ", rows, " rows cannot make ", m, " micro-batches");
  std::vector<int64_t> out(m, rows / m);
  for (int64_t i = 0; i < rows % m; ++i) ++out[i];
  return out;
}

void PipelineRunner::split(StepState& st, const Tensor& input, const Tensor& target, bool need_target) const {
  const int m = schedule_.num_microbatches, n_stages = schedule_.num_stages();
  const int first = local(0), last = local(n_stages - 1);
  const bool rows_here = first >= 0 || (last >= 0 && need_target);
  if (first >= 0) WEFT_CHECK(input.defined() && input.dim() >= 1, "PipelineRunner: the input is undefined or 0-d");
  if (last >= 0 && need_target)
    WEFT_CHECK(target.defined() && target.dim() >= 1, "PipelineRunner: the target is undefined or 0-d");
  if (first >= 0 && last >= 0 && need_target)
    WEFT_CHECK(input.sizes()[0] == target.sizes()[0], "PipelineRunner: input has ", input.sizes()[0],
               " rows but target ", target.sizes()[0]);
  if (rows_here) {
    const Tensor& rows_from = first >= 0 ? input : target;
    std::vector<int64_t> rows = microbatch_rows(rows_from.sizes()[0]);
    const double total = static_cast<double>(rows_from.sizes()[0]);
    int64_t at = 0;
    for (int mb = 0; mb < m; ++mb) {
      if (first >= 0) st.inputs.push_back(input.narrow(0, at, rows[mb]));
      if (last >= 0 && need_target) st.targets.push_back(target.narrow(0, at, rows[mb]));
      st.weights.push_back(options_.average_microbatches ? static_cast<double>(rows[mb]) / total : 1.0);
      at += rows[mb];
    }
  }
  for (auto* v : {&st.in, &st.out, &st.grad_out, &st.grad_in}) v->assign(stages_.size(), std::vector<Tensor>(m));
  st.deferred.resize(stages_.size());
  for (auto& d : st.deferred) d.resize(m);
  st.outputs.assign(m, Tensor());
}

void PipelineRunner::run(StepState& st, const std::vector<Action>& actions) {
  // Under autocast, each weight is cast once per step, not once per micro-batch
  // (core/autocast.h: the forwards' guards share this scope's cache).
  std::optional<autocast::CastCacheScope> casts;
  if (options_.autocast) casts.emplace();
  const bool record = options_.record_trace && !st.forward_only;
  if (record) trace_.clear();
  auto now_ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  for (size_t i = 0; i < actions.size(); ++i) {
    try {
      const int64_t t = record ? now_ns() : 0;
      const ActionKind k = actions[i].kind;
      // Every action that may accumulate parameter gradients (a split B does
      // too, for checkpointed micro-batches) keeps the reducer off but the last.
      if (reduction_.active() && !st.forward_only && (k == ActionKind::kBackward || k == ActionKind::kWeight)) {
        const int li = local(actions[i].stage);
        reduction_.before_grad_action(li, static_cast<int>(i) == last_grad_action_[li]);
      }
      run_action(st, actions[i]);
      if (k == ActionKind::kReduceGrad) st.reductions.emplace_back(local(actions[i].stage), trace_.size());
      if (record) trace_.push_back({actions[i], group_->rank(), t, now_ns() - t});
    } catch (const Error& e) {
      // Where this rank stands, and for a receive the peer it waits for, so
      // that on a timeout the stuck pair shows in the ranks' errors at once.
      const Action& a = actions[i];
      const std::string waits = is_recv(a.kind) ? ", waiting for stage " + std::to_string(a.peer_stage) + " on rank " +
                                                      std::to_string(a.peer_rank)
                                                : std::string();
      WEFT_ERROR("PipelineRunner (schedule ", schedule_.name, ") on rank ", group_->rank(), ": action ", i, " of ",
                 actions.size(), " (", to_string(a), ", micro-batch ", a.microbatch, waits, ") failed: ", e.message());
    }
  }
  for (auto [li, event] : st.reductions) {  // in issue order; the trace shows issue to completion
    try {
      reduction_.wait(li);
    } catch (const Error& e) {
      WEFT_ERROR("PipelineRunner (schedule ", schedule_.name, ") on rank ", group_->rank(),
                 ": the data-parallel gradient reduction of stage ", stage_ids_[li], " failed: ", e.message());
    }
    if (record && event < trace_.size()) trace_[event].duration_ns = now_ns() - trace_[event].start_ns;
  }
  for (auto& [work, keep] : st.sends) {
    try {
      work->wait();
    } catch (const Error& e) {
      WEFT_ERROR("PipelineRunner (schedule ", schedule_.name, ") on rank ", group_->rank(),
                 ": a send of this step failed: ", e.message());
    }
  }
  const int last = local(schedule_.num_stages() - 1);
  last_output_ = Tensor();
  if (last >= 0 && (options_.keep_output || st.forward_only)) last_output_ = cat(st.outputs, 0);
}

double PipelineRunner::step(const Tensor& input, const Tensor& target, const LossFn& loss_fn) {
  StepState st;
  st.loss_fn = &loss_fn;
  if (local(schedule_.num_stages() - 1) >= 0) WEFT_CHECK(loss_fn != nullptr, "PipelineRunner::step: no loss function");
  split(st, input, target, /*need_target=*/true);
  tied_.begin_step();
  run(st, schedule_.rank_actions[group_->rank()]);
  // The loss, from the last stage's rank to everyone.
  Tensor loss = full({1}, st.loss, DType::Float64);
  if (group_->size() > 1) group_->broadcast(loss, {schedule_.rank_of(schedule_.num_stages() - 1)})->wait();
  return loss.item<double>();
}

Tensor PipelineRunner::forward(const Tensor& input) {
  NoGradGuard ng;
  StepState st;
  st.forward_only = true;
  split(st, input, Tensor(), /*need_target=*/false);
  std::vector<Action> forwards;
  for (const Action& a : schedule_.rank_actions[group_->rank()])
    if (a.kind == ActionKind::kForward || a.kind == ActionKind::kSendActivation ||
        a.kind == ActionKind::kRecvActivation)
      forwards.push_back(a);
  run(st, forwards);
  return last_output_;
}

void PipelineRunner::run_action(StepState& st, const Action& a) {
  const int s = a.stage, mb = a.microbatch, li = local(s), n_stages = schedule_.num_stages();
  const std::string what = to_string(a);
  auto send = [&](const Tensor& t, bool grad) {
    Tensor payload = t.detach().to(options_.transfer_device).contiguous();
    Tensor header = tensor_header(payload, what);
    const int tag = message_tag(grad, s, mb, n_stages);
    WorkPtr w =
        group_->batch_isend_irecv({P2POp::send(header, a.peer_rank, tag), P2POp::send(payload, a.peer_rank, tag)});
    st.sends.emplace_back(std::move(w), std::vector<Tensor>{header, payload});
  };
  auto receive = [&](bool grad) {
    const int tag = message_tag(grad, a.peer_stage, mb, n_stages);
    Tensor header = empty({kTensorHeaderLen}, DType::Int64);
    group_->batch_isend_irecv({P2POp::recv(header, a.peer_rank, tag)})->wait();
    Tensor t = empty_for_header(header, what, options_.transfer_device);
    group_->batch_isend_irecv({P2POp::recv(t, a.peer_rank, tag)})->wait();
    return t;
  };
  switch (a.kind) {
    case ActionKind::kRecvActivation: {
      Tensor x = receive(false);
      if (x.is_floating_point()) x.requires_grad_(true);
      st.in[li][mb] = x;
      return;
    }
    case ActionKind::kRecvGrad: {
      Tensor g = receive(true);
      const Tensor& y = st.out[li][mb];
      WEFT_CHECK(y.defined() && g.sizes() == y.sizes() && g.dtype() == y.dtype(), "the gradient from stage ",
                 a.peer_stage, " has shape ", shape_str(g.sizes()), " and dtype ", g.dtype(), " but stage ", s,
                 "'s output has ", y.defined() ? shape_str(y.sizes()) : std::string("none"), " and ",
                 y.defined() ? dtype_name(y.dtype()) : "none");
      st.grad_out[li][mb] = g;
      return;
    }
    case ActionKind::kSendActivation: send(st.out[li][mb], false); return;
    case ActionKind::kSendGrad: send(st.grad_in[li][mb], true); return;
    case ActionKind::kForward: {
      Tensor x;
      if (s == 0) {
        x = st.inputs[mb];
      } else if (local(s - 1) >= 0) {  // Note [stage boundaries]
        x = st.out[local(s - 1)][mb].detach();
        if (x.is_floating_point()) x.requires_grad_(true);
        st.in[li][mb] = x;
      } else {
        x = st.in[li][mb];
      }
      const int checkpoint_stop = checkpointed_microbatches(options_.checkpoint, schedule_.num_microbatches);
      Tensor y, xd = x.to(options_.device);  // a tracked copy when the devices differ
      const std::optional<DType> ac = options_.autocast;
      const DeviceType dev = options_.device.type;
      std::optional<AutocastGuard> autocast;  // RunnerOptions::autocast: the forward and the loss
      if (ac) autocast.emplace(dev, *ac);
      if (mb < checkpoint_stop && GradMode::is_enabled()) {
        std::shared_ptr<nn::Module> stage = stages_[li];
        y = autograd::checkpoint(
            [stage, ac, dev](const std::vector<Tensor>& in) {
              std::optional<AutocastGuard> again;  // the recomputation in backward casts as the forward did
              if (ac) again.emplace(dev, *ac);
              return (*stage)(in[0]);
            },
            {xd});
      } else {
        y = (*stages_[li])(xd);
      }
      if (s == n_stages - 1 && (st.forward_only || options_.keep_output)) st.outputs[mb] = y.detach();
      if (s == n_stages - 1 && !st.forward_only) {
        Tensor loss = (*st.loss_fn)(y, st.targets[mb].to(options_.device));
        WEFT_CHECK(loss.numel() == 1, "the loss function returned ", shape_str(loss.sizes()), " for micro-batch ", mb,
                   "; it must return one element");
        st.loss += loss.detach().to(DType::Float64).item<double>() * st.weights[mb];
        y = mul(loss, full_like(loss, st.weights[mb]));
      }
      autocast.reset();
      st.out[li][mb] = y;
      return;
    }
    case ActionKind::kBackward: {
      Tensor y = st.out[li][mb];
      WEFT_CHECK(y.requires_grad(), "stage ", s, "'s output for micro-batch ", mb,
                 " does not require grad: nothing to backpropagate");
      std::vector<Tensor> grads;
      if (s != n_stages - 1) grads = {st.grad_out[li][mb].to(y.device())};
      if (schedule_.split_backward) {  // B now, W later (Note [split backward] in autograd/engine.cc)
        std::vector<Tensor> inputs;
        if (s > 0 && st.in[li][mb].requires_grad()) inputs = {st.in[li][mb]};
        st.deferred[li][mb] = autograd::backward_input({y}, grads, inputs);
      } else {
        autograd::backward({y}, grads);
      }
      if (s > 0) {
        Tensor x = st.in[li][mb];
        Tensor g = x.grad().defined() ? x.grad() : zeros_like(x);
        if (local(s - 1) >= 0) st.grad_out[local(s - 1)][mb] = g;
        else st.grad_in[li][mb] = g;
      }
      st.in[li][mb] = st.out[li][mb] = st.grad_out[li][mb] = Tensor();
      return;
    }
    case ActionKind::kWeight: autograd::backward_weight(std::move(st.deferred[li][mb])); return;
    case ActionKind::kTiedGrad:
      tied_.sum(a.tie, *group_, schedule_.tied_ranks(a.tie), options_.transfer_device);
      return;
    case ActionKind::kReduceGrad: reduction_.reduce(li); return;
    case ActionKind::kReduceTiedGrad: reduction_.reduce_tied(tied_.local(a.tie)); return;
    case ActionKind::kOverlap: return;  // Note [overlapped F and B]: the pair runs in order here
  }
}

}  // namespace weft::parallel::pipe
