// DataLoader: ordering, seeding, worker-count independence, drop_last, early
// exit and error propagation.
#include "io/dataloader.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "core/ops.h"
#include "core/rng.h"
#include "io/transforms.h"
#include "tests/testing.h"

namespace weft::io {
namespace {

using weft::testing::values;

// Example i: data = [i, 10 * i] (float32), target = i (int64).
std::shared_ptr<TensorDataset> make_dataset(int64_t n) {
  Tensor data = empty({n, 2});
  float* p = data.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) {
    p[2 * i] = static_cast<float>(i);
    p[2 * i + 1] = static_cast<float>(10 * i);
  }
  return std::make_shared<TensorDataset>(data, arange(0, n, 1, {DType::Int64}));
}

// All batches of one epoch as lists of targets (dataset indices).
std::vector<std::vector<int64_t>> run_epoch(DataLoader& dl) {
  std::vector<std::vector<int64_t>> out;
  for (Batch& b : dl) {
    std::vector<int64_t> ids;
    for (double v : values(b.target)) ids.push_back(static_cast<int64_t>(v));
    // data row k must belong to target k
    auto d = values(b.data);
    EXPECT_EQ(d.size(), 2 * ids.size());
    for (size_t k = 0; k < ids.size(); ++k) {
      EXPECT_EQ(d[2 * k], ids[k]);
      EXPECT_EQ(d[2 * k + 1], 10 * ids[k]);
    }
    out.push_back(ids);
  }
  return out;
}

std::vector<int64_t> flat(const std::vector<std::vector<int64_t>>& batches) {
  std::vector<int64_t> f;
  for (auto& b : batches) f.insert(f.end(), b.begin(), b.end());
  return f;
}

TEST(DataLoader, SequentialWithPartialLastBatch) {
  DataLoader dl(make_dataset(10), {.batch_size = 4});
  EXPECT_EQ(dl.num_batches(), 3);
  auto batches = run_epoch(dl);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0], (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(batches[1], (std::vector<int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(batches[2], (std::vector<int64_t>{8, 9}));
}

TEST(DataLoader, DropLast) {
  DataLoader dl(make_dataset(10), {.batch_size = 4, .shuffle = true, .seed = 3, .drop_last = true});
  EXPECT_EQ(dl.num_batches(), 2);
  auto batches = run_epoch(dl);
  ASSERT_EQ(batches.size(), 2u);
  for (auto& b : batches) EXPECT_EQ(b.size(), 4u);
  // The dropped indices are the last two of the epoch's order.
  auto order = dl.indices(0);
  EXPECT_EQ(flat(batches), std::vector<int64_t>(order.begin(), order.begin() + 8));
  DataLoader exact(make_dataset(8), {.batch_size = 4, .drop_last = true});
  EXPECT_EQ(exact.num_batches(), 2);
  DataLoader tiny(make_dataset(3), {.batch_size = 4, .drop_last = true});
  EXPECT_EQ(tiny.num_batches(), 0);
  EXPECT_TRUE(run_epoch(tiny).empty());
}

TEST(DataLoader, ShuffleVisitsEveryIndexOnceAndIsSeeded) {
  const int64_t n = 103;
  DataLoader a(make_dataset(n), {.batch_size = 8, .shuffle = true, .seed = 42});
  DataLoader b(make_dataset(n), {.batch_size = 8, .shuffle = true, .seed = 42});
  DataLoader c(make_dataset(n), {.batch_size = 8, .shuffle = true, .seed = 43});
  auto ea = run_epoch(a), eb = run_epoch(b), ec = run_epoch(c);
  auto fa = flat(ea);
  std::vector<int64_t> sorted = fa;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> expect(n);
  for (int64_t i = 0; i < n; ++i) expect[i] = i;
  EXPECT_EQ(sorted, expect);    // every index exactly once
  EXPECT_NE(fa, expect);        // actually shuffled
  EXPECT_EQ(ea, eb);            // same seed, same batches
  EXPECT_NE(fa, flat(ec));      // another seed, another order
  EXPECT_EQ(ea, run_epoch(a));  // the epoch does not advance on its own
  a.set_epoch(1);
  auto e1 = flat(run_epoch(a));
  EXPECT_NE(e1, fa);  // different epochs differ
  std::sort(e1.begin(), e1.end());
  EXPECT_EQ(e1, expect);
  a.set_epoch(0);
  EXPECT_EQ(run_epoch(a), ea);  // epoch 0 again reproduces it
}

TEST(DataLoader, SameBatchesForAnyWorkerCount) {
  auto ds = make_dataset(57);
  // A random transform makes per-example seeding observable in the data.
  ExampleTransform noise = [](const Example& e, Generator& g) {
    PhiloxReader r(g.reserve(1));
    Tensor d = e.data.clone();
    d.data_ptr<float>()[0] += uniform_float(r.value(0));
    return Example{d, e.target};
  };
  std::vector<std::vector<double>> reference;
  for (int workers : {0, 1, 3}) {
    for (int epoch : {0, 2}) {
      DataLoader dl(ds, {.batch_size = 5, .shuffle = true, .seed = 11, .num_workers = workers, .prefetch_factor = 2},
                    noise);
      dl.set_epoch(epoch);
      std::vector<double> all;
      for (Batch& b : dl) {
        auto d = values(b.data), t = values(b.target);
        all.insert(all.end(), d.begin(), d.end());
        all.insert(all.end(), t.begin(), t.end());
      }
      if (workers == 0) {
        reference.push_back(all);
      } else {
        EXPECT_EQ(all, reference[epoch == 0 ? 0 : 1]) << workers << " workers, epoch " << epoch;
      }
    }
  }
  EXPECT_NE(reference[0], reference[1]);
}

// A transform that calls a tensor-level random op (randn) draws from the
// example's generator: the same batches for any worker count, equal to
// randn under a Generator(example_seed(...)) by hand, and the caller's
// stream does not move.
TEST(DataLoader, RandomOpsInsideATransformDrawFromTheExamplesGenerator) {
  auto ds = make_dataset(23);
  ExampleTransform noise = [](const Example& e, Generator&) { return Example{add(e.data, randn({2})), e.target}; };
  std::vector<std::vector<double>> seen;
  for (int workers : {0, 2}) {
    manual_seed(5);
    const GeneratorState before = get_rng_state();
    DataLoader dl(ds, {.batch_size = 4, .shuffle = true, .seed = 9, .num_workers = workers}, noise);
    dl.set_epoch(1);
    std::vector<double> all;
    for (Batch& b : dl) {
      auto d = values(b.data), t = values(b.target);
      for (size_t k = 0; k < t.size(); ++k) {
        const auto idx = static_cast<uint64_t>(t[k]);
        Generator by_hand(example_seed(9, 1, idx));
        GeneratorScope scope(by_hand);
        const auto want = values(randn({2}));
        EXPECT_EQ(d[2 * k], static_cast<float>(static_cast<float>(idx) + static_cast<float>(want[0])))
            << "index " << idx << ", " << workers << " workers";
        EXPECT_EQ(d[2 * k + 1], static_cast<float>(static_cast<float>(10 * idx) + static_cast<float>(want[1])));
      }
      all.insert(all.end(), d.begin(), d.end());
    }
    EXPECT_TRUE(get_rng_state() == before) << "the transform moved the caller's stream, " << workers << " workers";
    seen.push_back(all);
  }
  EXPECT_EQ(seen[0], seen[1]);
}

TEST(DataLoader, NextApiAndRestart) {
  DataLoader dl(make_dataset(5), {.batch_size = 2, .num_workers = 2});
  std::vector<int64_t> seen;
  while (auto b = dl.next())
    for (double v : values(b->target)) seen.push_back(static_cast<int64_t>(v));
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  auto again = dl.next();  // starts the epoch over
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(values(again->target), (std::vector<double>{0, 1}));
  dl.reset();
  EXPECT_EQ(values(dl.next()->target), (std::vector<double>{0, 1}));
}

// A dataset that counts concurrent and total get() calls and can be slowed down.
class SlowDataset : public Dataset {
 public:
  explicit SlowDataset(int64_t n, int throw_at = -1) : n_(n), throw_at_(throw_at) {}
  int64_t size() const override { return n_; }
  Example get(int64_t i) const override {
    calls++;
    if (i == throw_at_) throw std::runtime_error("bad example " + std::to_string(i));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return Example{full({1}, static_cast<double>(i)), scalar_tensor(i, {DType::Int64})};
  }
  mutable std::atomic<int64_t> calls{0};

 private:
  int64_t n_;
  int throw_at_;
};

TEST(DataLoader, EarlyBreakJoinsWorkersAndBoundsPrefetch) {
  auto ds = std::make_shared<SlowDataset>(1000);
  auto start = std::chrono::steady_clock::now();
  {
    DataLoader dl(ds, {.batch_size = 2, .num_workers = 3, .prefetch_factor = 2});
    int k = 0;
    for (Batch& b : dl) {
      (void)b;
      if (++k == 3) break;  // iterator destroyed here: workers stop
    }
    // After the break, no worker is building anything.
    int64_t after_break = ds->calls.load();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(ds->calls.load(), after_break);
    // At most 3 consumed + 3 * 2 prefetched batches were built.
    EXPECT_LE(after_break, (3 + 3 * 2) * 2);
    // The loader is reusable after the early exit.
    auto first = dl.next();
    EXPECT_EQ(values(first->target), (std::vector<double>{0, 1}));
  }  // destroyed mid-epoch: must join, not hang
  auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(secs, 5.0);
}

TEST(DataLoader, WorkerExceptionPropagatesInOrder) {
  for (int workers : {0, 1, 3}) {
    auto ds = std::make_shared<SlowDataset>(20, /*throw_at=*/9);
    DataLoader dl(ds, {.batch_size = 4, .num_workers = workers});
    std::vector<int64_t> seen;
    bool thrown = false;
    try {
      for (Batch& b : dl)
        for (double v : values(b.target)) seen.push_back(static_cast<int64_t>(v));
    } catch (const std::runtime_error& e) {
      thrown = true;
      EXPECT_STREQ(e.what(), "bad example 9");
    }
    EXPECT_TRUE(thrown) << workers << " workers";
    // Batches before the failing one (indices 0..7) were delivered first.
    EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7})) << workers << " workers";
  }
}

TEST(DataLoader, TransformWithImageTransforms) {
  // 4 images [1, 2, 2]; flip with p = 1 and normalise.
  Tensor x = arange(0, 16, 1, {DType::Float32}).view({4, 1, 2, 2});
  auto ds = std::make_shared<TensorDataset>(x, arange(0, 4, 1, {DType::Int64}));
  DataLoader dl(ds, {.batch_size = 4, .num_workers = 2},
                on_data(Compose{{RandomHorizontalFlip(1.0), Normalize({1.0}, {2.0})}}));
  auto b = dl.next();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->data.sizes(), (Shape{4, 1, 2, 2}));
  auto v = values(b->data);
  EXPECT_DOUBLE_EQ(v[0], (1 - 1) / 2.0);  // image 0 = [[0,1],[2,3]] flipped -> [[1,0],[3,2]]
  EXPECT_DOUBLE_EQ(v[1], (0 - 1) / 2.0);
  EXPECT_DOUBLE_EQ(v[15], (14 - 1) / 2.0);
}

TEST(DataLoader, OptionErrors) {
  auto ds = make_dataset(4);
  EXPECT_WEFT_ERROR(DataLoader(ds, {.batch_size = 0}), "batch_size must be >= 1");
  EXPECT_WEFT_ERROR(DataLoader(ds, {.num_workers = -1}), "num_workers");
  EXPECT_WEFT_ERROR(DataLoader(ds, {.prefetch_factor = 0}), "prefetch_factor");
  EXPECT_WEFT_ERROR(DataLoader(nullptr, {}), "dataset is null");
  DataLoader dl(ds, {});
  EXPECT_WEFT_ERROR(dl.set_epoch(-1), "epoch must be >= 0");
}

TEST(SeededPermutation, IsAPermutationAndRoughlyUniform) {
  // Position of element 0 over many seeds is roughly uniform over 4 slots.
  std::vector<int> counts(4, 0);
  for (uint64_t s = 0; s < 4000; ++s) {
    auto p = seeded_permutation(4, s);
    std::set<int64_t> uniq(p.begin(), p.end());
    ASSERT_EQ(uniq.size(), 4u);
    counts[std::find(p.begin(), p.end(), 0) - p.begin()]++;
  }
  for (int c : counts) {
    EXPECT_GT(c, 850);
    EXPECT_LT(c, 1150);
  }
  EXPECT_TRUE(seeded_permutation(0, 1).empty());
}

}  // namespace
}  // namespace weft::io
