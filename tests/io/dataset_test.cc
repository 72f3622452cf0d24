// TensorDataset indexing and the memcpy collate, against hand-written values.
#include "io/dataset.h"

#include <gtest/gtest.h>

#include "core/ops.h"
#include "tests/testing.h"

namespace weft::io {
namespace {

using weft::testing::tensor_near;

TEST(TensorDataset, IndexesDimZero) {
  Tensor x = arange(0, 12, 1, {DType::Float32}).view({3, 2, 2});  // [3, 2, 2]
  Tensor y = tensor(std::vector<int64_t>{7, 8, 9});
  TensorDataset ds(x, y);
  EXPECT_EQ(ds.size(), 3);
  Example e = ds.get(1);
  EXPECT_EQ(e.data.sizes(), (Shape{2, 2}));
  EXPECT_TRUE(tensor_near(e.data, {4, 5, 6, 7}));
  EXPECT_EQ(e.target.dim(), 0);
  EXPECT_EQ(e.target.item<int64_t>(), 8);
}

TEST(TensorDataset, WithoutTargets) {
  TensorDataset ds(arange(0, 4, 1, {DType::Float32}).view({4, 1}));
  EXPECT_FALSE(ds.get(3).target.defined());
  Batch b = collate({ds.get(3), ds.get(0)});
  EXPECT_TRUE(tensor_near(b.data, {3, 0}));
  EXPECT_FALSE(b.target.defined());
}

TEST(TensorDataset, Errors) {
  Tensor x = zeros({3, 2});
  EXPECT_WEFT_ERROR((TensorDataset{x, zeros({4})}), "targets have 4");
  EXPECT_WEFT_ERROR(TensorDataset{scalar_tensor(1.0)}, "leading example dim");
  EXPECT_WEFT_ERROR(TensorDataset{Tensor{}}, "undefined");
  TensorDataset ds(x, zeros({3}));
  EXPECT_WEFT_ERROR(ds.get(3), "index 3 is out of range");
  EXPECT_WEFT_ERROR(ds.get(-1), "out of range");
}

TEST(Collate, StacksExamplesInOrder) {
  Tensor x = arange(0, 12, 1, {DType::Float32}).view({3, 2, 2});
  Tensor y = tensor(std::vector<int64_t>{7, 8, 9});
  TensorDataset ds(x, y);
  Batch b = collate({ds.get(2), ds.get(0)});
  EXPECT_EQ(b.data.sizes(), (Shape{2, 2, 2}));
  EXPECT_TRUE(b.data.is_contiguous());
  EXPECT_TRUE(tensor_near(b.data, {8, 9, 10, 11, 0, 1, 2, 3}));
  EXPECT_EQ(b.target.sizes(), (Shape{2}));
  EXPECT_EQ(b.target.dtype(), DType::Int64);
  EXPECT_TRUE(tensor_near(b.target, {9, 7}));
  // The batch is a copy: changing it leaves the dataset alone.
  b.data.fill_(0);
  EXPECT_TRUE(tensor_near(ds.get(0).data, {0, 1, 2, 3}));
}

TEST(Collate, NonContiguousExamplesAndDtypes) {
  // Transposed examples: [2, 3] each, stored transposed.
  Tensor base = arange(0, 12, 1, {DType::Float64}).view({2, 3, 2}).transpose(1, 2);  // [2, 2, 3] non-contig
  Tensor a = base.select(0, 0), b = base.select(0, 1);
  ASSERT_FALSE(a.is_contiguous());
  Tensor s = stack_tensors({a, b}, "data");
  EXPECT_EQ(s.sizes(), (Shape{2, 2, 3}));
  EXPECT_EQ(s.dtype(), DType::Float64);
  EXPECT_TRUE(tensor_near(s, {0, 2, 4, 1, 3, 5, 6, 8, 10, 7, 9, 11}));
  for (DType dt :
       {DType::Float32, DType::Float16, DType::BFloat16, DType::Int64, DType::Int32, DType::UInt8, DType::Bool}) {
    Tensor u = ones({2}, {dt}), v = zeros({2}, {dt});
    Tensor st = stack_tensors({u, v, u});
    EXPECT_EQ(st.dtype(), dt);
    EXPECT_TRUE(tensor_near(st, {1, 1, 0, 0, 1, 1})) << dtype_name(dt);
  }
}

TEST(Collate, Errors) {
  EXPECT_WEFT_ERROR(collate({}), "empty batch");
  EXPECT_WEFT_ERROR(stack_tensors({zeros({2}), zeros({3})}, "data"), "data 1 has shape [3]");
  EXPECT_WEFT_ERROR(stack_tensors({zeros({2}), zeros({2}, {DType::Float64})}, "data"), "dtype");
  EXPECT_WEFT_ERROR(stack_tensors({zeros({2}), Tensor()}, "data"), "data 1 is undefined");
  EXPECT_WEFT_ERROR(collate({Example{zeros({1}), zeros({})}, Example{zeros({1}), Tensor()}}), "has no target");
}

}  // namespace
}  // namespace weft::io
