// The state behind one ProcessGroupMPI: its two communicators, its sequence
// number and the arrival bookkeeping that names missing ranks (Note [arrival
// announcements] in group_state.cc). Internal to the MPI backend.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "parallel/comm/process_group.h"

namespace weft::parallel::detail {

struct PendingAnnouncement {
  MPI_Request req;
  std::unique_ptr<int64_t> value;
};

// All methods: the caller holds mpi_mutex().
struct MPIGroupState {
  MPI_Comm comm = MPI_COMM_NULL;  // data: collectives and p2p payloads
  MPI_Comm side = MPI_COMM_NULL;  // announcements, fingerprints, p2p headers
  int rank = 0, size = 1;
  std::vector<int> global_ranks;
  std::string name;
  uint64_t id = 0;
  int64_t seq = 0;
  std::vector<int64_t> last_seen;  // per group rank: highest announced sequence number
  std::vector<PendingAnnouncement> sends;
  bool debug = false;

  // Receives every announcement already here.
  void drain();
  // Tells every peer that this rank issued collective `s`.
  void announce(int64_t s);
  // Group ranks that have not announced collective `s`.
  std::vector<int> missing(int64_t s);
  // Group ranks among `peers` silent for at least `threshold` (Note
  // [liveness]); *longest_s: the longest silence among them.
  std::vector<int> silent(const std::vector<int>& peers, Duration threshold, double* longest_s) const;
  // Every group rank but this one.
  std::vector<int> peers() const;
  // "missing ranks: [2] (group ranks [1])" (global ranks; group ranks too
  // where they differ: missing_ranks_text, parallel/comm/collectives.h).
  std::string missing_text(const std::vector<int>& group_ranks) const;
};

// A state on a duplicate of `parent_data`: its own data and side
// communicators, rank and size read from them.
std::unique_ptr<MPIGroupState> make_group_state(MPI_Comm parent_data, std::vector<int> global_ranks, std::string name,
                                                uint64_t id, bool debug);

}  // namespace weft::parallel::detail
