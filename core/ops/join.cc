// Joining and splitting: cat, stack, split (by size / by sizes), chunk.
//
// Contract: cat promotes mixed dtypes like binary ops and requires equal sizes
// except along `dim` (the error names the offending tensor's index and both
// shapes). Its backward hands each input the narrow()ed slice of the gradient,
// converted back to the input's dtype. stack = cat of unsqueeze()d inputs.
// split/chunk return narrow() views of the input that share one node,
// "SplitBackward", whose backward is the cat of the pieces' gradients (zeros for
// pieces that got none): one allocation, where a node per piece would give
// each piece a zero-filled input-sized gradient and sum them; none when the
// gradients already lie side by side in one buffer (Note [split backward views]).
#include <numeric>

#include "core/autograd_meta.h"
#include "core/ops.h"
#include "core/ops/elementwise_util.h"
#include "core/tensor_impl.h"

namespace weft {

// Note [cat of legacy empties]: as in PyTorch, a 1-D tensor with no elements
// (shape [0], e.g. the empty start of a tensor grown by cat in a loop) is left
// out whatever the other tensors' shapes; its gradient is empty too. The first
// other tensor gives the shape; when every tensor is such an empty, so is the
// result.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  WEFT_CHECK(!tensors.empty(), "cat: expected a non-empty list of tensors");
  for (size_t i = 0; i < tensors.size(); ++i) WEFT_CHECK(tensors[i].defined(), "cat: tensor ", i, " is undefined");
  auto legacy_empty = [](const Tensor& t) { return t.dim() == 1 && t.numel() == 0; };
  size_t ref = 0;
  while (ref + 1 < tensors.size() && legacy_empty(tensors[ref])) ++ref;
  const Tensor& t0 = tensors[ref];
  WEFT_CHECK(t0.dim() > 0, "cat: zero-dimensional tensor (index ", ref, ") cannot be concatenated");
  int64_t d = wrap_dim("cat", dim, t0.dim());
  DType dt = t0.dtype();
  int64_t total = 0;
  std::vector<bool> skipped(tensors.size(), false);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    WEFT_CHECK(t.device() == t0.device(), "cat: tensor ", i, " is on ", t.device(), " but tensor ", ref, " is on ",
               t0.device());
    dt = promote_types(dt, t.dtype());
    if (i != ref && legacy_empty(t)) {
      skipped[i] = true;
      continue;
    }
    WEFT_CHECK(t.dim() > 0, "cat: zero-dimensional tensor (index ", i, ") cannot be concatenated");
    bool ok = t.dim() == t0.dim();
    for (int64_t k = 0; ok && k < t.dim(); ++k) ok = k == d || t.size(k) == t0.size(k);
    WEFT_CHECK(ok, "cat: tensor ", i, " has shape ", shape_str(t.sizes()), " but tensor ", ref, " has shape ",
               shape_str(t0.sizes()), "; sizes must match except in dimension ", d);
    total += t.size(d);
  }
  Shape out_shape = t0.sizes();
  out_shape[d] = total;
  Tensor out = empty(out_shape, {dt, t0.device()});
  std::vector<int64_t> offsets, lens;
  std::vector<DType> dtypes;
  {
    NoGradGuard ng;
    int64_t off = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
      const Tensor& t = tensors[i];
      const int64_t len = skipped[i] ? 0 : t.size(d);
      offsets.push_back(off);
      lens.push_back(len);
      dtypes.push_back(t.dtype());
      if (len > 0) {
        Tensor part = narrow(out, d, off, len);
        copy_(part, t.detach());
      }
      off += len;
    }
  }
  record_differentiable("CatBackward", tensors, {out},
                        [d, offsets, lens, dtypes, skipped](const std::vector<Tensor>& g) {
                          std::vector<Tensor> r;
                          for (size_t i = 0; i < offsets.size(); ++i) {
                            if (!is_floating(dtypes[i])) {
                              r.emplace_back();
                            } else if (skipped[i]) {
                              r.push_back(empty({0}, g[0].options().with_dtype(dtypes[i])));
                            } else {
                              r.push_back(narrow(g[0], d, offsets[i], lens[i]).to(dtypes[i]));
                            }
                          }
                          return r;
                        });
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  for (const Tensor& t : tensors) detail::check_devices("stack", {tensors[0], t});
  WEFT_CHECK(!tensors.empty(), "stack: expected a non-empty list of tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    WEFT_CHECK(tensors[i].defined(), "stack: tensor ", i, " is undefined");
    WEFT_CHECK(tensors[i].sizes() == tensors[0].sizes(), "stack: tensor ", i, " has shape ",
               shape_str(tensors[i].sizes()), " but tensor 0 has shape ", shape_str(tensors[0].sizes()),
               "; stack needs equal shapes");
  }
  int64_t d = wrap_dim("stack", dim, tensors[0].dim() + 1);
  std::vector<Tensor> us;
  us.reserve(tensors.size());
  for (const Tensor& t : tensors) us.push_back(unsqueeze(t, d));
  return cat(us, d);
}

namespace {
// Note [split backward views]: the pieces' gradients already lying side by
// side in one storage, in order along d (the CPU attention writes dq, dk, dv
// of q, k, v split from one (B, T, 3C) tensor into one such buffer), are
// joined as a view of that storage instead of copied by cat. Gradients are
// summed out of place (autograd/engine.cc), so the alias is never written.
Tensor join_grads(const std::vector<Tensor>& g, int64_t d) {
  bool adjacent = !g.empty();
  int64_t total = 0;
  for (size_t i = 0; adjacent && i < g.size(); ++i) {
    const Tensor& t = g[i];
    adjacent = t.defined() && t.dim() == g[0].dim() && t.dtype() == g[0].dtype() &&
               t.impl()->storage() == g[0].impl()->storage() && t.strides() == g[0].strides() &&
               t.storage_offset() == g[0].storage_offset() + total * g[0].stride(d);
    for (int64_t k = 0; adjacent && k < t.dim(); ++k) adjacent = k == d || t.size(k) == g[0].size(k);
    if (adjacent) total += t.size(d);
  }
  if (!adjacent) return cat(g, d);
  Shape sizes = g[0].sizes();
  sizes[d] = total;
  return make_view(g[0], sizes, g[0].strides(), g[0].storage_offset());
}

// Views of consecutive pieces of `sizes` along dim d, recorded as one node.
std::vector<Tensor> split_views(const Tensor& a, int64_t d, const std::vector<int64_t>& sizes) {
  std::vector<Tensor> out;
  {
    NoGradGuard no_grad;
    int64_t off = 0;
    for (int64_t s : sizes) {
      out.push_back(narrow(a, d, off, s));
      off += s;
    }
  }
  // A backward that builds a graph joins with cat, which autograd records
  // (Note [double backward]); the pieces then differentiate to any order.
  if (any_requires_grad({a}))
    record_differentiable("SplitBackward", {a}, out, [d](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{GradMode::is_enabled() ? cat(g, d) : join_grads(g, d)};
    });
  return out;
}
}  // namespace

std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim) {
  WEFT_CHECK(a.dim() > 0, "split: cannot split a 0-dim tensor");
  int64_t d = wrap_dim("split", dim, a.dim());
  int64_t n = a.size(d);
  WEFT_CHECK(split_size > 0 || (split_size == 0 && n == 0), "split: split_size must be positive, got ", split_size,
             " (shape ", shape_str(a.sizes()), ")");
  std::vector<int64_t> sizes;
  for (int64_t s = 0; s < n; s += split_size) sizes.push_back(std::min(split_size, n - s));
  if (n == 0) sizes.push_back(0);
  return split_views(a, d, sizes);
}

std::vector<Tensor> split(const Tensor& a, const std::vector<int64_t>& sizes, int64_t dim) {
  WEFT_CHECK(a.dim() > 0, "split: cannot split a 0-dim tensor");
  int64_t d = wrap_dim("split", dim, a.dim());
  int64_t total = 0;
  for (int64_t s : sizes) {
    WEFT_CHECK(s >= 0, "split: sizes must be non-negative, got ", shape_str(sizes));
    total += s;
  }
  WEFT_CHECK(total == a.size(d), "split: sizes ", shape_str(sizes), " sum to ", total, " but dimension ", d,
             " of shape ", shape_str(a.sizes()), " has size ", a.size(d));
  return split_views(a, d, sizes);
}

std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim) {
  WEFT_CHECK(chunks > 0, "chunk: chunks must be positive, got ", chunks);
  WEFT_CHECK(a.dim() > 0, "chunk: cannot chunk a 0-dim tensor");
  int64_t d = wrap_dim("chunk", dim, a.dim());
  int64_t n = a.size(d);
  return split(a, (n + chunks - 1) / chunks, d);
}

}  // namespace weft
