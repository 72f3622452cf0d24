// schedule_chart: prints a pipeline schedule's text chart and its simulated
// makespan, bubble and peak live activations per rank; optionally writes the SVG.
//
//   ./bazelw run //tools:schedule_chart -- --schedule interleaved --ranks 4 --microbatches 8 --virtual 2
//   ./bazelw run //tools:schedule_chart -- --from my_schedule.txt
//   ./bazelw run //tools:schedule_chart -- --schedule zbv --ranks 4 --microbatches 8 --overlap --overlap-speed 1
//
// --from FILE charts a text schedule (parallel/pipe/parse.h; what --actions
// prints is one) instead of a generated one, after the validator accepts it;
// --schedule, --ranks, --microbatches and --virtual are then not used. A file
// that cannot be read, text that does not parse and a schedule the validator
// refuses exit 1 with the message.
// Costs are per rank's share of the model for one micro-batch (default F = B = W
// = 1, so a full backward costs 2) and are split evenly over the rank's --virtual
// stages, so schedules with different --virtual compare on the same model
// (zbv: over its two stages per rank).
//
// Flags go through the examples' FlagParser (examples/flags.h): --help lists
// them and exits 0; a flag error (an unknown flag, "2.7" for an integer, a value
// out of range) names the flag and exits 2; a schedule the generator refuses
// (e.g. interleaved with micro-batches not a multiple of the ranks) exits 1
// with the generator's message.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>

#include "core/error.h"
#include "examples/flags.h"
#include "examples/train_report.h"
#include "parallel/pipe/chart.h"
#include "parallel/pipe/generators.h"
#include "parallel/pipe/overlap.h"
#include "parallel/pipe/parse.h"
#include "parallel/pipe/simulate.h"
#include "parallel/pipe/validate.h"

namespace {

using weft::examples::FlagParser;

struct Flags {
  std::string schedule = "1f1b";
  int ranks = 4, microbatches = 8, virtual_stages = 1;
  double forward = 1, backward = 1, weight = 1, transfer = 0, unit = 0;
  bool overlap = false;
  double overlap_speed = 0.5;
  std::string svg;
  std::string from;
  bool actions = false;
};

// The flags, or std::nullopt after --help printed them.
std::optional<Flags> parse(int argc, char** argv) {
  Flags f;
  FlagParser p("usage: schedule_chart [flags]");
  p.add_choice("--schedule", &f.schedule, {"gpipe", "1f1b", "interleaved", "zb", "zbv", "interleaved-zb"}, "schedule")
      .add("--ranks N", &f.ranks, "pipeline ranks p")
      .add("--microbatches N", &f.microbatches, "micro-batches m")
      .add("--virtual N", &f.virtual_stages, "stages per rank v (interleaved, interleaved-zb and gpipe; zbv has 2)")
      .add("--forward X", &f.forward, "forward time of a rank's share of the model")
      .add("--backward X", &f.backward, "input-gradient time")
      .add("--weight X", &f.weight, "weight-gradient time (a full backward costs backward + weight)")
      .add("--transfer X", &f.transfer, "time of one message between neighbour stages")
      .add("--unit X", &f.unit, "time per text column", "the shortest action")
      .add("--from FILE", &f.from, "chart the text schedule in FILE (instead of --schedule and its shape)")
      .add("--svg PATH", &f.svg, "also write the SVG chart to PATH")
      .add_switch("--actions", &f.actions, true, "also print each rank's action list")
      .add_switch(
          "--overlap", &f.overlap, true,
          "pair forwards with the backwards after them where that does not lengthen the simulated step (overlapped F "
          "and B, parallel/pipe/overlap.h)")
      .add("--overlap-speed X", &f.overlap_speed,
           "speed of each action of an overlapped pair relative to alone (0.5: no gain; 1: the pair lasts max(F, B))");
  if (!p.parse(argc, argv, std::cout)) return std::nullopt;
  WEFT_FLAG_CHECK(f.ranks >= 1, "--ranks must be a positive integer (got ", f.ranks, ")");
  WEFT_FLAG_CHECK(f.microbatches >= 1, "--microbatches must be a positive integer (got ", f.microbatches, ")");
  WEFT_FLAG_CHECK(f.virtual_stages >= 1, "--virtual must be a positive integer (got ", f.virtual_stages, ")");
  WEFT_FLAG_CHECK(f.forward > 0, "--forward must be positive (got ", f.forward, ")");
  WEFT_FLAG_CHECK(f.backward > 0, "--backward must be positive (got ", f.backward, ")");
  WEFT_FLAG_CHECK(f.weight >= 0, "--weight must be >= 0 (got ", f.weight, ")");
  WEFT_FLAG_CHECK(f.transfer >= 0, "--transfer must be >= 0 (got ", f.transfer, ")");
  WEFT_FLAG_CHECK(f.overlap_speed > 0 && f.overlap_speed <= 1, "--overlap-speed must be in (0, 1] (got ",
                  f.overlap_speed, ")");
  WEFT_FLAG_CHECK(f.unit >= 0, "--unit must be >= 0 (0: the shortest action; got ", f.unit, ")");
  f.svg = weft::examples::user_path(f.svg);
  f.from = weft::examples::user_path(f.from);
  return f;
}

// The text schedule in `path` (parse.h), validated.
weft::parallel::pipe::Schedule read_schedule(const std::string& path) {
  std::ifstream in(path);
  WEFT_CHECK(in.good(), "--from ", path, ": cannot open the file");
  std::ostringstream text;
  text << in.rdbuf();
  WEFT_CHECK(!in.bad(), "--from ", path, ": reading the file failed");
  try {
    weft::parallel::pipe::Schedule s = weft::parallel::pipe::parse_schedule(text.str());
    weft::parallel::pipe::validate(s);
    return s;
  } catch (const weft::Error& e) {
    WEFT_ERROR("--from ", path, ": ", e.message());
  }
}

int run(const Flags& f) {
  using namespace weft::parallel::pipe;
  const ScheduleKind kind = parse_schedule_kind(f.schedule);
  // zbv always places two stages per rank: the default --virtual 1 means its 2.
  const int virtual_stages = kind == ScheduleKind::kZeroBubbleV && f.virtual_stages == 1 ? 2 : f.virtual_stages;
  Schedule s = !f.from.empty() ? read_schedule(f.from) : make_schedule(kind, f.ranks, f.microbatches, virtual_stages);
  const double v = s.virtual_stages;
  CostModel costs = CostModel::uniform(s.num_stages(), f.forward / v, f.backward / v, f.weight / v, f.transfer);
  costs.overlap_speed = f.overlap_speed;
  if (f.overlap) s = overlap_forward_backward(std::move(s), costs);  // the pairs that do not lengthen the step
  const Simulation sim = simulate(s, costs);
  if (f.actions) std::cout << to_string(s) << '\n';
  ChartOptions options;
  options.unit = f.unit;
  std::cout << text_chart(s, sim, options) << '\n';
  for (int r = 0; r < s.num_ranks; ++r) {
    const RankTimeline& tl = sim.ranks[r];
    std::cout << "rank " << r << ": busy " << format_number(tl.busy) << ", idle " << format_number(tl.idle)
              << ", peak live activations " << tl.peak_live_activations;
    if (s.split_backward) std::cout << ", peak pending weight gradients " << tl.peak_pending_weights;
    std::cout << '\n';
  }
  std::cout << "makespan=" << format_number(sim.makespan) << " bubble=" << format_number(sim.bubble_fraction) << '\n';
  if (!f.svg.empty()) {
    std::ofstream out(f.svg);
    WEFT_CHECK(out.good(), "--svg ", f.svg, ": cannot write the SVG chart there");
    out << svg_chart(s, sim, options);
    out.close();
    WEFT_CHECK(out.good(), "--svg ", f.svg, ": writing the SVG chart failed");
    std::cout << "wrote " << f.svg << '\n';
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return weft::examples::run_main("schedule_chart", [&] {
    const std::optional<Flags> flags = parse(argc, argv);
    return flags ? run(*flags) : 0;
  });
}
