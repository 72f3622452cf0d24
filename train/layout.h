// Where a Trainer runs its model, chosen by type (a std::variant, not a
// string): one process, data parallel, a pipeline, or pipeline x data
// parallel. Each layout carries exactly the options of the parallel piece it
// drives.
//
// Contract:
// - Local{device, autocast}: the whole model in this process on `device`
//   (moved there at construction); each batch is moved there; with autocast
//   set, forward passes and the loss run under AutocastGuard(device.type,
//   *autocast) (core/autocast.h), backward outside it.
// - DataParallel{group, ddp, device, autocast, metrics_group}: a replica per
//   rank of `group` wrapped in DistributedDataParallel (parallel/data/ddp.h:
//   parameters broadcast from rank 0, bucketed gradient all-reduce
//   overlapping backward; any ProcessGroup: MPI, NCCL, in-process). Each rank
//   feeds its own shard of every global batch (e.g. a DistributedSampler or
//   GlobalBatchSampler in its DataLoader). The loss, metric and row sums are
//   reduced over `metrics_group` (a group that takes CPU float64 tensors;
//   null: `group`), so every rank reports the global batch's numbers.
//   Two optional hooks for data parallelism the Trainer does not build
//   itself (e.g. DASO, parallel/data/daso.h): `wrapped`, a DDP over the model
//   made elsewhere (parallel::NodeDataParallel's node DDP): forward goes
//   through it and no DDP is built over `group`, which then only reduces
//   the metrics (unless metrics_group is set); `step(optimizer)`, called in
//   place of optimizer.step() (parallel::Daso::step: the local step, then
//   the averaging between nodes).
// - Pipeline{group, balance, pipe}: the Sequential's layers split over the
//   ranks of `group` (one stage per rank, pipe.virtual_stages per rank for
//   interleaved) by `balance` (empty: as even as possible, earlier stages
//   larger) and run with pipe.schedule over pipe.chunks micro-batches
//   (parallel/pipe). Every rank feeds the same batch (the input is read on
//   the first stage's rank, the targets on the last's).
// - Hybrid{world, options}: DistributedModel (parallel/hybrid) over the
//   pp x dp grid of `world` with its options (balance or automatic
//   partitioning on a sample batch, schedule, chunks, ZeRO-1 with
//   shard_optimizer_state, overlap, ...); replica d's ranks feed replica d's
//   slice of every global batch (GlobalBatchSampler).
// Pipeline and Hybrid are both run through a DistributedModel (Pipeline is
// pp = group size, dp = 1), so any layout saves and loads the one
// partitioned checkpoint format. Their autocast is pipe.autocast
// (parallel/pipe/pipe.h): every stage's forward and the loss, in training
// and in evaluation.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <variant>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "optim/optimizer.h"
#include "parallel/comm/process_group.h"
#include "parallel/data/ddp.h"
#include "parallel/hybrid/distributed_model.h"
#include "parallel/pipe/pipe.h"

namespace weft::train {

struct Local {
  Device device = kCPU;
  std::optional<DType> autocast;  // e.g. DType::BFloat16; none: full precision
};

struct DataParallel {
  std::shared_ptr<parallel::ProcessGroup> group;
  parallel::DDPOptions ddp;
  Device device = kCPU;
  std::optional<DType> autocast;
  std::shared_ptr<parallel::ProcessGroup> metrics_group;  // null: group
  parallel::DistributedDataParallel* wrapped = nullptr;   // null: a DDP over group
  std::function<void(optim::Optimizer&)> step;            // null: the optimizer's step()
};

struct Pipeline {
  std::shared_ptr<parallel::ProcessGroup> group;
  std::vector<int> balance;  // layers per stage; empty: even by count
  parallel::pipe::PipeOptions pipe;
};

struct Hybrid {
  std::shared_ptr<parallel::ProcessGroup> world;
  parallel::hybrid::DistributedModelOptions options;
};

using Layout = std::variant<Local, DataParallel, Pipeline, Hybrid>;

}  // namespace weft::train
