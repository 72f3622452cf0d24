// The collective toolkit: helpers every backend and every package above the
// process group would otherwise write again (the bytes allgather, agreement on
// an outcome, the missing-rank text, new_group's common part).
//
// Contract:
// - allgather_host(group, mine) is collective over `group`: every rank's CPU
//   tensor (the same shape and dtype on every rank), in group-rank order, as
//   CPU tensors. The data travels on group.device() (a GPU for NCCL), so host
//   metadata can be exchanged over any backend.
// - allreduce_host(group, mine, op) is collective over `group`: the reduction
//   of every rank's CPU tensor, as a CPU tensor, staged the same way.
// - allgather_bytes(group, mine) is collective over `group`: two
//   allgather_host calls (the lengths, then the bytes padded to the longest).
//   Every rank gets every rank's string in group-rank order, byte for byte
//   ('\0' and empty strings included).
// - agree(group, what, error) is collective: when any rank's `error` is
//   non-empty, every rank throws weft::Error "<what> failed: <combined>", the
//   combined text being combine_errors of every rank's error (ranks with the
//   same message listed together: "rank 1: disk full; ranks 0, 2: no space").
// - missing_ranks_text names the ranks that did not arrive, shaped the same in
//   every backend's error: "missing ranks: [3, 1] (group ranks [0, 1])".
// - Tensor headers: tensor_header(t, what) is t's dtype, number of
//   dimensions and sizes as kTensorHeaderLen int64s (at most
//   kMaxHeaderDims dimensions, else an error "<what>: a tensor of N
//   dimensions ..."); empty_for_header(h, what, device) is the uninitialised
//   tensor such a header describes (an error "<what>: ..." for a header
//   tensor_header did not write): what a receiver allocates before the data.
// - broadcast_tensor(group, mine, root, what) is collective: root's tensor,
//   any dtype and shape (a header, then the data), on every rank, on
//   group.device(); the other ranks' `mine` is ignored (may be undefined).
// - plan_new_group is new_group's common part (argument checks, the members'
//   global ranks, the sub-group's name and id, this rank's place in it); the
//   backends then make the communicator their own way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "parallel/comm/process_group.h"

namespace weft::parallel {

// Every rank's CPU tensor, in group-rank order (collective over `group`).
std::vector<Tensor> allgather_host(ProcessGroup& group, const Tensor& mine);
// The reduction of every rank's CPU tensor (collective over `group`).
Tensor allreduce_host(ProcessGroup& group, const Tensor& mine, ReduceOp op);
// Every rank's byte string, in group-rank order (collective over `group`).
std::vector<std::string> allgather_bytes(ProcessGroup& group, const std::string& mine);

inline constexpr int64_t kMaxHeaderDims = 8;
inline constexpr int64_t kTensorHeaderLen = 2 + kMaxHeaderDims;
Tensor tensor_header(const Tensor& t, const std::string& what);  // (kTensorHeaderLen,) int64
Tensor empty_for_header(const Tensor& header, const std::string& what, Device device = kCPU);
Tensor broadcast_tensor(ProcessGroup& group, const Tensor& mine, int root, const std::string& what);

// "rank R: <error>; ranks S, T: <error>" over the non-empty entries of
// `errors` (index = rank), in order of each message's lowest rank; "" when
// every entry is empty.
std::string combine_errors(const std::vector<std::string>& errors);

// Collective: throws on every rank "<what> failed: <combine_errors(every
// rank's error)>" when any rank's `error` is non-empty; returns otherwise.
void agree(ProcessGroup& group, const std::string& what, const std::string& error);

// "missing ranks: [3, 1] (group ranks [0, 1])": the global ranks of the group
// ranks `group_ranks` (global_ranks[r] is group rank r's), followed by the
// group ranks where they are not the same numbers.
std::string missing_ranks_text(const std::vector<int>& group_ranks, const std::vector<int>& global_ranks);

// new_group(ranks) as called by group rank `rank` of a group with members
// `global_ranks`, name `group_name` and id `group_id`.
struct NewGroupPlan {
  std::string what;               // "new_group[2, 0]", the collective's description
  std::vector<int> global_ranks;  // the members' global ranks, in list order
  std::string name;               // "group[5, 1]" (the members' global ranks)
  uint64_t id = 0;                // group_id mixed with every member's global rank
  int rank = -1;                  // this rank's place in the sub-group; -1: not a member
  bool member() const { return rank >= 0; }
  // The list's value in new_group's desync fingerprint (desync.h).
  int64_t list_hash() const { return static_cast<int64_t>(id & 0x7fffffffffffull); }
};
// Throws what check_new_group_ranks throws for a bad list.
NewGroupPlan plan_new_group(const std::vector<int>& ranks, int rank, const std::vector<int>& global_ranks,
                            const std::string& group_name, uint64_t group_id = 0);

}  // namespace weft::parallel
