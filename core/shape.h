// Shape helpers: dim wrapping, contiguous strides, broadcasting, printing.
//
// Contract: every function that rejects input throws weft::Error naming the op
// (passed in as `op`) and the offending shapes or dims.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace weft {

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& s);  // "[2, 3]"

// Wraps a possibly negative dim into [0, ndim); errors if out of range.
int64_t wrap_dim(std::string_view op, int64_t dim, int64_t ndim);
// Wraps and deduplicates a dim list; an empty list means all dims when `empty_is_all`.
std::vector<int64_t> wrap_dims(std::string_view op, const std::vector<int64_t>& dims, int64_t ndim,
                               bool empty_is_all = true);

Shape contiguous_strides(const Shape& sizes);
int64_t numel_of(const Shape& sizes);
// NumPy broadcasting of two (or more) shapes; error names op and both shapes.
Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b);
Shape broadcast_shapes(std::string_view op, const std::vector<Shape>& shapes);
// Infers one -1 entry of `shape` for `numel` elements; error if impossible.
Shape infer_size(std::string_view op, const Shape& shape, int64_t numel);

}  // namespace weft
