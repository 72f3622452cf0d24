// Host bookkeeping of Note [deferred index checks] (core/cuda/index_check_log.h).
#include "core/cuda/index_check_log.h"

#include <algorithm>

#include "core/error.h"

namespace weft::cuda {

int IndexCheckLog::take(const Entry& e) {
  if (used() >= kSlots) return -1;
  entries_.push_back(e);
  return used() - 1;
}

std::vector<void*> IndexCheckLog::streams() const {
  std::vector<void*> out;
  for (const Entry& e : entries_)
    if (std::find(out.begin(), out.end(), e.stream) == out.end()) out.push_back(e.stream);
  return out;
}

std::string IndexCheckLog::settle(const int64_t* words, int n) {
  WEFT_INTERNAL_ASSERT(n == used(), "IndexCheckLog::settle: ", n, " slots read, ", used(), " in use");
  std::string msg;
  for (int i = 0; i < n && msg.empty(); ++i) {
    if (words[2 * i] == 0) continue;
    const Entry& e = entries_[static_cast<size_t>(i)];
    msg = detail::str_cat(e.op, ": ", e.what, " ", words[2 * i + 1], " is out of bounds (valid range [0, ", e.bound,
                          ")) (checked on the GPU, reported at the next synchronisation)");
  }
  entries_.clear();
  return msg;
}

}  // namespace weft::cuda
