// ZeroLayout: the typed layout of one rank's ZeRO shard (Note [zero flat
// shards] in zero.h): the data-parallel size and rank, each flat buffer's
// element count, padded count and dtype, and where each parameter lies in
// its flat.
//
// Contract:
// - to_state(sd) writes the layout into a local state dict under the keys
//   of Note [zero state dicts] ("layout.dp", "layout.rank" int64 0-dim;
//   "layout.shard<f>" int64 (3,): numel, padded, dtype code;
//   "layout.param.<name>" int64 (3,): flat, offset, numel), and
//   from_state(sd) reads them back. These two functions are the only
//   places that know the key encoding; the keys are unchanged from the
//   untyped dicts, so every dict written before reads the same.
// - from_state checks what it reads and names the key in every error:
//   a missing "layout.dp" or "layout.rank", a value of the wrong element
//   count, dp < 1, a rank outside [0, dp), flats not numbered 0..F-1, a
//   padded count that is not a multiple of dp or is below numel, an unknown
//   dtype code, a parameter in a flat that does not exist or outside its
//   flat's elements, and any other "layout.*" key. Keys that do not start
//   with "layout." are ignored.
// - params are ordered by (flat, offset), whatever the dict's key order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "optim/optimizer.h"

namespace weft::parallel {

// One flat buffer: N elements of its parameters, padded to P = ceil(N / dp) * dp.
struct FlatShard {
  int64_t numel = 0;   // N
  int64_t padded = 0;  // P
  DType dtype = DType::Float32;
  bool operator==(const FlatShard&) const = default;
};

// Where a parameter's flattened elements lie: [offset, offset + numel) of flat `flat`.
struct ZeroParamSpan {
  std::string name;
  int flat = 0;
  int64_t offset = 0;
  int64_t numel = 0;
  bool operator==(const ZeroParamSpan&) const = default;
};

struct ZeroLayout {
  int dp = 1;
  int rank = 0;
  std::vector<FlatShard> shards;      // flat f is shards[f], named "shard<f>"
  std::vector<ZeroParamSpan> params;  // by (flat, offset)

  // S = P / dp: the elements each rank owns of flat f.
  int64_t shard_numel(int f) const { return shards.at(f).padded / dp; }
  // This rank's elements [owned_begin(f), owned_begin(f) + shard_numel(f)) of flat f.
  int64_t owned_begin(int f) const { return rank * shard_numel(f); }
  // "shard<f>": the inner optimizer's name for flat f's shard tensor.
  static std::string shard_name(int f) { return "shard" + std::to_string(f); }

  void to_state(optim::OptimizerStateDict& sd) const;
  static ZeroLayout from_state(const optim::OptimizerStateDict& sd);

  bool operator==(const ZeroLayout&) const = default;
};

}  // namespace weft::parallel
