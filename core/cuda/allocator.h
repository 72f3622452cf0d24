// The CUDA device allocator (weft's caching allocator over cudaMalloc) and pinned
// host memory. Linking //core/cuda registers the allocator for DeviceType::CUDA.
//
// Contract: tensors on cuda:N get memory cached per (device, current stream at
// allocation); see core/cuda/caching_allocator.h for reuse rules and
// core/cuda/stream.h for when record_stream() is needed.
#pragma once

#include <cuda_runtime_api.h>

#include "core/cuda/caching_allocator.h"
#include "core/tensor.h"

namespace weft::cuda {

CachingAllocator& device_allocator();
MemoryStats memory_stats(int device);
void reset_peak_memory_stats(int device);
// Releases cached, unused device memory back to the driver (all devices).
void empty_cache();
// Tells the allocator that `stream` uses `t`'s memory (see stream.h rule 3).
void record_stream(const Tensor& t, cudaStream_t stream);

// A CPU tensor in page-locked memory (same values), for asynchronous copies.
Tensor pin_memory(const Tensor& t);
bool is_pinned(const Tensor& t);

}  // namespace weft::cuda
