// Choosing a pipeline's plan (contract in search.h).
#include "parallel/partition/search.h"

#include <limits>
#include <string>

#include "core/error.h"

namespace weft::parallel::partition {

std::vector<LayerProfile> scaled(std::vector<LayerProfile> layers, double factor) {
  for (auto& l : layers) {
    l.forward_s *= factor;
    l.backward_s *= factor;
    l.activation_bytes = static_cast<int64_t>(static_cast<double>(l.activation_bytes) * factor);
    l.output_bytes = static_cast<int64_t>(static_cast<double>(l.output_bytes) * factor);
  }
  return layers;
}

SearchResult choose_plan(const std::vector<LayerProfile>& profile, const SearchOptions& options) {
  WEFT_CHECK(!options.schedules.empty() && !options.chunks.empty(),
             "choose_plan: no candidate schedule or micro-batch count");
  WEFT_CHECK(options.profiled_chunks >= 1, "choose_plan: profiled_chunks must be positive, got ",
             options.profiled_chunks);
  const int v0 = options.plan.virtual_stages;
  WEFT_CHECK(v0 >= 1 && options.plan.stages % v0 == 0, "choose_plan: ", options.plan.stages, " stages do not make ", v0,
             " stage(s) per rank");
  WEFT_CHECK(options.virtual_stages.empty() || options.virtual_stages.size() == options.schedules.size(),
             "choose_plan: ", options.virtual_stages.size(), " virtual stage counts for ", options.schedules.size(),
             " schedules");
  const int ranks = options.plan.stages / v0;
  const bool single = options.schedules.size() * options.chunks.size() == 1;
  SearchResult best;
  double best_time = std::numeric_limits<double>::infinity();
  std::string failures;
  std::vector<std::string> skipped;
  for (int c : options.chunks) {
    WEFT_CHECK(c >= 1, "choose_plan: a candidate micro-batch count is ", c, "; micro-batch counts must be positive");
    std::vector<LayerProfile> layers = scaled(profile, static_cast<double>(options.profiled_chunks) / c);
    for (size_t i = 0; i < options.schedules.size(); ++i) {
      const pipe::ScheduleKind kind = options.schedules[i];
      const int v = options.virtual_stages.empty() ? v0 : options.virtual_stages[i];
      PlanOptions plan = options.plan;
      plan.schedule = kind;
      plan.microbatches = c;
      plan.virtual_stages = v;
      plan.stages = ranks * v;
      try {
        WEFT_CHECK(v >= 1, "choose_plan: ", v, " stages per rank");
        PartitionPlan candidate = plan_partition(layers, plan);
        if (candidate.step_time_s < best_time * (1 - 1e-9)) {  // strictly faster wins
          best_time = candidate.step_time_s;
          best = {std::move(candidate), kind, v, c, layers};
        }
      } catch (const Error& e) {
        if (single) throw;
        skipped.push_back(pipe::schedule_name(kind) +
                          (v > 1 ? " (" + std::to_string(v) + " stages per rank)" : std::string()) + " with " +
                          std::to_string(c) + " micro-batches: " + e.message());
        failures += "\n  " + skipped.back();
      }
    }
  }
  WEFT_CHECK(best_time < std::numeric_limits<double>::infinity(),
             "partition: no schedule and micro-batch count fits:", failures);
  best.skipped = std::move(skipped);
  return best;
}

}  // namespace weft::parallel::partition
