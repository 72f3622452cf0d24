// Internal to core/ops/reduce*.cc and softmax.cc: reduction plans, the CPU
// reduction engine, a vectorisable float exp, and private (non-differentiable)
// helpers that backward formulas use.
//
// Note [reduction layout]: every reduction runs on a contiguous block viewed as
// (outer, r, inner): `r` is the reduced extent, the output is (outer, inner).
// make_plan finds that view without copying when the input is a permutation of
// a dense layout and the reduced dims are adjacent in memory; otherwise it
// permutes the reduced dims last and copies once. inner == 1 reduces along
// contiguous rows (lane-parallel, vectorisable); inner > 1 accumulates whole rows
// of the kept inner dims (vectorised across them). Work is split into pieces that
// depend only on the shape, and partial results are merged in a fixed order, so
// results do not depend on the thread count.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "core/dispatch.h"
#include "core/kernels/reduce.h"
#include "core/ops.h"
#include "core/parallel.h"

namespace weft::reduce_detail {

// ReduceGeom, ReduceArgs and ReduceTable live in core/kernels/reduce.h (namespace weft).

struct ReducePlan {
  Tensor in;  // detached; contiguous as (outer, r, inner)
  ReduceGeom g;
  Shape raw_shape;               // the kernel output's kept dims, in kernel order
  std::vector<int64_t> to_user;  // permutation raw -> kept dims in original order
  Shape out_shape;               // user-visible result shape (keepdim applied)
  Shape keep_shape;              // input shape with reduced dims set to 1
  std::vector<int64_t> dims;     // wrapped, sorted reduced dims
  // Kernel output (numel outer*inner, kernel order) -> user-shaped tensor.
  Tensor finish(const Tensor& raw) const;
  int64_t out_numel() const { return g.outer * g.inner; }
};

ReducePlan make_plan(const char* op, const Tensor& a, const std::vector<int64_t>& dims, bool keepdim);
// Plan that always reduces along contiguous rows (inner == 1).
ReducePlan make_row_plan(const char* op, const Tensor& a, const std::vector<int64_t>& dims, bool keepdim);

// ---- the engine ----
// Op provides: Acc identity(); Acc step(Acc, In x, int64_t i, int64_t o) (i: index
// along r, o: output index); Acc merge(Acc a, Acc b) (a from earlier indices);
// void write(int64_t o, Acc).
inline constexpr int64_t kRowChunk = 16384;
inline constexpr int64_t kColTile = 256;
inline constexpr int kLanes = 16;

template <typename T, typename Op>
inline auto reduce_row(const T* p, int64_t begin, int64_t end, int64_t o, const Op& op) {
  using Acc = decltype(op.identity());
  Acc lanes[kLanes];
  for (int k = 0; k < kLanes; ++k) lanes[k] = op.identity();
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes)
    for (int k = 0; k < kLanes; ++k) lanes[k] = op.step(lanes[k], p[i + k], i + k, o);
  for (int k = 0; i < end; ++i, ++k) lanes[k] = op.step(lanes[k], p[i], i, o);
  // fixed tree merge of the lanes
  for (int w = kLanes / 2; w >= 1; w /= 2)
    for (int k = 0; k < w; ++k) lanes[k] = op.merge(lanes[k], lanes[k + w]);
  return lanes[0];
}

template <typename T, typename Op>
void run_reduce(const T* in, const ReduceGeom& g, const Op& op) {
  using Acc = decltype(op.identity());
  const int64_t outer = g.outer, r = g.r, inner = g.inner;
  if (outer * inner == 0) return;
  if (inner == 1) {
    const int64_t nchunks = std::max<int64_t>(1, (r + kRowChunk - 1) / kRowChunk);
    if (nchunks == 1) {
      parallel_for(0, outer, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(r, 1)), [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) op.write(o, reduce_row(in + o * r, 0, r, o, op));
      });
      return;
    }
    std::unique_ptr<Acc[]> part(new Acc[outer * nchunks]);
    parallel_for(0, outer * nchunks, 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        int64_t o = t / nchunks, c = t % nchunks;
        part[t] = reduce_row(in + o * r, c * kRowChunk, std::min(r, (c + 1) * kRowChunk), o, op);
      }
    });
    for (int64_t o = 0; o < outer; ++o) {
      Acc a = part[o * nchunks];
      for (int64_t c = 1; c < nchunks; ++c) a = op.merge(a, part[o * nchunks + c]);
      op.write(o, a);
    }
    return;
  }
  // inner > 1: accumulate rows of `inner`, vectorised across the kept inner dim.
  auto col_block = [&](int64_t o, int64_t j0, int64_t n, int64_t r0, int64_t r1, Acc* acc) {
    for (int64_t j = 0; j < n; ++j) acc[j] = op.identity();
    const T* base = in + o * r * inner + j0;
    for (int64_t rr = r0; rr < r1; ++rr) {
      const T* row = base + rr * inner;
      const int64_t ob = o * inner + j0;
      for (int64_t j = 0; j < n; ++j) acc[j] = op.step(acc[j], row[j], rr, ob + j);
    }
  };
  const int64_t tiles = (inner + kColTile - 1) / kColTile;
  if (outer * inner >= 2048 || r * inner <= kRowChunk) {
    const int64_t work = std::max<int64_t>(1, r * std::min(inner, kColTile));
    parallel_for(0, outer * tiles, std::max<int64_t>(1, kGrainSize / work), [&](int64_t b, int64_t e) {
      Acc acc[kColTile];
      for (int64_t t = b; t < e; ++t) {
        int64_t o = t / tiles, j0 = (t % tiles) * kColTile, n = std::min(kColTile, inner - j0);
        col_block(o, j0, n, 0, r, acc);
        for (int64_t j = 0; j < n; ++j) op.write(o * inner + j0 + j, acc[j]);
      }
    });
    return;
  }
  // few outputs, long reduction: split r into fixed blocks, merge in block order.
  const int64_t rb = std::max<int64_t>(1, kRowChunk / inner);
  const int64_t nb = (r + rb - 1) / rb;
  std::unique_ptr<Acc[]> part(new Acc[outer * nb * inner]);
  parallel_for(0, outer * nb, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      int64_t o = t / nb, c = t % nb;
      col_block(o, 0, inner, c * rb, std::min(r, (c + 1) * rb), part.get() + t * inner);
    }
  });
  // Merged block by block, each block's row in order (the same merges per
  // output as one output at a time, which read the blocks `inner` apart).
  for (int64_t o = 0; o < outer; ++o) {
    Acc* acc = part.get() + (o * nb) * inner;
    for (int64_t c = 1; c < nb; ++c) {
      const Acc* row = part.get() + (o * nb + c) * inner;
      for (int64_t j = 0; j < inner; ++j) acc[j] = op.merge(acc[j], row[j]);
    }
    for (int64_t j = 0; j < inner; ++j) op.write(o * inner + j, acc[j]);
  }
}

// ---- vectorisable exp for float (Cephes-style polynomial, ~1 ulp) ----
// exp(-inf) and anything below about -87.3 give 0; NaN stays NaN.
inline float fast_expf(float x) {
  const float xc = std::min(std::max(x, -87.0f), 88.5f);
  const float t = xc * 1.44269504088896341f + 12582912.0f;  // round to nearest via magic
  const float n = t - 12582912.0f;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const int32_t ni = std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(12582912.0f);
  float res = std::bit_cast<float>(std::bit_cast<int32_t>(y) + (ni << 23));
  res = x < -87.0f ? 0.0f : res;
  res = x > 88.5f ? std::numeric_limits<float>::infinity() : res;
  return x != x ? x : res;
}
template <typename M>
inline M exp_m(M x) {
  if constexpr (std::is_same_v<M, float>) return fast_expf(x);
  else return std::exp(x);
}

// ---- private helpers for backward formulas (no autograd recording) ----
Tensor exp_nograd(const Tensor& a);
// 1 where a == b (b broadcast to a), else 0, in a's dtype.
Tensor eq_mask_nograd(const Tensor& a, const Tensor& b);

}  // namespace weft::reduce_detail
