#include "io/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include "core/ops.h"
#include "io/atomic_file.h"

namespace weft::io {

using nlohmann::json;

std::string safetensors_dtype(DType d) {
  switch (d) {
    case DType::Float32: return "F32";
    case DType::Float64: return "F64";
    case DType::BFloat16: return "BF16";
    case DType::Float16: return "F16";
    case DType::Int64: return "I64";
    case DType::Int32: return "I32";
    case DType::UInt8: return "U8";
    case DType::Bool: return "BOOL";
  }
  return "?";
}

DType dtype_from_safetensors(const std::string& s, const std::string& source) {
  static const std::pair<const char*, DType> kMap[] = {
      {"F32", DType::Float32}, {"F64", DType::Float64}, {"BF16", DType::BFloat16}, {"F16", DType::Float16},
      {"I64", DType::Int64},   {"I32", DType::Int32},   {"U8", DType::UInt8},      {"BOOL", DType::Bool}};
  for (auto& [name, d] : kMap)
    if (s == name) return d;
  WEFT_ERROR("safetensors: ", source, ": unsupported dtype '", s,
             "' (weft supports F64, F32, F16, BF16, I64, I32, U8, BOOL)");
}

std::string safetensors_serialize(const std::map<std::string, Tensor>& tensors,
                                  const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  std::vector<Tensor> ordered;
  for (const auto& [name, t] : tensors) {
    WEFT_CHECK(name != "__metadata__", "safetensors: '__metadata__' is reserved and cannot name a tensor");
    WEFT_CHECK(t.defined(), "safetensors: tensor '", name, "' is undefined");
    Tensor c = t.detach().cpu().contiguous();
    uint64_t n = c.nbytes();
    header[name] = {
        {"dtype", safetensors_dtype(c.dtype())}, {"shape", c.sizes()}, {"data_offsets", {offset, offset + n}}};
    offset += n;
    ordered.push_back(c);
  }
  std::string h = header.dump();
  while (h.size() % 8 != 0) h.push_back(' ');
  std::string out;
  out.reserve(8 + h.size() + offset);
  uint64_t hl = h.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((hl >> (8 * i)) & 0xff));
  out += h;
  for (const Tensor& c : ordered) out.append(static_cast<const char*>(c.raw_data()), c.nbytes());
  return out;
}

SafetensorsHeader parse_safetensors_header(const std::string& bytes, const std::string& source, int64_t data_size) {
  const std::string where = "safetensors: " + source + ": ";
  WEFT_CHECK(bytes.size() >= 8, where, "file is too short (", bytes.size(),
             " bytes) to hold the 8-byte header length; truncated?");
  uint64_t hl = 0;
  for (int i = 0; i < 8; ++i) hl |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  WEFT_CHECK(hl <= bytes.size() - 8, where, "header length ", hl, " exceeds the file size ", bytes.size(),
             "; the file is truncated or not a safetensors file");
  WEFT_CHECK(hl <= (100u << 20), where, "header length ", hl, " is larger than the 100 MB limit");
  json header;
  try {
    header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<int64_t>(hl));
  } catch (const json::exception& e) {
    WEFT_ERROR(where, "header is not valid JSON: ", e.what());
  }
  WEFT_CHECK(header.is_object(), where, "header must be a JSON object");
  SafetensorsHeader out;
  out.data_start = 8 + hl;
  struct Range {
    uint64_t b, e;
    std::string name;
  };
  std::vector<Range> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") {
      WEFT_CHECK(it->is_object(), where, "__metadata__ must be an object of strings");
      for (auto m = it->begin(); m != it->end(); ++m) {
        WEFT_CHECK(m->is_string(), where, "__metadata__ value for '", m.key(), "' is not a string");
        out.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    const json& e = *it;
    WEFT_CHECK(e.is_object() && e.contains("dtype") && e.contains("shape") && e.contains("data_offsets"), where,
               "entry '", name, "' must have dtype, shape and data_offsets");
    WEFT_CHECK(e["dtype"].is_string(), where, "entry '", name, "': dtype must be a string");
    DType dt = dtype_from_safetensors(e["dtype"].get<std::string>(), source + " tensor '" + name + "'");
    WEFT_CHECK(e["shape"].is_array(), where, "entry '", name, "': shape must be an array");
    Shape shape;
    uint64_t numel = 1;
    for (const json& s : e["shape"]) {
      WEFT_CHECK(s.is_number_unsigned() || (s.is_number_integer() && s.get<int64_t>() >= 0), where, "entry '", name,
                 "': shape entries must be non-negative integers");
      uint64_t v = s.get<uint64_t>();
      WEFT_CHECK(v < (1ull << 40) && (numel == 0 || v <= (1ull << 62) / std::max<uint64_t>(numel, 1)), where, "entry '",
                 name, "': shape is too large");
      numel *= v;
      shape.push_back(static_cast<int64_t>(v));
    }
    WEFT_CHECK(numel <= (1ull << 62) / element_size(dt), where, "entry '", name, "': shape ", shape_str(shape), " of ",
               dtype_name(dt), " is too large (more than 2^62 bytes)");
    const json& off = e["data_offsets"];
    WEFT_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() && off[1].is_number_unsigned(), where,
               "entry '", name, "': data_offsets must be two non-negative integers");
    uint64_t b = off[0].get<uint64_t>(), en = off[1].get<uint64_t>();
    WEFT_CHECK(b <= en && (data_size < 0 || en <= static_cast<uint64_t>(data_size)), where, "entry '", name,
               "': data_offsets [", b, ", ", en, ") are out of range for a data section of ", data_size, " bytes");
    WEFT_CHECK(en - b == numel * element_size(dt), where, "entry '", name, "': ", en - b, " bytes of data but shape ",
               shape_str(shape), " of ", dtype_name(dt), " needs ", numel * element_size(dt));
    ranges.push_back({b, en, name});
    out.entries[name] = SafetensorsEntry{dt, shape, b, en};
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.b < b.b || (a.b == b.b && a.e < b.e); });
  uint64_t pos = 0;
  for (const Range& r : ranges) {
    WEFT_CHECK(r.b >= pos, where, "tensor '", r.name, "' overlaps the previous tensor's data (offset ", r.b, " < ", pos,
               ")");
    WEFT_CHECK(r.b == pos, where, "hole in the data section before tensor '", r.name, "' (bytes ", pos, " to ", r.b,
               ")");
    pos = r.e;
  }
  if (data_size >= 0)
    WEFT_CHECK(pos == static_cast<uint64_t>(data_size), where, "the data section has ", data_size - pos,
               " trailing bytes not covered by any tensor");
  return out;
}

namespace {

Tensor tensor_from_bytes(const SafetensorsEntry& e, const char* data, const std::string& where,
                         const std::string& name) {
  Tensor t = empty(e.shape, {e.dtype});
  if (e.end > e.begin) std::memcpy(t.raw_data(), data, e.end - e.begin);
  if (e.dtype == DType::Bool) {
    const uint8_t* p = static_cast<const uint8_t*>(t.raw_data());
    for (int64_t i = 0; i < t.numel(); ++i)
      WEFT_CHECK(p[i] <= 1, where, "entry '", name, "': BOOL data holds the byte value ", int(p[i]));
  }
  return t;
}

}  // namespace

SafetensorsFile safetensors_deserialize(const std::string& bytes, const std::string& source) {
  const std::string where = "safetensors: " + source + ": ";
  uint64_t hl = 0;
  if (bytes.size() >= 8)
    for (int i = 0; i < 8; ++i) hl |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  const int64_t data_size =
      bytes.size() >= 8 && hl <= bytes.size() - 8 ? static_cast<int64_t>(bytes.size() - 8 - hl) : 0;
  SafetensorsHeader h = parse_safetensors_header(bytes, source, data_size);
  SafetensorsFile out;
  out.metadata = h.metadata;
  for (const auto& [name, e] : h.entries)
    out.tensors[name] = tensor_from_bytes(e, bytes.data() + h.data_start + e.begin, where, name);
  return out;
}

SafetensorsHeader read_safetensors_header(const std::string& path) {
  const std::string source = "'" + path + "'";
  struct stat st {};
  WEFT_CHECK(::stat(path.c_str(), &st) == 0, "safetensors: cannot open ", source, ": ", std::strerror(errno));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  WEFT_CHECK(size >= 8, "safetensors: ", source, ": file is too short (", size,
             " bytes) to hold the 8-byte header length; truncated?");
  const std::string len = read_file_range(path, 0, 8);
  uint64_t hl = 0;
  for (int i = 0; i < 8; ++i) hl |= static_cast<uint64_t>(static_cast<unsigned char>(len[i])) << (8 * i);
  WEFT_CHECK(hl <= size - 8, "safetensors: ", source, ": header length ", hl, " exceeds the file size ", size,
             "; the file is truncated or not a safetensors file");
  WEFT_CHECK(hl <= (100u << 20), "safetensors: ", source, ": header length ", hl, " is larger than the 100 MB limit");
  return parse_safetensors_header(len + read_file_range(path, 8, hl), source, static_cast<int64_t>(size - 8 - hl));
}

Tensor read_safetensors_tensor(const std::string& path, const SafetensorsHeader& header, const std::string& name) {
  auto it = header.entries.find(name);
  WEFT_CHECK(it != header.entries.end(), "safetensors: '", path, "' has no tensor '", name, "'");
  const SafetensorsEntry& e = it->second;
  const std::string bytes = read_file_range(path, header.data_start + e.begin, e.end - e.begin);
  return tensor_from_bytes(e, bytes.data(), "safetensors: '" + path + "': ", name);
}

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::string bytes = safetensors_serialize(tensors, metadata);
  write_atomically(path, [&](std::ostream& os) { os.write(bytes.data(), static_cast<std::streamsize>(bytes.size())); });
}

SafetensorsFile load_safetensors(const std::string& path) {
  return safetensors_deserialize(read_file(path), "'" + path + "'");
}

}  // namespace weft::io
