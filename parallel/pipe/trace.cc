// Pipeline step timelines as Chrome-trace JSON (contract in trace.h).
#include "parallel/pipe/trace.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "core/ops.h"

namespace weft::parallel::pipe {

namespace {
constexpr int64_t kFields = 8;  // kind, stage, micro-batch, peer stage, peer rank, tie, start, duration
}  // namespace

std::vector<TraceEvent> gather_trace(ProcessGroup& group, const std::vector<TraceEvent>& mine) {
  const int n = group.size();
  // Counts first, then the events padded to the largest count.
  Tensor count = full({1}, static_cast<int64_t>(mine.size()), DType::Int64);
  std::vector<Tensor> counts(n);
  for (auto& c : counts) c = empty({1}, DType::Int64);
  group.allgather(counts, count)->wait();
  int64_t most = 0;
  for (auto& c : counts) most = std::max(most, c.item<int64_t>());
  Tensor packed = zeros({std::max<int64_t>(most, 1), kFields}, DType::Int64);  // (most, kFields)
  int64_t* p = packed.data_ptr<int64_t>();
  for (size_t i = 0; i < mine.size(); ++i) {
    const TraceEvent& e = mine[i];
    int64_t* row = p + i * kFields;
    row[0] = static_cast<int64_t>(e.action.kind);
    row[1] = e.action.stage;
    row[2] = e.action.microbatch;
    row[3] = e.action.peer_stage;
    row[4] = e.action.peer_rank;
    row[5] = e.action.tie;
    row[6] = e.start_ns;
    row[7] = e.duration_ns;
  }
  std::vector<Tensor> all(n);
  for (auto& t : all) t = empty(packed.sizes(), DType::Int64);
  group.allgather(all, packed)->wait();
  std::vector<TraceEvent> out;
  for (int r = 0; r < n; ++r) {
    const int64_t* q = all[r].data_ptr<int64_t>();
    for (int64_t i = 0; i < counts[r].item<int64_t>(); ++i) {
      const int64_t* row = q + i * kFields;
      TraceEvent e;
      e.action = Action{static_cast<ActionKind>(row[0]), static_cast<int>(row[1]), static_cast<int>(row[2]),
                        static_cast<int>(row[3]),        static_cast<int>(row[4]), static_cast<int>(row[5])};
      e.rank = r;
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
  for (const auto& e : events) {
    sep();
    os << "{\"name\": \"" << to_string(e.action) << "\", \"cat\": \"" << to_string(e.action.kind)
       << "\", \"ph\": \"X\", \"pid\": 0, \"tid\": " << e.rank << ", \"ts\": " << (e.start_ns - t0) / 1e3
       << ", \"dur\": " << e.duration_ns / 1e3 << ", \"args\": {\"stage\": " << e.action.stage
       << ", \"microbatch\": " << e.action.microbatch << "}}";
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
  return c;
}

}  // namespace weft::parallel::pipe
