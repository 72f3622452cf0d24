// cuDNN handle cache (see cudnn_handle.h for the contract).
#include "core/cuda/cudnn_handle.h"

#include <map>

#include "core/cuda/library_check.h"
#include "core/cuda/library_versions.h"
#include "core/cuda/runtime.h"
#include "core/cuda/stream.h"
#include "core/ops.h"

namespace weft::cuda {

cudnnHandle_t cudnn_handle(int device) {
  // Leaked on purpose (see cudnn_handle.h).
  thread_local auto* handles = new std::map<int, cudnnHandle_t>();
  auto it = handles->find(device);
  if (it == handles->end()) {
    cudnnHandle_t h = nullptr;
    WEFT_CUDNN_CHECK(cudnnCreate(&h));
    it = handles->emplace(device, h).first;
    report_cuda_versions();
    print_version_once("cuDNN", version_line("cuDNN", static_cast<int64_t>(cudnnGetVersion()), CUDNN_VERSION));
  }
  WEFT_CUDNN_CHECK(cudnnSetStream(it->second, current_stream(device)));
  return it->second;
}

Tensor cudnn_workspace(int device, size_t bytes) {
  if (bytes == 0) return Tensor();
  return empty({static_cast<int64_t>(bytes)}, {DType::UInt8, Device(DeviceType::CUDA, device)});
}

}  // namespace weft::cuda
