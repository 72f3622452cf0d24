// optim/swa_utils.h against PyTorch's torch.optim.swa_utils (golden files
// from tools/golden/make_swa_golden.py and make_lr_scheduler_golden.py):
// AveragedModel's SWA and EMA averages with and without buffers, update_bn's
// statistics, SWALR's lrs; the cumulative batch norm average by hand; errors.
#include "optim/swa_utils.h"

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "io/dataloader.h"
#include "io/dataset.h"
#include "nn/activations.h"
#include "nn/container.h"
#include "nn/layers.h"
#include "optim/lr_scheduler_composite.h"
#include "tests/golden.h"
#include "tests/optim/scheduler_cases.h"
#include "tests/testing.h"

namespace weft::optim {
namespace {

using namespace sched_testing;  // NOLINT(google-build-using-namespace)
constexpr int kStates = 4;      // the script's K

const testing::Golden& swa_golden() {
  static const testing::Golden g("tests/optim/golden/swa_golden.safetensors");
  return g;
}

// The script's Sequential(Linear(4, 8), BatchNorm1d(8), ReLU(), Linear(8, 3)).
std::shared_ptr<nn::Sequential> make_net() {
  return nn::Sequential::of(std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::BatchNorm1d>(8),
                            std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(8, 3));
}

void load_state(nn::Module& m, int k) {
  nn::StateDict sd;
  for (const auto& [key, v] : m.state_dict()) sd.insert(key, swa_golden()("model." + std::to_string(k) + "." + key));
  m.load_state_dict(sd);
}

// The averaged module's state dict against "<name>.<k>.<key>": floating
// tensors to 1e-6 relative (float32 arithmetic in both), integers exactly.
void expect_golden_state(const std::string& name, int k, const AveragedModel& avg) {
  const std::string prefix = name + "." + std::to_string(k) + ".";
  for (const auto& [key, v] : avg.module->state_dict()) {
    const Tensor& want = swa_golden()(prefix + key);
    if (v.is_floating_point()) {
      EXPECT_TRUE(testing::tensors_near(v, want, 1e-6)) << prefix << key;
    } else {
      EXPECT_EQ(v.item<int64_t>(), want.item<int64_t>()) << prefix << key;
    }
  }
  EXPECT_EQ(avg.num_averaged(), swa_golden()(prefix + "n_averaged").item<int64_t>()) << prefix;
}

struct Case {
  std::string name;
  AveragedModelOptions options;
};

std::vector<Case> cases() {
  return {{"swa", {}},
          {"swa_buffers", {.use_buffers = true}},
          {"swa_multi", {.multi_avg_fn = swa_multi_avg_fn()}},
          {"ema_multi_buffers", {.multi_avg_fn = ema_multi_avg_fn(0.9), .use_buffers = true}},
          {"ema_fn", {.avg_fn = ema_avg_fn(0.75)}}};
}

TEST(AveragedModelGolden, SWAAndEMAWithAndWithoutBuffers) {
  auto model = make_net();
  load_state(*model, 0);
  std::vector<std::shared_ptr<AveragedModel>> averaged;
  for (const Case& c : cases()) averaged.push_back(std::make_shared<AveragedModel>(*model, make_net(), c.options));
  EXPECT_TRUE(testing::tensors_near(averaged[0]->module->state_dict().at("0.weight"), swa_golden()("model.0.0.weight"),
                                    0.0));  // the copy starts as the model
  for (int k = 1; k <= kStates; ++k) {
    load_state(*model, k);
    for (size_t i = 0; i < averaged.size(); ++i) {
      SCOPED_TRACE(cases()[i].name);
      averaged[i]->update_parameters(*model);
      expect_golden_state(cases()[i].name, k, *averaged[i]);
    }
  }
}

TEST(AveragedModelGolden, UpdateBnFromALoaderAndFromTensors) {
  auto model = make_net();
  load_state(*model, 0);
  AveragedModel swa(*model, make_net());
  for (int k = 1; k <= kStates; ++k) {
    load_state(*model, k);
    swa.update_parameters(*model);
  }
  std::vector<Tensor> batches;
  for (int i = 0; i < 4; ++i) batches.push_back(swa_golden()("bn.x." + std::to_string(i)));
  auto* bn = dynamic_cast<nn::BatchNorm*>((*std::static_pointer_cast<nn::Sequential>(swa.module))[1].get());
  ASSERT_NE(bn, nullptr);

  auto check = [&](const char* how) {
    SCOPED_TRACE(how);
    EXPECT_TRUE(testing::tensors_near(bn->running_mean, swa_golden()("bn.running_mean"), 1e-5));
    EXPECT_TRUE(testing::tensors_near(bn->running_var, swa_golden()("bn.running_var"), 1e-5));
    EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 4);
    EXPECT_EQ(bn->momentum, 0.1);  // restored
    EXPECT_FALSE(swa.is_training());
    NoGradGuard ng;
    EXPECT_TRUE(testing::tensors_near(swa(swa_golden()("bn.probe")), swa_golden()("bn.out"), 1e-5));
  };
  swa.eval();
  update_bn(batches, swa);
  check("a vector of tensors");

  // The same batches through an io::DataLoader (its batches' .data).
  auto data = std::make_shared<io::TensorDataset>(cat(batches, 0));
  io::DataLoader loader(data, io::DataLoaderOptions{.batch_size = 6});
  bn->running_mean.fill_(7.0);
  update_bn(loader, swa);
  check("an io::DataLoader");
}

TEST(AveragedModel, ForwardRunsTheAverageAndBuffersFollowTheModel) {
  auto model = make_net();
  AveragedModel swa(*model, make_net());
  Tensor x = randn({3, 4});
  model->eval();
  swa.eval();
  NoGradGuard ng;
  EXPECT_TRUE(testing::tensors_near(swa(x), (*model)(x), 0.0));
  // Without use_buffers the batch norm statistics are the model's, copied at each update.
  auto* bn = dynamic_cast<nn::BatchNorm*>((*model)[1].get());
  bn->running_mean.fill_(0.5);
  swa.update_parameters(*model);
  swa.update_parameters(*model);
  EXPECT_TRUE(testing::tensors_near(swa.module->state_dict().at("1.running_mean"), full({8}, 0.5), 0.0));
  EXPECT_EQ(swa.num_averaged(), 2);
  EXPECT_TRUE(swa.state_dict().contains("n_averaged"));
  EXPECT_TRUE(swa.state_dict().contains("module.0.weight"));
}

TEST(AveragedModel, Errors) {
  auto model = make_net();
  EXPECT_WEFT_ERROR(AveragedModel(*model, nullptr), "AveragedModel: the copy of the model is null");
  EXPECT_WEFT_ERROR(AveragedModel(*model, model), "the copy must be a second model built like the model");
  EXPECT_WEFT_ERROR(AveragedModel(*model, make_net(), {.avg_fn = swa_avg_fn(), .multi_avg_fn = swa_multi_avg_fn()}),
                    "Only one of avg_fn and multi_avg_fn should be provided");
  auto other = nn::Sequential::of(std::make_shared<nn::Linear>(4, 9), std::make_shared<nn::BatchNorm1d>(9),
                                  std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(9, 3));
  EXPECT_WEFT_ERROR(AveragedModel(*model, other), "'0.weight' has shape [9, 4] in the averaged model");
  AveragedModel swa(*model, make_net());
  auto smaller = nn::Sequential::of(std::make_shared<nn::Linear>(4, 8));
  EXPECT_WEFT_ERROR(swa.update_parameters(*smaller),
                    "the averaged model has 6 parameters but the model has 2; the models must be built alike");
  EXPECT_EQ(swa.num_averaged(), 0);
  EXPECT_WEFT_ERROR(ema_avg_fn(1.5), "Invalid decay value 1.5 provided. Please provide a value in [0,1] range.");
  EXPECT_WEFT_ERROR(ema_multi_avg_fn(-0.1), "Invalid decay value -0.1");
}

// ---- batch norm's cumulative average (momentum None) ----

TEST(AveragedModel, BatchNormMomentumNoneAveragesEveryBatchEqually) {
  nn::BatchNorm1d bn(2, 1e-5, std::nullopt);
  Tensor a = tensor({1.0, 2.0, 3.0, 6.0}, {2, 2});            // means 2, 4; unbiased variances 2, 8
  Tensor b = tensor({5.0, 0.0, 9.0, 0.0, 7.0, 3.0}, {3, 2});  // means 7, 1; variances 4, 3
  bn(a);
  EXPECT_TRUE(testing::tensors_near(bn.running_mean, tensor({2.0, 4.0}, {2}), 1e-6));  // factor 1
  bn(b);
  EXPECT_TRUE(testing::tensors_near(bn.running_mean, tensor({4.5, 2.5}, {2}), 1e-6));  // factor 1/2
  EXPECT_TRUE(testing::tensors_near(bn.running_var, tensor({3.0, 5.5}, {2}), 1e-6));
  EXPECT_NE(bn.repr().find("momentum=None"), std::string::npos);
  bn.reset_running_stats();
  EXPECT_TRUE(testing::tensors_near(bn.running_var, ones({2}), 0.0));
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 0);
}

TEST(AveragedModel, UpdateBnWithoutBatchNormReadsNothing) {
  auto mlp = nn::Sequential::of(std::make_shared<nn::Linear>(4, 2));
  std::vector<Tensor> never;
  never.push_back(Tensor());  // would fail if run
  update_bn(never, *mlp);
  EXPECT_TRUE(mlp->is_training());
}

// ---- SWALR ----

TEST(SWALRGolden, CosineLinearAndNoAnnealing) {
  {
    TwoGroups t;
    SWALR s(*t.opt, {0.05, 0.01}, 3);
    check_golden("swalr_cos", s, t);
    EXPECT_EQ(s.swa_lrs(), (std::vector<double>{0.05, 0.01}));
  }
  {
    TwoGroups t;
    SWALR s(*t.opt, 0.02, 4, AnnealStrategy::kLinear);
    check_golden("swalr_linear", s, t);
  }
  {
    TwoGroups t;
    SWALR s(*t.opt, 0.05, 0);
    check_golden("swalr_no_anneal", s, t);
  }
  {
    TwoGroups t;
    auto cos = std::make_shared<CosineAnnealingLR>(*t.opt, 4);
    auto swa = std::make_shared<SWALR>(*t.opt, 0.02, 2);
    SequentialLR s(*t.opt, {cos, swa}, {3});
    check_golden("seq_cos_swalr", s, t);
  }
}

TEST(SWALR, StateDictRoundTripAndErrors) {
  round_trip(
      Kind::kSgd,
      [](Optimizer& o) {
        return std::make_unique<SWALR>(o, PerGroup{0.05, 0.01}, 5);
      },
      plain_step, 2, 5);
  TwoGroups t;
  EXPECT_WEFT_ERROR(SWALR(*t.opt, 0.05, -1), "SWALR: anneal_epochs must be equal or greater than 0, got -1");
  EXPECT_WEFT_ERROR(SWALR(*t.opt, {0.05}), "SWALR: swa_lr must have the same length as optimizer.param_groups");
  EXPECT_WEFT_ERROR(SWALR(*t.opt, 0.05, 3, static_cast<AnnealStrategy>(5)), "anneal_strategy must be one of");
  EXPECT_EQ(t.lr(0), 0.1);
}

}  // namespace
}  // namespace weft::optim
