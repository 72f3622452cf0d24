// Damaged files against io's readers: safetensors (from bytes and from a file,
// header first), training checkpoints (also with their checksums recomputed,
// so that the damage reaches the parsing behind them) and IDX (raw and gzip).
// Each reader must return or throw weft::Error for every mutant
// (tests/mutate.h); what it returns must stay within the bytes it was given.
// Plus the cases the mutants found: sizes whose products wrap around 2^64.
#include <zlib.h>

#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>

#include "core/ops.h"
#include "io/checkpoint.h"
#include "io/crc32.h"
#include "io/idx.h"
#include "io/safetensors.h"
#include "tests/mutate.h"
#include "tests/testing.h"

namespace weft {
namespace {
using testing::MutantCounts;
using testing::survives_mutants;

std::string tmp_path(const std::string& name) {
  const char* d = std::getenv("TEST_TMPDIR");
  return std::string(d ? d : "/tmp") + "/" + name;
}

void write_raw(const std::string& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

std::string gzip_bytes(const std::string& bytes) {
  const std::string p = tmp_path("gzip_bytes.gz");
  gzFile f = gzopen(p.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::map<std::string, Tensor> sample_tensors() {
  return {
      {"f32", testing::rnd({2, 3}, DType::Float32, 1)},
      {"f64", testing::rnd({3}, DType::Float64, 2)},
      {"bf16", testing::rnd({2, 2}, DType::BFloat16, 3)},
      {"i64", tensor(std::vector<int64_t>{-(int64_t{1} << 40), 0, 7})},
      {"u8", tensor(std::vector<uint8_t>{0, 255, 17})},
      {"bool", tensor(std::vector<bool>{true, false, true})},
      {"empty", zeros({0, 3})},
      {"scalar", scalar_tensor(42.0)},
  };
}

uint64_t total_bytes(const std::map<std::string, Tensor>& tensors) {
  uint64_t n = 0;
  for (const auto& [k, t] : tensors) n += t.nbytes();
  return n;
}

TEST(MalformedInput, SafetensorsFromBytes) {
  const std::string valid = io::safetensors_serialize(sample_tensors(), {{"note", "kept"}});
  MutantCounts counts;
  EXPECT_TRUE(survives_mutants(
      valid, 20000, 1,
      [](const std::string& m) {
        io::SafetensorsFile f = io::safetensors_deserialize(m, "m.safetensors");
        // what was read came from the file: its tensors' bytes fit in it
        if (total_bytes(f.tensors) > m.size()) WEFT_ERROR("accepted a file whose tensors exceed its bytes");
      },
      &counts));
  // most mutants damage the header; some (edits inside the data) are read
  EXPECT_GT(counts.rejected, 10000);
  EXPECT_GT(counts.read, 100);
}

TEST(MalformedInput, SafetensorsFromFileHeaderFirst) {
  const std::string valid = io::safetensors_serialize(sample_tensors());
  const std::string path = tmp_path("mutant.safetensors");
  MutantCounts counts;
  EXPECT_TRUE(survives_mutants(
      valid, 2000, 100000,
      [&](const std::string& m) {
        write_raw(path, m);
        const io::SafetensorsHeader h = io::read_safetensors_header(path);
        for (const auto& [name, e] : h.entries) io::read_safetensors_tensor(path, h, name);
      },
      &counts));
  EXPECT_GT(counts.rejected, 1000);
}

// A checkpoint's bytes with `header` (JSON text) in place of its header and
// both checksums recomputed, as a writer that does not follow the format would
// leave them; unchanged when the mutant lost a checksum's key.
std::string reseal(const std::string& header, const std::string& data) {
  std::string h = header;
  auto value_at = [&](const std::string& key) {
    const std::string needle = "\"" + key + "\":\"";
    const size_t pos = h.find(needle);
    return pos == std::string::npos || pos + needle.size() + 8 > h.size() ? std::string::npos : pos + needle.size();
  };
  const size_t dpos = value_at("weft.data_crc32"), hpos = value_at("weft.header_crc32");
  auto hex = [](uint32_t v) {
    char buf[9];
    std::snprintf(buf, sizeof buf, "%08x", v);
    return std::string(buf);
  };
  if (dpos != std::string::npos) h.replace(dpos, 8, hex(io::crc32(data.data(), data.size())));
  if (hpos != std::string::npos) {
    h.replace(hpos, 8, "00000000");
    h.replace(hpos, 8, hex(io::crc32(h.data(), h.size())));
  }
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((uint64_t{h.size()} >> (8 * i)) & 0xff);
  return out + h + data;
}

io::CheckpointContents sample_checkpoint() {
  io::CheckpointContents c;
  c.model = {{"w", testing::rnd({3, 2}, DType::Float32, 4)}, {"b", testing::rnd({2}, DType::Float32, 5)}};
  c.optimizer = {{"state.0.exp_avg", testing::rnd({3, 2}, DType::Float32, 6)}, {"step", scalar_tensor(3.0)}};
  c.scheduler = {{"last_epoch", scalar_tensor(int64_t{2})}};
  c.rng = {1234, 64};
  c.step = 17;
  c.epoch = 2;
  c.metadata = {{"run", "mutants"}};
  return c;
}

TEST(MalformedInput, Checkpoint) {
  const std::string valid = io::serialize_checkpoint(sample_checkpoint());
  // the checksums must catch what the mutants do to the bytes
  MutantCounts counts;
  EXPECT_TRUE(survives_mutants(
      valid, 5000, 200000, [](const std::string& m) { io::deserialize_checkpoint(m, "m.ckpt"); }, &counts));
  EXPECT_GT(counts.rejected, 4900);
}

TEST(MalformedInput, CheckpointWithChecksumsRecomputed) {
  const std::string valid = io::serialize_checkpoint(sample_checkpoint());
  uint64_t hl = 0;
  for (int i = 0; i < 8; ++i) hl |= static_cast<uint64_t>(static_cast<unsigned char>(valid[i])) << (8 * i);
  const std::string header = valid.substr(8, hl), data = valid.substr(8 + hl);
  ASSERT_NO_THROW(io::deserialize_checkpoint(reseal(header, data), "resealed.ckpt"));
  MutantCounts counts;
  EXPECT_TRUE(survives_mutants(
      header, 10000, 300000,
      [&](const std::string& h) {
        io::CheckpointContents c = io::deserialize_checkpoint(reseal(h, data), "m.ckpt");
        uint64_t n = total_bytes(c.model) + total_bytes(c.optimizer) + total_bytes(c.scheduler);
        if (n > data.size()) WEFT_ERROR("accepted a checkpoint whose tensors exceed its data");
      },
      &counts));
  EXPECT_GT(counts.rejected, 5000);
  EXPECT_GT(counts.read, 100);  // e.g. a digit of a user value or of the step changed
}

std::string idx_bytes(uint8_t type, const std::vector<uint32_t>& dims, const std::string& payload) {
  std::string s = {0, 0, static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims)
    for (int k = 3; k >= 0; --k) s.push_back(static_cast<char>((d >> (8 * k)) & 0xff));
  return s + payload;
}

TEST(MalformedInput, Idx) {
  const std::string path = tmp_path("mutant.idx");
  auto read = [&](const std::string& m) {
    write_raw(path, m);
    Tensor t = io::read_idx(path);
    if (t.nbytes() > m.size() * 4) WEFT_ERROR("accepted an IDX file whose tensor exceeds its bytes");
  };
  // uint8 images, int16 and float64 (each element from 2 and 8 bytes)
  const std::string u8 = idx_bytes(0x08, {2, 3, 4}, std::string(24, '\x07'));
  const std::string i16 = idx_bytes(0x0B, {3, 2}, std::string(12, '\x81'));
  const std::string f64 = idx_bytes(0x0E, {2}, std::string(16, '\x3f'));
  uint64_t seed = 400000;
  for (const std::string* valid : {&u8, &i16, &f64}) {
    MutantCounts counts;
    EXPECT_TRUE(survives_mutants(*valid, 1500, seed, read, &counts));
    EXPECT_GT(counts.rejected, 500);
    seed += 1500;
  }
  // the same, compressed: damage to the gzip stream itself
  MutantCounts counts;
  EXPECT_TRUE(survives_mutants(gzip_bytes(u8), 1500, seed, read, &counts));
  EXPECT_GT(counts.rejected, 500);
}

// Sizes whose product wraps around 2^64 once multiplied by the element size or
// by the next dimension: each names the shape instead of reading a tensor of
// the wrong size.
TEST(MalformedInput, SizesThatWrapAround) {
  // IDX: 2^20 * 2^20 * 2^24 = 2^64, zero bytes of data after the header
  write_raw(tmp_path("wrap.idx"), idx_bytes(0x08, {1u << 20, 1u << 20, 1u << 24}, ""));
  EXPECT_WEFT_ERROR(io::read_idx(tmp_path("wrap.idx")), "implausibly large shape");
  // safetensors: 2^31 * 2^31 float32 elements = 2^64 bytes, data_offsets [0, 0]
  const std::string header = R"({"a":{"dtype":"F32","shape":[2147483648,2147483648],"data_offsets":[0,0]}})";
  std::string bytes(8, '\0');
  bytes[0] = static_cast<char>(header.size());
  EXPECT_WEFT_ERROR(io::safetensors_deserialize(bytes + header, "wrap.safetensors"), "too large");
  // float64: 2^61 elements of 8 bytes
  const std::string h64 = R"({"a":{"dtype":"F64","shape":[1073741824,2147483648],"data_offsets":[0,0]}})";
  bytes[0] = static_cast<char>(h64.size());
  EXPECT_WEFT_ERROR(io::safetensors_deserialize(bytes + h64, "wrap.safetensors"), "too large");
}

}  // namespace
}  // namespace weft
