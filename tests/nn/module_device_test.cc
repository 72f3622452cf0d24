// Module::to(Device) and optimizer state placement, on CPU-only builds.
//
// A fake CUDA backend (host-memory allocator plus a memcpy copy kernel registered
// for DeviceType::CUDA; this binary does not link //core/cuda) lets tensors claim
// to live on cuda:0, so the bookkeeping is checked without a GPU: parameters,
// their gradients and buffers all move, keep their values and their identity
// (optimizers hold the same tensors), and loaded optimizer state follows the
// parameter's device while "step" stays a CPU scalar. The same training on a real
// GPU is compared with the CPU in tests/cuda/module_gpu_test.cc.
#include <cstdlib>
#include <cstring>

#include "core/kernels/copy.h"
#include "core/rng.h"
#include "core/storage.h"
#include "nn/nn.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "tests/testing.h"

namespace weft {
namespace {

using weft::testing::tensors_near;

class FakeCudaAllocator : public Allocator {
 public:
  void* allocate(size_t n, Device) override { return std::malloc(n ? n : 1); }
  void deallocate(void* p, size_t, Device) override { std::free(p); }
};

// Same-dtype copy between host memory claiming any device (src expanded: any strides).
template <typename T>
void fake_copy(const Tensor& dst, const Tensor& src) {
  WEFT_CHECK(dst.dtype() == src.dtype() && dst.is_contiguous(), "fake_copy: same dtype, contiguous dst only");
  Tensor s = src.device().is_cpu() ? src.contiguous() : src;
  WEFT_CHECK(s.is_contiguous(), "fake_copy: contiguous src only");
  std::memcpy(dst.raw_data(), s.raw_data(), static_cast<size_t>(dst.numel()) * sizeof(T));
}
WEFT_REGISTER_KERNEL(copy_table(), DeviceType::CUDA, kAllTypes, fake_copy);

const Device kFakeGpu{DeviceType::CUDA, 0};

class ModuleDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    static FakeCudaAllocator fake;
    try {
      prev_ = get_allocator(kFakeGpu);
    } catch (const Error&) {
      prev_ = nullptr;
    }
    set_allocator(DeviceType::CUDA, &fake);
  }
  void TearDown() override { set_allocator(DeviceType::CUDA, prev_); }

 private:
  Allocator* prev_ = nullptr;
};

std::shared_ptr<nn::Sequential> small_net() {
  manual_seed(3);
  return nn::Sequential::of(std::make_shared<nn::Linear>(4, 5), std::make_shared<nn::BatchNorm1d>(5),
                            std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(5, 2));
}

TEST_F(ModuleDevice, ParametersGradsAndBuffersMove) {
  auto net = small_net();
  std::vector<Tensor> params = net->parameters();
  std::vector<Tensor> want_p, want_g, want_b;
  for (Tensor& p : params) {
    p.set_grad(testing::rnd(p.sizes(), p.dtype(), 7));
    want_p.push_back(p.detach().clone());
    want_g.push_back(p.grad().clone());
  }
  for (const Tensor& b : net->buffers()) want_b.push_back(b.clone());
  ASSERT_FALSE(net->buffers().empty());

  std::vector<TensorImpl*> impls;
  for (const Tensor& p : params) impls.push_back(p.impl());
  net->to(kFakeGpu);

  std::vector<Tensor> moved = net->parameters();
  ASSERT_EQ(moved.size(), params.size());
  for (size_t i = 0; i < moved.size(); ++i) {
    EXPECT_EQ(moved[i].impl(), impls[i]) << "parameter " << i << " lost its identity";
    EXPECT_EQ(params[i].device(), kFakeGpu) << "parameter " << i;  // optimizer-held handles see the move
    ASSERT_TRUE(moved[i].grad().defined());
    EXPECT_EQ(moved[i].grad().device(), kFakeGpu) << "grad of parameter " << i;
    EXPECT_TRUE(moved[i].requires_grad());
    EXPECT_TRUE(tensors_near(moved[i].detach().to(kCPU), want_p[i], 0));
    EXPECT_TRUE(tensors_near(moved[i].grad().to(kCPU), want_g[i], 0));
  }
  std::vector<Tensor> bufs = net->buffers();
  for (size_t i = 0; i < bufs.size(); ++i) {
    EXPECT_EQ(bufs[i].device(), kFakeGpu) << "buffer " << i;
    EXPECT_TRUE(tensors_near(bufs[i].to(kCPU), want_b[i], 0));
  }
  for (auto& [k, v] : net->state_dict()) EXPECT_EQ(v.device(), kFakeGpu) << k;

  net->to(kCPU);
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].device(), kCPU);
    EXPECT_TRUE(tensors_near(params[i].detach(), want_p[i], 0));
  }
}

// Optimizer state loaded from a (CPU) checkpoint lands on each parameter's device,
// like torch.optim.Optimizer.load_state_dict; "step" stays a CPU float32 scalar.
TEST_F(ModuleDevice, LoadedOptimizerStateFollowsParameterDevice) {
  auto cpu_net = small_net();
  optim::AdamW cpu_opt(cpu_net->parameters(), {});
  for (Tensor& p : cpu_net->parameters()) p.set_grad(testing::rnd(p.sizes(), p.dtype(), 11));
  cpu_opt.step();
  optim::OptimizerStateDict sd = cpu_opt.state_dict();

  auto gpu_net = small_net();
  gpu_net->to(kFakeGpu);
  optim::AdamW gpu_opt(gpu_net->parameters(), {});
  gpu_opt.load_state_dict(sd);
  int checked = 0;
  for (auto& [k, v] : gpu_opt.state_dict()) {
    if (k.rfind("state.", 0) != 0) continue;
    bool is_step = k.size() >= 5 && k.compare(k.size() - 5, 5, ".step") == 0;
    EXPECT_EQ(v.device(), is_step ? kCPU : kFakeGpu) << k;
    EXPECT_TRUE(tensors_near(v.to(kCPU), sd.at(k), 0)) << k;
    ++checked;
  }
  EXPECT_EQ(checked, 3 * static_cast<int>(gpu_net->parameters().size()));
}

}  // namespace
}  // namespace weft
