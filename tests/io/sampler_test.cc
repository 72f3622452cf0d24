// io::Sampler and DataLoader's sampler seam: the built-in samplers are the
// loader's own orders, a custom sampler's indices are what the loader visits,
// set_epoch reaches the sampler, transforms are seeded by dataset index, and
// misuse is reported.
#include "io/sampler.h"

#include <algorithm>
#include <map>
#include <memory>

#include <gtest/gtest.h>

#include "core/ops.h"
#include "io/dataloader.h"
#include "tests/testing.h"

namespace weft::io {
namespace {

using weft::testing::values;

// Example i: data = [i] (float32), target = i (int64).
std::shared_ptr<TensorDataset> make_dataset(int64_t n) {
  return std::make_shared<TensorDataset>(arange(0, n, 1, {DType::Float32}).view({n, 1}),
                                         arange(0, n, 1, {DType::Int64}));
}

// The targets (dataset indices) of one epoch, in visiting order.
std::vector<int64_t> visit(DataLoader& dl) {
  std::vector<int64_t> out;
  for (Batch& b : dl)
    for (double v : values(b.target)) out.push_back(static_cast<int64_t>(v));
  return out;
}

// Every `step`-th index of 0..n-1 starting at `offset`, rotated by the epoch.
class StridedSampler : public Sampler {
 public:
  StridedSampler(int64_t n, int64_t offset, int64_t step) : n_(n), offset_(offset), step_(step) {}
  std::vector<int64_t> indices(int64_t epoch) const override {
    std::vector<int64_t> p;
    for (int64_t i = offset_; i < n_; i += step_) p.push_back(i);
    std::rotate(p.begin(), p.begin() + epoch % static_cast<int64_t>(p.size()), p.end());
    return p;
  }
  int64_t size() const override { return (n_ - offset_ + step_ - 1) / step_; }
  int64_t dataset_size() const override { return n_; }

 private:
  int64_t n_, offset_, step_;
};

// A sampler that misbehaves on purpose.
class BrokenSampler : public Sampler {
 public:
  BrokenSampler(int64_t n, std::vector<int64_t> out, int64_t promised) : n_(n), out_(out), promised_(promised) {}
  std::vector<int64_t> indices(int64_t) const override { return out_; }
  int64_t size() const override { return promised_; }
  int64_t dataset_size() const override { return n_; }

 private:
  int64_t n_;
  std::vector<int64_t> out_;
  int64_t promised_;
};

// Adds a uniform draw from the example's generator to its data: the draw shows
// which seed the loader gave the example.
ExampleTransform noise() {
  return [](const Example& e, Generator& g) {
    PhiloxReader r(g.reserve(1));
    Tensor d = e.data.clone();
    d.data_ptr<float>()[0] += uniform_float(r.value(0));
    return Example{d, e.target};
  };
}

// index -> transformed value over one epoch.
std::map<int64_t, double> augmented(DataLoader& dl) {
  std::map<int64_t, double> out;
  for (Batch& b : dl) {
    auto d = values(b.data), t = values(b.target);
    for (size_t k = 0; k < t.size(); ++k) out[static_cast<int64_t>(t[k])] = d[k];
  }
  return out;
}

TEST(Sampler, BuiltInSamplersAreTheLoadersOwnOrders) {
  SequentialSampler seq(7);
  EXPECT_EQ(seq.indices(3), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(seq.size(), 7);
  RandomSampler rnd(50, 9);
  DataLoader shuffled(make_dataset(50), {.batch_size = 8, .shuffle = true, .seed = 9});
  for (int64_t e : {0, 1, 4}) {
    EXPECT_EQ(rnd.indices(e), seeded_permutation(50, shuffle_seed(9, e)));
    EXPECT_EQ(shuffled.indices(e), rnd.indices(e));
    shuffled.set_epoch(e);
    EXPECT_EQ(visit(shuffled), rnd.indices(e));
  }
  EXPECT_NE(rnd.indices(0), rnd.indices(1));
  DataLoader plain(make_dataset(7), {.batch_size = 3});
  EXPECT_EQ(visit(plain), seq.indices(0));
  EXPECT_EQ(dynamic_cast<const SequentialSampler*>(&plain.sampler()) != nullptr, true);
  EXPECT_EQ(dynamic_cast<const RandomSampler*>(&shuffled.sampler()) != nullptr, true);
}

TEST(Sampler, LoaderVisitsTheSamplersIndicesForItsEpoch) {
  auto sampler = std::make_shared<StridedSampler>(20, 1, 3);  // 1, 4, ..., 19: 7 indices
  for (int workers : {0, 2}) {
    DataLoader dl(make_dataset(20), {.batch_size = 3, .num_workers = workers}, sampler);
    EXPECT_EQ(dl.num_batches(), 3);
    for (int64_t e : {0, 2, 5}) {
      dl.set_epoch(e);
      EXPECT_EQ(dl.indices(e), sampler->indices(e));
      EXPECT_EQ(visit(dl), sampler->indices(e)) << "epoch " << e << ", " << workers << " workers";
    }
  }
  DataLoader dropping(make_dataset(20), {.batch_size = 3, .drop_last = true}, sampler);
  EXPECT_EQ(dropping.num_batches(), 2);
  auto want = sampler->indices(0);
  EXPECT_EQ(visit(dropping), std::vector<int64_t>(want.begin(), want.begin() + 6));
}

TEST(Sampler, TransformsAreSeededByDatasetIndexAndEpoch) {
  auto ds = make_dataset(30);
  DataLoader whole(ds, {.batch_size = 4, .shuffle = true, .seed = 5}, noise());
  DataLoader part(ds, {.batch_size = 4, .seed = 5}, std::make_shared<StridedSampler>(30, 2, 4), noise());
  DataLoader other_seed(ds, {.batch_size = 4, .seed = 6}, std::make_shared<StridedSampler>(30, 2, 4), noise());
  for (int64_t e : {0, 3}) {
    whole.set_epoch(e);
    part.set_epoch(e);
    other_seed.set_epoch(e);
    auto w = augmented(whole), p = augmented(part), o = augmented(other_seed);
    ASSERT_EQ(p.size(), 7u);
    for (auto& [i, v] : p) {
      EXPECT_EQ(v, w.at(i)) << "index " << i << " epoch " << e;
      EXPECT_NE(v, o.at(i)) << "index " << i << ": the loader seed must matter";
      EXPECT_NE(v, static_cast<double>(i)) << "the transform ran";
    }
  }
  part.set_epoch(0);
  auto e0 = augmented(part);
  part.set_epoch(1);
  auto e1 = augmented(part);
  for (auto& [i, v] : e0) EXPECT_NE(v, e1.at(i)) << "index " << i << ": epochs must differ";
}

TEST(Sampler, MisuseIsReported) {
  auto ds = make_dataset(10);
  auto sampler = std::make_shared<StridedSampler>(10, 0, 2);
  EXPECT_WEFT_ERROR(DataLoader(ds, {.batch_size = 2, .shuffle = true}, sampler),
                    "options.shuffle is true but a sampler was given");
  EXPECT_WEFT_ERROR(DataLoader(ds, {.batch_size = 2}, std::make_shared<StridedSampler>(12, 0, 2)),
                    "the sampler draws from 12 items but the dataset has 10");
  DataLoader out_of_range(ds, {.batch_size = 2}, std::make_shared<BrokenSampler>(10, std::vector<int64_t>{1, 10}, 2));
  EXPECT_WEFT_ERROR(out_of_range.next(), "sampler index 10 (epoch 0) is outside the dataset's [0, 10)");
  DataLoader short_list(ds, {.batch_size = 2}, std::make_shared<BrokenSampler>(10, std::vector<int64_t>{1}, 2));
  EXPECT_WEFT_ERROR(short_list.next(), "the sampler promised 2 indices per epoch but gave 1");
  EXPECT_WEFT_ERROR(SequentialSampler(-1), "dataset size must be non-negative");
  EXPECT_WEFT_ERROR(RandomSampler(5, 0).indices(-1), "epoch must be >= 0");
}

}  // namespace
}  // namespace weft::io
