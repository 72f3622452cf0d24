// Error reporting: each class of bad input raises weft::Error naming the op and
// the offending shapes/dtypes/devices (never a crash or silent garbage).
#include <cmath>
#include <cstdlib>

#include "core/dispatch.h"
#include "core/storage.h"
#include "tests/testing.h"

namespace weft {
namespace {

TEST(Errors, ShapeMismatchInBroadcast) {
  EXPECT_WEFT_ERROR(add(ones({2, 3}), ones({4})), "[2, 3]");
  EXPECT_WEFT_ERROR(mul(ones({2, 3}), ones({3, 2})), "mul");
  Tensor a = ones({3});
  EXPECT_WEFT_ERROR(a.add_(ones({2, 3})), "doesn't match the broadcast shape");
}

TEST(Errors, DTypeMismatch) {
  Tensor i = ones({2}, {DType::Int64});
  EXPECT_WEFT_ERROR(i.add_(ones({2})), "result type float32 can't be cast to the desired output type int64");
  EXPECT_WEFT_ERROR(ones({2}).data_ptr<double>(), "data_ptr: tensor has dtype float32 but float64");
  Tensor g = ones({2});
  EXPECT_WEFT_ERROR(g.set_grad(ones({2}, {DType::Float64})), "set_grad: gradient dtype float64");
  EXPECT_WEFT_ERROR(g.set_grad(ones({3})), "set_grad: gradient shape [3]");
}

// A stand-in device allocator (host memory) so tensors can claim to live on CUDA
// in a CPU-only build; only device bookkeeping is exercised, never data access.
class FakeCudaAllocator : public Allocator {
 public:
  void* allocate(size_t n, Device) override { return std::malloc(n ? n : 1); }
  void deallocate(void* p, size_t, Device) override { std::free(p); }
};

TEST(Errors, DeviceMismatch) {
  static FakeCudaAllocator fake;
  Allocator* prev = nullptr;
  try {
    prev = get_allocator(Device(DeviceType::CUDA, 0));
  } catch (const Error&) {
    prev = nullptr;
  }
  set_allocator(DeviceType::CUDA, &fake);
  Tensor c = empty({2}, {DType::Float32, Device(DeviceType::CUDA, 0)});
  EXPECT_WEFT_ERROR(add(ones({2}), c), "expected all tensors on the same device");
  EXPECT_WEFT_ERROR(mul(c, ones({2})), "got cuda:0 and cpu");
  set_allocator(DeviceType::CUDA, prev);
}

TEST(Errors, BadDims) {
  Tensor a = ones({2, 3});
  EXPECT_WEFT_ERROR(a.transpose(0, 2), "dim 2 out of range for a tensor with 2 dims");
  EXPECT_WEFT_ERROR(a.size(-3), "out of range");
  EXPECT_WEFT_ERROR(sum(a, {0, 0}), "appears more than once");
  EXPECT_WEFT_ERROR(sum(a, {5}), "sum: dim 5 out of range");
  EXPECT_WEFT_ERROR(empty({2, -1}), "negative dimension");
}

// Shapes whose element or byte counts wrap around 64 bits are named, not
// allocated at the wrapped size (2^32 * 2^32 elements wrap to 0).
TEST(Errors, SizesThatOverflow) {
  const int64_t big = int64_t{1} << 32;
  EXPECT_WEFT_ERROR(empty({big, big}), "has more elements than an int64 counts");
  EXPECT_WEFT_ERROR(ones({big, big, 0, 3}), "has more elements than an int64 counts");
  // 2^61 float64 elements count, but their 2^64 bytes do not
  EXPECT_WEFT_ERROR(empty({int64_t{1} << 30, int64_t{1} << 31}, {DType::Float64}), "needs more than 2^62 bytes");
  EXPECT_WEFT_ERROR(zeros({1, 3}).reshape({big, big}), "is invalid for input of size 3");
  EXPECT_WEFT_ERROR(zeros({0, 3}).reshape({big, big}), "multiply past 2^63 - 1");
  EXPECT_EQ(empty({0, big}).numel(), 0);
  // arange's length is checked before it is cast
  EXPECT_WEFT_ERROR(arange(0.0, 1e20, 1e-10), "has 1e+30 elements, more than an int64 counts");
  EXPECT_WEFT_ERROR(arange(0.0, INFINITY, 1.0), "has inf elements");
  // from_blob: no null data behind elements, no negative sizes
  EXPECT_WEFT_ERROR(from_blob(nullptr, {3}, DType::Float32), "from_blob: a null data pointer for shape [3]");
  EXPECT_EQ(from_blob(nullptr, {0, 3}, DType::Float32).numel(), 0);
  float x[2] = {1, 2};
  EXPECT_WEFT_ERROR(from_blob(x, {-2}, DType::Float32), "from_blob: negative dimension -2");
}

// bernoulli's probabilities must lie in [0, 1], as PyTorch checks.
TEST(Errors, BernoulliProbabilitiesOutsideZeroOne) {
  EXPECT_WEFT_ERROR(bernoulli(tensor(std::vector<float>{0.5f, 1.5f, -0.1f})),
                    "bernoulli: 2 of the 3 probabilities (shape [3]) are outside [0, 1] or NaN");
  EXPECT_WEFT_ERROR(bernoulli(full({2}, std::nan(""))), "2 of the 2 probabilities");
  const Tensor draws = bernoulli(tensor(std::vector<double>{0.0, 1.0, 1.0, 0.0}));
  EXPECT_TRUE(testing::tensor_near(draws, {0, 1, 1, 0}, 0));
}

TEST(Errors, OutOfRangeSelect) {
  Tensor a = ones({2, 3});
  EXPECT_WEFT_ERROR(a.select(1, 3), "select: index 3 out of range for dimension 1 of size 3");
  EXPECT_WEFT_ERROR(a.select(0, -3), "index -3 out of range");
  EXPECT_WEFT_ERROR(a[2], "out of range");
}

TEST(Errors, ItemOfManyElements) {
  EXPECT_WEFT_ERROR(ones({2, 2}).item<float>(), "a tensor with 4 elements (shape [2, 2]) cannot be converted");
  EXPECT_EQ(ones({1, 1}).item<float>(), 1.0f);
}

TEST(Errors, RequiresGradOnIntegerTensor) {
  Tensor i = ones({2}, {DType::Int64});
  EXPECT_WEFT_ERROR(i.requires_grad_(true), "only floating point tensors can require gradients, got dtype int64");
  EXPECT_WEFT_ERROR(ones({2}, {DType::Int32, kCPU, true}), "got dtype int32");
  Tensor x = ones({2}).requires_grad_(true);
  Tensor y = x * 2.0;
  EXPECT_WEFT_ERROR(y.requires_grad_(false), "only leaf tensors can have requires_grad changed");
}

TEST(Errors, MissingKernel) {
  // through each op's kernel table: a dtype with no registered kernel
  // (neg of bool is rejected by its front end first, naming the op and dtype)
  EXPECT_WEFT_ERROR(neg(ones({2}, {DType::Bool})), "neg: not supported for dtype bool");
  EXPECT_WEFT_ERROR(matmul(ones({2, 2}, {DType::Bool}), ones({2, 2}, {DType::Bool})), "no kernel for cpu/bool");
  Tensor i = zeros({3}, {DType::Int64});
  EXPECT_WEFT_ERROR(uniform_(i), "uniform_ has no kernel for cpu/int64");
  EXPECT_WEFT_ERROR(normal_(i), "normal_ has no kernel for cpu/int64");
  // a table looked up directly
  using Sig = void(const Tensor&);
  KernelTable<Sig> table("my_op");
  EXPECT_FALSE(table.has(DeviceType::CPU, DType::Float32));
  EXPECT_WEFT_ERROR(table.lookup(kCPU, DType::Float16), "my_op has no kernel for cpu/float16");
}

TEST(Errors, UndefinedTensor) {
  Tensor u;
  EXPECT_FALSE(u.defined());
  EXPECT_WEFT_ERROR(u.sizes(), "undefined tensor");
  EXPECT_WEFT_ERROR(add(u, ones({1})), "undefined tensor");
}

TEST(Errors, ViewAndReshapeSizes) {
  Tensor a = ones({2, 3});
  EXPECT_WEFT_ERROR(a.view({4}), "shape [4] is invalid for input of size 6");
  EXPECT_WEFT_ERROR(a.reshape({-1, 4}), "is invalid for input of size 6");
}

}  // namespace
}  // namespace weft
