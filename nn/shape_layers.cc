// Unflatten and the padding layers' shared forward (nn/shape_layers.h).
#include "nn/shape_layers.h"

#include "core/ops.h"

namespace weft::nn {

Unflatten::Unflatten(int64_t dim, Shape sizes) : Module("Unflatten"), dim(dim), sizes(std::move(sizes)) {
  WEFT_CHECK(!this->sizes.empty(), "Unflatten: sizes must not be empty");
  int inferred = 0;
  for (int64_t s : this->sizes) {
    WEFT_CHECK(s > 0 || s == -1, "Unflatten: sizes ", shape_str(this->sizes), " may hold positive sizes and one -1");
    inferred += s == -1;
  }
  WEFT_CHECK(inferred <= 1, "Unflatten: only one size in ", shape_str(this->sizes), " can be inferred (-1)");
}

Tensor Unflatten::forward(const Tensor& x) {
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  WEFT_CHECK(d >= 0 && d < x.dim(), "Unflatten: dim ", dim, " is out of range for input shape ", shape_str(x.sizes()));
  int64_t known = 1;
  for (int64_t s : sizes) known *= s == -1 ? 1 : s;
  Shape split = sizes;
  for (int64_t& s : split)
    if (s == -1) s = known > 0 ? x.size(d) / known : 0;
  int64_t product = 1;
  for (int64_t s : split) product *= s;
  WEFT_CHECK(product == x.size(d), "Unflatten: sizes ", shape_str(sizes), " don't multiply up to the size ", x.size(d),
             " of dim ", d, " of input shape ", shape_str(x.sizes()));
  Shape out(x.sizes().begin(), x.sizes().begin() + d);
  out.insert(out.end(), split.begin(), split.end());
  out.insert(out.end(), x.sizes().begin() + d + 1, x.sizes().end());
  return x.reshape(out);
}

std::string Unflatten::extra_repr() const {
  return "dim=" + std::to_string(dim) + ", unflattened_size=" + shape_str(sizes);
}

Pad::Pad(const char* type, int spatial_dims, std::vector<int64_t> padding, PadMode mode, double value)
    : Module(type), padding(std::move(padding)), mode(mode), value(value), spatial_dims_(spatial_dims) {}

Tensor Pad::forward(const Tensor& x) {
  const int64_t lo = spatial_dims_ + 1, hi = spatial_dims_ + 2;
  WEFT_CHECK(x.dim() == lo || x.dim() == hi, type_name(), ": expected a ", lo, "-D or ", hi, "-D input, got shape ",
             shape_str(x.sizes()));
  return pad(x, padding, mode, value);
}

std::string Pad::extra_repr() const {
  std::string r = "padding=(";
  for (size_t i = 0; i < padding.size(); ++i) r += (i ? ", " : "") + std::to_string(padding[i]);
  r += ")";
  if (mode == PadMode::Constant && value != 0.0) r += ", value=" + std::to_string(value);
  return r;
}

}  // namespace weft::nn
