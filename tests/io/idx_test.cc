#include "io/idx.h"

#include <zlib.h>

#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>

#include "core/ops.h"
#include "tests/testing.h"

namespace weft {
namespace {
using testing::tensor_near;

std::string tmp_path(const std::string& name) {
  const char* d = std::getenv("TEST_TMPDIR");
  return std::string(d ? d : "/tmp") + "/" + name;
}

std::string idx_bytes(uint8_t type, const std::vector<uint32_t>& dims, const std::string& payload) {
  std::string s = {0, 0, static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims)
    for (int k = 3; k >= 0; --k) s.push_back(static_cast<char>((d >> (8 * k)) & 0xff));
  return s + payload;
}

void write_raw(const std::string& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }
void write_gz(const std::string& p, const std::string& bytes) {
  gzFile f = gzopen(p.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

TEST(Idx, ReadsUint8RawAndGzip) {
  std::string payload = {1, 2, 3, 4, 5, static_cast<char>(255)};
  std::string bytes = idx_bytes(0x08, {2, 3}, payload);
  write_raw(tmp_path("a.idx"), bytes);
  write_gz(tmp_path("a.idx.gz"), bytes);
  for (const char* name : {"a.idx", "a.idx.gz"}) {
    Tensor t = io::read_idx(tmp_path(name));
    EXPECT_EQ(t.dtype(), DType::UInt8);
    EXPECT_EQ(t.sizes(), (Shape{2, 3}));
    EXPECT_TRUE(tensor_near(t, {1, 2, 3, 4, 5, 255}, 0)) << name;
  }
}

TEST(Idx, ReadsBigEndianInt32AndFloat) {
  std::string ints = {
      0, 0, 1, 0, static_cast<char>(0xff), static_cast<char>(0xff), static_cast<char>(0xff), static_cast<char>(0xfe)};
  write_raw(tmp_path("i.idx"), idx_bytes(0x0C, {2}, ints));
  EXPECT_TRUE(tensor_near(io::read_idx(tmp_path("i.idx")), {256, -2}, 0));
  std::string f = {0x3f, static_cast<char>(0xc0), 0, 0};  // 1.5f big-endian
  write_raw(tmp_path("f.idx"), idx_bytes(0x0D, {1}, f));
  EXPECT_TRUE(tensor_near(io::read_idx(tmp_path("f.idx")), {1.5}, 0));
}

TEST(Idx, RejectsMalformedFiles) {
  EXPECT_WEFT_ERROR(io::read_idx(tmp_path("missing.idx")), "cannot open");
  write_raw(tmp_path("magic.idx"), std::string("\x01\x02\x08\x01", 4));
  EXPECT_WEFT_ERROR(io::read_idx(tmp_path("magic.idx")), "bad magic");
  write_raw(tmp_path("type.idx"), idx_bytes(0x42, {1}, "x"));
  EXPECT_WEFT_ERROR(io::read_idx(tmp_path("type.idx")), "unknown IDX data type");
  write_raw(tmp_path("short.idx"), idx_bytes(0x08, {10, 10}, std::string(50, 'a')));
  EXPECT_WEFT_ERROR(io::read_idx(tmp_path("short.idx")), "truncated");
  write_raw(tmp_path("long.idx"), idx_bytes(0x08, {2}, "abc"));
  EXPECT_WEFT_ERROR(io::read_idx(tmp_path("long.idx")), "trailing bytes");
  std::string bytes = idx_bytes(0x08, {4096}, std::string(4096, 'z'));
  write_gz(tmp_path("cut.idx.gz"), bytes);
  std::string gz;
  {
    std::ifstream in(tmp_path("cut.idx.gz"), std::ios::binary);
    gz.assign(std::istreambuf_iterator<char>(in), {});
  }
  write_raw(tmp_path("cut.idx.gz"), gz.substr(0, gz.size() / 2));
  EXPECT_WEFT_ERROR(io::read_idx(tmp_path("cut.idx.gz")), "cut.idx.gz");
}

TEST(Idx, ReadsDebianFashionMnist) {
  const std::string dir = "/usr/share/datasets/fashion-mnist/";
  Tensor labels = io::read_idx(dir + "t10k-labels-idx1-ubyte.gz");
  EXPECT_EQ(labels.sizes(), (Shape{10000}));
  const uint8_t* l = labels.data_ptr<uint8_t>();
  std::vector<int> counts(10, 0);
  for (int i = 0; i < 10000; ++i) {
    ASSERT_LT(l[i], 10);
    ++counts[l[i]];
  }
  for (int c : counts) EXPECT_EQ(c, 1000);  // the test set is balanced
  Tensor images = io::read_idx(dir + "t10k-images-idx3-ubyte.gz");
  EXPECT_EQ(images.sizes(), (Shape{10000, 28, 28}));
}

}  // namespace
}  // namespace weft
