// Variable-length batches for the recurrent layers, as torch.nn.utils.rnn:
// PackedSequence and pack_padded_sequence, pad_packed_sequence, pad_sequence
// and pack_sequence.
//
// Contract:
// - A PackedSequence holds the steps of N sequences of lengths L_0 >= L_1 >=
//   ... (sorted, longest first) time-major: `data` (sum L_i, *) is step 0 of
//   every sequence, then step 1 of those at least 2 long, and so on;
//   `batch_sizes` (int64, CPU, T = L_0 entries) counts the sequences at each
//   step. `sorted_indices` maps the sorted order to the caller's batch (row i
//   of the sorted batch is the caller's row sorted_indices[i]) and
//   `unsorted_indices` is its inverse; both are undefined when the batch came
//   sorted (enforce_sorted).
// - pack_padded_sequence(input, lengths, batch_first, enforce_sorted): input
//   (T, N, *), or (N, T, *) with batch_first; lengths (N) of int64, each in
//   [1, T]. With enforce_sorted they must not increase; otherwise the batch
//   is sorted (stably, longest first) and the indices kept. Differentiable in
//   `input` (the padding gets no gradient).
// - pad_packed_sequence(packed, batch_first, padding_value, total_length):
//   back to (T, N, *) (or (N, T, *)) in the caller's order, with
//   T = total_length when given (at least the longest length), and the
//   lengths (N, int64). pad_sequence(sequences, batch_first, padding_value)
//   stacks (L_i, *) tensors, padded at the end; pack_sequence packs them.
// - RNN, LSTM and GRU take a PackedSequence (nn/rnn.h): each sequence runs
//   its own number of steps, the output is packed the same way, and h_n (c_n)
//   is each sequence's state after its last step, in the caller's order.
// - Errors name the function and what was wrong (shapes, lengths, order).
#pragma once

#include <optional>
#include <tuple>
#include <vector>

#include "core/ops.h"

namespace weft::nn::utils::rnn {

struct PackedSequence {
  Tensor data;              // (sum of lengths, *)
  Tensor batch_sizes;       // (T) int64 on the CPU
  Tensor sorted_indices;    // (N) int64, or undefined
  Tensor unsorted_indices;  // (N) int64, or undefined
  // batch_sizes as a vector.
  std::vector<int64_t> sizes() const;
};

PackedSequence pack_padded_sequence(const Tensor& input, const Tensor& lengths, bool batch_first = false,
                                    bool enforce_sorted = true);
PackedSequence pack_padded_sequence(const Tensor& input, const std::vector<int64_t>& lengths, bool batch_first = false,
                                    bool enforce_sorted = true);
// {padded, lengths}
std::tuple<Tensor, Tensor> pad_packed_sequence(const PackedSequence& sequence, bool batch_first = false,
                                               double padding_value = 0.0,
                                               std::optional<int64_t> total_length = std::nullopt);
Tensor pad_sequence(const std::vector<Tensor>& sequences, bool batch_first = false, double padding_value = 0.0);
PackedSequence pack_sequence(const std::vector<Tensor>& sequences, bool enforce_sorted = true);

}  // namespace weft::nn::utils::rnn
