// Shared pieces of the Trainer tests: a small synthetic classification task
// (96 rows of 8 features, 3 classes given by a fixed linear rule), the MLP
// that learns it, and the single-process reference loop written by hand.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/nn_ops.h"
#include "core/ops.h"
#include "core/rng.h"
#include "io/dataloader.h"
#include "nn/nn.h"
#include "optim/lr_scheduler.h"
#include "optim/sgd.h"
#include "parallel/checkpoint/rotation.h"
#include "tests/testing.h"
#include "train/lr_schedule.h"
#include "train/trainer.h"

namespace weft::train::testcases {

constexpr int64_t kRows = 96, kFeatures = 8, kClasses = 3, kBatch = 16;

// An empty directory `name` under the test's temporary directory.
inline std::string fresh_dir(const std::string& name) {
  const std::string d = ::testing::TempDir() + "/" + name;
  std::filesystem::remove_all(d);
  return d;
}

// The steps of the committed checkpoints under `root`, increasing.
inline std::vector<int64_t> steps_under(const std::string& root) {
  std::vector<int64_t> s;
  for (const auto& [step, dir] : parallel::checkpoint::committed_checkpoints(root)) s.push_back(step);
  return s;
}
constexpr uint64_t kSeed = 7;

// x (N, 8) float32; y (N,) int64: the argmax of a fixed linear map of x.
inline std::shared_ptr<io::TensorDataset> dataset(int64_t rows = kRows, uint64_t seed = 3) {
  Tensor x = testing::rnd({rows, kFeatures}, DType::Float32, seed);
  Tensor w = testing::rnd({kFeatures, kClasses}, DType::Float32, 99);
  Tensor y = argmax(matmul(x, w), 1).to(DType::Int64);
  return std::make_shared<io::TensorDataset>(x, y);
}

// 8 -> 16 -> 3, initialised from `seed` (the global generator).
inline std::shared_ptr<nn::Sequential> model(uint64_t seed = kSeed) {
  manual_seed(seed);
  return nn::Sequential::of(std::make_shared<nn::Linear>(kFeatures, 16), std::make_shared<nn::ReLU>(),
                            std::make_shared<nn::Linear>(16, kClasses));
}

inline Tensor ce(const Tensor& out, const Tensor& y) { return cross_entropy(out, y); }

inline optim::SGDOptions sgd_options() { return {.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-3}; }

inline io::DataLoader loader(std::shared_ptr<io::TensorDataset> ds, int64_t batch = kBatch) {
  return io::DataLoader(ds, {.batch_size = batch, .shuffle = true, .seed = kSeed});
}

inline std::map<std::string, Tensor> weights(const nn::Module& m) {
  std::map<std::string, Tensor> out;
  for (const auto& [k, v] : m.state_dict()) out[k] = v.detach().clone();
  return out;
}

struct Reference {
  std::vector<double> train_loss, train_accuracy;
  std::vector<std::vector<double>> step_accuracy;  // running accuracy after each step, per epoch
  std::map<std::string, Tensor> weights;
};

// The loop a user would write: SGD (momentum, weight decay), cosine schedule per epoch.
inline Reference hand_loop(int64_t epochs, int64_t rows = kRows) {
  auto ds = dataset(rows);
  auto m = model();
  optim::SGD opt(m->named_parameters(), sgd_options());
  optim::CosineAnnealingLR sched(opt, epochs);
  io::DataLoader train = loader(ds);
  Reference ref;
  for (int64_t e = 0; e < epochs; ++e) {
    train.set_epoch(e);
    double loss_sum = 0, correct = 0, seen = 0;
    ref.step_accuracy.emplace_back();
    for (auto& b : train) {
      Tensor out = (*m)(b.data);
      Tensor loss = ce(out, b.target);
      opt.zero_grad();
      loss.backward();
      opt.step();
      const double n = static_cast<double>(b.data.size(0));
      loss_sum += loss.item<double>() * n;
      correct += static_cast<double>((argmax(out.detach(), 1) == b.target).sum().item<int64_t>());
      seen += n;
      ref.step_accuracy.back().push_back(correct / seen);
    }
    ref.train_loss.push_back(loss_sum / seen);
    ref.train_accuracy.push_back(correct / seen);
    sched.step();
  }
  ref.weights = weights(*m);
  return ref;
}

inline SchedulerFactory cosine(int64_t epochs) {
  return [epochs](optim::Optimizer& o) { return std::make_unique<optim::CosineAnnealingLR>(o, epochs); };
}

}  // namespace weft::train::testcases
