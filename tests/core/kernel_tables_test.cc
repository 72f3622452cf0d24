// Every core kernel table is reachable through core/kernels/*.h (so other backends
// can register into it), and core/kernels/INDEX.md names each one with its exact
// table name and the dtypes the CPU backend registers.
#include <gtest/gtest.h>

#include "core/kernels/attention.h"
#include "core/kernels/binary.h"
#include "core/kernels/compare.h"
#include "core/kernels/conv.h"
#include "core/kernels/copy.h"
#include "core/kernels/embedding.h"
#include "core/kernels/index.h"
#include "core/kernels/loss.h"
#include "core/kernels/matmul.h"
#include "core/kernels/norm.h"
#include "core/kernels/pool.h"
#include "core/kernels/random.h"
#include "core/kernels/reduce.h"
#include "core/kernels/reduce_stats.h"
#include "core/kernels/rnn.h"
#include "core/kernels/softmax.h"
#include "core/kernels/sort.h"
#include "core/kernels/ternary.h"
#include "core/kernels/unary.h"
#include "core/ops.h"
#include "tests/kernel_index.h"

namespace weft {
namespace {

#define WEFT_T(acc) testing::facts(#acc "()", acc())

std::vector<testing::TableFacts> core_tables() {
  return {
      WEFT_T(attn_softmax_table),
      WEFT_T(attn_softmax_backward_table),
      WEFT_T(sdpa_fused_table),
      WEFT_T(sdpa_fused_backward_table),
      // binary
      WEFT_T(add_table),
      WEFT_T(mul_table),
      WEFT_T(div_table),
      WEFT_T(pow_table),
      WEFT_T(maximum_table),
      WEFT_T(minimum_table),
      WEFT_T(pow_scalar_table),
      WEFT_T(maximum_backward_table),
      WEFT_T(minimum_backward_table),
      // compare
      WEFT_T(eq_table),
      WEFT_T(ne_table),
      WEFT_T(lt_table),
      WEFT_T(le_table),
      WEFT_T(gt_table),
      WEFT_T(ge_table),
      WEFT_T(logical_and_table),
      WEFT_T(logical_or_table),
      WEFT_T(logical_xor_table),
      WEFT_T(logical_not_table),
      WEFT_T(where_table),
      // conv, copy, embedding
      WEFT_T(conv2d_table),
      WEFT_T(conv2d_backward_table),
      WEFT_T(copy_table),
      WEFT_T(fill_table),
      WEFT_T(embedding_table),
      WEFT_T(embedding_backward_table),
      // index
      WEFT_T(gather_table),
      WEFT_T(scatter_add_table),
      WEFT_T(index_select_table),
      WEFT_T(index_add_table),
      WEFT_T(masked_fill_table),
      WEFT_T(tri_table),
      WEFT_T(argsort_table),
      // loss
      WEFT_T(class_loss_table),
      WEFT_T(class_loss_backward_table),
      WEFT_T(mse_table),
      WEFT_T(mse_backward_table),
      WEFT_T(bce_table),
      WEFT_T(bce_backward_table),
      // recurrent cells
      WEFT_T(lstm_cell_table),
      WEFT_T(lstm_cell_backward_table),
      // matmul, norm
      WEFT_T(matmul_table),
      WEFT_T(addmm_table),
      WEFT_T(addmm_gelu_tanh_table),
      WEFT_T(mm_gelu_tanh_backward_table),
      WEFT_T(mm_row_sums_table),
      WEFT_T(bn_stats_table),
      WEFT_T(bn_forward_table),
      WEFT_T(bn_backward_table),
      WEFT_T(ln_forward_table),
      WEFT_T(ln_backward_table),
      // pool
      WEFT_T(max_pool2d_table),
      WEFT_T(max_pool2d_backward_table),
      WEFT_T(max_pool2x2_table),
      WEFT_T(max_pool2x2_backward_table),
      WEFT_T(avg_pool2d_table),
      WEFT_T(avg_pool2d_backward_table),
      WEFT_T(adaptive_avg_pool2d_table),
      WEFT_T(adaptive_avg_pool2d_backward_table),
      // random
      WEFT_T(uniform__table),
      WEFT_T(normal__table),
      WEFT_T(randint_table),
      WEFT_T(dropout_mask_table),
      WEFT_T(bernoulli_table),
      // reduce, reduce_stats, softmax
      WEFT_T(sum_table),
      WEFT_T(prod_table),
      WEFT_T(amax_table),
      WEFT_T(amin_table),
      WEFT_T(max_dim_table),
      WEFT_T(min_dim_table),
      WEFT_T(max_backward_table),
      WEFT_T(prod_backward_table),
      WEFT_T(exp_nograd_table),
      WEFT_T(eq_mask_table),
      WEFT_T(logsumexp_table),
      WEFT_T(norm_table),
      WEFT_T(norm_backward_table),
      WEFT_T(abs_eq_table),
      WEFT_T(std_sqrt_table),
      WEFT_T(softmax_table),
      WEFT_T(log_softmax_table),
      // ternary
      WEFT_T(addcmul_table),
      WEFT_T(addcdiv_table),
      WEFT_T(lerp_table),
      // unary
      WEFT_T(neg_table),
      WEFT_T(exp_table),
      WEFT_T(log_table),
      WEFT_T(sqrt_table),
      WEFT_T(rsqrt_table),
      WEFT_T(abs_table),
      WEFT_T(sign_table),
      WEFT_T(relu_table),
      WEFT_T(sigmoid_table),
      WEFT_T(tanh_table),
      WEFT_T(silu_table),
      WEFT_T(gelu_table),
      WEFT_T(gelu_tanh_table),
      WEFT_T(sin_table),
      WEFT_T(cos_table),
      WEFT_T(erf_table),
      WEFT_T(log1p_table),
      WEFT_T(expm1_table),
      WEFT_T(reciprocal_table),
      WEFT_T(floor_table),
      WEFT_T(ceil_table),
      WEFT_T(round_table),
      WEFT_T(exp_backward_table),
      WEFT_T(log_backward_table),
      WEFT_T(sqrt_backward_table),
      WEFT_T(rsqrt_backward_table),
      WEFT_T(abs_backward_table),
      WEFT_T(relu_backward_table),
      WEFT_T(sigmoid_backward_table),
      WEFT_T(tanh_backward_table),
      WEFT_T(silu_backward_table),
      WEFT_T(gelu_backward_table),
      WEFT_T(gelu_tanh_backward_table),
      WEFT_T(sin_backward_table),
      WEFT_T(cos_backward_table),
      WEFT_T(erf_backward_table),
      WEFT_T(log1p_backward_table),
      WEFT_T(expm1_backward_table),
      WEFT_T(reciprocal_backward_table),
      WEFT_T(clamp_table),
      WEFT_T(clamp_backward_table),
  };
}

TEST(KernelTables, IndexListsEveryCoreTableWithItsCpuDtypes) {
  testing::expect_index_matches(core_tables(), "core/kernels/");
}

// The accessors return the very tables the ops dispatch through: a kernel set
// through the header is the one the op calls.
int g_calls = 0;
void counting_neg(const Tensor&, const Tensor&) { ++g_calls; }

TEST(KernelTables, KernelRegisteredThroughHeaderIsTheOneTheOpCalls) {
  auto saved = neg_table().lookup(kCPU, DType::Int32);
  neg_table().set(DeviceType::CPU, DType::Int32, &counting_neg);
  g_calls = 0;
  neg(ones({3}, {DType::Int32, kCPU}));
  neg_table().set(DeviceType::CPU, DType::Int32, saved);
  EXPECT_EQ(g_calls, 1);
  Tensor r = neg(ones({3}, {DType::Int32, kCPU}));
  EXPECT_EQ(r.data_ptr<int32_t>()[0], -1);
}

}  // namespace
}  // namespace weft
