// The pipeline on one GPU: LocalPipe with two stages both on cuda:0,
// DistributedModel (pp 1 x dp 1, and with ZeRO-1; global-norm clipping) and
// DistributedDataParallel (finding unused parameters) over a one-rank NCCL
// group on cuda:0. Each trains an MLP for three SGD-momentum steps; its losses,
// gradient norms and parameters must equal the same model trained by one
// process on the CPU within 1e-4. Tagged "gpu": every test skips (GTEST_SKIP, with the driver's
// reason) when no CUDA GPU is visible.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/autograd_meta.h"
#include "core/cuda/runtime.h"
#include "core/nn_ops.h"
#include "core/ops.h"
#include "core/rng.h"
#include "nn/nn.h"
#include "optim/clip_grad.h"
#include "optim/sgd.h"
#include "parallel/comm/inproc/process_group_inproc.h"
#include "parallel/comm/nccl/process_group_nccl.h"
#include "parallel/data/ddp.h"
#include "parallel/hybrid/clip_grad.h"
#include "parallel/hybrid/distributed_model.h"
#include "parallel/hybrid/distributed_optimizer.h"
#include "parallel/pipe/local_pipe.h"
#include "tests/cuda/gpu_testing.h"
#include "tests/testing.h"

namespace weft::parallel {
namespace {

const Device kGPU{DeviceType::CUDA, 0};
constexpr int64_t kIn = 6, kHidden = 16, kOut = 3, kRows = 12;
constexpr int kSteps = 3;
constexpr double kTol = 1e-4;

// 8 children: (Linear, Tanh) x 4, the same weights for the same seed.
std::shared_ptr<nn::Sequential> make_mlp() {
  manual_seed(17);
  auto m = std::make_shared<nn::Sequential>();
  for (int i = 0; i < 4; ++i) {
    m->push_back(std::make_shared<nn::Linear>(i == 0 ? kIn : kHidden, i == 3 ? kOut : kHidden));
    m->push_back(std::make_shared<nn::Tanh>());
  }
  return m;
}

Tensor mse(const Tensor& out, const Tensor& target) { return mse_loss(out, target); }

struct Batches {
  std::vector<Tensor> xs, ys;  // on the CPU
};

Batches batches() {
  Batches b;
  manual_seed(3);
  for (int k = 0; k < kSteps; ++k) {
    b.xs.push_back(randn({kRows, kIn}));
    b.ys.push_back(randn({kRows, kOut}));
  }
  return b;
}

optim::SGDOptions sgd() { return {0.1, 0.9}; }

// One process on the CPU: the losses and the parameters after kSteps.
struct Reference {
  std::vector<double> loss;
  std::vector<double> grad_norm;  // the 2-norm of every gradient, before each step
  std::map<std::string, Tensor> params;
};

Reference cpu_reference(const Batches& b) {
  Reference ref;
  auto model = make_mlp();
  optim::SGD opt(model->parameters(), sgd());
  for (int k = 0; k < kSteps; ++k) {
    opt.zero_grad();
    Tensor l = mse(model->forward(b.xs[k]), b.ys[k]);
    l.backward();
    ref.loss.push_back(l.item<double>());
    ref.grad_norm.push_back(optim::clip_grad_norm_(model->parameters(), 1e30));
    opt.step();
  }
  for (auto& [n, p] : model->named_parameters()) ref.params[n] = p.detach();
  return ref;
}

void expect_params_equal(const std::vector<std::pair<std::string, Tensor>>& got, const Reference& ref, bool on_gpu) {
  ASSERT_EQ(got.size(), ref.params.size());
  for (const auto& [n, p] : got) {
    auto it = ref.params.find(n);
    ASSERT_NE(it, ref.params.end()) << n << " is not a parameter of the model";
    if (on_gpu) {
      EXPECT_EQ(p.device(), kGPU) << n;
    }
    EXPECT_TRUE(testing::tensors_near(p.detach().to(kCPU), it->second, kTol)) << n;
  }
}

TEST(PipeOnOneGpu, LocalPipeTwoStagesOnCuda0EqualsTheCpu) {
  WEFT_REQUIRE_GPU();
  const Batches b = batches();
  const Reference ref = cpu_reference(b);
  for (pipe::ScheduleKind kind :
       {pipe::ScheduleKind::kGPipe, pipe::ScheduleKind::k1F1B, pipe::ScheduleKind::kZeroBubbleH1}) {
    SCOPED_TRACE(pipe::schedule_name(kind));
    auto model = make_mlp();
    pipe::PipeOptions o;
    o.chunks = 3;
    o.schedule = kind;
    pipe::LocalPipe lp(model, {4, 4}, {kGPU, kGPU}, o);
    optim::SGD opt(lp.parameters(), sgd());
    for (int k = 0; k < kSteps; ++k) {
      opt.zero_grad();
      EXPECT_NEAR(lp.step(b.xs[k], b.ys[k], mse), ref.loss[k], kTol) << "step " << k;
      opt.step();
    }
    expect_params_equal(lp.named_parameters(), ref, /*on_gpu=*/true);
    // forward() equals the CPU model's after the same steps.
    auto cpu = make_mlp();
    for (auto& [n, p] : cpu->named_parameters()) {
      NoGradGuard ng;
      p.copy_(ref.params.at(n));
    }
    EXPECT_TRUE(testing::tensors_near(lp.forward(b.xs[0]).to(kCPU), cpu->forward(b.xs[0]).detach(), kTol));
  }
}

// DistributedModel over NCCL with a world of one on cuda:0: plain, and with
// the optimizer state sharded (ZeRO-1 through DistributedOptimizer).
TEST(PipeOnOneGpu, DistributedModelOverNcclWorldOfOneEqualsTheCpu) {
  WEFT_REQUIRE_GPU();
  const Batches b = batches();
  const Reference ref = cpu_reference(b);
  auto nccl = ProcessGroupNCCL::create(ProcessGroupInProc::create_world(1)[0]);
  ASSERT_EQ(nccl->size(), 1);
  for (bool zero : {false, true}) {
    SCOPED_TRACE(zero ? "zero" : "plain");
    hybrid::DistributedModelOptions o;
    o.pp = 1;
    o.auto_partition = false;
    o.print_table = false;
    o.pipe.chunks = 2;
    o.pipe.device = kGPU;
    o.pipe.transfer_device = kGPU;
    o.shard_optimizer_state = zero;
    hybrid::DistributedModel dm(make_mlp(), nccl, o);
    hybrid::DistributedOptimizer opt(
        dm, [](const optim::NamedParameters& p) { return std::make_unique<optim::SGD>(p, sgd()); });
    for (int k = 0; k < kSteps; ++k) {
      opt.zero_grad();
      EXPECT_NEAR(dm.step(b.xs[k], b.ys[k], mse), ref.loss[k], kTol) << "step " << k;
      if (!zero) {  // the world's allreduce of the squared norm (a host value) runs on the GPU
        hybrid::GlobalNormClipper clipper(dm, 1e30);
        EXPECT_NEAR(clipper.clip(), ref.grad_norm[k], kTol) << "step " << k;
      }
      opt.step();
    }
    expect_params_equal(dm.local_named_parameters(), ref, /*on_gpu=*/true);
  }
}

// DistributedDataParallel over NCCL with a world of one on cuda:0, finding
// unused parameters (its use map is reduced over the group: host data).
TEST(PipeOnOneGpu, DdpOverNcclWorldOfOneEqualsTheCpu) {
  WEFT_REQUIRE_GPU();
  const Batches b = batches();
  const Reference ref = cpu_reference(b);
  auto nccl = ProcessGroupNCCL::create(ProcessGroupInProc::create_world(1)[0]);
  auto model = make_mlp();
  model->to(kGPU);
  DDPOptions o;
  o.find_unused_parameters = true;
  DistributedDataParallel ddp(model, nccl, o);
  optim::SGD opt(model->parameters(), sgd());
  for (int k = 0; k < kSteps; ++k) {
    opt.zero_grad();
    Tensor l = mse(ddp.forward(b.xs[k].to(kGPU)), b.ys[k].to(kGPU));
    l.backward();
    EXPECT_NEAR(l.item<double>(), ref.loss[k], kTol) << "step " << k;
    opt.step();
  }
  expect_params_equal(model->named_parameters(), ref, /*on_gpu=*/true);
}

}  // namespace
}  // namespace weft::parallel
