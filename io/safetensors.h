// safetensors: the Hugging Face tensor file format, read and written by weft.
//
// Layout: 8-byte little-endian header length N, N bytes of JSON mapping each
// tensor name to {"dtype", "shape", "data_offsets": [begin, end)} (offsets
// relative to the data section) plus an optional "__metadata__" string map,
// then the raw little-endian data. weft writes names in sorted order, pads the
// header with spaces to 8 bytes, and writes atomically (io/atomic_file.h).
// Loading validates everything (header length, JSON, dtypes, shapes, offsets
// in range, sizes matching shapes, no overlap, no holes) and reports the file
// and the offending tensor; it never reads out of bounds.
#pragma once

#include <map>
#include <string>

#include "core/tensor.h"

namespace weft::io {

struct SafetensorsFile {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;
};

// Encodes to bytes / decodes from bytes (`source` names the origin in errors).
std::string safetensors_serialize(const std::map<std::string, Tensor>& tensors,
                                  const std::map<std::string, std::string>& metadata = {});
SafetensorsFile safetensors_deserialize(const std::string& bytes, const std::string& source = "<memory>");

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});
SafetensorsFile load_safetensors(const std::string& path);

// Reading a file piece by piece (parallel/checkpoint/ loads only what a rank
// needs): a tensor's entry in the header (data_offsets relative to the data
// section, which starts at data_start = 8 + header length in the file).
struct SafetensorsEntry {
  DType dtype = DType::Float32;
  Shape shape;
  uint64_t begin = 0, end = 0;
};
struct SafetensorsHeader {
  uint64_t data_start = 0;
  std::map<std::string, SafetensorsEntry> entries;
  std::map<std::string, std::string> metadata;
};
// Parses and validates the header at the start of `bytes` (which may end
// after the header): the checks of safetensors_deserialize; offsets are
// checked against `data_size` (the data section's bytes) unless it is -1.
SafetensorsHeader parse_safetensors_header(const std::string& bytes, const std::string& source, int64_t data_size = -1);
// Reads only the header of the file at `path` (and checks it against the
// file's size); read_safetensors_tensor then reads only that tensor's bytes.
SafetensorsHeader read_safetensors_header(const std::string& path);
Tensor read_safetensors_tensor(const std::string& path, const SafetensorsHeader& header, const std::string& name);

// The safetensors dtype string for a weft dtype ("F32", "BF16", ...) and back.
std::string safetensors_dtype(DType d);
DType dtype_from_safetensors(const std::string& s, const std::string& source);

}  // namespace weft::io
