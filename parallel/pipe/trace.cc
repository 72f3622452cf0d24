// Pipeline step timelines as Chrome-trace JSON (contract in trace.h).
#include "parallel/pipe/trace.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "core/ops.h"
#include "parallel/comm/collectives.h"

namespace weft::parallel::pipe {

namespace {
constexpr size_t kFields = 8;  // kind, stage, micro-batch, peer stage, peer rank, tie, start, duration
}  // namespace

std::vector<TraceEvent> gather_trace(ProcessGroup& group, const std::vector<TraceEvent>& mine) {
  // Each rank's events as packed rows of kFields int64 (one machine: native byte order).
  std::vector<int64_t> packed;
  packed.reserve(mine.size() * kFields);
  for (const TraceEvent& e : mine)
    packed.insert(packed.end(), {static_cast<int64_t>(e.action.kind), e.action.stage, e.action.microbatch,
                                 e.action.peer_stage, e.action.peer_rank, e.action.tie, e.start_ns, e.duration_ns});
  const std::vector<std::string> all = allgather_bytes(
      group, std::string(reinterpret_cast<const char*>(packed.data()), packed.size() * sizeof(int64_t)));
  std::vector<TraceEvent> out;
  for (size_t r = 0; r < all.size(); ++r) {
    std::vector<int64_t> theirs(all[r].size() / sizeof(int64_t));
    if (!theirs.empty()) std::memcpy(theirs.data(), all[r].data(), theirs.size() * sizeof(int64_t));
    for (size_t i = 0; i + kFields <= theirs.size(); i += kFields) {
      const int64_t* row = theirs.data() + i;
      TraceEvent e;
      e.action = Action{static_cast<ActionKind>(row[0]), static_cast<int>(row[1]), static_cast<int>(row[2]),
                        static_cast<int>(row[3]),        static_cast<int>(row[4]), static_cast<int>(row[5])};
      e.rank = static_cast<int>(r);
      e.start_ns = row[6];
      e.duration_ns = row[7];
      out.push_back(e);
    }
  }
  return out;
}

std::string chrome_trace_json(const std::vector<TraceEvent>& events) {
  int64_t t0 = std::numeric_limits<int64_t>::max();
  int ranks = 0;
  for (const auto& e : events) {
    t0 = std::min(t0, e.start_ns);
    ranks = std::max(ranks, e.rank + 1);
  }
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(3);
  os << "{\"traceEvents\": [\n";
  bool first = true;
  auto sep = [&] {
    os << (first ? "  " : ",\n  ");
    first = false;
  };
  for (int r = 0; r < ranks; ++r) {
    sep();
    os << "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": " << r << ", \"args\": {\"name\": \"rank "
       << r << "\"}}";
  }
  // Note [gradient reduction]: a rank's reductions overlap its compute, so they get a row of their own.
  std::vector<bool> reduces(ranks, false);
  for (const auto& e : events) reduces[e.rank] = reduces[e.rank] || is_reduce(e.action.kind);
  for (int r = 0; r < ranks; ++r) {
    if (!reduces[r]) continue;
    sep();
    os << "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": " << ranks + r
       << ", \"args\": {\"name\": \"rank " << r << " gradient average\"}}";
  }
  for (const auto& e : events) {
    sep();
    os << "{\"name\": \"" << to_string(e.action) << "\", \"cat\": \"" << to_string(e.action.kind)
       << "\", \"ph\": \"X\", \"pid\": 0, \"tid\": " << (is_reduce(e.action.kind) ? ranks + e.rank : e.rank)
       << ", \"ts\": " << (e.start_ns - t0) / 1e3 << ", \"dur\": " << e.duration_ns / 1e3
       << ", \"args\": {\"stage\": " << e.action.stage << ", \"microbatch\": " << e.action.microbatch << "}}";
  }
  os << "\n]}\n";
  return os.str();
}

CostModel measured_costs(const Schedule& sched, const std::vector<TraceEvent>& events) {
  const int n = sched.num_stages();
  CostModel c;
  c.forward.assign(n, 0);
  c.backward.assign(n, 0);
  c.weight.assign(n, 0);
  std::vector<int> nf(n, 0), nb(n, 0), nw(n, 0);
  for (const auto& e : events) {
    const double secs = static_cast<double>(e.duration_ns) * 1e-9;
    if (e.action.kind == ActionKind::kForward) {
      c.forward[e.action.stage] += secs;
      ++nf[e.action.stage];
    } else if (e.action.kind == ActionKind::kBackward) {
      c.backward[e.action.stage] += secs;
      ++nb[e.action.stage];
    } else if (e.action.kind == ActionKind::kWeight) {
      c.weight[e.action.stage] += secs;
      ++nw[e.action.stage];
    }
  }
  for (int s = 0; s < n; ++s) {
    c.forward[s] /= std::max(nf[s], 1);
    c.backward[s] /= std::max(nb[s], 1);
    c.weight[s] /= std::max(nw[s], 1);
  }
  c.transfer.assign(std::max(n - 1, 0), std::numeric_limits<double>::max());
  for (const auto& e : events) {
    const double secs = static_cast<double>(e.duration_ns) * 1e-9;
    if (e.action.kind == ActionKind::kRecvActivation) {
      c.transfer[e.action.stage - 1] = std::min(c.transfer[e.action.stage - 1], secs);
    } else if (e.action.kind == ActionKind::kRecvGrad) {
      c.transfer[e.action.stage] = std::min(c.transfer[e.action.stage], secs);
    }
  }
  for (double& t : c.transfer)
    if (t == std::numeric_limits<double>::max()) t = 0;  // neighbours on one rank exchange nothing
  if (sched.reduce_grads) {  // Note [gradient reduction]: from issue to completion, as the simulator charges it
    c.reduce_grad.assign(n, 0);
    for (const auto& e : events)
      if (e.action.kind == ActionKind::kReduceGrad)
        c.reduce_grad[e.action.stage] = static_cast<double>(e.duration_ns) * 1e-9;
  }
  return c;
}

double measured_bubble(const std::vector<TraceEvent>& events, int ranks) {
  WEFT_CHECK(ranks > 0, "measured_bubble: ranks must be positive (ranks=", ranks, ")");
  if (events.empty()) return 0;
  int64_t first = std::numeric_limits<int64_t>::max(), last = std::numeric_limits<int64_t>::min(), busy = 0;
  for (const auto& e : events) {
    first = std::min(first, e.start_ns);
    last = std::max(last, e.start_ns + e.duration_ns);
    if (is_compute(e.action.kind)) busy += e.duration_ns;
  }
  const double span = static_cast<double>(last - first) * ranks;
  return span > 0 ? 1.0 - static_cast<double>(busy) / span : 0.0;
}

}  // namespace weft::parallel::pipe
