// View ops: results share storage with the input (no copy), and their
// backward maps the gradient back to the input's geometry.
#include <algorithm>
#include <numeric>

#include "core/autograd_meta.h"
#include "core/ops.h"

namespace weft {
namespace {

// Strides for viewing a tensor of (sizes, strides) as `shape` without a copy,
// or nullopt when the memory layout does not allow it (PyTorch's computeStride).
std::optional<Shape> view_strides(const Shape& sizes, const Shape& strides, const Shape& shape) {
  int64_t numel = numel_of(sizes);
  if (numel == 0 || sizes.empty()) return contiguous_strides(shape);
  Shape out(shape.size());
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base_stride = strides.empty() ? 1 : strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    if (d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

// Every view's backward is composed of ops autograd records (Note [double
// backward]); those of slice, select and diagonal through embed_grad.
void record_view(const char* name, const Tensor& in, const Tensor& out, FunctionNode::Backward bw) {
  record_differentiable(name, {in}, {out}, std::move(bw));
}

}  // namespace

Tensor view(const Tensor& t, const Shape& shape) {
  Shape s = infer_size("view", shape, t.numel());
  auto st = view_strides(t.sizes(), t.strides(), s);
  WEFT_CHECK(st.has_value(), "view: cannot view a tensor of shape ", shape_str(t.sizes()), " with strides ",
             shape_str(t.strides()), " as shape ", shape_str(s),
             ": the memory is not laid out compatibly; use reshape() (which copies) or contiguous() first");
  Tensor out = make_view(t, s, *st, t.storage_offset());
  Shape in = t.sizes();
  record_view("ViewBackward", t, out,
              [in](const std::vector<Tensor>& g) { return std::vector<Tensor>{reshape(g[0], in)}; });
  return out;
}

Tensor reshape(const Tensor& t, const Shape& shape) {
  Shape s = infer_size("reshape", shape, t.numel());
  if (view_strides(t.sizes(), t.strides(), s)) return view(t, s);
  return view(clone(t), s);
}

Tensor flatten(const Tensor& t, int64_t start_dim, int64_t end_dim) {
  if (t.dim() == 0) return reshape(t, {1});
  int64_t s = wrap_dim("flatten", start_dim, t.dim()), e = wrap_dim("flatten", end_dim, t.dim());
  WEFT_CHECK(s <= e, "flatten: start_dim ", start_dim, " must not come after end_dim ", end_dim);
  Shape out;
  for (int64_t i = 0; i < s; ++i) out.push_back(t.size(i));
  int64_t m = 1;
  for (int64_t i = s; i <= e; ++i) m *= t.size(i);
  out.push_back(m);
  for (int64_t i = e + 1; i < t.dim(); ++i) out.push_back(t.size(i));
  return reshape(t, out);
}

Tensor transpose(const Tensor& t, int64_t d0, int64_t d1) {
  int64_t a = wrap_dim("transpose", d0, t.dim()), b = wrap_dim("transpose", d1, t.dim());
  Shape sz = t.sizes(), st = t.strides();
  if (t.dim() > 0) {
    std::swap(sz[a], sz[b]);
    std::swap(st[a], st[b]);
  }
  Tensor out = make_view(t, sz, st, t.storage_offset());
  record_view("TransposeBackward", t, out,
              [a, b](const std::vector<Tensor>& g) { return std::vector<Tensor>{transpose(g[0], a, b)}; });
  return out;
}

Tensor permute(const Tensor& t, const std::vector<int64_t>& dims) {
  WEFT_CHECK(static_cast<int64_t>(dims.size()) == t.dim(), "permute: got ", dims.size(), " dims for a tensor with ",
             t.dim(), " dims (shape ", shape_str(t.sizes()), ")");
  std::vector<int64_t> w = wrap_dims("permute", dims, t.dim(), false);  // checks duplicates
  (void)w;
  Shape sz(t.dim()), st(t.dim());
  std::vector<int64_t> inv(t.dim());
  for (int64_t i = 0; i < t.dim(); ++i) {
    int64_t d = wrap_dim("permute", dims[i], t.dim());
    sz[i] = t.size(d);
    st[i] = t.stride(d);
    inv[d] = i;
  }
  Tensor out = make_view(t, sz, st, t.storage_offset());
  record_view("PermuteBackward", t, out,
              [inv](const std::vector<Tensor>& g) { return std::vector<Tensor>{permute(g[0], inv)}; });
  return out;
}

// Gradient of a view that selects part of the input: scatter into zeros. It
// is linear in g, and its own backward is the same view of the incoming
// gradient, so it differentiates to any order (Note [double backward]).
// `same_view` captures by value: the node recorded here outlives the caller.
static std::vector<Tensor> embed_grad(const Tensor& g, const Shape& in_sizes,
                                      std::function<Tensor(const Tensor&)> same_view) {
  Tensor z = zeros(in_sizes, g.options());
  {
    NoGradGuard ng;
    Tensor part = same_view(z);
    copy_(part, g);
  }
  record_differentiable("EmbedBackward", {g}, {z},
                        [same_view](const std::vector<Tensor>& gg) { return std::vector<Tensor>{same_view(gg[0])}; });
  return {z};
}

Tensor slice(const Tensor& t, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) {
  WEFT_CHECK(t.dim() > 0, "slice: cannot slice a 0-dim tensor");
  int64_t d = wrap_dim("slice", dim, t.dim());
  WEFT_CHECK(step > 0, "slice: step must be positive, got ", step);
  int64_t n = t.size(d);
  int64_t s = start.value_or(0), e = end.value_or(n);
  if (s < 0) s += n;
  if (e < 0) e += n;
  s = std::clamp<int64_t>(s, 0, n);
  e = std::clamp<int64_t>(e, s, n);
  Shape sz = t.sizes(), st = t.strides();
  sz[d] = (e - s + step - 1) / step;
  st[d] = t.stride(d) * step;
  Tensor out = make_view(t, sz, st, t.storage_offset() + s * t.stride(d));
  Shape in = t.sizes();
  record_view("SliceBackward", t, out, [in, d, s, e, step](const std::vector<Tensor>& g) {
    return embed_grad(g[0], in, [d, s, e, step](const Tensor& z) { return slice(z, d, s, e, step); });
  });
  return out;
}

Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length) {
  WEFT_CHECK(t.dim() > 0, "narrow: cannot narrow a 0-dim tensor");
  int64_t d = wrap_dim("narrow", dim, t.dim());
  int64_t n = t.size(d);
  if (start < 0) start += n;
  WEFT_CHECK(start >= 0 && length >= 0 && start + length <= n, "narrow: start ", start, " + length ", length,
             " exceeds dimension ", d, " of size ", n, " (shape ", shape_str(t.sizes()), ")");
  return slice(t, d, start, start + length, 1);
}

Tensor select(const Tensor& t, int64_t dim, int64_t index) {
  WEFT_CHECK(t.dim() > 0, "select: cannot select from a 0-dim tensor");
  int64_t d = wrap_dim("select", dim, t.dim());
  int64_t n = t.size(d);
  WEFT_CHECK(index >= -n && index < n, "select: index ", index, " out of range for dimension ", d, " of size ", n,
             " (shape ", shape_str(t.sizes()), ")");
  if (index < 0) index += n;
  Shape sz = t.sizes(), st = t.strides();
  int64_t off = t.storage_offset() + index * st[d];
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  Tensor out = make_view(t, sz, st, off);
  Shape in = t.sizes();
  record_view("SelectBackward", t, out, [in, d, index](const std::vector<Tensor>& g) {
    return embed_grad(g[0], in, [d, index](const Tensor& z) { return select(z, d, index); });
  });
  return out;
}

Tensor diagonal(const Tensor& t, int64_t offset, int64_t dim1, int64_t dim2) {
  WEFT_CHECK(t.dim() >= 2, "diagonal: expected a tensor of at least 2 dims, got shape ", shape_str(t.sizes()));
  const int64_t d1 = wrap_dim("diagonal", dim1, t.dim()), d2 = wrap_dim("diagonal", dim2, t.dim());
  WEFT_CHECK(d1 != d2, "diagonal: dim1 and dim2 are both dim ", d1, " of shape ", shape_str(t.sizes()));
  Shape sz = t.sizes(), st = t.strides();
  int64_t off = t.storage_offset();
  // offset > 0: above the main diagonal (along dim2), < 0: below it
  const int64_t len =
      std::max<int64_t>(offset >= 0 ? std::min(sz[d1], sz[d2] - offset) : std::min(sz[d1] + offset, sz[d2]), 0);
  if (len > 0) off += offset >= 0 ? offset * st[d2] : -offset * st[d1];
  const int64_t step = st[d1] + st[d2];
  sz.erase(sz.begin() + std::max(d1, d2));
  sz.erase(sz.begin() + std::min(d1, d2));
  st.erase(st.begin() + std::max(d1, d2));
  st.erase(st.begin() + std::min(d1, d2));
  sz.push_back(len);
  st.push_back(step);
  Tensor out = make_view(t, sz, st, off);
  Shape in = t.sizes();
  record_view("DiagonalBackward", t, out, [in, offset, d1, d2](const std::vector<Tensor>& g) {
    return embed_grad(g[0], in, [offset, d1, d2](const Tensor& z) { return diagonal(z, offset, d1, d2); });
  });
  return out;
}

Tensor expand(const Tensor& t, const Shape& sizes) {
  WEFT_CHECK(static_cast<int64_t>(sizes.size()) >= t.dim(), "expand: the number of sizes (", sizes.size(),
             ") must be at least the tensor's dims (", t.dim(), "), shape ", shape_str(t.sizes()));
  int64_t lead = static_cast<int64_t>(sizes.size()) - t.dim();
  Shape sz(sizes.size()), st(sizes.size());
  for (int64_t i = 0; i < static_cast<int64_t>(sizes.size()); ++i) {
    if (i < lead) {
      WEFT_CHECK(sizes[i] >= 0, "expand: size -1 is not allowed in a new leading dim (sizes ", shape_str(sizes), ")");
      sz[i] = sizes[i];
      st[i] = 0;
      continue;
    }
    int64_t have = t.size(i - lead);
    int64_t want = sizes[i] == -1 ? have : sizes[i];
    WEFT_CHECK(have == want || have == 1, "expand: the expanded size ", want, " must match the existing size ", have,
               " at dim ", i, " (tensor shape ", shape_str(t.sizes()), ", target ", shape_str(sizes), ")");
    sz[i] = want;
    st[i] = have == want ? t.stride(i - lead) : 0;
  }
  if (sz == t.sizes()) return t;
  Tensor out = make_view(t, sz, st, t.storage_offset());
  Shape in = t.sizes();
  record_view("ExpandBackward", t, out,
              [in](const std::vector<Tensor>& g) { return std::vector<Tensor>{sum_to(g[0], in)}; });
  return out;
}

Tensor squeeze(const Tensor& t) {
  Shape sz;
  for (int64_t s : t.sizes())
    if (s != 1) sz.push_back(s);
  return sz.size() == t.sizes().size() ? t : reshape(t, sz);
}

Tensor squeeze(const Tensor& t, int64_t dim) {
  if (t.dim() == 0) return t;
  int64_t d = wrap_dim("squeeze", dim, t.dim());
  if (t.size(d) != 1) return t;
  Shape sz = t.sizes(), st = t.strides();
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  Tensor out = make_view(t, sz, st, t.storage_offset());
  Shape in = t.sizes();
  record_view("SqueezeBackward", t, out,
              [in](const std::vector<Tensor>& g) { return std::vector<Tensor>{reshape(g[0], in)}; });
  return out;
}

Tensor unsqueeze(const Tensor& t, int64_t dim) {
  int64_t d = wrap_dim("unsqueeze", dim, t.dim() + 1);
  Shape sz = t.sizes(), st = t.strides();
  int64_t new_stride = d < t.dim() ? sz[d] * st[d] : 1;
  sz.insert(sz.begin() + d, 1);
  st.insert(st.begin() + d, new_stride);
  Tensor out = make_view(t, sz, st, t.storage_offset());
  Shape in = t.sizes();
  record_view("UnsqueezeBackward", t, out,
              [in](const std::vector<Tensor>& g) { return std::vector<Tensor>{reshape(g[0], in)}; });
  return out;
}

Tensor sum_to(const Tensor& grad, const Shape& sizes) {
  if (grad.sizes() == sizes) return grad;
  int64_t lead = grad.dim() - static_cast<int64_t>(sizes.size());
  WEFT_CHECK(lead >= 0, "sum_to: cannot reduce shape ", shape_str(grad.sizes()), " to ", shape_str(sizes));
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < grad.dim(); ++i) {
    if (i < lead) dims.push_back(i);
    else if (sizes[i - lead] == 1 && grad.size(i) != 1) dims.push_back(i);
  }
  Tensor r = dims.empty() ? grad : sum(grad, dims, true);
  return reshape(r, sizes);
}

}  // namespace weft
