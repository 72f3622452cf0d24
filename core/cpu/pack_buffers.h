// Per-thread packing buffers of the float32 GEMM kernels (core/cpu/gemm_avx512.cc,
// core/cpu/gemm_avx2.cc).
//
// Contract: PackBuffers<A, B>::get() returns the calling thread's two float
// buffers of A and B floats, 64-byte aligned, allocated on the thread's first
// call and kept until the thread ends; their contents are whatever the last
// product left. A kernel uses them for one product at a time on its thread.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>

#include "core/error.h"

namespace weft::cpu {

template <int64_t kAFloats, int64_t kBFloats>
struct PackBuffers {
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float[], Free> a, b;

  PackBuffers() {
    a.reset(static_cast<float*>(std::aligned_alloc(64, kAFloats * sizeof(float))));
    b.reset(static_cast<float*>(std::aligned_alloc(64, kBFloats * sizeof(float))));
    WEFT_CHECK(a && b, "gemm: cannot allocate packing buffers (", kAFloats + kBFloats, " floats)");
  }
  static PackBuffers& get() {
    static thread_local PackBuffers bufs;
    return bufs;
  }
};

}  // namespace weft::cpu
