// The state of an in-process world and the helpers the files of
// ProcessGroupInProc share (process_group_inproc.h has the contract). Internal
// to the inproc backend.
//
// Note [inproc rendezvous]: one mutex per world guards every group's state.
// Collective number s of a group is a Round that each rank fills in as it
// issues it (its tensors and a description); the last rank to arrive computes
// the result for all, outside the lock, and marks the round done. A send or
// receive is queued under (source, destination, tag) until the other side
// posts its match; whoever posts second copies the data, outside the lock.
// Completion happens only inside issuing calls, so a waiter just sleeps on the
// world's condition variable, woken by completions, failures and exits
// (mark_exited), and re-checks: done, failed, a missing rank exited, or the
// deadline passed.
//
// The files: process_group_inproc.cc (worlds, sub-groups, exits), rounds.cc
// (the collectives and their Work), p2p.cc (send, recv, batches and their
// Work), failure.cc (argument checks and the texts of failures),
// desync_check.cc (ranks that issued different collectives).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/tensor.h"
#include "parallel/comm/inproc/process_group_inproc.h"
#include "parallel/comm/process_group.h"

namespace weft::parallel {

namespace detail {

struct InProcWorld {
  explicit InProcWorld(int n) : exited(n) {}
  std::mutex m;                                    // guards the world and every group, round and message of it
  std::condition_variable cv;                      // notified on every completion, failure and exit
  std::vector<std::optional<std::string>> exited;  // per global rank: why its thread is gone
};

enum class Kind { Allreduce, Broadcast, Allgather, ReduceScatter, Barrier, NewGroup };

// Collective number `seq` of a group (Note [inproc rendezvous]).
struct Round {
  explicit Round(int n) : arrived(n, false), what(n), tensor(n), list(n) {}
  Kind kind = Kind::Barrier;
  ReduceOp op = ReduceOp::Sum;
  int root = 0;
  std::vector<bool> arrived;
  int count = 0;
  std::vector<std::string> what;          // per group rank: what it issued
  std::vector<Tensor> tensor;             // per rank: the tensor, allgather input, reduce_scatter output
  std::vector<std::vector<Tensor>> list;  // per rank: allgather outputs, reduce_scatter inputs
  std::shared_ptr<InProcGroup> created;   // new_group: the sub-group (the first rank's; every rank's list is the same)
  bool done = false;
  std::string error;    // non-empty: failed (finished too)
  bool desync = false;  // `error` is a desync
};

// One posted send or receive.
struct P2P {
  bool is_send = true;
  Tensor tensor;
  int src = 0, dst = 0, tag = 0;  // group ranks
  std::string what;               // "send(float32, 8 elements, to rank 1, tag 0)"
  bool matched = false, done = false;
  std::string error;
  int peer() const { return is_send ? dst : src; }
};

struct InProcGroup {
  std::string name;
  std::vector<int> global_ranks;
  std::map<int64_t, std::shared_ptr<Round>> rounds;              // issued by some rank, not yet by all
  using Key = std::tuple<int, int, int>;                         // (src, dst, tag)
  std::map<Key, std::deque<std::shared_ptr<P2P>>> sends, recvs;  // posted, unmatched, in issue order
  int size() const { return static_cast<int>(global_ranks.size()); }
};

namespace inproc {

using Clock = std::chrono::steady_clock;

// failure.cc

// Seconds, for error messages.
double seconds(Duration d);
// A defined, contiguous CPU tensor, or an error naming `what`.
void check_tensor(const char* what, const Tensor& t);
// "allreduce(float32, 8 elements<extra>)".
std::string describe(const char* what, const Tensor& t, const std::string& extra = "");
// The group ranks among `group_ranks` whose threads exited. Caller holds the lock.
std::vector<int> exited_among(const InProcWorld& w, const InProcGroup& g, const std::vector<int>& group_ranks);
// "missing ranks: [1] exited <when> (rank 1: its thread threw: ...)" for the
// exited group ranks `gone`. Caller holds the lock.
std::string exited_text(const InProcWorld& w, const InProcGroup& g, const std::vector<int>& gone, const char* when);

// desync_check.cc

// The desync error if the ranks arrived at round `r` (number `seq`) issued
// different descriptions, naming every arrived rank. Caller holds the lock.
std::optional<std::string> desync(const InProcGroup& g, const Round& r, int64_t seq);

// Copies `nb` bytes into `dst`'s data (nothing when it is the same buffer).
inline void copy_bytes(const Tensor& dst, const void* src, size_t nb) {
  if (nb > 0 && dst.raw_data() != src) std::memmove(dst.raw_data(), src, nb);
}

}  // namespace inproc

}  // namespace detail

// What one rank issues as a collective (rounds.cc).
struct ProcessGroupInProc::Issue {
  detail::Kind kind = detail::Kind::Barrier;
  std::string what;
  Tensor tensor;
  std::vector<Tensor> list;
  ReduceOp op = ReduceOp::Sum;
  int root = 0;
  std::shared_ptr<detail::InProcGroup> created;  // new_group: the sub-group, should the round succeed
};

}  // namespace weft::parallel
