// Per-thread packing buffers of the CPU GEMM kernels (core/cpu/gemm_avx512.cc,
// core/cpu/gemm_avx2.cc: float; core/cpu/gemm_bf16.cc: 32-bit pair words).
//
// Contract: PackBuffers<T>(a_elems, b_elems) holds two buffers of that many T,
// 64-byte aligned, uninitialised; a kernel keeps one as a static thread_local
// and uses it for one product at a time on its thread.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>

#include "core/error.h"

namespace weft::cpu {

template <typename T>
struct PackBuffers {
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T[], Free> a, b;

  PackBuffers(int64_t a_elems, int64_t b_elems) {
    a.reset(static_cast<T*>(std::aligned_alloc(64, a_elems * sizeof(T))));
    b.reset(static_cast<T*>(std::aligned_alloc(64, b_elems * sizeof(T))));
    WEFT_CHECK(a && b, "gemm: cannot allocate packing buffers (", a_elems + b_elems, " elements)");
  }
};

}  // namespace weft::cpu
