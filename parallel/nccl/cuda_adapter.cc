// cuda_adapter (parallel/nccl/cuda_adapter.h): cudart directly, until core/cuda
// provides the current stream, the caching allocator and the check macros.
#include "parallel/nccl/cuda_adapter.h"

namespace weft::parallel::cuda_adapter {

int cuda_device_count() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // cudaErrorNoDevice / cudaErrorInsufficientDriver: no GPU here
    return 0;
  }
  return n;
}

cudaStream_t compute_stream(int /*device*/) { return cudaStreamLegacy; }

void* scratch_alloc(size_t nbytes, cudaStream_t stream) {
  void* p = nullptr;
  if (nbytes == 0) return nullptr;
  WEFT_CUDA_CHECK(cudaMallocAsync(&p, nbytes, stream), "ProcessGroupNCCL: allocating ", nbytes, " bytes of scratch");
  return p;
}

void scratch_free(void* ptr, cudaStream_t stream) {
  if (ptr != nullptr) WEFT_CUDA_CHECK(cudaFreeAsync(ptr, stream), "ProcessGroupNCCL: freeing scratch");
}

std::string cuda_error_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

DeviceGuard::DeviceGuard(int device) {
  WEFT_CUDA_CHECK(cudaGetDevice(&previous_), "DeviceGuard");
  if (previous_ != device) WEFT_CUDA_CHECK(cudaSetDevice(device), "DeviceGuard: selecting GPU ", device);
}

DeviceGuard::~DeviceGuard() {
  int now = -1;
  if (cudaGetDevice(&now) == cudaSuccess && now != previous_ && previous_ >= 0) (void)cudaSetDevice(previous_);
}

}  // namespace weft::parallel::cuda_adapter
