// DistributedSampler: rank-strided shares with padding, the sampler inside a
// DataLoader (order, set_epoch, per-epoch augmentation equal to the
// single-process loader's) and the shard dataset. GlobalBatchSampler: with one
// replica it is the single-process shuffled loader (batches, augmentation,
// drop_last); 1, 2 and 4 replicas' loaders deal the same global batches
// (full ones by contiguous equal slices, the partial last one as
// tensor_split); start_batch resumes mid-epoch; errors name the values.
#include "parallel/data/sampler.h"

#include <algorithm>
#include <map>

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
  // the padding repeats the first two entries of epoch 0's shuffled list
  const std::vector<int64_t> order = io::seeded_permutation(50, io::shuffle_seed(7, 0));
  std::vector<int64_t> want = range_vec(0, 50);
  want.push_back(order[0]);
  want.push_back(order[1]);
  std::sort(want.begin(), want.end());
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

// Example i: data = [i] (float32), target = i (int64).
std::shared_ptr<io::TensorDataset> make_dataset(int64_t n) {
  return std::make_shared<io::TensorDataset>(arange(n, {DType::Float32}).view({n, 1}), arange(n, {DType::Int64}));
}

// A random augmentation: adds a draw from the example's generator to its data.
io::Example add_noise(const io::Example& e, Generator& g) {
  PhiloxReader r(g.reserve(1));
  Tensor d = e.data.clone();
  d.data_ptr<float>()[0] += uniform_float(r.value(0));
  return io::Example{d, e.target};
}

// (dataset index, transformed value) of one epoch, in visiting order.
std::vector<std::pair<int64_t, double>> run_epoch(io::DataLoader& loader) {
  std::vector<std::pair<int64_t, double>> out;
  for (auto& b : loader)
    for (int64_t k = 0; k < b.target.size(0); ++k)
      out.emplace_back(b.target[k].item<int64_t>(), static_cast<double>(b.data[k][0].item<float>()));
  return out;
}

std::vector<int64_t> order_of(const std::vector<std::pair<int64_t, double>>& epoch) {
  std::vector<int64_t> out;
  for (auto& [i, v] : epoch) out.push_back(i);
  return out;
}

TEST(DistributedSampler, IsTheDataLoadersSamplerAndFollowsSetEpoch) {
  auto ds = make_dataset(23);
  for (int r = 0; r < 3; ++r) {
    auto sampler = std::make_shared<DistributedSampler>(23, 3, r, DistributedSamplerOptions{true, 4});
    for (int workers : {0, 2}) {
      io::DataLoader loader(ds, {.batch_size = 3, .seed = 4, .num_workers = workers}, sampler);
      EXPECT_EQ(loader.num_batches(), 3);  // 8 indices per rank
      std::vector<int64_t> previous;
      for (int64_t e : {0, 1, 7}) {
        loader.set_epoch(e);
        auto got = order_of(run_epoch(loader));
        EXPECT_EQ(got, sampler->indices(e)) << "rank " << r << " epoch " << e;
        EXPECT_EQ(loader.indices(e), sampler->indices(e));
        EXPECT_NE(got, previous) << "set_epoch(" << e << ") must change the order";
        previous = got;
      }
      // The loader's epoch, not the sampler's own set_epoch, decides.
      sampler->set_epoch(5);
      loader.set_epoch(1);
      EXPECT_EQ(order_of(run_epoch(loader)), sampler->indices(1));
      sampler->set_epoch(0);
    }
  }
}

TEST(DistributedSampler, AugmentationDiffersPerEpochAndMatchesTheSingleProcessLoader) {
  const int64_t n = 40;
  auto ds = make_dataset(n);
  io::DataLoader single(ds, {.batch_size = 8, .shuffle = true, .seed = 11}, add_noise);
  std::map<int64_t, std::map<int64_t, double>> by_epoch;  // epoch -> index -> value
  for (int64_t e : {0, 1, 2}) {
    single.set_epoch(e);
    for (auto& [i, v] : run_epoch(single)) by_epoch[e][i] = v;
  }
  for (int world : {2, 3}) {
    for (int r = 0; r < world; ++r) {
      auto sampler = std::make_shared<DistributedSampler>(n, world, r, DistributedSamplerOptions{true, 11});
      io::DataLoader loader(ds, {.batch_size = 5, .seed = 11, .num_workers = 1}, sampler, add_noise);
      std::map<int64_t, double> first;
      for (int64_t e : {0, 1, 2}) {
        loader.set_epoch(e);
        auto got = run_epoch(loader);
        ASSERT_EQ(static_cast<int64_t>(got.size()), sampler->num_samples());
        for (auto& [i, v] : got) {
          EXPECT_EQ(v, by_epoch[e].at(i)) << "world " << world << " rank " << r << " epoch " << e << " index " << i;
          EXPECT_GE(v, static_cast<double>(i));
          EXPECT_LT(v, static_cast<double>(i) + 1.0);
          if (e == 0) first[i] = v;
          else if (first.count(i)) {
            EXPECT_NE(v, first[i]) << "index " << i << ": epoch " << e << " repeats epoch 0";
          }
        }
      }
    }
  }
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
  EXPECT_WEFT_ERROR(io::DataLoader(ds, {.batch_size = 2}, std::make_shared<DistributedSampler>(10, 2, 0)),
                    "the sampler draws from 10 items but the dataset has 5");
  EXPECT_WEFT_ERROR(s.set_epoch(-1), "epoch must be >= 0");
}

// ---- GlobalBatchSampler ----

// Each batch of one epoch as (dataset indices, transformed values).
struct EpochBatches {
  std::vector<std::vector<int64_t>> index;
  std::vector<std::vector<double>> value;
};

EpochBatches batches_of(io::DataLoader& loader, int64_t epoch) {
  loader.set_epoch(epoch);
  EpochBatches out;
  for (auto& b : loader) {
    out.index.emplace_back();
    out.value.emplace_back();
    for (int64_t k = 0; k < b.target.size(0); ++k) {
      out.index.back().push_back(b.target[k].item<int64_t>());
      out.value.back().push_back(static_cast<double>(b.data[k][0].item<float>()));
    }
  }
  return out;
}

TEST(GlobalBatchSampler, OneReplicaIsTheSingleProcessLoader) {
  // 23 items in batches of 5: 4 full batches and one of 3.
  auto ds = make_dataset(23);
  for (bool drop_last : {false, true}) {
    for (bool shuffle : {true, false}) {
      io::DataLoader single(ds, {.batch_size = 5, .shuffle = shuffle, .seed = 9, .drop_last = drop_last}, add_noise);
      auto sampler =
          std::make_shared<GlobalBatchSampler>(23, 5, 1, 0, GlobalBatchSamplerOptions{shuffle, 9, drop_last});
      EXPECT_EQ(sampler->num_batches(), drop_last ? 4 : 5);
      EXPECT_EQ(sampler->local_batch(), 5);
      io::DataLoader mine(ds, {.batch_size = sampler->local_batch(), .seed = 9, .num_workers = 1}, sampler, add_noise);
      EXPECT_EQ(mine.num_batches(), single.num_batches());
      for (int64_t e : {0, 1, 4}) {
        EpochBatches a = batches_of(single, e), b = batches_of(mine, e);
        EXPECT_EQ(b.index, a.index) << "epoch " << e << " shuffle " << shuffle << " drop_last " << drop_last;
        EXPECT_EQ(b.value, a.value) << "epoch " << e << ": augmentation differs";
        ASSERT_EQ(static_cast<int64_t>(a.index.size()), sampler->num_batches());
        for (int64_t k = 0; k < sampler->num_batches(); ++k) EXPECT_EQ(sampler->global_indices(e, k), a.index[k]);
      }
    }
  }
}

// The loaders of `replicas` replicas over one epoch: [replica] -> batches.
std::vector<EpochBatches> replica_batches(std::shared_ptr<io::TensorDataset> ds, int64_t global_batch, int replicas,
                                          GlobalBatchSamplerOptions o, int64_t epoch) {
  std::vector<EpochBatches> out;
  for (int d = 0; d < replicas; ++d) {
    auto s = std::make_shared<GlobalBatchSampler>(ds->size(), global_batch, replicas, d, o);
    io::DataLoader loader(ds, {.batch_size = s->local_batch(), .seed = o.seed, .num_workers = d % 2}, s, add_noise);
    out.push_back(batches_of(loader, epoch));
    EXPECT_EQ(static_cast<int64_t>(out.back().index.size()), s->num_batches() - o.start_batch) << "replica " << d;
  }
  return out;
}

TEST(GlobalBatchSampler, OneTwoAndFourReplicasDealTheSameGlobalBatches) {
  // 46 items in global batches of 8: 5 full batches and one of 6 rows
  // (shares 6; 3,3; 2,2,1,1).
  const int64_t n = 46, B = 8;
  auto ds = make_dataset(n);
  io::DataLoader single(ds, {.batch_size = B, .shuffle = true, .seed = 3}, add_noise);
  const std::map<int, std::vector<int64_t>> last_shares = {{1, {6}}, {2, {3, 3}}, {4, {2, 2, 1, 1}}};
  for (int64_t e : {0, 2}) {
    EpochBatches want = batches_of(single, e);
    ASSERT_EQ(want.index.size(), 6u);
    for (int R : {1, 2, 4}) {
      std::vector<EpochBatches> got = replica_batches(ds, B, R, {true, 3, false}, e);
      GlobalBatchSampler s(n, B, R, 0, {true, 3, false});
      ASSERT_EQ(s.num_batches(), 6);
      EXPECT_EQ(s.shares(5), last_shares.at(R));
      for (int64_t k = 0; k < 6; ++k) {
        std::vector<int64_t> joined;
        std::vector<double> joined_values;
        for (int d = 0; d < R; ++d) {
          const auto& idx = got[d].index[k];
          // Full batches: replica d holds rows [d*B/R, (d+1)*B/R).
          if (k < 5) {
            EXPECT_EQ(idx,
                      std::vector<int64_t>(want.index[k].begin() + d * B / R, want.index[k].begin() + (d + 1) * B / R))
                << "R " << R << " replica " << d << " batch " << k;
          }
          EXPECT_EQ(static_cast<int64_t>(idx.size()), s.shares(k)[d]);
          GlobalBatchSampler sd(n, B, R, d, {true, 3, false});
          EXPECT_EQ(sd.local_indices(e, k), idx);
          joined.insert(joined.end(), idx.begin(), idx.end());
          joined_values.insert(joined_values.end(), got[d].value[k].begin(), got[d].value[k].end());
        }
        EXPECT_EQ(joined, want.index[k]) << "epoch " << e << " R " << R << " global batch " << k;
        EXPECT_EQ(joined_values, want.value[k]) << "epoch " << e << " R " << R << " global batch " << k;
      }
    }
  }
}

TEST(GlobalBatchSampler, PartialLastBatch) {
  // 41 = 5 x 8 + 1: one row left. One replica keeps it; two or four would
  // leave a replica without a row, so it is dropped; drop_last always drops.
  EXPECT_EQ(GlobalBatchSampler(41, 8, 1, 0).num_batches(), 6);
  EXPECT_EQ(GlobalBatchSampler(41, 8, 1, 0).batch_rows(5), 1);
  EXPECT_EQ(GlobalBatchSampler(41, 8, 2, 1).num_batches(), 5);
  EXPECT_EQ(GlobalBatchSampler(41, 8, 4, 3).num_batches(), 5);
  EXPECT_EQ(GlobalBatchSampler(41, 8, 2, 1).size(), 20);
  EXPECT_EQ(GlobalBatchSampler(42, 8, 2, 1).num_batches(), 6);  // 2 rows: one each
  EXPECT_EQ(GlobalBatchSampler(42, 8, 2, 1).size(), 21);
  EXPECT_EQ(GlobalBatchSampler(42, 8, 2, 1, {.drop_last = true}).num_batches(), 5);
  EXPECT_EQ(GlobalBatchSampler(40, 8, 4, 0).num_batches(), 5);  // no partial batch
  // 45 = 5 x 8 + 5 over 4 replicas: 2, 1, 1, 1 (tensor_split); sizes add up.
  int64_t total = 0;
  for (int d = 0; d < 4; ++d) {
    GlobalBatchSampler s(45, 8, 4, d);
    EXPECT_EQ(s.size(), 10 + (d == 0 ? 2 : 1));
    EXPECT_EQ(static_cast<int64_t>(s.indices(1).size()), s.size());
    total += s.size();
  }
  EXPECT_EQ(total, 45);
  EXPECT_EQ(GlobalBatchSampler(45, 8, 4, 0).shares(5), (std::vector<int64_t>{2, 1, 1, 1}));
  EXPECT_EQ(GlobalBatchSampler(45, 8, 4, 0).shares(0), (std::vector<int64_t>{2, 2, 2, 2}));
}

TEST(GlobalBatchSampler, StartBatchResumesMidEpoch) {
  const int64_t n = 46, B = 8;
  auto ds = make_dataset(n);
  for (int R : {1, 2, 4}) {
    std::vector<EpochBatches> whole = replica_batches(ds, B, R, {true, 5, false, 0}, 3);
    for (int64_t K : {1, 4, 6}) {
      std::vector<EpochBatches> rest = replica_batches(ds, B, R, {true, 5, false, K}, 3);
      for (int d = 0; d < R; ++d) {
        EXPECT_EQ(rest[d].index, std::vector<std::vector<int64_t>>(whole[d].index.begin() + K, whole[d].index.end()))
            << "R " << R << " replica " << d << " start_batch " << K;
        EXPECT_EQ(rest[d].value, std::vector<std::vector<double>>(whole[d].value.begin() + K, whole[d].value.end()));
      }
    }
  }
  EXPECT_EQ(GlobalBatchSampler(n, B, 2, 0, {.start_batch = 6}).size(), 0);
  EXPECT_EQ(GlobalBatchSampler(n, B, 2, 0, {.start_batch = 5}).size(), 3);
}

TEST(GlobalBatchSampler, BadArgumentsAreErrors) {
  EXPECT_WEFT_ERROR(GlobalBatchSampler(0, 8, 1, 0), "GlobalBatchSampler: dataset is empty");
  EXPECT_WEFT_ERROR(GlobalBatchSampler(10, 0, 1, 0), "the global batch must be at least 1, got 0");
  EXPECT_WEFT_ERROR(GlobalBatchSampler(10, 4, 0, 0), "replicas must be at least 1, got 0");
  EXPECT_WEFT_ERROR(GlobalBatchSampler(10, 4, 2, 2), "replica 2 is outside [0, 2)");
  EXPECT_WEFT_ERROR(GlobalBatchSampler(10, 4, 2, -1), "replica -1 is outside [0, 2)");
  EXPECT_WEFT_ERROR(GlobalBatchSampler(100, 10, 4, 0),
                    "the global batch 10 does not divide among 4 replicas (remainder 2); make it a multiple of 4");
  EXPECT_WEFT_ERROR(GlobalBatchSampler(46, 8, 2, 0, {.start_batch = 7}),
                    "start_batch 7 is outside [0, 6] (6 global batches of 8 in an epoch of 46 items)");
  EXPECT_WEFT_ERROR(GlobalBatchSampler(46, 8, 2, 0, {.start_batch = -1}), "start_batch -1 is outside [0, 6]");
  GlobalBatchSampler s(46, 8, 2, 0);
  EXPECT_WEFT_ERROR(s.shares(6), "GlobalBatchSampler::batch_rows: global batch 6 is outside [0, 6)");
  EXPECT_WEFT_ERROR(s.global_indices(0, -1), "GlobalBatchSampler::global_indices: global batch -1 is outside [0, 6)");
  EXPECT_WEFT_ERROR(s.indices(-1), "GlobalBatchSampler: epoch must be >= 0, got -1");
  auto ds = std::make_shared<io::TensorDataset>(zeros({5, 1}));
  EXPECT_WEFT_ERROR(io::DataLoader(ds, {.batch_size = 4}, std::make_shared<GlobalBatchSampler>(46, 8, 2, 0)),
                    "the sampler draws from 46 items but the dataset has 5");
}

}  // namespace
}  // namespace weft::parallel
