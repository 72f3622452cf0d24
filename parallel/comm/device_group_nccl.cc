// device_group (parallel/comm/device_group.h) for builds with the CUDA toolkit:
// CPU tensors use the bootstrap (MPI) group, CUDA tensors a ProcessGroupNCCL.
#include "parallel/comm/device_group.h"
#include "parallel/comm/mpi/process_group_mpi.h"
#include "parallel/comm/nccl/cuda_adapter.h"
#include "parallel/comm/nccl/process_group_nccl.h"

namespace weft::parallel {

bool nccl_backend_built() { return true; }
int visible_cuda_devices() { return cuda_device_count(); }

Device local_device(DeviceType type) {
  if (type == DeviceType::CPU) return kCPU;
  const int n = cuda_device_count();
  WEFT_CHECK(n > 0, "local_device(cuda): no CUDA device is visible (", cuda_adapter::unavailable_reason(), ")");
  return Device(DeviceType::CUDA, local_rank() % n);
}

std::shared_ptr<ProcessGroup> new_device_group(const std::shared_ptr<ProcessGroup>& bootstrap, Device device) {
  WEFT_CHECK(bootstrap != nullptr, "new_device_group: the bootstrap group is null");
  if (device.is_cpu()) return bootstrap;
  NCCLOptions o;
  o.device = device.index;
  return ProcessGroupNCCL::create(bootstrap, o);
}

}  // namespace weft::parallel
