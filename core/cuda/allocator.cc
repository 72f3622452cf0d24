#include "core/cuda/allocator.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/cuda/check.h"
#include "core/cuda/comm_activity.h"
#include "core/cuda/runtime.h"
#include "core/cuda/stream.h"
#include "core/ops.h"
#include "core/storage.h"

namespace weft::cuda {
namespace {

class CudaBackend final : public MemoryBackend {
 public:
  void* raw_alloc(int device, size_t bytes) override {
    DeviceGuard g(device);
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;
    }
    WEFT_CUDA_CHECK(e);
    return p;
  }
  void raw_free(int device, void* ptr) override {
    DeviceGuard g(device);
    WEFT_CUDA_CHECK(cudaFree(ptr));
  }
  void* record_event(int device, void* stream) override {
    DeviceGuard g(device);
    cudaEvent_t e;
    WEFT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    WEFT_CUDA_CHECK(cudaEventRecord(e, static_cast<cudaStream_t>(stream)));
    return e;
  }
  bool event_done(void* event) override {
    cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (e == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    WEFT_CUDA_CHECK(e);
    return true;
  }
  void destroy_event(void* event) override { (void)cudaEventDestroy(static_cast<cudaEvent_t>(event)); }
  // Note [cudaFree and communication]: cudaFree synchronises the device.
  std::string release_blocker(int device) override {
    static const std::chrono::milliseconds budget = [] {
      const char* env = std::getenv("WEFT_OOM_COMM_WAIT_MS");
      return std::chrono::milliseconds(env != nullptr && *env != '\0' ? std::atoll(env) : 5000);
    }();
    const int n = comm_activity().wait_idle(device, budget);
    if (n == 0) return "";
    return detail::str_cat(n, " communication operation(s) (NCCL) still in flight on cuda:", device, " after ",
                           budget.count(), " ms, and cudaFree would synchronise the device with kernels that may be ",
                           "waiting for a peer (WEFT_OOM_COMM_WAIT_MS sets the wait)");
  }
};

class CudaAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device device) override {
    if (nbytes == 0) return nullptr;
    check_device(device);
    return device_allocator().malloc(device.index, nbytes, current_stream(device.index));
  }
  void deallocate(void* ptr, size_t, Device) override {
    if (ptr) device_allocator().free(ptr);
  }
};

// Registers the CUDA allocator when //core/cuda is linked. No CUDA call happens
// here, so binaries start on machines without a GPU.
const bool g_registered = [] {
  static CudaAllocator a;
  set_allocator(DeviceType::CUDA, &a);
  return true;
}();

}  // namespace

CachingAllocator& device_allocator() {
  // Never destroyed: tensors in static storage may be freed after main returns.
  static CudaBackend* backend = new CudaBackend;
  static CachingAllocator* a = new CachingAllocator(backend);
  return *a;
}

MemoryStats memory_stats(int device) { return device_allocator().stats(device); }
void reset_peak_memory_stats(int device) { device_allocator().reset_peak_stats(device); }
void empty_cache() { device_allocator().empty_cache(-1); }

void record_stream(const Tensor& t, cudaStream_t stream) {
  WEFT_CHECK(t.device().is_cuda(), "record_stream: tensor is on ", t.device(), ", not a CUDA device");
  void* base = t.impl()->storage()->data();
  if (base) device_allocator().record_stream(base, stream);
}

int device_of_pointer(const void* p, const char* what) {
  const int d = device_allocator().device_of(p);
  if (d >= 0) return d;
  cudaPointerAttributes attr{};
  WEFT_CUDA_CHECK(cudaPointerGetAttributes(&attr, p));
  WEFT_CHECK(attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged, what,
             ": the output pointer is not device memory");
  return attr.device;
}

Tensor pin_memory(const Tensor& t) {
  WEFT_CHECK(t.device().is_cpu(), "pin_memory: tensor is on ", t.device(), "; only CPU tensors can be pinned");
  WEFT_CHECK(is_available(), "pin_memory: no CUDA GPU is visible");
  Tensor src = t.contiguous();
  size_t n = src.nbytes();
  void* p = nullptr;
  WEFT_CUDA_CHECK(cudaHostAlloc(&p, n ? n : 1, cudaHostAllocDefault));
  if (n) std::memcpy(p, src.raw_data(), n);
  return from_blob(p, src.sizes(), src.dtype(), [](void* q) { (void)cudaFreeHost(q); });
}

bool is_pinned(const Tensor& t) {
  if (!t.device().is_cpu() || !is_available() || t.raw_data() == nullptr) return false;
  cudaPointerAttributes attr;
  if (cudaPointerGetAttributes(&attr, t.raw_data()) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeHost;
}

}  // namespace weft::cuda
