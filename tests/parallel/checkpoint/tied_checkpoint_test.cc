// Partitioned checkpoints of tied parameters with ranks as threads: one
// process's checkpoint of a tied embedding and head (one tensor, one name)
// resumed on a two-stage pipeline, plain and ZeRO.
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "parallel/comm/inproc/testing.h"
#include "tests/parallel/checkpoint/ck_cases.h"
#include "tests/parallel/pipe/tied_lm.h"

namespace weft::parallel::checkpoint {
namespace {

namespace fs = std::filesystem;

std::string temp_dir() {
  const char* t = std::getenv("TEST_TMPDIR");
  std::string d =
      std::string(t ? t : "/tmp") + "/pck_tied_" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Note [tied parameters in checkpoints]: one process holds a tied embedding
// and head as one tensor, so its checkpoint has optimizer state under the
// embedding's name only; a pipeline whose last stage holds the head's copy
// takes the embedding's entries for it (plain and ZeRO), and both copies'
// states equal the saved one.
TEST(PartitionedCheckpoint, TiedHeadResumesOnAPipelineFromOneProcess) {
  const std::string root = temp_dir();
  const std::vector<std::vector<std::string>> tied = {{"0.weight", "7.weight"}};
  auto adamw = [](const optim::NamedParameters& p) {
    optim::AdamWOptions a;
    a.lr = 0.01;
    return std::unique_ptr<optim::Optimizer>(std::make_unique<optim::AdamW>(p, a));
  };
  manual_seed(21);
  const Tensor x = pipe::tokens(6), y = randn({6, pipe::kSeq, pipe::kVocab});
  auto loss = [](const Tensor& out, const Tensor& t) { return mse_loss(out, t); };
  optim::OptimizerStateDict saved;
  {
    auto one = pipe::make_lm(/*shared=*/true);
    run_ranks(1, [&](std::shared_ptr<ProcessGroup> g) {
      hybrid::DistributedModelOptions o;
      o.pipe.tied = tied;
      hybrid::DistributedModel dm(one, g, o);
      hybrid::DistributedOptimizer opt(dm, adamw);
      dm.partition(x);
      for (int k = 0; k < 2; ++k) {
        opt.zero_grad();
        dm.step(x, y, loss);
        opt.step();
      }
      save(root, {&dm, &opt, nullptr}, TrainingState{2, 0, 0, {}});
      saved = opt.state_dict();
    });
  }
  ASSERT_TRUE(saved.count("state.0.weight.exp_avg"));
  ASSERT_FALSE(saved.count("state.7.weight.exp_avg"));  // one tensor, one name
  for (bool zero : {false, true}) {
    SCOPED_TRACE(zero ? "zero" : "plain");
    std::vector<std::shared_ptr<nn::Sequential>> models{pipe::make_lm(false, 9), pipe::make_lm(false, 9)};
    std::vector<optim::OptimizerStateDict> got(2);
    run_ranks(2, [&](std::shared_ptr<ProcessGroup> g) {
      hybrid::DistributedModelOptions o;
      o.pp = 2;
      o.balance = {1, 7};
      o.pipe.tied = tied;
      o.shard_optimizer_state = zero;
      hybrid::DistributedModel dm(models[g->rank()], g, o);
      hybrid::DistributedOptimizer opt(dm, adamw);
      dm.partition(x);
      load(root, {&dm, &opt, nullptr});
      got[g->rank()] = opt.state_dict();
    });
    for (const std::string leaf : {"exp_avg", "exp_avg_sq", "step"})
      for (const std::string name : {"0.weight", "7.weight"}) {
        const std::string key = "state." + name + "." + leaf;
        ASSERT_TRUE(got[0].count(key)) << key;
        EXPECT_TRUE(testing::tensors_near(got[0].at(key).to(DType::Float64),
                                          saved.at("state.0.weight." + leaf).to(DType::Float64), 0))
            << key;
      }
  }
}

}  // namespace
}  // namespace weft::parallel::checkpoint
