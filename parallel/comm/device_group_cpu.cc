// device_group (parallel/comm/device_group.h) for builds without the CUDA toolkit:
// CPU only; CUDA requests are errors that say so.
#include "parallel/comm/device_group.h"

namespace weft::parallel {

bool nccl_backend_built() { return false; }
int visible_cuda_devices() { return 0; }

Device local_device(DeviceType type) {
  WEFT_CHECK(type == DeviceType::CPU,
             "local_device(cuda): this weft build has no NCCL backend (no CUDA toolkit at build time)");
  return kCPU;
}

std::shared_ptr<ProcessGroup> new_device_group(const std::shared_ptr<ProcessGroup>& bootstrap, Device device) {
  WEFT_CHECK(bootstrap != nullptr, "new_device_group: the bootstrap group is null");
  WEFT_CHECK(device.is_cpu(), "new_device_group(", device,
             "): this weft build has no NCCL backend (no CUDA toolkit at build time)");
  return bootstrap;
}

}  // namespace weft::parallel
