// The debug-mode fingerprint comparison (contract in desync.h).
#include "parallel/comm/desync.h"

#include <map>
#include <sstream>

#include "core/dtype.h"
#include "core/error.h"
#include "parallel/comm/process_group.h"

namespace weft::parallel {

std::string describe(const Fingerprint& f) {
  static const char* names[] = {"?",       "allreduce", "broadcast", "allgather",        "reduce_scatter",
                                "barrier", "new_group", "send/recv", "batch_isend_irecv"};
  std::ostringstream os;
  os << (f.op >= Fingerprint::kAllreduce && f.op <= Fingerprint::kBatchP2P ? names[f.op] : "?");
  auto messages = [](int64_t n) { return std::to_string(n) + (n == 1 ? " message" : " messages"); };
  if (f.op == Fingerprint::kBarrier) os << "()";
  else if (f.op == Fingerprint::kBatchP2P) {
    const int64_t lo = f.dtype >> 32, hi = f.dtype & 0xffffffff;
    os << "(rank " << lo << " -> rank " << hi << ": " << messages(f.count) << ", rank " << hi << " -> rank " << lo
       << ": " << messages(f.sub) << ")";
  } else if (f.op == Fingerprint::kNewGroup) os << "(" << f.count << " ranks, list hash " << f.sub << ")";
  else {
    os << "(" << (f.dtype >= 0 && f.dtype < kNumDTypes ? dtype_name(static_cast<DType>(f.dtype)) : "?") << ", "
       << f.count << " elements";
    if (f.op == Fingerprint::kAllreduce || f.op == Fingerprint::kReduceScatter)
      os << ", " << reduce_op_name(static_cast<ReduceOp>(f.sub));
    if (f.op == Fingerprint::kBroadcast) os << ", root " << f.sub;
    if (f.op == Fingerprint::kSendRecv) {
      os << ", rank " << (f.sub >> 40) << " -> rank " << ((f.sub >> 16) & 0xffffff);
      if ((f.sub & 0xffff) != 0) os << ", tag " << (f.sub & 0xffff);
    }
    os << ")";
  }
  if (f.op != Fingerprint::kSendRecv && f.op != Fingerprint::kBatchP2P) os << " as collective " << f.seq;
  return os.str();
}

std::optional<std::string> first_divergence(const std::string& group, int64_t seq, const std::vector<Fingerprint>& all,
                                            const std::vector<int>& global_ranks) {
  static const char* fields[] = {"sequence number", "group",         "collective",
                                 "dtype",           "element count", "reduce op / root / rank list"};
  const int n = static_cast<int>(all.size());
  WEFT_INTERNAL_ASSERT(global_ranks.size() == all.size(), "first_divergence: ", all.size(), " fingerprints for ",
                       global_ranks.size(), " ranks");
  for (int f = 0; f < kFingerprintLen; ++f) {
    auto field = [&](int r) { return reinterpret_cast<const int64_t*>(&all[r])[f]; };
    bool same = true;
    for (int r = 1; r < n; ++r) same = same && field(r) == field(0);
    if (same) continue;
    std::map<int64_t, std::vector<int>> by_value;  // global ranks per value
    std::vector<int> first_rank;                   // each distinct value's lowest rank, ascending
    for (int r = 0; r < n; ++r) {
      if (by_value[field(r)].empty()) first_rank.push_back(r);
      by_value[field(r)].push_back(global_ranks[r]);
    }
    std::ostringstream os;
    if (seq >= 0) os << "collective desync on " << group << " at sequence " << seq;
    else os << "send/recv desync on " << group;
    os << " (first divergence: " << fields[f] << "): ";
    for (size_t i = 0; i < first_rank.size(); ++i) {
      const Fingerprint& fp = all[first_rank[i]];
      os << (i ? "; " : "") << "ranks " << ranks_str(by_value[field(first_rank[i])]) << " issue " << describe(fp);
    }
    return os.str();
  }
  return std::nullopt;
}

}  // namespace weft::parallel
