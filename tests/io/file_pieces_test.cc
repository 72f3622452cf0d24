// The io pieces partitioned checkpoints are built from: CRC-32 (against
// zlib's published check value and piecewise), durable writes, ranged reads
// that name a short file, and reading one tensor of a safetensors file
// without the rest (its header alone, then only its bytes).
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "core/ops.h"
#include "io/atomic_file.h"
#include "io/crc32.h"
#include "io/safetensors.h"
#include "tests/testing.h"

namespace weft::io {
namespace {

namespace fs = std::filesystem;

std::string temp_dir() {
  const char* t = std::getenv("TEST_TMPDIR");
  std::string d =
      std::string(t ? t : "/tmp") + "/file_pieces_" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

TEST(Crc32, CheckValueAndPieces) {
  // The CRC-32 check value of "123456789" (zlib, gzip, PNG): 0xcbf43926.
  EXPECT_EQ(crc32(std::string("123456789")), 0xcbf43926u);
  EXPECT_EQ(crc32_hex(crc32(std::string("123456789"))), "cbf43926");
  EXPECT_EQ(crc32(std::string()), 0u);
  EXPECT_EQ(crc32_hex(0), "00000000");
  const std::string a = "partitioned ", b = "checkpoints";
  EXPECT_EQ(crc32(b, crc32(a)), crc32(a + b));
}

TEST(FilePieces, SyncedWriteAndRangedRead) {
  const std::string d = temp_dir(), path = d + "/f.bin";
  write_file_synced(path, "0123456789");
  EXPECT_EQ(read_file(path), "0123456789");
  EXPECT_EQ(read_file_range(path, 3, 4), "3456");
  EXPECT_EQ(read_file_range(path, 10, 0), "");
  write_file_synced(path, "abc");  // truncates
  EXPECT_EQ(read_file(path), "abc");
  EXPECT_WEFT_ERROR(read_file_range(path, 1, 5),
                    "'" + path + "' is truncated: bytes [1, 6) were asked for but it has 3 bytes");
  EXPECT_WEFT_ERROR(read_file_range(d + "/missing", 0, 1), "cannot open '" + d + "/missing'");
  EXPECT_WEFT_ERROR(write_file_synced(d + "/no/such/dir/f", "x"), "cannot open '" + d + "/no/such/dir/f' for writing");
  fsync_directory(d);  // no error
}

TEST(FilePieces, ReadsOneTensorOfASafetensorsFile) {
  const std::string d = temp_dir(), path = d + "/t.safetensors";
  std::map<std::string, Tensor> ts;
  ts["a"] = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  ts["b.weight"] = tensor<double>({-1.5, 2.5}, {2});
  ts["c"] = tensor<int64_t>({7}, {1});
  save_safetensors(path, ts, {{"format", "pt"}});
  const SafetensorsHeader h = read_safetensors_header(path);
  EXPECT_EQ(h.metadata.at("format"), "pt");
  ASSERT_EQ(h.entries.size(), 3u);
  EXPECT_EQ(h.entries.at("b.weight").dtype, DType::Float64);
  EXPECT_EQ(h.entries.at("a").shape, (Shape{2, 3}));
  EXPECT_EQ(h.entries.at("a").end - h.entries.at("a").begin, 24u);
  // The header's offsets are the file's: data_start + begin is where the bytes are.
  const std::string whole = read_file(path);
  EXPECT_EQ(h.data_start + 24 + 16 + 8, whole.size());
  for (const auto& [name, t] : ts) {
    Tensor got = read_safetensors_tensor(path, h, name);
    EXPECT_EQ(got.dtype(), t.dtype()) << name;
    EXPECT_TRUE(testing::tensors_near(got.to(DType::Float64), t.to(DType::Float64), 0)) << name;
  }
  EXPECT_WEFT_ERROR(read_safetensors_tensor(path, h, "zz"), "'" + path + "' has no tensor 'zz'");
  // A truncated file: the header read names it (the offsets no longer fit).
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(whole.data(), static_cast<std::streamsize>(whole.size() - 4));
  EXPECT_WEFT_ERROR(read_safetensors_header(path), "are out of range for a data section");
  // parse_safetensors_header on the header bytes alone (data size unknown) succeeds.
  const SafetensorsHeader h2 = parse_safetensors_header(whole.substr(0, h.data_start), "mem");
  EXPECT_EQ(h2.entries.size(), 3u);
  EXPECT_EQ(h2.data_start, h.data_start);
}

}  // namespace
}  // namespace weft::io
