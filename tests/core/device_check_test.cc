// Device-mismatch checks of op front ends: every op taking 2+ tensors rejects
// tensors on different devices with an error naming the op and both devices.
//
// Runs on CPU-only builds: a fake CUDA allocator (host memory) lets tensors claim
// to live on cuda:0; each op must fail in its front-end device check, before any
// kernel dispatch or data access.
#include <cstdlib>
#include <functional>
#include <string>

#include "core/nn_ops.h"
#include "core/storage.h"
#include "tests/testing.h"

namespace weft {
namespace {

class FakeCudaAllocator : public Allocator {
 public:
  void* allocate(size_t n, Device) override { return std::malloc(n ? n : 1); }
  void deallocate(void* p, size_t, Device) override { std::free(p); }
};

class DeviceCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    static FakeCudaAllocator fake;
    try {
      prev_ = get_allocator(Device(DeviceType::CUDA, 0));
    } catch (const Error&) {
      prev_ = nullptr;
    }
    set_allocator(DeviceType::CUDA, &fake);
  }
  void TearDown() override { set_allocator(DeviceType::CUDA, prev_); }

  static Tensor gpu(const Shape& s, DType dt = DType::Float32) { return empty(s, {dt, Device(DeviceType::CUDA, 0)}); }

 private:
  Allocator* prev_ = nullptr;
};

// `fn` throws weft::Error whose message names `op`, cuda:0 and cpu.
::testing::AssertionResult device_error(const std::string& op, const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    std::string m = e.what();
    if (m.find(op) == std::string::npos || m.find("cuda:0") == std::string::npos || m.find("cpu") == std::string::npos)
      return ::testing::AssertionFailure() << op << ": message does not name the op and both devices: " << m;
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << op << ": no error raised for tensors on cuda:0 and cpu";
}

TEST_F(DeviceCheck, Elementwise) {
  Tensor g = gpu({2, 3}), c = ones({2, 3});
  EXPECT_TRUE(device_error("add", [&] { add(g, c); }));
  EXPECT_TRUE(device_error("mul", [&] { mul(c, g); }));
  EXPECT_TRUE(device_error("div", [&] { div(g, c); }));
  EXPECT_TRUE(device_error("pow", [&] { pow(g, c); }));
  EXPECT_TRUE(device_error("maximum", [&] { maximum(g, c); }));
  EXPECT_TRUE(device_error("eq", [&] { eq(g, c); }));
  EXPECT_TRUE(device_error("logical_and", [&] { logical_and(gpu({2, 3}, DType::Bool), ones({2, 3}, {DType::Bool})); }));
  EXPECT_TRUE(device_error("add_", [&] { g.add_(c); }));
  EXPECT_TRUE(device_error("addcmul_", [&] { addcmul_(g, c, g); }));
  EXPECT_TRUE(device_error("lerp_", [&] { lerp_(g, c, 0.5); }));
}

TEST_F(DeviceCheck, Where) {
  Tensor gc = gpu({2, 3}, DType::Bool), cc = ones({2, 3}, {DType::Bool});
  EXPECT_TRUE(device_error("where", [&] { where(gc, gpu({2, 3}), ones({2, 3})); }));
  EXPECT_TRUE(device_error("where", [&] { where(cc, gpu({2, 3}), gpu({2, 3})); }));
  EXPECT_TRUE(device_error("masked_fill", [&] { masked_fill(gpu({2, 3}), cc, 0.0); }));
  Tensor g = gpu({2, 3});
  EXPECT_TRUE(device_error("masked_fill_", [&] { masked_fill_(g, cc, 0.0); }));
}

TEST_F(DeviceCheck, Matmul) {
  EXPECT_TRUE(device_error("matmul", [&] { matmul(gpu({2, 3}), ones({3, 4})); }));
  EXPECT_TRUE(device_error("mm", [&] { mm(ones({2, 3}), gpu({3, 4})); }));
  EXPECT_TRUE(device_error("bmm", [&] { bmm(gpu({2, 2, 3}), ones({2, 3, 4})); }));
  EXPECT_TRUE(device_error("linear", [&] { linear(ones({2, 3}), gpu({4, 3})); }));
  EXPECT_TRUE(device_error("linear", [&] { linear(gpu({2, 3}), gpu({4, 3}), ones({4})); }));
}

TEST_F(DeviceCheck, IndexAndJoin) {
  Tensor ci = zeros({2, 3}, {DType::Int64}), gi = gpu({2, 3}, DType::Int64);
  EXPECT_TRUE(device_error("gather", [&] { gather(gpu({2, 3}), 1, ci); }));
  EXPECT_TRUE(device_error("scatter_add", [&] { scatter_add(gpu({2, 3}), 1, gi, ones({2, 3})); }));
  EXPECT_TRUE(device_error("index_select", [&] { index_select(ones({2, 3}), 0, gpu({2}, DType::Int64)); }));
  EXPECT_TRUE(device_error("index_add", [&] { index_add(gpu({2, 3}), 0, gpu({2}, DType::Int64), ones({2, 3})); }));
  EXPECT_TRUE(device_error("cat", [&] { cat({gpu({2, 3}), ones({2, 3})}); }));
  EXPECT_TRUE(device_error("stack", [&] { stack({ones({2, 3}), gpu({2, 3})}); }));
  EXPECT_TRUE(device_error("embedding", [&] { embedding(zeros({4}, {DType::Int64}), gpu({10, 3})); }));
}

TEST_F(DeviceCheck, NnOps) {
  EXPECT_TRUE(device_error("conv2d", [&] { conv2d(gpu({1, 2, 5, 5}), ones({3, 2, 3, 3})); }));
  EXPECT_TRUE(device_error("conv2d", [&] { conv2d(gpu({1, 2, 5, 5}), gpu({3, 2, 3, 3}), ones({3})); }));
  EXPECT_TRUE(device_error("batch_norm", [&] {
    batch_norm(gpu({4, 3}), ones({3}), ones({3}), Tensor(), Tensor(), true);
  }));
  EXPECT_TRUE(device_error("batch_norm", [&] {
    batch_norm(gpu({4, 3}), Tensor(), Tensor(), ones({3}), gpu({3}), true);
  }));
  EXPECT_TRUE(device_error("layer_norm", [&] { layer_norm(gpu({4, 3}), {3}, ones({3}), gpu({3})); }));
  EXPECT_TRUE(device_error("layer_norm", [&] { layer_norm(gpu({4, 3}), {3}, gpu({3}), ones({3})); }));
  Tensor q = gpu({1, 2, 4, 8});
  EXPECT_TRUE(device_error("scaled_dot_product_attention", [&] {
    scaled_dot_product_attention(q, ones({1, 2, 4, 8}), q);
  }));
  EXPECT_TRUE(device_error("scaled_dot_product_attention", [&] {
    scaled_dot_product_attention(q, q, ones({1, 2, 4, 8}));
  }));
}

TEST_F(DeviceCheck, Losses) {
  Tensor ct = zeros({4}, {DType::Int64});
  EXPECT_TRUE(device_error("cross_entropy", [&] { cross_entropy(gpu({4, 3}), ct); }));
  EXPECT_TRUE(device_error("nll_loss", [&] { nll_loss(gpu({4, 3}), ct); }));
  EXPECT_TRUE(device_error("mse_loss", [&] { mse_loss(gpu({4, 3}), ones({4, 3})); }));
  EXPECT_TRUE(device_error("binary_cross_entropy_with_logits", [&] {
    binary_cross_entropy_with_logits(gpu({4, 3}), ones({4, 3}));
  }));
  EXPECT_TRUE(device_error("binary_cross_entropy_with_logits", [&] {
    binary_cross_entropy_with_logits(gpu({4, 3}), gpu({4, 3}), Reduction::Mean, ones({3}));
  }));
}

TEST_F(DeviceCheck, Comparisons) {
  EXPECT_TRUE(device_error("allclose", [&] { allclose(gpu({2}), ones({2})); }));
  EXPECT_TRUE(device_error("equal", [&] { equal(ones({2}), gpu({2})); }));
}

// Same-device operands still reach dispatch (no false positives from the check):
// an absent bias and wrapped scalars never count as a device.
TEST_F(DeviceCheck, AbsentOptionalTensorsAreIgnored) {
  EXPECT_NO_THROW(linear(ones({2, 3}), ones({4, 3})));
  EXPECT_NO_THROW(conv2d(ones({1, 2, 5, 5}), ones({3, 2, 3, 3})));
  EXPECT_NO_THROW(layer_norm(ones({4, 3}), {3}));
}

}  // namespace
}  // namespace weft
