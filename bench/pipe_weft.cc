// pipe_weft: weft's side of //bench:pipe_vs_torch. Run under mpirun (one
// process per rank): a deep MLP (L x (Linear H->H, ReLU)) split evenly over the
// ranks with parallel::pipe::Pipe, `--microbatches` micro-batches per step,
// SGD, MSE on a fixed synthetic batch (no checkpointing, as the peer). Rank 0
// prints one JSON line: steps/s over the timed steps; the peak resident memory
// of the largest rank; the measured step time (wall time per timed step,
// optimizer included) against the simulator's makespan for the same schedule
// from the last step's measured per-stage F and B times and boundary transfer
// times; and that step's trace span (first action start to last action end
// over all ranks: it also counts the time a rank that finished the previous
// step early waits for the others).
//   mpirun -np 2 pipe_weft --schedule 1f1b --steps 20 --warmup 3 --batch 64 --hidden 1024 --layers 16
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <map>
#include <string>

#include "bench/bench_util.h"
#include "core/nn_ops.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "examples/flags.h"
#include "nn/nn.h"
#include "optim/sgd.h"
#include "parallel/comm/mpi/context.h"
#include "parallel/pipe/pipe.h"
#include "parallel/pipe/simulate.h"
#include "parallel/pipe/trace.h"

int main(int argc, char** argv) {
  using namespace weft;
  namespace pp = parallel::pipe;
  int steps = 20, warmup = 3, threads = 1, layers = 16, microbatches = 8, virtual_stages = 0;
  int64_t batch = 64, hidden = 1024;
  std::string schedule = "1f1b", trace;
  weft::examples::FlagParser flags("usage: mpirun -np N pipe_weft [flags]");
  flags.add("--steps N", &steps, "timed steps")
      .add("--warmup N", &warmup, "untimed steps first")
      .add("--threads N", &threads, "CPU threads per rank")
      .add("--batch N", &batch, "batch size (one step)")
      .add("--hidden N", &hidden, "width")
      .add("--layers N", &layers, "Linear+ReLU blocks")
      .add("--microbatches N", &microbatches, "micro-batches per step")
      .add_choice("--schedule", &schedule, {"gpipe", "1f1b", "interleaved", "zb", "zbv", "interleaved-zb"}, "schedule")
      .add("--virtual N", &virtual_stages, "stages per rank", "2 for interleaved, interleaved-zb and zbv, else 1")
      .add("--trace PATH", &trace, "write the last step's Chrome trace here", "none");
  if (auto status = flags.parse_in_main(argc, argv, "pipe_weft")) return *status;
  try {
    parallel::DistributedContext ctx;
    set_num_threads(threads);
    manual_seed(0);
    auto model = std::make_shared<nn::Sequential>();
    for (int i = 0; i < layers; ++i) {
      model->push_back(std::make_shared<nn::Linear>(hidden, hidden));
      model->push_back(std::make_shared<nn::ReLU>());
    }
    pp::PipeOptions o;
    o.chunks = microbatches;
    o.schedule = pp::parse_schedule_kind(schedule);
    o.virtual_stages = virtual_stages > 0
                           ? virtual_stages
                           : (schedule == "interleaved" || schedule == "interleaved-zb" || schedule == "zbv" ? 2 : 1);
    o.checkpoint = pp::CheckpointMode::kNever;
    const int stages = ctx.size() * o.virtual_stages;
    WEFT_CHECK((2 * layers) % stages == 0, "pipe_weft: ", 2 * layers, " modules do not split evenly over ", stages,
               " stages");
    pp::Pipe pipe(model, std::vector<int>(stages, 2 * layers / stages), ctx.world_ptr(), o);
    optim::SGD opt(pipe.parameters(), {0.01, 0.0, 0.0, 0.0, false});
    manual_seed(1);
    Tensor x = randn({batch, hidden}), y = randn({batch, hidden});  // (B, H) each
    auto mse = [](const Tensor& out, const Tensor& t) { return mse_loss(out, t); };
    auto step = [&] {
      opt.zero_grad();
      double loss = pipe.step(x, y, mse);
      opt.step();
      return loss;
    };
    for (int s = 0; s < warmup; ++s) step();
    ctx.world().barrier()->wait();
    auto t0 = std::chrono::steady_clock::now();
    double loss = 0;
    for (int s = 0; s < steps; ++s) {
      if (s == steps - 1) pipe.runner().set_record_trace(true);
      loss = step();
    }
    ctx.world().barrier()->wait();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto events = pp::gather_trace(ctx.world(), pipe.runner().last_trace());
    Tensor rss = full({1}, bench::peak_rss_mb(), DType::Float64);  // MiB
    ctx.world().allreduce(rss, {parallel::ReduceOp::Max})->wait();
    if (ctx.rank() == 0) {
      int64_t first = std::numeric_limits<int64_t>::max(), last = 0;
      for (auto& e : events) {
        first = std::min(first, e.start_ns);
        last = std::max(last, e.start_ns + e.duration_ns);
      }
      pp::Simulation sim = pp::simulate(pipe.schedule(), pp::measured_costs(pipe.schedule(), events));
      if (!trace.empty()) {
        std::FILE* f = std::fopen(trace.c_str(), "w");
        WEFT_CHECK(f != nullptr, "pipe_weft: cannot write ", trace);
        std::fputs(pp::chrome_trace_json(events).c_str(), f);
        std::fclose(f);
      }
      std::printf(
          "{\"steps_per_second\": %.3f, \"final_loss\": %.6f, \"peak_rss_mib\": %.1f, \"step_ms\": %.3f, "
          "\"trace_span_ms\": %.3f, \"simulated_makespan_ms\": %.3f, \"simulated_bubble\": %.4f, \"schedule\": "
          "\"%s\", \"world\": %d}\n",
          steps / secs, loss, rss.item<double>(), 1e3 * secs / steps, (last - first) * 1e-6, sim.makespan * 1e3,
          sim.bubble_fraction, pipe.schedule().name.c_str(), ctx.size());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pipe_weft: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
