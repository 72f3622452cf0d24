// The generic CUDA reduction engine (the GPU twin of run_reduce in
// core/ops/reduce_util.h), used by reduce.cu and reduce_stats.cu.
//
// Contract: run_reduce<T>(in, geom, op, like) reduces the contiguous (outer, r,
// inner) block `in` (device pointer of weft type T) along r, on the current stream
// of `like`'s device. Op is a trivially copyable struct with
//   using Acc = ...;                                      (the accumulator)
//   __device__ Acc identity() const;
//   __device__ Acc step(Acc a, opmath_t<T> x, int64_t i, int64_t o) const;  (i along r, o output)
//   __device__ Acc merge(Acc a, Acc b) const;            (associative, commutative)
//   __device__ void write(int64_t o, Acc a) const;
// Acc must be an arithmetic type or a struct with a static shfl_down(Acc, int).
// Paths:
//  - inner == 1, r <= 256: one warp per row (8 rows per 256-thread block);
//  - inner == 1, larger r: one block per row; when there are too few rows to fill
//    the GPU and r is long, r is split into chunks whose partial accumulators go to
//    a scratch buffer and are merged per row (in chunk order) by a second kernel;
//  - inner > 1: 32 columns per block across threadIdx.x (coalesced) and up to 16
//    slices of r across threadIdx.y, merged through shared memory; when the
//    (row, 32-column tile) blocks are too few to fill the GPU and r is long, r is
//    also split into chunks whose partials go to a scratch buffer and are merged
//    per output in chunk order by a second kernel (deterministic; with one chunk
//    the order of operations is the single-kernel one).
// Every output is written exactly once (r == 0 writes identity()).
#pragma once

#include "core/cuda/red_common.cuh"
#include "core/kernels/reduce.h"

namespace weft::cuda::red {

template <typename Op>
struct MergeOf {
  Op op;
  template <typename A>
  __device__ __forceinline__ A operator()(A a, A b) const {
    return op.merge(a, b);
  }
};

template <typename T, typename Op>
__global__ void reduce_rows_warp(const T* in, int64_t outer, int64_t r, Op op) {
  using Acc = typename Op::Acc;
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.y) + threadIdx.y; o < outer;
       o += static_cast<int64_t>(gridDim.x) * blockDim.y) {
    Acc a = op.identity();
    const T* p = in + o * r;
    for (int64_t i = threadIdx.x; i < r; i += 32) a = op.step(a, load<T>(p + i), i, o);
    a = warp_reduce(a, MergeOf<Op>{op});
    if (threadIdx.x == 0) op.write(o, a);
  }
}

// Block per (row, chunk); chunk = [c * chunk_len, min(r, (c + 1) * chunk_len)).
// partial == nullptr: nchunks is 1 and the result is written with op.write.
template <typename T, typename Op>
__global__ void reduce_rows_block(const T* in, int64_t outer, int64_t r, int64_t nchunks, int64_t chunk_len, Op op,
                                  typename Op::Acc* partial) {
  using Acc = typename Op::Acc;
  for (int64_t t = blockIdx.x; t < outer * nchunks; t += gridDim.x) {
    const int64_t o = t / nchunks, c = t % nchunks;
    const int64_t b = c * chunk_len, e = b + chunk_len < r ? b + chunk_len : r;
    const T* p = in + o * r;
    Acc a = op.identity();
    for (int64_t i = b + threadIdx.x; i < e; i += blockDim.x) a = op.step(a, load<T>(p + i), i, o);
    a = block_reduce(a, MergeOf<Op>{op}, op.identity());
    if (threadIdx.x == 0) {
      if (partial) partial[t] = a;
      else op.write(o, a);
    }
  }
}

// One warp per row merges that row's nchunks partials.
template <typename Op>
__global__ void reduce_merge_partials(const typename Op::Acc* partial, int64_t outer, int64_t nchunks, Op op) {
  using Acc = typename Op::Acc;
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.y) + threadIdx.y; o < outer;
       o += static_cast<int64_t>(gridDim.x) * blockDim.y) {
    Acc a = op.identity();
    for (int64_t c = threadIdx.x; c < nchunks; c += 32) a = op.merge(a, partial[o * nchunks + c]);
    a = warp_reduce(a, MergeOf<Op>{op});
    if (threadIdx.x == 0) op.write(o, a);
  }
}

inline constexpr int kColX = 32, kColYMax = 16;

// Block per (output row o, tile of 32 columns, chunk c of r); chunk c covers
// [c * chunk_len, min(r, (c + 1) * chunk_len)). partial == nullptr: nchunks is 1
// and results are written with op.write; else partial[(o * nchunks + c) * inner + j].
template <typename T, typename Op>
__global__ void reduce_cols(const T* in, int64_t outer, int64_t r, int64_t inner, int64_t tiles, int64_t nchunks,
                            int64_t chunk_len, Op op, typename Op::Acc* partial) {
  using Acc = typename Op::Acc;
  __shared__ alignas(16) unsigned char raw[kColYMax * kColX * sizeof(Acc)];
  Acc* buf = reinterpret_cast<Acc*>(raw);
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (int64_t t = blockIdx.x; t < outer * tiles * nchunks; t += gridDim.x) {
    const int64_t c = t % nchunks, ot = t / nchunks;
    const int64_t o = ot / tiles, j = (ot % tiles) * kColX + tx;
    const int64_t b = c * chunk_len, e = b + chunk_len < r ? b + chunk_len : r;
    Acc a = op.identity();
    if (j < inner) {
      const T* p = in + o * r * inner + j;
      for (int64_t i = b + ty; i < e; i += blockDim.y) a = op.step(a, load<T>(p + i * inner), i, o * inner + j);
    }
    buf[ty * kColX + tx] = a;
    __syncthreads();
    if (ty == 0 && j < inner) {
      for (int k = 1; k < static_cast<int>(blockDim.y); ++k) a = op.merge(a, buf[k * kColX + tx]);
      if (partial) partial[(o * nchunks + c) * inner + j] = a;
      else op.write(o * inner + j, a);
    }
    __syncthreads();
  }
}

// Thread per output (o, j): merges its nchunks partials in chunk order.
template <typename Op>
__global__ void reduce_cols_merge(const typename Op::Acc* partial, int64_t outer, int64_t nchunks, int64_t inner,
                                  Op op) {
  using Acc = typename Op::Acc;
  for (int64_t q = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; q < outer * inner;
       q += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = q / inner, j = q % inner;
    Acc a = op.identity();
    for (int64_t c = 0; c < nchunks; ++c) a = op.merge(a, partial[(o * nchunks + c) * inner + j]);
    op.write(q, a);
  }
}

template <typename T, typename Op>
void run_reduce(const T* in, const ReduceGeom& g, const Op& op, Device dev) {
  using Acc = typename Op::Acc;
  const int64_t outer = g.outer, r = g.r, inner = g.inner;
  if (outer * inner == 0) return;
  DeviceGuard guard(dev.index);
  cudaStream_t stream = current_stream(dev.index);
  if (inner == 1) {
    if (r <= 256) {
      dim3 block(32, 8);
      reduce_rows_warp<T, Op><<<blocks_for(outer, 8), block, 0, stream>>>(in, outer, r, op);
      WEFT_CUDA_KERNEL_CHECK("reduce_rows_warp");
      return;
    }
    const int threads = row_threads(r, 512, 8);
    const int64_t target_blocks = 4LL * sm_count(dev.index);
    int64_t nchunks = 1;
    if (outer < target_blocks && r >= (1 << 16)) {
      nchunks = std::min<int64_t>((target_blocks + outer - 1) / outer, (r + (1 << 14) - 1) / (1 << 14));
      nchunks = std::max<int64_t>(nchunks, 1);
    }
    if (nchunks == 1) {
      reduce_rows_block<T, Op><<<blocks_for(outer, 1), threads, 0, stream>>>(in, outer, r, 1, r, op, nullptr);
      WEFT_CUDA_KERNEL_CHECK("reduce_rows_block");
      return;
    }
    const int64_t chunk_len = (r + nchunks - 1) / nchunks;
    Tensor scratch = empty({static_cast<int64_t>(outer * nchunks * sizeof(Acc))}, {DType::UInt8, dev});
    Acc* partial = static_cast<Acc*>(scratch.raw_data());
    reduce_rows_block<T, Op>
        <<<blocks_for(outer * nchunks, 1), threads, 0, stream>>>(in, outer, r, nchunks, chunk_len, op, partial);
    WEFT_CUDA_KERNEL_CHECK("reduce_rows_block(partial)");
    dim3 block(32, 8);
    reduce_merge_partials<Op><<<blocks_for(outer, 8), block, 0, stream>>>(partial, outer, nchunks, op);
    WEFT_CUDA_KERNEL_CHECK("reduce_merge_partials");
    return;
  }
  const int64_t tiles = (inner + kColX - 1) / kColX;
  int ny = 1;
  while (ny < kColYMax && ny < r) ny *= 2;
  dim3 block(kColX, ny);
  // Too few (row, tile) blocks to fill the GPU (a (8192, 768) bias gradient has 24)
  // and a long r: split r into chunks too, merged per output in chunk order.
  const int64_t target_blocks = 4LL * sm_count(dev.index);
  int64_t nchunks = 1;
  if (outer * tiles < target_blocks && r >= 4 * kColYMax * 16) {
    nchunks = std::min<int64_t>((target_blocks + outer * tiles - 1) / (outer * tiles), r / (kColYMax * 16));
    nchunks = std::max<int64_t>(nchunks, 1);
  }
  if (nchunks == 1) {
    reduce_cols<T, Op>
        <<<blocks_for(outer * tiles, 1), block, 0, stream>>>(in, outer, r, inner, tiles, 1, r, op, nullptr);
    WEFT_CUDA_KERNEL_CHECK("reduce_cols");
    return;
  }
  const int64_t chunk_len = (r + nchunks - 1) / nchunks;
  Tensor scratch = empty({static_cast<int64_t>(outer * nchunks * inner * sizeof(Acc))}, {DType::UInt8, dev});
  Acc* partial = static_cast<Acc*>(scratch.raw_data());
  reduce_cols<T, Op><<<blocks_for(outer * tiles * nchunks, 1), block, 0, stream>>>(in, outer, r, inner, tiles, nchunks,
                                                                                   chunk_len, op, partial);
  WEFT_CUDA_KERNEL_CHECK("reduce_cols(partial)");
  reduce_cols_merge<Op><<<blocks_for(outer * inner, 256), 256, 0, stream>>>(partial, outer, nchunks, inner, op);
  WEFT_CUDA_KERNEL_CHECK("reduce_cols_merge");
}

}  // namespace weft::cuda::red
