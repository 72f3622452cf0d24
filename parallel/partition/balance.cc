// Balances from per-layer costs (contract in balance.h).
#include "parallel/partition/balance.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "parallel/partition/placed_balance.h"
#include "parallel/pipe/schedule.h"
#include "parallel/pipe/simulate.h"

namespace weft::parallel::partition {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

void check_layers(const std::vector<LayerProfile>& layers, int stages, const char* who) {
  WEFT_CHECK(stages >= 1, who, ": the number of stages must be positive (got ", stages, ")");
  WEFT_CHECK(static_cast<int64_t>(layers.size()) >= stages, who, ": ", layers.size(), " layers cannot fill ", stages,
             " stages (every stage needs at least one layer)");
  for (size_t k = 0; k < layers.size(); ++k) {
    const LayerProfile& l = layers[k];
    const std::string what = layer_label(l, static_cast<int>(k));
    WEFT_CHECK(std::isfinite(l.forward_s) && l.forward_s >= 0 && std::isfinite(l.backward_s) && l.backward_s >= 0, who,
               ": ", what, " has forward_s = ", l.forward_s, ", backward_s = ", l.backward_s,
               " (times must be finite and non-negative)");
    WEFT_CHECK(l.param_bytes >= 0 && l.grad_bytes >= 0 && l.optimizer_state_bytes >= 0 && l.buffer_bytes >= 0 &&
                   l.activation_bytes >= 0 && l.output_bytes >= 0 && l.num_parameters >= 0,
               who, ": ", what, " has a negative byte or parameter count");
  }
}

// Calls fn(balance) for every composition of n into p positive parts, in
// lexicographic order.
template <typename Fn>
void for_each_composition(int n, int p, std::vector<int>& parts, Fn&& fn) {
  const int k = static_cast<int>(parts.size());
  if (k == p - 1) {
    parts.push_back(n);
    fn(parts);
    parts.pop_back();
    return;
  }
  for (int first = 1; first <= n - (p - 1 - k); ++first) {
    parts.push_back(first);
    for_each_composition(n - first, p, parts, fn);
    parts.pop_back();
  }
}

}  // namespace

std::string balance_str(const std::vector<int>& balance) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < balance.size(); ++i) os << (i ? ", " : "") << balance[i];
  os << "]";
  return os.str();
}

std::string mib_str(int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

std::vector<int> stage_live_microbatches(const pipe::Schedule& schedule) {
  std::vector<int> live(schedule.num_stages(), 0), now(schedule.num_stages(), 0);
  for (const auto& list : schedule.rank_actions)
    for (const pipe::Action& a : list) {
      if (a.kind == pipe::ActionKind::kForward) live[a.stage] = std::max(live[a.stage], ++now[a.stage]);
      if (a.kind == pipe::ActionKind::kBackward) --now[a.stage];
    }
  return live;
}

std::vector<int> live_microbatches(pipe::ScheduleKind kind, int stages, int microbatches, int virtual_stages) {
  WEFT_CHECK(stages >= 1 && microbatches >= 1, "live_microbatches: stages (", stages, ") and micro-batches (",
             microbatches, ") must be positive");
  WEFT_CHECK(virtual_stages >= 1 && stages % virtual_stages == 0, "live_microbatches: ", stages, " stages do not make ",
             virtual_stages, " stage(s) per rank");
  if (virtual_stages > 1)
    return stage_live_microbatches(pipe::make_schedule(kind, stages / virtual_stages, microbatches, virtual_stages));
  const pipe::Schedule schedule = pipe::make_schedule(kind, stages, microbatches, 1);
  const pipe::Simulation sim = pipe::simulate(schedule, pipe::CostModel::uniform(stages, 1, 1, 1));
  std::vector<int> live(stages);
  for (int s = 0; s < stages; ++s) live[s] = sim.ranks[schedule.rank_of(s)].peak_live_activations;
  return live;
}

// ---- StageCosts ----

StageCosts::StageCosts(const std::vector<LayerProfile>& layers, const BalanceOptions& options)
    : layers_(layers), options_(options) {
  check_layers(layers_, options_.stages, "partition");
  WEFT_CHECK(options_.microbatches >= 1, "partition: micro-batches must be positive (got ", options_.microbatches, ")");
  WEFT_CHECK(options_.memory_budget_bytes >= 0, "partition: memory budget ", options_.memory_budget_bytes,
             " bytes is negative (0 means unlimited)");
  WEFT_CHECK(std::isfinite(options_.bandwidth_bytes_per_s) && options_.bandwidth_bytes_per_s >= 0,
             "partition: bandwidth ", options_.bandwidth_bytes_per_s,
             " bytes/s must be finite and non-negative (0: transfers take no time)");
  WEFT_CHECK(options_.virtual_stages >= 1 && options_.stages % options_.virtual_stages == 0,
             "partition: ", options_.stages, " stages do not make ", options_.virtual_stages, " stage(s) per rank");
  if (options_.virtual_stages == 1) {
    placement_.resize(options_.stages);
    for (int s = 0; s < options_.stages; ++s) placement_[s] = s;
    if (options_.live.empty()) live_ = live_microbatches(options_.schedule, options_.stages, options_.microbatches);
  } else {  // Note [stages per rank]: the schedule's placement and each stage's own peak
    const pipe::Schedule schedule =
        pipe::make_schedule(options_.schedule, num_ranks(), options_.microbatches, options_.virtual_stages);
    placement_ = schedule.stage_to_rank;
    if (options_.live.empty()) live_ = stage_live_microbatches(schedule);
  }
  if (!options_.live.empty()) {
    WEFT_CHECK(static_cast<int>(options_.live.size()) == options_.stages, "partition: live micro-batches has ",
               options_.live.size(), " entries for ", options_.stages, " stages");
    for (size_t s = 0; s < options_.live.size(); ++s)
      WEFT_CHECK(options_.live[s] >= 0, "partition: live micro-batches of stage ", s, " is ", options_.live[s]);
    live_ = options_.live;
  }
  const size_t n = layers_.size();
  time_prefix_.assign(n + 1, 0);
  resident_prefix_.assign(n + 1, 0);
  activation_prefix_.assign(n + 1, 0);
  for (size_t k = 0; k < n; ++k) {
    time_prefix_[k + 1] = time_prefix_[k] + layers_[k].time_s();
    resident_prefix_[k + 1] = resident_prefix_[k] + layers_[k].resident_bytes();
    activation_prefix_[k + 1] = activation_prefix_[k] + layers_[k].activation_bytes;
  }
}

double StageCosts::compute_s(int begin, int end) const { return time_prefix_[end] - time_prefix_[begin]; }

double StageCosts::transfer_s(int end, int stage) const {
  if (stage >= options_.stages - 1 || options_.bandwidth_bytes_per_s == 0) return 0;
  if (placement_[stage] == placement_[stage + 1]) return 0;  // neighbours on one rank exchange nothing
  return static_cast<double>(layers_[end - 1].output_bytes) / options_.bandwidth_bytes_per_s;
}

int64_t StageCosts::resident_bytes(int begin, int end) const { return resident_prefix_[end] - resident_prefix_[begin]; }

int64_t StageCosts::activation_bytes(int begin, int end) const {
  return activation_prefix_[end] - activation_prefix_[begin];
}

int64_t StageCosts::memory_bytes(int begin, int end, int stage) const {
  return resident_bytes(begin, end) + static_cast<int64_t>(live_[stage]) * activation_bytes(begin, end);
}

bool StageCosts::fits(int begin, int end, int stage) const {
  return options_.memory_budget_bytes == 0 || memory_bytes(begin, end, stage) <= options_.memory_budget_bytes;
}

std::vector<double> stage_times(const StageCosts& costs, const std::vector<int>& balance) {
  WEFT_CHECK(static_cast<int>(balance.size()) == costs.num_stages(), "stage_times: balance ", balance_str(balance),
             " has ", balance.size(), " stages, the costs ", costs.num_stages());
  std::vector<double> times;
  int begin = 0;
  for (int s = 0; s < costs.num_stages(); ++s) {
    WEFT_CHECK(balance[s] > 0 && begin + balance[s] <= costs.num_layers(), "stage_times: balance ",
               balance_str(balance), " does not split ", costs.num_layers(), " layers into non-empty stages");
    times.push_back(costs.time_s(begin, begin + balance[s], s));
    begin += balance[s];
  }
  WEFT_CHECK(begin == costs.num_layers(), "stage_times: balance ", balance_str(balance), " covers ", begin, " of ",
             costs.num_layers(), " layers");
  return times;
}

std::vector<double> rank_times(const StageCosts& costs, const std::vector<int>& balance) {
  const std::vector<double> times = stage_times(costs, balance);
  std::vector<double> out(costs.num_ranks(), 0.0);
  for (int s = 0; s < costs.num_stages(); ++s) out[costs.rank_of(s)] += times[s];
  return out;
}

std::vector<int64_t> rank_memory_bytes(const StageCosts& costs, const std::vector<int>& balance) {
  stage_times(costs, balance);  // checks the balance
  std::vector<int64_t> out(costs.num_ranks(), 0);
  int begin = 0;
  for (int s = 0; s < costs.num_stages(); ++s) {
    out[costs.rank_of(s)] += costs.memory_bytes(begin, begin + balance[s], s);
    begin += balance[s];
  }
  return out;
}

// ---- the exact solver ----

std::optional<std::vector<int>> optimal_balance(const StageCosts& c) {
  if (c.several_per_rank()) return placed_optimal_balance(c);
  const int n = c.num_layers(), p = c.num_stages();
  // bott[s][i]: the smallest bottleneck of layers [i, n) on stages s..p-1 within
  // the budget (inf: impossible). Memory grows with the layers a stage takes, so
  // the first j that does not fit ends the scan.
  std::vector<std::vector<double>> bott(p + 1, std::vector<double>(n + 1, kInf));
  bott[p][n] = -kInf;
  for (int s = p - 1; s >= 0; --s) {
    const int rest = p - 1 - s;  // stages after s, one layer each at least
    for (int i = s; i + rest < n; ++i) {
      for (int j = i + 1; j + rest <= n; ++j) {
        if (!c.fits(i, j, s)) break;
        if (bott[s + 1][j] == kInf) continue;
        bott[s][i] = std::min(bott[s][i], std::max(c.time_s(i, j, s), bott[s + 1][j]));
      }
    }
  }
  const double best = bott[0][0];
  if (best == kInf) return std::nullopt;

  // sq[s][i]: the smallest sum of squared stage times of layers [i, n) on
  // stages s..p-1 with every stage time <= best, accumulated from the last stage.
  std::vector<std::vector<double>> sq(p + 1, std::vector<double>(n + 1, kInf));
  sq[p][n] = 0;
  for (int s = p - 1; s >= 0; --s) {
    const int rest = p - 1 - s;
    for (int i = s; i + rest < n; ++i) {
      for (int j = i + 1; j + rest <= n; ++j) {
        if (!c.fits(i, j, s)) break;
        const double t = c.time_s(i, j, s);
        if (sq[s + 1][j] == kInf || t > best) continue;
        sq[s][i] = std::min(sq[s][i], t * t + sq[s + 1][j]);
      }
    }
  }
  WEFT_INTERNAL_ASSERT(sq[0][0] != kInf, "optimal_balance: no balance meets its own bottleneck ", best);
  // Earliest boundary that keeps the optimum, stage by stage.
  std::vector<int> balance;
  int i = 0;
  for (int s = 0; s < p; ++s) {
    const int rest = p - 1 - s;
    int chosen = -1;
    for (int j = i + 1; j + rest <= n && chosen < 0; ++j) {
      if (!c.fits(i, j, s)) break;
      const double t = c.time_s(i, j, s);
      if (sq[s + 1][j] != kInf && t <= best && t * t + sq[s + 1][j] == sq[s][i]) chosen = j;
    }
    WEFT_INTERNAL_ASSERT(chosen > 0, "optimal_balance: lost the optimum at stage ", s);
    balance.push_back(chosen - i);
    i = chosen;
  }
  return balance;
}

std::optional<std::vector<int>> optimal_balance(const std::vector<LayerProfile>& layers,
                                                const BalanceOptions& options) {
  return optimal_balance(StageCosts(layers, options));
}

std::optional<std::vector<int>> brute_force_balance(const StageCosts& c) {
  if (c.several_per_rank()) return placed_brute_force_balance(c);
  const int n = c.num_layers(), p = c.num_stages();
  std::optional<std::vector<int>> best;
  double best_bott = kInf, best_sq = kInf;
  std::vector<int> parts;
  for_each_composition(n, p, parts, [&](const std::vector<int>& balance) {
    std::vector<double> times(p);
    int begin = 0;
    for (int s = 0; s < p; ++s) {
      if (!c.fits(begin, begin + balance[s], s)) return;
      times[s] = c.time_s(begin, begin + balance[s], s);
      begin += balance[s];
    }
    double bott = -kInf, sq = 0;
    for (int s = 0; s < p; ++s) bott = std::max(bott, times[s]);
    for (int s = p - 1; s >= 0; --s) sq = times[s] * times[s] + sq;
    if (!best || bott < best_bott || (bott == best_bott && sq < best_sq)) {
      best = balance;
      best_bott = bott;
      best_sq = sq;
    }
  });
  return best;
}

std::vector<int> min_memory_balance(const StageCosts& c) {
  if (c.several_per_rank()) return placed_min_memory_balance(c);
  const int n = c.num_layers(), p = c.num_stages();
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  // peak[s][i]: the smallest peak memory of layers [i, n) on stages s..p-1.
  std::vector<std::vector<int64_t>> peak(p + 1, std::vector<int64_t>(n + 1, kNone));
  peak[p][n] = 0;
  for (int s = p - 1; s >= 0; --s) {
    const int rest = p - 1 - s;
    for (int i = s; i + rest < n; ++i)
      for (int j = i + 1; j + rest <= n; ++j)
        if (peak[s + 1][j] != kNone)
          peak[s][i] = std::min(peak[s][i], std::max(c.memory_bytes(i, j, s), peak[s + 1][j]));
  }
  const int64_t best = peak[0][0];
  std::vector<int> balance;
  int i = 0;
  for (int s = 0; s < p; ++s) {
    const int rest = p - 1 - s;
    int j = i + 1;
    while (!(c.memory_bytes(i, j, s) <= best && peak[s + 1][j] <= best)) {
      ++j;
      WEFT_INTERNAL_ASSERT(j + rest <= n, "min_memory_balance: lost the optimum at stage ", s);
    }
    balance.push_back(j - i);
    i = j;
  }
  return balance;
}

std::vector<int> solve_balance(const std::vector<LayerProfile>& layers, const BalanceOptions& options) {
  const StageCosts c(layers, options);
  if (auto balance = optimal_balance(c)) return *balance;
  const int n = c.num_layers(), p = c.num_stages();
  const int64_t budget = options.memory_budget_bytes;
  // A layer can sit on stages max(0, k - (n - p)) .. min(p - 1, k) (with
  // several stages per rank its rank's other stages add more: still a
  // layer that fits no stage alone fits nowhere).
  for (int k = 0; k < n; ++k) {
    int best_stage = -1;
    for (int s = std::max(0, k - (n - p)); s <= std::min(p - 1, k); ++s)
      if (best_stage < 0 || c.memory_bytes(k, k + 1, s) < c.memory_bytes(k, k + 1, best_stage)) best_stage = s;
    const int64_t need = c.memory_bytes(k, k + 1, best_stage);
    if (need > budget) {
      WEFT_ERROR("partition: ", layer_label(layers[k], k), " does not fit on any stage: it needs ", mib_str(need), " (",
                 mib_str(c.resident_bytes(k, k + 1)), " of parameters, gradients, optimizer state and buffers + ",
                 c.live()[best_stage], " live micro-batches x ", mib_str(c.activation_bytes(k, k + 1)),
                 " of activations) even on stage ", best_stage, ", more than the memory budget of ", mib_str(budget),
                 " per device");
    }
  }
  const std::vector<int> lowest = min_memory_balance(c);
  if (c.several_per_rank()) placed_explain_budget(c, lowest);
  int64_t peak = 0;
  int peak_stage = 0, begin = 0;
  for (int s = 0; s < p; ++s) {
    const int64_t m = c.memory_bytes(begin, begin + lowest[s], s);
    if (m > peak) peak = m, peak_stage = s;
    begin += lowest[s];
  }
  WEFT_ERROR("partition: no balance of ", n, " layers over ", p, " stages fits the memory budget of ", mib_str(budget),
             " per device; the smallest achievable peak is ", mib_str(peak), " (stage ", peak_stage, " of balance ",
             balance_str(lowest), ")");
}

// ---- fairscale's balancers ----

std::vector<int> block_partition(const std::vector<double>& costs, int parts) {
  WEFT_CHECK(parts >= 1, "block_partition: parts must be positive (got ", parts, ")");
  const int n = static_cast<int>(costs.size());
  WEFT_CHECK(n >= parts, "block_partition: ", n, " costs are fewer than ", parts, " parts");
  // Costs normalised to [0, 1] (all zero when they are all equal).
  const double lo = *std::min_element(costs.begin(), costs.end());
  const double range = *std::max_element(costs.begin(), costs.end()) - lo;
  std::vector<double> normal(n, 0.0);
  if (range != 0)
    for (int k = 0; k < n; ++k) normal[k] = (costs[k] - lo) / range;
  // splits[b]: one past block b's last element; equal blocks, the last takes the rest.
  std::vector<int> splits(parts);
  for (int b = 0; b + 1 < parts; ++b) splits[b] = n / parts * (b + 1);
  splits[parts - 1] = n;
  auto block = [&](int b) {
    double sum = 0;
    for (int k = b > 0 ? splits[b - 1] : 0; k < splits[b]; ++k) sum += normal[k];
    return sum;
  };
  // The largest block (the last of equal ones) and the smallest (the first).
  auto largest = [&] {
    int at = 0;
    for (int b = 1; b < parts; ++b)
      if (block(b) >= block(at)) at = b;
    return at;
  };
  auto smallest = [&] {
    int at = 0;
    for (int b = 1; b < parts; ++b)
      if (block(b) < block(at)) at = b;
    return at;
  };
  // Bárány et al.: move one element at a time into a smallest block from its
  // neighbour on the side of a largest block, until max <= min + 1.
  const int64_t limit = 16 + 4 * static_cast<int64_t>(n) * n * parts;
  for (int64_t steps = 0;;) {
    const int p = largest();
    const double max_size = block(p);
    for (;;) {
      WEFT_INTERNAL_ASSERT(++steps < limit, "block_partition: no convergence after ", steps, " moves");
      const int q = smallest();
      if (max_size <= block(q) + 1) {
        std::vector<int> sizes(parts);
        for (int b = 0; b < parts; ++b) sizes[b] = splits[b] - (b > 0 ? splits[b - 1] : 0);
        return sizes;
      }
      int h;
      if (p < q) {
        h = q - 1;
        splits[h] -= 1;
      } else {
        h = q + 1;
        splits[q] += 1;
      }
      if (p == h) break;
    }
  }
}

std::vector<int> balance_by_time(const std::vector<LayerProfile>& layers, int stages) {
  check_layers(layers, stages, "balance_by_time");
  std::vector<double> costs;
  for (const LayerProfile& l : layers) costs.push_back(l.time_s());
  return block_partition(costs, stages);
}

std::vector<int> balance_by_size(const std::vector<LayerProfile>& layers, int stages) {
  check_layers(layers, stages, "balance_by_size");
  std::vector<double> costs;
  for (const LayerProfile& l : layers) costs.push_back(static_cast<double>(l.resident_bytes() + l.activation_bytes));
  return block_partition(costs, stages);
}

}  // namespace weft::parallel::partition
