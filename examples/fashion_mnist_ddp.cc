// fashion_mnist_ddp: the Fashion-MNIST example (examples/fashion_mnist.cc)
// trained data-parallel with DistributedDataParallel over MPI.
//
//   ./bazelw build //examples:fashion_mnist_ddp
//   mpirun --allow-run-as-root --oversubscribe -np 2 bazel-bin/examples/fashion_mnist_ddp [flags]
//
// Every rank reads the dataset; a DistributedSampler, the sampler of the rank's
// DataLoader, gives each rank its shard of every epoch (shuffled by (seed,
// epoch), the same on every rank; per-example transforms are seeded by (seed,
// epoch, dataset index) as in the single-process example), and each
// rank trains on batches of global-batch / world-size images, so one step sees
// the same number of images as the single-process example with that batch.
// DDP averages the gradients (bucketed, overlapping backward). Evaluation is
// sharded (rank r scores a contiguous slice of the test set) and the counts are
// allreduced. Only rank 0 shows progress, writes metrics, the plot and
// checkpoints (--save), and prints the final `test_accuracy=0.XXXX`. With
// --resume every rank loads the checkpoint. Threads per rank default to
// cores / ranks on this node (at least 1).
//
// --device cuda: each rank uses GPU local_rank % visible GPUs and DDP reduces
// over NCCL (parallel/device_group.h: a ProcessGroupNCCL bootstrapped through
// the MPI world); metrics still go through MPI. It needs the NCCL backend (a
// build with the CUDA toolkit), a visible GPU and weft's CUDA tensor backend
// (core/cuda); whichever is missing is named in the error.
//
// Batch semantics (the same training as examples/fashion_mnist.cc): the global
// batch --batch-size (128) is split into batch-size / ranks per rank (rounded
// down to a multiple of the ranks), DDP averages the ranks' mean-loss
// gradients, so one step applies the gradient of the mean loss over the global
// batch with the same learning rate, momentum, weight decay and per-epoch
// cosine schedule as the single-process example. Only the data order differs
// (DistributedSampler's (seed, epoch) shuffle, strided over the ranks).
//
// --daso: hierarchical data parallelism (heat's DataParallelMultiGPU + DASO,
// parallel/node_ddp.h and parallel/daso.h): DDP inside each node, the nodes
// averaging their parameters on DASO's schedule (blocking every step in the
// warm-up and cool-down epochs, every global_skip steps without blocking in
// between, bfloat16 on the wire). --ranks-per-node N makes blocks of N ranks
// pretend to be nodes (default: MPI's shared-memory split, one node per
// machine); DASO's knobs (--warmup-epochs, --cooldown-epochs,
// --stability-level, --max-global-skips, --skip-reduction-factor,
// --local-skip-factor, --downcast) default to heat's. The run ends with the
// bytes sent between nodes (DASO: its global allgathers; plain DDP: the whole
// world allreduce volume, which knows no nodes; both by the ring model of
// parallel/comm_volume.h, summed over the ranks) before test_accuracy.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "core/autograd_meta.h"
#include "core/nn_ops.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "examples/flags.h"
#include "examples/models.h"
#include "examples/rank_data.h"
#include "examples/train_flags.h"
#include "examples/train_report.h"
#include "io/checkpoint.h"
#include "io/dataloader.h"
#include "io/fashion_mnist.h"
#include "optim/lr_scheduler.h"
#include "optim/sgd.h"
#include "parallel/comm_volume.h"
#include "parallel/context.h"
#include "parallel/daso.h"
#include "parallel/ddp.h"
#include "parallel/device_group.h"
#include "parallel/mpi/process_group_mpi.h"
#include "parallel/sampler.h"

namespace weft::examples {
namespace {

// The shared training flags (examples/train_flags.h; batch_size is the global
// batch) and this example's own.
struct Flags : TrainFlags {
  std::string device = "cpu";
  double bucket_cap_mb = 25;
  bool daso = false;
  int ranks_per_node = 0;               // 0: MPI's shared-memory split
  parallel::DasoScheduleOptions sched;  // heat's defaults; total_epochs from --epochs
  std::string downcast = "bf16";
};

// The flags, or std::nullopt after --help printed them.
std::optional<Flags> parse(int argc, char** argv) {
  Flags f;
  FlagParser p("usage: mpirun [-np N] fashion_mnist_ddp [flags]");
  add_train_flags(p, f,
                  {.program = "fashion_mnist_ddp",
                   .batch_size_help = "global batch size, split across ranks",
                   .multi_process = true});
  p.add_choice("--device", &f.device, {"cpu", "cuda"}, "device (cuda: NCCL, one GPU per rank)")
      .add("--bucket-cap-mb X", &f.bucket_cap_mb, "DDP gradient bucket cap")
      .add_switch("--daso", &f.daso, true, "DDP inside each node, DASO between nodes (heat's DataParallelMultiGPU)")
      .add("--ranks-per-node N", &f.ranks_per_node, "with --daso: blocks of N ranks pretend to be nodes",
           "MPI's shared-memory split")
      .add("--warmup-epochs N", &f.sched.warmup_epochs, "DASO: epochs averaging between nodes every step first")
      .add("--cooldown-epochs N", &f.sched.cooldown_epochs, "DASO: epochs averaging between nodes every step last")
      .add("--stability-level X", &f.sched.stability_level,
           "DASO: relative loss improvement below which an epoch counts as a plateau")
      .add("--max-global-skips N", &f.sched.max_global_skips, "DASO: steps between averages at the start of a cycle")
      .add("--skip-reduction-factor N", &f.sched.skip_reduction_factor, "DASO: divides the skips on a plateau")
      .add("--local-skip-factor N", &f.sched.local_skip_factor,
           "DASO: batches to wait = max global skips / this at the start of a cycle")
      .add_choice("--downcast", &f.downcast, {"bf16", "fp16", "fp32"}, "DASO: dtype on the wire between nodes");
  if (!p.parse(argc, argv, std::cout)) return std::nullopt;
  resolve_train_flags(f);
  WEFT_CHECK(f.daso || f.ranks_per_node == 0, "--ranks-per-node ", f.ranks_per_node, " needs --daso");
  WEFT_CHECK(f.ranks_per_node >= 0, "--ranks-per-node must be >= 0 (0: MPI's shared-memory split), got ",
             f.ranks_per_node);
  WEFT_CHECK(!f.daso || f.resume.empty(),
             "--resume with --daso is not supported: DASO's schedule state is not in the checkpoint");
  f.sched.total_epochs = static_cast<int>(f.epochs);
  return f;
}

// Whether weft can make tensors on `device` (the CUDA tensor backend, core/cuda,
// registers an allocator for CUDA).
bool tensors_available(Device device) {
  try {
    (void)get_allocator(device);
    return true;
  } catch (const Error&) {
    return false;
  }
}

// Loss and accuracy over the whole test set: each rank scores its slice.
std::pair<double, double> evaluate(nn::Module& model, io::DataLoader& loader, parallel::ProcessGroup& g,
                                   Device device) {
  NoGradGuard ng;
  model.eval();
  double loss_sum = 0, correct = 0, seen = 0;
  for (auto& batch : loader) {
    Tensor x = batch.data.to(device), y = batch.target.to(device);
    Tensor logits = model(x);  // (B, 10)
    loss_sum += cross_entropy(logits, y, Reduction::Sum).item<double>();
    correct += static_cast<double>((argmax(logits, 1) == y).sum().item<int64_t>());
    seen += static_cast<double>(batch.data.size(0));
  }
  model.train();
  auto s = allreduce_sum(g, loss_sum, correct, seen);
  return {s[0] / std::max(s[2], 1.0), s[1] / std::max(s[2], 1.0)};
}

int run(const Flags& f) {
  parallel::DistributedContext ctx;
  auto& g = ctx.world();
  const int rank = ctx.rank(), world = ctx.size();
  const bool lead = rank == 0;
  const int threads = resolve_threads(f.threads, parallel::local_size());
  set_num_threads(threads);
  WEFT_CHECK(f.batch_size >= world, "--batch-size ", f.batch_size, " is smaller than the number of ranks ", world);
  // The device and the group DDP reduces over: MPI for CPU tensors, NCCL for CUDA.
  Device device = kCPU;
  std::shared_ptr<parallel::ProcessGroup> ddp_group = ctx.world_ptr();
  if (f.device == "cuda") {
    device = parallel::local_device(DeviceType::CUDA);  // errors without NCCL backend or GPU
    WEFT_CHECK(tensors_available(device), "--device cuda: the NCCL backend and ", parallel::visible_cuda_devices(),
               " GPU(s) are here, but this weft build has no CUDA tensor backend (core/cuda), so the model cannot "
               "be placed on ",
               device, "; run with --device cpu");
    ddp_group = parallel::new_device_group(ctx.world_ptr(), device);
  }
  const int64_t per_rank = std::max<int64_t>(1, f.batch_size / world);
  if (lead) std::cerr << "fashion_mnist_ddp: loading " << f.data << " on " << world << " ranks\n";

  auto full_train = io::load_fashion_mnist(f.data, true);
  auto full_test = io::load_fashion_mnist(f.data, false);
  int64_t n_train = f.limit_train > 0 ? std::min(f.limit_train, full_train.size()) : full_train.size();
  int64_t n_test = f.limit_test > 0 ? std::min(f.limit_test, full_test.size()) : full_test.size();
  std::shared_ptr<const io::Dataset> train_ds = slice_rows(full_train, 0, n_train);
  auto test_shard = slice_rows(full_test, n_test * rank / world, n_test * (rank + 1) / world);
  auto normalize = [](const io::Example& e, Generator&) { return io::Example{(e.data - 0.2860) / 0.3530, e.target}; };
  io::DataLoader test(test_shard, {1000, false, 0, false, f.workers, 2}, normalize);
  // This rank's shard of each epoch's (seed, epoch) shuffle; the loader keeps
  // the sampler's order and seeds per-example transforms by (seed, epoch,
  // dataset index), as the single-process example's loader does.
  auto sampler = std::make_shared<parallel::DistributedSampler>(n_train, world, rank,
                                                                parallel::DistributedSamplerOptions{true, f.seed});
  io::DataLoader train(train_ds, {per_rank, false, f.seed, false, f.workers, 2}, sampler, normalize);

  manual_seed(f.seed);
  std::shared_ptr<nn::Sequential> model = f.model == "cnn" ? fashion_cnn() : fashion_mlp();
  if (!device.is_cpu()) model->to(device);
  optim::SGD opt(model->parameters(), {f.lr, f.momentum, 0.0, f.weight_decay, false});
  optim::CosineAnnealingLR sched(opt, f.epochs);
  std::vector<EpochMetrics> history;
  int64_t start_epoch = 0, step = 0;
  if (!f.resume.empty()) {
    io::CheckpointContents ck = io::load_checkpoint(f.resume);
    io::check_model_state(ck.model, model->state_dict().items(), f.resume);
    nn::StateDict sd;
    for (auto& [k, v] : ck.model) sd.insert(k, v);
    model->load_state_dict(sd);
    opt.load_state_dict(ck.optimizer);
    sched.load_state_dict(ck.scheduler);
    start_epoch = ck.epoch;
    step = ck.step;
    for (int64_t e = 1; e <= start_epoch; ++e) {
      auto it = ck.metadata.find("history." + std::to_string(e));
      if (it != ck.metadata.end()) history.push_back(decode_metrics(e, it->second));
    }
    if (lead) std::cerr << "fashion_mnist_ddp: resumed from " << f.resume << " after epoch " << start_epoch << "\n";
  } else if (lead) {
    std::remove(f.metrics.c_str());
  }
  parallel::DDPOptions dopts;
  dopts.bucket_cap_mb = f.bucket_cap_mb;
  // Plain: DDP over the world, its allreduce volume counted. --daso: DDP
  // inside each node (NodeDataParallel: every rank starts from rank 0's
  // state) and DASO between the nodes.
  auto ddp_bytes = std::make_shared<int64_t>(0);
  std::unique_ptr<parallel::DistributedDataParallel> world_ddp;
  std::unique_ptr<parallel::NodeDataParallel> node_dp;
  std::unique_ptr<parallel::Daso> daso;
  if (f.daso) {
    parallel::NodeDataParallelOptions no;
    no.ddp = dopts;
    node_dp = std::make_unique<parallel::NodeDataParallel>(
        model, parallel::make_node_groups(ctx.world_ptr(), {f.ranks_per_node}), no);
    parallel::DasoOptions o;
    o.schedule = f.sched;
    o.steps_per_epoch = static_cast<int>(train.num_batches());
    o.downcast = f.downcast == "bf16" ? DType::BFloat16 : f.downcast == "fp16" ? DType::Float16 : DType::Float32;
    daso = std::make_unique<parallel::Daso>(*node_dp, opt, o);
  } else {
    dopts.comm_hook = parallel::counting_hook(ddp_bytes);
    world_ddp = std::make_unique<parallel::DistributedDataParallel>(model, ddp_group, dopts);  // rank 0's state
  }
  parallel::DistributedDataParallel& ddp = f.daso ? node_dp->ddp() : *world_ddp;
  if (lead) {
    std::cerr << "fashion_mnist_ddp: " << f.model << " with " << model->num_parameters() << " parameters in "
              << ddp.bucket_names().size() << " bucket(s), " << n_train << " training / " << n_test << " test images, "
              << world << " ranks x batch " << per_rank << ", " << threads << " thread(s) per rank, "
              << (device.is_cpu() ? "cpu (MPI)" : device.str() + " (NCCL)") << "\n";
    if (daso)
      std::cerr << "fashion_mnist_ddp: DASO over " << node_dp->groups().layout.str() << "; "
                << daso->schedule().describe() << "\n";
  }

  for (int64_t epoch = start_epoch; epoch < f.epochs; ++epoch) {
    train.set_epoch(epoch);
    model->train();
    ProgressBar bar("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(f.epochs), train.num_batches(),
                    f.progress && lead);
    auto t0 = std::chrono::steady_clock::now();
    double loss_sum = 0;
    int64_t correct = 0, seen = 0, b = 0;
    for (auto& batch : train) {
      Tensor x = batch.data.to(device), y = batch.target.to(device);
      Tensor logits = daso ? (*node_dp)(x) : ddp(x);  // (B, 10)
      Tensor loss = cross_entropy(logits, y);
      opt.zero_grad();
      loss.backward();         // DDP averages the gradients over the ranks (--daso: of the node)
      if (daso) daso->step();  // the local step, then DASO's averaging between nodes
      else opt.step();
      ++step;
      int64_t n = batch.data.size(0);
      loss_sum += loss.item<double>() * static_cast<double>(n);
      correct += (argmax(logits.detach(), 1) == y).sum().item<int64_t>();
      seen += n;
      bar.update(++b, loss_sum / seen, static_cast<double>(correct) / seen, seen * world);
    }
    bar.finish();
    auto tr = allreduce_sum(g, loss_sum, static_cast<double>(correct), static_cast<double>(seen));
    const bool plateau = daso && daso->end_epoch(loss_sum / std::max<int64_t>(seen, 1));
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sched.step();
    auto [test_loss, test_acc] = evaluate(*model, test, g, device);
    EpochMetrics m{epoch + 1, tr[0] / tr[2], tr[1] / tr[2], test_loss, test_acc, tr[2] / secs, secs};
    history.push_back(m);
    if (!lead) continue;
    std::printf(
        "epoch %lld/%lld: train_loss=%.6f train_acc=%.4f test_loss=%.4f test_acc=%.4f (%.1fs, %.0f img/s, "
        "overlap %.2f)\n",
        static_cast<long long>(epoch + 1), static_cast<long long>(f.epochs), m.train_loss, m.train_accuracy,
        m.test_loss, m.test_accuracy, secs, m.images_per_second, ddp.comm_stats().overlap());
    if (daso && epoch + 1 < f.epochs)
      std::printf("daso: next epoch %d (%s): global_skip %d, batches_to_wait %d%s\n", daso->schedule().epoch() + 1,
                  parallel::daso_phase_name(daso->schedule().phase()), daso->schedule().global_skip(),
                  daso->schedule().batches_to_wait(), plateau ? " (loss plateau: skips reduced)" : "");
    std::fflush(stdout);
    append_metrics_jsonl(f.metrics, m);
    write_svg_plot(f.plot, history, "weft DDP (" + std::to_string(world) + " ranks): Fashion-MNIST " + f.model);
    if (!f.save.empty()) {
      io::CheckpointContents ck;
      for (auto& [k, v] : model->state_dict()) ck.model[k] = v.to(kCPU).clone();
      for (auto& [k, v] : opt.state_dict()) ck.optimizer[k] = v.to(kCPU).clone();
      ck.scheduler = sched.state_dict();
      ck.rng = get_rng_state();
      ck.step = step;
      ck.epoch = epoch + 1;
      ck.metadata["world_size"] = std::to_string(world);
      for (const auto& h : history) ck.metadata["history." + std::to_string(h.epoch)] = encode_metrics(h);
      io::save_checkpoint(f.save, ck);
    }
  }
  // Communication volume, summed over the ranks (ring model, parallel/comm_volume.h).
  if (daso) {
    const parallel::DasoStats& st = daso->stats();
    auto b = allreduce_sum(g, static_cast<double>(st.bytes_between_nodes), static_cast<double>(node_dp->node_bytes()),
                           static_cast<double>(st.bytes_within_node));
    if (lead)
      std::printf(
          "daso: %s; global_syncs=%lld (blocking %lld) steps_waiting=%lld (%.2f s on rank 0) "
          "bytes_between_nodes=%.0f node_ddp_bytes=%.0f daso_node_bytes=%.0f\n",
          node_dp->groups().layout.str().c_str(), static_cast<long long>(st.global_syncs),
          static_cast<long long>(st.blocking_syncs), static_cast<long long>(st.steps_waiting), st.seconds_waiting, b[0],
          b[1], b[2]);
  } else {
    auto b = allreduce_sum(g, static_cast<double>(*ddp_bytes), 0, 0);
    if (lead)
      std::printf("ddp: %d ranks, one group; bytes_between_nodes=%.0f (the world allreduce's whole volume)\n", world,
                  b[0]);
  }
  g.barrier()->wait();  // rank 0's files are complete before anyone exits
  if (lead) {
    std::cerr << "fashion_mnist_ddp: metrics in " << f.metrics << ", plot in " << f.plot << "\n";
    std::printf("test_accuracy=%.4f\n", history.empty() ? 0.0 : history.back().test_accuracy);
  }
  return 0;
}

}  // namespace
}  // namespace weft::examples

int main(int argc, char** argv) {
  return weft::examples::run_main("fashion_mnist_ddp", [&] {
    auto flags = weft::examples::parse(argc, argv);
    return flags ? weft::examples::run(*flags) : 0;
  });
}
