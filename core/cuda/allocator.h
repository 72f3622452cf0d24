// The CUDA device allocator (weft's caching allocator over cudaMalloc) and pinned
// host memory. Linking //core/cuda registers the allocator for DeviceType::CUDA.
//
// Contract: tensors on cuda:N get memory cached per (device, current stream at
// allocation); see core/cuda/caching_allocator.h for reuse rules and
// core/cuda/stream.h for when record_stream() is needed. Before releasing cached
// segments on an out-of-memory retry the allocator waits up to
// WEFT_OOM_COMM_WAIT_MS (default 5000) for communication in flight on the device
// to finish (Note [cudaFree and communication], core/cuda/comm_activity.h).
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
// The CUDA device holding `p` (any address inside a tensor's memory): the caching
// allocator's segment map, else cudaPointerGetAttributes (memory weft did not
// allocate). Throws naming `what` when p is not device memory.
int device_of_pointer(const void* p, const char* what);

// A CPU tensor in page-locked memory (same values), for asynchronous copies.
Tensor pin_memory(const Tensor& t);
bool is_pinned(const Tensor& t);

}  // namespace weft::cuda
