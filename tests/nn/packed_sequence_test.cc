// Packed sequences (nn/packed_sequence.h): the pack / pad helpers against
// hand-worked layouts, and RNN, LSTM and GRU on a packed batch against each
// sequence run alone (outputs, final states and parameter gradients).
#include "nn/packed_sequence.h"

#include <vector>

#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "core/rng.h"
#include "nn/rnn.h"
#include "tests/testing.h"

namespace weft::nn {
namespace {

using testing::tensor_near;
using utils::rnn::pack_padded_sequence;
using utils::rnn::pack_sequence;
using utils::rnn::pad_packed_sequence;
using utils::rnn::pad_sequence;

std::vector<int64_t> ints(const Tensor& t) {
  std::vector<int64_t> out;
  for (double v : testing::values(t.to(DType::Float64))) out.push_back(static_cast<int64_t>(v));
  return out;
}

// (T = 3, N = 3, 1): sequence i holds 10 i + t at step t, padding -1.
Tensor padded_batch() { return tensor(std::vector<double>{0, 10, 20, 1, 11, -1, 2, -1, -1}, {3, 3, 1}); }

TEST(PackedSequence, PackAndPadSortedBatch) {
  auto p = pack_padded_sequence(padded_batch(), std::vector<int64_t>{3, 2, 1});
  EXPECT_TRUE(tensor_near(p.data.reshape({-1}), {0, 10, 20, 1, 11, 2}, 0.0));
  EXPECT_EQ(p.sizes(), (std::vector<int64_t>{3, 2, 1}));
  EXPECT_FALSE(p.sorted_indices.defined());
  auto [padded, lengths] = pad_packed_sequence(p, false, -1.0);
  EXPECT_TRUE(testing::tensors_near(padded, padded_batch(), 0.0));
  EXPECT_EQ(ints(lengths), (std::vector<int64_t>{3, 2, 1}));
  // batch_first both ways, and a longer total length
  auto q = pack_padded_sequence(padded_batch().transpose(0, 1), std::vector<int64_t>{3, 2, 1}, true);
  EXPECT_TRUE(testing::tensors_near(q.data, p.data, 0.0));
  auto [bf, unused] = pad_packed_sequence(q, true, 7.0, 4);
  EXPECT_EQ(bf.sizes(), (Shape{3, 4, 1}));
  EXPECT_TRUE(tensor_near(bf.reshape({-1}), {0, 1, 2, 7, 10, 11, 7, 7, 20, 7, 7, 7}, 0.0));
}

TEST(PackedSequence, UnsortedBatchKeepsTheCallersOrder) {
  // lengths 1, 3, 2: sorted order 1, 2, 0
  Tensor x = tensor(std::vector<double>{0, 10, 20, -1, 11, 21, -1, 12, -1}, {3, 3, 1});
  auto p = pack_padded_sequence(x, tensor(std::vector<int64_t>{1, 3, 2}, {3}), false, false);
  EXPECT_EQ(ints(p.sorted_indices), (std::vector<int64_t>{1, 2, 0}));
  EXPECT_EQ(ints(p.unsorted_indices), (std::vector<int64_t>{2, 0, 1}));
  EXPECT_TRUE(tensor_near(p.data.reshape({-1}), {10, 20, 0, 11, 21, 12}, 0.0));
  EXPECT_EQ(p.sizes(), (std::vector<int64_t>{3, 2, 1}));
  auto [padded, lengths] = pad_packed_sequence(p, false, -1.0);
  EXPECT_TRUE(testing::tensors_near(padded, x, 0.0));
  EXPECT_EQ(ints(lengths), (std::vector<int64_t>{1, 3, 2}));
}

TEST(PackedSequence, PadSequenceAndPackSequence) {
  std::vector<Tensor> seqs = {tensor(std::vector<double>{1, 2}, {2, 1}), tensor(std::vector<double>{3, 4, 5}, {3, 1})};
  Tensor tm = pad_sequence(seqs);  // (3, 2, 1)
  EXPECT_TRUE(tensor_near(tm.reshape({-1}), {1, 3, 2, 4, 0, 5}, 0.0));
  Tensor bf = pad_sequence(seqs, true, 9.0);  // (2, 3, 1)
  EXPECT_TRUE(tensor_near(bf.reshape({-1}), {1, 2, 9, 3, 4, 5}, 0.0));
  auto p = pack_sequence(seqs, false);
  EXPECT_TRUE(tensor_near(p.data.reshape({-1}), {3, 1, 4, 2, 5}, 0.0));
  EXPECT_WEFT_ERROR(pack_sequence(seqs), "lengths must not increase when enforce_sorted is true");
}

TEST(PackedSequence, PaddingGetsNoGradient) {
  Tensor x = testing::rnd({3, 2, 2}, DType::Float64, 1).requires_grad_(true);
  auto p = pack_padded_sequence(x, std::vector<int64_t>{1, 3}, false, false);
  auto [padded, lengths] = pad_packed_sequence(p);
  Tensor g = autograd::grad({sum(padded * 3.0)}, {x})[0];
  // sequence 0 has one step, sequence 1 three
  EXPECT_TRUE(tensor_near(g.reshape({-1}), {3, 3, 3, 3, 0, 0, 3, 3, 0, 0, 3, 3}, 0.0));
}

TEST(PackedSequence, BadInputIsNamed) {
  Tensor x = zeros({3, 2, 1});
  EXPECT_WEFT_ERROR(pack_padded_sequence(x, std::vector<int64_t>{1, 2}),
                    "pack_padded_sequence: lengths must not increase when enforce_sorted is true, but lengths[0] = 1 "
                    "< lengths[1] = 2");
  EXPECT_WEFT_ERROR(pack_padded_sequence(x, std::vector<int64_t>{2, 0}),
                    "every length must be positive, but lengths[1] = 0");
  EXPECT_WEFT_ERROR(pack_padded_sequence(x, std::vector<int64_t>{4, 1}), "lengths[0] = 4 exceeds the 3 steps");
  EXPECT_WEFT_ERROR(pack_padded_sequence(x, std::vector<int64_t>{3}), "1 lengths for a batch of 2");
  EXPECT_WEFT_ERROR(pack_padded_sequence(x, tensor(std::vector<double>{3, 1}, {2})), "lengths must hold integers");
  auto p = pack_padded_sequence(x, std::vector<int64_t>{3, 1});
  EXPECT_WEFT_ERROR(pad_packed_sequence(p, false, 0.0, 2), "total_length = 2 is shorter than the longest sequence");
  EXPECT_WEFT_ERROR(pad_sequence({zeros({2, 3}), zeros({2, 4})}), "sequence 1 has shape [2, 4]");
  LSTM lstm(1, 2);
  EXPECT_WEFT_ERROR(lstm.forward(p, {zeros({1, 3, 2}), zeros({1, 3, 2})}), "expected h_0 of shape [1, 2, 2]");
}

// Runs `packed_run` on a packed, unsorted batch and `alone` on each sequence
// by itself; outputs, final states and parameter gradients must agree.
template <typename M, typename PackedRun, typename AloneRun>
void check_against_each_sequence(M& m, int64_t in, const std::vector<int64_t>& lengths, PackedRun packed_run,
                                 AloneRun alone) {
  const int64_t N = static_cast<int64_t>(lengths.size()), T = 5;
  Tensor x = testing::rnd({N, T, in}, DType::Float64, 11);  // batch_first
  auto p = pack_padded_sequence(x, lengths, true, false);
  auto [out, states] = packed_run(p);  // out: (N, T, F) padded with 0; states: (LD, N, *) each
  const Tensor w = testing::rnd(out.sizes(), DType::Float64, 12);
  std::vector<Tensor> ps = m.parameters();
  std::vector<Tensor> g_packed = autograd::grad({sum(out * w)}, ps);
  std::vector<Tensor> g_alone(ps.size());
  for (int64_t i = 0; i < N; ++i) {
    SCOPED_TRACE("sequence " + std::to_string(i));
    const int64_t L = lengths[i];
    auto [o, s] = alone(narrow(select(x, 0, i), 0, 0, L), i);  // (L, F), states (LD, *)
    EXPECT_TRUE(testing::tensors_near(narrow(select(out, 0, i), 0, 0, L), o, 1e-12));
    EXPECT_TRUE(
        testing::tensors_near(narrow(select(out, 0, i), 0, L, T - L), zeros({T - L, o.size(1)}, o.options()), 0.0));
    for (size_t k = 0; k < s.size(); ++k) EXPECT_TRUE(testing::tensors_near(select(states[k], 1, i), s[k], 1e-12));
    std::vector<Tensor> g = autograd::grad({sum(o * narrow(select(w, 0, i), 0, 0, L))}, ps);
    for (size_t j = 0; j < ps.size(); ++j) g_alone[j] = g_alone[j].defined() ? g_alone[j] + g[j] : g[j];
  }
  for (size_t j = 0; j < ps.size(); ++j) EXPECT_TRUE(testing::tensors_near(g_packed[j], g_alone[j], 1e-11)) << j;
}

const std::vector<int64_t> kLengths = {2, 5, 1, 5, 3};

TEST(PackedSequence, LstmBidirectionalTwoLayersWithProjection) {
  manual_seed(1);
  LSTM lstm(3, 4, {.num_layers = 2, .bidirectional = true, .proj_size = 2});
  lstm.to(DType::Float64);
  const Tensor h0 = testing::rnd({4, 5, 2}, DType::Float64, 2), c0 = testing::rnd({4, 5, 4}, DType::Float64, 3);
  check_against_each_sequence(
      lstm, 3, kLengths,
      [&](const PackedSequence& p) {
        PackedLSTMOutput r = lstm(p, {h0, c0});
        auto [out, lengths] = pad_packed_sequence(r.output, true);
        return std::pair{out, std::vector<Tensor>{r.h_n, r.c_n}};
      },
      [&](const Tensor& xi, int64_t i) {
        LSTMOutput r = lstm.forward(xi, {select(h0, 1, i), select(c0, 1, i)});
        return std::pair{r.output, std::vector<Tensor>{r.h_n, r.c_n}};
      });
}

TEST(PackedSequence, GruBidirectional) {
  manual_seed(4);
  GRU gru(3, 4, {.bidirectional = true});
  gru.to(DType::Float64);
  check_against_each_sequence(
      gru, 3, kLengths,
      [&](const PackedSequence& p) {
        PackedRNNOutput r = gru(p);
        auto [out, lengths] = pad_packed_sequence(r.output, true);
        return std::pair{out, std::vector<Tensor>{r.h_n}};
      },
      [&](const Tensor& xi, int64_t) {
        RNNOutput r = gru.forward(xi);
        return std::pair{r.output, std::vector<Tensor>{r.h_n}};
      });
}

TEST(PackedSequence, RnnTwoLayersWithInitialState) {
  manual_seed(5);
  RNN rnn(3, 4, {.num_layers = 2, .nonlinearity = RNNNonlinearity::ReLU});
  rnn.to(DType::Float64);
  const Tensor h0 = testing::rnd({2, 5, 4}, DType::Float64, 6);
  check_against_each_sequence(
      rnn, 3, kLengths,
      [&](const PackedSequence& p) {
        PackedRNNOutput r = rnn(p, h0);
        auto [out, lengths] = pad_packed_sequence(r.output, true);
        return std::pair{out, std::vector<Tensor>{r.h_n}};
      },
      [&](const Tensor& xi, int64_t i) {
        RNNOutput r = rnn.forward(xi, select(h0, 1, i));
        return std::pair{r.output, std::vector<Tensor>{r.h_n}};
      });
}

}  // namespace
}  // namespace weft::nn
