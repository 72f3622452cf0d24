// Arrival bookkeeping of an MPI group (contract in group_state.h).
//
// Note [arrival announcements]: every group owns two communicators duplicated
// from its parent: `comm` carries the data, `side` carries bookkeeping. When a
// rank issues collective number s it sends the 8-byte value s to every peer on
// `side` (MPI_Isend, tag kAnnounceTag) and drains the announcements that
// reached it (MPI_Iprobe + MPI_Recv), remembering per peer the highest number
// seen. Messages between two ranks on one communicator and tag do not overtake
// each other, so on a timeout of collective s the peers whose highest number is
// below s are exactly those that never issued it: the missing ranks.
// Announcements are tiny eager sends; a dead peer never blocks them.
#include "parallel/comm/mpi/group_state.h"

#include <algorithm>

#include "parallel/comm/collectives.h"
#include "parallel/comm/mpi/liveness.h"
#include "parallel/comm/mpi/mpi_common.h"

namespace weft::parallel::detail {

void MPIGroupState::drain() {
  while (true) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kAnnounceTag, side, &flag, &st) != MPI_SUCCESS || !flag) break;
    int64_t v = -1;
    if (MPI_Recv(&v, 1, MPI_INT64_T, st.MPI_SOURCE, kAnnounceTag, side, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
    last_seen[st.MPI_SOURCE] = std::max(last_seen[st.MPI_SOURCE], v);
  }
  // Reap finished announcement sends.
  std::erase_if(sends, [](PendingAnnouncement& p) {
    int done = 0;
    MPI_Test(&p.req, &done, MPI_STATUS_IGNORE);
    return done != 0;
  });
}

void MPIGroupState::announce(int64_t s) {
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    PendingAnnouncement a{MPI_REQUEST_NULL, std::make_unique<int64_t>(s)};
    WEFT_MPI_CHECK(MPI_Isend(a.value.get(), 1, MPI_INT64_T, p, kAnnounceTag, side, &a.req), name,
                   ": announcing collective ", s);
    sends.push_back(std::move(a));
  }
  drain();
}

std::vector<int> MPIGroupState::missing(int64_t s) {
  drain();
  std::vector<int> out;
  for (int p = 0; p < size; ++p)
    if (p != rank && last_seen[p] < s) out.push_back(p);
  return out;
}

std::vector<int> MPIGroupState::silent(const std::vector<int>& peer_list, Duration threshold, double* longest_s) const {
  return unresponsive_group_ranks(peer_list, global_ranks, threshold, longest_s);
}

std::vector<int> MPIGroupState::peers() const {
  std::vector<int> out;
  for (int p = 0; p < size; ++p)
    if (p != rank) out.push_back(p);
  return out;
}

std::string MPIGroupState::missing_text(const std::vector<int>& group_ranks) const {
  return missing_ranks_text(group_ranks, global_ranks);
}

std::unique_ptr<MPIGroupState> make_group_state(MPI_Comm parent_data, std::vector<int> global_ranks, std::string name,
                                                uint64_t id, bool debug) {
  auto s = std::make_unique<MPIGroupState>();
  WEFT_MPI_CHECK(MPI_Comm_dup(parent_data, &s->comm), name, ": duplicating the communicator");
  WEFT_MPI_CHECK(MPI_Comm_dup(parent_data, &s->side), name, ": duplicating the communicator");
  MPI_Comm_set_errhandler(s->comm, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(s->side, MPI_ERRORS_RETURN);
  MPI_Comm_rank(s->comm, &s->rank);
  MPI_Comm_size(s->comm, &s->size);
  s->global_ranks = std::move(global_ranks);
  s->name = std::move(name);
  s->id = id;
  s->last_seen.assign(s->size, -1);
  s->debug = debug;
  return s;
}

}  // namespace weft::parallel::detail
