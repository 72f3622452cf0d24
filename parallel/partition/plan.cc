// Partition plans and their table (contract in plan.h).
#include "parallel/partition/plan.h"

#include <algorithm>
#include <cstdio>
#include <ostream>
#include <sstream>

#include "core/error.h"
#include "parallel/pipe/schedule.h"
#include "parallel/pipe/simulate.h"

namespace weft::parallel::partition {
namespace {

std::string ms_str(double seconds) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f ms", seconds * 1e3);
  return buf;
}

// The type, or "name:Type" when the name is not the layer's index.
std::string short_name(const LayerProfile& l, int index) {
  const std::string type = l.type.empty() ? "?" : l.type;
  if (l.name.empty() || l.name == std::to_string(index)) return type;
  return l.name + ":" + type;
}

std::string layers_cell(const std::vector<LayerProfile>& layers, int begin, int end) {
  std::string s = end - begin == 1 ? std::to_string(begin) : std::to_string(begin) + "-" + std::to_string(end - 1);
  std::vector<int> shown;
  if (end - begin <= 4) {
    for (int k = begin; k < end; ++k) shown.push_back(k);
  } else {
    shown = {begin, begin + 1, -1, end - 1};
  }
  for (int k : shown) {
    s += ' ';
    s += k < 0 ? std::string("...") : short_name(layers[k], k);
  }
  return s;
}

pipe::Simulation simulate_plan(const PartitionPlan& plan, pipe::ScheduleKind kind, bool reduce) {
  const int p = static_cast<int>(plan.stages.size());  // stages
  const int v = plan.virtual_stages;
  pipe::Schedule schedule = pipe::make_schedule(kind, p / v, plan.microbatches, v);
  if (reduce) pipe::add_reduce_grads(schedule);
  pipe::CostModel costs;
  for (const StageEstimate& s : plan.stages) {
    costs.forward.push_back(s.forward_s);
    costs.backward.push_back(schedule.split_backward ? s.backward_s / 2 : s.backward_s);
    costs.weight.push_back(schedule.split_backward ? s.backward_s / 2 : 0);
  }
  for (int s = 0; s + 1 < p; ++s) costs.transfer.push_back(plan.stages[s].transfer_s);
  if (reduce)
    for (const StageEstimate& s : plan.stages) costs.reduce_grad.push_back(s.reduce_s);
  costs.speed = plan.compute_speeds;
  costs.checkpointed = pipe::checkpointed_microbatches(plan.checkpoint, plan.microbatches);
  return pipe::simulate(schedule, costs);
}

// Note [stages per rank]: a rank's stages together against the budget.
void check_rank_budget(const std::vector<LayerProfile>& layers, const PartitionPlan& plan) {
  for (size_t r = 0; r < plan.rank_memory_bytes.size(); ++r) {
    if (plan.rank_memory_bytes[r] <= plan.memory_budget_bytes) continue;
    std::string parts;
    for (size_t s = 0; s < plan.stages.size(); ++s) {
      const StageEstimate& e = plan.stages[s];
      if (e.rank != static_cast<int>(r)) continue;
      parts += (parts.empty() ? "" : "; ") + std::string("stage ") + std::to_string(s) + " (layers " +
               layers_cell(layers, e.begin, e.end) + "): " + mib_str(e.resident_bytes) + " resident + " +
               std::to_string(e.live_microbatches) + " live micro-batches x " + mib_str(e.activation_bytes);
    }
    WEFT_ERROR("partition: rank ", r, " of balance ", balance_str(plan.balance), " needs ",
               mib_str(plan.rank_memory_bytes[r]), " at its peak with its stages together (", parts,
               "), more than the memory budget of ", mib_str(plan.memory_budget_bytes), " per device");
  }
}

void check_budget(const std::vector<LayerProfile>& layers, const PartitionPlan& plan) {
  if (plan.memory_budget_bytes == 0) return;
  if (plan.virtual_stages > 1) return check_rank_budget(layers, plan);
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    const StageEstimate& e = plan.stages[s];
    WEFT_CHECK(e.peak_memory_bytes <= plan.memory_budget_bytes, "partition: stage ", s, " (layers ",
               layers_cell(layers, e.begin, e.end), ") of balance ", balance_str(plan.balance), " needs ",
               mib_str(e.peak_memory_bytes), " at its peak (", mib_str(e.resident_bytes), " resident + ",
               e.live_microbatches, " live micro-batches x ", mib_str(e.activation_bytes),
               "), more than the memory budget of ", mib_str(plan.memory_budget_bytes), " per device");
  }
}

}  // namespace

PartitionPlan evaluate_balance(const std::vector<LayerProfile>& layers, const std::vector<int>& balance,
                               const BalanceOptions& options) {
  const StageCosts c(layers, options);
  const std::vector<double> times = stage_times(c, balance);  // checks the balance
  PartitionPlan plan;
  plan.balance = balance;
  plan.schedule = pipe::schedule_name(options.schedule);
  plan.microbatches = options.microbatches;
  plan.virtual_stages = options.virtual_stages;
  plan.memory_budget_bytes = options.memory_budget_bytes;
  int begin = 0;
  for (int s = 0; s < c.num_stages(); ++s) {
    StageEstimate e;
    e.rank = c.rank_of(s);
    e.begin = begin;
    e.end = begin + balance[s];
    int64_t grad_bytes = 0;
    for (int k = e.begin; k < e.end; ++k) {
      e.num_parameters += layers[k].num_parameters;
      e.forward_s += layers[k].forward_s;
      e.backward_s += layers[k].backward_s;
      grad_bytes += layers[k].grad_bytes;
    }
    if (options.replicas > 1) e.reduce_s = options.allreduce.seconds(grad_bytes);
    e.live_microbatches = c.live()[s];
    e.resident_bytes = c.resident_bytes(e.begin, e.end);
    e.activation_bytes = c.activation_bytes(e.begin, e.end);
    e.peak_memory_bytes = c.memory_bytes(e.begin, e.end, s);
    e.transfer_s = c.transfer_s(e.end, s);
    e.time_s = times[s];
    plan.bottleneck_s = std::max(plan.bottleneck_s, e.time_s);
    plan.stages.push_back(e);
    begin = e.end;
  }
  plan.rank_memory_bytes = rank_memory_bytes(c, balance);
  plan.compute_speeds = options.compute_speeds;
  plan.checkpoint = options.checkpoint;
  const pipe::Simulation sim = simulate_plan(plan, options.schedule, options.replicas > 1);
  plan.step_time_s = sim.makespan;
  plan.bubble_fraction = sim.bubble_fraction;
  return plan;
}

PartitionPlan plan_partition(const std::vector<LayerProfile>& layers, const PlanOptions& options) {
  std::vector<int> balance;
  switch (options.method) {
    case BalanceMethod::kOptimal: balance = solve_balance(layers, options); break;
    case BalanceMethod::kByTime: balance = balance_by_time(layers, options.stages); break;
    case BalanceMethod::kBySize: balance = balance_by_size(layers, options.stages); break;
    case BalanceMethod::kManual:
      WEFT_CHECK(!options.balance.empty(), "partition: manual placement needs a balance (PlanOptions::balance)");
      balance = options.balance;
      break;
  }
  WEFT_CHECK(options.method == BalanceMethod::kManual || options.balance.empty(), "partition: a balance ",
             balance_str(options.balance), " was given but the method is not kManual");
  PartitionPlan plan = evaluate_balance(layers, balance, options);
  check_budget(layers, plan);
  return plan;
}

std::string partition_table(const std::vector<LayerProfile>& layers, const PartitionPlan& plan) {
  const bool ranks = plan.virtual_stages > 1;  // Note [stages per rank]: a rank column
  std::vector<std::string> header = {"stage", "layers", "parameters", "peak memory", "time/micro-batch"};
  if (ranks) header.insert(header.begin() + 1, "rank");
  const size_t layers_col = ranks ? 2 : 1;
  std::vector<std::vector<std::string>> rows;
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    const StageEstimate& e = plan.stages[s];
    rows.push_back({std::to_string(s), layers_cell(layers, e.begin, e.end), std::to_string(e.num_parameters),
                    mib_str(e.peak_memory_bytes), ms_str(e.time_s)});
    if (ranks) rows.back().insert(rows.back().begin() + 1, std::to_string(e.rank));
  }
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) {
    width[c] = header[c].size();
    for (const auto& r : rows) width[c] = std::max(width[c], r[c].size());
  }
  std::ostringstream os;
  int num_layers = plan.stages.empty() ? 0 : plan.stages.back().end;
  os << "partition: " << num_layers << " layers over " << plan.stages.size() << " stages";
  if (ranks)
    os << " on " << plan.stages.size() / plan.virtual_stages << " ranks (" << plan.virtual_stages << " per rank)";
  os << ", " << plan.schedule << " with " << plan.microbatches << " micro-batches, "
     << (plan.memory_budget_bytes > 0 ? "memory budget " + mib_str(plan.memory_budget_bytes) + " per device"
                                      : std::string("no memory budget"))
     << "\n";
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t c = 0; c < cells.size(); ++c) {
      const size_t pad = width[c] - cells[c].size();
      if (c > 0) out += "  ";
      if (c == layers_col) out += cells[c] + std::string(pad, ' ');  // layers: left-aligned
      else out += std::string(pad, ' ') + cells[c];
    }
    os << out << "\n";
  };
  line(header);
  for (const auto& r : rows) line(r);
  char bubble[32];
  std::snprintf(bubble, sizeof bubble, "%.1f%%", plan.bubble_fraction * 100);
  if (ranks) {
    os << "peak memory per rank (its stages together):";
    for (size_t r = 0; r < plan.rank_memory_bytes.size(); ++r)
      os << (r ? "," : "") << " rank " << r << " " << mib_str(plan.rank_memory_bytes[r]);
    os << "\n";
  }
  os << "predicted step time " << ms_str(plan.step_time_s) << ", bubble " << bubble << " (bottleneck "
     << ms_str(plan.bottleneck_s) << " per micro-batch";
  if (ranks) {  // Note [stages per rank]: the busiest rank's stages together
    std::vector<double> busy(plan.rank_memory_bytes.size(), 0.0);
    for (const StageEstimate& e : plan.stages) busy[e.rank] += e.time_s;
    const double most = *std::max_element(busy.begin(), busy.end());
    size_t r = 0;
    while (busy[r] < most * (1 - 1e-9)) ++r;  // the first of equal ranks (to rounding)
    os << "; busiest rank " << r << " " << ms_str(busy[r]);
  }
  os << ")\n";
  bool reduces = false;
  for (const StageEstimate& e : plan.stages) reduces = reduces || e.reduce_s > 0;
  if (reduces) {  // Note [gradient reduction]: included in the step time above
    os << "data-parallel gradient average per step:";
    for (size_t s = 0; s < plan.stages.size(); ++s)
      os << (s ? "," : "") << " stage " << s << " " << ms_str(plan.stages[s].reduce_s);
    os << "\n";
  }
  if (!plan.compute_speeds.empty()) {  // Note [processor sharing]: included in the step time above
    os << "ranks share cores: speed while 1";
    for (size_t k = 2; k <= plan.compute_speeds.size(); ++k) os << ", " << k;
    os << " of the pipeline's ranks compute:";
    for (size_t k = 0; k < plan.compute_speeds.size(); ++k) {
      char v[32];
      std::snprintf(v, sizeof v, "%.2f", plan.compute_speeds[k]);
      os << (k ? ", " : " ") << v;
    }
    os << "\n";
  }
  return os.str();
}

void print_partition_table(const std::vector<LayerProfile>& layers, const PartitionPlan& plan, ProcessGroup& group,
                           std::ostream& os) {
  if (group.rank() == 0) os << partition_table(layers, plan) << std::flush;
}

}  // namespace weft::parallel::partition
