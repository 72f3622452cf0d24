// Guide, chapter 3: training. A small classifier learns three clusters of
// points in the plane: a synthetic dataset, a DataLoader, cross-entropy,
// SGD with momentum, a few epochs, then the accuracy on held-out points.
#include <cstdio>
#include <memory>

#include "core/autograd_meta.h"
#include "core/rng.h"
#include "io/dataloader.h"
#include "nn/nn.h"
#include "optim/sgd.h"

namespace nn = weft::nn;
using weft::Tensor;

// n points around three centres, labelled by their centre: data (n, 2), targets (n).
std::shared_ptr<weft::io::TensorDataset> clusters(int64_t n) {
  Tensor centres = weft::tensor({-2, 0, 2, 0, 0, 2.5}, {3, 2});                        // (3, 2)
  Tensor labels = weft::randint(0, 3, {n});                                            // (n), int64
  Tensor points = weft::index_select(centres, 0, labels) + weft::randn({n, 2}) * 0.6;  // (n, 2)
  return std::make_shared<weft::io::TensorDataset>(points, labels);
}

int main() {
  weft::manual_seed(0);
  auto train = clusters(2048), test = clusters(512);
  weft::io::DataLoader loader(train, {.batch_size = 64, .shuffle = true, .seed = 0});

  auto model = nn::Sequential::of(std::make_shared<nn::Linear>(2, 32), std::make_shared<nn::ReLU>(),
                                  std::make_shared<nn::Linear>(32, 3));
  weft::optim::SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9});

  double loss = 0;
  for (int epoch = 0; epoch < 5; ++epoch) {
    loader.set_epoch(epoch);  // the shuffle of this epoch
    double loss_sum = 0;
    int64_t seen = 0;
    for (auto& batch : loader) {
      Tensor batch_loss = weft::cross_entropy((*model)(batch.data), batch.target);  // mean over the batch
      opt.zero_grad();
      batch_loss.backward();
      opt.step();
      loss_sum += batch_loss.item<double>() * static_cast<double>(batch.data.size(0));
      seen += batch.data.size(0);
    }
    loss = loss_sum / static_cast<double>(seen);
    std::printf("epoch %d: train_loss=%.4f\n", epoch + 1, loss);
  }

  weft::NoGradGuard no_grad;  // evaluation records no graph
  model->eval();
  Tensor predicted = weft::argmax((*model)(test->data()), 1);  // (512)
  const double accuracy = static_cast<double>((predicted == test->targets()).sum().item<int64_t>()) / 512.0;
  std::printf("test_accuracy=%.4f\n", accuracy);
  const bool ok = loss < 0.3 && accuracy > 0.9;
  std::printf("training: %s\n", ok ? "ok" : "did not converge");
  return ok ? 0 : 1;
}
