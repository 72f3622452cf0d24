// embedding with max_norm and scale_grad_by_freq, and embedding_bag in its
// three modes, against PyTorch's values (tests/nn/golden/embedding_bag_golden.safetensors,
// from tools/golden/make_embedding_bag_golden.py): outputs, the weight after
// max_norm renormalised it, and the gradients; the modules over them; errors.
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/nn_ops.h"
#include "core/rng.h"
#include "nn/layers.h"
#include "tests/golden.h"
#include "tests/testing.h"

namespace weft {
namespace {

using testing::tensors_near;
using testing::values;

const testing::Golden& golden() {
  static const testing::Golden g("tests/nn/golden/embedding_bag_golden.safetensors");
  return g;
}
const Tensor& G(const std::string& key) { return golden()(key); }

// Runs fn(idx, w, offsets, psw) on case c's stored inputs in dtype dt, and
// checks the output, the weight after the call and the gradients.
void check_case(const std::string& c, DType dt,
                const std::function<Tensor(const Tensor&, const Tensor&, const Tensor&, const Tensor&)>& fn) {
  SCOPED_TRACE(c + " in " + std::string(dtype_name(dt)));
  Tensor w = G(c + ".w").to(dt).clone().requires_grad_(true);
  Tensor offsets = golden().has(c + ".offsets") ? G(c + ".offsets") : Tensor();
  Tensor psw = golden().has(c + ".psw") ? G(c + ".psw").to(dt).clone().requires_grad_(true) : Tensor();
  Tensor out = fn(G(c + ".idx"), w, offsets, psw);
  EXPECT_EQ(out.dtype(), dt);
  ASSERT_TRUE(tensors_near(out, G(c + ".out"), 1e-6));
  EXPECT_TRUE(tensors_near(w, G(c + ".w_after"), 1e-6));
  out.backward(G(c + ".go").to(dt));
  EXPECT_TRUE(tensors_near(w.grad(), G(c + ".dw"), 1e-5));
  if (psw.defined()) {
    EXPECT_TRUE(tensors_near(psw.grad(), G(c + ".dpsw"), 1e-5));
  }
}

void check_both(const std::string& c,
                const std::function<Tensor(const Tensor&, const Tensor&, const Tensor&, const Tensor&)>& fn) {
  check_case(c, DType::Float32, fn);
  check_case(c, DType::Float64, fn);
}

TEST(Embedding, MaxNormAndScaleGradByFreqAgainstPyTorch) {
  check_both("emb_max_norm",
             [](const Tensor& i, const Tensor& w, const Tensor&, const Tensor&) { return embedding(i, w, {}, 1.0); });
  check_both("emb_max_norm_p1_pad", [](const Tensor& i, const Tensor& w, const Tensor&, const Tensor&) {
    return embedding(i, w, 4, 1.5, 1.0);
  });
  check_both("emb_freq_pad", [](const Tensor& i, const Tensor& w, const Tensor&, const Tensor&) {
    return embedding(i, w, 3, std::nullopt, 2.0, true);
  });
}

TEST(EmbeddingBag, ModesAgainstPyTorch) {
  const std::pair<const char*, EmbeddingBagMode> modes[] = {
      {"sum", EmbeddingBagMode::Sum}, {"mean", EmbeddingBagMode::Mean}, {"max", EmbeddingBagMode::Max}};
  for (const auto& [name, mode] : modes) {
    const std::string m = name;
    check_both("bag_" + m, [mode](const Tensor& i, const Tensor& w, const Tensor& o, const Tensor&) {
      return embedding_bag(i, w, {.offsets = o, .mode = mode});
    });
    check_both("bag_" + m + "_2d", [mode](const Tensor& i, const Tensor& w, const Tensor&, const Tensor&) {
      return embedding_bag(i, w, {.mode = mode});
    });
    check_both("bag_" + m + "_pad", [mode](const Tensor& i, const Tensor& w, const Tensor& o, const Tensor&) {
      return embedding_bag(i, w, {.offsets = o, .mode = mode, .padding_idx = 1});
    });
  }
  check_both("bag_sum_psw", [](const Tensor& i, const Tensor& w, const Tensor& o, const Tensor& p) {
    return embedding_bag(i, w, {.offsets = o, .mode = EmbeddingBagMode::Sum, .per_sample_weights = p});
  });
  check_both("bag_mean_last_offset", [](const Tensor& i, const Tensor& w, const Tensor& o, const Tensor&) {
    return embedding_bag(i, w, {.offsets = o, .include_last_offset = true});
  });
  check_both("bag_sum_max_norm_freq", [](const Tensor& i, const Tensor& w, const Tensor& o, const Tensor&) {
    return embedding_bag(i, w,
                         {.offsets = o, .max_norm = 1.0, .scale_grad_by_freq = true, .mode = EmbeddingBagMode::Sum});
  });
}

TEST(EmbeddingBag, SumIsTheSumOfTheBagsRowsByHand) {
  Tensor w = tensor(std::vector<double>{1, 2, 10, 20, 100, 200}, {3, 2}).requires_grad_(true);
  Tensor idx = tensor<int64_t>({0, 2, 1, 1}, {4});
  Tensor out = embedding_bag(idx, w, {.offsets = tensor<int64_t>({0, 1, 1}, {3}), .mode = EmbeddingBagMode::Sum});
  EXPECT_EQ(values(out), (std::vector<double>{1, 2, 0, 0, 120, 240}));  // bags {0}, {}, {2, 1, 1}
  out.sum().backward();
  EXPECT_EQ(values(w.grad()), (std::vector<double>{1, 1, 2, 2, 1, 1}));
}

TEST(EmbeddingBag, ModulesAndErrors) {
  manual_seed(3);
  nn::EmbeddingBag bag(6, 4, {.mode = EmbeddingBagMode::Max, .padding_idx = -1});
  EXPECT_EQ(bag.options.padding_idx.value_or(-99), 5);
  EXPECT_EQ(values(bag.weight.select(0, 5)), std::vector<double>(4, 0.0));
  EXPECT_EQ(bag.extra_repr(), "6, 4, mode=max, padding_idx=5");
  Tensor idx2d = tensor<int64_t>({1, 3, 5, 0}, {2, 2});
  Tensor out = bag.forward(idx2d);  // bags {1, 3} and {5 (padding), 0}
  EXPECT_TRUE(tensors_near(out.select(0, 0), maximum(bag.weight.select(0, 1), bag.weight.select(0, 3)), 0.0));
  EXPECT_TRUE(tensors_near(out.select(0, 1), bag.weight.select(0, 0), 0.0));
  auto fm = bag.forward_multi({tensor<int64_t>({1, 3, 5, 0}, {4}), tensor<int64_t>({0, 2}, {2})});
  EXPECT_TRUE(tensors_near(fm[0], out, 0.0));
  auto pre = nn::EmbeddingBag::from_pretrained(G("bag_sum.w"), true, {.mode = EmbeddingBagMode::Sum});
  EXPECT_FALSE(pre->weight.requires_grad());
  EXPECT_TRUE(tensors_near(pre->forward(G("bag_sum.idx"), G("bag_sum.offsets")), G("bag_sum.out"), 1e-6));
  nn::Embedding e(6, 4, {.padding_idx = 2, .max_norm = 0.5});
  e.forward(tensor<int64_t>({0, 1}, {2}));
  EXPECT_LE(norm(e.weight.select(0, 0)).item<double>(), 0.5 + 1e-6);
  EXPECT_EQ(e.extra_repr(), "6, 4, padding_idx=2, max_norm=0.500000");

  Tensor w = zeros({6, 4}), idx = tensor<int64_t>({0, 1, 2}, {3});
  EXPECT_WEFT_ERROR(embedding_bag(idx, w), "a 1-D input needs 1-D int64 offsets");
  EXPECT_WEFT_ERROR(embedding_bag(idx, w, {.offsets = tensor<int64_t>({1, 2}, {2})}), "offsets[0] must be 0, got 1");
  EXPECT_WEFT_ERROR(embedding_bag(idx, w, {.offsets = tensor<int64_t>({0, 2, 1}, {3})}),
                    "offsets must not decrease and stay within the 3 entries, but bag 1 spans [2, 1)");
  EXPECT_WEFT_ERROR(embedding_bag(idx2d, w, {.offsets = tensor<int64_t>({0}, {1})}),
                    "offsets must be undefined for a 2-D input");
  EXPECT_WEFT_ERROR(embedding_bag(idx, w, {.offsets = tensor<int64_t>({0}, {1}), .per_sample_weights = ones({3})}),
                    "per_sample_weights is only supported for mode Sum");
  EXPECT_WEFT_ERROR(embedding_bag(tensor<int64_t>({0, 7}, {2}), w, {.offsets = tensor<int64_t>({0}, {1})}),
                    "embedding: index 7 is out of range for num_embeddings 6");
  EXPECT_WEFT_ERROR(nn::Embedding(6, 4, {.max_norm = -1.0}), "Embedding: max_norm must be non-negative, got -1");
}

}  // namespace
}  // namespace weft
