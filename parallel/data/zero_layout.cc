// ZeroLayout <-> the "layout.*" keys of a ZeRO local state dict (contract in
// zero_layout.h).
#include "parallel/data/zero_layout.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>

#include "core/error.h"
#include "core/ops.h"

namespace weft::parallel {
namespace {

constexpr const char* kWhat = "ZeRO layout";
const std::string kDp = "layout.dp", kRank = "layout.rank", kShard = "layout.shard", kParam = "layout.param.";

Tensor int64_vector(const std::vector<int64_t>& v) { return tensor<int64_t>(v, {static_cast<int64_t>(v.size())}); }

// The n integers of entry `key` (what: what they mean, for the error).
std::vector<int64_t> ints_at(const Tensor& t, const std::string& key, int64_t n, const char* what) {
  WEFT_CHECK(t.defined(), kWhat, ": '", key, "' is an undefined tensor");
  WEFT_CHECK(!t.is_floating_point() && t.dtype() != DType::Bool, kWhat, ": '", key, "' must hold integers, got dtype ",
             t.dtype());
  WEFT_CHECK(t.numel() == n, kWhat, ": '", key, "' must hold ", n, " integer", n == 1 ? "" : "s", " (", what,
             "), got shape ", shape_str(t.sizes()));
  Tensor c = t.to(DType::Int64).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + n);
}

// "layout.shard<f>" -> f, or -1 when the rest is not a decimal number.
int64_t shard_index(const std::string& key) {
  const std::string digits = key.substr(kShard.size());
  if (digits.empty() || digits.size() > 9 ||
      !std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); }))
    return -1;
  return std::stoll(digits);
}

}  // namespace

void ZeroLayout::to_state(optim::OptimizerStateDict& sd) const {
  sd[kDp] = scalar_tensor(static_cast<int64_t>(dp), TensorOptions{DType::Int64});
  sd[kRank] = scalar_tensor(static_cast<int64_t>(rank), TensorOptions{DType::Int64});
  for (size_t f = 0; f < shards.size(); ++f)
    sd[kShard + std::to_string(f)] =
        int64_vector({shards[f].numel, shards[f].padded, static_cast<int64_t>(shards[f].dtype)});
  for (const ZeroParamSpan& p : params) sd[kParam + p.name] = int64_vector({p.flat, p.offset, p.numel});
}

ZeroLayout ZeroLayout::from_state(const optim::OptimizerStateDict& sd) {
  ZeroLayout out;
  auto it = sd.find(kDp);
  WEFT_CHECK(it != sd.end(), kWhat, ": missing '", kDp, "' (is this a local state dict of a ZeroOptimizer?)");
  const int64_t dp = ints_at(it->second, kDp, 1, "the data-parallel size")[0];
  WEFT_CHECK(dp >= 1 && dp <= std::numeric_limits<int>::max(), kWhat, ": '", kDp, "' is ", dp, ", not a group size");
  it = sd.find(kRank);
  WEFT_CHECK(it != sd.end(), kWhat, ": missing '", kRank, "' (is this a local state dict of a ZeroOptimizer?)");
  const int64_t rank = ints_at(it->second, kRank, 1, "the data-parallel rank")[0];
  WEFT_CHECK(rank >= 0 && rank < dp, kWhat, ": '", kRank, "' is ", rank, ", not a rank of '", kDp, "' ", dp);
  out.dp = static_cast<int>(dp);
  out.rank = static_cast<int>(rank);

  std::map<int64_t, FlatShard> shards;
  for (const auto& [key, t] : sd) {
    if (key.rfind("layout.", 0) != 0 || key == kDp || key == kRank) continue;
    if (key.rfind(kParam, 0) == 0 && key.size() > kParam.size()) {
      const auto v = ints_at(t, key, 3, "flat, offset, numel");
      WEFT_CHECK(v[0] >= 0 && v[0] <= std::numeric_limits<int>::max() && v[1] >= 0 && v[2] >= 0, kWhat, ": '", key,
                 "' is [", v[0], ", ", v[1], ", ", v[2], "]: flat, offset and numel must not be negative");
      out.params.push_back({key.substr(kParam.size()), static_cast<int>(v[0]), v[1], v[2]});
      continue;
    }
    const int64_t f = key.rfind(kShard, 0) == 0 ? shard_index(key) : -1;
    WEFT_CHECK(f >= 0, kWhat, ": unexpected key '", key,
               "' (a layout holds layout.dp, layout.rank, layout.shard<f> and layout.param.<name>)");
    const auto v = ints_at(t, key, 3, "numel, padded, dtype");
    WEFT_CHECK(v[0] >= 0 && v[1] >= v[0] && v[1] % dp == 0, kWhat, ": '", key, "' has numel ", v[0], " and padded ",
               v[1], ": padded must be at least numel and a multiple of '", kDp, "' ", dp);
    WEFT_CHECK(v[2] >= 0 && v[2] < kNumDTypes, kWhat, ": '", key, "' has dtype code ", v[2], ", which is no dtype");
    shards[f] = FlatShard{v[0], v[1], static_cast<DType>(v[2])};
  }
  for (const auto& [f, s] : shards) {
    WEFT_CHECK(f == static_cast<int64_t>(out.shards.size()), kWhat, ": '", kShard, out.shards.size(),
               "' is missing (the layout has '", kShard, f, "'; flats are numbered from 0)");
    out.shards.push_back(s);
  }
  std::sort(out.params.begin(), out.params.end(), [](const ZeroParamSpan& a, const ZeroParamSpan& b) {
    return a.flat != b.flat ? a.flat < b.flat : a.offset < b.offset;
  });
  for (size_t i = 0; i < out.params.size(); ++i) {
    const ZeroParamSpan& p = out.params[i];
    const std::string key = kParam + p.name;
    WEFT_CHECK(p.flat < static_cast<int>(out.shards.size()), kWhat, ": '", key, "' is in flat ", p.flat, ", but '",
               kShard, p.flat, "' is missing");
    const int64_t n = out.shards[p.flat].numel;
    WEFT_CHECK(p.offset + p.numel <= n, kWhat, ": '", key, "' covers elements [", p.offset, ", ", p.offset + p.numel,
               ") of flat ", p.flat, ", which has ", n);
    if (i > 0 && out.params[i - 1].flat == p.flat)
      WEFT_CHECK(out.params[i - 1].offset + out.params[i - 1].numel <= p.offset, kWhat, ": '", key, "' overlaps '",
                 kParam, out.params[i - 1].name, "' in flat ", p.flat);
  }
  return out;
}

}  // namespace weft::parallel
