// Collective fingerprints for the debug mode (WEFT_DEBUG_COLLECTIVES,
// parallel/comm/process_group.h): what a rank is about to issue, and the comparison
// that names the first divergence among the ranks of a group. Backend
// independent: the backends do the exchange (ProcessGroupMPI allgathers the
// fingerprints on its side communicator; ProcessGroupNCCL through its MPI
// group, ProcessGroupMPI::check_fingerprint) and call first_divergence.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace weft::parallel {

// Exchanged between ranks as kFingerprintLen int64s: keep it plain.
struct Fingerprint {
  enum Op : int64_t {
    kAllreduce = 1,
    kBroadcast,
    kAllgather,
    kReduceScatter,
    kBarrier,
    kNewGroup,
    kSendRecv,
    kBatchP2P,  // the message counts of a batch between two ranks (batch_p2p_fingerprint)
  };
  int64_t seq;    // sequence number in the group (-1: send/recv, which are not sequenced)
  int64_t group;  // group id (a hash of how the group was made)
  int64_t op;     // Op
  int64_t dtype;  // DType, -1 for barrier and new_group
  int64_t count;  // elements (new_group: ranks)
  int64_t sub;    // reduce op, broadcast root, rank-list hash (new_group), send_recv_sub(src, dst, tag),
                  // or (kBatchP2P) the messages from the higher rank to the lower
};
constexpr int kFingerprintLen = 6;
static_assert(sizeof(Fingerprint) == kFingerprintLen * sizeof(int64_t), "Fingerprint must be six packed int64s");

// The `sub` of a send/recv pair, the same on both sides: group ranks src -> dst
// (each below 2^23) and the tag (below 2^16).
inline int64_t send_recv_sub(int src, int dst, int tag = 0) {
  return (int64_t(src) << 40) | (int64_t(dst & 0xffffff) << 16) | int64_t(tag & 0xffff);
}

// The fingerprint both ranks of a pair exchange first in a batched
// point-to-point (ProcessGroupNCCL): how many messages go from the lower group
// rank `lo` to the higher `hi` (count) and back (sub).
inline Fingerprint batch_p2p_fingerprint(int lo, int hi, int64_t lo_to_hi, int64_t hi_to_lo) {
  return {-1, 0, Fingerprint::kBatchP2P, int64_t(lo) << 32 | uint32_t(hi), lo_to_hi, hi_to_lo};
}
// "allreduce(float32, 8 elements, sum) as collective 3", "barrier() as
// collective 0", "new_group(2 ranks, list hash 1234) as collective 5",
// "send/recv(float32, 8 elements, rank 0 -> rank 1)" (", tag 3" when not 0),
// "batch_isend_irecv(rank 0 -> rank 1: 2 messages, rank 1 -> rank 0: 1 message)".
std::string describe(const Fingerprint& f);

// The fingerprints `all` of every member (in group-rank order, global ranks
// `global_ranks`) of group `group` for its operation number `seq`
// (-1: a send/recv pair): nothing when they agree, else the error text naming
// the first divergent field (sequence number, group, collective, dtype,
// element count, reduce op / root / rank list, in that order) and, for each
// distinct value in order of its lowest rank, the global ranks holding it:
//   "collective desync on world at sequence 3 (first divergence: element
//   count): ranks [0, 2, 3] issue allreduce(float32, 8 elements, sum) as
//   collective 3; ranks [1] issue allreduce(float32, 9 elements, sum) as
//   collective 3"
// ("send/recv desync on G (first divergence: ...): ..." for seq -1).
std::optional<std::string> first_divergence(const std::string& group, int64_t seq, const std::vector<Fingerprint>& all,
                                            const std::vector<int>& global_ranks);

// Combines a group id with one more value (boost's hash_combine): group ids
// derive from the parent's id and the member list.
inline uint64_t mix_group_id(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

}  // namespace weft::parallel
