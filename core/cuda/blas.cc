// cuBLAS handle cache (see blas.h for the contract).
#include "core/cuda/blas.h"

#include <atomic>
#include <map>
#include <utility>

#include "core/cuda/library_check.h"
#include "core/cuda/library_versions.h"
#include "core/cuda/runtime.h"
#include "core/cuda/stream.h"
#include "core/ops.h"

namespace weft::cuda {
namespace {

std::atomic<bool> g_allow_tf32{false};

// 32 MiB, what PyTorch gives cuBLAS on Hopper (split-K and stream-K kernels).
constexpr int64_t kWorkspaceBytes = int64_t{32} << 20;

struct ThreadHandles {
  std::map<int, cublasHandle_t> handles;
  // workspace per (device, stream): a workspace is only reused in stream order
  std::map<std::pair<int, cudaStream_t>, Tensor> workspaces;
};

ThreadHandles& thread_handles() {
  // Leaked on purpose (see blas.h): no destructor runs at thread exit.
  thread_local ThreadHandles* h = new ThreadHandles();
  return *h;
}

}  // namespace

void set_allow_tf32(bool allow) { g_allow_tf32.store(allow); }
bool allow_tf32() { return g_allow_tf32.load(); }

cublasHandle_t blas_handle(int device) {
  ThreadHandles& th = thread_handles();
  auto it = th.handles.find(device);
  if (it == th.handles.end()) {
    cublasHandle_t h = nullptr;
    WEFT_CUBLAS_CHECK(cublasCreate(&h));
    WEFT_CUBLAS_CHECK(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));
    it = th.handles.emplace(device, h).first;
    report_cuda_versions();
    int major = 0, minor = 0, patch = 0;
    if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
      print_version_once("cuBLAS",
                         version_line("cuBLAS", int64_t{major} * 10000 + minor * 100 + patch, CUBLAS_VERSION));
  }
  cublasHandle_t h = it->second;
  cudaStream_t stream = current_stream(device);
  WEFT_CUBLAS_CHECK(cublasSetStream(h, stream));
  // cublasSetStream resets the workspace to cuBLAS's own default: set ours after it.
  auto key = std::make_pair(device, stream);
  auto ws = th.workspaces.find(key);
  if (ws == th.workspaces.end())
    ws = th.workspaces.emplace(key, empty({kWorkspaceBytes}, {DType::UInt8, Device(DeviceType::CUDA, device)})).first;
  WEFT_CUBLAS_CHECK(cublasSetWorkspace(h, ws->second.raw_data(), static_cast<size_t>(kWorkspaceBytes)));
  return h;
}

}  // namespace weft::cuda
