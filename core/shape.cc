#include "core/shape.h"

#include <algorithm>
#include <sstream>

#include "core/error.h"

namespace weft {

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << "]";
  return os.str();
}

int64_t wrap_dim(std::string_view op, int64_t dim, int64_t ndim) {
  int64_t n = std::max<int64_t>(ndim, 1);  // scalars accept dim 0 / -1
  WEFT_CHECK(dim >= -n && dim < n, op, ": dim ", dim, " out of range for a tensor with ", ndim, " dims (expected in [",
             -n, ", ", n - 1, "])");
  return dim < 0 ? dim + n : dim;
}

std::vector<int64_t> wrap_dims(std::string_view op, const std::vector<int64_t>& dims, int64_t ndim, bool empty_is_all) {
  std::vector<int64_t> out;
  if (dims.empty() && empty_is_all) {
    for (int64_t i = 0; i < ndim; ++i) out.push_back(i);
    return out;
  }
  std::vector<bool> seen(std::max<int64_t>(ndim, 1), false);
  for (int64_t d : dims) {
    int64_t w = wrap_dim(op, d, ndim);
    WEFT_CHECK(!seen[w], op, ": dim ", d, " appears more than once in the dim list");
    seen[w] = true;
    out.push_back(w);
  }
  std::sort(out.begin(), out.end());
  if (ndim == 0) out.clear();
  return out;
}

Shape contiguous_strides(const Shape& sizes) {
  Shape st(sizes.size());
  int64_t acc = 1;
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= std::max<int64_t>(sizes[i], 1);
  }
  return st;
}

int64_t numel_of(const Shape& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes)
    if (__builtin_mul_overflow(n, s, &n))
      WEFT_ERROR("shape ", shape_str(sizes), " has more elements than an int64 counts (2^63 - 1)");
  return n;
}

Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    WEFT_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", shape_str(a), " and ", shape_str(b),
               " cannot be broadcast together (dim ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape broadcast_shapes(std::string_view op, const std::vector<Shape>& shapes) {
  Shape out;
  for (const auto& s : shapes) out = broadcast_shapes(op, out, s);
  return out;
}

Shape infer_size(std::string_view op, const Shape& shape, int64_t numel) {
  Shape out = shape;
  int64_t infer = -1, prod = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      WEFT_CHECK(infer < 0, op, ": only one dimension can be inferred (-1) in shape ", shape_str(shape));
      infer = static_cast<int64_t>(i);
    } else {
      WEFT_CHECK(shape[i] >= 0, op, ": invalid size ", shape[i], " in shape ", shape_str(shape));
      WEFT_CHECK(!__builtin_mul_overflow(prod, shape[i], &prod), op, ": shape ", shape_str(shape),
                 " is invalid for input of size ", numel, " (its sizes multiply past 2^63 - 1)");
    }
  }
  if (infer >= 0) {
    WEFT_CHECK(prod != 0 && numel % prod == 0, op, ": shape ", shape_str(shape), " is invalid for input of size ",
               numel);
    out[infer] = numel / prod;
  } else {
    WEFT_CHECK(prod == numel, op, ": shape ", shape_str(shape), " is invalid for input of size ", numel);
  }
  return out;
}

}  // namespace weft
