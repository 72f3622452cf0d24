// A per-thread cache of cuDNN execution plans (core/cuda/cudnn_graph.h), keyed by
// everything that determines a plan.
//
// Contract:
// - The key is a list of integers the caller composes (pass, lowering, device,
//   dtype, shapes, flags, strides: whatever changes the graph). Equal keys must
//   mean interchangeable plans.
// - cached_plan(key, build, why) builds a plan at most once per key and thread
//   (plans are built with the thread's cuDNN handle, cudnn_handle.h, so they are
//   not shared across threads). A build that throws cudnn_graph::Unsupported is
//   cached too, as its reason and no plan, so a configuration cuDNN cannot run
//   is not rebuilt on every call: the plan is returned, or nullptr with `why`
//   set to the reason. Other exceptions propagate and nothing is cached.
// - The cache lives until the thread exits (it is leaked, like the handles).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/cuda/cudnn_graph.h"

namespace weft::cuda::cudnn_graph {

using PlanKey = std::vector<int64_t>;

struct PlanCacheEntry {
  std::shared_ptr<Plan> plan;  // null when the build was Unsupported
  std::string why;
};

// This thread's cache.
std::map<PlanKey, PlanCacheEntry>& plan_cache();

template <typename Build>
std::shared_ptr<Plan> cached_plan(const PlanKey& key, Build&& build, std::string& why) {
  std::map<PlanKey, PlanCacheEntry>& cache = plan_cache();
  auto it = cache.find(key);
  if (it == cache.end()) {
    PlanCacheEntry e;
    try {
      e.plan = build();
    } catch (const Unsupported& u) {
      e.why = u.why;
    }
    it = cache.emplace(key, std::move(e)).first;
  }
  why = it->second.why;
  return it->second.plan;
}

}  // namespace weft::cuda::cudnn_graph
