// fashion_mnist_pipe: the Fashion-MNIST example (examples/fashion_mnist.cc)
// trained pipeline-parallel on the library's training loop (train::Trainer,
// train::Pipeline layout): the model's layers split across MPI ranks by
// --balance and fed as --chunks micro-batches per step (parallel/pipe/pipe.h).
//
//   mpirun --allow-run-as-root --oversubscribe -np 2 bazel-bin/examples/fashion_mnist_pipe --schedule 1f1b
//
// Every rank builds the model from --seed, keeps its stages' layers and walks
// the same shuffled batches (the input is used on stage 0's rank, the labels
// on the last stage's); a step's loss is the batch mean and each rank's SGD
// updates its own layers, so training is the single-process example's with
// the batch split into micro-batches. The Trainer reduces the loss and
// accuracy: rank 0's progress bar shows the true ones. --schedule gpipe, 1f1b,
// interleaved (--virtual stages per rank), zb (ZB-H1: backward split into
// B and W, W filling the drain bubble), zbv (ZB-V: two stages per rank in a
// V, the first and last on rank 0) or interleaved-zb (interleaved, split
// backward). --balance auto plans every schedule, two stages per rank
// included. Rank 0 also writes the last step's
// schedule chart, simulated from its measured F, B and W times (--chart),
// and its Chrome trace (--trace): examples/schedule_chart_callback.h.
// --save writes partitioned checkpoints (DIR/step-<N>) after every epoch,
// which --resume continues on any layout (and this one from any layout's).
#include <algorithm>
#include <iostream>
#include <optional>
#include <string>

#include "core/parallel.h"
#include "examples/fashion_run.h"
#include "examples/grid_flags.h"
#include "examples/models.h"
#include "examples/schedule_chart_callback.h"
#include "parallel/comm/mpi/context.h"
#include "parallel/comm/mpi/process_group_mpi.h"
#include "parallel/partition/plan.h"
#include "parallel/partition/profile.h"

namespace weft::examples {
namespace {

namespace pp = parallel::pipe;

// The shared training flags (examples/train_flags.h) and this example's own.
struct Flags : TrainFlags {
  int64_t stop_after = 0;  // 0 = run all epochs
  int chunks = 4;
  std::string balance = kBalanceAuto;  // "a,b,...": layers per stage; auto: measured and planned
  std::string schedule = "1f1b";
  int virtual_stages = 0;  // 0: 2 for interleaved, interleaved-zb and zbv, else 1
  std::string checkpoint = "except_last";
  std::string chart = "fashion_mnist_pipe_schedule.txt";
  std::string trace = "fashion_mnist_pipe_trace.json";
};

std::optional<Flags> parse(int argc, char** argv) {
  Flags f;
  FlagParser p("usage: mpirun [-np N] fashion_mnist_pipe [flags]");
  add_train_flags(
      p, f,
      {.program = "fashion_mnist_pipe", .batch_size_help = "batch size (one pipeline step)", .multi_process = true});
  add_stop_after_flag(p, &f.stop_after);
  p.add("--chunks N", &f.chunks, "micro-batches per step");
  add_balance_flag(p, &f.balance, "layers per stage");
  p.add_choice("--schedule", &f.schedule, kScheduleChoices, kScheduleHelp)
      .add("--virtual N", &f.virtual_stages, "stages per rank", kVirtualDefault)
      .add_choice("--checkpoint", &f.checkpoint, {"always", "except_last", "never"}, "activation checkpointing")
      .add("--chart PATH", &f.chart, "the schedule's text chart, simulated from the last step's measured times")
      .add("--trace PATH", &f.trace, "the last step's measured timeline (Chrome-trace JSON)");
  if (!p.parse(argc, argv, std::cout)) return std::nullopt;
  resolve_train_flags(f, {&f.chart, &f.trace});
  check_balance_flag(f.balance, virtual_stages_for(f.virtual_stages, f.schedule), f.schedule);
  return f;
}

// --balance auto: rank 0 measures every layer on one micro-batch of the
// first training images, every rank plans the same balance
// (parallel/partition; with several stages per rank, placed as the schedule
// places them) and rank 0 prints the partition table.
std::vector<int> auto_balance(nn::Sequential& model, const io::TensorDataset& train, const Flags& f,
                              const pp::PipeOptions& po, parallel::ProcessGroup& g) {
  if (g.size() * po.virtual_stages == 1) return {static_cast<int>(model.size())};
  Tensor sample;  // (rows, 1, 28, 28), normalized as the loader does
  if (g.rank() == 0)
    sample = (train.data().narrow(0, 0, std::max<int64_t>(1, f.batch_size / f.chunks)) - 0.2860) / 0.3530;
  const auto layers = parallel::partition::profile_on_root(
      model, nn::Tensors{sample}, g, 0, {.optimizer_state_factor = f.momentum != 0 ? 1.0 : 0.0});  // SGD's momentum
  parallel::partition::PlanOptions options;  // (derived from BalanceOptions: no designated initializers)
  options.stages = g.size() * po.virtual_stages;
  options.virtual_stages = po.virtual_stages;
  options.microbatches = f.chunks;
  options.schedule = po.schedule;
  const parallel::partition::PartitionPlan plan = parallel::partition::plan_partition(layers, options);
  parallel::partition::print_partition_table(layers, plan, g, std::cout);
  return plan.balance;
}

int run(const Flags& f) {
  parallel::DistributedContext ctx;
  auto& g = ctx.world();
  set_num_threads(resolve_threads(f.threads, parallel::local_size()));
  const FashionData data = load_fashion(f);
  // The same batches in the same order on every rank.
  io::DataLoader train(
      data.train, {.batch_size = f.batch_size, .shuffle = true, .seed = f.seed, .num_workers = f.workers}, normalize);
  io::DataLoader test(data.test, {.batch_size = 1000, .num_workers = f.workers}, normalize);

  manual_seed(f.seed);
  std::shared_ptr<nn::Sequential> model = f.model == "cnn" ? fashion_cnn() : fashion_mlp();
  const pp::PipeOptions po{.chunks = f.chunks,
                           .checkpoint = pp::parse_checkpoint_mode(f.checkpoint),
                           .schedule = pp::parse_schedule_kind(f.schedule),
                           .virtual_stages = virtual_stages_for(f.virtual_stages, f.schedule)};
  const std::vector<int> balance =
      f.balance == kBalanceAuto ? auto_balance(*model, *data.train, f, po, g) : parse_balance(f.balance);
  const int64_t layers = static_cast<int64_t>(model->size());
  train::Trainer trainer(train::Pipeline{.group = ctx.world_ptr(), .balance = balance, .pipe = po}, model,
                         cross_entropy_loss(), optimizer_from(f), {.valid_name = "test", .name = "fashion_mnist_pipe"});
  model.reset();
  const pp::Pipe& pipe = trainer.distributed_model().pipe();
  trainer.add<ScheduleChart>(f.chart, f.trace);
  add_run_callbacks(trainer, f,
                    {.title = "weft pipeline (" + std::to_string(g.size()) + " ranks, " + pipe.schedule().name +
                              "): Fashion-MNIST " + f.model,
                     .stop_after = f.stop_after});
  if (!f.resume.empty()) trainer.resume(f.resume);  // a checkpoint of any layout
  if (trainer.lead())
    std::cerr << "fashion_mnist_pipe: " << f.model << " (" << layers << " layers) over " << g.size()
              << " ranks, balance " << join_ints(balance) << ", schedule " << pipe.schedule().name << ", " << f.chunks
              << " micro-batches of a " << f.batch_size << "-image batch, checkpoint " << f.checkpoint << ", "
              << data.train->size() << " training / " << data.test->size() << " test images, " << get_num_threads()
              << " thread(s) per rank\n";

  return fit_and_report(trainer, train, test, f);
}

}  // namespace
}  // namespace weft::examples

int main(int argc, char** argv) {
  return weft::examples::run_main("fashion_mnist_pipe", [&] {
    auto flags = weft::examples::parse(argc, argv);
    return flags ? weft::examples::run(*flags) : 0;
  });
}
