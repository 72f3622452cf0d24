// device_group: the process group for a device type, chosen at run time,
// implemented by one of two files that parallel/BUILD selects at load time
// (device_group_nccl.cc where the CUDA toolkit exists, device_group_cpu.cc
// elsewhere): no #ifdef.
//
// Contract:
// - nccl_backend_built(): whether this build has the NCCL backend.
// - visible_cuda_devices(): GPUs visible to this process (0 without the NCCL
//   backend, a GPU or a driver; never throws).
// - local_device(type): kCPU, or cuda:(local_rank() % visible GPUs); an error
//   naming what is missing when there is no GPU or no NCCL backend.
// - new_device_group(bootstrap, device): the group for tensors on `device`:
//   `bootstrap` itself for CPU (the MPI group), a ProcessGroupNCCL made over
//   `bootstrap` (collective over it) for CUDA; an error when the NCCL backend
//   is not built or no GPU is visible.
#pragma once

#include <memory>

#include "core/device.h"
#include "parallel/comm/process_group.h"

namespace weft::parallel {

bool nccl_backend_built();
int visible_cuda_devices();
Device local_device(DeviceType type);
std::shared_ptr<ProcessGroup> new_device_group(const std::shared_ptr<ProcessGroup>& bootstrap, Device device);

}  // namespace weft::parallel
