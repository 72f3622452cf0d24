#include "io/safetensors.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>

#include "core/ops.h"
#include "io/atomic_file.h"
#include "tests/testing.h"

namespace weft {
namespace {
using testing::tensor_near;
using testing::values;

std::string tmp_path(const std::string& name) {
  const char* d = std::getenv("TEST_TMPDIR");
  return std::string(d ? d : "/tmp") + "/" + name;
}

// The same tensors tools/golden/make_safetensors_golden.py writes with Python.
std::map<std::string, Tensor> golden_tensors() {
  return {
      {"f32", tensor(std::vector<float>{1.5f, -2.25f, 3.0f, 0.0f, 1e-3f, -7.5f}, {2, 3})},
      {"f64", tensor(std::vector<double>{3.141592653589793, -1e-300, 2.0})},
      {"f16", tensor(std::vector<Half>{Half(0.5f), Half(-65504.0f), Half(1.0f / 3.0f)})},
      {"bf16", tensor(std::vector<BFloat16>{BFloat16(1.0f), BFloat16(-3.140625f), BFloat16(256.0f)})},
      {"i64", tensor(std::vector<int64_t>{-(int64_t{1} << 40), 0, 7})},
      {"i32", tensor(std::vector<int32_t>{-5, 6, 1 << 30, INT32_MIN}, {2, 2})},
      {"u8", tensor(std::vector<uint8_t>{0, 255, 17})},
      {"bool", tensor(std::vector<bool>{true, false, true})},
      {"empty", zeros({0, 3})},
      {"scalar", scalar_tensor(42.0)},
  };
}

void expect_same(const std::map<std::string, Tensor>& got, const std::map<std::string, Tensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [k, v] : want) {
    ASSERT_TRUE(got.count(k)) << k;
    EXPECT_EQ(got.at(k).dtype(), v.dtype()) << k;
    EXPECT_EQ(got.at(k).sizes(), v.sizes()) << k;
    EXPECT_EQ(values(got.at(k)), values(v)) << k;
  }
}

TEST(Safetensors, ReadsFileWrittenByPythonPackage) {
  io::SafetensorsFile f = io::load_safetensors("tests/io/golden/python_written.safetensors");
  expect_same(f.tensors, golden_tensors());
  EXPECT_EQ(f.metadata.at("format"), "pt");
  EXPECT_EQ(f.metadata.at("producer"), "make_safetensors_golden.py");
  // spot-check raw values independently of equal()
  EXPECT_TRUE(tensor_near(f.tensors["f32"], {1.5, -2.25, 3.0, 0.0, 1e-3, -7.5}));
  EXPECT_TRUE(tensor_near(f.tensors["f16"], {0.5, -65504.0, 0.333251953125}, 0));
  EXPECT_TRUE(tensor_near(f.tensors["i32"], {-5, 6, 1 << 30, INT32_MIN}, 0));
}

TEST(Safetensors, RoundTripEveryDtypeAndMetadata) {
  std::string p = tmp_path("roundtrip.safetensors");
  auto t = golden_tensors();
  t["strided"] = arange(12, {DType::Float32}).view({3, 4}).t();  // non-contiguous source
  io::save_safetensors(p, t, {{"epoch", "3"}});
  io::SafetensorsFile f = io::load_safetensors(p);
  expect_same(f.tensors, t);
  EXPECT_EQ(f.metadata.at("epoch"), "3");
  // For the Python-side check (tools/golden/make_safetensors_golden.py PATH).
  if (const char* w = std::getenv("WEFT_WRITE_INTEROP")) io::save_safetensors(w, golden_tensors());
}

TEST(Safetensors, HeaderIsAlignedAndLittleEndian) {
  std::string bytes = io::safetensors_serialize({{"a", ones({2})}});
  uint64_t hl = 0;
  for (int i = 0; i < 8; ++i) hl |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
  EXPECT_EQ(hl % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + hl + 8);
}

std::string with_header(const std::string& json, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + json + data;
}

TEST(Safetensors, RejectsMalformedFiles) {
  std::string data(16, '\0');
  EXPECT_WEFT_ERROR(io::safetensors_deserialize("abc"), "too short");
  std::string bad_len = with_header("{}", "");
  bad_len[0] = 100;
  EXPECT_WEFT_ERROR(io::safetensors_deserialize(bad_len), "exceeds the file size");
  EXPECT_WEFT_ERROR(io::safetensors_deserialize(with_header("{not json", "")), "not valid JSON");
  EXPECT_WEFT_ERROR(io::safetensors_deserialize(with_header("[1,2]", "")), "JSON object");
  EXPECT_WEFT_ERROR(
      io::safetensors_deserialize(with_header(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,32]}})", data)),
      "out of range");
  EXPECT_WEFT_ERROR(
      io::safetensors_deserialize(with_header(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", data)),
      "needs 12");
  EXPECT_WEFT_ERROR(io::safetensors_deserialize(with_header(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},)"
                                                            R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                                                            data)),
                    "overlaps");
  EXPECT_WEFT_ERROR(
      io::safetensors_deserialize(with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", data)),
      "hole");
  EXPECT_WEFT_ERROR(
      io::safetensors_deserialize(with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", data)),
      "trailing bytes");
  EXPECT_WEFT_ERROR(
      io::safetensors_deserialize(with_header(R"({"a":{"dtype":"C64","shape":[2],"data_offsets":[0,16]}})", data)),
      "unsupported dtype 'C64'");
  EXPECT_WEFT_ERROR(
      io::safetensors_deserialize(with_header(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,16]}})", data)),
      "non-negative");
  EXPECT_WEFT_ERROR(io::safetensors_deserialize(with_header(R"({"a":{"dtype":"F32"}})", data)),
                    "must have dtype, shape and data_offsets");
  // truncated real file
  std::string good = io::safetensors_serialize({{"w", ones({4, 4})}});
  EXPECT_WEFT_ERROR(io::safetensors_deserialize(good.substr(0, good.size() - 5), "t.safetensors"), "t.safetensors");
  EXPECT_WEFT_ERROR(io::load_safetensors(tmp_path("does_not_exist.safetensors")), "cannot open");
}

TEST(Safetensors, FailedSaveKeepsPreviousFile) {
  std::string p = tmp_path("keep.safetensors");
  io::save_safetensors(p, {{"w", full({3}, 7.0)}});
  EXPECT_WEFT_ERROR(io::save_safetensors(p, {{"w", Tensor()}}), "undefined");
  // a failure inside the writer after the temp file was opened
  EXPECT_THROW(io::write_atomically(p,
                                    [](std::ostream& os) {
                                      os << "partial";
                                      WEFT_ERROR("simulated crash mid-write");
                                    }),
               Error);
  io::SafetensorsFile f = io::load_safetensors(p);
  EXPECT_TRUE(tensor_near(f.tensors.at("w"), {7, 7, 7}));
  EXPECT_NE(access((p + ".tmp." + std::to_string(getpid())).c_str(), F_OK), 0) << "temp file left behind";
}

}  // namespace
}  // namespace weft
