// Elementwise reductions over ranks' buffers for the in-process group
// (contract in reduce.h).
#include "parallel/comm/inproc/reduce.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/dtype.h"
#include "core/half.h"

namespace weft::parallel::detail {

namespace {

template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// out[i] = op over k of in[k][i], for n elements of type T. Floating types in
// float64 (NaN propagates through max/min), integers exactly (sum wraps), bool
// as or (sum, max) / and (min).
template <typename T>
void reduce_typed(ReduceOp op, const std::vector<const void*>& in, void* out, int64_t n) {
  T* o = static_cast<T*>(out);
  const size_t k = in.size();
  auto at = [&](size_t q, int64_t i) { return static_cast<const T*>(in[q])[i]; };
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, bool>) {
      bool acc = at(0, i);
      for (size_t q = 1; q < k; ++q) acc = op == ReduceOp::Min ? (acc && at(q, i)) : (acc || at(q, i));
      o[i] = acc;
    } else if constexpr (kIsFloat<T>) {
      auto load = [](T v) { return static_cast<double>(static_cast<opmath_t<T>>(v)); };
      double acc = load(at(0, i));
      for (size_t q = 1; q < k; ++q) {
        double x = load(at(q, i));
        if (op == ReduceOp::Sum || op == ReduceOp::Avg) acc += x;
        else if (op == ReduceOp::Max) acc = (std::isnan(acc) || x <= acc) ? acc : x;
        else acc = (std::isnan(acc) || x >= acc) ? acc : x;
      }
      if (op == ReduceOp::Avg) acc /= static_cast<double>(k);
      o[i] = T(static_cast<opmath_t<T>>(acc));
    } else {
      using U = std::make_unsigned_t<T>;
      T acc = at(0, i);
      for (size_t q = 1; q < k; ++q) {
        T x = at(q, i);
        if (op == ReduceOp::Sum) acc = static_cast<T>(static_cast<U>(static_cast<U>(acc) + static_cast<U>(x)));
        else if (op == ReduceOp::Max) acc = std::max(acc, x);
        else acc = std::min(acc, x);
      }
      o[i] = acc;
    }
  }
}

}  // namespace

std::vector<uint8_t> reduce_tensors(const char* what, ReduceOp op, const std::vector<const Tensor*>& in) {
  const Tensor& t0 = *in[0];
  std::vector<uint8_t> buf(t0.nbytes());
  std::vector<const void*> ptrs;
  for (const Tensor* t : in) ptrs.push_back(t->raw_data());
  dispatch<kAllTypes>(t0.dtype(), what, [&](auto tag) {
    using T = typename decltype(tag)::type;
    reduce_typed<T>(op, ptrs, buf.data(), t0.numel());
  });
  return buf;
}

}  // namespace weft::parallel::detail
