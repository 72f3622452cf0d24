#include "core/cuda/runtime.h"

#include <cuda_runtime_api.h>

#include "core/cuda/check.h"

namespace weft::cuda {

int device_count() {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

int current_device() {
  int d = 0;
  WEFT_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

void set_device(int index) { WEFT_CUDA_CHECK(cudaSetDevice(index)); }

void check_device(Device d) {
  WEFT_CHECK(d.is_cuda(), "expected a CUDA device, got ", d);
  int n = device_count();
  WEFT_CHECK(n > 0, "device ", d, " requested but no CUDA GPU is visible (cudaGetDeviceCount reports none)");
  WEFT_CHECK(d.index >= 0 && d.index < n, "device ", d, " does not exist: ", n, " CUDA device(s) visible");
}

void synchronize(int index) {
  if (index < 0) {
    WEFT_CUDA_CHECK(cudaDeviceSynchronize());
    return;
  }
  DeviceGuard g(index);
  WEFT_CUDA_CHECK(cudaDeviceSynchronize());
}

DeviceGuard::DeviceGuard(int index) {
  prev_ = current_device();
  if (prev_ != index) set_device(index);
}

DeviceGuard::~DeviceGuard() {
  int cur = -1;
  if (cudaGetDevice(&cur) == cudaSuccess && cur != prev_) (void)cudaSetDevice(prev_);
}

}  // namespace weft::cuda
