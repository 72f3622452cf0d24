// Fashion-MNIST (and MNIST, same format) from IDX files.
//
// Contract: load_fashion_mnist(dir, train) reads {train,t10k}-images-idx3-ubyte[.gz]
// and {train,t10k}-labels-idx1-ubyte[.gz] from `dir` and returns a TensorDataset
// of images float32 [N, 1, 28, 28] scaled to [0, 1] (byte / 255) and labels int64
// [N]. A missing directory or file is an error naming the path and how to get the
// data; images that are not [N, H, W] uint8, labels that are not [N] uint8, or
// differing N are errors.
#pragma once

#include <string>

#include "io/dataset.h"

namespace weft::io {

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

TensorDataset load_fashion_mnist(const std::string& dir = kFashionMnistDir, bool train = true);

// The same, from explicit image and label file paths (any IDX image size).
TensorDataset load_idx_classification(const std::string& images_path, const std::string& labels_path);

}  // namespace weft::io
