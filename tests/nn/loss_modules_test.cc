// The loss modules (nn/loss.h): each equals its functional form with the same
// non-default options (the functional forms are compared with PyTorch in
// losses_test.cc and losses_margin_test.cc); BCEWithLogitsLoss's weight against
// PyTorch's values (tests/nn/golden/loss_modules_golden.safetensors, from
// tools/golden/make_loss_modules_golden.py); buffers under PyTorch's names;
// hooks; the Module interface; errors.
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/nn_ops.h"
#include "core/rng.h"
#include "nn/loss.h"
#include "tests/golden.h"
#include "tests/testing.h"

namespace weft {
namespace {

using nn::Tensors;
using testing::tensors_near;

const testing::Golden& golden() {
  static const testing::Golden g("tests/nn/golden/loss_modules_golden.safetensors");
  return g;
}
const Tensor& G(const std::string& key) { return golden()(key); }

const TensorOptions f64{DType::Float64};

// The module's loss and input gradient equal the functional form's.
void expect_same(nn::Loss& loss, const std::function<Tensor(const Tensors&)>& functional, const Tensors& inputs) {
  SCOPED_TRACE(loss.type_name());
  Tensors a, b;
  for (const Tensor& t : inputs) {
    const bool grad = is_floating(t.dtype());
    a.push_back(grad ? t.clone().requires_grad_(true) : t);
    b.push_back(grad ? t.clone().requires_grad_(true) : t);
  }
  Tensor ours = loss(a)[0];
  Tensor ref = functional(b);
  ASSERT_TRUE(tensors_near(ours, ref, 0));
  ours.sum().backward();
  ref.sum().backward();
  EXPECT_TRUE(tensors_near(a[0].grad(), b[0].grad(), 0));
}

TEST(LossModules, EachEqualsItsFunctionalForm) {
  manual_seed(21);
  const Tensor x = randn({4, 3}, f64), y = randn({4, 3}, f64), z = randn({4, 3}, f64);
  const Tensor cls = tensor({0, 2, 1, 2}, {4}).to(DType::Int64);
  const Tensor w = tensor({0.5, 2.0, 1.5}, {3}).to(DType::Float64);
  const Tensor sign = tensor({1, -1, 1, -1}, {4}).to(DType::Float64);
  const Tensor sign2 = tensor({1, -1, -1, 1, 1, -1, 1, 1, -1, 1, -1, -1}, {4, 3}).to(DType::Float64);
  const Tensor prob = sigmoid(z), soft = sigmoid(y), bits = gt(y, zeros({1}, f64)).to(DType::Float64);
  const Tensor var = exp(z);
  using R = Reduction;
  auto L = [](auto f) { return std::function<Tensor(const Tensors&)>(f); };

  nn::L1Loss l1(R::Sum);
  expect_same(l1, L([](const Tensors& t) { return l1_loss(t[0], t[1], R::Sum); }), {x, y});
  nn::MSELoss mse(R::None);
  expect_same(mse, L([](const Tensors& t) { return mse_loss(t[0], t[1], R::None); }), {x, y});
  nn::HuberLoss huber(R::Sum, 0.5);
  expect_same(huber, L([](const Tensors& t) { return huber_loss(t[0], t[1], R::Sum, 0.5); }), {x, y});
  nn::SmoothL1Loss smooth(R::Mean, 0.3);
  expect_same(smooth, L([](const Tensors& t) { return smooth_l1_loss(t[0], t[1], R::Mean, 0.3); }), {x, y});
  nn::CrossEntropyLoss ce({.weight = w, .ignore_index = 1, .reduction = R::Sum, .label_smoothing = 0.2});
  expect_same(ce, L([&](const Tensors& t) { return cross_entropy(t[0], t[1], R::Sum, 1, 0.2, w); }), {x, cls});
  nn::NLLLoss nll({.weight = w, .ignore_index = 2});
  expect_same(nll, L([&](const Tensors& t) { return nll_loss(t[0], t[1], R::Mean, 2, w); }), {log_softmax(x, 1), cls});
  nn::BCELoss bce({.weight = abs(z), .reduction = R::Sum});
  expect_same(bce, L([&](const Tensors& t) { return binary_cross_entropy(t[0], t[1], R::Sum, abs(z)); }), {prob, soft});
  nn::BCEWithLogitsLoss bcel({.reduction = R::None, .pos_weight = w});
  expect_same(bcel, L([&](const Tensors& t) { return binary_cross_entropy_with_logits(t[0], t[1], R::None, w); }),
              {x, soft});
  nn::MultiLabelSoftMarginLoss mlsm({.weight = w, .reduction = R::Sum});
  expect_same(mlsm, L([&](const Tensors& t) { return multilabel_soft_margin_loss(t[0], t[1], w, R::Sum); }), {x, bits});
  nn::SoftMarginLoss sm(R::Sum);
  expect_same(sm, L([](const Tensors& t) { return soft_margin_loss(t[0], t[1], R::Sum); }), {x, sign2});
  nn::KLDivLoss kl(KlDivReduction::BatchMean, true);
  expect_same(kl, L([](const Tensors& t) { return kl_div(t[0], t[1], KlDivReduction::BatchMean, true); }),
              {log_softmax(x, 1), log_softmax(y, 1)});
  nn::PoissonNLLLoss pois({.log_input = false, .full = true, .eps = 1e-4, .reduction = R::Sum});
  expect_same(pois, L([](const Tensors& t) { return poisson_nll_loss(t[0], t[1], false, true, 1e-4, R::Sum); }),
              {exp(x), abs(y) * 3.0});
  nn::GaussianNLLLoss gauss({.full = true, .eps = 1e-3, .reduction = R::None});
  expect_same(gauss, L([](const Tensors& t) { return gaussian_nll_loss(t[0], t[1], t[2], true, 1e-3, R::None); }),
              {x, y, var});
  nn::MarginRankingLoss mr(0.3, R::Sum);
  expect_same(mr, L([](const Tensors& t) { return margin_ranking_loss(t[0], t[1], t[2], 0.3, R::Sum); }),
              {x, y, sign2});
  nn::HingeEmbeddingLoss hinge(0.7, R::None);
  expect_same(hinge, L([](const Tensors& t) { return hinge_embedding_loss(t[0], t[1], 0.7, R::None); }), {x, sign2});
  nn::CosineEmbeddingLoss cos_loss(0.1, R::Sum);
  expect_same(cos_loss, L([](const Tensors& t) { return cosine_embedding_loss(t[0], t[1], t[2], 0.1, R::Sum); }),
              {x, y, sign});
  nn::TripletMarginLoss trip({.margin = 0.5, .p = 1.0, .eps = 1e-5, .swap = true, .reduction = R::None});
  expect_same(trip,
              L([](const Tensors& t) { return triplet_margin_loss(t[0], t[1], t[2], 0.5, 1.0, 1e-5, true, R::None); }),
              {x, y, z});
}

TEST(LossModules, HingeLossModulesEqualTheirFunctionalForms) {
  using R = Reduction;
  const Tensor x = testing::rnd({3, 4}, DType::Float64, 7), y = tensor<int64_t>({2, 0, 3}, {3});
  const Tensor w = tensor<double>({1.0, 2.0, 0.5, 1.5}, {4});
  nn::MultiMarginLoss mm({.p = 2, .margin = 0.5, .weight = w, .reduction = R::Sum});
  expect_same(mm, [&](const Tensors& t) { return multi_margin_loss(t[0], t[1], 2, 0.5, w, R::Sum); }, {x, y});
  EXPECT_EQ(mm.state_dict().keys(), (std::vector<std::string>{"weight"}));
  EXPECT_WEFT_ERROR(nn::MultiMarginLoss({.p = 3}), "MultiMarginLoss: only p == 1 and p == 2 supported, got 3");
  const Tensor labels = tensor<int64_t>({0, 2, -1, 0, 3, -1, 0, 0, 1, 2, 3, -1}, {3, 4});
  nn::MultiLabelMarginLoss ml(R::None);
  expect_same(ml, [](const Tensors& t) { return multilabel_margin_loss(t[0], t[1], R::None); }, {x, labels});
  const DistanceFunction cosine = [](const Tensor& u, const Tensor& v) { return 1.0 - cosine_similarity(u, v); };
  nn::TripletMarginWithDistanceLoss tw({.distance_function = cosine, .margin = 0.3, .swap = true});
  const Tensor p = testing::rnd({3, 4}, DType::Float64, 8), n = testing::rnd({3, 4}, DType::Float64, 9);
  expect_same(tw,
              [&](const Tensors& t) { return triplet_margin_with_distance_loss(t[0], t[1], t[2], cosine, 0.3, true); },
              {x, p, n});
  nn::TripletMarginWithDistanceLoss plain;
  expect_same(plain, [](const Tensors& t) { return triplet_margin_with_distance_loss(t[0], t[1], t[2]); }, {x, p, n});
  EXPECT_WEFT_ERROR(nn::TripletMarginWithDistanceLoss({.margin = 0.0}),
                    "TripletMarginWithDistanceLoss: margin must be greater than 0, got 0");
}

TEST(LossModules, BCEWithLogitsWeightAgainstPyTorch) {
  const char* reds[] = {"none", "mean", "sum"};
  const Reduction rs[] = {Reduction::None, Reduction::Mean, Reduction::Sum};
  for (int r = 0; r < 3; ++r) {
    for (const char* wname : {"full", "row"}) {
      const std::string c = std::string("bce_logits_") + wname + "_" + reds[r];
      SCOPED_TRACE(c);
      nn::BCEWithLogitsLoss loss({.weight = G(std::string("w_") + wname), .reduction = rs[r], .pos_weight = G("pos")});
      Tensor x = G("x").clone().requires_grad_(true);
      Tensor out = loss(x, G("t"));
      ASSERT_TRUE(tensors_near(out, G(c + ".out"), 1e-6));
      out.backward(G(c + ".go"));
      EXPECT_TRUE(tensors_near(x.grad(), G(c + ".dx"), 1e-6));
    }
  }
}

TEST(LossModules, WeightsAreBuffersUnderPyTorchsNames) {
  nn::BCEWithLogitsLoss bcel({.weight = ones({3}), .pos_weight = full({3}, 2.0)});
  EXPECT_EQ(bcel.state_dict().keys(), (std::vector<std::string>{"weight", "pos_weight"}));
  EXPECT_EQ(bcel.parameters().size(), 0u);
  nn::CrossEntropyLoss plain;
  EXPECT_TRUE(plain.state_dict().empty());
  nn::CrossEntropyLoss weighted({.weight = tensor({1.0, 2.0}, {2})});
  weighted.to(DType::Float64);
  EXPECT_EQ(weighted.weight.dtype(), DType::Float64);
  Tensor logits = tensor({0.3, -0.2, 1.0, 0.5}, {2, 2}).to(DType::Float64);
  Tensor target = tensor({1, 0}, {2}).to(DType::Int64);
  EXPECT_TRUE(tensors_near(weighted(logits, target),
                           cross_entropy(logits, target, Reduction::Mean, -100, 0.0, tensor({1.0, 2.0}, {2})), 1e-12));
}

TEST(LossModules, HooksAndTheModuleInterface) {
  nn::MSELoss mse;
  int pre = 0, post = 0;
  auto h1 = mse.register_forward_pre_hook_multi([&](nn::Module&, const nn::Tensors& in) { pre += in.size(); });
  auto h2 = mse.register_forward_hook_multi(
      [&](nn::Module&, const nn::Tensors&, const nn::Tensors& out) { post += out.size(); });
  Tensor a = tensor({1.0, 2.0}, {2}), b = tensor({0.0, 4.0}, {2});
  EXPECT_TRUE(testing::tensor_near(mse(a, b), {2.5}, 1e-6));
  EXPECT_EQ(pre, 2);
  EXPECT_EQ(post, 1);
  nn::Module& m = mse;
  EXPECT_TRUE(tensors_near(m.forward_multi({a, b})[0], mse(a, b), 0));
  EXPECT_WEFT_ERROR(m.forward(a), "MSELoss takes (input, target), got 1 tensor");
  nn::TripletMarginLoss trip;
  EXPECT_WEFT_ERROR(trip(a, b), "TripletMarginLoss takes (anchor, positive, negative), got 2 tensors");
  EXPECT_WEFT_ERROR(mse(a, Tensor()), "MSELoss: argument 1 of (input, target) is undefined");
}

TEST(LossModules, BCEWithLogitsWeightThatDoesNotBroadcastIsRefused) {
  nn::BCEWithLogitsLoss loss({.weight = ones({4})});
  EXPECT_WEFT_ERROR(loss(zeros({2, 3}), zeros({2, 3})), "binary_cross_entropy_with_logits");
}

}  // namespace
}  // namespace weft
