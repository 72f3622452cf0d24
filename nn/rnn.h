// Recurrent layers with PyTorch's semantics: RNNCell, LSTMCell and GRUCell (one
// step), and RNN, LSTM and GRU (a whole sequence, several layers, optionally
// bidirectional).
//
// Contract:
// - Parameter names, shapes, registration order and gate order are PyTorch's,
//   so state dicts port both ways: weight_ih_l{k}[_reverse] (G*H, in),
//   weight_hh_l{k}[_reverse] (G*H, H or proj_size), bias_ih_l{k}[_reverse],
//   bias_hh_l{k}[_reverse] (G*H), and for an LSTM with proj_size also
//   weight_hr_l{k}[_reverse] (proj_size, H); the cells have weight_ih,
//   weight_hh, bias_ih, bias_hh. G = 1 (RNN), 4 (LSTM: i, f, g, o) or 3 (GRU: r,
//   z, n with n = tanh(W_in x + b_in + r * (W_hn h + b_hn))). Every parameter
//   starts U(-1/sqrt(H), 1/sqrt(H)).
// - Shapes (D = 2 if bidirectional else 1, H_out = proj_size or H):
//   input (T, N, in), (N, T, in) with batch_first, or unbatched (T, in);
//   output (T, N, D * H_out) ((N, T, ...) with batch_first, (T, ...) unbatched);
//   h_0 / h_n (D * num_layers, N, H_out), c_0 / c_n (D * num_layers, N, H)
//   (without the N dim for an unbatched input; batch_first never applies to
//   states). An undefined initial state means zeros. Layer l of direction d is
//   row l * D + d of the states. A cell takes (N, in) or unbatched (in).
// - Dropout with probability `dropout` is applied to every layer's output but
//   the last, in training mode only.
// - Everything is composed of differentiable ops (one GEMM per layer and
//   direction for the input projections of all steps, then a loop over time),
//   so autograd needs nothing special. Errors name the layer and the shapes.
// - A packed input (nn/packed_sequence.h: sequences of different lengths)
//   runs each sequence its own number of steps and returns PackedRNNOutput /
//   PackedLSTMOutput: the output packed as the input, and h_n (c_n) each
//   sequence's state after its last step (for the reverse direction, after
//   step 0), in the caller's batch order; h_0 / c_0 are (D * num_layers, N, *)
//   in that order too. A packed call runs no module hooks (they see tensors).
// - Calling forward() or operator() with a state returns the whole result
//   (RNNOutput / LSTMOutput); through a Module& (Sequential), forward(x)
//   returns the output alone and forward_multi({x[, h_0[, c_0]]}) returns
//   {output, h_n[, c_n]} (cells: {h'[, c']}).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"
#include "nn/packed_sequence.h"

namespace weft::nn {

enum class RNNNonlinearity { Tanh, ReLU };
// The recurrence a layer runs (and with it the gate count G).
enum class RNNMode { RNNTanh, RNNReLU, LSTM, GRU };

struct RNNOptions {
  int64_t num_layers = 1;
  bool bias = true;
  bool batch_first = false;
  double dropout = 0.0;  // between layers, training mode only
  bool bidirectional = false;
  RNNNonlinearity nonlinearity = RNNNonlinearity::Tanh;
};
struct LSTMOptions {
  int64_t num_layers = 1;
  bool bias = true;
  bool batch_first = false;
  double dropout = 0.0;
  bool bidirectional = false;
  int64_t proj_size = 0;  // > 0: h is projected to proj_size by weight_hr (0 < proj_size < hidden_size)
};
struct GRUOptions {
  int64_t num_layers = 1;
  bool bias = true;
  bool batch_first = false;
  double dropout = 0.0;
  bool bidirectional = false;
};

// What RNN and GRU return: auto [out, h_n] = (*gru)(x);
struct RNNOutput {
  Tensor output;  // (T, N, D * H)
  Tensor h_n;     // (D * num_layers, N, H)
};
// An LSTM's (h, c): lstm->forward(x, {h_0, c_0}), cell->forward(x, {h, c}).
struct LSTMState {
  Tensor h;  // (D * num_layers, N, H_out), a cell's (N, H)
  Tensor c;  // (D * num_layers, N, H), a cell's (N, H)
};
// What LSTM returns: auto [out, h_n, c_n] = (*lstm)(x, {h_0, c_0});
struct LSTMOutput {
  Tensor output;  // (T, N, D * H_out)
  Tensor h_n;     // (D * num_layers, N, H_out)
  Tensor c_n;     // (D * num_layers, N, H)
};
using utils::rnn::PackedSequence;
// The same for a packed input (nn/packed_sequence.h): the output packed as the
// input; h_n, c_n each sequence's state after its last step, in the caller's order.
struct PackedRNNOutput {
  PackedSequence output;  // data (rows, D * H_out)
  Tensor h_n;             // (D * num_layers, N, H_out)
};
struct PackedLSTMOutput {
  PackedSequence output;  // data (rows, D * H_out)
  Tensor h_n;             // (D * num_layers, N, H_out)
  Tensor c_n;             // (D * num_layers, N, H)
};

// ---------------------------------------------------------------- cells

class RNNCellBase : public Module {
 public:
  RNNCellBase(const char* type, RNNMode mode, int64_t input_size, int64_t hidden_size, bool bias);
  Tensor forward(const Tensor& input) override;           // h' from a zero state
  Tensors forward_multi(const Tensors& inputs) override;  // {x[, h[, c]]} -> {h'[, c']}
  std::string extra_repr() const override;
  void reset_parameters();

  Tensor weight_ih;  // (G * H, in)
  Tensor weight_hh;  // (G * H, H)
  Tensor bias_ih;    // (G * H) or undefined
  Tensor bias_hh;    // (G * H) or undefined
  int64_t input_size, hidden_size;
  bool bias;
  RNNMode mode;

 protected:
  // One step: (h', c') from x (N, in) or (in); undefined h / c mean zeros. c
  // and c' are undefined except for an LSTM.
  std::pair<Tensor, Tensor> step(const Tensor& x, const Tensor& h, const Tensor& c);
};

class RNNCell : public RNNCellBase {
 public:
  RNNCell(int64_t input_size, int64_t hidden_size, bool bias = true,
          RNNNonlinearity nonlinearity = RNNNonlinearity::Tanh);
  Tensor forward(const Tensor& input, const Tensor& h = Tensor());  // (N, in), (N, H) -> (N, H)
  RNNNonlinearity nonlinearity;
};

class LSTMCell : public RNNCellBase {
 public:
  LSTMCell(int64_t input_size, int64_t hidden_size, bool bias = true);
  LSTMState forward(const Tensor& input, const LSTMState& state = {});  // (N, in), {(N, H), (N, H)}
};

class GRUCell : public RNNCellBase {
 public:
  GRUCell(int64_t input_size, int64_t hidden_size, bool bias = true);
  Tensor forward(const Tensor& input, const Tensor& h = Tensor());  // (N, in), (N, H) -> (N, H)
};

// ---------------------------------------------------------------- sequences

class RNNBase : public Module {
 public:
  // What the three option structs have in common.
  struct Config {
    int64_t num_layers = 1;
    bool bias = true;
    bool batch_first = false;
    double dropout = 0.0;
    bool bidirectional = false;
    int64_t proj_size = 0;
  };
  RNNBase(const char* type, RNNMode mode, int64_t input_size, int64_t hidden_size, const Config& config);
  Tensor forward(const Tensor& input) override;           // the output alone, zero initial state
  Tensors forward_multi(const Tensors& inputs) override;  // {x[, h_0[, c_0]]} -> {output, h_n[, c_n]}
  std::string extra_repr() const override;
  void reset_parameters();
  // PyTorch's all_weights: per layer and direction (row l * D + d), its
  // parameters in registration order.
  std::vector<std::vector<Tensor>> all_weights() const;
  int64_t num_directions() const { return bidirectional ? 2 : 1; }

  int64_t input_size, hidden_size, num_layers;
  bool bias, batch_first;
  double dropout;
  bool bidirectional;
  int64_t proj_size;
  RNNMode mode;

 protected:
  // {output, h_n, c_n} (c_n undefined except for an LSTM).
  Tensors run(const Tensor& input, const Tensor& h0, const Tensor& c0);
  // The same for a packed input: {output data, h_n, c_n}.
  Tensors run_packed(const PackedSequence& input, const Tensor& h0, const Tensor& c0);
  // Runs the hooks around forward_multi for the operator() of RNN, LSTM, GRU.
  Tensors call(const Tensor& input, const Tensor& h0, const Tensor& c0);

 private:
  struct Weights {
    Tensor w_ih, w_hh, b_ih, b_hh, w_hr;  // biases and w_hr may be undefined
  };
  std::vector<Weights> weights_;  // row l * D + d
  // Every layer and direction over the steps of x (rows, in), step s being
  // the first sizes[s] sequences; states (LD, N, *). {output (rows, D * H_out), h_n, c_n}.
  Tensors run_steps(const Tensor& x, const std::vector<int64_t>& sizes, const Tensor& h_all, const Tensor& c_all);
};

class RNN : public RNNBase {
 public:
  RNN(int64_t input_size, int64_t hidden_size, const RNNOptions& opts = {});
  RNNOutput forward(const Tensor& input, const Tensor& h_0 = Tensor());
  RNNOutput operator()(const Tensor& input, const Tensor& h_0 = Tensor());
  PackedRNNOutput forward(const PackedSequence& input, const Tensor& h_0 = Tensor());
  PackedRNNOutput operator()(const PackedSequence& input, const Tensor& h_0 = Tensor());
  Tensors operator()(const Tensors& inputs) { return Module::operator()(inputs); }
  RNNNonlinearity nonlinearity;
};

class LSTM : public RNNBase {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, const LSTMOptions& opts = {});
  LSTMOutput forward(const Tensor& input, const LSTMState& state = {});
  LSTMOutput operator()(const Tensor& input, const LSTMState& state = {});
  PackedLSTMOutput forward(const PackedSequence& input, const LSTMState& state = {});
  PackedLSTMOutput operator()(const PackedSequence& input, const LSTMState& state = {});
  Tensors operator()(const Tensors& inputs) { return Module::operator()(inputs); }
};

class GRU : public RNNBase {
 public:
  GRU(int64_t input_size, int64_t hidden_size, const GRUOptions& opts = {});
  RNNOutput forward(const Tensor& input, const Tensor& h_0 = Tensor());
  RNNOutput operator()(const Tensor& input, const Tensor& h_0 = Tensor());
  PackedRNNOutput forward(const PackedSequence& input, const Tensor& h_0 = Tensor());
  PackedRNNOutput operator()(const PackedSequence& input, const Tensor& h_0 = Tensor());
  Tensors operator()(const Tensors& inputs) { return Module::operator()(inputs); }
};

}  // namespace weft::nn
