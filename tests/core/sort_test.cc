// sort, argsort and topk (core/ops/sort.cc): hand-worked orders with ties and
// NaN, random rows against std::stable_sort, every CPU dtype, gradients by
// finite differences, and the errors.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "autograd/gradcheck.h"
#include "core/ops.h"
#include "tests/testing.h"

namespace weft {
namespace {

using testing::tensor_near;

std::vector<int64_t> ints(const Tensor& t) {
  Tensor c = t.contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

TEST(Sort, TiesKeepTheirOrderAndNaNSortsAboveEveryNumber) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = tensor(std::vector<double>{3, 1, nan, 2, 1, -INFINITY});
  auto [up, up_pos] = sort(x);
  EXPECT_EQ(ints(up_pos), (std::vector<int64_t>{5, 1, 4, 3, 0, 2}));
  EXPECT_TRUE(std::isnan(testing::values(up)[5]));
  auto [down, down_pos] = sort(x, 0, true);
  EXPECT_EQ(ints(down_pos), (std::vector<int64_t>{2, 0, 3, 1, 4, 5}));
  EXPECT_EQ(ints(argsort(x, 0, true)), ints(down_pos));
  auto [top, top_pos] = topk(x, 3);
  EXPECT_EQ(ints(top_pos), (std::vector<int64_t>{2, 0, 3}));
  auto [low, low_pos] = topk(x, 2, 0, false);
  EXPECT_EQ(ints(low_pos), (std::vector<int64_t>{5, 1}));
  EXPECT_TRUE(tensor_near(low, {-INFINITY, 1}));
}

TEST(Sort, RowsAlongEitherDimMatchAStableSort) {
  Tensor x = testing::rnd({5, 37}, DType::Float64, 3);
  x = round(mul(x, scalar_tensor(4.0, {DType::Float64})));  // few distinct values: many ties
  for (int64_t dim : {0, 1}) {
    for (bool desc : {false, true}) {
      auto [v, pos] = sort(x, dim, desc);
      Tensor rows = x.transpose(dim, 1).contiguous();
      Tensor got = pos.transpose(dim, 1).contiguous();
      const int64_t n = rows.size(1);
      std::vector<double> xv = testing::values(rows);
      std::vector<int64_t> gv = ints(got);
      for (int64_t r = 0; r < rows.size(0); ++r) {
        std::vector<int64_t> want(static_cast<size_t>(n));
        std::iota(want.begin(), want.end(), int64_t{0});
        const double* row = xv.data() + r * n;
        std::stable_sort(want.begin(), want.end(),
                         [&](int64_t i, int64_t j) { return desc ? row[i] > row[j] : row[i] < row[j]; });
        EXPECT_EQ(std::vector<int64_t>(gv.begin() + r * n, gv.begin() + (r + 1) * n), want)
            << "dim " << dim << " descending " << desc << " row " << r;
      }
      EXPECT_TRUE(tensor_near(v, testing::values(gather(x, dim, pos))));
      for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{4}, x.size(dim)}) {
        auto [tv, tp] = topk(x, k, dim, desc);
        EXPECT_EQ(ints(tp), ints(narrow(pos, dim, 0, k).contiguous())) << "k " << k;
      }
    }
  }
}

TEST(Sort, EveryCpuDtype) {
  for (DType dt :
       {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16, DType::Int64, DType::Int32, DType::UInt8}) {
    Tensor x = tensor(std::vector<double>{5, 0, 7, 3, 3}).to(dt);
    auto [v, pos] = sort(x, 0, true);
    EXPECT_EQ(v.dtype(), dt);
    EXPECT_EQ(ints(pos), (std::vector<int64_t>{2, 0, 3, 4, 1})) << dt;
    EXPECT_TRUE(tensor_near(v.to(DType::Float64), {7, 5, 3, 3, 0})) << dt;
  }
}

TEST(Sort, GradientsGoBackToWhereTheValuesCameFrom) {
  auto check = [](const std::function<Tensor(const Tensor&)>& f) {
    Tensor x = testing::rnd({3, 6}, DType::Float64, 9).requires_grad_(true);  // distinct values
    auto r = autograd::gradcheck([&](const std::vector<Tensor>& in) { return sum(mul(f(in[0]), f(in[0]))); }, {x},
                                 {.eps = 1e-6, .atol = 1e-6, .rtol = 1e-4});
    EXPECT_TRUE(r.ok) << r.message;
  };
  check([](const Tensor& t) { return std::get<0>(sort(t.t(), 0)); });
  check([](const Tensor& t) { return std::get<0>(topk(t, 2, 1)) * tensor(std::vector<double>{1, 3}); });
  check([](const Tensor& t) { return std::get<0>(topk(t, 3, 0, false)); });
}

TEST(Sort, Errors) {
  Tensor x = tensor(std::vector<double>{1, 2, 3});
  EXPECT_WEFT_ERROR(topk(x, 4), "topk: k = 4 is out of range for dimension 0 of size 3");
  EXPECT_WEFT_ERROR(topk(x, -1), "out of range");
  EXPECT_WEFT_ERROR(sort(x, 1), "sort");
  EXPECT_WEFT_ERROR(sort(tensor(std::vector<double>{1, 0}).to(DType::Bool)), "sort: not supported for dtype bool");
  auto [v, pos] = sort(scalar_tensor(2.0));
  EXPECT_EQ(v.dim(), 0);
  EXPECT_EQ(pos.item<int64_t>(), 0);
}

}  // namespace
}  // namespace weft
