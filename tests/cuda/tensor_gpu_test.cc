// CUDA tensors: device checks, host<->device copies (all dtypes, strided,
// converting, pinned), the caching allocator's statistics, streams and events.
// Skips without a GPU (except NoGpu, which checks the error a CPU-only machine gives).
#include <gtest/gtest.h>

#include "core/cuda/allocator.h"
#include "core/cuda/runtime.h"
#include "core/cuda/stream.h"
#include "core/ops.h"
#include "tests/cuda/gpu_testing.h"

namespace weft {
namespace {
using testing::kGPU;
using testing::rnd;
using testing::tensors_near;

TEST(CudaNoGpu, CreatingACudaTensorWithoutAGpuIsAClearError) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is visible";
  EXPECT_WEFT_ERROR(empty({2}, {DType::Float32, kGPU}), "no CUDA GPU is visible");
  EXPECT_WEFT_ERROR(ones({2}).to(kGPU), "no CUDA GPU is visible");
}

TEST(CudaTensor, RoundTripEveryDtype) {
  WEFT_REQUIRE_GPU();
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int32, DType::Int64,
                   DType::UInt8, DType::Bool}) {
    Tensor h = (rnd({3, 5, 7}, DType::Float64, 3) * 50).to(dt);
    Tensor d = h.to(kGPU);
    EXPECT_EQ(d.device(), kGPU);
    EXPECT_EQ(d.dtype(), dt);
    EXPECT_TRUE(tensors_near(d.cpu(), h, 0)) << dt;
  }
}

TEST(CudaTensor, StridedConvertingAndBroadcastCopies) {
  WEFT_REQUIRE_GPU();
  Tensor h = rnd({6, 4}, DType::Float32, 5);
  Tensor ht = h.t();  // non-contiguous host source
  Tensor d = ht.to(kGPU);
  EXPECT_TRUE(tensors_near(d.cpu(), ht, 0));
  // device -> host into a non-contiguous destination
  Tensor dst = zeros({6, 4}).t();
  copy_(dst, d);
  EXPECT_TRUE(tensors_near(dst, ht, 0));
  // conversion on the device, non-contiguous device source
  Tensor dh = d.t().to(DType::Float16);
  EXPECT_TRUE(tensors_near(dh.cpu(), h.to(DType::Float16), 0));
  // broadcasting copy into a poisoned device tensor
  Tensor out = testing::poisoned_empty({3, 4}, DType::Float32);
  Tensor row = rnd({4}, DType::Float32, 9);
  copy_(out, row.to(kGPU));
  EXPECT_TRUE(tensors_near(out.cpu(), expand(row, {3, 4}), 0));
  // host -> non-contiguous device destination
  Tensor dt = empty({4, 6}, {DType::Float32, kGPU}).t();
  copy_(dt, h);
  EXPECT_TRUE(tensors_near(dt.cpu(), h, 0));
}

TEST(CudaTensor, FillWritesEveryElementOfAView) {
  WEFT_REQUIRE_GPU();
  Tensor d = zeros({4, 6}, {DType::BFloat16, kGPU});
  Tensor v = d.slice(1, 1, 5, 2);  // columns 1 and 3
  fill_(v, 2.5);
  Tensor want = zeros({4, 6}, {DType::BFloat16});
  Tensor wv = want.slice(1, 1, 5, 2);
  fill_(wv, 2.5);
  EXPECT_TRUE(tensors_near(d.cpu(), want, 0));
}

TEST(CudaTensor, PinnedMemoryCopiesAsynchronously) {
  WEFT_REQUIRE_GPU();
  Tensor h = rnd({1 << 16}, DType::Float32, 11);
  Tensor p = cuda::pin_memory(h);
  EXPECT_TRUE(cuda::is_pinned(p));
  EXPECT_FALSE(cuda::is_pinned(h));
  Tensor d = p.to(kGPU);
  EXPECT_TRUE(tensors_near(d.cpu(), h, 0));
  EXPECT_WEFT_ERROR(cuda::pin_memory(d), "only CPU tensors can be pinned");
}

TEST(CudaTensor, DeviceErrorsNameTheDevices) {
  WEFT_REQUIRE_GPU();
  Tensor d = ones({2}).to(kGPU);
  EXPECT_WEFT_ERROR(add(ones({2}), d), "expected all tensors on the same device");
  EXPECT_WEFT_ERROR(empty({2}, {DType::Float32, Device(DeviceType::CUDA, 99)}), "cuda:99 does not exist");
}

TEST(CudaAllocator, StatisticsTrackAllocatedReservedAndPeak) {
  WEFT_REQUIRE_GPU();
  cuda::synchronize();
  cuda::empty_cache();
  cuda::reset_peak_memory_stats(0);
  cuda::MemoryStats s0 = cuda::memory_stats(0);
  {
    Tensor a = empty({1 << 20}, {DType::Float32, kGPU});  // 4 MiB: large pool, 20 MiB segment
    cuda::MemoryStats s1 = cuda::memory_stats(0);
    EXPECT_EQ(s1.allocated - s0.allocated, 4 << 20);
    EXPECT_GE(s1.reserved - s0.reserved, 20 << 20);
  }
  cuda::MemoryStats s2 = cuda::memory_stats(0);
  EXPECT_EQ(s2.allocated, s0.allocated);
  EXPECT_GE(s2.peak_allocated, s0.allocated + (4 << 20));
  {
    Tensor b = empty({1 << 20}, {DType::Float32, kGPU});  // served from the cache
    EXPECT_EQ(cuda::memory_stats(0).reserved, s2.reserved);
  }
  cuda::empty_cache();
  EXPECT_LT(cuda::memory_stats(0).reserved, s2.reserved);
}

TEST(CudaStream, EventsOrderWorkAcrossStreams) {
  WEFT_REQUIRE_GPU();
  cuda::Stream side(0);
  Tensor a = rnd({1 << 18}, DType::Float32, 2).to(kGPU);
  cuda::Event done(/*timing=*/true), start(true);
  start.record(cuda::current_stream(0));
  Tensor b;
  {
    cuda::StreamGuard g(0, side.get());
    cuda::Event ready;
    ready.record(nullptr);
    ready.block(side.get());
    b = empty(a.sizes(), {DType::Float32, kGPU});
    copy_(b, a);
    cuda::record_stream(b, side.get());
    done.record(side.get());
  }
  done.synchronize();
  EXPECT_TRUE(done.query());
  EXPECT_GE(start.elapsed_ms(done), 0.0f);
  EXPECT_TRUE(tensors_near(b.cpu(), a.cpu(), 0));
}

}  // namespace
}  // namespace weft
