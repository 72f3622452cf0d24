// The per-thread cuDNN plan cache (core/cuda/cudnn_plan_cache.h).
#include "core/cuda/cudnn_plan_cache.h"

namespace weft::cuda::cudnn_graph {

std::map<PlanKey, PlanCacheEntry>& plan_cache() {
  thread_local auto* cache = new std::map<PlanKey, PlanCacheEntry>();  // leaked, like the handles
  return *cache;
}

}  // namespace weft::cuda::cudnn_graph
