// Desync detection of the in-process group, always on: the ranks of a group
// that issued different collectives (op, dtype, count, reduce op, root,
// new_group list: the description each rank gives its round) at one sequence
// number fail with "collective desync on <group> at sequence <s>: ranks [..]
// issued <a>; ranks [..] issued <b>", naming every rank arrived so far by its
// global rank. Contract in process_group_inproc.h.
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "parallel/comm/inproc/world.h"

namespace weft::parallel::detail::inproc {

std::optional<std::string> desync(const InProcGroup& g, const Round& r, int64_t seq) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<int>> by_what;  // global ranks per description
  for (int q = 0; q < g.size(); ++q) {
    if (!r.arrived[q]) continue;
    if (by_what[r.what[q]].empty()) order.push_back(r.what[q]);
    by_what[r.what[q]].push_back(g.global_ranks[q]);
  }
  if (order.size() < 2) return std::nullopt;
  std::ostringstream os;
  os << "collective desync on " << g.name << " at sequence " << seq << ": ";
  for (size_t i = 0; i < order.size(); ++i)
    os << (i ? "; " : "") << "ranks " << ranks_str(by_what[order[i]]) << " issued " << order[i];
  return os.str();
}

}  // namespace weft::parallel::detail::inproc
