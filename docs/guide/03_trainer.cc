// Guide, chapter 3: the same classifier trained by the library's loop,
// train::Trainer, with callbacks: a learning-rate schedule, a checkpoint
// every 40 steps, early stopping on the validation loss. A second Trainer
// then resumes from the newest checkpoint and reaches the same weights.
#include <cstdio>
#include <memory>
#include <string>

#include "core/nn_ops.h"
#include "core/rng.h"
#include "io/dataloader.h"
#include "nn/nn.h"
#include "optim/lr_scheduler.h"
#include "train/callbacks.h"
#include "train/trainer.h"

namespace nn = weft::nn;
namespace train = weft::train;
using weft::Tensor;

// n points around three centres, labelled by their centre: data (n, 2), targets (n).
std::shared_ptr<weft::io::TensorDataset> clusters(int64_t n) {
  Tensor centres = weft::tensor({-2, 0, 2, 0, 0, 2.5}, {3, 2});                        // (3, 2)
  Tensor labels = weft::randint(0, 3, {n});                                            // (n), int64
  Tensor points = weft::index_select(centres, 0, labels) + weft::randn({n, 2}) * 0.6;  // (n, 2)
  return std::make_shared<weft::io::TensorDataset>(points, labels);
}

// A model, its Trainer in this process and the callbacks; fit() from `resume` when given.
Tensor run(const std::string& root, const std::string& resume, weft::io::DataLoader& loader,
           weft::io::DataLoader& valid) {
  weft::manual_seed(1);  // the same initial weights in both runs
  auto model = nn::Sequential::of(std::make_shared<nn::Linear>(2, 32), std::make_shared<nn::ReLU>(),
                                  std::make_shared<nn::Linear>(32, 3));
  train::Trainer trainer(train::Local{}, model,
                         [](const Tensor& logits, const Tensor& y) { return weft::cross_entropy(logits, y); },
                         train::sgd({.lr = 0.1, .momentum = 0.9}), {.name = "guide"});
  trainer.add<train::LRSchedule>(
      [](weft::optim::Optimizer& o) { return std::make_unique<weft::optim::CosineAnnealingLR>(o, 6); });
  trainer.add<train::Progress>(train::ProgressOptions{.bar = false});
  trainer.add<train::Checkpoint>(train::CheckpointOptions{.root = root, .every_steps = 40});
  trainer.add<train::EarlyStop>(train::EarlyStopOptions{.patience = 2, .min_delta = 1e-3});
  if (!resume.empty()) trainer.resume(resume);
  trainer.fit(loader, &valid, 6);
  std::printf("stopped after epoch %lld, step %lld: valid_accuracy=%.4f\n",
              static_cast<long long>(trainer.state().epoch), static_cast<long long>(trainer.state().step),
              trainer.state().history.back().valid_metric);
  return model->parameters()[0].clone();  // the first layer's weights
}

int main(int argc, char** argv) {
  const std::string root = argc > 1 ? argv[1] : "guide_checkpoints";
  weft::manual_seed(0);
  auto data = clusters(2048), held_out = clusters(512);
  weft::io::DataLoader loader(data, {.batch_size = 64, .shuffle = true, .seed = 0});
  weft::io::DataLoader valid(held_out, {.batch_size = 256});

  Tensor first = run(root + "/a", "", loader, valid);
  // The second run resumes from the first run's checkpoint at step 80 (in epoch 3).
  Tensor second = run(root + "/b", root + "/a/step-00000080", loader, valid);
  const bool same = weft::equal(first, second);
  std::printf("resumed run, same weights: %s\n", same ? "yes" : "no");
  return same ? 0 : 1;
}
