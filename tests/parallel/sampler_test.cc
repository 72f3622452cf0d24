// DistributedSampler: fastai DistributedDL's cases and the shard dataset.
#include "parallel/sampler.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "io/dataloader.h"
#include "tests/testing.h"

namespace weft::parallel {
namespace {

std::vector<int64_t> range_vec(int64_t lo, int64_t hi) {
  std::vector<int64_t> v;
  for (int64_t i = lo; i < hi; ++i) v.push_back(i);
  return v;
}

TEST(DistributedSampler, UnshuffledIsRankStridedWithWrappedPadding) {
  // fastai: rank i of 4 over 50 items gets arange(i, 52, 4) % 50.
  for (int r = 0; r < 4; ++r) {
    DistributedSampler s(50, 4, r, {false, 0});
    EXPECT_EQ(s.total_size(), 52);
    EXPECT_EQ(s.num_samples(), 13);
    std::vector<int64_t> want;
    for (int64_t i = r; i < 52; i += 4) want.push_back(i % 50);
    EXPECT_EQ(s.indices(), want) << "rank " << r;
  }
}

TEST(DistributedSampler, ShuffledCoversEveryItemOnceApartFromPadding) {
  std::vector<int64_t> all;
  for (int r = 0; r < 4; ++r) {
    DistributedSampler s(50, 4, r, {true, 7});
    s.set_epoch(0);
    auto idx = s.indices();
    EXPECT_EQ(idx.size(), 13u);
    all.insert(all.end(), idx.begin(), idx.end());
  }
  std::sort(all.begin(), all.end());
  std::vector<int64_t> want = {0, 0, 1, 1};
  auto rest = range_vec(2, 50);
  want.insert(want.end(), rest.begin(), rest.end());
  EXPECT_EQ(all, want);
}

TEST(DistributedSampler, SameShuffleOnAllRanksAndEpochsDiffer) {
  // Two independent samplers for the same rank agree (the shuffle depends only on
  // (seed, epoch)); the ranks' shards are disjoint slices of one permutation.
  DistributedSampler a(100, 2, 0, {true, 3}), b(100, 2, 0, {true, 3}), c(100, 2, 1, {true, 3});
  a.set_epoch(5);
  b.set_epoch(5);
  c.set_epoch(5);
  EXPECT_EQ(a.indices(), b.indices());
  std::vector<int64_t> both = a.indices();
  auto ci = c.indices();
  both.insert(both.end(), ci.begin(), ci.end());
  std::sort(both.begin(), both.end());
  EXPECT_EQ(both, range_vec(0, 100));
  auto e5 = a.indices();
  a.set_epoch(6);
  EXPECT_NE(a.indices(), e5);
  EXPECT_NE(e5, range_vec(0, 50));  // actually shuffled
  DistributedSampler other_seed(100, 2, 0, {true, 4});
  other_seed.set_epoch(5);
  EXPECT_NE(other_seed.indices(), e5);
}

TEST(DistributedSampler, ShardDatasetFeedsDataLoader) {
  Tensor data = arange(10, {DType::Float32}).view({10, 1});  // (10, 1)
  Tensor target = arange(10, {DType::Int64});
  auto ds = std::make_shared<io::TensorDataset>(data, target);
  std::vector<int64_t> seen;
  for (int r = 0; r < 3; ++r) {
    DistributedSampler s(10, 3, r, {true, 1});
    s.set_epoch(2);
    io::DataLoader loader(s.shard(ds), {2, false, 0, false, 0, 2});
    std::vector<int64_t> got;
    for (auto& b : loader)
      for (int64_t i = 0; i < b.target.size(0); ++i) got.push_back(b.target[i].item<int64_t>());
    EXPECT_EQ(got, s.indices());
    seen.insert(seen.end(), got.begin(), got.end());
  }
  EXPECT_EQ(seen.size(), 12u);
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(std::unique(seen.begin(), seen.end()) - seen.begin(), 10);
}

TEST(DistributedSampler, BadArgumentsAreErrors) {
  EXPECT_WEFT_ERROR(DistributedSampler(0, 2, 0), "dataset is empty");
  EXPECT_WEFT_ERROR(DistributedSampler(10, 0, 0), "world_size must be at least 1");
  EXPECT_WEFT_ERROR(DistributedSampler(10, 2, 2), "rank 2 is outside [0, 2)");
  Tensor data = zeros({5, 1});
  auto ds = std::make_shared<io::TensorDataset>(data);
  DistributedSampler s(10, 2, 0);
  EXPECT_WEFT_ERROR(s.shard(ds), "built for 10 items but the dataset has 5");
  EXPECT_WEFT_ERROR(ShardDataset(ds, {7}), "index 7 is outside [0, 5)");
}

}  // namespace
}  // namespace weft::parallel
