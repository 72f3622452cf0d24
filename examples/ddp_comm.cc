// fashion_mnist_ddp's plain DDP or DASO (contract in ddp_comm.h).
#include "examples/ddp_comm.h"

#include <cstdio>
#include <map>
#include <string>

#include "examples/rank_data.h"
#include "parallel/data/comm_volume.h"
#include "train/callback.h"

namespace weft::examples {

void add_daso_flags(FlagParser& p, DasoFlags& f) {
  p.add_switch("--daso", &f.daso, true, "DDP inside each node, DASO between nodes (heat's DataParallelMultiGPU)")
      .add("--ranks-per-node N", &f.ranks_per_node, "with --daso: blocks of N ranks pretend to be nodes",
           "MPI's shared-memory split")
      .add("--warmup-epochs N", &f.sched.warmup_epochs, "DASO: epochs averaging between nodes every step first")
      .add("--cooldown-epochs N", &f.sched.cooldown_epochs, "DASO: epochs averaging between nodes every step last")
      .add("--stability-level X", &f.sched.stability_level,
           "DASO: relative loss improvement below which an epoch counts as a plateau")
      .add("--max-global-skips N", &f.sched.max_global_skips, "DASO: steps between averages at the start of a cycle")
      .add("--skip-reduction-factor N", &f.sched.skip_reduction_factor, "DASO: divides the skips on a plateau")
      .add("--local-skip-factor N", &f.sched.local_skip_factor,
           "DASO: batches to wait = local skip = max global skips / this at the start of a cycle")
      .add_switch("--no-local-skips", &f.sched.local_skips, false,
                  "DASO: the node DDP averages the gradients at every step (default, heat's: in cycling epochs only "
                  "every local-skip steps and where an average between nodes starts, folds or blocks)")
      .add_choice("--downcast", &f.downcast, {"bf16", "fp16", "fp32"}, "DASO: dtype on the wire between nodes");
}

void check_daso_flags(DasoFlags& f, int64_t epochs) {
  WEFT_CHECK(f.daso || f.ranks_per_node == 0, "--ranks-per-node ", f.ranks_per_node, " needs --daso");
  WEFT_CHECK(f.ranks_per_node >= 0, "--ranks-per-node must be >= 0 (0: MPI's shared-memory split), got ",
             f.ranks_per_node);
  f.sched.total_epochs = static_cast<int>(epochs);
}

DataParallelComm::DataParallelComm(const DasoFlags& f, std::shared_ptr<parallel::ProcessGroup> world,
                                   std::shared_ptr<parallel::ProcessGroup> ddp_group, Device device,
                                   double bucket_cap_mb, std::shared_ptr<nn::Module> model)
    : f_(f), world_(std::move(world)), ddp_group_(std::move(ddp_group)), ddp_{.bucket_cap_mb = bucket_cap_mb} {
  if (!f_.daso) {
    ddp_.comm_hook = parallel::counting_hook(ddp_bytes_);
    return;
  }
  model->to(device);
  node_dp_ = std::make_unique<parallel::NodeDataParallel>(
      model, parallel::make_node_groups(world_, {.ranks_per_node = f_.ranks_per_node}),
      parallel::NodeDataParallelOptions{.ddp = ddp_});
}

train::DataParallel DataParallelComm::layout(Device device, std::optional<DType> autocast) {
  train::DataParallel l{
      .group = ddp_group_, .ddp = ddp_, .device = device, .autocast = autocast, .metrics_group = world_};
  if (node_dp_) {
    l.wrapped = &node_dp_->ddp();
    l.step = [this](optim::Optimizer&) { daso_->step(); };  // the local step, then DASO's averaging
  }
  return l;
}

void DataParallelComm::attach(train::Trainer& t, int64_t steps_per_epoch, int64_t epochs) {
  if (!node_dp_) {  // plain DDP: how much of its reductions backward hid, per epoch (rank 0's)
    t.add<train::Lambda>(train::Lambda::Events{
        .epoch_end =
            [](train::Trainer& tr) {
              parallel::DistributedDataParallel* ddp = tr.ddp();
              if (ddp == nullptr) return;
              if (tr.lead())
                std::printf(
                    "ddp: epoch %lld: overlap %.2f (the share of the gradient reductions' window hidden "
                    "behind backward, rank 0)\n",
                    static_cast<long long>(tr.state().epoch), ddp->comm_stats().overlap());
              ddp->reset_comm_stats();
            },
        .order = 6});  // after the epoch line (Progress: 5)
    return;
  }
  const DType wire = f_.downcast == "bf16" ? DType::BFloat16 : f_.downcast == "fp16" ? DType::Float16 : DType::Float32;
  daso_ = std::make_unique<parallel::Daso>(
      *node_dp_, t.optimizer(),
      parallel::DasoOptions{
          .schedule = f_.sched, .steps_per_epoch = static_cast<int>(steps_per_epoch), .downcast = wire});
  // Note [rank state]: each rank's DASO state (schedule, an average in flight, its own parameters and
  // momentum) goes into every checkpoint beside rank 0's model and optimizer state.
  t.add_rank_state({.name = "daso",
                    .layout = node_dp_->groups().layout.str(),
                    .save = [this] { return daso_->state_dict(); },
                    .load = [this](const std::map<std::string, Tensor>& sd) { daso_->load_state_dict(sd); }});
  t.add<train::Lambda>(train::Lambda::Events{
      .epoch_end =
          [this, epochs](train::Trainer& tr) {
            const bool plateau = daso_->end_epoch(tr.state().history.back().train_loss);
            const parallel::DasoSchedule& s = daso_->schedule();
            if (tr.lead() && tr.state().epoch < epochs)
              std::printf("daso: next epoch %d (%s): global_skip %d, batches_to_wait %d, local_skip %d%s\n",
                          s.epoch() + 1, parallel::daso_phase_name(s.phase()), s.global_skip(), s.batches_to_wait(),
                          s.local_skip(), plateau ? " (loss plateau: skips reduced)" : "");
          },
      .order = 6});  // after the epoch line (Progress: 5)
}

std::string DataParallelComm::describe() const {
  return daso_ ? "DASO over " + node_dp_->groups().layout.str() + "; " + daso_->schedule().describe() : "";
}

void DataParallelComm::report(train::Trainer& t) {
  if (daso_) {
    const parallel::DasoStats& st = daso_->stats();
    auto b = allreduce_sum(*world_, static_cast<double>(st.bytes_between_nodes),
                           static_cast<double>(node_dp_->node_bytes()), static_cast<double>(st.bytes_within_node));
    if (t.lead())
      std::printf(
          "daso: %s; global_syncs=%lld (blocking %lld) steps_waiting=%lld (%.2f s on rank 0) "
          "bytes_between_nodes=%.0f node_ddp_bytes=%.0f daso_node_bytes=%.0f node_syncs_skipped=%lld (rank 0)\n",
          node_dp_->groups().layout.str().c_str(), static_cast<long long>(st.global_syncs),
          static_cast<long long>(st.blocking_syncs), static_cast<long long>(st.steps_waiting), st.seconds_waiting, b[0],
          b[1], b[2], static_cast<long long>(st.node_syncs_skipped));
  } else {
    auto b = allreduce_sum(*world_, static_cast<double>(*ddp_bytes_), 0, 0);
    if (t.lead())
      std::printf("ddp: %d ranks, one group; bytes_between_nodes=%.0f (the world allreduce's whole volume)\n",
                  world_->size(), b[0]);
  }
}

}  // namespace weft::examples
