#include "io/idx.h"

#include <zlib.h>

#include <cstring>
#include <memory>
#include <vector>

#include "core/ops.h"

namespace weft::io {
namespace {

// Decompresses (or copies, for raw files) the whole file.
std::string read_maybe_gzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  WEFT_CHECK(f != nullptr, "read_idx: cannot open '", path, "': ", std::strerror(errno));
  std::unique_ptr<gzFile_s, int (*)(gzFile)> guard(f, gzclose);
  std::string out;
  std::vector<char> buf(1 << 20);
  while (true) {
    int n = gzread(f, buf.data(), static_cast<unsigned>(buf.size()));
    if (n < 0) {
      int err = 0;
      const char* msg = gzerror(f, &err);
      WEFT_ERROR("read_idx: '", path, "' is corrupt or truncated: ", msg);
    }
    if (n == 0) break;
    out.append(buf.data(), n);
  }
  // gzread reports a truncated gzip stream only through gzerror at EOF
  int err = 0;
  const char* msg = gzerror(f, &err);
  WEFT_CHECK(err == Z_OK || err == Z_STREAM_END, "read_idx: '", path, "' is corrupt or truncated: ", msg);
  return out;
}

uint32_t be32(const unsigned char* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

}  // namespace

Tensor read_idx(const std::string& path) {
  std::string bytes = read_maybe_gzip(path);
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  WEFT_CHECK(bytes.size() >= 4 && p[0] == 0 && p[1] == 0, "read_idx: '", path,
             "' is not an IDX file (bad magic number)");
  int type = p[2], ndim = p[3];
  size_t elem;
  DType dt;
  switch (type) {
    case 0x08:
      elem = 1;
      dt = DType::UInt8;
      break;
    case 0x09:
      elem = 1;
      dt = DType::Int32;
      break;
    case 0x0B:
      elem = 2;
      dt = DType::Int32;
      break;
    case 0x0C:
      elem = 4;
      dt = DType::Int32;
      break;
    case 0x0D:
      elem = 4;
      dt = DType::Float32;
      break;
    case 0x0E:
      elem = 8;
      dt = DType::Float64;
      break;
    default: WEFT_ERROR("read_idx: '", path, "' has unknown IDX data type 0x", std::hex, type);
  }
  WEFT_CHECK(ndim >= 1 && ndim <= 8, "read_idx: '", path, "' declares ", ndim, " dimensions (expected 1 to 8)");
  size_t header = 4 + 4 * static_cast<size_t>(ndim);
  WEFT_CHECK(bytes.size() >= header, "read_idx: '", path, "' is truncated inside its header");
  Shape shape;
  uint64_t numel = 1;
  for (int d = 0; d < ndim; ++d) {
    uint32_t s = be32(p + 4 + 4 * d);
    shape.push_back(s);
    // checked before multiplying, so that dimensions wrapping around 2^64 are seen
    WEFT_CHECK(s == 0 || numel <= (1ull << 40) / s, "read_idx: '", path,
               "' declares an implausibly large shape (dimension ", d, " is ", s, ")");
    numel *= s;
  }
  uint64_t need = header + numel * elem;
  WEFT_CHECK(bytes.size() >= need, "read_idx: '", path, "' is truncated: shape ", shape_str(shape), " needs ", need,
             " bytes but the file has ", bytes.size());
  WEFT_CHECK(bytes.size() == need, "read_idx: '", path, "' has ", bytes.size() - need,
             " unexpected trailing bytes after the data");
  Tensor t = empty(shape, {dt});
  const unsigned char* src = p + header;
  if (type == 0x08) {
    std::memcpy(t.raw_data(), src, numel);
  } else if (type == 0x09 || type == 0x0B || type == 0x0C) {
    int32_t* out = t.data_ptr<int32_t>();
    for (uint64_t i = 0; i < numel; ++i) {
      if (type == 0x09) out[i] = static_cast<int8_t>(src[i]);
      else if (type == 0x0B) out[i] = static_cast<int16_t>((src[2 * i] << 8) | src[2 * i + 1]);
      else out[i] = static_cast<int32_t>(be32(src + 4 * i));
    }
  } else if (type == 0x0D) {
    float* out = t.data_ptr<float>();
    for (uint64_t i = 0; i < numel; ++i) {
      uint32_t u = be32(src + 4 * i);
      std::memcpy(out + i, &u, 4);
    }
  } else {
    double* out = t.data_ptr<double>();
    for (uint64_t i = 0; i < numel; ++i) {
      uint64_t u = (uint64_t(be32(src + 8 * i)) << 32) | be32(src + 8 * i + 4);
      std::memcpy(out + i, &u, 8);
    }
  }
  return t;
}

}  // namespace weft::io
