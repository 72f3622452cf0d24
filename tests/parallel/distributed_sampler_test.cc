// DistributedSampler's padding and drop_last against PyTorch's rules, computed
// here from the epoch's list as a one-replica sampler (and the documented
// shuffle, io::seeded_permutation) gives it: without drop_last the tail repeats
// the first entries of that epoch's shuffled list (list += list[:padding], the
// list repeated when the padding is longer than it); with drop_last each
// replica gets floor(n / world) indices, the list's tail cut. Replicas'
// indices are disjoint and cover every item once when world divides n;
// set_epoch changes the order.
#include <algorithm>
#include <vector>

#include <gtest/gtest.h>

#include "io/dataloader.h"
#include "io/sampler.h"
#include "parallel/data/sampler.h"
#include "tests/testing.h"

namespace weft::parallel {
namespace {

std::vector<int64_t> range_vec(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

// PyTorch's DistributedSampler.__iter__ on `list` (this epoch's order), for `rank`.
std::vector<int64_t> reference(std::vector<int64_t> list, int world, int rank, bool drop_last) {
  const int64_t n = static_cast<int64_t>(list.size());
  const int64_t per = drop_last ? n / world : (n + world - 1) / world, total = per * world;
  if (total > n) {
    std::vector<int64_t> pad;
    while (static_cast<int64_t>(pad.size()) < total - n) pad.insert(pad.end(), list.begin(), list.end());
    list.insert(list.end(), pad.begin(), pad.begin() + (total - n));
  }
  list.resize(total);
  std::vector<int64_t> mine;
  for (int64_t i = rank; i < total; i += world) mine.push_back(list[i]);
  return mine;
}

TEST(DistributedSamplerPadding, PaddedTailRepeatsTheEpochsFirstShuffledIndices) {
  const int64_t n = 10;
  const int world = 4;  // 12 entries: 2 padded
  for (int64_t epoch : {0, 3}) {
    // the epoch's shuffled list, as a single replica sees it
    DistributedSampler one(n, 1, 0, {.shuffle = true, .seed = 9});
    const std::vector<int64_t> list = one.indices(epoch);
    ASSERT_EQ(list, io::seeded_permutation(n, io::shuffle_seed(9, static_cast<uint64_t>(epoch))));
    ASSERT_NE(list, range_vec(n));  // shuffled, so "the first indices" are not 0 and 1
    std::vector<int64_t> interleaved(12);
    for (int r = 0; r < world; ++r) {
      DistributedSampler s(n, world, r, {.shuffle = true, .seed = 9});
      EXPECT_EQ(s.num_samples(), 3);
      EXPECT_EQ(s.total_size(), 12);
      std::vector<int64_t> got = s.indices(epoch);
      EXPECT_EQ(got, reference(list, world, r, false)) << "rank " << r << " epoch " << epoch;
      for (size_t k = 0; k < got.size(); ++k) interleaved[k * world + r] = got[k];
    }
    // rank-strided entries put back in order are the list followed by its first two entries
    std::vector<int64_t> want = list;
    want.push_back(list[0]);
    want.push_back(list[1]);
    EXPECT_EQ(interleaved, want) << "epoch " << epoch;
  }
}

TEST(DistributedSamplerPadding, PaddingLongerThanTheListRepeatsItWhole) {
  // 3 items on 8 replicas: 8 entries = list, list, list[:2]
  DistributedSampler one(3, 1, 0, {.shuffle = true, .seed = 2});
  const std::vector<int64_t> list = one.indices(1);
  std::vector<int64_t> interleaved;
  for (int r = 0; r < 8; ++r) {
    DistributedSampler s(3, 8, r, {.shuffle = true, .seed = 2});
    std::vector<int64_t> got = s.indices(1);
    ASSERT_EQ(got.size(), 1u);
    interleaved.push_back(got[0]);
  }
  EXPECT_EQ(interleaved,
            (std::vector<int64_t>{list[0], list[1], list[2], list[0], list[1], list[2], list[0], list[1]}));
}

TEST(DistributedSamplerPadding, UnshuffledPadsWithTheFirstItems) {
  // 0..6 on 4 replicas padded by 0: rank 3 gets 3 and 0
  DistributedSampler s(7, 4, 3, {.shuffle = false});
  EXPECT_EQ(s.indices(0), (std::vector<int64_t>{3, 0}));
  DistributedSampler d(7, 4, 3, {.shuffle = false, .drop_last = true});
  EXPECT_EQ(d.indices(0), (std::vector<int64_t>{3}));
}

TEST(DistributedSamplerDropLast, FloorPerReplicaAndTheTailCut) {
  for (auto [n, world] : {std::pair<int64_t, int>{10, 4}, {23, 3}, {9, 9}, {50, 4}, {12, 4}}) {
    DistributedSampler one(n, 1, 0, {.shuffle = true, .seed = 5});
    const std::vector<int64_t> list = one.indices(2);
    std::vector<int64_t> uni;
    for (int r = 0; r < world; ++r) {
      DistributedSampler s(n, world, r, {.shuffle = true, .seed = 5, .drop_last = true});
      EXPECT_EQ(s.num_samples(), n / world) << n << " on " << world;
      EXPECT_EQ(s.size(), n / world);
      EXPECT_EQ(s.total_size(), n / world * world);
      std::vector<int64_t> got = s.indices(2);
      EXPECT_EQ(static_cast<int64_t>(got.size()), n / world);
      EXPECT_EQ(got, reference(list, world, r, true)) << n << " on " << world << " rank " << r;
      uni.insert(uni.end(), got.begin(), got.end());
    }
    // the union is the first floor(n / world) * world entries of the list, no repeats
    std::vector<int64_t> want(list.begin(), list.begin() + n / world * world);
    std::sort(uni.begin(), uni.end());
    std::sort(want.begin(), want.end());
    EXPECT_EQ(uni, want) << n << " on " << world;
    EXPECT_EQ(std::adjacent_find(uni.begin(), uni.end()), uni.end());
  }
  // the default keeps every item (padding), as PyTorch
  DistributedSampler keep(10, 4, 0, {.shuffle = true, .seed = 5});
  EXPECT_EQ(keep.num_samples(), 3);
  EXPECT_FALSE(DistributedSamplerOptions{}.drop_last);
  EXPECT_WEFT_ERROR(DistributedSampler(3, 4, 0, {.drop_last = true}),
                    "drop_last with 3 items on 4 replicas leaves every replica without an index");
}

TEST(DistributedSamplerPadding, EveryIndexOnceWhenWorldDividesN) {
  for (bool drop_last : {false, true}) {
    std::vector<int64_t> uni;
    for (int r = 0; r < 4; ++r) {
      DistributedSampler s(24, 4, r, {.shuffle = true, .seed = 1, .drop_last = drop_last});
      EXPECT_EQ(s.num_samples(), 6);
      std::vector<int64_t> got = s.indices(4);
      uni.insert(uni.end(), got.begin(), got.end());
    }
    std::sort(uni.begin(), uni.end());
    EXPECT_EQ(uni, range_vec(24)) << "drop_last " << drop_last;
  }
}

TEST(DistributedSamplerPadding, SetEpochChangesTheOrder) {
  DistributedSampler s(40, 2, 1, {.shuffle = true, .seed = 3, .drop_last = true});
  s.set_epoch(0);
  const std::vector<int64_t> e0 = s.indices();
  s.set_epoch(1);
  const std::vector<int64_t> e1 = s.indices();
  EXPECT_NE(e0, e1);
  EXPECT_EQ(e1, s.indices(1));
  s.set_epoch(0);
  EXPECT_EQ(s.indices(), e0);  // a pure function of (seed, epoch)
  // with one replica the order is the single-process shuffled loader's
  DistributedSampler one(40, 1, 0, {.shuffle = true, .seed = 3});
  EXPECT_EQ(one.indices(1), io::RandomSampler(40, 3).indices(1));
}

}  // namespace
}  // namespace weft::parallel
