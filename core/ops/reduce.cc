// Reductions: sum, mean, prod, amax/amin, max/min (with and without dim),
// argmax/argmin, and the plan + private helpers shared with reduce_stats.cc.
//
// Contract: empty dims means all dims; dims may be negative; duplicates are an
// error. Kernels follow Note [reduction layout] (core/ops/reduce_util.h).
// sum accumulates integers (and bool) in int64 and gives int64; floating sums
// accumulate in double and round once. mean needs a floating input (like
// PyTorch). max/min along a dim return (values, int64 indices), first index
// winning ties; NaN counts as the largest (and smallest) value.
#include "core/kernels/reduce.h"

#include <algorithm>
#include <numeric>

#include "core/autograd_meta.h"
#include "core/cpu/loops.h"
#include "core/ops/reduce_util.h"

namespace weft {

#define WEFT_REDUCE_TABLE(name)  \
  ReduceTable& name##_table() {  \
    static ReduceTable t(#name); \
    return t;                    \
  }
WEFT_REDUCE_TABLE(sum)
WEFT_REDUCE_TABLE(prod)
WEFT_REDUCE_TABLE(amax)
WEFT_REDUCE_TABLE(amin)
WEFT_REDUCE_TABLE(max_dim)
WEFT_REDUCE_TABLE(min_dim)
WEFT_REDUCE_TABLE(max_backward)
WEFT_REDUCE_TABLE(prod_backward)
#undef WEFT_REDUCE_TABLE

ReduceHelperUnaryKernel& exp_nograd_table() {
  static ReduceHelperUnaryKernel t("exp (reduction helper)");
  return t;
}
ReduceHelperBinaryKernel& eq_mask_table() {
  static ReduceHelperBinaryKernel t("eq mask (reduction helper)");
  return t;
}

namespace reduce_detail {

// ---- plans ----
Tensor ReducePlan::finish(const Tensor& raw) const {
  Tensor t = raw.view(raw_shape);
  bool ident = true;
  for (size_t i = 0; i < to_user.size(); ++i) ident = ident && to_user[i] == static_cast<int64_t>(i);
  if (!ident) t = t.permute(to_user).contiguous();
  return t.view(out_shape);
}

namespace {
void fill_shapes(ReducePlan& p, const Tensor& a, const std::vector<bool>& red, bool keepdim) {
  for (int64_t d = 0; d < a.dim(); ++d) {
    p.keep_shape.push_back(red[d] ? 1 : a.size(d));
    if (!red[d] || keepdim) p.out_shape.push_back(red[d] ? 1 : a.size(d));
  }
}
// Fallback layout: kept dims (original order) then reduced dims, copied.
void rows_layout(ReducePlan& p, const Tensor& x, const std::vector<bool>& red) {
  std::vector<int64_t> perm;
  p.g = {1, 1, 1};
  for (int64_t d = 0; d < x.dim(); ++d)
    if (!red[d]) {
      perm.push_back(d);
      p.raw_shape.push_back(x.size(d));
      p.g.outer *= x.size(d);
    }
  for (int64_t d = 0; d < x.dim(); ++d)
    if (red[d]) {
      perm.push_back(d);
      p.g.r *= x.size(d);
    }
  p.in = x.dim() ? x.permute(perm).contiguous() : x.contiguous();
  p.to_user.resize(p.raw_shape.size());
  std::iota(p.to_user.begin(), p.to_user.end(), 0);
}
}  // namespace

ReducePlan make_row_plan(const char* op, const Tensor& a, const std::vector<int64_t>& dims_in, bool keepdim) {
  ReducePlan p;
  p.dims = wrap_dims(op, dims_in, a.dim());
  std::vector<bool> red(a.dim(), false);
  for (int64_t d : p.dims) red[d] = true;
  fill_shapes(p, a, red, keepdim);
  rows_layout(p, a.detach(), red);
  return p;
}

ReducePlan make_plan(const char* op, const Tensor& a, const std::vector<int64_t>& dims_in, bool keepdim) {
  ReducePlan p;
  p.dims = wrap_dims(op, dims_in, a.dim());
  const int64_t nd = a.dim();
  std::vector<bool> red(nd, false);
  for (int64_t d : p.dims) red[d] = true;
  fill_shapes(p, a, red, keepdim);
  Tensor x = a.detach();
  // dims in memory order (outermost first)
  std::vector<int64_t> perm(nd);
  std::iota(perm.begin(), perm.end(), 0);
  Tensor xp = x;
  if (!x.is_contiguous()) {
    std::stable_sort(perm.begin(), perm.end(), [&](int64_t i, int64_t j) { return x.stride(i) > x.stride(j); });
    xp = x.permute(perm);
    if (!xp.is_contiguous()) {
      std::iota(perm.begin(), perm.end(), 0);
      xp = x.contiguous();
    }
  }
  // coalesce into alternating kept / reduced groups
  std::vector<std::pair<int64_t, bool>> groups;
  for (int64_t i : perm) {
    int64_t s = x.size(i);
    if (s == 1) continue;
    if (!groups.empty() && groups.back().second == red[i]) groups.back().first *= s;
    else groups.push_back({s, red[i]});
  }
  int n_red = 0;
  for (auto& gp : groups) n_red += gp.second;
  if (n_red > 1) {
    rows_layout(p, x, red);
    return p;
  }
  p.in = xp;
  p.g = {1, 1, 1};
  bool seen_red = false;
  for (auto& gp : groups) {
    if (gp.second) {
      p.g.r = gp.first;
      seen_red = true;
    } else if (seen_red) p.g.inner *= gp.first;
    else p.g.outer *= gp.first;
  }
  // raw output = kept dims in perm order
  std::vector<int64_t> kept_perm;
  for (int64_t i : perm)
    if (!red[i]) {
      kept_perm.push_back(i);
      p.raw_shape.push_back(x.size(i));
    }
  std::vector<int64_t> kept_sorted = kept_perm;
  std::sort(kept_sorted.begin(), kept_sorted.end());
  for (int64_t d : kept_sorted)
    p.to_user.push_back(std::find(kept_perm.begin(), kept_perm.end(), d) - kept_perm.begin());
  return p;
}

// ---- private helpers ----
namespace {
template <typename T>
void cpu_exp(const Tensor& out, const Tensor& a) {
  using M = opmath_t<T>;
  cpu::elementwise<T, T>(out, {a}, [](M x) { return exp_m<M>(x); });
}
template <typename T>
void cpu_eq_mask(const Tensor& out, const Tensor& a, const Tensor& b) {
  using M = opmath_t<T>;
  cpu::elementwise<T, T, T>(out, {a, b}, [](M x, M y) { return x == y ? M(1) : M(0); });
}
WEFT_REGISTER_KERNEL(exp_nograd_table(), DeviceType::CPU, kFloatingTypes, cpu_exp);
WEFT_REGISTER_KERNEL(eq_mask_table(), DeviceType::CPU, kNumericTypes, cpu_eq_mask);
}  // namespace

Tensor exp_nograd(const Tensor& a) {
  Tensor out = empty(a.sizes(), a.options());
  exp_nograd_table()(a.device(), a.dtype(), out, a.detach());
  return out;
}
Tensor eq_mask_nograd(const Tensor& a, const Tensor& b) {
  Tensor out = empty(a.sizes(), a.options());
  eq_mask_table()(a.device(), a.dtype(), out, a.detach(), expand(b.detach().to(a.dtype()), a.sizes()));
  return out;
}

}  // namespace reduce_detail

using namespace reduce_detail;

namespace {

template <typename T>
constexpr bool kIntLike = std::is_integral_v<T>;  // includes bool

// ---- ops for the engine ----
template <typename T>
struct SumOp {
  using M = opmath_t<T>;
  using Acc = std::conditional_t<kIntLike<T>, int64_t, double>;
  using Out = std::conditional_t<kIntLike<T>, int64_t, T>;
  Out* out;
  double scale;
  Acc identity() const { return Acc(0); }
  Acc step(Acc a, T x, int64_t, int64_t) const { return a + static_cast<Acc>(static_cast<M>(x)); }
  Acc merge(Acc a, Acc b) const { return a + b; }
  void write(int64_t o, Acc a) const {
    if constexpr (kIntLike<T>) out[o] = a;
    else out[o] = static_cast<T>(static_cast<M>(a * scale));
  }
};
template <typename T>
struct ProdOp {
  using M = opmath_t<T>;
  using Acc = std::conditional_t<kIntLike<T>, int64_t, double>;
  using Out = std::conditional_t<kIntLike<T>, int64_t, T>;
  Out* out;
  Acc identity() const { return Acc(1); }
  Acc step(Acc a, T x, int64_t, int64_t) const { return a * static_cast<Acc>(static_cast<M>(x)); }
  Acc merge(Acc a, Acc b) const { return a * b; }
  void write(int64_t o, Acc a) const {
    if constexpr (kIntLike<T>) out[o] = a;
    else out[o] = static_cast<T>(static_cast<M>(a));
  }
};
template <typename M, bool IsMax>
inline bool better(M x, M v) {
  if constexpr (std::is_floating_point_v<M>) {
    if (IsMax) return x > v || (x != x && v == v);
    return x < v || (x != x && v == v);
  } else {
    return IsMax ? x > v : x < v;
  }
}
template <typename M, bool IsMax>
constexpr M worst() {
  if constexpr (std::is_floating_point_v<M>)
    return IsMax ? -std::numeric_limits<M>::infinity() : std::numeric_limits<M>::infinity();
  else return IsMax ? std::numeric_limits<M>::lowest() : std::numeric_limits<M>::max();
}
template <typename T, bool IsMax>
struct ExtremeOp {  // amax / amin
  using M = opmath_t<T>;
  T* out;
  M identity() const { return worst<M, IsMax>(); }
  M step(M a, T x, int64_t, int64_t) const {
    M v = static_cast<M>(x);
    return better<M, IsMax>(v, a) ? v : a;
  }
  M merge(M a, M b) const { return better<M, IsMax>(b, a) ? b : a; }
  void write(int64_t o, M a) const { out[o] = static_cast<T>(a); }
};
template <typename M>
struct ValIdx {
  M v;
  int64_t i;
};
template <typename T, bool IsMax>
struct ArgExtremeOp {  // max/min along a dim; argmax/argmin
  using M = opmath_t<T>;
  using Acc = ValIdx<M>;
  T* vals;  // may be null
  int64_t* idx;
  Acc identity() const { return {worst<M, IsMax>(), -1}; }
  Acc step(Acc a, T x, int64_t i, int64_t) const {
    M v = static_cast<M>(x);
    return (a.i < 0 || better<M, IsMax>(v, a.v)) ? Acc{v, i} : a;
  }
  Acc merge(Acc a, Acc b) const {
    if (a.i < 0) return b;
    if (b.i < 0) return a;
    if (better<M, IsMax>(b.v, a.v)) return b;
    if (better<M, IsMax>(a.v, b.v)) return a;
    return a.i <= b.i ? a : b;
  }
  void write(int64_t o, Acc a) const {
    if (vals) vals[o] = static_cast<T>(a.v);
    idx[o] = a.i;
  }
};

// ---- kernels ----
template <typename T>
void cpu_sum(const ReduceArgs& a) {
  using Op = SumOp<T>;
  run_reduce(static_cast<const T*>(a.in), a.g, Op{static_cast<typename Op::Out*>(a.out), a.p});
}
template <typename T>
void cpu_prod(const ReduceArgs& a) {
  using Op = ProdOp<T>;
  run_reduce(static_cast<const T*>(a.in), a.g, Op{static_cast<typename Op::Out*>(a.out)});
}
template <typename T>
void cpu_amax(const ReduceArgs& a) {
  run_reduce(static_cast<const T*>(a.in), a.g, ExtremeOp<T, true>{static_cast<T*>(a.out)});
}
template <typename T>
void cpu_amin(const ReduceArgs& a) {
  run_reduce(static_cast<const T*>(a.in), a.g, ExtremeOp<T, false>{static_cast<T*>(a.out)});
}
template <typename T>
void cpu_max_dim(const ReduceArgs& a) {
  run_reduce(static_cast<const T*>(a.in), a.g,
             ArgExtremeOp<T, true>{static_cast<T*>(a.out), static_cast<int64_t*>(a.out2)});
}
template <typename T>
void cpu_min_dim(const ReduceArgs& a) {
  run_reduce(static_cast<const T*>(a.in), a.g,
             ArgExtremeOp<T, false>{static_cast<T*>(a.out), static_cast<int64_t*>(a.out2)});
}
// grad_in (outer, r, inner) zero-filled; scatters g (outer, inner) to the indices.
template <typename T>
void cpu_scatter_index(const ReduceArgs& a) {
  T* gi = static_cast<T*>(a.out);
  const T* g = static_cast<const T*>(a.in);
  const int64_t* idx = static_cast<const int64_t*>(a.aux);
  const int64_t outer = a.g.outer, r = a.g.r, inner = a.g.inner;
  parallel_for(0, outer * inner, kGrainSize, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      int64_t o = t / inner, j = t % inner;
      gi[(o * r + idx[t]) * inner + j] = g[t];
    }
  });
}
// grad_in[k] = g * prod_{m != k} x[m] along r (exact with zeros).
template <typename T>
void cpu_prod_backward(const ReduceArgs& a) {
  using M = opmath_t<T>;
  T* gi = static_cast<T*>(a.out);
  const T* x = static_cast<const T*>(a.in);
  const T* g = static_cast<const T*>(a.aux);
  const int64_t outer = a.g.outer, r = a.g.r, inner = a.g.inner;
  parallel_for(0, outer * inner, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(r, 1)), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      int64_t o = t / inner, j = t % inner;
      const int64_t base = o * r * inner + j;
      double pre = 1.0;
      for (int64_t k = 0; k < r; ++k) {
        gi[base + k * inner] = static_cast<T>(static_cast<M>(pre));
        pre *= static_cast<double>(static_cast<M>(x[base + k * inner]));
      }
      double suf = 1.0, gv = static_cast<double>(static_cast<M>(g[t]));
      for (int64_t k = r - 1; k >= 0; --k) {
        const int64_t at = base + k * inner;
        gi[at] = static_cast<T>(static_cast<M>(static_cast<double>(static_cast<M>(gi[at])) * suf * gv));
        suf *= static_cast<double>(static_cast<M>(x[at]));
      }
    }
  });
}

WEFT_REGISTER_KERNEL(sum_table(), DeviceType::CPU, kAllTypes, cpu_sum);
WEFT_REGISTER_KERNEL(prod_table(), DeviceType::CPU, kAllTypes, cpu_prod);
WEFT_REGISTER_KERNEL(amax_table(), DeviceType::CPU, kAllTypes, cpu_amax);
WEFT_REGISTER_KERNEL(amin_table(), DeviceType::CPU, kAllTypes, cpu_amin);
WEFT_REGISTER_KERNEL(max_dim_table(), DeviceType::CPU, kAllTypes, cpu_max_dim);
WEFT_REGISTER_KERNEL(min_dim_table(), DeviceType::CPU, kAllTypes, cpu_min_dim);
WEFT_REGISTER_KERNEL(max_backward_table(), DeviceType::CPU, kFloatingTypes, cpu_scatter_index);
WEFT_REGISTER_KERNEL(prod_backward_table(), DeviceType::CPU, kFloatingTypes, cpu_prod_backward);

ReduceArgs args_for(const ReducePlan& p, void* out, void* out2 = nullptr, double param = 0.0) {
  ReduceArgs a;
  a.in = p.in.raw_data();
  a.g = p.g;
  a.out = out;
  a.out2 = out2;
  a.p = param;
  return a;
}

// Sum (scale 1) or mean (scale 1/n) of a tensor whose dtype is already the compute dtype.
Tensor sum_impl(const char* op, const Tensor& a, const std::vector<int64_t>& dims, bool keepdim, DType out_dtype,
                double scale_num) {
  ReducePlan p = make_plan(op, a, dims, keepdim);
  Tensor raw = empty({p.out_numel()}, {out_dtype, a.device()});
  double scale = scale_num > 0 ? 1.0 / static_cast<double>(p.g.r) : 1.0;
  sum_table()(a.device(), a.dtype(), args_for(p, raw.raw_data(), nullptr, scale));
  Tensor out = p.finish(raw);
  Shape in = a.sizes(), keep = p.keep_shape;
  double gscale = scale;
  record_differentiable(scale_num > 0 ? "MeanBackward" : "SumBackward", {a}, {out},
                        [in, keep, gscale](const std::vector<Tensor>& g) {
                          Tensor ge = expand(g[0].reshape(keep), in);
                          if (gscale != 1.0) ge = mul(ge, wrapped_scalar(gscale, ge.dtype(), ge.device()));
                          return std::vector<Tensor>{ge.contiguous()};
                        });
  return out;
}

void check_nonempty(const char* op, const ReducePlan& p, const Tensor& a) {
  WEFT_CHECK(p.g.r > 0 || p.out_numel() == 0, op, ": cannot reduce over a zero-size dimension (input shape ",
             shape_str(a.sizes()), "); the operation has no identity");
}

// `in` laid out as (outer, r, inner) along dim d, for the kernels that scan one dim.
ReduceGeom along_dim(const Shape& in, int64_t d) {
  int64_t outer = 1, inner = 1, r = in.empty() ? 1 : in[d];
  for (int64_t i = 0; i < static_cast<int64_t>(in.size()); ++i) {
    if (i < d) outer *= in[i];
    if (i > d) inner *= in[i];
  }
  return {outer, r, inner};
}

// Gradient of an extremum reduction (amax/amin/max()/min()): split evenly among ties.
Tensor extreme_backward(const Tensor& g, const Tensor& x, const Tensor& out, const Shape& keep) {
  Tensor ov = out.reshape(keep);
  Tensor mask = eq_mask_nograd(x, ov);  // (in) 1 at the extremum
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (keep[d] == 1 && x.size(d) != 1) dims.push_back(d);
  Tensor count = dims.empty() ? ones(keep, x.options()) : sum(mask, dims, true);
  return div(mul(mask, expand(g.reshape(keep), x.sizes())), count);
}

Tensor extreme(const char* op, const char* bw_name, ReduceTable& table, const Tensor& a,
               const std::vector<int64_t>& dims, bool keepdim) {
  ReducePlan p = make_plan(op, a, dims, keepdim);
  check_nonempty(op, p, a);
  Tensor raw = empty({p.out_numel()}, a.options());
  table(a.device(), a.dtype(), args_for(p, raw.raw_data()));
  Tensor out = p.finish(raw);
  if (any_requires_grad({a})) {
    SavedTensor sx(a), so(out);
    Shape keep = p.keep_shape;
    // composed of recorded ops, so it differentiates to any order (Note [double backward]); the tie mask is constant
    record_differentiable(bw_name, {a}, {out}, [sx, so, keep](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{extreme_backward(g[0], sx.get("ExtremeBackward"), so.get("ExtremeBackward"), keep)};
    });
  }
  return out;
}

std::tuple<Tensor, Tensor> extreme_dim(const char* op, ReduceTable& table, const Tensor& a, int64_t dim, bool keepdim,
                                       bool want_values) {
  int64_t d = wrap_dim(op, dim, a.dim());
  ReducePlan p = make_plan(op, a, a.dim() == 0 ? std::vector<int64_t>{} : std::vector<int64_t>{d}, keepdim);
  check_nonempty(op, p, a);
  Tensor vraw = want_values ? empty({p.out_numel()}, a.options()) : Tensor();
  Tensor iraw = empty({p.out_numel()}, {DType::Int64, a.device()});
  table(a.device(), a.dtype(), args_for(p, want_values ? vraw.raw_data() : nullptr, iraw.raw_data()));
  Tensor idx = p.finish(iraw);
  if (!want_values) return {Tensor(), idx};
  Tensor vals = p.finish(vraw);
  if (any_requires_grad({a})) {
    Shape in = a.sizes(), keep = p.keep_shape;
    SavedTensor si(idx);
    record_differentiable(
        op[1] == 'a' ? "MaxBackward" : "MinBackward", {a}, {vals}, [in, keep, d, si](const std::vector<Tensor>& g) {
          Tensor gk = g[0].reshape(keep);
          Tensor ik = si.get("MaxBackward").reshape(keep);
          // a backward that builds a graph scatters with a recorded op (Note [double backward])
          if (GradMode::is_enabled())
            return std::vector<Tensor>{in.empty() ? gk : scatter_add(zeros(in, gk.options()), d, ik, gk)};
          Tensor gi = zeros(in, gk.options());
          Tensor gc = gk.contiguous(), ic = ik.contiguous();
          ReduceArgs args;
          args.in = gc.raw_data();
          args.g = along_dim(in, d);
          args.out = gi.raw_data();
          args.aux = ic.raw_data();
          max_backward_table()(gi.device(), gi.dtype(), args);
          return std::vector<Tensor>{gi};
        });
  }
  return {vals, idx};
}

}  // namespace

// ---- public ops ----
Tensor sum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim, std::optional<DType> dtype) {
  DType natural = is_integral(a.dtype(), true) ? DType::Int64 : a.dtype();
  DType out_dtype = dtype.value_or(natural);
  if (out_dtype != natural) {
    // The kernel for an integral input writes int64; narrower integral results convert after.
    DType acc_dtype = is_integral(out_dtype, true) ? DType::Int64 : out_dtype;
    Tensor r = sum_impl("sum", a.to(out_dtype), dims, keepdim, acc_dtype, 0);
    return r.dtype() == out_dtype ? r : r.to(out_dtype);
  }
  return sum_impl("sum", a, dims, keepdim, out_dtype, 0);
}

Tensor mean(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  WEFT_CHECK(is_floating(a.dtype()), "mean: could not infer output dtype; input dtype ", a.dtype(),
             " is not floating point (mean needs a floating input; convert it first, e.g. .to(DType::Float32))");
  return sum_impl("mean", a, dims, keepdim, a.dtype(), 1);
}

Tensor prod(const Tensor& a, int64_t dim, bool keepdim) {
  int64_t d = wrap_dim("prod", dim, a.dim());
  ReducePlan p = make_plan("prod", a, a.dim() == 0 ? std::vector<int64_t>{} : std::vector<int64_t>{d}, keepdim);
  DType out_dtype = is_integral(a.dtype(), true) ? DType::Int64 : a.dtype();
  Tensor raw = empty({p.out_numel()}, {out_dtype, a.device()});
  prod_table()(a.device(), a.dtype(), args_for(p, raw.raw_data()));
  Tensor out = p.finish(raw);
  if (any_requires_grad({a})) {
    SavedTensor sx(a);
    Shape in = a.sizes(), keep = p.keep_shape;
    record_function(
        "ProdBackward", {a}, {out},
        [sx, in, keep, d](const std::vector<Tensor>& g) {
          Tensor x = sx.get("ProdBackward").contiguous();
          Tensor gc = g[0].reshape(keep).contiguous();
          Tensor gi = empty(in, x.options());
          ReduceArgs args;
          args.in = x.raw_data();
          args.g = along_dim(in, d);
          args.out = gi.raw_data();
          args.aux = gc.raw_data();
          prod_backward_table()(gi.device(), gi.dtype(), args);
          return std::vector<Tensor>{gi};
        },
        [d, keepdim](const std::vector<Tensor>& in) {
          // Note [composite double backward]: the product as a chain of recorded
          // multiplications along d, exact where elements are zero
          const Tensor& x = in[0];
          if (x.dim() == 0) return std::vector<Tensor>{x * 1.0};
          Tensor r = ones_like(sum(x.detach(), {d}));  // the identity, also for a zero-size d
          for (int64_t i = 0; i < x.size(d); ++i) r = r * select(x, d, i);
          return std::vector<Tensor>{keepdim ? unsqueeze(r, d) : r};
        });
  }
  return out;
}

Tensor amax(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  return extreme("amax", "AmaxBackward", amax_table(), a, dims, keepdim);
}
Tensor amin(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  return extreme("amin", "AminBackward", amin_table(), a, dims, keepdim);
}
Tensor max(const Tensor& a) {
  WEFT_CHECK(a.numel() > 0, "max: cannot take the max of an empty tensor (shape ", shape_str(a.sizes()),
             "); pass a dim or use amax");
  return extreme("max", "MaxBackward", amax_table(), a, {}, false);
}
Tensor min(const Tensor& a) {
  WEFT_CHECK(a.numel() > 0, "min: cannot take the min of an empty tensor (shape ", shape_str(a.sizes()),
             "); pass a dim or use amin");
  return extreme("min", "MinBackward", amin_table(), a, {}, false);
}
std::tuple<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim) {
  return extreme_dim("max", max_dim_table(), a, dim, keepdim, true);
}
std::tuple<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim) {
  return extreme_dim("min", min_dim_table(), a, dim, keepdim, true);
}
Tensor argmax(const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  if (!dim) {
    WEFT_CHECK(a.numel() > 0, "argmax: cannot take the argmax of an empty tensor (shape ", shape_str(a.sizes()), ")");
    Tensor flat = a.detach().reshape({a.numel()});
    Tensor idx = std::get<1>(extreme_dim("argmax", max_dim_table(), flat, 0, false, false));
    if (keepdim) return idx.reshape(Shape(a.dim(), 1));
    return idx.reshape({});
  }
  return std::get<1>(extreme_dim("argmax", max_dim_table(), a.detach(), *dim, keepdim, false));
}
Tensor argmin(const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  if (!dim) {
    WEFT_CHECK(a.numel() > 0, "argmin: cannot take the argmin of an empty tensor (shape ", shape_str(a.sizes()), ")");
    Tensor flat = a.detach().reshape({a.numel()});
    Tensor idx = std::get<1>(extreme_dim("argmin", min_dim_table(), flat, 0, false, false));
    if (keepdim) return idx.reshape(Shape(a.dim(), 1));
    return idx.reshape({});
  }
  return std::get<1>(extreme_dim("argmin", min_dim_table(), a.detach(), *dim, keepdim, false));
}

}  // namespace weft
