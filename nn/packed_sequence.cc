// PackedSequence and its helpers (contract in nn/packed_sequence.h), composed
// of differentiable ops: packing is a cat of each step's leading rows,
// padding a stack of each step's rows and a fill.
#include "nn/packed_sequence.h"

#include <algorithm>
#include <numeric>
#include <string>

namespace weft::nn::utils::rnn {
namespace {

std::vector<int64_t> int64_values(const char* op, const char* name, const Tensor& t) {
  WEFT_CHECK(t.defined(), op, ": ", name, " is undefined");
  WEFT_CHECK(t.dim() == 1, op, ": ", name, " must be 1-D, got shape ", shape_str(t.sizes()));
  WEFT_CHECK(!is_floating(t.dtype()) && t.dtype() != DType::Bool, op, ": ", name, " must hold integers, got dtype ",
             t.dtype());
  Tensor c = t.cpu().to(DType::Int64).contiguous();
  const int64_t* p = c.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

Tensor int64_tensor(const std::vector<int64_t>& v) { return tensor(v, {static_cast<int64_t>(v.size())}); }

// (T, N, *) with rows beyond each step's count removed, steps concatenated.
Tensor pack_steps(const Tensor& x, const std::vector<int64_t>& batch_sizes) {
  std::vector<Tensor> steps;
  steps.reserve(batch_sizes.size());
  for (size_t t = 0; t < batch_sizes.size(); ++t)
    steps.push_back(narrow(select(x, 0, static_cast<int64_t>(t)), 0, 0, batch_sizes[t]));
  return cat(steps, 0);
}

}  // namespace

std::vector<int64_t> PackedSequence::sizes() const {
  return int64_values("PackedSequence", "batch_sizes", batch_sizes);
}

PackedSequence pack_padded_sequence(const Tensor& input, const std::vector<int64_t>& lengths, bool batch_first,
                                    bool enforce_sorted) {
  const char* op = "pack_padded_sequence";
  WEFT_CHECK(input.defined() && input.dim() >= 2, op, ": expected an input of at least 2 dims ",
             batch_first ? "(N, T, *)" : "(T, N, *)", ", got ",
             input.defined() ? shape_str(input.sizes()) : std::string("an undefined tensor"));
  Tensor x = batch_first ? input.transpose(0, 1) : input;  // (T, N, *)
  const int64_t T = x.size(0), N = x.size(1);
  WEFT_CHECK(static_cast<int64_t>(lengths.size()) == N, op, ": ", lengths.size(), " lengths for a batch of ", N,
             " (input shape ", shape_str(input.sizes()), ", batch_first=", batch_first ? "true" : "false", ")");
  WEFT_CHECK(N > 0, op, ": the batch is empty (input shape ", shape_str(input.sizes()), ")");
  for (size_t i = 0; i < lengths.size(); ++i) {
    WEFT_CHECK(lengths[i] > 0, op, ": every length must be positive, but lengths[", i, "] = ", lengths[i]);
    WEFT_CHECK(lengths[i] <= T, op, ": lengths[", i, "] = ", lengths[i], " exceeds the ", T,
               " steps of the input (shape ", shape_str(input.sizes()), ")");
  }
  PackedSequence out;
  std::vector<int64_t> order(N);
  std::iota(order.begin(), order.end(), 0);
  if (enforce_sorted) {
    for (int64_t i = 1; i < N; ++i)
      WEFT_CHECK(lengths[i] <= lengths[i - 1], op,
                 ": lengths must not increase when enforce_sorted is true, but "
                 "lengths[",
                 i - 1, "] = ", lengths[i - 1], " < lengths[", i, "] = ", lengths[i],
                 "; pass enforce_sorted=false to have the batch sorted");
  } else {
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return lengths[a] > lengths[b]; });
    std::vector<int64_t> inverse(N);
    for (int64_t i = 0; i < N; ++i) inverse[order[i]] = i;
    out.sorted_indices = int64_tensor(order);
    out.unsorted_indices = int64_tensor(inverse);
    x = index_select(x, 1, out.sorted_indices.to(x.device()));
  }
  const int64_t steps = lengths[order[0]];
  std::vector<int64_t> batch_sizes(steps, 0);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t t = 0; t < lengths[order[i]]; ++t) ++batch_sizes[t];
  out.data = pack_steps(x, batch_sizes);
  out.batch_sizes = int64_tensor(batch_sizes);
  return out;
}

PackedSequence pack_padded_sequence(const Tensor& input, const Tensor& lengths, bool batch_first, bool enforce_sorted) {
  return pack_padded_sequence(input, int64_values("pack_padded_sequence", "lengths", lengths), batch_first,
                              enforce_sorted);
}

std::tuple<Tensor, Tensor> pad_packed_sequence(const PackedSequence& sequence, bool batch_first, double padding_value,
                                               std::optional<int64_t> total_length) {
  const char* op = "pad_packed_sequence";
  const std::vector<int64_t> bs = int64_values(op, "batch_sizes", sequence.batch_sizes);
  WEFT_CHECK(!bs.empty() && bs[0] > 0, op, ": batch_sizes is empty");
  const int64_t N = bs[0], T = static_cast<int64_t>(bs.size());
  for (int64_t t = 1; t < T; ++t)
    WEFT_CHECK(bs[t] > 0 && bs[t] <= bs[t - 1], op, ": batch_sizes must be positive and not increase, got ",
               shape_str(Shape(bs.begin(), bs.end())));
  const Tensor& data = sequence.data;
  const int64_t rows = std::accumulate(bs.begin(), bs.end(), int64_t{0});
  WEFT_CHECK(data.defined() && data.dim() >= 1 && data.size(0) == rows, op, ": data of shape ",
             data.defined() ? shape_str(data.sizes()) : std::string("(undefined)"), " does not hold the ", rows,
             " rows that batch_sizes counts");
  const int64_t steps = total_length.value_or(T);
  WEFT_CHECK(steps >= T, op, ": total_length = ", steps, " is shorter than the longest sequence (", T, " steps)");
  Shape row = data.sizes();
  row.erase(row.begin());      // *
  std::vector<Tensor> padded;  // (N, *) per step
  padded.reserve(steps);
  const std::vector<Tensor> parts = split(data, bs, 0);
  for (int64_t t = 0; t < steps; ++t) {
    const int64_t b = t < T ? bs[t] : 0;
    Shape fill = row;
    fill.insert(fill.begin(), N - b);
    Tensor pad = full(fill, padding_value, data.options());
    padded.push_back(b == N ? parts[t] : b == 0 ? pad : cat({parts[t], pad}, 0));
  }
  Tensor out = stack(padded, 0);  // (steps, N, *), sorted order
  std::vector<int64_t> lengths(N, 0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < bs[t]; ++i) ++lengths[i];
  Tensor len = int64_tensor(lengths);
  if (sequence.unsorted_indices.defined()) {
    out = index_select(out, 1, sequence.unsorted_indices.to(out.device()));
    len = index_select(len, 0, sequence.unsorted_indices.cpu());
  }
  if (batch_first) out = out.transpose(0, 1);
  return {out, len};
}

Tensor pad_sequence(const std::vector<Tensor>& sequences, bool batch_first, double padding_value) {
  const char* op = "pad_sequence";
  WEFT_CHECK(!sequences.empty(), op, ": no sequences given");
  const Tensor& first = sequences[0];
  int64_t longest = 0;
  for (size_t i = 0; i < sequences.size(); ++i) {
    const Tensor& s = sequences[i];
    WEFT_CHECK(s.defined() && s.dim() >= 1, op, ": sequence ", i, " must have at least 1 dim (L, *)");
    WEFT_CHECK(s.dim() == first.dim() && std::equal(s.sizes().begin() + 1, s.sizes().end(), first.sizes().begin() + 1),
               op, ": sequence ", i, " has shape ", shape_str(s.sizes()), " but sequence 0 has shape ",
               shape_str(first.sizes()), "; all must match after the first dim");
    WEFT_CHECK(s.dtype() == first.dtype() && s.device() == first.device(), op, ": sequence ", i,
               " differs from sequence 0 in dtype or device");
    longest = std::max(longest, s.size(0));
  }
  std::vector<Tensor> padded;
  padded.reserve(sequences.size());
  for (const Tensor& s : sequences) {
    if (s.size(0) == longest) {
      padded.push_back(s);
      continue;
    }
    Shape fill = s.sizes();
    fill[0] = longest - s.size(0);
    padded.push_back(cat({s, full(fill, padding_value, s.options())}, 0));
  }
  return stack(padded, batch_first ? 0 : 1);
}

PackedSequence pack_sequence(const std::vector<Tensor>& sequences, bool enforce_sorted) {
  std::vector<int64_t> lengths;
  for (const Tensor& s : sequences) lengths.push_back(s.defined() && s.dim() >= 1 ? s.size(0) : 0);
  return pack_padded_sequence(pad_sequence(sequences), lengths, false, enforce_sorted);
}

}  // namespace weft::nn::utils::rnn
