// nn::utils::parameters_to_vector / vector_to_parameters and
// Embedding::from_pretrained: hand-worked values, gradients, round trips and
// the error messages.
#include <vector>

#include <gtest/gtest.h>

#include "nn/nn.h"
#include "tests/testing.h"

namespace weft {
namespace {

using testing::tensors_near;
using testing::values;

TEST(ParametersToVector, FlattensInOrderAndRoundTrips) {
  auto lin = std::make_shared<nn::Linear>(3, 2);  // weight (2, 3), bias (2)
  std::vector<Tensor> ps = lin->parameters();
  Tensor v = nn::utils::parameters_to_vector(ps);
  EXPECT_EQ(v.sizes(), (Shape{8}));
  std::vector<double> expected = values(lin->weight);
  for (double b : values(lin->bias)) expected.push_back(b);
  EXPECT_EQ(values(v), expected);
  // Differentiable: the gradient of sum(k * v) reaches each parameter as k in its slot.
  Tensor k = arange(0, 8).to(DType::Float32);
  (v * k).sum().backward();
  EXPECT_EQ(values(lin->weight.grad()), (std::vector<double>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(values(lin->bias.grad()), (std::vector<double>{6, 7}));

  const uint64_t version = lin->weight.version();
  nn::utils::vector_to_parameters(k * 10, ps);
  EXPECT_EQ(values(lin->weight), (std::vector<double>{0, 10, 20, 30, 40, 50}));
  EXPECT_EQ(values(lin->bias), (std::vector<double>{60, 70}));
  EXPECT_GT(lin->weight.version(), version);
  EXPECT_TRUE(tensors_near(nn::utils::parameters_to_vector(ps), k * 10, 0));

  EXPECT_WEFT_ERROR(nn::utils::vector_to_parameters(zeros({7}), ps),
                    "vector_to_parameters: the vector has 7 elements but the 2 parameters hold 8");
  EXPECT_WEFT_ERROR(nn::utils::vector_to_parameters(zeros({2, 4}), ps),
                    "vector_to_parameters: expected a 1-D vector, got shape [2, 4]");
  EXPECT_WEFT_ERROR(nn::utils::parameters_to_vector({}), "parameters_to_vector: no parameters given");
}

TEST(EmbeddingFromPretrained, CopiesFreezesAndKeepsThePaddingRow) {
  Tensor w = arange(0, 12).to(DType::Float64).reshape({4, 3});
  auto e = nn::Embedding::from_pretrained(w, /*freeze=*/true, 1);
  EXPECT_EQ(e->weight.dtype(), DType::Float64);
  EXPECT_EQ(values(e->weight), values(w));  // the padding row keeps its pretrained values, as PyTorch's
  EXPECT_FALSE(e->weight.requires_grad());
  EXPECT_FALSE(e->weight.is_same(w));  // a copy
  Tensor idx = tensor<int64_t>({3, 1}, {2});
  EXPECT_EQ(values(e->forward(idx)), (std::vector<double>{9, 10, 11, 3, 4, 5}));
  auto trainable = nn::Embedding::from_pretrained(w, /*freeze=*/false);
  EXPECT_TRUE(trainable->weight.requires_grad());
  trainable->forward(idx).sum().backward();
  EXPECT_EQ(values(trainable->weight.grad().select(0, 3)), (std::vector<double>{1, 1, 1}));
  EXPECT_WEFT_ERROR(nn::Embedding::from_pretrained(zeros({4})),
                    "Embedding.from_pretrained: embeddings parameter is expected to be 2-dimensional, got shape [4]");
}

}  // namespace
}  // namespace weft
