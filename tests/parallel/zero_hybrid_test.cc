// ZeroOptimizer under DistributedModel as it stands (ranks as threads): the
// model's reducers average each stage's gradients over its data-parallel
// group, and a ZeroOptimizer over the rank's local named parameters on that
// group (ZeroGrads::kReduced), made in a post-partition hook, updates them.
// For grids pp x dp = 2x2 and 1x4, SGD (momentum, weight decay) and AdamW,
// and backward_passes_per_step 2, the parameters equal those of the same
// DistributedModel run with the plain optimizer within 1e-6, and each rank's
// gathered state dict equals that plain optimizer's by-name dict.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/nn_ops.h"
#include "parallel/comm/inproc/testing.h"
#include "parallel/hybrid/distributed_model.h"
#include "tests/parallel/zero_cases.h"

namespace weft::parallel {
namespace {

using zero_cases::Opt;
constexpr int64_t kLocalRows = 4;

// (Linear, Tanh) x 4: 6 -> 10 -> 10 -> 10 -> 3.
std::shared_ptr<nn::Sequential> make_mlp() {
  std::shared_ptr<nn::Sequential> m;
  {
    std::lock_guard<std::mutex> l(zero_cases::build_mutex());
    m = std::make_shared<nn::Sequential>();
    for (int i = 0; i < 4; ++i) {
      m->push_back(std::make_shared<nn::Linear>(i == 0 ? 6 : 10, i == 3 ? 3 : 10));
      m->push_back(std::make_shared<nn::Tanh>());
    }
  }
  int k = 0;
  for (auto& p : m->parameters()) zero_cases::fill_det(p, 3 + 10 * k++);
  return m;
}

struct Result {
  std::map<std::string, Tensor> params;  // this rank's, by name
  optim::OptimizerStateDict state;       // by name: gathered (ZeRO) or the plain optimizer's
  std::string memory;                    // ZeRO's memory summary
};

std::vector<Result> run(int pp, int dp, Opt o, int passes, bool zero) {
  const int world = pp * dp, steps = 4;
  std::vector<Result> out(world);
  run_ranks(world, [&](std::shared_ptr<ProcessGroup> g) {
    const int r = g->rank();
    hybrid::DistributedModelOptions mo;
    mo.pp = pp;
    mo.pipe.chunks = 2;
    mo.auto_partition = false;
    mo.backward_passes_per_step = passes;
    hybrid::DistributedModel dm(make_mlp(), g, mo);
    std::unique_ptr<optim::Optimizer> plain;
    std::unique_ptr<ZeroOptimizer> z;
    dm.register_post_partition_hook([&](hybrid::DistributedModel& m) {
      if (!zero) {
        plain = zero_cases::make_opt(o, m.local_parameters());
        return;
      }
      ZeroOptions zo;
      zo.grads = ZeroGrads::kReduced;  // the model's reducers averaged them
      z = std::make_unique<ZeroOptimizer>(m.local_named_parameters(), m.grid().data_parallel(), zero_cases::factory(o),
                                          zo);
    });
    dm.partition();
    for (int k = 0; k < steps; ++k) {
      Tensor x = empty({kLocalRows, 6}), y = empty({kLocalRows, 3});
      zero_cases::fill_det(x, 100 + 10 * k + dm.dp_rank(), 1.0);
      zero_cases::fill_det(y, 200 + 10 * k + dm.dp_rank(), 1.0);
      if (k % passes == 0) zero ? z->zero_grad() : plain->zero_grad();
      dm.step(x, y, [](const Tensor& out, const Tensor& t) { return mse_loss(out, t); });
      if ((k + 1) % passes == 0) zero ? z->step() : plain->step();
    }
    for (auto& [n, p] : dm.local_named_parameters()) out[r].params[n] = p.detach();
    out[r].state = zero ? z->state_dict() : plain->state_dict_by_name(dm.local_named_parameters());
    if (zero) out[r].memory = z->memory_summary();
  });
  return out;
}

void check(int pp, int dp, Opt o, int passes) {
  const std::string what = "pp " + std::to_string(pp) + " x dp " + std::to_string(dp) + " " + zero_cases::opt_name(o) +
                           " passes " + std::to_string(passes);
  SCOPED_TRACE(what);
  auto want = run(pp, dp, o, passes, false), got = run(pp, dp, o, passes, true);
  for (size_t r = 0; r < got.size(); ++r) {
    ASSERT_EQ(got[r].params.size(), want[r].params.size()) << "rank " << r;
    EXPECT_FALSE(got[r].params.empty()) << "rank " << r;
    for (auto& [n, p] : want[r].params)
      EXPECT_TRUE(testing::tensors_near(got[r].params.at(n), p, zero_cases::kTol)) << n << " on rank " << r;
    zero_cases::expect_state_dicts_near(got[r].state, want[r].state, zero_cases::kTol, "rank " + std::to_string(r));
    if (r < static_cast<size_t>(pp)) std::printf("[zero] %s, stage %zu: %s\n", what.c_str(), r, got[r].memory.c_str());
  }
}

TEST(ZeroWithDistributedModel, ReducedGradientsEqualThePlainOptimizer) {
  for (Opt o : {Opt::kSgd, Opt::kAdamW}) {
    check(2, 2, o, 1);
    check(1, 4, o, 1);
  }
  check(2, 2, Opt::kAdamW, 2);
}

}  // namespace
}  // namespace weft::parallel
