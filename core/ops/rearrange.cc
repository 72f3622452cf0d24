// Rearranging and padding: flip, roll, repeat, tile, pad (constant), unbind;
// and cumsum (Note [cumsum by blocks]).
//
// Contract: each is composed of other ops (index_select, narrow, cat, expand,
// reshape, select, matmul, and full + copy_ into a view of it), so it runs on
// every device and dtype those run on, and its gradient is theirs (pad's
// through CopySlices: Note [views after an in-place op]). The arguments are
// PyTorch's: dims may be negative; roll without dims rolls the flattened
// tensor; repeat takes a count per dim, extra counts adding leading dims, and
// tile pads short counts with leading 1s; pad lists (before, after) pairs from
// the last dim backwards, and a negative amount crops.
#include "core/ops.h"

namespace weft {

Tensor flip(const Tensor& a, const std::vector<int64_t>& dims) {
  WEFT_CHECK(a.defined(), "flip: undefined tensor");
  Tensor out = a;
  for (int64_t d : wrap_dims("flip", dims, a.dim(), /*empty_is_all=*/false)) {
    const int64_t n = a.size(d);
    if (n <= 1) continue;
    out = index_select(out, d, arange(n - 1, -1, -1, {DType::Int64, a.device()}));
  }
  return out.impl() == a.impl() ? a.clone() : out;  // always a new tensor, as in PyTorch
}

Tensor roll(const Tensor& a, const std::vector<int64_t>& shifts, const std::vector<int64_t>& dims) {
  WEFT_CHECK(a.defined(), "roll: undefined tensor");
  if (dims.empty()) {
    WEFT_CHECK(shifts.size() == 1, "roll: without dims, expected one shift (the flattened tensor's), got ",
               shifts.size());
    return reshape(roll(reshape(a, {-1}), shifts, {0}), a.sizes());
  }
  WEFT_CHECK(shifts.size() == dims.size(), "roll: got ", shifts.size(), " shifts for ", dims.size(),
             " dims; give one shift per dim");
  Tensor out = a;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim("roll", dims[i], a.dim());
    const int64_t n = a.size(d);
    if (n == 0) continue;
    const int64_t k = ((shifts[i] % n) + n) % n;  // out[j] = in[(j - k) mod n]
    if (k == 0) continue;
    out = cat({narrow(out, d, n - k, k), narrow(out, d, 0, n - k)}, d);
  }
  return out.impl() == a.impl() ? a.clone() : out;
}

Tensor repeat(const Tensor& a, const std::vector<int64_t>& repeats) {
  WEFT_CHECK(a.defined(), "repeat: undefined tensor");
  const int64_t n = static_cast<int64_t>(repeats.size());
  WEFT_CHECK(n >= a.dim(), "repeat: got ", n, " repeat counts for a tensor of ", a.dim(), " dims (shape ",
             shape_str(a.sizes()), "); give at least one per dim");
  // a as [1, s0, 1, s1, ...] (leading dims of size 1 for the extra counts),
  // expanded to [r0, s0, r1, s1, ...] and merged pairwise to [r0 s0, r1 s1, ...]
  Shape pairs, expanded, result;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = repeats[static_cast<size_t>(i)];
    WEFT_CHECK(r >= 0, "repeat: repeat count ", r, " at position ", i, " is negative");
    const int64_t s = i < n - a.dim() ? 1 : a.size(i - (n - a.dim()));
    int64_t size = 0;
    WEFT_CHECK(!__builtin_mul_overflow(r, s, &size), "repeat: ", r, " copies of a dim of size ", s,
               " have more elements than an int64 counts");
    pairs.insert(pairs.end(), {1, s});
    expanded.insert(expanded.end(), {r, s});
    result.push_back(size);
  }
  numel_of(result);  // errors where the result has more elements than an int64 counts
  Tensor out = reshape(expand(reshape(a, pairs), expanded), result);
  return out.impl()->storage() == a.impl()->storage() ? out.clone() : out;  // always a new tensor
}

Tensor tile(const Tensor& a, const std::vector<int64_t>& reps) {
  WEFT_CHECK(a.defined(), "tile: undefined tensor");
  std::vector<int64_t> counts(static_cast<size_t>(std::max<int64_t>(a.dim() - static_cast<int64_t>(reps.size()), 0)),
                              1);
  counts.insert(counts.end(), reps.begin(), reps.end());
  return repeat(a, counts);
}

namespace {

// The number of dims a (before, after) list pads, from the last dim backwards.
int64_t padded_dims(const Tensor& a, const std::vector<int64_t>& pads) {
  WEFT_CHECK(a.defined(), "pad: undefined tensor");
  WEFT_CHECK(pads.size() % 2 == 0, "pad: the padding list must have an even length ((before, after) per dim), got ",
             pads.size());
  const int64_t padded = static_cast<int64_t>(pads.size()) / 2;
  WEFT_CHECK(padded <= a.dim(), "pad: ", pads.size(), " amounts pad ", padded, " dims, but the tensor has ", a.dim(),
             " (shape ", shape_str(a.sizes()), ")");
  return padded;
}

}  // namespace

Tensor pad(const Tensor& a, const std::vector<int64_t>& pads, const Scalar& value) {
  const int64_t padded = padded_dims(a, pads);
  Shape out_shape = a.sizes();
  Tensor src = a;                                  // a, cropped where an amount is negative
  std::vector<std::pair<int64_t, int64_t>> place;  // (dim, offset) of src in the result
  for (int64_t k = 0; k < padded; ++k) {
    const int64_t d = a.dim() - 1 - k;
    const int64_t before = pads[static_cast<size_t>(2 * k)], after = pads[static_cast<size_t>(2 * k + 1)];
    const int64_t size = a.size(d) + before + after;
    WEFT_CHECK(size >= 0, "pad: dim ", d, " of size ", a.size(d), " padded by (", before, ", ", after,
               ") would have negative size ", size);
    out_shape[static_cast<size_t>(d)] = size;
    const int64_t crop_before = std::min<int64_t>(before, 0), crop_after = std::min<int64_t>(after, 0);
    const int64_t kept = std::max<int64_t>(src.size(d) + crop_before + crop_after, 0);
    src = narrow(src, d, std::min(-crop_before, src.size(d)), kept);
    place.emplace_back(d, std::max<int64_t>(before, 0));
  }
  numel_of(out_shape);  // errors if the result's size overflows
  Tensor out = full(out_shape, value, a.options());
  Tensor dst = out;
  for (auto [d, offset] : place) dst = narrow(dst, d, offset, src.size(d));
  dst.copy_(src);
  return out;
}

Tensor pad(const Tensor& a, const std::vector<int64_t>& pads, PadMode mode, const Scalar& value) {
  if (mode == PadMode::Constant) return pad(a, pads, value);
  const char* name = mode == PadMode::Reflect ? "reflect" : mode == PadMode::Replicate ? "replicate" : "circular";
  const int64_t padded = padded_dims(a, pads);
  Tensor out = a;
  for (int64_t k = 0; k < padded; ++k) {
    const int64_t d = a.dim() - 1 - k, n = a.size(d);
    const int64_t before = pads[static_cast<size_t>(2 * k)], after = pads[static_cast<size_t>(2 * k + 1)];
    if (before == 0 && after == 0) continue;
    WEFT_CHECK(before >= 0 && after >= 0, "pad: mode ", name, " takes non-negative amounts, got (", before, ", ", after,
               ") for dim ", d);
    // reflect mirrors without repeating the edge, so it needs amounts below the size
    const int64_t limit = mode == PadMode::Reflect ? n - 1 : mode == PadMode::Circular ? n : INT64_MAX;
    WEFT_CHECK(n > 0 && before <= limit && after <= limit, "pad: mode ", name, " pads dim ", d, " of size ", n, " by (",
               before, ", ", after, "); it needs amounts ",
               mode == PadMode::Reflect ? "smaller than the size" : "no larger than the size",
               mode == PadMode::Replicate ? " and a non-empty dim" : "");
    // the source position of each position of the padded dim
    std::vector<int64_t> src(static_cast<size_t>(n + before + after));
    for (int64_t o = -before; o < n + after; ++o) {
      int64_t i = o;
      if (mode == PadMode::Reflect) i = o < 0 ? -o : o >= n ? 2 * (n - 1) - o : o;
      else if (mode == PadMode::Replicate) i = std::clamp<int64_t>(o, 0, n - 1);
      else i = ((o % n) + n) % n;
      src[static_cast<size_t>(o + before)] = i;
    }
    out = index_select(out, d, tensor<int64_t>(src, {static_cast<int64_t>(src.size())}).to(a.device()));
  }
  return out;
}

std::vector<Tensor> unbind(const Tensor& a, int64_t dim) {
  WEFT_CHECK(a.defined(), "unbind: undefined tensor");
  WEFT_CHECK(a.dim() > 0, "unbind: a 0-dim tensor has no dim to unbind");
  const int64_t d = wrap_dim("unbind", dim, a.dim());
  std::vector<Tensor> out;
  out.reserve(static_cast<size_t>(a.size(d)));
  for (int64_t i = 0; i < a.size(d); ++i) out.push_back(select(a, d, i));
  return out;
}

// Note [cumsum by blocks]: the running sum along a dim as GEMMs, so that it
// runs on every device with a matmul and differentiates through it. The dim
// is cut into blocks of kCumsumBlock: each block's running sums are the block
// times U (ones on and above the diagonal), and every block is then offset by
// the running sum of the totals of the blocks before it (the same again, one
// level up). kCumsumBlock multiply-adds per element; the sums are summed
// pairwise by block, not one long chain.
namespace {
constexpr int64_t kCumsumBlock = 64;

Tensor cumsum_last(const Tensor& x) {  // x: [..., n]
  const int64_t n = x.size(-1);
  if (n <= kCumsumBlock) return matmul(x, triu(ones({n, n}, x.options())));
  const int64_t m = (n + kCumsumBlock - 1) / kCumsumBlock;
  Tensor padded = pad(x, {0, m * kCumsumBlock - n});  // [..., m b]
  Shape blocked = padded.sizes();
  blocked.back() = m;
  blocked.push_back(kCumsumBlock);
  Tensor within =
      matmul(padded.reshape(blocked), triu(ones({kCumsumBlock, kCumsumBlock}, x.options())));  // [..., m, b]
  Tensor totals = within.select(-1, kCumsumBlock - 1);                                         // [..., m]
  Tensor before = sub(cumsum_last(totals), totals);                                            // [..., m], exclusive
  return add(within, before.unsqueeze(-1)).reshape(padded.sizes()).narrow(-1, 0, n);
}
}  // namespace

Tensor cumsum(const Tensor& a, int64_t dim) {
  WEFT_CHECK(a.defined(), "cumsum: undefined tensor");
  WEFT_CHECK(is_floating(a.dtype()), "cumsum: supports floating dtypes, got ", a.dtype());
  if (a.dim() == 0) {
    wrap_dim("cumsum", dim, 1);  // 0 or -1, as for a 1-element vector
    return a.clone();
  }
  const int64_t d = wrap_dim("cumsum", dim, a.dim());
  if (a.size(d) == 0) return a.clone();
  return cumsum_last(a.transpose(d, -1)).transpose(d, -1).contiguous();
}

}  // namespace weft
