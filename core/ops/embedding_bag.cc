// embedding_bag: sums, means or maxima of bags of embedding rows (contract in
// core/nn_ops.h), PyTorch's F.embedding_bag. Composed of differentiable ops:
// one embedding lookup of every entry, then index_add into the bags (sum,
// mean), or the entries laid out (bags, longest bag, dim) and max over the
// middle dim, whose gradient goes to each maximum alone, as PyTorch's.
// Entries equal to padding_idx belong to no bag; an empty bag gives zeros.
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "core/nn_ops.h"
#include "core/ops.h"

namespace weft {
namespace {

std::vector<int64_t> host_int64(const Tensor& t) {
  Tensor c = t.detach().cpu().contiguous();
  const int64_t* p = c.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

}  // namespace

Tensor embedding_bag(const Tensor& input, const Tensor& weight, const EmbeddingBagOptions& opts) {
  const char* op = "embedding_bag";
  WEFT_CHECK(input.defined() && weight.defined(), op, ": input and weight must be defined");
  WEFT_CHECK(input.dtype() == DType::Int64, op, ": input must be int64, got dtype ", input.dtype());
  WEFT_CHECK(weight.dim() == 2, op, ": weight must be 2-D (num_embeddings, embedding_dim), got shape ",
             shape_str(weight.sizes()));
  const int64_t V = weight.size(0), D = weight.size(1);
  // bag boundaries: bag b is entries [starts[b], starts[b + 1])
  std::vector<int64_t> starts;
  if (input.dim() == 2) {
    WEFT_CHECK(!opts.offsets.defined(), op, ": offsets must be undefined for a 2-D input (each row a bag), got shape ",
               shape_str(opts.offsets.sizes()));
    for (int64_t b = 0; b <= input.size(0); ++b) starts.push_back(b * input.size(1));
  } else {
    WEFT_CHECK(input.dim() == 1, op, ": input must be 1-D (with offsets) or 2-D (bags, length), got shape ",
               shape_str(input.sizes()));
    WEFT_CHECK(opts.offsets.defined() && opts.offsets.dim() == 1 && opts.offsets.dtype() == DType::Int64, op,
               ": a 1-D input needs 1-D int64 offsets, got ",
               opts.offsets.defined() ? "shape " + shape_str(opts.offsets.sizes()) + ", dtype " +
                                            std::string(dtype_name(opts.offsets.dtype()))
                                      : std::string("none"));
    starts = host_int64(opts.offsets);
    WEFT_CHECK(!starts.empty() && starts[0] == 0, op, ": offsets[0] must be 0, got ",
               starts.empty() ? std::string("no offsets") : std::to_string(starts[0]));
    if (!opts.include_last_offset) starts.push_back(input.size(0));
    WEFT_CHECK(starts.size() >= 2, op, ": include_last_offset needs at least 2 offsets");
    for (size_t b = 1; b < starts.size(); ++b)
      WEFT_CHECK(starts[b] >= starts[b - 1] && starts[b] <= input.size(0), op, ": offsets must not decrease and ",
                 "stay within the ", input.size(0), " entries, but bag ", b - 1, " spans [", starts[b - 1], ", ",
                 starts[b], ")");
  }
  const int64_t B = static_cast<int64_t>(starts.size()) - 1, n = starts.back();
  const Tensor idx = input.reshape({-1}).narrow(0, 0, n);
  Tensor psw = opts.per_sample_weights;
  if (psw.defined()) {
    WEFT_CHECK(opts.mode == EmbeddingBagMode::Sum, op, ": per_sample_weights is only supported for mode Sum");
    WEFT_CHECK(psw.sizes() == input.sizes(), op, ": per_sample_weights of shape ", shape_str(psw.sizes()),
               " does not match the input's ", shape_str(input.sizes()));
    WEFT_CHECK(psw.dtype() == weight.dtype(), op, ": per_sample_weights has dtype ", psw.dtype(),
               " but the weight has dtype ", weight.dtype());
    psw = psw.reshape({-1}).narrow(0, 0, n);
  }
  std::optional<int64_t> pad = opts.padding_idx;
  if (pad) {
    WEFT_CHECK(*pad < V && *pad >= -V, op, ": padding_idx ", *pad, " must be within num_embeddings ", V);
    if (*pad < 0) *pad += V;
  }
  // every entry's row (n, D), padding rows with no gradient
  Tensor rows = embedding(idx, weight, pad, opts.max_norm, opts.norm_type, opts.scale_grad_by_freq);
  // which entries count, and which bag each is in
  const std::vector<int64_t> ix = host_int64(idx);
  std::vector<int64_t> bag_of(n), count(B, 0), kept;  // kept: the entries that count, bag by bag
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = starts[b]; i < starts[b + 1]; ++i) {
      bag_of[i] = b;
      if (pad && ix[i] == *pad) continue;
      ++count[b];
      kept.push_back(i);
    }
  const TensorOptions wopts = weight.options();
  auto on_device = [&](const std::vector<int64_t>& v) {
    return tensor(v, {static_cast<int64_t>(v.size())}).to(weight.device());
  };
  if (opts.mode != EmbeddingBagMode::Max) {
    Tensor k = on_device(kept), src = index_select(rows, 0, k);  // (kept, D)
    if (psw.defined()) src = src * index_select(psw, 0, k).unsqueeze(1);
    std::vector<int64_t> kept_bag;
    for (int64_t i : kept) kept_bag.push_back(bag_of[i]);
    Tensor out = index_add(zeros({B, D}, wopts), 0, on_device(kept_bag), src);
    if (opts.mode == EmbeddingBagMode::Sum) return out;
    std::vector<double> inv(B);
    for (int64_t b = 0; b < B; ++b) inv[b] = 1.0 / static_cast<double>(std::max<int64_t>(count[b], 1));
    return out * tensor(inv, {B, 1}).to(wopts);
  }
  // Max: the counting entries laid out (B, longest, D), empty places at -inf
  const int64_t longest = B == 0 ? 0 : *std::max_element(count.begin(), count.end());
  if (longest == 0) return zeros({B, D}, wopts);
  std::vector<int64_t> place(B * longest, static_cast<int64_t>(kept.size()));  // kept.size(): the -inf row
  std::vector<int64_t> filled(B, 0);
  for (size_t j = 0; j < kept.size(); ++j) {
    const int64_t b = bag_of[kept[j]];
    place[b * longest + filled[b]++] = static_cast<int64_t>(j);
  }
  Tensor ext =
      cat({index_select(rows, 0, on_device(kept)), full({1, D}, -std::numeric_limits<double>::infinity(), wopts)},
          0);                                                                  // (kept + 1, D)
  Tensor laid = index_select(ext, 0, on_device(place)).view({B, longest, D});  // (B, longest, D)
  Tensor best = std::get<0>(max(laid, 1));                                     // (B, D)
  std::vector<double> nonempty(B);
  for (int64_t b = 0; b < B; ++b) nonempty[b] = count[b] > 0 ? 1.0 : 0.0;
  Tensor has = tensor(nonempty, {B, 1}).to(weight.device());
  return where(gt(has, zeros_like(has)), best, zeros_like(best));  // an empty bag's -inf becomes 0
}

}  // namespace weft
