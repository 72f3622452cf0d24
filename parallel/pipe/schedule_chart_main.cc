// schedule_chart: prints a pipeline schedule's text chart and its simulated
// makespan, bubble and peak live activations per rank; optionally writes the SVG.
//
//   ./bazelw run //parallel/pipe:schedule_chart -- --schedule interleaved --ranks 4 --microbatches 8 --virtual 2
//
// Costs are per rank's share of the model for one micro-batch (default F = B = W
// = 1, so a full backward costs 2) and are split evenly over the rank's --virtual
// stages, so schedules with different --virtual compare on the same model.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "core/error.h"
#include "parallel/pipe/chart.h"
#include "parallel/pipe/generators.h"
#include "parallel/pipe/simulate.h"

namespace {

const char* kUsage =
    "usage: schedule_chart [flags]\n"
    "  --schedule gpipe|1f1b|interleaved|zb   schedule (default 1f1b)\n"
    "  --ranks N             pipeline ranks p (default 4)\n"
    "  --microbatches N      micro-batches m (default 8)\n"
    "  --virtual N           stages per rank v (default 1; interleaved and gpipe)\n"
    "  --forward X           forward time of a rank's share of the model (default 1)\n"
    "  --backward X          input-gradient time (default 1)\n"
    "  --weight X            weight-gradient time (default 1; a full backward costs backward + weight)\n"
    "  --transfer X          time of one message between neighbour stages (default 0)\n"
    "  --unit X              time per text column (default: the shortest action)\n"
    "  --svg PATH            also write the SVG chart to PATH\n"
    "  --actions             also print each rank's action list\n";

struct Flags {
  std::string schedule = "1f1b";
  int ranks = 4, microbatches = 8, virtual_stages = 1;
  double forward = 1, backward = 1, weight = 1, transfer = 0, unit = 0;
  std::string svg;
  bool actions = false;
};

// A path relative to where the user ran `bazel run`.
std::string user_path(const std::string& path) {
  const char* wd = std::getenv("BUILD_WORKING_DIRECTORY");
  if (path.empty() || path[0] == '/' || !wd) return path;
  return std::string(wd) + "/" + path;
}

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      WEFT_CHECK(i + 1 < argc, "flag ", a, " needs a value\n", kUsage);
      return argv[++i];
    };
    auto number = [&](const std::string& s) {
      char* end = nullptr;
      const double v = std::strtod(s.c_str(), &end);
      WEFT_CHECK(end && *end == '\0' && !s.empty(), "flag ", a, ": '", s, "' is not a number");
      return v;
    };
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else if (a == "--schedule") f.schedule = value();
    else if (a == "--ranks") f.ranks = static_cast<int>(number(value()));
    else if (a == "--microbatches") f.microbatches = static_cast<int>(number(value()));
    else if (a == "--virtual") f.virtual_stages = static_cast<int>(number(value()));
    else if (a == "--forward") f.forward = number(value());
    else if (a == "--backward") f.backward = number(value());
    else if (a == "--weight") f.weight = number(value());
    else if (a == "--transfer") f.transfer = number(value());
    else if (a == "--unit") f.unit = number(value());
    else if (a == "--svg") f.svg = user_path(value());
    else if (a == "--actions") f.actions = true;
    else WEFT_ERROR("unknown flag '", a, "'\n", kUsage);
  }
  return f;
}

int run(const Flags& f) {
  using namespace weft::parallel::pipe;
  const Schedule s = make_schedule(parse_schedule_kind(f.schedule), f.ranks, f.microbatches, f.virtual_stages);
  const double v = s.virtual_stages;
  const CostModel costs = CostModel::uniform(s.num_stages(), f.forward / v, f.backward / v, f.weight / v, f.transfer);
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
    WEFT_CHECK(out.good(), "cannot write the SVG chart to ", f.svg);
    out << svg_chart(s, sim, options);
    out.close();
    WEFT_CHECK(out.good(), "writing the SVG chart to ", f.svg, " failed");
    std::cout << "wrote " << f.svg << '\n';
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const weft::Error& e) {
    std::fprintf(stderr, "schedule_chart: error: %s\n", e.message().c_str());
    return 1;
  }
}
