// Interop of the checkpoint format with Python (golden files made by
// tests/parallel/checkpoint/golden/make_golden.py with the safetensors
// package and PyTorch; no Python at test time):
// - weft writes a full checkpoint of a 2-stage model with known values; it
//   must equal golden/full (what the script read), and the script's PyTorch
//   model, loaded from golden/full's model.safetensors by name
//   (load_state_dict strict), gave golden/torch_seen.safetensors's output
//   for its input: a single-process weft model loaded from the same
//   checkpoint gives the same output.
// - the script wrote golden/python_written (a partial checkpoint: two model
//   shards, a sliced optimizer entry, index, trainer state, manifest with
//   CRC-32s) from the format description alone; weft verifies, reads and
//   loads it into a 2 x 1 DistributedModel.
// WEFT_WRITE_GOLDEN=DIR makes the weft side write its full checkpoint to DIR
// (to regenerate golden/full).
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>

#include "core/autograd_meta.h"
#include "core/ops.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "nn/nn.h"
#include "optim/sgd.h"
#include "parallel/checkpoint/checkpointer.h"
#include "parallel/checkpoint/load.h"
#include "parallel/checkpoint/reader.h"
#include "parallel/comm/inproc/testing.h"
#include "parallel/hybrid/distributed_model.h"
#include "parallel/hybrid/distributed_optimizer.h"
#include "tests/testing.h"

namespace weft::parallel::checkpoint {
namespace {

namespace fs = std::filesystem;
const std::string kGolden = "tests/parallel/checkpoint/golden";

// Linear(4, 5), Tanh, Linear(5, 3), Tanh with known values: element i of
// the k-th parameter is 0.05 * ((7 * i + 3 * k) mod 13 - 6).
std::shared_ptr<nn::Sequential> golden_model() {
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Linear>(4, 5));
  m->push_back(std::make_shared<nn::Tanh>());
  m->push_back(std::make_shared<nn::Linear>(5, 3));
  m->push_back(std::make_shared<nn::Tanh>());
  int k = 0;
  for (auto& [name, p] : m->named_parameters()) {
    std::vector<float> v(p.numel());
    for (int64_t i = 0; i < p.numel(); ++i) v[i] = 0.05f * static_cast<float>((7 * i + 3 * k) % 13 - 6);
    NoGradGuard g;
    p.copy_(tensor<float>(v, p.sizes()));
    ++k;
  }
  return m;
}

std::string temp_root() {
  const char* t = std::getenv("TEST_TMPDIR");
  std::string d =
      std::string(t ? t : "/tmp") + "/pck_golden_" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
  fs::remove_all(d);
  return d;
}

void expect_same_tensors(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [k, t] : a) {
    auto it = b.find(k);
    ASSERT_TRUE(it != b.end()) << k;
    EXPECT_EQ(t.dtype(), it->second.dtype()) << k;
    EXPECT_TRUE(testing::tensors_near(t, it->second, 0)) << k;
  }
}

TEST(CheckpointGolden, WeftFullCheckpointIsWhatPyTorchRead) {
  std::vector<std::shared_ptr<nn::Sequential>> models{golden_model(), golden_model()};
  std::string root = temp_root();
  if (const char* w = std::getenv("WEFT_WRITE_GOLDEN")) root = w;
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> g) {
    hybrid::DistributedModelOptions o;
    o.pp = 2;
    o.balance = {2, 2};
    hybrid::DistributedModel dm(models[g->rank()], g, o);
    hybrid::DistributedOptimizer opt(dm, [](const optim::NamedParameters& p) {
      return std::make_unique<optim::SGD>(p, optim::SGDOptions{0.1, 0.9});
    });
    dm.partition();
    SaveOptions so;
    so.kind = Kind::kFull;
    save(root, Stateful{&dm, &opt, nullptr}, TrainingState{1, 0, 1, {}}, so);
  });
  const std::string mine = root + "/step-00000001", golden = kGolden + "/full/step-00000001";
  EXPECT_EQ(io::read_file(mine + "/model.safetensors"), io::read_file(golden + "/model.safetensors"));
  expect_same_tensors(load_model_state(mine), load_model_state(golden));
  CheckpointReader(golden).verify_all();
  // PyTorch's output for its input, with the weights it loaded from golden/full.
  const io::SafetensorsFile seen = io::load_safetensors(kGolden + "/torch_seen.safetensors");
  EXPECT_EQ(seen.metadata.at("loaded_keys"), "0.bias,0.weight,2.bias,2.weight");
  auto plain = std::make_shared<nn::Sequential>();
  plain->push_back(std::make_shared<nn::Linear>(4, 5));
  plain->push_back(std::make_shared<nn::Tanh>());
  plain->push_back(std::make_shared<nn::Linear>(5, 3));
  plain->push_back(std::make_shared<nn::Tanh>());
  plain->load_state_dict(nn::StateDict(load_model_state(golden)));
  EXPECT_TRUE(testing::tensors_near(plain->forward(seen.tensors.at("x")), seen.tensors.at("y"), 1e-6));
}

TEST(CheckpointGolden, ReadsACheckpointWrittenByPython) {
  const std::string dir = kGolden + "/python_written";
  CheckpointReader reader(dir);  // the root: its latest committed checkpoint
  EXPECT_EQ(reader.dir(), dir + "/step-00000003");
  reader.verify_all();
  EXPECT_EQ(reader.manifest().step, 3);
  // Known values: element i of each model tensor is (k + 1) * 0.01 * i, k its position in sorted name order.
  const auto model = load_model_state(dir);
  ASSERT_EQ(model.size(), 4u);
  int k = 0;
  for (const auto& [name, t] : model) {
    std::vector<double> want(t.numel());
    for (int64_t i = 0; i < t.numel(); ++i) want[i] = (k + 1) * 0.01 * static_cast<double>(i);
    EXPECT_TRUE(testing::tensor_near(t, want, 1e-7)) << name;
    ++k;
  }
  // The sliced momentum of 2.weight, in two pieces of two files: 0.5 + i.
  const auto opt = load_optimizer_state(dir);
  Tensor m = opt.at("state.2.weight.momentum_buffer");
  EXPECT_EQ(m.sizes(), (Shape{3, 5}));
  std::vector<double> want(15);
  for (int i = 0; i < 15; ++i) want[i] = 0.5 + i;
  EXPECT_TRUE(testing::tensor_near(m, want, 0));
  // And it loads into a 2 x 1 DistributedModel (every rank its stage; the trainer state).
  std::vector<std::shared_ptr<nn::Sequential>> models{golden_model(), golden_model()};
  run_ranks(2, [&](std::shared_ptr<ProcessGroup> g) {
    hybrid::DistributedModelOptions o;
    o.pp = 2;
    o.balance = {2, 2};
    hybrid::DistributedModel dm(models[g->rank()], g, o);
    hybrid::DistributedOptimizer opt2(dm, [](const optim::NamedParameters& p) {
      return std::make_unique<optim::SGD>(p, optim::SGDOptions{0.1, 0.9});
    });
    dm.partition();
    const TrainingState ts = load(dir, Stateful{&dm, &opt2, nullptr});
    EXPECT_EQ(ts.epoch, 1);
    EXPECT_EQ(ts.batch, 2);
    EXPECT_EQ(ts.metadata.at("producer"), "make_golden.py");
    for (const auto& [k2, t] : dm.local_state_dict()) EXPECT_TRUE(testing::tensors_near(t, model.at(k2), 0)) << k2;
  });
}

}  // namespace
}  // namespace weft::parallel::checkpoint
