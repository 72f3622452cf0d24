// IDX files (the MNIST / Fashion-MNIST format), raw or gzip-compressed.
//
// Contract: read_idx returns a contiguous CPU tensor with the file's shape:
// uint8 data -> UInt8, int32 -> Int32, float32 -> Float32, float64 -> Float64
// (int8/int16 are widened to Int32). A missing, truncated or malformed file is
// reported with the path and what is wrong; nothing is read past the data.
#pragma once

#include <string>

#include "core/tensor.h"

namespace weft::io {

Tensor read_idx(const std::string& path);

}  // namespace weft::io
