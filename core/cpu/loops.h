// CPU elementwise loop machinery shared by every elementwise kernel.
//
// Contract: cpu::elementwise<Out, In...>(out, {inputs...}, f) computes
// out[idx] = Out(f(opmath(in[idx])...)) for every index of out. All operands must
// already have out's shape (broadcast inputs are expand()ed views with stride 0).
// Operands may be arbitrarily strided; adjacent dims are coalesced, contiguous
// and scalar-broadcast inner loops are specialised so the compiler vectorises
// them, and the index space is split across cores with parallel_for. f receives
// and returns opmath_t values (float for the 16-bit float types).
#pragma once

#include <array>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/parallel.h"
#include "core/tensor.h"

namespace weft::cpu {

// Geometry of N operands over a common shape, strides in bytes, coalesced.
template <size_t N>
struct StridedGeometry {
  std::vector<int64_t> sizes;                   // innermost last
  std::vector<std::array<int64_t, N>> strides;  // per dim, per operand (bytes)
  std::array<char*, N> base;
};

template <size_t N>
StridedGeometry<N> make_geometry(const std::array<const Tensor*, N>& ops) {
  StridedGeometry<N> g;
  const Shape& shape = ops[0]->sizes();
  for (size_t k = 0; k < N; ++k) g.base[k] = static_cast<char*>(ops[k]->raw_data());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    std::array<int64_t, N> st;
    for (size_t k = 0; k < N; ++k) st[k] = ops[k]->strides()[d] * static_cast<int64_t>(ops[k]->element_size());
    if (!g.sizes.empty()) {
      // merge with the previous (outer) dim when it is a pure continuation
      bool merge = true;
      for (size_t k = 0; k < N; ++k)
        if (g.strides.back()[k] != st[k] * shape[d]) {
          merge = false;
          break;
        }
      if (merge) {
        g.sizes.back() *= shape[d];
        g.strides.back() = st;
        continue;
      }
    }
    g.sizes.push_back(shape[d]);
    g.strides.push_back(st);
  }
  if (g.sizes.empty()) {  // scalar
    g.sizes.push_back(1);
    g.strides.push_back({});
  }
  return g;
}

// Calls loop(ptrs, inner_strides, n) over the inner dimension for every outer
// index in the flat range [begin, end).
template <size_t N, typename Loop>
void for_each_inner(const StridedGeometry<N>& g, int64_t begin, int64_t end, Loop& loop) {
  const int64_t nd = static_cast<int64_t>(g.sizes.size());
  const int64_t inner = g.sizes[nd - 1];
  const std::array<int64_t, N>& inner_st = g.strides[nd - 1];
  // multi-index of `begin`
  std::vector<int64_t> idx(nd, 0);
  int64_t rem = begin;
  for (int64_t d = nd - 1; d >= 0; --d) {
    idx[d] = rem % g.sizes[d];
    rem /= g.sizes[d];
  }
  int64_t pos = begin;
  while (pos < end) {
    std::array<char*, N> ptrs;
    for (size_t k = 0; k < N; ++k) {
      int64_t off = 0;
      for (int64_t d = 0; d < nd; ++d) off += idx[d] * g.strides[d][k];
      ptrs[k] = g.base[k] + off;
    }
    int64_t n = std::min(inner - idx[nd - 1], end - pos);
    loop(ptrs.data(), inner_st.data(), n);
    pos += n;
    idx[nd - 1] += n;
    for (int64_t d = nd - 1; d > 0 && idx[d] >= g.sizes[d]; --d) {
      idx[d] = 0;
      ++idx[d - 1];
    }
  }
}

namespace detail {

template <typename T>
inline opmath_t<T> load(const char* p) {
  return static_cast<opmath_t<T>>(*reinterpret_cast<const T*>(p));
}

// A computed value as the output type. Floating values go to integer types
// through int64 (truncated toward zero, then wrapped to the width: -2.0 becomes
// 254 as uint8, as in PyTorch), which a plain cast leaves undefined; the CUDA
// kernels' store<>() (core/cuda/loops.cuh) does the same.
template <typename Out, typename V>
inline Out to_out(V v) {
  if constexpr (std::is_integral_v<Out> && !std::is_same_v<Out, bool> && std::is_floating_point_v<V>)
    return static_cast<Out>(static_cast<int64_t>(v));
  else return static_cast<Out>(v);
}

// Contiguous output; input k contiguous unless bit k of ScalarMask (then stride 0).
template <unsigned ScalarMask, typename Out, typename... In, typename F, size_t... I>
inline void contiguous_loop(char** ptrs, int64_t n, const F& f, std::index_sequence<I...>) {
  Out* __restrict out = reinterpret_cast<Out*>(ptrs[0]);
  std::tuple<const In*...> in{reinterpret_cast<const In*>(ptrs[I + 1])...};
  std::tuple<opmath_t<In>...> scalars{
      (((ScalarMask >> I) & 1u) ? static_cast<opmath_t<In>>(*std::get<I>(in)) : opmath_t<In>{})...};
  for (int64_t i = 0; i < n; ++i) {
    out[i] = to_out<Out>(
        f((((ScalarMask >> I) & 1u) ? std::get<I>(scalars) : static_cast<opmath_t<In>>(std::get<I>(in)[i]))...));
  }
}

template <typename Out, typename... In, typename F, size_t... I>
inline void strided_loop(char** ptrs, const int64_t* st, int64_t n, const F& f, std::index_sequence<I...>) {
  for (int64_t i = 0; i < n; ++i) {
    *reinterpret_cast<Out*>(ptrs[0] + i * st[0]) = to_out<Out>(f(load<In>(ptrs[I + 1] + i * st[I + 1])...));
  }
}

template <unsigned Mask, typename Out, typename... In, typename F, size_t... I>
inline bool try_mask(unsigned mask, char** ptrs, int64_t n, const F& f, std::index_sequence<I...> seq) {
  if (mask != Mask) return false;
  contiguous_loop<Mask, Out, In...>(ptrs, n, f, seq);
  return true;
}

template <typename Out, typename... In, typename F>
inline void inner_loop(char** ptrs, const int64_t* st, int64_t n, const F& f) {
  constexpr size_t N = sizeof...(In);
  using Seq = std::make_index_sequence<N>;
  if (st[0] == static_cast<int64_t>(sizeof(Out))) {
    constexpr std::array<size_t, N> sizes{sizeof(In)...};
    unsigned mask = 0;
    bool ok = true;
    for (size_t k = 0; k < N; ++k) {
      if (st[k + 1] == 0) mask |= 1u << k;
      else if (st[k + 1] != static_cast<int64_t>(sizes[k])) ok = false;
    }
    if (ok) {
      if constexpr (N == 1) {
        if (try_mask<0, Out, In...>(mask, ptrs, n, f, Seq{})) return;
      } else if constexpr (N == 2) {
        if (try_mask<0, Out, In...>(mask, ptrs, n, f, Seq{})) return;
        if (try_mask<1, Out, In...>(mask, ptrs, n, f, Seq{})) return;
        if (try_mask<2, Out, In...>(mask, ptrs, n, f, Seq{})) return;
      } else if constexpr (N == 3) {
        if (try_mask<0, Out, In...>(mask, ptrs, n, f, Seq{})) return;
      }
    }
  }
  strided_loop<Out, In...>(ptrs, st, n, f, Seq{});
}

}  // namespace detail

template <typename Out, typename... In, typename F>
void elementwise(const Tensor& out, const std::array<Tensor, sizeof...(In)>& inputs, const F& f,
                 int64_t grain = kGrainSize) {
  constexpr size_t N = sizeof...(In) + 1;
  std::array<const Tensor*, N> ops;
  ops[0] = &out;
  for (size_t k = 0; k < N - 1; ++k) ops[k + 1] = &inputs[k];
  if (out.numel() == 0) return;
  StridedGeometry<N> g = make_geometry<N>(ops);
  auto loop = [&](char** ptrs, const int64_t* st, int64_t n) { detail::inner_loop<Out, In...>(ptrs, st, n, f); };
  parallel_for(0, out.numel(), grain, [&](int64_t b, int64_t e) { for_each_inner<N>(g, b, e, loop); });
}

}  // namespace weft::cpu
