// fashion_mnist_ddp's data parallelism beside the Trainer: plain DDP over the
// world with its allreduce volume counted, or --daso (heat's
// DataParallelMultiGPU + DASO: DDP inside each node, parallel/data/node_ddp.h, and
// DASO averaging the parameters between nodes, parallel/data/daso.h), with DASO's
// flags.
//
// Contract:
// - add_daso_flags registers --daso, --ranks-per-node and DASO's knobs
//   (defaults heat's, local skips on; --no-local-skips turns them off);
//   check_daso_flags refuses --ranks-per-node without --daso or below 0
//   and sets the schedule's total epochs.
// - DataParallelComm(flags, world, ddp_group, device, bucket_cap_mb, model)
//   (collective): with --daso the model moves to `device` and the node DDP is
//   built (every rank starts from rank 0's state). layout(...) is the
//   train::DataParallel layout over ddp_group (metrics over the world): plain,
//   DDP's bytes counted; --daso, through the node DDP, DASO stepping the
//   optimizer. attach(trainer, steps_per_epoch, epochs) then builds DASO
//   over the Trainer's optimizer, registers its state as the Trainer's
//   per-rank state "daso" (Note [rank state] in train/rank_state.h: every
//   checkpoint holds each rank's, and --resume restores it exactly on the
//   same number of ranks and node split, and refuses another naming both),
//   and, after each epoch line, feeds it the epoch's loss and prints the
//   next epoch's schedule (lead).
// - report(trainer) (collective) prints on the lead the bytes sent between
//   nodes, summed over the ranks (ring model, parallel/data/comm_volume.h): DASO's
//   counters, or plain DDP's whole volume.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "examples/flags.h"
#include "parallel/data/daso.h"
#include "train/trainer.h"

namespace weft::examples {

struct DasoFlags {
  bool daso = false;
  int ranks_per_node = 0;               // 0: MPI's shared-memory split
  parallel::DasoScheduleOptions sched;  // heat's defaults; total_epochs from --epochs
  std::string downcast = "bf16";
};
void add_daso_flags(FlagParser& p, DasoFlags& f);
void check_daso_flags(DasoFlags& f, int64_t epochs);

class DataParallelComm {
 public:
  DataParallelComm(const DasoFlags& f, std::shared_ptr<parallel::ProcessGroup> world,
                   std::shared_ptr<parallel::ProcessGroup> ddp_group, Device device, double bucket_cap_mb,
                   std::shared_ptr<nn::Module> model);
  train::DataParallel layout(Device device, std::optional<DType> autocast);
  void attach(train::Trainer& t, int64_t steps_per_epoch, int64_t epochs);
  std::string describe() const;  // "" for plain DDP
  void report(train::Trainer& t);

 private:
  DasoFlags f_;
  std::shared_ptr<parallel::ProcessGroup> world_, ddp_group_;
  parallel::DDPOptions ddp_;
  std::shared_ptr<int64_t> ddp_bytes_ = std::make_shared<int64_t>(0);
  std::unique_ptr<parallel::NodeDataParallel> node_dp_;
  std::unique_ptr<parallel::Daso> daso_;
};

}  // namespace weft::examples
