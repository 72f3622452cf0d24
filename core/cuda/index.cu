// CUDA indexing kernels (core/kernels/index.h): gather, scatter_add, index_select,
// index_add, masked_fill, tril/triu.
//
// Contract (matches core/ops/index.cc): index tensors are int64. The front ends
// require the index on the input's device, so it is GPU-resident and range-checked
// on the device (a bad index is skipped, then weft::Error names the op, the index
// and the size at the next synchronisation: Note [deferred index checks] in
// core/cuda/index_check_log.h); a CPU index handed to a table
// directly is copied to the GPU (and was checked by its caller). Kernels never
// access out of bounds. gather, index_select
// and tril/triu move raw elements, so they are instantiated per element size (1, 2,
// 4, 8 bytes) for every dtype. scatter_add / index_add accumulate with atomics
// (native atomicAdd for float32/float64/int32/int64/float16/bfloat16 — 16-bit types
// round after every addition like the CPU loop does — and a 32-bit CAS loop for
// uint8); the summation order is unspecified, so floating results are not bitwise
// deterministic run to run. masked_fill is an elementwise kernel (core/cuda/loops.cuh).
#include "core/cuda/red_common.cuh"
#include "core/kernels/index.h"

namespace weft::cuda {
namespace {
using namespace red;

template <size_t N>
struct Bits;
template <>
struct Bits<1> {
  using type = uint8_t;
};
template <>
struct Bits<2> {
  using type = uint16_t;
};
template <>
struct Bits<4> {
  using type = uint32_t;
};
template <>
struct Bits<8> {
  using type = uint64_t;
};

constexpr int kIdxMaxDims = 16;
// Row-major walk of `sizes` keeping three element offsets.
struct Walk3 {
  int nd = 0;
  int64_t sizes[kIdxMaxDims];
  int64_t st[3][kIdxMaxDims];
  __device__ __forceinline__ void get(int64_t linear, int64_t (&off)[3]) const {
    off[0] = off[1] = off[2] = 0;
    for (int d = nd - 1; d >= 0; --d) {
      const int64_t c = linear % sizes[d];
      linear /= sizes[d];
      off[0] += c * st[0][d];
      off[1] += c * st[1][d];
      off[2] += c * st[2][d];
    }
  }
};
Walk3 make_walk(const char* op, const Shape& shape, const Shape& s0, const Shape& s1, const Shape& s2) {
  WEFT_CHECK(shape.size() <= kIdxMaxDims, op, ": CUDA kernel supports at most ", kIdxMaxDims, " dims, got ",
             shape.size());
  Walk3 w;
  w.nd = static_cast<int>(shape.size());
  for (int d = 0; d < w.nd; ++d) {
    w.sizes[d] = shape[d];
    w.st[0][d] = s0[d];
    w.st[1][d] = s1[d];
    w.st[2][d] = s2[d];
  }
  return w;
}

// ---- gather: out[pos] = self[pos with dim replaced by index[pos]] ----
template <typename E>
__global__ void gather_kernel(E* out, const E* self, const int64_t* idx, Walk3 w, int64_t n, int64_t dstride,
                              int64_t dsize, unsigned long long* bad) {
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t off[3];
    w.get(t, off);
    const int64_t k = idx[off[2]];
    if (k < 0 || k >= dsize) {
      if (bad) report_bad_index(bad, k);
      continue;
    }
    out[off[0]] = self[off[1] + k * dstride];
  }
}
template <typename T>
void cuda_gather(const Tensor& out, const Tensor& self, const Tensor& index, int64_t dim) {
  using E = typename Bits<sizeof(T)>::type;
  const int64_t n = out.numel();
  if (n == 0) return;
  DeviceGuard guard(out.device().index);
  const bool on_gpu = index.device() == out.device();
  Tensor idx = index.device() == out.device() ? index : index.to(out.device());  // keeps strides of a GPU index
  Shape sst = self.strides();
  const int64_t dstride = sst[dim];
  sst[dim] = 0;
  Walk3 w = make_walk("gather", out.sizes(), out.strides(), sst, idx.strides());
  std::optional<BadIndexFlag> flag;
  if (on_gpu) flag.emplace(out, "gather", "index", self.size(dim));
  gather_kernel<E><<<blocks_for(n, 256), 256, 0, stream_for(out)>>>(
      static_cast<E*>(out.raw_data()), static_cast<const E*>(self.raw_data()),
      static_cast<const int64_t*>(idx.raw_data()), w, n, dstride, self.size(dim), flag ? flag->ptr() : nullptr);
  WEFT_CUDA_KERNEL_CHECK("gather");
}

// ---- scatter_add: out[pos with dim replaced by index[pos]] += src[pos], pos over index ----
template <typename T>
__global__ void scatter_add_kernel(T* out, const T* src, const int64_t* idx, Walk3 w, int64_t n, int64_t dstride,
                                   int64_t dsize, unsigned long long* bad) {
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t off[3];
    w.get(t, off);
    const int64_t k = idx[off[2]];
    if (k < 0 || k >= dsize) {
      if (bad) report_bad_index(bad, k);
      continue;
    }
    atomic_add<T>(out + off[0] + k * dstride, load<T>(src + off[1]));
  }
}
template <typename T>
void cuda_scatter_add(const Tensor& out, const Tensor& index, const Tensor& src, int64_t dim) {
  const int64_t n = index.numel();
  if (n == 0) return;
  DeviceGuard guard(out.device().index);
  const bool on_gpu = index.device() == out.device();
  Tensor idx = on_gpu ? index : index.to(out.device());
  Shape ost = out.strides();
  const int64_t dstride = ost[dim];
  ost[dim] = 0;
  Walk3 w = make_walk("scatter_add", index.sizes(), ost, src.strides(), idx.strides());
  std::optional<BadIndexFlag> flag;
  if (on_gpu) flag.emplace(out, "scatter_add", "index", out.size(dim));
  scatter_add_kernel<T><<<blocks_for(n, 256), 256, 0, stream_for(out)>>>(
      static_cast<T*>(out.raw_data()), static_cast<const T*>(src.raw_data()),
      static_cast<const int64_t*>(idx.raw_data()), w, n, dstride, out.size(dim), flag ? flag->ptr() : nullptr);
  WEFT_CUDA_KERNEL_CHECK("scatter_add");
}

// ---- index_select: out (outer, n, inner) = self (outer, size, inner)[:, idx, :] ----
template <typename E>
__global__ void index_select_kernel(E* out, const E* self, const int64_t* idx, int64_t outer, int64_t n, int64_t inner,
                                    int64_t size, unsigned long long* bad) {
  const int64_t total = outer * n * inner;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = t % inner, i = (t / inner) % n, o = t / (inner * n);
    const int64_t k = idx[i];
    if (k < 0 || k >= size) {
      if (bad) report_bad_index(bad, k);
      continue;
    }
    out[t] = self[(o * size + k) * inner + j];
  }
}
template <typename T>
void cuda_index_select(const Tensor& out, const Tensor& self, const Tensor& index) {
  using E = typename Bits<sizeof(T)>::type;
  const int64_t outer = out.size(0), n = out.size(1), inner = out.size(2), size = self.size(1);
  if (outer * n * inner == 0) return;
  DeviceGuard guard(out.device().index);
  const bool on_gpu = index.device() == out.device();
  Tensor idx = index_on(index, out);
  std::optional<BadIndexFlag> flag;
  if (on_gpu) flag.emplace(out, "index_select", "index", size);
  index_select_kernel<E><<<blocks_for(outer * n * inner, 256), 256, 0, stream_for(out)>>>(
      static_cast<E*>(out.raw_data()), static_cast<const E*>(self.raw_data()),
      static_cast<const int64_t*>(idx.raw_data()), outer, n, inner, size, flag ? flag->ptr() : nullptr);
  WEFT_CUDA_KERNEL_CHECK("index_select");
}

// ---- index_add: out (outer, size, inner)[:, idx[i], :] += src (outer, n, inner)[:, i, :] ----
template <typename T>
__global__ void index_add_kernel(T* out, const T* src, const int64_t* idx, int64_t outer, int64_t n, int64_t inner,
                                 int64_t size, unsigned long long* bad) {
  const int64_t total = outer * n * inner;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = t % inner, i = (t / inner) % n, o = t / (inner * n);
    const int64_t k = idx[i];
    if (k < 0 || k >= size) {
      if (bad) report_bad_index(bad, k);
      continue;
    }
    atomic_add<T>(out + (o * size + k) * inner + j, load<T>(src + t));
  }
}
template <typename T>
void cuda_index_add(const Tensor& out, const Tensor& index, const Tensor& src) {
  const int64_t outer = src.size(0), n = src.size(1), inner = src.size(2), size = out.size(1);
  if (outer * n * inner == 0) return;
  DeviceGuard guard(out.device().index);
  const bool on_gpu = index.device() == out.device();
  Tensor idx = index_on(index, out);
  std::optional<BadIndexFlag> flag;
  if (on_gpu) flag.emplace(out, "index_add", "index", size);
  index_add_kernel<T><<<blocks_for(outer * n * inner, 256), 256, 0, stream_for(out)>>>(
      static_cast<T*>(out.raw_data()), static_cast<const T*>(src.raw_data()),
      static_cast<const int64_t*>(idx.raw_data()), outer, n, inner, size, flag ? flag->ptr() : nullptr);
  WEFT_CUDA_KERNEL_CHECK("index_add");
}

// ---- masked_fill ----
template <typename M>
struct MaskedFillF {
  M val;
  __device__ M operator()(M x, bool m) const { return m ? val : x; }
};
template <typename T>
void cuda_masked_fill(const Tensor& out, const Tensor& self, const Tensor& mask, const Scalar& v) {
  using M = opmath_t<T>;
  const Tensor m = mask.device() == out.device() ? mask : mask.to(out.device());
  elementwise<T, T, bool>(out, {self, m}, MaskedFillF<M>{static_cast<M>(v.to<T>())});
}

// ---- tril / triu on contiguous (B, R, C) ----
template <typename E>
__global__ void tri_kernel(E* p, int64_t total, int64_t R, int64_t C, int64_t diagonal, bool lower) {
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = t % C, i = (t / C) % R;
    const bool zero = lower ? (j > i + diagonal) : (j < i + diagonal);
    if (zero) p[t] = E(0);
  }
}
template <typename T>
void cuda_tri(const Tensor& out, int64_t diagonal, bool lower) {
  using E = typename Bits<sizeof(T)>::type;
  const int64_t total = out.numel();
  if (total == 0) return;
  DeviceGuard guard(out.device().index);
  tri_kernel<E><<<blocks_for(total, 256), 256, 0, stream_for(out)>>>(static_cast<E*>(out.raw_data()), total,
                                                                     out.size(1), out.size(2), diagonal, lower);
  WEFT_CUDA_KERNEL_CHECK("tril/triu");
}

WEFT_RED_REGISTER_ALL(gather_table(), cuda_gather);
WEFT_RED_REGISTER_NUMERIC(scatter_add_table(), cuda_scatter_add);
WEFT_RED_REGISTER_ALL(index_select_table(), cuda_index_select);
WEFT_RED_REGISTER_NUMERIC(index_add_table(), cuda_index_add);
WEFT_RED_REGISTER_ALL(masked_fill_table(), cuda_masked_fill);
WEFT_RED_REGISTER_ALL(tri_table(), cuda_tri);

}  // namespace
}  // namespace weft::cuda
