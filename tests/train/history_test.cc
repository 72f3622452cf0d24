// EpochRecord (train/history.h): encode/decode round-trip every field bit for
// bit (NaN, infinities, -0, subnormals, user values), the JSON line leaves
// out what was not measured, get() names the known keys, and damaged history
// text (tests/mutate.h) is decoded or refused with a weft::Error.
#include "train/history.h"

#include <cmath>
#include <cstring>
#include <limits>

#include <gtest/gtest.h>

#include "tests/mutate.h"
#include "tests/testing.h"

namespace weft::train {
namespace {

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

EpochRecord sample() {
  EpochRecord r;
  r.epoch = 7;
  r.step = 3283;
  r.train_loss = 1.0 / 3.0;
  r.train_metric = -0.0;
  r.valid_loss = std::numeric_limits<double>::infinity();
  r.valid_metric = kNotMeasured;
  r.lr = 4.9406564584124654e-324;  // the smallest subnormal
  r.samples_per_second = 12345.678901234567;
  r.seconds = 1e300;
  r.extra = {{"grad_norm", 0.1}, {"ema_loss", -std::numeric_limits<double>::infinity()}};
  return r;
}

TEST(EpochRecord, EncodeDecodeRoundTripsEveryBit) {
  const EpochRecord r = sample();
  const EpochRecord d = EpochRecord::decode(r.encode());
  EXPECT_EQ(d.epoch, r.epoch);
  EXPECT_EQ(d.step, r.step);
  EXPECT_TRUE(same_bits(d.train_loss, r.train_loss));
  EXPECT_TRUE(same_bits(d.train_metric, r.train_metric));  // -0 stays -0
  EXPECT_TRUE(same_bits(d.valid_loss, r.valid_loss));
  EXPECT_TRUE(std::isnan(d.valid_metric));
  EXPECT_TRUE(same_bits(d.lr, r.lr));
  EXPECT_TRUE(same_bits(d.samples_per_second, r.samples_per_second));
  EXPECT_TRUE(same_bits(d.seconds, r.seconds));
  ASSERT_EQ(d.extra.size(), 2u);
  EXPECT_TRUE(same_bits(d.extra.at("grad_norm"), 0.1));
  EXPECT_TRUE(same_bits(d.extra.at("ema_loss"), -std::numeric_limits<double>::infinity()));
  EXPECT_EQ(d.encode(), r.encode());
}

TEST(EpochRecord, JsonLeavesOutWhatWasNotMeasured) {
  EpochRecord r;
  r.epoch = 2;
  r.step = 10;
  r.train_loss = 0.5;
  r.valid_loss = 0.25;
  r.valid_metric = 0.875;
  r.samples_per_second = 100;
  r.seconds = 1.5;
  EXPECT_EQ(r.json("accuracy", "test"),
            "{\"epoch\": 2, \"step\": 10, \"train_loss\": 0.500000, \"test_loss\": 0.250000, \"test_accuracy\": "
            "0.875000, \"samples_per_second\": 100.0, \"seconds\": 1.50}");
  EXPECT_EQ(r.get("test_accuracy", "accuracy", "test"), 0.875);
  EXPECT_EQ(r.get("step", "accuracy", "test"), 10);
  EXPECT_TRUE(std::isnan(r.get("train_accuracy", "accuracy", "test")));
  EXPECT_WEFT_ERROR(r.get("val_loss", "accuracy", "test"),
                    "no value named 'val_loss' (known: epoch, step, train_loss, train_accuracy, test_loss, "
                    "test_accuracy, lr, samples_per_second, seconds)");
}

TEST(EpochRecord, BadTextIsNamed) {
  EXPECT_WEFT_ERROR(EpochRecord::decode(""), "history entry '' is not one");
  EXPECT_WEFT_ERROR(EpochRecord::decode("1 2 0.5"), "history entry '1 2 0.5' is incomplete");
  EXPECT_WEFT_ERROR(EpochRecord::decode("1 2 0.5 x 1 1 1 1 1"), "'x' in history entry");
  EXPECT_WEFT_ERROR(EpochRecord::decode("99999999999999999999 2 1 1 1 1 1 1 1"), "is not one");
  EXPECT_WEFT_ERROR(EpochRecord::decode(sample().encode() + " dangling"), "is incomplete");
  EpochRecord r;
  r.extra = {{"two words", 1.0}};
  EXPECT_WEFT_ERROR(r.encode(), "extra key 'two words' must be one word");
}

TEST(EpochRecord, DamagedTextIsDecodedOrRefused) {
  testing::MutantCounts counts;
  EXPECT_TRUE(testing::survives_mutants(
      sample().encode(), 5000, 1, [](const std::string& m) { EpochRecord::decode(m); }, &counts));
  EXPECT_GT(counts.rejected, 500);
  EXPECT_GT(counts.read, 500);  // most edits of a digit still leave numbers
}

TEST(EpochRecord, LegacyEntries) {
  const EpochRecord r = EpochRecord::decode_legacy(3, "0.5 0.8 0.4 0.85 1000 12.5");
  EXPECT_EQ(r.epoch, 3);
  EXPECT_EQ(r.train_loss, 0.5);
  EXPECT_EQ(r.train_metric, 0.8);
  EXPECT_EQ(r.valid_loss, 0.4);
  EXPECT_EQ(r.valid_metric, 0.85);
  EXPECT_TRUE(std::isnan(r.lr));
  EXPECT_EQ(r.samples_per_second, 1000);
  EXPECT_EQ(r.seconds, 12.5);
  EXPECT_WEFT_ERROR(EpochRecord::decode_legacy(3, "0.5 0.8"), "is incomplete");
}

}  // namespace
}  // namespace weft::train
