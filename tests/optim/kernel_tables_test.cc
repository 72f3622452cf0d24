// The fused optimizer kernel tables (optim/kernels.h) are listed in
// core/kernels/INDEX.md with their exact names and CPU dtypes.
#include <gtest/gtest.h>

#include "optim/kernels.h"
#include "tests/kernel_index.h"

namespace weft {
namespace {

TEST(KernelTables, IndexListsEveryOptimTableWithItsCpuDtypes) {
  testing::expect_index_matches({testing::facts("optim::sgd_step_table()", optim::sgd_step_table()),
                                 testing::facts("optim::adam_step_table()", optim::adam_step_table()),
                                 testing::facts("optim::rmsprop_step_table()", optim::rmsprop_step_table()),
                                 testing::facts("optim::adagrad_step_table()", optim::adagrad_step_table()),
                                 testing::facts("optim::grad_norm_table()", optim::grad_norm_table()),
                                 testing::facts("optim::grad_scale_table()", optim::grad_scale_table())},
                                "optim/");
}

}  // namespace
}  // namespace weft
