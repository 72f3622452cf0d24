// Training on the GPU equals training on the CPU: the same MLP / CNN (same init,
// same batches) trained a few steps with SGD+momentum and AdamW on cuda:0 and on
// the CPU ends with the same parameters, losses and optimizer state (float64 to
// 1e-9, float32 to 1e-4 relative). Also checks that Module::to(cuda) moves
// parameters, gradients and buffers, and optimizer state is created on the GPU.
#include <functional>

#include "core/nn_ops.h"
#include "core/rng.h"
#include "examples/models.h"
#include "nn/nn.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "tests/cuda/gpu_testing.h"

namespace weft {
namespace {

using testing::kGPU;
using testing::tensors_near;

using ModelFactory = std::function<std::shared_ptr<nn::Module>()>;
using OptFactory = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

struct RunResult {
  std::vector<double> losses;
  std::vector<Tensor> params;  // on the CPU
  optim::OptimizerStateDict opt_state;
};

// Trains `steps` steps on `dev` from the same seed; inputs are made on the CPU and moved.
RunResult train(const ModelFactory& make, const OptFactory& make_opt, DType dt, Device dev, const Shape& in_shape,
                int steps) {
  manual_seed(42);
  std::shared_ptr<nn::Module> model = make();
  model->to(dt);
  model->to(dev);
  for (const Tensor& p : model->parameters()) EXPECT_EQ(p.device(), dev);
  for (const Tensor& b : model->buffers()) EXPECT_EQ(b.device(), dev);
  std::unique_ptr<optim::Optimizer> opt = make_opt(model->parameters());
  RunResult r;
  for (int s = 0; s < steps; ++s) {
    Tensor x = testing::rnd(in_shape, dt, 100 + s).to(dev);  // in_shape
    Tensor y = empty({in_shape[0]}, {DType::Int64});         // (N)
    for (int64_t i = 0; i < in_shape[0]; ++i) y.data_ptr<int64_t>()[i] = (i * (s + 3) + s) % 10;
    y = y.to(dev);
    Tensor loss = cross_entropy((*model)(x), y);
    opt->zero_grad();
    loss.backward();
    for (const Tensor& p : model->parameters()) EXPECT_EQ(p.grad().device(), dev);
    opt->step();
    r.losses.push_back(loss.item<double>());
  }
  for (const Tensor& p : model->parameters()) r.params.push_back(p.detach().to(kCPU));
  for (auto& [k, v] : opt->state_dict()) {
    bool is_step = k.size() >= 5 && k.compare(k.size() - 5, 5, ".step") == 0;
    if (k.rfind("state.", 0) == 0 && !is_step) {
      EXPECT_EQ(v.device(), dev) << k << ": optimizer state not on the GPU";
    }
    r.opt_state[k] = v.to(kCPU);
  }
  return r;
}

void expect_same_training(const ModelFactory& make, const OptFactory& make_opt, const Shape& in_shape) {
  for (DType dt : {DType::Float64, DType::Float32}) {
    SCOPED_TRACE(dtype_name(dt));
    const double tol = dt == DType::Float64 ? 1e-9 : 1e-4;
    RunResult cpu = train(make, make_opt, dt, kCPU, in_shape, 4);
    RunResult gpu = train(make, make_opt, dt, kGPU, in_shape, 4);
    ASSERT_EQ(cpu.losses.size(), gpu.losses.size());
    for (size_t i = 0; i < cpu.losses.size(); ++i)
      EXPECT_NEAR(gpu.losses[i], cpu.losses[i], tol * (1 + std::abs(cpu.losses[i]))) << "step " << i;
    ASSERT_EQ(cpu.params.size(), gpu.params.size());
    for (size_t i = 0; i < cpu.params.size(); ++i) EXPECT_TRUE(tensors_near(gpu.params[i], cpu.params[i], tol)) << i;
    ASSERT_EQ(cpu.opt_state.size(), gpu.opt_state.size());
    for (auto& [k, v] : cpu.opt_state) EXPECT_TRUE(tensors_near(gpu.opt_state.at(k), v, tol)) << k;
  }
}

std::unique_ptr<optim::Optimizer> sgd(std::vector<Tensor> ps) {
  return std::make_unique<optim::SGD>(std::move(ps), optim::SGDOptions{0.05, 0.9, 0.0, 5e-4, false});
}
std::unique_ptr<optim::Optimizer> adamw(std::vector<Tensor> ps) {
  optim::AdamWOptions o;
  o.lr = 1e-3;
  return std::make_unique<optim::AdamW>(std::move(ps), o);
}

TEST(ModuleGpu, MlpSgdMatchesCpu) {
  WEFT_REQUIRE_GPU();
  expect_same_training([] { return examples::fashion_mlp(); }, sgd, {16, 784});
}

TEST(ModuleGpu, MlpAdamWMatchesCpu) {
  WEFT_REQUIRE_GPU();
  expect_same_training([] { return examples::fashion_mlp(); }, adamw, {16, 784});
}

TEST(ModuleGpu, CnnSgdMatchesCpu) {
  WEFT_REQUIRE_GPU();
  expect_same_training([] { return examples::fashion_cnn(); }, sgd, {8, 1, 28, 28});
}

// Batch norm's running statistics (buffers) are updated on the GPU like on the CPU.
// The Linear before the batch norm has no bias: batch norm subtracts the batch
// mean, so such a bias's gradient is exactly zero and what the backend computes
// is rounding noise of about Adam's eps (1e-8), which AdamW turns into steps of
// up to lr (1e-3) whose size and sign depend on the order of the float32 sums:
// no two backends could agree on that parameter.
TEST(ModuleGpu, BatchNormBuffersMatchCpu) {
  WEFT_REQUIRE_GPU();
  auto make = [] {
    return nn::Sequential::of(std::make_shared<nn::Linear>(12, 8, /*bias=*/false), std::make_shared<nn::BatchNorm1d>(8),
                              std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(8, 10));
  };
  expect_same_training(make, adamw, {32, 12});
  manual_seed(1);
  auto cpu = make();
  manual_seed(1);
  auto gpu = make();
  gpu->to(kGPU);
  Tensor x = testing::rnd({32, 12}, DType::Float32, 5);
  (*cpu)(x);
  (*gpu)(x.to(kGPU));
  std::vector<Tensor> bc = cpu->buffers(), bg = gpu->buffers();
  ASSERT_EQ(bc.size(), bg.size());
  for (size_t i = 0; i < bc.size(); ++i) {
    EXPECT_EQ(bg[i].device(), kGPU);
    EXPECT_TRUE(tensors_near(bg[i].to(kCPU), bc[i], 1e-5)) << "buffer " << i;
  }
}

}  // namespace
}  // namespace weft
