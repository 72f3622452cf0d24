// fashion_mnist_ddp: the Fashion-MNIST example (examples/fashion_mnist.cc)
// trained data-parallel on the library's training loop (train::Trainer with
// the train::DataParallel layout: DistributedDataParallel over MPI).
//
//   ./bazelw build //examples:fashion_mnist_ddp
//   mpirun --allow-run-as-root --oversubscribe -np 2 bazel-bin/examples/fashion_mnist_ddp [flags]
//
// Each rank trains on its DistributedSampler shard of every epoch ((seed,
// epoch) shuffle) with batch --batch-size / ranks, and DDP averages the
// gradients while backward runs, so a step applies the gradient of the mean
// loss over the global batch with the single-process settings; only the data
// order differs. Evaluation is sharded over the ranks; the Trainer reduces
// losses and counts, so every rank knows them. Rank 0 shows progress, writes
// metrics, the plot and --save checkpoints (partitioned, DIR/step-<N>);
// --resume (every rank) takes such a directory, its root or an older
// single-file checkpoint; --stop-after-epoch K stops as if interrupted.
// --amp bf16: bfloat16 autocast. --device cuda: each rank on GPU local_rank %
// GPUs, DDP over NCCL (parallel/comm/device_group.h; metrics still over MPI);
// cuda:N puts every rank on GPU N. Threads per rank: cores / ranks on the node.
//
// --daso: DDP inside each node (parallel/data/node_ddp.h) and DASO between nodes
// (parallel/data/daso.h) on heat's schedule; --ranks-per-node N makes blocks of N
// ranks pretend to be nodes. Its checkpoints hold every rank's DASO state as
// well, and --resume continues them exactly on the same ranks and node split. The run ends with the bytes sent between
// nodes (DASO's allgathers, or plain DDP's whole world allreduce volume; ring model, parallel/data/comm_volume.h,
// summed over the ranks) before test_accuracy.
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "core/parallel.h"
#include "examples/ddp_comm.h"
#include "examples/device_support.h"
#include "examples/fashion_run.h"
#include "examples/models.h"
#include "examples/rank_data.h"
#include "parallel/comm/device_group.h"
#include "parallel/comm/mpi/context.h"
#include "parallel/comm/mpi/process_group_mpi.h"
#include "parallel/data/sampler.h"

namespace weft::examples {
namespace {

// The shared training flags (batch_size is the global batch) and this example's own.
struct Flags : TrainFlags, DasoFlags {
  int64_t stop_after = 0;
  std::string device = "cpu", amp = "none";
  double bucket_cap_mb = 25;
};

std::optional<Flags> parse(int argc, char** argv) {
  Flags f;
  FlagParser p("usage: mpirun [-np N] fashion_mnist_ddp [flags]");
  add_train_flags(p, f,
                  {.program = "fashion_mnist_ddp",
                   .batch_size_help = "global batch size, split across ranks",
                   .multi_process = true});
  add_stop_after_flag(p, &f.stop_after);
  add_device_flags(p, &f.device, &f.amp, "cpu, cuda (GPU local_rank % GPUs, NCCL) or cuda:N");
  p.add("--bucket-cap-mb X", &f.bucket_cap_mb, "DDP gradient bucket cap");
  add_daso_flags(p, f);
  if (!p.parse(argc, argv, std::cout)) return std::nullopt;
  check_daso_flags(f, f.epochs);
  resolve_train_flags(f);
  return f;
}

int run(const Flags& f) {
  parallel::DistributedContext ctx;
  const int rank = ctx.rank(), world = ctx.size();
  set_num_threads(resolve_threads(f.threads, parallel::local_size()));
  WEFT_CHECK(f.batch_size >= world, "--batch-size ", f.batch_size, " is smaller than the number of ranks ", world);
  // The device and the group DDP reduces over: MPI for CPU tensors, NCCL for CUDA.
  Device device = kCPU;
  std::shared_ptr<parallel::ProcessGroup> ddp_group = ctx.world_ptr();
  if (f.device != "cpu") {  // cuda: this rank's GPU (an error without NCCL or a GPU); parse_device selects it
    device = parse_device(f.device == "cuda" ? parallel::local_device(DeviceType::CUDA).str() : f.device);
    ddp_group = parallel::new_device_group(ctx.world_ptr(), device);
  }
  if (rank == 0) std::cerr << "fashion_mnist_ddp: loading " << f.data << " on " << world << " ranks\n";
  const FashionData data = load_fashion(f);
  const int64_t n_train = data.train->size(), n_test = data.test->size();
  auto sampler = std::make_shared<parallel::DistributedSampler>(
      n_train, world, rank, parallel::DistributedSamplerOptions{.shuffle = true, .seed = f.seed});
  io::DataLoader train(data.train, {.batch_size = f.batch_size / world, .seed = f.seed, .num_workers = f.workers},
                       sampler, normalize);
  io::DataLoader test(slice_rows(*data.test, n_test * rank / world, n_test * (rank + 1) / world),
                      {.batch_size = 1000, .num_workers = f.workers}, normalize);

  manual_seed(f.seed);
  std::shared_ptr<nn::Sequential> model = f.model == "cnn" ? fashion_cnn() : fashion_mlp();
  DataParallelComm comm(f, ctx.world_ptr(), ddp_group, device, f.bucket_cap_mb, model);
  train::Trainer trainer(comm.layout(device, autocast_of(f.amp)), model, cross_entropy_loss(), optimizer_from(f),
                         {.valid_name = "test", .name = "fashion_mnist_ddp"});
  comm.attach(trainer, train.num_batches(), f.epochs);
  add_run_callbacks(trainer, f,
                    {.title = "weft DDP (" + std::to_string(world) + " ranks): Fashion-MNIST " + f.model,
                     .stop_after = f.stop_after,
                     .checkpoint = {.quiet = true}});
  if (!f.resume.empty()) trainer.resume(f.resume);
  if (trainer.lead()) {
    std::cerr << "fashion_mnist_ddp: " << f.model << " with " << model->num_parameters() << " parameters, " << n_train
              << " training / " << n_test << " test images, " << world << " ranks x batch " << f.batch_size / world
              << ", " << get_num_threads() << " thread(s) per rank, "
              << (device.is_cpu() ? "cpu (MPI)" : device.str() + " (NCCL)")
              << (f.amp == "none" ? "" : ", autocast " + f.amp) << "\n";
    if (!comm.describe().empty()) std::cerr << "fashion_mnist_ddp: " << comm.describe() << "\n";
  }
  return fit_and_report(trainer, train, test, f, [&] {
    if (!trainer.state().stop) comm.report(trainer);
  });
}

}  // namespace
}  // namespace weft::examples

int main(int argc, char** argv) {
  return weft::examples::run_main("fashion_mnist_ddp", [&] {
    auto flags = weft::examples::parse(argc, argv);
    return flags ? weft::examples::run(*flags) : 0;
  });
}
