#include "core/parallel.h"

#include <atomic>

namespace weft {
namespace {
std::atomic<int> g_threads{0};  // 0: not set, use OpenMP's default (all cores)
}

int get_num_threads() {
  int n = g_threads.load(std::memory_order_relaxed);
  if (n > 0) return n;
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

void set_num_threads(int n) {
  g_threads.store(n > 0 ? n : 0);
#ifdef _OPENMP
  if (n > 0) omp_set_num_threads(n);
#endif
}

}  // namespace weft
