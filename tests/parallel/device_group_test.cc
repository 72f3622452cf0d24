// parallel/comm/device_group.h in every build: CPU keeps the bootstrap group; CUDA
// without a GPU (or without the NCCL backend) is an error that says which.
#include "parallel/comm/device_group.h"

#include <gtest/gtest.h>

#include "parallel/comm/inproc/process_group_inproc.h"
#include "tests/testing.h"

namespace weft::parallel {
namespace {

TEST(DeviceGroup, CpuKeepsTheBootstrapGroup) {
  auto boot = std::shared_ptr<ProcessGroup>(ProcessGroupInProc::create_world(1)[0]);
  EXPECT_EQ(new_device_group(boot, kCPU), boot);
  EXPECT_EQ(local_device(DeviceType::CPU), kCPU);
  EXPECT_WEFT_ERROR(new_device_group(nullptr, kCPU), "bootstrap group is null");
}

TEST(DeviceGroup, CudaWithoutGpuOrNcclIsAClearError) {
  if (visible_cuda_devices() > 0) GTEST_SKIP() << "a GPU is visible";
  auto boot = std::shared_ptr<ProcessGroup>(ProcessGroupInProc::create_world(1)[0]);
  const char* why = nccl_backend_built() ? "no CUDA device is visible" : "no NCCL backend";
  EXPECT_WEFT_ERROR(new_device_group(boot, Device(DeviceType::CUDA, 0)), why);
  EXPECT_WEFT_ERROR(local_device(DeviceType::CUDA), why);
}

}  // namespace
}  // namespace weft::parallel
