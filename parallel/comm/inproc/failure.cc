// Argument checks and the texts of failures of the in-process group: why an
// operation cannot be issued, and which ranks a waiting operation misses
// (global ranks, and group ranks where they differ: missing_ranks_text, so the
// texts read like ProcessGroupMPI's). Contract in process_group_inproc.h.
#include <string>
#include <vector>

#include "core/error.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/inproc/world.h"

namespace weft::parallel::detail::inproc {

double seconds(Duration d) { return static_cast<double>(d.count()) / 1000.0; }

void check_tensor(const char* what, const Tensor& t) {
  WEFT_CHECK(t.defined(), what, ": tensor is undefined");
  WEFT_CHECK(t.device().is_cpu(), what, ": the inproc backend takes CPU tensors, got a tensor on ", t.device());
  WEFT_CHECK(t.is_contiguous(), what, ": tensor must be contiguous (shape ", shape_str(t.sizes()), ")");
}

std::string describe(const char* what, const Tensor& t, const std::string& extra) {
  return weft::detail::str_cat(what, "(", t.dtype(), ", ", t.numel(), " elements", extra, ")");
}

std::vector<int> exited_among(const InProcWorld& w, const InProcGroup& g, const std::vector<int>& group_ranks) {
  std::vector<int> out;
  for (int r : group_ranks)
    if (w.exited[g.global_ranks[r]]) out.push_back(r);
  return out;
}

std::string exited_text(const InProcWorld& w, const InProcGroup& g, const std::vector<int>& gone, const char* when) {
  std::string s = missing_ranks_text(gone, g.global_ranks) + " exited " + when + " (";
  for (size_t i = 0; i < gone.size(); ++i) {
    int global = g.global_ranks[gone[i]];
    s += weft::detail::str_cat(i ? "; " : "", "rank ", global, ": ", *w.exited[global]);
  }
  return s + ")";
}

}  // namespace weft::parallel::detail::inproc
