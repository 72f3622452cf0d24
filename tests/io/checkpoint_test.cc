// Checkpoints: round trip, and every class of damaged file refused with a
// message naming the failure; interrupted saves keep the previous checkpoint.
#include "io/checkpoint.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "core/ops.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "tests/testing.h"

namespace weft::io {
namespace {

using weft::testing::tensor_near;
using weft::testing::values;
namespace fs = std::filesystem;

std::string temp_dir() {
  const char* t = std::getenv("TEST_TMPDIR");
  std::string d =
      std::string(t ? t : "/tmp") + "/ckpt_test_" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

CheckpointContents sample() {
  CheckpointContents c;
  c.model["0.weight"] = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  c.model["0.bias"] = tensor({-1, 0.5});
  c.model["bn.num_batches_tracked"] = scalar_tensor(int64_t{7}, {DType::Int64});
  // A non-contiguous tensor is saved by value.
  c.model["t"] = tensor({1, 2, 3, 4}, {2, 2}).t();
  c.optimizer["state.0.exp_avg"] = tensor({0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f}, {2, 3}).to(DType::Float64);
  c.optimizer["state.0.step"] = scalar_tensor(int64_t{12}, {DType::Int64});
  c.optimizer["param_groups.0.lr"] = scalar_tensor(0.001, {DType::Float64});
  c.scheduler["last_epoch"] = scalar_tensor(int64_t{3}, {DType::Int64});
  c.rng = GeneratorState{1234, 4096};
  c.step = 12;
  c.epoch = 3;
  c.metadata["arch"] = "mlp";
  return c;
}

TEST(Checkpoint, RoundTrip) {
  std::string dir = temp_dir(), path = dir + "/ckpt.safetensors";
  save_checkpoint(path, sample());
  CheckpointContents c = load_checkpoint(path);
  EXPECT_EQ(c.model.size(), 4u);
  EXPECT_TRUE(tensor_near(c.model.at("0.weight"), {1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(c.model.at("0.weight").sizes(), (Shape{2, 3}));
  EXPECT_TRUE(tensor_near(c.model.at("0.bias"), {-1, 0.5}));
  EXPECT_TRUE(tensor_near(c.model.at("t"), {1, 3, 2, 4}));
  EXPECT_EQ(c.model.at("bn.num_batches_tracked").dtype(), DType::Int64);
  EXPECT_EQ(c.model.at("bn.num_batches_tracked").item<int64_t>(), 7);
  EXPECT_EQ(c.optimizer.size(), 3u);
  EXPECT_EQ(c.optimizer.at("state.0.exp_avg").dtype(), DType::Float64);
  EXPECT_EQ(values(c.optimizer.at("state.0.exp_avg")), values(sample().optimizer.at("state.0.exp_avg")));
  EXPECT_EQ(c.optimizer.at("param_groups.0.lr").item<double>(), 0.001);
  EXPECT_EQ(c.scheduler.at("last_epoch").item<int64_t>(), 3);
  EXPECT_EQ(c.rng, (GeneratorState{1234, 4096}));
  EXPECT_EQ(c.step, 12);
  EXPECT_EQ(c.epoch, 3);
  EXPECT_EQ(c.metadata, (std::map<std::string, std::string>{{"arch", "mlp"}}));
  // The file is plain safetensors with the documented names.
  SafetensorsFile f = load_safetensors(path);
  EXPECT_TRUE(f.tensors.count("model.0.weight"));
  EXPECT_TRUE(f.tensors.count("optim.state.0.step"));
  EXPECT_TRUE(f.tensors.count("sched.last_epoch"));
  EXPECT_EQ(f.metadata.at("weft.step"), "12");
  EXPECT_EQ(f.metadata.at("weft.format"), "checkpoint");
  EXPECT_EQ(f.metadata.at("weft.data_crc32").size(), 8u);
  // Saving is deterministic: the same contents give the same bytes.
  EXPECT_EQ(serialize_checkpoint(sample()), read_file(path));
  // The RNG state restores the generator's stream.
  Generator g;
  g.set_state(c.rng);
  EXPECT_EQ(g.offset(), 4096u);
}

TEST(Checkpoint, EmptyComponents) {
  std::string path = temp_dir() + "/empty.ckpt";
  CheckpointContents c;
  c.step = -1;  // any int64
  save_checkpoint(path, c);
  CheckpointContents l = load_checkpoint(path);
  EXPECT_TRUE(l.model.empty() && l.optimizer.empty() && l.scheduler.empty());
  EXPECT_EQ(l.step, -1);
}

TEST(Checkpoint, TruncatedAtSeveralLengthsIsReported) {
  const std::string bytes = serialize_checkpoint(sample());
  uint64_t hl = 0;
  for (int i = 0; i < 8; ++i) hl |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  const std::string path = temp_dir() + "/t.ckpt";
  for (size_t len : {size_t{0}, size_t{5}, size_t{8}, size_t{40}, size_t(8 + hl - 1), size_t(8 + hl),
                     size_t(8 + hl + 3), bytes.size() - 1}) {
    ASSERT_LT(len, bytes.size());
    write_bytes(path, bytes.substr(0, len));
    EXPECT_WEFT_ERROR(load_checkpoint(path), "is truncated");
    EXPECT_WEFT_ERROR(load_checkpoint(path), path);
  }
}

TEST(Checkpoint, FlippedDataByteIsAChecksumMismatch) {
  const std::string bytes = serialize_checkpoint(sample());
  const std::string path = temp_dir() + "/d.ckpt";
  uint64_t hl = 0;
  for (int i = 0; i < 8; ++i) hl |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  for (size_t pos : {size_t(8 + hl), size_t(8 + hl + 17), bytes.size() - 1}) {
    std::string bad = bytes;
    bad[pos] = static_cast<char>(bad[pos] ^ 0x01);
    write_bytes(path, bad);
    EXPECT_WEFT_ERROR(load_checkpoint(path), "checkpoint '" + path + "' is corrupted: checksum mismatch");
  }
}

TEST(Checkpoint, FlippedHeaderByteIsRefused) {
  const std::string bytes = serialize_checkpoint(sample());
  const std::string path = temp_dir() + "/h.ckpt";
  uint64_t hl = 0;
  for (int i = 0; i < 8; ++i) hl |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  // A shape digit, a dtype letter, a metadata value, a name: every one is caught.
  for (const std::string& needle :
       {std::string("[2,3]"), std::string("\"F64\""), std::string("\"12\""), std::string("model.0.bias")}) {
    size_t pos = bytes.find(needle);
    ASSERT_NE(pos, std::string::npos) << needle;
    ASSERT_LT(pos, 8 + hl);
    std::string bad = bytes;
    bad[pos + 1] = static_cast<char>(bad[pos + 1] ^ 0x02);
    write_bytes(path, bad);
    EXPECT_WEFT_ERROR(load_checkpoint(path), "checksum mismatch in the header");
  }
  // Flipping every header byte in turn: never loads.
  for (size_t pos = 0; pos < 8 + hl; pos += 7) {
    std::string bad = bytes;
    bad[pos] = static_cast<char>(bad[pos] ^ 0x10);
    write_bytes(path, bad);
    bool thrown = false;
    try {
      load_checkpoint(path);
    } catch (const Error& e) {
      thrown = true;
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
    EXPECT_TRUE(thrown) << "flipped header byte " << pos << " was accepted";
  }
}

TEST(Checkpoint, NotAWeftCheckpoint) {
  const std::string path = temp_dir() + "/plain.safetensors";
  save_safetensors(path, {{"w", tensor({1, 2})}});
  EXPECT_WEFT_ERROR(load_checkpoint(path), "is not a weft checkpoint");
  write_bytes(path, std::string("\x04\0\0\0\0\0\0\0abcd", 12));
  EXPECT_WEFT_ERROR(load_checkpoint(path), "not valid JSON");
  EXPECT_WEFT_ERROR(load_checkpoint(temp_dir() + "/missing.ckpt"), "cannot open");
}

TEST(Checkpoint, VersionMismatch) {
  const std::string path = temp_dir() + "/v.ckpt";
  write_bytes(path, serialize_checkpoint(sample(), /*format_version=*/2));
  EXPECT_WEFT_ERROR(load_checkpoint(path), "has format version 2 but this weft reads version 1");
}

TEST(Checkpoint, InterruptedSaveKeepsPreviousCheckpoint) {
  const std::string dir = temp_dir(), path = dir + "/ckpt";
  CheckpointContents first = sample();
  save_checkpoint(path, first);
  const std::string before = read_file(path);

  // 1. The writer throws half-way through the file (a failing stream).
  CheckpointContents big = sample();
  big.model["huge"] = zeros({1 << 20});  // 4 MB: several 1 MB chunks
  big.step = 99;
  detail::set_checkpoint_write_hook([](size_t written) {
    if (written >= (2u << 20)) throw Error("simulated crash during write", __FILE__, __LINE__);
  });
  EXPECT_WEFT_ERROR(save_checkpoint(path, big), "simulated crash");
  detail::set_checkpoint_write_hook(nullptr);
  EXPECT_EQ(read_file(path), before);
  EXPECT_EQ(load_checkpoint(path).step, 12);

  // 2. Contents that cannot be serialised (an undefined tensor).
  CheckpointContents bad = sample();
  bad.optimizer["state.1.exp_avg"] = Tensor();
  EXPECT_WEFT_ERROR(save_checkpoint(path, bad), "optim.state.1.exp_avg is an undefined tensor");
  EXPECT_EQ(load_checkpoint(path).step, 12);

  // No temporary file is left behind.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"ckpt"});

  // A later successful save replaces it.
  save_checkpoint(path, big);
  EXPECT_EQ(load_checkpoint(path).step, 99);
}

TEST(CheckModelState, ReportsMissingUnexpectedAndMismatched) {
  std::map<std::string, Tensor> loaded{
      {"a", zeros({2, 3})}, {"b", zeros({4})}, {"extra", zeros({1})}, {"c", zeros({2}, {DType::Float64})}};
  std::vector<std::pair<std::string, Tensor>> expected{
      {"a", zeros({2, 3})}, {"b", zeros({5})}, {"c", zeros({2})}, {"gone", zeros({1})}};
  EXPECT_WEFT_ERROR(check_model_state(loaded, expected, "p.ckpt"), "checkpoint 'p.ckpt' does not match the model");
  EXPECT_WEFT_ERROR(check_model_state(loaded, expected, "p.ckpt"), "missing keys [gone]");
  EXPECT_WEFT_ERROR(check_model_state(loaded, expected, "p.ckpt"), "unexpected keys [extra]");
  EXPECT_WEFT_ERROR(check_model_state(loaded, expected, "p.ckpt"),
                    "mismatched keys [b: checkpoint [4] float32 vs model [5] float32, c: checkpoint [2] float64 vs "
                    "model [2] float32]");
  std::map<std::string, Tensor> ok{{"a", ones({2, 3})}};
  check_model_state(ok, std::map<std::string, Tensor>{{"a", zeros({2, 3})}}, "p.ckpt");  // no throw
}

}  // namespace
}  // namespace weft::io
