// Device counting and switching (core/cuda/device_logic.h) against a fake driver:
// the driver's error is kept (Note [device switching]: no rank creates a context
// on GPU 0; Note [process device]: one device for every thread of a process).
#include "core/cuda/device_logic.h"

#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <gtest/gtest.h>

namespace weft::cuda {
namespace {

TEST(DeviceProbe, KeepsTheDriversError) {
  DriverProbe p = probe_devices(false, false, 0, "cudaErrorInsufficientDriver",
                                "CUDA driver version is insufficient for CUDA runtime version");
  EXPECT_EQ(p.count, 0);
  EXPECT_EQ(p.reason,
            "cudaGetDeviceCount failed: cudaErrorInsufficientDriver (CUDA driver version is insufficient for CUDA "
            "runtime version)");
  p = probe_devices(false, true, 0, "cudaErrorNoDevice", "no CUDA-capable device is detected");
  EXPECT_EQ(p.count, 0);
  EXPECT_EQ(p.reason, "no CUDA device: cudaErrorNoDevice (no CUDA-capable device is detected)");
  p = probe_devices(true, false, 0, "cudaSuccess", "no error");
  EXPECT_EQ(p.count, 0);
  EXPECT_EQ(p.reason, "cudaGetDeviceCount reports no device");
  p = probe_devices(true, false, 8, "cudaSuccess", "no error");
  EXPECT_EQ(p.count, 8);
  EXPECT_EQ(p.reason, "");
}

// The CUDA runtime's per-thread current device (0 on a new thread) and primary
// contexts, created by set() as cudaSetDevice does since CUDA 12.
class FakeDriver : public DeviceOps {
 public:
  int get() override {
    std::lock_guard<std::mutex> l(mu);
    auto it = current.find(std::this_thread::get_id());
    return it == current.end() ? 0 : it->second;
  }
  void set(int device) override {
    std::lock_guard<std::mutex> l(mu);
    current[std::this_thread::get_id()] = device;
    contexts.insert(device);
    ++sets;
  }
  bool has_context(int device) override {
    std::lock_guard<std::mutex> l(mu);
    return contexts.count(device) > 0;
  }
  std::mutex mu;
  std::map<std::thread::id, int> current;
  std::set<int> contexts;
  int sets = 0;
};

TEST(DeviceSelector, GuardsNeverCreateAContextOnGpu0) {
  // A rank on cuda:1 that never set its device: every op guards to 1 and back.
  FakeDriver drv;
  DeviceSelector sel(&drv);
  for (int i = 0; i < 100; ++i) {
    const int prev = sel.exchange(1);
    EXPECT_EQ(prev, 0);
    EXPECT_EQ(drv.get(), 1);
    sel.restore(prev);
    EXPECT_EQ(sel.current(), 0);  // the thread's device is still 0 for weft...
  }
  EXPECT_EQ(drv.contexts, std::set<int>{1});  // ...but GPU 0 was never touched
  EXPECT_EQ(drv.sets, 1);                     // and the driver switched once, not 200 times
}

TEST(DeviceSelector, SwitchesBackForRealWhenThePreviousDeviceHasAContext) {
  FakeDriver drv;
  DeviceSelector sel(&drv);
  drv.contexts.insert(0);  // the thread already worked on 0 (a context exists)
  const int prev = sel.exchange(2);
  EXPECT_EQ(prev, 0);
  sel.restore(prev);
  EXPECT_EQ(drv.get(), 0);
  EXPECT_EQ(sel.current(), 0);
  EXPECT_EQ(drv.contexts, (std::set<int>{0, 2}));
}

TEST(DeviceSelector, NestedGuardsRestoreInOrder) {
  FakeDriver drv;
  DeviceSelector sel(&drv);
  const int a = sel.exchange(1);
  const int b = sel.exchange(2);
  EXPECT_EQ(b, 1);
  sel.restore(b);  // 1 has a context: real switch
  EXPECT_EQ(drv.get(), 1);
  EXPECT_EQ(sel.current(), 1);
  sel.restore(a);  // 0 has none: recorded
  EXPECT_EQ(sel.current(), 0);
  EXPECT_EQ(drv.get(), 1);
  EXPECT_EQ(drv.contexts, (std::set<int>{1, 2}));
  // the recorded device is what the next guard restores
  const int c = sel.exchange(3);
  EXPECT_EQ(c, 0);
  sel.restore(c);
  EXPECT_EQ(sel.current(), 0);
}

TEST(DeviceSelector, ProcessDeviceAppliesToEveryThreadOnce) {
  FakeDriver drv;
  DeviceSelector sel(&drv);
  EXPECT_EQ(sel.process_device(), -1);
  EXPECT_EQ(sel.set_process_device(1), 1);
  EXPECT_EQ(drv.get(), 1);
  EXPECT_EQ(sel.current(), 1);
  // guards to the process device switch nothing
  const int sets = drv.sets;
  for (int i = 0; i < 10; ++i) sel.restore(sel.exchange(1));
  EXPECT_EQ(drv.sets, sets);
  // another thread starts on the process device at its first use, not on 0
  std::thread t([&] {
    EXPECT_EQ(sel.current(), 1);
    EXPECT_EQ(drv.get(), 1);
    for (int i = 0; i < 10; ++i) sel.restore(sel.exchange(1));
  });
  t.join();
  EXPECT_EQ(drv.sets, sets + 1);  // one switch for the new thread
  EXPECT_EQ(drv.contexts, std::set<int>{1});
}

TEST(DeviceSelector, FirstProcessDeviceWinsUnlessForced) {
  FakeDriver drv;
  DeviceSelector sel(&drv);
  EXPECT_EQ(sel.set_process_device(2), 2);
  EXPECT_EQ(sel.set_process_device(0), 2);
  EXPECT_EQ(drv.get(), 2);
  EXPECT_EQ(sel.set_process_device(0, /*force=*/true), 0);
  EXPECT_EQ(sel.process_device(), 0);
  EXPECT_EQ(drv.get(), 0);
}

}  // namespace
}  // namespace weft::cuda
