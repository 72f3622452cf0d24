// Indexing: gather, scatter_add, index_select, index_add, one_hot, masked_fill
// (+ in place), tril/triu.
//
// Contract: index tensors must be int64 or int32 (converted to contiguous int64
// here); every index is range-checked serially before any kernel runs, so a bad
// index raises weft::Error naming the op, the index and the size, and kernels
// never read or write out of bounds. Negative indices are rejected. Backward:
// gather <-> scatter_add, index_select <-> index_add, masked_fill zeroes the
// filled positions, tril/triu mask the gradient the same way.
#include "core/kernels/index.h"

#include <algorithm>
#include <array>

#include "core/autograd_meta.h"
#include "core/cpu/loops.h"
#include "core/dispatch.h"
#include "core/ops.h"
#include "core/ops/elementwise_util.h"
#include "core/parallel.h"

namespace weft {

GatherKernel& gather_table() {
  static GatherKernel t("gather");
  return t;
}
ScatterKernel& scatter_add_table() {
  static ScatterKernel t("scatter_add");
  return t;
}
IndexSelectKernel& index_select_table() {
  static IndexSelectKernel t("index_select");
  return t;
}
IndexAddKernel& index_add_table() {
  static IndexAddKernel t("index_add");
  return t;
}
MaskedFillKernel& masked_fill_table() {
  static MaskedFillKernel t("masked_fill");
  return t;
}
TriKernel& tri_table() {
  static TriKernel t("tril/triu");
  return t;
}

namespace {

// Walks flat positions [b, e) of `shape` row-major, keeping K strided offsets.
template <size_t K, typename F>
void walk(const Shape& shape, const std::array<const int64_t*, K>& strides, int64_t b, int64_t e, F&& f) {
  if (b >= e) return;
  const int64_t nd = static_cast<int64_t>(shape.size());
  std::vector<int64_t> c(nd, 0);
  std::array<int64_t, K> off{};
  int64_t rem = b;
  for (int64_t d = nd - 1; d >= 0; --d) {
    c[d] = rem % shape[d];
    rem /= shape[d];
    for (size_t k = 0; k < K; ++k) off[k] += c[d] * strides[k][d];
  }
  for (int64_t i = b; i < e; ++i) {
    f(off);
    for (int64_t d = nd - 1; d >= 0; --d) {
      ++c[d];
      for (size_t k = 0; k < K; ++k) off[k] += strides[k][d];
      if (c[d] < shape[d]) break;
      for (size_t k = 0; k < K; ++k) off[k] -= strides[k][d] * shape[d];
      c[d] = 0;
    }
  }
}

template <typename T>
void cpu_gather(const Tensor& out, const Tensor& self, const Tensor& index, int64_t dim) {
  Shape st = self.strides();
  const int64_t dstride = st[dim];
  st[dim] = 0;
  Shape ost = out.strides(), ist = index.strides();
  const T* src = self.data_ptr<T>();
  const int64_t* idx = index.data_ptr<int64_t>();
  T* dst = out.data_ptr<T>();
  std::array<const int64_t*, 3> s{ost.data(), st.data(), ist.data()};
  parallel_for(0, out.numel(), kGrainSize / 4, [&](int64_t b, int64_t e) {
    walk<3>(out.sizes(), s, b, e,
            [&](const std::array<int64_t, 3>& o) { dst[o[0]] = src[o[1] + idx[o[2]] * dstride]; });
  });
}

// Serial: several index entries may hit the same output element.
template <typename T>
void cpu_scatter_add(const Tensor& out, const Tensor& index, const Tensor& src, int64_t dim) {
  Shape ost = out.strides();
  const int64_t dstride = ost[dim];
  ost[dim] = 0;
  Shape sst = src.strides(), ist = index.strides();
  T* dst = out.data_ptr<T>();
  const T* sp = src.data_ptr<T>();
  const int64_t* idx = index.data_ptr<int64_t>();
  std::array<const int64_t*, 3> s{ost.data(), sst.data(), ist.data()};
  walk<3>(index.sizes(), s, 0, index.numel(), [&](const std::array<int64_t, 3>& o) {
    T& d = dst[o[0] + idx[o[2]] * dstride];
    d = static_cast<T>(static_cast<opmath_t<T>>(d) + static_cast<opmath_t<T>>(sp[o[1]]));
  });
}

// out (outer, n, inner) = self (outer, size, inner)[:, index, :]
template <typename T>
void cpu_index_select(const Tensor& out, const Tensor& self, const Tensor& index) {
  const int64_t outer = out.size(0), n = out.size(1), inner = out.size(2), size = self.size(1);
  const T* src = self.data_ptr<T>();
  const int64_t* idx = index.data_ptr<int64_t>();
  T* dst = out.data_ptr<T>();
  parallel_for(0, outer * n, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(inner, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      int64_t o = r / n, i = r % n;
      std::copy_n(src + (o * size + idx[i]) * inner, inner, dst + r * inner);
    }
  });
}

// out (outer, size, inner)[:, index[i], :] += src (outer, n, inner)[:, i, :].
// Parallel over (outer, column block) pairs; the i loop stays serial (collisions).
template <typename T>
void cpu_index_add(const Tensor& out, const Tensor& index, const Tensor& src) {
  const int64_t outer = src.size(0), n = src.size(1), inner = src.size(2), size = out.size(1);
  const int64_t cb = 512, nblk = (inner + cb - 1) / cb;
  T* dst = out.data_ptr<T>();
  const T* sp = src.data_ptr<T>();
  const int64_t* idx = index.data_ptr<int64_t>();
  parallel_for(0, outer * nblk, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(n * cb, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t w = b; w < e; ++w) {
                   int64_t o = w / nblk, j0 = (w % nblk) * cb, j1 = std::min(inner, j0 + cb);
                   for (int64_t i = 0; i < n; ++i) {
                     T* d = dst + (o * size + idx[i]) * inner;
                     const T* s = sp + (o * n + i) * inner;
                     for (int64_t j = j0; j < j1; ++j)
                       d[j] = static_cast<T>(static_cast<opmath_t<T>>(d[j]) + static_cast<opmath_t<T>>(s[j]));
                   }
                 }
               });
}

template <typename T>
void cpu_masked_fill(const Tensor& out, const Tensor& self, const Tensor& mask, const Scalar& v) {
  using M = opmath_t<T>;
  M val = static_cast<M>(v.to<T>());
  cpu::elementwise<T, T, bool>(out, {self, mask}, [val](M x, bool m) { return m ? val : x; });
}

template <typename T>
void cpu_tri(const Tensor& out, int64_t diagonal, bool lower) {
  const int64_t R = out.size(1), C = out.size(2);
  T* p = out.data_ptr<T>();
  parallel_for(0, out.size(0) * R, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(C, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t r = b; r < e; ++r) {
                   int64_t i = r % R;
                   T* row = p + r * C;
                   if (lower) {  // keep j <= i + diagonal
                     int64_t from = std::clamp<int64_t>(i + diagonal + 1, 0, C);
                     std::fill(row + from, row + C, T(0));
                   } else {  // keep j >= i + diagonal
                     int64_t to = std::clamp<int64_t>(i + diagonal, 0, C);
                     std::fill(row, row + to, T(0));
                   }
                 }
               });
}

WEFT_REGISTER_KERNEL(gather_table(), DeviceType::CPU, kAllTypes, cpu_gather);
WEFT_REGISTER_KERNEL(scatter_add_table(), DeviceType::CPU, kNumericTypes, cpu_scatter_add);
WEFT_REGISTER_KERNEL(index_select_table(), DeviceType::CPU, kAllTypes, cpu_index_select);
WEFT_REGISTER_KERNEL(index_add_table(), DeviceType::CPU, kNumericTypes, cpu_index_add);
WEFT_REGISTER_KERNEL(masked_fill_table(), DeviceType::CPU, kAllTypes, cpu_masked_fill);
WEFT_REGISTER_KERNEL(tri_table(), DeviceType::CPU, kAllTypes, cpu_tri);

// Checks the index dtype and returns it as contiguous int64 (no autograd).
Tensor index_as_int64(const char* op, const Tensor& index) {
  WEFT_CHECK(index.defined(), op, ": index is undefined");
  WEFT_CHECK(index.dtype() == DType::Int64 || index.dtype() == DType::Int32, op,
             ": index must be an int64 or int32 tensor, got ", index.dtype(), " (shape ", shape_str(index.sizes()),
             ")");
  return index.detach().to(DType::Int64).contiguous();  // converted on the index's own device
}

// Every entry of `idx` (contiguous int64) must lie in [0, size).
// Device-resident indices are checked by the device kernels instead (no host read).
void check_range(const char* op, const Tensor& idx, int64_t size, int64_t dim) {
  if (!idx.device().is_cpu()) return;
  const int64_t* p = idx.data_ptr<int64_t>();
  for (int64_t i = 0; i < idx.numel(); ++i)
    WEFT_CHECK(p[i] >= 0 && p[i] < size, op, ": index ", p[i], " is out of bounds for dimension ", dim, " with size ",
               size);
}

// (outer, size, inner) geometry of `t` around `dim`.
Shape three_d(const Tensor& t, int64_t dim) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= t.size(d);
  for (int64_t d = dim + 1; d < t.dim(); ++d) inner *= t.size(d);
  return {outer, t.dim() == 0 ? 1 : t.size(dim), inner};
}

// gather/scatter shape rule: same ndim; index.size(d) <= a.size(d) for d != dim.
void check_gather_shapes(const char* op, const Tensor& a, const Tensor& index, int64_t dim, const char* what) {
  WEFT_CHECK(index.dim() == a.dim(), op, ": index shape ", shape_str(index.sizes()), " must have as many dims as ",
             what, " shape ", shape_str(a.sizes()));
  for (int64_t d = 0; d < a.dim(); ++d)
    if (d != dim)
      WEFT_CHECK(index.size(d) <= a.size(d), op, ": index shape ", shape_str(index.sizes()), " exceeds ", what,
                 " shape ", shape_str(a.sizes()), " at dimension ", d);
}

}  // namespace

Tensor gather(const Tensor& a, int64_t dim, const Tensor& index) {
  detail::check_devices("gather", {a, index});
  int64_t d = wrap_dim("gather", dim, std::max<int64_t>(a.dim(), 1));
  Tensor idx = index_as_int64("gather", index);
  Tensor a0 = a.dim() == 0 ? a.reshape({1}) : a;
  Tensor i0 = idx.dim() == 0 ? idx.reshape({1}) : idx;
  check_gather_shapes("gather", a0, i0, d, "input");
  check_range("gather", i0, a0.size(d), d);
  Tensor out = empty(i0.sizes(), a.options());
  gather_table()(a.device(), a.dtype(), out, a0.detach(), i0, d);
  if (index.dim() == 0) out = out.reshape({});
  Shape in = a.sizes();
  record_differentiable("GatherBackward", {a}, {out}, [in, d, idx](const std::vector<Tensor>& g) {
    Tensor z = zeros(in, g[0].options());
    return std::vector<Tensor>{scatter_add(z, d, idx, g[0])};
  });
  return out;
}

Tensor scatter_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src) {
  detail::check_devices("scatter_add", {a, index, src});
  int64_t d = wrap_dim("scatter_add", dim, std::max<int64_t>(a.dim(), 1));
  Tensor idx = index_as_int64("scatter_add", index);
  WEFT_CHECK(src.dtype() == a.dtype(), "scatter_add: src dtype ", src.dtype(), " must match self dtype ", a.dtype());
  Tensor a0 = a.dim() == 0 ? a.reshape({1}) : a;
  Tensor i0 = idx.dim() == 0 ? idx.reshape({1}) : idx;
  Tensor s0 = src.dim() == 0 ? src.reshape({1}) : src;
  check_gather_shapes("scatter_add", a0, i0, d, "self");
  check_gather_shapes("scatter_add", s0, i0, -1, "src");
  check_range("scatter_add", i0, a0.size(d), d);
  Tensor out = clone(a0.detach());
  scatter_add_table()(a.device(), a.dtype(), out, i0, s0.detach(), d);
  out = out.reshape(a.sizes());
  Shape ssz = src.sizes();
  // The gather and scatter_add backwards are each other's ops: both
  // differentiate to any order (Note [double backward]).
  record_differentiable("ScatterAddBackward", {a, src}, {out}, [d, idx, ssz](const std::vector<Tensor>& g) {
    // grad wrt src = gather(g, index), zero-padded where src is larger than index
    Tensor gs = gather(g[0], d, idx);
    for (int64_t k = 0; k < gs.dim(); ++k) {
      if (gs.size(k) == ssz[k]) continue;
      Shape rest = gs.sizes();
      rest[k] = ssz[k] - gs.size(k);
      gs = cat({gs, zeros(rest, gs.options())}, k);
    }
    return std::vector<Tensor>{g[0], gs};
  });
  return out;
}

Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index) {
  detail::check_devices("index_select", {a, index});
  int64_t d = wrap_dim("index_select", dim, std::max<int64_t>(a.dim(), 1));
  Tensor idx = index_as_int64("index_select", index);
  WEFT_CHECK(idx.dim() <= 1, "index_select: index must be 0-D or 1-D, got shape ", shape_str(idx.sizes()));
  idx = idx.reshape({-1});
  Shape g3 = three_d(a, d);
  check_range("index_select", idx, g3[1], d);
  Shape out_shape = a.sizes();
  if (a.dim() > 0) out_shape[d] = idx.numel();
  Tensor out = empty(out_shape, a.options());
  index_select_table()(a.device(), a.dtype(), out.view({g3[0], idx.numel(), g3[2]}), a.detach().contiguous().view(g3),
                       idx);
  if (a.dim() == 0) out = out.reshape({});
  Shape in = a.sizes();
  record_differentiable("IndexSelectBackward", {a}, {out}, [in, d, idx](const std::vector<Tensor>& g) {
    Tensor z = zeros(in, g[0].options());
    return std::vector<Tensor>{index_add(z, d, idx, in.empty() ? g[0].reshape({}) : g[0])};
  });
  return out;
}

Tensor index_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src) {
  detail::check_devices("index_add", {a, index, src});
  int64_t d = wrap_dim("index_add", dim, std::max<int64_t>(a.dim(), 1));
  Tensor idx = index_as_int64("index_add", index);
  WEFT_CHECK(idx.dim() <= 1, "index_add: index must be 0-D or 1-D, got shape ", shape_str(idx.sizes()));
  idx = idx.reshape({-1});
  WEFT_CHECK(src.dtype() == a.dtype(), "index_add: src dtype ", src.dtype(), " must match self dtype ", a.dtype());
  Shape want = a.sizes();
  if (a.dim() > 0) want[d] = idx.numel();
  Shape have = src.dim() == 0 ? Shape{1} : src.sizes();
  Shape want1 = want.empty() ? Shape{1} : want;
  WEFT_CHECK(have == want1, "index_add: src shape ", shape_str(src.sizes()), " must be ", shape_str(want),
             " (self shape ", shape_str(a.sizes()), " with dimension ", d, " of size ", idx.numel(), ")");
  Shape g3 = three_d(a, d);
  check_range("index_add", idx, g3[1], d);
  Tensor out = a.detach().contiguous().clone();
  index_add_table()(a.device(), a.dtype(), out.view(g3), idx,
                    src.detach().contiguous().view({g3[0], idx.numel(), g3[2]}));
  record_differentiable("IndexAddBackward", {a, src}, {out}, [d, idx, have](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{g[0], index_select(g[0], d, idx).reshape(have)};
  });
  return out;
}

Tensor one_hot(const Tensor& index, int64_t num_classes) {
  Tensor idx = index_as_int64("one_hot", index);
  if (num_classes < 0) {
    WEFT_CHECK(num_classes == -1, "one_hot: num_classes must be -1 or non-negative, got ", num_classes);
    WEFT_CHECK(idx.numel() > 0, "one_hot: cannot infer num_classes from an empty index tensor");
  }
  if (idx.device().is_cpu()) {
    const int64_t* p = idx.data_ptr<int64_t>();
    if (num_classes < 0) num_classes = *std::max_element(p, p + idx.numel()) + 1;
    for (int64_t i = 0; i < idx.numel(); ++i)
      WEFT_CHECK(p[i] >= 0 && p[i] < num_classes, "one_hot: index ", p[i], " is out of bounds for num_classes ",
                 num_classes);
  } else {
    // Device index: only the extrema come back to the host, then the same checks and messages.
    const int64_t lo = idx.numel() > 0 ? min(idx).item<int64_t>() : 0;
    const int64_t hi = idx.numel() > 0 ? max(idx).item<int64_t>() : 0;
    if (num_classes < 0) num_classes = hi + 1;
    WEFT_CHECK(idx.numel() == 0 || lo >= 0, "one_hot: index ", lo, " is out of bounds for num_classes ", num_classes);
    WEFT_CHECK(idx.numel() == 0 || hi < num_classes, "one_hot: index ", hi, " is out of bounds for num_classes ",
               num_classes);
  }
  Shape s = idx.sizes();
  s.push_back(num_classes);
  Tensor out = zeros(s, {DType::Int64, index.device()});
  if (idx.numel() == 0 || num_classes == 0) return out;
  // out[i, idx[i]] = 1 as a scatter on the flat (n, C) view: works on any device.
  Tensor flat = out.view({idx.numel(), num_classes});
  NoGradGuard ng;
  Tensor col = idx.reshape({idx.numel(), 1});
  Tensor filled = scatter_add(flat, 1, col, ones({idx.numel(), 1}, {DType::Int64, index.device()}));
  return filled.view(s);
}

Tensor masked_fill(const Tensor& a, const Tensor& mask, const Scalar& value) {
  detail::check_devices("masked_fill", {a, mask});
  WEFT_CHECK(mask.defined() && mask.dtype() == DType::Bool, "masked_fill: mask must be a bool tensor, got ",
             mask.defined() ? std::string(dtype_name(mask.dtype())) : std::string("undefined"));
  Shape shape = broadcast_shapes("masked_fill", a.sizes(), mask.sizes());
  Tensor out = empty(shape, a.options());
  masked_fill_table()(a.device(), a.dtype(), out, expand(a.detach(), shape), expand(mask.detach(), shape), value);
  Shape in = a.sizes();
  Tensor m = mask.detach();
  record_differentiable("MaskedFillBackward", {a}, {out}, [in, m](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{sum_to(masked_fill(g[0], m, 0), in)};
  });
  return out;
}

Tensor& masked_fill_(Tensor& a, const Tensor& mask, const Scalar& value) {
  detail::check_devices("masked_fill_", {a, mask});
  WEFT_CHECK(mask.defined() && mask.dtype() == DType::Bool, "masked_fill_: mask must be a bool tensor, got ",
             mask.defined() ? std::string(dtype_name(mask.dtype())) : std::string("undefined"));
  check_inplace("masked_fill_", a);
  Shape shape = broadcast_shapes("masked_fill_", a.sizes(), mask.sizes());
  WEFT_CHECK(shape == a.sizes(), "masked_fill_: mask shape ", shape_str(mask.sizes()),
             " does not broadcast to self shape ", shape_str(a.sizes()));
  masked_fill_table()(a.device(), a.dtype(), a, a.detach(), expand(mask.detach(), shape), value);
  Tensor m = mask.detach();
  record_inplace(
      "MaskedFillBackward", a, {},
      [m](const std::vector<Tensor>& g) { return std::vector<Tensor>{masked_fill(g[0], m, 0)}; },
      /*differentiable=*/true);
  return a;
}

namespace {
Tensor tri(const char* op, const Tensor& a, int64_t diagonal, bool lower) {
  WEFT_CHECK(a.dim() >= 2, op, ": input must have at least 2 dims, got shape ", shape_str(a.sizes()));
  Tensor out = a.detach().contiguous().clone();
  int64_t R = a.size(-2), C = a.size(-1);
  int64_t batch = numel_of(Shape(a.sizes().begin(), a.sizes().end() - 2));
  tri_table()(a.device(), a.dtype(), out.view({batch, R, C}), diagonal, lower);
  record_differentiable(lower ? "TrilBackward" : "TriuBackward", {a}, {out},
                        [diagonal, lower](const std::vector<Tensor>& g) {
                          return std::vector<Tensor>{lower ? tril(g[0], diagonal) : triu(g[0], diagonal)};
                        });
  return out;
}
}  // namespace

Tensor tril(const Tensor& a, int64_t diagonal) { return tri("tril", a, diagonal, true); }
Tensor triu(const Tensor& a, int64_t diagonal) { return tri("triu", a, diagonal, false); }

}  // namespace weft
