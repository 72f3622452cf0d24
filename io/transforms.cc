// Image transforms (io/transforms.h): direct loops over contiguous data.
#include "io/transforms.h"

#include <cstring>

#include "core/ops.h"

namespace weft::io {

Tensor normalize(const Tensor& x, const std::vector<double>& mean, const std::vector<double>& std) {
  WEFT_CHECK(x.defined(), "normalize: input is undefined");
  WEFT_CHECK(x.dim() == 3 || x.dim() == 4, "normalize: expected an image [C, H, W] or a batch [N, C, H, W], got shape ",
             shape_str(x.sizes()));
  WEFT_CHECK(x.dtype() == DType::Float32 || x.dtype() == DType::Float64,
             "normalize: expected a float32 or float64 image, got ", x.dtype());
  WEFT_CHECK(x.device() == kCPU, "normalize: expected a CPU tensor, got one on ", x.device());
  const int64_t C = x.size(-3);
  WEFT_CHECK(mean.size() == static_cast<size_t>(C) || mean.size() == 1, "normalize: ", mean.size(),
             " means for an image with ", C, " channels (shape ", shape_str(x.sizes()), ")");
  WEFT_CHECK(std.size() == static_cast<size_t>(C) || std.size() == 1, "normalize: ", std.size(),
             " standard deviations for an image with ", C, " channels (shape ", shape_str(x.sizes()), ")");
  for (double s : std) WEFT_CHECK(s != 0.0, "normalize: std must be non-zero");
  Tensor c = x.contiguous();
  Tensor out = empty(x.sizes(), {x.dtype()});
  const int64_t inner = x.size(-1) * x.size(-2);
  const int64_t outer = C == 0 || inner == 0 ? 0 : x.numel() / (C * inner);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* src = static_cast<const T*>(c.raw_data());
    T* dst = static_cast<T*>(out.raw_data());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t ch = 0; ch < C; ++ch) {
        const T m = static_cast<T>(mean.size() == 1 ? mean[0] : mean[ch]);
        const T s = static_cast<T>(std.size() == 1 ? std[0] : std[ch]);
        const int64_t base = (o * C + ch) * inner;
        for (int64_t i = 0; i < inner; ++i) dst[base + i] = (src[base + i] - m) / s;
      }
  };
  if (x.dtype() == DType::Float32) run(float{});
  else run(double{});
  return out;
}

Tensor crop_padded(const Tensor& x, int64_t top, int64_t left, int64_t height, int64_t width, int64_t padding) {
  WEFT_CHECK(x.defined(), "crop: input is undefined");
  WEFT_CHECK(x.dim() >= 2, "crop: expected an image [..., H, W], got shape ", shape_str(x.sizes()));
  WEFT_CHECK(x.device() == kCPU, "crop: expected a CPU tensor, got one on ", x.device());
  WEFT_CHECK(padding >= 0, "crop: padding must be >= 0, got ", padding);
  const int64_t H = x.size(-2), W = x.size(-1);
  WEFT_CHECK(height >= 1 && width >= 1 && height <= H + 2 * padding && width <= W + 2 * padding, "crop: a ", height,
             "x", width, " crop does not fit an image of shape ", shape_str(x.sizes()), " padded by ", padding);
  WEFT_CHECK(top >= 0 && left >= 0 && top + height <= H + 2 * padding && left + width <= W + 2 * padding,
             "crop: window at (", top, ", ", left, ") of size ", height, "x", width, " is outside the padded image ",
             H + 2 * padding, "x", W + 2 * padding);
  Shape out_shape = x.sizes();
  out_shape[out_shape.size() - 2] = height;
  out_shape[out_shape.size() - 1] = width;
  Tensor c = x.contiguous();
  Tensor out = zeros(out_shape, {x.dtype()});
  const size_t es = x.element_size();
  const int64_t planes = H * W == 0 ? 0 : x.numel() / (H * W);
  const char* src = static_cast<const char*>(c.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  // Output column j reads source column left + j - padding; the valid ones are contiguous.
  const int64_t j0 = std::max<int64_t>(0, padding - left), j1 = std::min<int64_t>(width, W + padding - left);
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t i = 0; i < height; ++i) {
      const int64_t si = top + i - padding;
      if (si < 0 || si >= H || j1 <= j0) continue;
      const int64_t sj = left + j0 - padding;
      std::memcpy(dst + ((p * height + i) * width + j0) * es, src + ((p * H + si) * W + sj) * es,
                  static_cast<size_t>(j1 - j0) * es);
    }
  return out;
}

Tensor horizontal_flip(const Tensor& x) {
  WEFT_CHECK(x.defined(), "horizontal_flip: input is undefined");
  WEFT_CHECK(x.dim() >= 1, "horizontal_flip: expected an image [..., H, W], got a 0-dim tensor");
  WEFT_CHECK(x.device() == kCPU, "horizontal_flip: expected a CPU tensor, got one on ", x.device());
  Tensor c = x.contiguous();
  Tensor out = empty(x.sizes(), {x.dtype()});
  const int64_t W = x.size(-1);
  const int64_t rows = W == 0 ? 0 : x.numel() / W;
  const size_t es = x.element_size();
  const char* src = static_cast<const char*>(c.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < W; ++j) std::memcpy(dst + (r * W + j) * es, src + (r * W + (W - 1 - j)) * es, es);
  return out;
}

Normalize::Normalize(std::vector<double> m, std::vector<double> s) : mean(std::move(m)), std(std::move(s)) {
  WEFT_CHECK(!mean.empty() && !std.empty(), "Normalize: mean and std must not be empty");
  for (double v : std) WEFT_CHECK(v != 0.0, "Normalize: std must be non-zero");
}

Tensor Normalize::operator()(const Tensor& x, Generator&) const { return normalize(x, mean, std); }

RandomCrop::RandomCrop(int64_t h, int64_t w, int64_t pad) : height(h), width(w), padding(pad) {
  WEFT_CHECK(h >= 1 && w >= 1, "RandomCrop: size must be positive, got ", h, "x", w);
  WEFT_CHECK(pad >= 0, "RandomCrop: padding must be >= 0, got ", pad);
}

Tensor RandomCrop::operator()(const Tensor& x, Generator& gen) const {
  WEFT_CHECK(x.defined() && x.dim() >= 2, "RandomCrop: expected an image [..., H, W]");
  const int64_t H = x.size(-2), W = x.size(-1);
  WEFT_CHECK(height <= H + 2 * padding && width <= W + 2 * padding, "RandomCrop: a ", height, "x", width,
             " crop does not fit an image of shape ", shape_str(x.sizes()), " padded by ", padding);
  PhiloxReader r(gen.reserve(2));
  const int64_t top = static_cast<int64_t>(r.value(0) % static_cast<uint64_t>(H + 2 * padding - height + 1));
  const int64_t left = static_cast<int64_t>(r.value(1) % static_cast<uint64_t>(W + 2 * padding - width + 1));
  return crop_padded(x, top, left, height, width, padding);
}

RandomHorizontalFlip::RandomHorizontalFlip(double prob) : p(prob) {
  WEFT_CHECK(prob >= 0.0 && prob <= 1.0, "RandomHorizontalFlip: p must be in [0, 1], got ", prob);
}

Tensor RandomHorizontalFlip::operator()(const Tensor& x, Generator& gen) const {
  PhiloxReader r(gen.reserve(1));
  if (static_cast<double>(uniform_float(r.value(0))) < p) return horizontal_flip(x);
  return x.contiguous();
}

Tensor Compose::operator()(const Tensor& x, Generator& gen) const {
  Tensor y = x;
  for (const auto& t : transforms) y = t(y, gen);
  return y;
}

ExampleTransform on_data(TensorTransform t) {
  WEFT_CHECK(t != nullptr, "on_data: transform is empty");
  return [t = std::move(t)](const Example& e, Generator& gen) { return Example{t(e.data, gen), e.target}; };
}

}  // namespace weft::io
