// CUDA kernels of the reduction tables in core/kernels/reduce.h: sum, prod, amax,
// amin, max_dim, min_dim, max_backward, prod_backward, and the exp / eq-mask helpers.
//
// Contract (matches core/ops/reduce.cc): ReduceArgs over a contiguous (outer, r,
// inner) device block. sum/prod accumulate floating types in double and round once
// (sum multiplies by p before rounding), integers and bool in int64 with an int64
// output. amax/amin and max/min along a dim: NaN is the extreme (it wins against any
// number), ties go to the first index; r == 0 writes the identity (the front ends
// reject empty extremum reductions). max_backward scatters g to the saved indices
// of a zero-filled gradient; prod_backward is the exact prefix/suffix product in
// double. All kernels run on the current stream of the output's device.
#include "core/cuda/allocator.h"
#include "core/cuda/red_reduce.cuh"
#include "core/kernels/reduce.h"

namespace weft::cuda {
namespace {
using namespace red;

template <typename T>
constexpr bool kIntLike = std::is_integral_v<T>;  // includes bool

template <typename T>
struct SumOp {
  using M = opmath_t<T>;
  using Acc = std::conditional_t<kIntLike<T>, int64_t, double>;
  using Out = std::conditional_t<kIntLike<T>, int64_t, T>;
  Out* out;
  double scale;
  __device__ Acc identity() const { return Acc(0); }
  __device__ Acc step(Acc a, M x, int64_t, int64_t) const { return a + static_cast<Acc>(x); }
  __device__ Acc merge(Acc a, Acc b) const { return a + b; }
  __device__ void write(int64_t o, Acc a) const {
    if constexpr (kIntLike<T>) out[o] = a;
    else store<T>(out + o, static_cast<M>(a * scale));
  }
};

template <typename T>
struct ProdOp {
  using M = opmath_t<T>;
  using Acc = std::conditional_t<kIntLike<T>, int64_t, double>;
  using Out = std::conditional_t<kIntLike<T>, int64_t, T>;
  Out* out;
  __device__ Acc identity() const { return Acc(1); }
  __device__ Acc step(Acc a, M x, int64_t, int64_t) const { return a * static_cast<Acc>(x); }
  __device__ Acc merge(Acc a, Acc b) const { return a * b; }
  __device__ void write(int64_t o, Acc a) const {
    if constexpr (kIntLike<T>) out[o] = a;
    else store<T>(out + o, static_cast<M>(a));
  }
};

template <typename M, bool IsMax>
__device__ __forceinline__ bool better(M x, M v) {
  if constexpr (std::is_floating_point_v<M>) {
    if (IsMax) return x > v || (x != x && v == v);
    return x < v || (x != x && v == v);
  } else {
    return IsMax ? x > v : x < v;
  }
}
template <typename M, bool IsMax>
M worst_host() {
  if constexpr (std::is_floating_point_v<M>)
    return IsMax ? -std::numeric_limits<M>::infinity() : std::numeric_limits<M>::infinity();
  else return IsMax ? std::numeric_limits<M>::lowest() : std::numeric_limits<M>::max();
}

template <typename T, bool IsMax>
struct ExtremeOp {
  using M = opmath_t<T>;
  using Acc = M;
  T* out;
  M ident;
  __device__ Acc identity() const { return ident; }
  __device__ Acc step(Acc a, M v, int64_t, int64_t) const { return better<M, IsMax>(v, a) ? v : a; }
  __device__ Acc merge(Acc a, Acc b) const { return better<M, IsMax>(b, a) ? b : a; }
  __device__ void write(int64_t o, Acc a) const { store<T>(out + o, a); }
};

template <typename M>
struct ValIdx {
  M v;
  int64_t i;
  __device__ static ValIdx shfl_down(ValIdx a, int off) { return {red::shfl_down(a.v, off), red::shfl_down(a.i, off)}; }
};

template <typename T, bool IsMax>
struct ArgExtremeOp {
  using M = opmath_t<T>;
  using Acc = ValIdx<M>;
  T* vals;  // may be null
  int64_t* idx;
  M ident;
  __device__ Acc identity() const { return {ident, -1}; }
  __device__ Acc step(Acc a, M v, int64_t i, int64_t) const {
    return (a.i < 0 || better<M, IsMax>(v, a.v)) ? Acc{v, i} : a;
  }
  // commutative: the strictly better value wins, ties go to the smaller index
  __device__ Acc merge(Acc a, Acc b) const {
    if (a.i < 0) return b;
    if (b.i < 0) return a;
    if (better<M, IsMax>(b.v, a.v)) return b;
    if (better<M, IsMax>(a.v, b.v)) return a;
    return a.i <= b.i ? a : b;
  }
  __device__ void write(int64_t o, Acc a) const {
    if (vals) store<T>(vals + o, a.v);
    idx[o] = a.i;
  }
};

Device dev_of(const void* p) { return Device(DeviceType::CUDA, device_of_pointer(p, "CUDA reduction")); }
// The device of a ReduceArgs output (ReduceArgs carries raw pointers only).
Device args_device(const ReduceArgs& a) { return dev_of(a.out ? a.out : a.out2); }

template <typename T>
void cuda_sum(const ReduceArgs& a) {
  using Op = SumOp<T>;
  if (a.g.outer * a.g.inner == 0) return;
  run_reduce(static_cast<const T*>(a.in), a.g, Op{static_cast<typename Op::Out*>(a.out), a.p}, args_device(a));
}
template <typename T>
void cuda_prod(const ReduceArgs& a) {
  using Op = ProdOp<T>;
  if (a.g.outer * a.g.inner == 0) return;
  run_reduce(static_cast<const T*>(a.in), a.g, Op{static_cast<typename Op::Out*>(a.out)}, args_device(a));
}
template <typename T>
void cuda_amax(const ReduceArgs& a) {
  if (a.g.outer * a.g.inner == 0) return;
  using M = opmath_t<T>;
  run_reduce(static_cast<const T*>(a.in), a.g, ExtremeOp<T, true>{static_cast<T*>(a.out), worst_host<M, true>()},
             args_device(a));
}
template <typename T>
void cuda_amin(const ReduceArgs& a) {
  if (a.g.outer * a.g.inner == 0) return;
  using M = opmath_t<T>;
  run_reduce(static_cast<const T*>(a.in), a.g, ExtremeOp<T, false>{static_cast<T*>(a.out), worst_host<M, false>()},
             args_device(a));
}
template <typename T>
void cuda_max_dim(const ReduceArgs& a) {
  if (a.g.outer * a.g.inner == 0) return;
  using M = opmath_t<T>;
  run_reduce(static_cast<const T*>(a.in), a.g,
             ArgExtremeOp<T, true>{static_cast<T*>(a.out), static_cast<int64_t*>(a.out2), worst_host<M, true>()},
             args_device(a));
}
template <typename T>
void cuda_min_dim(const ReduceArgs& a) {
  if (a.g.outer * a.g.inner == 0) return;
  using M = opmath_t<T>;
  run_reduce(static_cast<const T*>(a.in), a.g,
             ArgExtremeOp<T, false>{static_cast<T*>(a.out), static_cast<int64_t*>(a.out2), worst_host<M, false>()},
             args_device(a));
}

// gi (outer, r, inner) zero-filled; gi[o, idx[t], j] = g[t] for t = o * inner + j.
template <typename T>
__global__ void scatter_index_kernel(T* gi, const T* g, const int64_t* idx, int64_t outer, int64_t r, int64_t inner) {
  const int64_t n = outer * inner;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = t / inner, j = t % inner, k = idx[t];
    if (k >= 0 && k < r) gi[(o * r + k) * inner + j] = g[t];
  }
}
template <typename T>
void cuda_scatter_index(const ReduceArgs& a) {
  const int64_t n = a.g.outer * a.g.inner;
  if (n == 0 || a.g.r == 0) return;
  Device dev = args_device(a);
  DeviceGuard guard(dev.index);
  scatter_index_kernel<T><<<blocks_for(n, 256), 256, 0, current_stream(dev.index)>>>(
      static_cast<T*>(a.out), static_cast<const T*>(a.in), static_cast<const int64_t*>(a.aux), a.g.outer, a.g.r,
      a.g.inner);
  WEFT_CUDA_KERNEL_CHECK("max_backward");
}

// gi[k] = g * prod_{m != k} x[m] along r, exact with zeros (prefix then suffix, in double).
template <typename T>
__global__ void prod_backward_kernel(T* gi, const T* x, const T* g, int64_t outer, int64_t r, int64_t inner) {
  const int64_t n = outer * inner;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = t / inner, j = t % inner;
    const int64_t base = o * r * inner + j;
    double pre = 1.0;
    for (int64_t k = 0; k < r; ++k) {
      store<T>(gi + base + k * inner, static_cast<opmath_t<T>>(pre));
      pre *= static_cast<double>(load<T>(x + base + k * inner));
    }
    double suf = 1.0;
    const double gv = static_cast<double>(load<T>(g + t));
    for (int64_t k = r - 1; k >= 0; --k) {
      const int64_t at = base + k * inner;
      store<T>(gi + at, static_cast<opmath_t<T>>(static_cast<double>(load<T>(gi + at)) * suf * gv));
      suf *= static_cast<double>(load<T>(x + at));
    }
  }
}
template <typename T>
void cuda_prod_backward(const ReduceArgs& a) {
  const int64_t n = a.g.outer * a.g.inner;
  if (n == 0 || a.g.r == 0) return;
  Device dev = args_device(a);
  DeviceGuard guard(dev.index);
  prod_backward_kernel<T><<<blocks_for(n, 128), 128, 0, current_stream(dev.index)>>>(
      static_cast<T*>(a.out), static_cast<const T*>(a.in), static_cast<const T*>(a.aux), a.g.outer, a.g.r, a.g.inner);
  WEFT_CUDA_KERNEL_CHECK("prod_backward");
}

template <typename M>
struct ExpF {
  __device__ M operator()(M x) const { return dexp(x); }
};
template <typename M>
struct EqMaskF {
  __device__ M operator()(M x, M y) const { return x == y ? M(1) : M(0); }
};
template <typename T>
void cuda_exp(const Tensor& out, const Tensor& a) {
  elementwise<T, T>(out, {a}, ExpF<opmath_t<T>>{});
}
template <typename T>
void cuda_eq_mask(const Tensor& out, const Tensor& a, const Tensor& b) {
  elementwise<T, T, T>(out, {a, b}, EqMaskF<opmath_t<T>>{});
}

WEFT_RED_REGISTER_ALL(sum_table(), cuda_sum);
WEFT_RED_REGISTER_ALL(prod_table(), cuda_prod);
WEFT_RED_REGISTER_ALL(amax_table(), cuda_amax);
WEFT_RED_REGISTER_ALL(amin_table(), cuda_amin);
WEFT_RED_REGISTER_ALL(max_dim_table(), cuda_max_dim);
WEFT_RED_REGISTER_ALL(min_dim_table(), cuda_min_dim);
WEFT_RED_REGISTER_FLOATING(max_backward_table(), cuda_scatter_index);
WEFT_RED_REGISTER_FLOATING(prod_backward_table(), cuda_prod_backward);
WEFT_RED_REGISTER_FLOATING(exp_nograd_table(), cuda_exp);
WEFT_RED_REGISTER_NUMERIC(eq_mask_table(), cuda_eq_mask);

}  // namespace
}  // namespace weft::cuda
