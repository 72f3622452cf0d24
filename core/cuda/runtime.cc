// CUDA devices (core/cuda/runtime.h) on the CUDA runtime, with the switching
// logic of core/cuda/device_logic.h.
#include "core/cuda/runtime.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "core/cuda/check.h"
#include "core/cuda/device_logic.h"
#include "core/cuda/index_checks.h"
#include "core/cuda/library_versions.h"

namespace weft::cuda {
namespace {

const DriverProbe& probe() {
  static const DriverProbe p = [] {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) (void)cudaGetLastError();
    return probe_devices(e == cudaSuccess, e == cudaErrorNoDevice, n, cudaGetErrorName(e), cudaGetErrorString(e));
  }();
  return p;
}

using PrimaryCtxGetState = CUresult (*)(CUdevice, unsigned int*, int*);

// cuDevicePrimaryCtxGetState through the runtime (no link against libcuda);
// null when the driver does not provide it.
PrimaryCtxGetState primary_ctx_get_state() {
  static const PrimaryCtxGetState fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &p, 12000, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return PrimaryCtxGetState(nullptr);
    }
    return reinterpret_cast<PrimaryCtxGetState>(p);
  }();
  return fn;
}

class CudaDeviceOps final : public DeviceOps {
 public:
  int get() override {
    int d = 0;
    WEFT_CUDA_CHECK(cudaGetDevice(&d));
    return d;
  }
  void set(int device) override { WEFT_CUDA_CHECK(cudaSetDevice(device)); }
  bool has_context(int device) override {
    PrimaryCtxGetState fn = primary_ctx_get_state();
    if (fn == nullptr) return true;  // unknown: switch back for real, as before
    unsigned int flags = 0;
    int active = 0;
    if (fn(static_cast<CUdevice>(device), &flags, &active) != CUDA_SUCCESS) return true;
    return active != 0;
  }
};

DeviceSelector& selector() {
  static auto* ops = new CudaDeviceOps;  // leaked: guards may run during exit
  static auto* s = new DeviceSelector(ops);
  return *s;
}

}  // namespace

int device_count() { return probe().count; }

std::string unavailable_reason() { return probe().reason; }

int current_device() { return selector().current(); }

void set_device(int index) { selector().set(index); }

int set_process_device(int index, bool force) {
  check_device(Device(DeviceType::CUDA, index));
  return selector().set_process_device(index, force);
}

int process_device() { return selector().process_device(); }

void check_device(Device d) {
  WEFT_CHECK(d.is_cuda(), "expected a CUDA device, got ", d);
  int n = device_count();
  WEFT_CHECK(n > 0, "device ", d, " requested but no CUDA GPU is visible (", unavailable_reason(), ")");
  WEFT_CHECK(d.index >= 0 && d.index < n, "device ", d, " does not exist: ", n, " CUDA device(s) visible");
}

void report_cuda_versions() {
  int rt = 0, drv = 0;
  if (cudaRuntimeGetVersion(&rt) != cudaSuccess || cudaDriverGetVersion(&drv) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  print_version_once(
      "CUDA", version_line("CUDA runtime", rt, CUDART_VERSION, cuda_text) + ", driver supports CUDA " + cuda_text(drv));
}

void synchronize(int index) {
  const int dev = index < 0 ? current_device() : index;
  DeviceGuard g(dev);
  WEFT_CUDA_CHECK(cudaDeviceSynchronize());
  flush_index_checks(dev);
}

DeviceGuard::DeviceGuard(int index) { prev_ = selector().exchange(index); }

DeviceGuard::~DeviceGuard() {
  try {
    selector().restore(prev_);
  } catch (...) {  // a destructor must not throw (the runtime may be shutting down)
  }
}

}  // namespace weft::cuda
