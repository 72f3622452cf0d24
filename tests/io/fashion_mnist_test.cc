// Fashion-MNIST from the Debian package files; errors for missing data.
#include "io/fashion_mnist.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "core/ops.h"
#include "io/dataloader.h"
#include "tests/testing.h"

namespace weft::io {
namespace {

TEST(FashionMnist, LoadsTrainAndTest) {
  TensorDataset train = load_fashion_mnist(kFashionMnistDir, true);
  TensorDataset test = load_fashion_mnist(kFashionMnistDir, false);
  EXPECT_EQ(train.size(), 60000);
  EXPECT_EQ(test.size(), 10000);
  EXPECT_EQ(train.data().sizes(), (Shape{60000, 1, 28, 28}));
  EXPECT_EQ(train.data().dtype(), DType::Float32);
  EXPECT_EQ(train.targets().dtype(), DType::Int64);
  for (const TensorDataset* ds : {&train, &test}) {
    const float* p = ds->data().data_ptr<float>();
    float lo = 1e9f, hi = -1e9f;
    for (int64_t i = 0; i < ds->data().numel(); ++i) {
      lo = std::min(lo, p[i]);
      hi = std::max(hi, p[i]);
    }
    EXPECT_EQ(lo, 0.0f);
    EXPECT_EQ(hi, 1.0f);
  }
  // The test split is balanced: 1000 of each of the 10 classes.
  std::vector<int64_t> counts(10, 0);
  const int64_t* y = test.targets().data_ptr<int64_t>();
  for (int64_t i = 0; i < test.size(); ++i) {
    ASSERT_GE(y[i], 0);
    ASSERT_LT(y[i], 10);
    counts[y[i]]++;
  }
  EXPECT_EQ(counts, std::vector<int64_t>(10, 1000));
  // First training label of Fashion-MNIST is 9 (ankle boot); pixel values are k/255.
  EXPECT_EQ(train.get(0).target.item<int64_t>(), 9);
  const float* p = train.data().data_ptr<float>();
  for (int i = 0; i < 784; ++i) {
    float k = p[i] * 255.0f;
    EXPECT_NEAR(k, std::round(k), 1e-3);
  }
  // Batching through the DataLoader.
  DataLoader dl(std::make_shared<TensorDataset>(test), {.batch_size = 256, .shuffle = true, .num_workers = 2});
  auto b = dl.next();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->data.sizes(), (Shape{256, 1, 28, 28}));
  EXPECT_EQ(b->target.sizes(), (Shape{256}));
}

TEST(FashionMnist, MissingDataIsExplained) {
  EXPECT_WEFT_ERROR(load_fashion_mnist("/nonexistent/fmnist"), "'/nonexistent/fmnist' does not exist");
  EXPECT_WEFT_ERROR(load_fashion_mnist("/nonexistent/fmnist"), "apt-get install dataset-fashion-mnist");
  EXPECT_WEFT_ERROR(load_fashion_mnist("/nonexistent/fmnist"), "--data DIR");
  const char* t = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(t ? t : "/tmp") + "/empty_fmnist";
  std::filesystem::create_directories(dir);
  EXPECT_WEFT_ERROR(load_fashion_mnist(dir, false), "t10k-images-idx3-ubyte.gz' not found");
}

TEST(FashionMnist, ImageLabelCountMismatch) {
  // Train images with test labels: 60000 vs 10000.
  const std::string d = std::string(kFashionMnistDir) + "/";
  EXPECT_WEFT_ERROR(load_idx_classification(d + "train-images-idx3-ubyte.gz", d + "t10k-labels-idx1-ubyte.gz"),
                    "has 60000 images but");
  // Swapped roles: labels file as images.
  EXPECT_WEFT_ERROR(load_idx_classification(d + "t10k-labels-idx1-ubyte.gz", d + "t10k-labels-idx1-ubyte.gz"),
                    "should hold uint8 images [N, H, W]");
}

}  // namespace
}  // namespace weft::io
