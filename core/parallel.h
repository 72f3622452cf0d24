// parallel_for: splits [begin, end) into chunks run on all cores (OpenMP).
//
// Contract: f(chunk_begin, chunk_end) is called on disjoint chunks covering the
// range; ranges smaller than `grain` (or calls from inside a parallel region) run
// inline on the calling thread. Results must not depend on the thread count
// (kernels write disjoint outputs; reductions combine per-chunk partials in a
// fixed order).
#pragma once

#include <algorithm>
#include <cstdint>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace weft {

int get_num_threads();
void set_num_threads(int n);

inline bool in_parallel_region() {
#ifdef _OPENMP
  return omp_in_parallel();
#else
  return false;
#endif
}

inline constexpr int64_t kGrainSize = 32768;

template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  if (begin >= end) return;
  int64_t n = end - begin;
  int nt = get_num_threads();
  if (n <= grain || nt <= 1 || in_parallel_region()) {
    f(begin, end);
    return;
  }
  int64_t chunks = std::min<int64_t>(nt, (n + grain - 1) / grain);
#ifdef _OPENMP
#pragma omp parallel for num_threads(static_cast <int>(chunks)) schedule(static, 1)
#endif
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t b = begin + n * c / chunks, e = begin + n * (c + 1) / chunks;
    if (b < e) f(b, e);
  }
}

}  // namespace weft
