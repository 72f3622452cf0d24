// train: a starter program built on weft from its own repository.
//
// Fits a small MLP to a synthetic regression target, y = x0 * x1 + 0.5 * x2,
// with Adam for --steps steps, printing the loss every 50 steps and ending
// with `final_loss=<value>`. Replace the model, the data and the loop with your
// own; the BUILD file shows how to depend on weft (@weft//:weft).
//
//   bazel run //:train -- --steps 300
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "core/ops.h"
#include "core/rng.h"
#include "nn/nn.h"
#include "optim/adam.h"

namespace {

using weft::Tensor;

// A module of our own: two Linear layers registered as children, so their
// parameters reach the optimizer through parameters().
class Regressor : public weft::nn::Module {
 public:
  explicit Regressor(int64_t hidden) {
    fc1_ = register_module("fc1", std::make_shared<weft::nn::Linear>(3, hidden));
    fc2_ = register_module("fc2", std::make_shared<weft::nn::Linear>(hidden, 1));
  }
  Tensor forward(const Tensor& x) override {  // (B, 3) -> (B, 1)
    return (*fc2_)(weft::relu((*fc1_)(x)));
  }

 private:
  std::shared_ptr<weft::nn::Linear> fc1_, fc2_;
};

// A batch of inputs (B, 3) in [-1, 1) and their targets (B, 1).
std::pair<Tensor, Tensor> make_batch(int64_t batch) {
  Tensor x = weft::rand({batch, 3}) * 2.0 - 1.0;
  Tensor y = x.select(1, 0) * x.select(1, 1) + x.select(1, 2) * 0.5;  // (B,)
  return {x, y.unsqueeze(1)};
}

}  // namespace

int main(int argc, char** argv) {
  int64_t steps = 300;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
      steps = std::atoll(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: train [--steps N]\n");
      return 2;
    }
  }
  weft::manual_seed(0);
  auto model = std::make_shared<Regressor>(64);
  weft::optim::Adam opt(model->named_parameters(), {.lr = 1e-2});

  double loss_value = 0;
  for (int64_t step = 1; step <= steps; ++step) {
    auto [x, y] = make_batch(128);
    Tensor loss = weft::mse_loss((*model)(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    loss_value = loss.item<double>();
    if (step == 1 || step % 50 == 0) std::printf("step %lld: loss=%.5f\n", static_cast<long long>(step), loss_value);
  }
  std::printf("final_loss=%.5f\n", loss_value);
  return 0;
}
