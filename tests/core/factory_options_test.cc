// Factories accept a DType, a Device or TensorOptions the way libtorch does
// (arange(0, T, 1, kInt64), zeros({n}, kInt64), zeros_like(x, kInt64)), infer
// the dtype from their arguments when given none (full, arange), and item<T>()
// converts to every element type. References are the libtorch results.
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "core/ops.h"
#include "tests/testing.h"

namespace weft {
namespace {
using testing::tensor_near;
using testing::values;

TEST(FactoryOptions, ArangeTakesADTypeLikeLibtorch) {
  const int64_t T = 5;
  Tensor pos = arange(0, T, 1, DType::Int64);  // the line a GPT port writes
  EXPECT_EQ(pos.dtype(), DType::Int64);
  EXPECT_EQ(pos.sizes(), (Shape{5}));
  EXPECT_EQ(values(pos), (std::vector<double>{0, 1, 2, 3, 4}));
  Tensor f = arange(0, T, 2, kFloat64);
  EXPECT_EQ(f.dtype(), DType::Float64);
  EXPECT_EQ(values(f), (std::vector<double>{0, 2, 4}));
  // arange(start, end, options) without a step, as in libtorch.
  Tensor g = arange(2, 5, kFloat32);
  EXPECT_EQ(g.dtype(), DType::Float32);
  EXPECT_EQ(values(g), (std::vector<double>{2, 3, 4}));
  EXPECT_EQ(arange(4, DType::Int32).dtype(), DType::Int32);
  EXPECT_EQ(arange(3, TensorOptions{kFloat64, kCPU}).dtype(), DType::Float64);
}

TEST(FactoryOptions, ArangeInfersItsDTypeFromTheArguments) {
  EXPECT_EQ(arange(5).dtype(), DType::Int64);
  EXPECT_EQ(arange(1, 4).dtype(), DType::Int64);
  // torch.arange(0.0, 1.0, 0.25) -> float32 [0, 0.25, 0.5, 0.75] (was int64 zeros).
  Tensor a = arange(0.0, 1.0, 0.25);
  EXPECT_EQ(a.dtype(), DType::Float32);
  EXPECT_EQ(values(a), (std::vector<double>{0, 0.25, 0.5, 0.75}));
  Tensor b = arange(2.5);
  EXPECT_EQ(b.dtype(), DType::Float32);
  EXPECT_EQ(values(b), (std::vector<double>{0, 1, 2}));
  EXPECT_EQ(arange(0, 3, 0.5).dtype(), DType::Float32);
}

TEST(FactoryOptions, EveryFactoryTakesADTypeOrADevice) {
  EXPECT_EQ(zeros({2}, DType::Int64).dtype(), DType::Int64);
  EXPECT_EQ(ones({2}, kBool).dtype(), DType::Bool);
  EXPECT_EQ(values(ones({2}, kBool)), (std::vector<double>{1, 1}));
  EXPECT_EQ(empty({3}, kFloat16).dtype(), DType::Float16);
  EXPECT_EQ(full({2}, 7, kInt32).dtype(), DType::Int32);
  EXPECT_EQ(linspace(0, 1, 3, kFloat64).dtype(), DType::Float64);
  EXPECT_EQ(eye(2, kInt64).dtype(), DType::Int64);
  EXPECT_EQ(randn({2}, kFloat64).dtype(), DType::Float64);
  EXPECT_EQ(rand({2}, kBFloat16).dtype(), DType::BFloat16);
  EXPECT_EQ(scalar_tensor(3, kInt64).item<int64_t>(), 3);
  EXPECT_EQ(tensor(std::vector<int64_t>{1, 2}, {}, kFloat32).dtype(), DType::Float32);
  Tensor c = zeros({2}, kCPU);
  EXPECT_EQ(c.dtype(), DType::Float32);
  EXPECT_EQ(c.device(), kCPU);
  // Options built up field by field, like libtorch's chained setters.
  TensorOptions o = TensorOptions().with_dtype(kFloat64).with_requires_grad();
  EXPECT_EQ(o, (TensorOptions{kFloat64, kCPU, true}));
  Tensor r = zeros({2}, o);
  EXPECT_TRUE(r.requires_grad());
  EXPECT_EQ(r.dtype(), DType::Float64);
  EXPECT_EQ(o.with_device(kCUDA).device, kCUDA);
  EXPECT_EQ(kCUDA.str(), "cuda:0");
}

TEST(FactoryOptions, FullInfersItsDTypeFromTheValue) {
  // torch::full({2}, 3) is int64, torch::full({2}, true) bool, torch::full({2}, 0.5) float32.
  Tensor i = full({2}, 3);
  EXPECT_EQ(i.dtype(), DType::Int64);
  EXPECT_EQ(values(i), (std::vector<double>{3, 3}));
  EXPECT_EQ(full({1}, int64_t{1} << 40).item<int64_t>(), int64_t{1} << 40);  // exact, not through float
  EXPECT_EQ(full({2}, true).dtype(), DType::Bool);
  EXPECT_EQ(full({2}, 0.5).dtype(), DType::Float32);
  EXPECT_EQ(full({2}, 0.5f).dtype(), DType::Float32);
  Tensor m = full({2, 2}, -std::numeric_limits<double>::infinity());  // an attention mask
  EXPECT_EQ(m.dtype(), DType::Float32);
  EXPECT_TRUE(std::isinf(values(m)[0]) && values(m)[0] < 0);
  // Options still win.
  EXPECT_EQ(full({2}, 3, kFloat64).dtype(), DType::Float64);
}

TEST(FactoryOptions, LikeFactoriesChangeOnlyTheFieldGiven) {
  Tensor x = testing::rnd({2, 3}, DType::Float64);
  Tensor z = zeros_like(x, DType::Int64);
  EXPECT_EQ(z.dtype(), DType::Int64);
  EXPECT_EQ(z.sizes(), x.sizes());
  EXPECT_EQ(z.device(), x.device());
  EXPECT_EQ(values(z), std::vector<double>(6, 0.0));
  Tensor o = ones_like(x, kFloat32);
  EXPECT_EQ(o.dtype(), DType::Float32);
  EXPECT_EQ(values(o), std::vector<double>(6, 1.0));
  EXPECT_EQ(empty_like(x, kInt32).dtype(), DType::Int32);
  Tensor f = full_like(x, 2, kInt64);
  EXPECT_EQ(f.dtype(), DType::Int64);
  EXPECT_EQ(values(f), std::vector<double>(6, 2.0));
  // A bare device keeps the source's dtype (libtorch merges the options).
  EXPECT_EQ(zeros_like(x, kCPU).dtype(), DType::Float64);
  EXPECT_EQ(ones_like(x, kCPU).dtype(), DType::Float64);
  EXPECT_EQ(full_like(x, 1.5, kCPU).dtype(), DType::Float64);
  EXPECT_EQ(empty_like(x, kCPU).dtype(), DType::Float64);
  // Full options replace all fields, requires_grad included.
  Tensor g = zeros_like(x, TensorOptions{kFloat32, kCPU, true});
  EXPECT_EQ(g.dtype(), DType::Float32);
  EXPECT_TRUE(g.requires_grad());
  EXPECT_FALSE(zeros_like(x, kFloat32).requires_grad());
}

TEST(FactoryOptions, ItemConvertsToEveryElementType) {
  Tensor t = full({1, 1}, 2.75, kFloat64);
  EXPECT_EQ(t.item<double>(), 2.75);
  EXPECT_EQ(t.item<float>(), 2.75f);
  EXPECT_EQ(t.item<int64_t>(), 2);
  EXPECT_EQ(t.item<int32_t>(), 2);
  EXPECT_EQ(t.item<uint8_t>(), 2);
  EXPECT_TRUE(t.item<bool>());
  EXPECT_EQ(static_cast<float>(t.item<BFloat16>()), 2.75f);
  EXPECT_EQ(static_cast<float>(t.item<Half>()), 2.75f);
  EXPECT_EQ(static_cast<float>(full({}, 3, kInt64).item<Half>()), 3.0f);
  EXPECT_EQ(full({}, 0.5, kBFloat16).item<double>(), 0.5);
  EXPECT_EQ(full({}, 5, kInt64).item().to_int(), 5);
  EXPECT_TRUE(full({}, 5, kInt64).item().is_integral());
  EXPECT_WEFT_ERROR(zeros({3}).item<BFloat16>(), "only one-element tensors");
}

}  // namespace
}  // namespace weft
