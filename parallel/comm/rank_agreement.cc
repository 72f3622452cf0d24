// Do the ranks of a group hold the same list? (contract in rank_agreement.h)
#include "parallel/comm/rank_agreement.h"

#include <algorithm>

#include "core/ops.h"
#include "parallel/comm/collectives.h"

namespace weft::parallel {
namespace {

constexpr int64_t kEntryLen = 256;  // characters of an entry sent, the last one a terminating 0

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h >> 1;  // fits int64
}

}  // namespace

std::optional<Disagreement> first_disagreement(ProcessGroup& group, const std::vector<std::string>& descriptions,
                                               const std::string& past_end) {
  const int n = group.size();
  if (n == 1) return std::nullopt;
  auto counts = allgather_host(group, full({1}, static_cast<int64_t>(descriptions.size()), {DType::Int64}));
  int64_t most = 1;
  for (auto& c : counts) most = std::max(most, c.item<int64_t>());
  Tensor hashes = full({most}, static_cast<int64_t>(-1), {DType::Int64});  // (most,)
  for (size_t i = 0; i < descriptions.size(); ++i)
    hashes.data_ptr<int64_t>()[i] = static_cast<int64_t>(fnv1a(descriptions[i]));
  auto all = allgather_host(group, hashes);
  auto hash = [&](int r, int64_t k) { return all[r].data_ptr<int64_t>()[k]; };
  int64_t first = -1;
  for (int64_t k = 0; k < most && first < 0; ++k)
    for (int r = 1; r < n; ++r)
      if (hash(r, k) != hash(0, k)) {
        first = k;
        break;
      }
  if (first < 0) return std::nullopt;

  const std::string mine = first < static_cast<int64_t>(descriptions.size()) ? descriptions[first] : past_end;
  Tensor enc = zeros({kEntryLen}, {DType::Int64});  // (kEntryLen,) one character each
  for (size_t i = 0; i < mine.size() && i + 1 < static_cast<size_t>(kEntryLen); ++i)
    enc.data_ptr<int64_t>()[i] = static_cast<unsigned char>(mine[i]);
  auto texts = allgather_host(group, enc);
  Disagreement d;
  d.index = first;
  for (int r = 0; r < n; ++r) {
    std::string s;
    for (int64_t i = 0; i < kEntryLen; ++i) {
      const int64_t c = texts[r].data_ptr<int64_t>()[i];
      if (c == 0) break;
      s.push_back(static_cast<char>(c));
    }
    d.entries.push_back(s);
    d.counts.push_back(counts[r].item<int64_t>());
    if (hash(r, first) != hash(0, first)) d.differing.push_back(r);
  }
  return d;
}

}  // namespace weft::parallel
