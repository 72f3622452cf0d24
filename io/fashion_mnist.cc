// Fashion-MNIST loader (io/fashion_mnist.h).
#include "io/fashion_mnist.h"

#include <filesystem>

#include "core/ops.h"
#include "io/idx.h"

namespace weft::io {
namespace {

constexpr const char* kHint =
    "; install the Debian package (apt-get install dataset-fashion-mnist) or pass the directory holding the files "
    "(--data DIR)";

// `dir`/`name`.gz if present, else `dir`/`name`; error if neither exists.
std::string find_file(const std::string& dir, const std::string& name) {
  namespace fs = std::filesystem;
  std::error_code ec;
  WEFT_CHECK(fs::is_directory(dir, ec), "fashion-mnist: data directory '", dir, "' does not exist", kHint);
  const fs::path gz = fs::path(dir) / (name + ".gz"), raw = fs::path(dir) / name;
  if (fs::exists(gz, ec)) return gz.string();
  if (fs::exists(raw, ec)) return raw.string();
  WEFT_ERROR("fashion-mnist: '", gz.string(), "' not found (nor '", raw.string(), "')", kHint);
}

}  // namespace

TensorDataset load_idx_classification(const std::string& images_path, const std::string& labels_path) {
  Tensor images = read_idx(images_path);
  Tensor labels = read_idx(labels_path);
  WEFT_CHECK(images.dtype() == DType::UInt8 && images.dim() == 3, "fashion-mnist: '", images_path,
             "' should hold uint8 images [N, H, W] but holds ", images.dtype(), " ", shape_str(images.sizes()));
  WEFT_CHECK(labels.dtype() == DType::UInt8 && labels.dim() == 1, "fashion-mnist: '", labels_path,
             "' should hold uint8 labels [N] but holds ", labels.dtype(), " ", shape_str(labels.sizes()));
  WEFT_CHECK(images.size(0) == labels.size(0), "fashion-mnist: '", images_path, "' has ", images.size(0),
             " images but '", labels_path, "' has ", labels.size(0), " labels");
  const int64_t n = images.size(0), h = images.size(1), w = images.size(2);
  Tensor x = empty({n, 1, h, w}, {DType::Float32});  // [N, 1, H, W]
  Tensor y = empty({n}, {DType::Int64});             // [N]
  const uint8_t* src = images.data_ptr<uint8_t>();
  float* dst = x.data_ptr<float>();
  const int64_t total = images.numel();
  for (int64_t i = 0; i < total; ++i) dst[i] = static_cast<float>(src[i]) / 255.0f;
  const uint8_t* ls = labels.data_ptr<uint8_t>();
  int64_t* ld = y.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) ld[i] = ls[i];
  return TensorDataset(x, y);
}

TensorDataset load_fashion_mnist(const std::string& dir, bool train) {
  const std::string split = train ? "train" : "t10k";
  const std::string images = find_file(dir, split + "-images-idx3-ubyte");
  const std::string labels = find_file(dir, split + "-labels-idx1-ubyte");
  return load_idx_classification(images, labels);
}

}  // namespace weft::io
