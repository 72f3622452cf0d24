// RNN, LSTM, GRU and their cells (contract in nn/rnn.h), composed of
// differentiable ops: per layer and direction one GEMM projects the inputs of
// all T steps, then the loop over time adds the hidden projection and applies
// the gates. PyTorch's equations, gate order and parameter layout throughout.
#include "nn/rnn.h"

#include <cmath>
#include <utility>

#include "core/nn_ops.h"
#include "core/ops.h"
#include "nn/init.h"

namespace weft::nn {

namespace {

int64_t gate_count(RNNMode mode) { return mode == RNNMode::LSTM ? 4 : mode == RNNMode::GRU ? 3 : 1; }

RNNMode rnn_mode(RNNNonlinearity nl) { return nl == RNNNonlinearity::Tanh ? RNNMode::RNNTanh : RNNMode::RNNReLU; }

// One recurrence step given this step's input projection xg = W_ih x + b_ih
// (N, G*H) and the state h (N, H_out), c (N, H) (LSTM only): (h', c').
std::pair<Tensor, Tensor> recur(RNNMode mode, const Tensor& xg, const Tensor& h, const Tensor& c, const Tensor& w_hh,
                                const Tensor& b_hh, const Tensor& w_hr) {
  Tensor hg = linear(h, w_hh, b_hh);  // (N, G*H)
  switch (mode) {
    case RNNMode::RNNTanh: return {weft::tanh(xg + hg), Tensor()};
    case RNNMode::RNNReLU: return {relu(xg + hg), Tensor()};
    case RNNMode::LSTM: {
      auto [h2, c2] = weft::lstm_cell(xg, hg, c);  // (N, H) each
      if (w_hr.defined()) h2 = linear(h2, w_hr);   // (N, proj_size)
      return {h2, c2};
    }
    case RNNMode::GRU: {
      std::vector<Tensor> xs = chunk(xg, 3, 1), hs = chunk(hg, 3, 1);  // r, z, n: (N, H) each
      Tensor r = sigmoid(xs[0] + hs[0]);
      Tensor z = sigmoid(xs[1] + hs[1]);
      Tensor n = weft::tanh(xs[2] + r * hs[2]);
      return {n + z * (h - n), Tensor()};  // (1 - z) * n + z * h
    }
  }
  WEFT_ERROR("recur: unknown RNNMode ", static_cast<int>(mode));
}

// An initial state: zeros of `full` (the batched shape) when undefined, else
// checked against `want` (the shape the input implies) and given the batch dim.
Tensor initial_state(const std::string& who, const char* name, const Tensor& s, const Shape& want, const Shape& full,
                     bool batched, const Tensor& x, int64_t batch_dim) {
  if (!s.defined()) return zeros(full, x.options());
  WEFT_CHECK(s.sizes() == want, who, ": expected ", name, " of shape ", shape_str(want), " for input of shape ",
             shape_str(x.sizes()), ", got ", shape_str(s.sizes()));
  WEFT_CHECK(s.dtype() == x.dtype(), who, ": ", name, " has dtype ", s.dtype(), " but the input has dtype ", x.dtype());
  return batched ? s : s.unsqueeze(batch_dim);
}

void check_input(const std::string& who, const Tensor& x, int64_t input_size, const Tensor& weight) {
  WEFT_CHECK(x.size(-1) == input_size, who, ": input of shape ", shape_str(x.sizes()), " has ", x.size(-1),
             " features but the layer was built for input_size=", input_size);
  WEFT_CHECK(x.dtype() == weight.dtype(), who, ": input dtype ", x.dtype(), " does not match the parameters' dtype ",
             weight.dtype());
}

}  // namespace

// ---------------------------------------------------------------- cells

RNNCellBase::RNNCellBase(const char* type, RNNMode mode, int64_t in, int64_t hidden, bool with_bias)
    : Module(type), input_size(in), hidden_size(hidden), bias(with_bias), mode(mode) {
  WEFT_CHECK(in >= 0 && hidden > 0, type, ": input_size must be >= 0 and hidden_size > 0, got input_size=", in,
             " hidden_size=", hidden);
  const int64_t gh = gate_count(mode) * hidden;
  weight_ih = register_parameter("weight_ih", empty({gh, in}));
  weight_hh = register_parameter("weight_hh", empty({gh, hidden}));
  if (with_bias) {
    bias_ih = register_parameter("bias_ih", empty({gh}));
    bias_hh = register_parameter("bias_hh", empty({gh}));
  }
  reset_parameters();
}

void RNNCellBase::reset_parameters() {
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  for (Tensor& p : parameters(false)) init::uniform_(p, -bound, bound);
}

std::string RNNCellBase::extra_repr() const {
  std::string s = std::to_string(input_size) + ", " + std::to_string(hidden_size);
  if (!bias) s += ", bias=false";
  if (mode == RNNMode::RNNReLU) s += ", nonlinearity=relu";
  return s;
}

std::pair<Tensor, Tensor> RNNCellBase::step(const Tensor& x, const Tensor& h, const Tensor& c) {
  const std::string& who = type_name();
  WEFT_CHECK(x.defined(), who, ": the input is undefined");
  WEFT_CHECK(x.dim() == 1 || x.dim() == 2, who, ": expected input to be 1D (in) or 2D (N, in), got shape ",
             shape_str(x.sizes()));
  check_input(who, x, input_size, weight_ih);
  const bool batched = x.dim() == 2;
  Tensor xb = batched ? x : x.unsqueeze(0);  // (N, in)
  const int64_t n = xb.size(0);
  const Shape want = batched ? Shape{n, hidden_size} : Shape{hidden_size};
  if (mode == RNNMode::LSTM)
    WEFT_CHECK(h.defined() == c.defined(), who, ": give both h and c or neither (got only ", h.defined() ? "h" : "c",
               ")");
  Tensor hb = initial_state(who, "h", h, want, {n, hidden_size}, batched, x, 0);  // (N, H)
  Tensor cb;
  if (mode == RNNMode::LSTM) cb = initial_state(who, "c", c, want, {n, hidden_size}, batched, x, 0);  // (N, H)
  Tensor xg = linear(xb, weight_ih, bias_ih);                                                         // (N, G*H)
  auto [h2, c2] = recur(mode, xg, hb, cb, weight_hh, bias_hh, Tensor());
  if (!batched) {
    h2 = h2.squeeze(0);
    if (c2.defined()) c2 = c2.squeeze(0);
  }
  return {h2, c2};
}

Tensor RNNCellBase::forward(const Tensor& input) { return step(input, Tensor(), Tensor()).first; }

Tensors RNNCellBase::forward_multi(const Tensors& in) {
  const size_t most = mode == RNNMode::LSTM ? 3 : 2;
  WEFT_CHECK(!in.empty() && in.size() <= most, type_name(), ": forward_multi takes ",
             mode == RNNMode::LSTM ? "{x}, or {x, h, c}" : "{x} or {x, h}", ", got ", in.size(), " tensors");
  auto [h2, c2] = step(in[0], in.size() > 1 ? in[1] : Tensor(), in.size() > 2 ? in[2] : Tensor());
  if (mode == RNNMode::LSTM) return {h2, c2};
  return {h2};
}

RNNCell::RNNCell(int64_t in, int64_t hidden, bool with_bias, RNNNonlinearity nl)
    : RNNCellBase("RNNCell", rnn_mode(nl), in, hidden, with_bias), nonlinearity(nl) {}
Tensor RNNCell::forward(const Tensor& input, const Tensor& h) { return step(input, h, Tensor()).first; }

LSTMCell::LSTMCell(int64_t in, int64_t hidden, bool with_bias)
    : RNNCellBase("LSTMCell", RNNMode::LSTM, in, hidden, with_bias) {}
LSTMState LSTMCell::forward(const Tensor& input, const LSTMState& state) {
  auto [h2, c2] = step(input, state.h, state.c);
  return {h2, c2};
}

GRUCell::GRUCell(int64_t in, int64_t hidden, bool with_bias)
    : RNNCellBase("GRUCell", RNNMode::GRU, in, hidden, with_bias) {}
Tensor GRUCell::forward(const Tensor& input, const Tensor& h) { return step(input, h, Tensor()).first; }

// ---------------------------------------------------------------- sequences

RNNBase::RNNBase(const char* type, RNNMode mode, int64_t in, int64_t hidden, const Config& cfg)
    : Module(type),
      input_size(in),
      hidden_size(hidden),
      num_layers(cfg.num_layers),
      bias(cfg.bias),
      batch_first(cfg.batch_first),
      dropout(cfg.dropout),
      bidirectional(cfg.bidirectional),
      proj_size(cfg.proj_size),
      mode(mode) {
  WEFT_CHECK(in >= 0 && hidden > 0, type, ": input_size must be >= 0 and hidden_size > 0, got input_size=", in,
             " hidden_size=", hidden);
  WEFT_CHECK(num_layers > 0, type, ": num_layers must be greater than zero, got ", num_layers);
  WEFT_CHECK(dropout >= 0.0 && dropout <= 1.0, type, ": dropout should be a number in range [0, 1], got ", dropout);
  WEFT_CHECK(proj_size >= 0 && proj_size < hidden, type, ": proj_size must be >= 0 and smaller than hidden_size ",
             hidden, ", got ", proj_size);
  const int64_t D = num_directions(), gh = gate_count(mode) * hidden, h_out = proj_size > 0 ? proj_size : hidden;
  for (int64_t l = 0; l < num_layers; ++l) {
    for (int64_t d = 0; d < D; ++d) {
      const std::string sfx = "_l" + std::to_string(l) + (d == 1 ? "_reverse" : "");
      const int64_t layer_in = l == 0 ? in : D * h_out;
      Weights w;
      w.w_ih = register_parameter("weight_ih" + sfx, empty({gh, layer_in}));
      w.w_hh = register_parameter("weight_hh" + sfx, empty({gh, h_out}));
      if (bias) {
        w.b_ih = register_parameter("bias_ih" + sfx, empty({gh}));
        w.b_hh = register_parameter("bias_hh" + sfx, empty({gh}));
      }
      if (proj_size > 0) w.w_hr = register_parameter("weight_hr" + sfx, empty({proj_size, hidden}));
      weights_.push_back(w);
    }
  }
  reset_parameters();
}

void RNNBase::reset_parameters() {
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  for (Tensor& p : parameters(false)) init::uniform_(p, -bound, bound);
}

std::vector<std::vector<Tensor>> RNNBase::all_weights() const {
  std::vector<std::vector<Tensor>> out;
  for (const Weights& w : weights_) {
    out.emplace_back();
    for (const Tensor* t : {&w.w_ih, &w.w_hh, &w.b_ih, &w.b_hh, &w.w_hr})
      if (t->defined()) out.back().push_back(*t);
  }
  return out;
}

std::string RNNBase::extra_repr() const {
  std::string s = std::to_string(input_size) + ", " + std::to_string(hidden_size);
  if (proj_size > 0) s += ", proj_size=" + std::to_string(proj_size);
  if (num_layers != 1) s += ", num_layers=" + std::to_string(num_layers);
  if (mode == RNNMode::RNNReLU) s += ", nonlinearity=relu";
  if (!bias) s += ", bias=false";
  if (batch_first) s += ", batch_first=true";
  if (dropout != 0.0) s += ", dropout=" + std::to_string(dropout);
  if (bidirectional) s += ", bidirectional=true";
  return s;
}

Tensors RNNBase::run(const Tensor& input, const Tensor& h0, const Tensor& c0) {
  const std::string& who = type_name();
  WEFT_CHECK(input.defined(), who, ": the input is undefined");
  WEFT_CHECK(input.dim() == 2 || input.dim() == 3, who, ": expected input to be 2D (T, in) or 3D ",
             batch_first ? "(N, T, in)" : "(T, N, in)", ", got shape ", shape_str(input.sizes()));
  check_input(who, input, input_size, weights_[0].w_ih);
  const bool batched = input.dim() == 3;
  // (T, N, in): unbatched input gets N = 1; batch_first only applies to batched input.
  Tensor x = !batched ? input.unsqueeze(1) : batch_first ? input.transpose(0, 1) : input;
  const int64_t T = x.size(0), N = x.size(1), D = num_directions(), LD = num_layers * D;
  const int64_t h_out = proj_size > 0 ? proj_size : hidden_size;
  WEFT_CHECK(T > 0, who, ": expected a sequence length larger than 0, got input of shape ", shape_str(input.sizes()));
  const bool lstm = mode == RNNMode::LSTM;
  WEFT_CHECK(lstm || !c0.defined(), who, ": only an LSTM takes a cell state");
  if (lstm)
    WEFT_CHECK(h0.defined() == c0.defined(), who, ": give both h_0 and c_0 or neither (got only ",
               h0.defined() ? "h_0" : "c_0", ")");
  auto want = [&](int64_t size) { return batched ? Shape{LD, N, size} : Shape{LD, size}; };
  Tensor h_all = initial_state(who, "h_0", h0, want(h_out), {LD, N, h_out}, batched, input, 1);  // (LD, N, H_out)
  Tensor c_all;
  if (lstm) c_all = initial_state(who, "c_0", c0, want(hidden_size), {LD, N, hidden_size}, batched, input, 1);

  const int64_t in_features = x.size(2);
  Tensors r = run_steps(x.reshape({T * N, in_features}), std::vector<int64_t>(T, N), h_all, c_all);
  Tensor out = r[0].view({T, N, D * h_out}), hn = r[1], cn = r[2];
  if (!batched) {
    out = out.squeeze(1);  // (T, D*H_out)
    hn = hn.squeeze(1);    // (LD, H_out)
    if (lstm) cn = cn.squeeze(1);
  } else if (batch_first) {
    out = out.transpose(0, 1);  // (N, T, D*H_out)
  }
  return {out, hn, cn};
}

// Step s is rows [sum of sizes before s, + sizes[s]) of x: the first sizes[s]
// sequences (Note [packed steps]).
Tensors RNNBase::run_steps(const Tensor& x, const std::vector<int64_t>& sizes, const Tensor& h_all,
                           const Tensor& c_all) {
  const int64_t D = num_directions(), S = static_cast<int64_t>(sizes.size());
  const bool lstm = mode == RNNMode::LSTM;
  Tensor layer_in = x;  // (rows, in_l)
  Tensors h_n, c_n;     // (N, H_out), (N, H) per row l * D + d
  for (int64_t l = 0; l < num_layers; ++l) {
    Tensors dir_out;  // (rows, H_out) per direction
    for (int64_t d = 0; d < D; ++d) {
      const Weights& w = weights_[l * D + d];
      // All steps' input projections in one GEMM: (rows, in_l) W_ih^T -> (rows, G*H).
      Tensor xg = linear(layer_in, w.w_ih, w.b_ih);
      Tensors steps = split(xg, sizes, 0);  // (sizes[s], G*H) per step
      Tensor h = h_all.select(0, l * D + d), c = lstm ? c_all.select(0, l * D + d) : Tensor();
      const int64_t N = h.size(0);
      Tensors outs(S);
      for (int64_t s = 0; s < S; ++s) {
        const int64_t t = d == 0 ? s : S - 1 - s, b = sizes[t];
        if (b == N) {
          std::tie(h, c) = recur(mode, steps[t], h, c, w.w_hh, w.b_hh, w.w_hr);
          outs[t] = h;  // (N, H_out)
          continue;
        }
        // Note [packed steps]: only the first b sequences take this step; the
        // rest keep their state (ended, or in reverse not yet begun)
        auto [hb, cb] =
            recur(mode, steps[t], narrow(h, 0, 0, b), lstm ? narrow(c, 0, 0, b) : Tensor(), w.w_hh, w.b_hh, w.w_hr);
        outs[t] = hb;  // (b, H_out)
        h = cat({hb, narrow(h, 0, b, N - b)}, 0);
        if (lstm) c = cat({cb, narrow(c, 0, b, N - b)}, 0);
      }
      dir_out.push_back(cat(outs, 0));
      h_n.push_back(h);
      c_n.push_back(c);
    }
    layer_in = D == 1 ? dir_out[0] : cat(dir_out, 1);  // (rows, D*H_out)
    if (l + 1 < num_layers && dropout > 0.0 && is_training()) layer_in = weft::dropout(layer_in, dropout, true);
  }
  return {layer_in, stack(h_n, 0), lstm ? stack(c_n, 0) : Tensor()};
}

Tensors RNNBase::run_packed(const utils::rnn::PackedSequence& input, const Tensor& h0, const Tensor& c0) {
  const std::string& who = type_name();
  const Tensor& data = input.data;
  WEFT_CHECK(data.defined() && data.dim() == 2, who, ": expected packed data of shape (rows, in), got ",
             data.defined() ? shape_str(data.sizes()) : std::string("an undefined tensor"));
  check_input(who, data, input_size, weights_[0].w_ih);
  const std::vector<int64_t> sizes = input.sizes();
  WEFT_CHECK(!sizes.empty(), who, ": the packed sequence has no steps");
  int64_t rows = 0;
  for (size_t s = 0; s < sizes.size(); ++s) {
    WEFT_CHECK(sizes[s] > 0 && (s == 0 || sizes[s] <= sizes[s - 1]), who,
               ": batch_sizes must be positive and not increase, got ", shape_str(Shape(sizes.begin(), sizes.end())));
    rows += sizes[s];
  }
  WEFT_CHECK(rows == data.size(0), who, ": packed data has ", data.size(0), " rows but batch_sizes counts ", rows);
  const int64_t N = sizes[0], LD = num_layers * num_directions(), h_out = proj_size > 0 ? proj_size : hidden_size;
  const bool lstm = mode == RNNMode::LSTM;
  WEFT_CHECK(lstm || !c0.defined(), who, ": only an LSTM takes a cell state");
  if (lstm)
    WEFT_CHECK(h0.defined() == c0.defined(), who, ": give both h_0 and c_0 or neither (got only ",
               h0.defined() ? "h_0" : "c_0", ")");
  // states in the caller's batch order; the packed batch is sorted
  auto state = [&](const char* name, const Tensor& s, int64_t size) {
    const Shape want{LD, N, size};
    Tensor st = initial_state(who, name, s, want, want, true, data, 1);
    if (s.defined() && input.sorted_indices.defined()) st = index_select(st, 1, input.sorted_indices.to(st.device()));
    return st;
  };
  Tensor h_all = state("h_0", h0, h_out), c_all = lstm ? state("c_0", c0, hidden_size) : Tensor();
  Tensors r = run_steps(data, sizes, h_all, c_all);
  if (input.unsorted_indices.defined()) {
    const Tensor back = input.unsorted_indices.to(r[1].device());
    r[1] = index_select(r[1], 1, back);
    if (lstm) r[2] = index_select(r[2], 1, back);
  }
  return r;
}

Tensor RNNBase::forward(const Tensor& input) { return run(input, Tensor(), Tensor())[0]; }

Tensors RNNBase::forward_multi(const Tensors& in) {
  const bool lstm = mode == RNNMode::LSTM;
  WEFT_CHECK(!in.empty() && in.size() <= (lstm ? 3u : 2u), type_name(), ": forward_multi takes ",
             lstm ? "{x}, or {x, h_0, c_0}" : "{x} or {x, h_0}", ", got ", in.size(), " tensors");
  Tensors r = run(in[0], in.size() > 1 ? in[1] : Tensor(), in.size() > 2 ? in[2] : Tensor());
  if (!lstm) r.pop_back();
  return r;
}

Tensors RNNBase::call(const Tensor& input, const Tensor& h0, const Tensor& c0) {
  Tensors in{input};
  if (h0.defined() || c0.defined()) in.push_back(h0);
  if (c0.defined()) in.push_back(c0);
  return Module::operator()(in);
}

RNN::RNN(int64_t in, int64_t hidden, const RNNOptions& o)
    : RNNBase("RNN", rnn_mode(o.nonlinearity), in, hidden,
              {o.num_layers, o.bias, o.batch_first, o.dropout, o.bidirectional, 0}),
      nonlinearity(o.nonlinearity) {}
RNNOutput RNN::forward(const Tensor& input, const Tensor& h_0) {
  Tensors r = run(input, h_0, Tensor());
  return {r[0], r[1]};
}
RNNOutput RNN::operator()(const Tensor& input, const Tensor& h_0) {
  Tensors r = call(input, h_0, Tensor());
  return {r[0], r[1]};
}
PackedRNNOutput RNN::forward(const PackedSequence& input, const Tensor& h_0) {
  Tensors r = run_packed(input, h_0, Tensor());
  return {{r[0], input.batch_sizes, input.sorted_indices, input.unsorted_indices}, r[1]};
}
PackedRNNOutput RNN::operator()(const PackedSequence& input, const Tensor& h_0) { return forward(input, h_0); }

LSTM::LSTM(int64_t in, int64_t hidden, const LSTMOptions& o)
    : RNNBase("LSTM", RNNMode::LSTM, in, hidden,
              {o.num_layers, o.bias, o.batch_first, o.dropout, o.bidirectional, o.proj_size}) {}
LSTMOutput LSTM::forward(const Tensor& input, const LSTMState& state) {
  Tensors r = run(input, state.h, state.c);
  return {r[0], r[1], r[2]};
}
LSTMOutput LSTM::operator()(const Tensor& input, const LSTMState& state) {
  Tensors r = call(input, state.h, state.c);
  return {r[0], r[1], r[2]};
}
PackedLSTMOutput LSTM::forward(const PackedSequence& input, const LSTMState& state) {
  Tensors r = run_packed(input, state.h, state.c);
  return {{r[0], input.batch_sizes, input.sorted_indices, input.unsorted_indices}, r[1], r[2]};
}
PackedLSTMOutput LSTM::operator()(const PackedSequence& input, const LSTMState& state) { return forward(input, state); }

GRU::GRU(int64_t in, int64_t hidden, const GRUOptions& o)
    : RNNBase("GRU", RNNMode::GRU, in, hidden, {o.num_layers, o.bias, o.batch_first, o.dropout, o.bidirectional, 0}) {}
RNNOutput GRU::forward(const Tensor& input, const Tensor& h_0) {
  Tensors r = run(input, h_0, Tensor());
  return {r[0], r[1]};
}
RNNOutput GRU::operator()(const Tensor& input, const Tensor& h_0) {
  Tensors r = call(input, h_0, Tensor());
  return {r[0], r[1]};
}
PackedRNNOutput GRU::forward(const PackedSequence& input, const Tensor& h_0) {
  Tensors r = run_packed(input, h_0, Tensor());
  return {{r[0], input.batch_sizes, input.sorted_indices, input.unsorted_indices}, r[1]};
}
PackedRNNOutput GRU::operator()(const PackedSequence& input, const Tensor& h_0) { return forward(input, h_0); }

}  // namespace weft::nn
