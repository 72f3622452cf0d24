// The measured timeline of a pipeline step: one event per action a rank ran
// (PipelineRunner with RunnerOptions::record_trace), gathered from every rank
// and written as Chrome-trace JSON (open in chrome://tracing or Perfetto: a
// row per rank, a box per action, the bubbles visible as gaps).
//
// Contract:
// - TraceEvent times are steady-clock nanoseconds (CLOCK_MONOTONIC, shared by
//   the processes of one machine). gather_trace() is collective over the
//   group: every rank gets every rank's events. chrome_trace_json() shifts
//   all times so the earliest event starts at 0 and writes microseconds:
//   "X" (complete) events named like to_string(Action) ("F1.3",
//   "RecvAct1.3<-s0@r0"), pid 0, tid = rank, with the stage and micro-batch
//   in args; plus thread-name metadata "rank r".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "parallel/comm/process_group.h"
#include "parallel/pipe/schedule.h"
#include "parallel/pipe/simulate.h"

namespace weft::parallel::pipe {

struct TraceEvent {
  Action action;
  int rank = 0;
  int64_t start_ns = 0;
  int64_t duration_ns = 0;
};

std::vector<TraceEvent> gather_trace(ProcessGroup& group, const std::vector<TraceEvent>& mine);
std::string chrome_trace_json(const std::vector<TraceEvent>& events);

// The simulator's costs (seconds) measured from a step's events (all ranks):
// per stage the mean F, B and W durations; per boundary the shortest receive
// across it (a receive also waits for its sender, so the shortest one is the
// best estimate of the transfer alone; 0 between stages on one rank); with
// reductions, each stage's ReduceGrad from its issue to its completion.
CostModel measured_costs(const Schedule& schedule, const std::vector<TraceEvent>& events);

// The measured bubble of a step's events (all `ranks` ranks): 1 - the summed
// F, B and W durations / (ranks x the span from the first start to the last
// end, reductions included), the simulator's bubble_fraction for a real
// timeline. 0 for no events.
double measured_bubble(const std::vector<TraceEvent>& events, int ranks);

}  // namespace weft::parallel::pipe
