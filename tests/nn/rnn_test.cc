// RNN, LSTM, GRU and their cells (nn/rnn.h) against PyTorch's values
// (tests/nn/golden/rnn_golden.safetensors, from tools/golden/make_rnn_golden.py):
// outputs, final states and every gradient in float32 and float64; parameter
// names and shapes against PyTorch's; float64 gradchecks with non-contiguous
// inputs; dropout between layers; the C++ call forms and hooks; error messages.
#include "nn/rnn.h"

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "tests/golden.h"
#include "tests/testing.h"

namespace weft::nn {
namespace {

using testing::tensors_near;
using testing::values;

const testing::Golden& golden() {
  static const testing::Golden g("tests/nn/golden/rnn_golden.safetensors");
  return g;
}
bool has(const std::string& key) { return golden().has(key); }
const Tensor& G(const std::string& key) { return golden()(key); }
const std::string& meta(const std::string& key) { return golden().meta(key); }
Tensor leaf(Tensor t) {
  t.requires_grad_(true);
  return t;
}
std::vector<std::string> split_csv(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}

// ------------------------------------------------------------------ the golden cases
constexpr int64_t kIn = 4;

enum class Kind { RNNTanh, RNNReLU, LSTM, GRU, RNNCellTanh, RNNCellReLU, LSTMCell, GRUCell };
const char* kind_name(Kind k) {
  const char* names[] = {"RNN_TANH", "RNN_RELU", "LSTM", "GRU", "RNNCell_TANH", "RNNCell_RELU", "LSTMCell", "GRUCell"};
  return names[static_cast<int>(k)];
}

struct Case {
  const char* name;
  Kind kind;
  int64_t hidden, num_layers;
  bool bias, batch_first, bidirectional;
  int64_t proj_size;
  bool unbatched, state;
  bool cell() const { return kind >= Kind::RNNCellTanh; }
  bool lstm() const { return kind == Kind::LSTM || kind == Kind::LSTMCell; }
  // The same words as make_rnn_golden.py's config_string.
  std::string config() const {
    std::ostringstream os;
    os << kind_name(kind) << " input_size=" << kIn << " hidden_size=" << hidden << " num_layers=" << num_layers
       << " bias=" << bias << " batch_first=" << batch_first << " bidirectional=" << bidirectional
       << " proj_size=" << proj_size << " input=" << (unbatched ? "unbatched" : "batched") << " state=" << state;
    return os.str();
  }
};
std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

// Mirrors CASES in tools/golden/make_rnn_golden.py.
const Case kCases[] = {
    // {name, kind, hidden_size, num_layers, bias, batch_first, bidirectional, proj_size, unbatched, state}
    {"rnn_tanh", Kind::RNNTanh, 6, 1, true, false, false, 0, false, true},
    {"rnn_relu_2l_bf", Kind::RNNReLU, 6, 2, true, true, false, 0, false, false},
    {"rnn_tanh_bidir_unbatched", Kind::RNNTanh, 6, 2, true, false, true, 0, true, true},
    {"lstm_2l_bidir", Kind::LSTM, 4, 2, true, false, true, 0, false, true},
    {"lstm_bf_nobias", Kind::LSTM, 6, 1, false, true, false, 0, false, false},
    {"lstm_proj_bidir", Kind::LSTM, 4, 2, true, false, true, 3, false, true},
    {"lstm_unbatched", Kind::LSTM, 6, 1, true, false, false, 0, true, false},
    {"gru_2l", Kind::GRU, 6, 2, true, false, false, 0, false, true},
    {"gru_bidir_nobias_bf", Kind::GRU, 6, 1, false, true, true, 0, false, false},
    {"rnn_cell_tanh", Kind::RNNCellTanh, 6, 1, true, false, false, 0, false, true},
    {"rnn_cell_relu_nobias", Kind::RNNCellReLU, 6, 1, false, false, false, 0, false, false},
    {"lstm_cell", Kind::LSTMCell, 6, 1, true, false, false, 0, false, true},
    {"gru_cell", Kind::GRUCell, 6, 1, true, false, false, 0, false, true},
    {"gru_cell_unbatched_nobias", Kind::GRUCell, 6, 1, false, false, false, 0, true, false},
};

std::shared_ptr<Module> make_module(const Case& c) {
  switch (c.kind) {
    case Kind::RNNTanh:
    case Kind::RNNReLU:
      return std::make_shared<RNN>(
          kIn, c.hidden,
          RNNOptions{.num_layers = c.num_layers,
                     .bias = c.bias,
                     .batch_first = c.batch_first,
                     .bidirectional = c.bidirectional,
                     .nonlinearity = c.kind == Kind::RNNTanh ? RNNNonlinearity::Tanh : RNNNonlinearity::ReLU});
    case Kind::LSTM:
      return std::make_shared<LSTM>(kIn, c.hidden,
                                    LSTMOptions{.num_layers = c.num_layers,
                                                .bias = c.bias,
                                                .batch_first = c.batch_first,
                                                .bidirectional = c.bidirectional,
                                                .proj_size = c.proj_size});
    case Kind::GRU:
      return std::make_shared<GRU>(kIn, c.hidden,
                                   GRUOptions{.num_layers = c.num_layers,
                                              .bias = c.bias,
                                              .batch_first = c.batch_first,
                                              .bidirectional = c.bidirectional});
    case Kind::RNNCellTanh: return std::make_shared<RNNCell>(kIn, c.hidden, c.bias, RNNNonlinearity::Tanh);
    case Kind::RNNCellReLU: return std::make_shared<RNNCell>(kIn, c.hidden, c.bias, RNNNonlinearity::ReLU);
    case Kind::LSTMCell: return std::make_shared<LSTMCell>(kIn, c.hidden, c.bias);
    case Kind::GRUCell: return std::make_shared<GRUCell>(kIn, c.hidden, c.bias);
  }
  throw std::runtime_error("unknown kind");
}

// {output (a cell's h'), h_n (undefined for a cell), c_n (a cell's c'; LSTM only)}
std::vector<Tensor> run(const Case& c, Module& m, const Tensor& x, const Tensor& h0, const Tensor& c0) {
  switch (c.kind) {
    case Kind::RNNTanh:
    case Kind::RNNReLU: {
      auto [out, hn] = static_cast<RNN&>(m).forward(x, h0);
      return {out, hn, Tensor()};
    }
    case Kind::LSTM: {
      auto [out, hn, cn] = static_cast<LSTM&>(m).forward(x, {h0, c0});
      return {out, hn, cn};
    }
    case Kind::GRU: {
      auto [out, hn] = static_cast<GRU&>(m).forward(x, h0);
      return {out, hn, Tensor()};
    }
    case Kind::RNNCellTanh:
    case Kind::RNNCellReLU: return {static_cast<RNNCell&>(m).forward(x, h0), Tensor(), Tensor()};
    case Kind::LSTMCell: {
      auto [h, cc] = static_cast<LSTMCell&>(m).forward(x, {h0, c0});
      return {h, Tensor(), cc};
    }
    case Kind::GRUCell: return {static_cast<GRUCell&>(m).forward(x, h0), Tensor(), Tensor()};
  }
  throw std::runtime_error("unknown kind");
}

StateDict golden_params(const std::string& name) {
  StateDict sd;
  for (const std::string& p : split_csv(meta(name + ".params"))) sd.insert(p, G(name + ".p." + p));
  return sd;
}

class RnnGolden : public ::testing::TestWithParam<Case> {};

TEST_P(RnnGolden, OutputsStatesAndGradients) {
  const Case& c = GetParam();
  const std::string k = c.name;
  ASSERT_EQ(meta(k + ".config"), c.config()) << "the test's table and the golden file disagree";
  for (DType dt : {DType::Float32, DType::Float64}) {
    SCOPED_TRACE(dtype_name(dt));
    const double tol = dt == DType::Float32 ? 2e-5 : 1e-6;  // the golden values are float64 results rounded
    std::shared_ptr<Module> m = make_module(c);
    m->to(dt);
    m->load_state_dict(golden_params(k));
    Tensor x = leaf(G(k + ".x").to(dt).clone());
    Tensor h0 = c.state ? leaf(G(k + ".h0").to(dt).clone()) : Tensor();
    Tensor c0 = c.state && c.lstm() ? leaf(G(k + ".c0").to(dt).clone()) : Tensor();
    std::vector<Tensor> r = run(c, *m, x, h0, c0);
    EXPECT_EQ(r[0].dtype(), dt);
    EXPECT_TRUE(tensors_near(r[0], G(k + ".out"), tol));
    std::vector<Tensor> roots{r[0]}, grads{G(k + ".go").to(dt)};
    if (!c.cell()) {
      EXPECT_TRUE(tensors_near(r[1], G(k + ".hn"), tol));
      roots.push_back(r[1]);
      grads.push_back(G(k + ".ghn").to(dt));
    }
    if (c.lstm()) {
      EXPECT_TRUE(tensors_near(r[2], G(k + ".cn"), tol));
      roots.push_back(r[2]);
      grads.push_back(G(k + ".gcn").to(dt));
    } else {
      EXPECT_FALSE(r[2].defined());
    }
    autograd::backward(roots, grads);
    EXPECT_TRUE(tensors_near(x.grad(), G(k + ".dx"), tol));
    EXPECT_EQ(has(k + ".dh0"), c.state);
    if (c.state) {
      EXPECT_TRUE(tensors_near(h0.grad(), G(k + ".dh0"), tol));
    }
    if (c0.defined()) {
      EXPECT_TRUE(tensors_near(c0.grad(), G(k + ".dc0"), tol));
    }
    size_t checked = 0;
    for (auto& [name, p] : m->named_parameters()) {
      SCOPED_TRACE(name);
      ASSERT_TRUE(p.grad().defined());
      EXPECT_TRUE(tensors_near(p.grad(), G(k + ".g." + name), tol));
      ++checked;
    }
    EXPECT_EQ(checked, split_csv(meta(k + ".params")).size());
  }
}

INSTANTIATE_TEST_SUITE_P(PyTorch, RnnGolden, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

TEST(RnnGoldenFile, EveryCaseIsTested) {
  std::vector<std::string> tested;
  for (const Case& c : kCases) tested.push_back(c.name);
  EXPECT_EQ(split_csv(meta("cases")), tested);
}

// ------------------------------------------------------------------ parameter names and shapes
TEST(RnnStateDict, NamesAndShapesMatchPyTorch) {
  // Every golden case: PyTorch's named_parameters() order, and the stored shapes.
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    std::shared_ptr<Module> m = make_module(c);
    std::vector<std::string> names;
    for (auto& [name, p] : m->named_parameters()) {
      names.push_back(name);
      EXPECT_EQ(p.sizes(), G(std::string(c.name) + ".p." + name).sizes()) << name;
    }
    EXPECT_EQ(names, split_csv(meta(std::string(c.name) + ".params")));
  }
  // And literally, PyTorch's list for nn.LSTM(4, 5, num_layers=2, bidirectional=True, proj_size=3).
  LSTM lstm(4, 5, {.num_layers = 2, .bidirectional = true, .proj_size = 3});
  const std::vector<std::pair<std::string, Shape>> expected = {
      {"weight_ih_l0", {20, 4}},
      {"weight_hh_l0", {20, 3}},
      {"bias_ih_l0", {20}},
      {"bias_hh_l0", {20}},
      {"weight_hr_l0", {3, 5}},
      {"weight_ih_l0_reverse", {20, 4}},
      {"weight_hh_l0_reverse", {20, 3}},
      {"bias_ih_l0_reverse", {20}},
      {"bias_hh_l0_reverse", {20}},
      {"weight_hr_l0_reverse", {3, 5}},
      {"weight_ih_l1", {20, 6}},
      {"weight_hh_l1", {20, 3}},
      {"bias_ih_l1", {20}},
      {"bias_hh_l1", {20}},
      {"weight_hr_l1", {3, 5}},
      {"weight_ih_l1_reverse", {20, 6}},
      {"weight_hh_l1_reverse", {20, 3}},
      {"bias_ih_l1_reverse", {20}},
      {"bias_hh_l1_reverse", {20}},
      {"weight_hr_l1_reverse", {3, 5}},
  };
  StateDict sd = lstm.state_dict();
  ASSERT_EQ(sd.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(sd.items()[i].first, expected[i].first);
    EXPECT_EQ(sd.items()[i].second.sizes(), expected[i].second) << expected[i].first;
  }
  // nn.GRU(3, 2, bias=False, bidirectional=True) and nn.RNNCell(3, 2)
  GRU gru(3, 2, {.bias = false, .bidirectional = true});
  EXPECT_EQ(gru.state_dict().keys(),
            (std::vector<std::string>{"weight_ih_l0", "weight_hh_l0", "weight_ih_l0_reverse", "weight_hh_l0_reverse"}));
  EXPECT_EQ(gru.state_dict()["weight_ih_l0_reverse"].sizes(), (Shape{6, 3}));  // (3H, in)
  RNNCell cell(3, 2);
  EXPECT_EQ(cell.state_dict().keys(), (std::vector<std::string>{"weight_ih", "weight_hh", "bias_ih", "bias_hh"}));
  EXPECT_EQ(cell.weight_hh.sizes(), (Shape{2, 2}));
  // all_weights: per layer and direction, in registration order
  auto aw = lstm.all_weights();
  ASSERT_EQ(aw.size(), 4u);
  ASSERT_EQ(aw[1].size(), 5u);
  EXPECT_TRUE(equal(aw[1][0], sd["weight_ih_l0_reverse"]));
  EXPECT_TRUE(equal(aw[2][4], sd["weight_hr_l1"]));
}

TEST(RnnInit, UniformInPlusMinusOneOverSqrtHidden) {
  LSTM lstm(3, 16, {.num_layers = 2});
  const double bound = 1.0 / std::sqrt(16.0);
  for (auto& [name, p] : lstm.named_parameters()) {
    auto v = values(p);
    double lo = 1, hi = -1;
    for (double e : v) lo = std::min(lo, e), hi = std::max(hi, e);
    EXPECT_GE(lo, -bound) << name;
    EXPECT_LE(hi, bound) << name;
    EXPECT_LT(lo, -0.8 * bound) << name;  // spread over the range, not a constant
    EXPECT_GT(hi, 0.8 * bound) << name;
  }
}

// ------------------------------------------------------------------ gradcheck
Tensor R64(const Shape& s, uint64_t seed) { return leaf(testing::rnd(s, DType::Float64, seed)); }

void expect_gradcheck(Module& m, const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                      std::vector<Tensor> inputs) {
  m.to(DType::Float64);
  for (Tensor& p : m.parameters()) inputs.push_back(p);
  auto r = autograd::gradcheck(fn, inputs);
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(RnnGradcheck, LstmBidirectionalTwoLayersNonContiguous) {
  LSTM lstm(2, 3, {.num_layers = 2, .bidirectional = true});
  Tensor x = R64({2, 3, 2}, 1), h0 = R64({4, 2, 3}, 2), c0 = R64({4, 2, 3}, 3);  // x stored (N, T, in)
  expect_gradcheck(lstm,
                   [&](const std::vector<Tensor>& in) {
                     Tensor xt = in[0].transpose(0, 1);  // (T, N, in), non-contiguous
                     EXPECT_FALSE(xt.is_contiguous());
                     auto [out, hn, cn] = lstm.forward(xt, {in[1], in[2]});
                     return cat({out.flatten(), hn.flatten(), cn.flatten()});
                   },
                   {x, h0, c0});
}

TEST(RnnGradcheck, LstmProjection) {
  LSTM lstm(2, 3, {.proj_size = 2});
  Tensor x = R64({3, 2, 2}, 4), h0 = R64({1, 2, 2}, 5), c0 = R64({1, 2, 3}, 6);
  expect_gradcheck(lstm,
                   [&](const std::vector<Tensor>& in) {
                     auto [out, hn, cn] = lstm.forward(in[0], {in[1], in[2]});
                     return cat({out.flatten(), hn.flatten(), cn.flatten()});
                   },
                   {x, h0, c0});
}

TEST(RnnGradcheck, GruBatchFirstTwoLayersNonContiguous) {
  GRU gru(2, 3, {.num_layers = 2, .batch_first = true, .bidirectional = true});
  Tensor x = R64({3, 2, 2}, 7), h0 = R64({4, 2, 3}, 8);  // x stored (T, N, in)
  expect_gradcheck(gru,
                   [&](const std::vector<Tensor>& in) {
                     auto [out, hn] = gru.forward(in[0].transpose(0, 1), in[1]);  // (N, T, in), non-contiguous
                     return cat({out.flatten(), hn.flatten()});
                   },
                   {x, h0});
}

TEST(RnnGradcheck, CellsAndTanhRnn) {
  LSTMCell lc(3, 2);
  Tensor x = R64({3, 2}, 9), h = R64({2, 2}, 10), c = R64({2, 2}, 11);
  expect_gradcheck(lc,
                   [&](const std::vector<Tensor>& in) {
                     auto [h2, c2] = lc.forward(in[0].t(), {in[1], in[2]});
                     return cat({h2.flatten(), c2.flatten()});
                   },
                   {x, h, c});
  GRUCell gc(3, 2);
  expect_gradcheck(gc, [&](const std::vector<Tensor>& in) { return gc.forward(in[0].t(), in[1]); }, {x, h});
  RNN rnn(3, 2, {.num_layers = 2});
  Tensor xs = R64({4, 2, 3}, 12);
  expect_gradcheck(rnn, [&](const std::vector<Tensor>& in) { return rnn.forward(in[0]).output; }, {xs});
}

// ------------------------------------------------------------------ dropout between layers
TEST(RnnDropout, EvalIsANoOpTrainDropsBetweenLayersOnly) {
  GRU ref(3, 4, {.num_layers = 2});
  GRU drop(3, 4, {.num_layers = 2, .dropout = 0.5});
  drop.load_state_dict(ref.state_dict());
  Tensor x = testing::rnd({5, 2, 3}, DType::Float32, 1);
  auto [r_out, r_hn] = ref.forward(x);
  drop.eval();
  auto [e_out, e_hn] = drop.forward(x);
  EXPECT_TRUE(equal(e_out, r_out));
  EXPECT_TRUE(equal(e_hn, r_hn));
  drop.train();
  auto [t_out, t_hn] = drop.forward(x);
  EXPECT_FALSE(allclose(t_out, r_out, 1e-3, 1e-3));          // layer 1 saw a dropped input
  EXPECT_TRUE(equal(t_hn.select(0, 0), r_hn.select(0, 0)));  // layer 0 did not
  // A single layer has nothing between layers: no dropout even in training.
  GRU one(3, 4, {.dropout = 0.5}), one_ref(3, 4);
  one.load_state_dict(one_ref.state_dict());
  EXPECT_TRUE(equal(one.forward(x).output, one_ref.forward(x).output));
}

TEST(RnnDropout, ProbabilityOneFeedsZerosToTheNextLayer) {
  LSTM lstm(3, 4, {.num_layers = 2, .dropout = 1.0, .bidirectional = true});
  // Layer 1 alone, as a one-layer LSTM over the (all dropped) zero input (T, N, 2H).
  LSTM top(8, 4, {.bidirectional = true});
  StateDict sd;
  for (auto& [name, t] : lstm.named_parameters())
    if (name.find("_l1") != std::string::npos)
      sd.insert(name.substr(0, name.find("_l1")) + "_l0" + name.substr(name.find("_l1") + 3), t);
  top.load_state_dict(sd);
  Tensor x = testing::rnd({5, 2, 3}, DType::Float32, 2);
  Tensor h0 = testing::rnd({4, 2, 4}, DType::Float32, 3), c0 = testing::rnd({4, 2, 4}, DType::Float32, 4);
  auto [out, hn, cn] = lstm.forward(x, {h0, c0});
  auto [t_out, t_hn, t_cn] = top.forward(zeros({5, 2, 8}), {h0.narrow(0, 2, 2), c0.narrow(0, 2, 2)});
  EXPECT_TRUE(tensors_near(out, t_out, 1e-6));
  EXPECT_TRUE(tensors_near(hn.narrow(0, 2, 2), t_hn, 1e-6));
  EXPECT_TRUE(tensors_near(cn.narrow(0, 2, 2), t_cn, 1e-6));
  lstm.eval();  // and in eval mode layer 1 sees layer 0's real output
  EXPECT_FALSE(allclose(lstm.forward(x, {h0, c0}).output, t_out, 1e-3, 1e-3));
}

// ------------------------------------------------------------------ call forms and hooks
TEST(RnnApi, OperatorRunsHooksAndMatchesForward) {
  LSTM lstm(3, 4, {.batch_first = true});
  Tensor x = testing::rnd({2, 5, 3}, DType::Float32, 5);
  Tensor h0 = testing::rnd({1, 2, 4}, DType::Float32, 6), c0 = testing::rnd({1, 2, 4}, DType::Float32, 7);
  size_t seen_in = 0, seen_out = 0;
  auto handle = lstm.register_forward_hook_multi([&](Module&, const Tensors& in, const Tensors& out) {
    seen_in = in.size();
    seen_out = out.size();
  });
  auto [out, hn, cn] = lstm(x, {h0, c0});
  EXPECT_EQ(seen_in, 3u);
  EXPECT_EQ(seen_out, 3u);
  EXPECT_EQ(out.sizes(), (Shape{2, 5, 4}));
  LSTMOutput direct = lstm.forward(x, {h0, c0});
  EXPECT_TRUE(equal(out, direct.output));
  EXPECT_TRUE(equal(hn, direct.h_n));
  EXPECT_TRUE(equal(cn, direct.c_n));
  // The last step's output of a one-layer unidirectional LSTM is h_n.
  EXPECT_TRUE(equal(out.select(1, 4), hn.select(0, 0)));
  // Through Module&: forward(x) is the output alone, forward_multi the whole result.
  Module& m = lstm;
  EXPECT_TRUE(equal(m.forward(x), lstm.forward(x).output));
  Tensors multi = m(Tensors{x, h0, c0});
  ASSERT_EQ(multi.size(), 3u);
  EXPECT_TRUE(equal(multi[2], cn));
  // Unbatched input equals the batched run on a batch of one.
  GRU gru(3, 4, {.num_layers = 2, .bidirectional = true});
  Tensor xu = testing::rnd({5, 3}, DType::Float32, 8);
  auto [uo, uh] = gru(xu);
  auto [bo, bh] = gru(xu.unsqueeze(1));
  EXPECT_EQ(uo.sizes(), (Shape{5, 8}));
  EXPECT_EQ(uh.sizes(), (Shape{4, 4}));
  EXPECT_TRUE(tensors_near(uo, bo.squeeze(1), 0));
  EXPECT_TRUE(tensors_near(uh, bh.squeeze(1), 0));
  EXPECT_EQ(gru.repr(), "GRU(3, 4, num_layers=2, bidirectional=true)");
}

// ------------------------------------------------------------------ errors
TEST(RnnErrors, MessagesNameTheLayerAndShapes) {
  LSTM lstm(4, 6, {.num_layers = 2});
  EXPECT_WEFT_ERROR(lstm.forward(zeros({5, 3, 4, 1})), "LSTM: expected input to be 2D (T, in) or 3D (T, N, in)");
  EXPECT_WEFT_ERROR(lstm.forward(zeros({5, 3, 7})),
                    "LSTM: input of shape [5, 3, 7] has 7 features but the layer "
                    "was built for input_size=4");
  EXPECT_WEFT_ERROR(lstm.forward(zeros({5, 3, 4}), {zeros({1, 3, 6}), zeros({2, 3, 6})}),
                    "LSTM: expected h_0 of shape [2, 3, 6] for input of shape [5, 3, 4], got [1, 3, 6]");
  EXPECT_WEFT_ERROR(lstm.forward(zeros({5, 4}), {zeros({2, 6}), zeros({2, 1, 6})}),
                    "LSTM: expected c_0 of shape [2, 6] for input of shape [5, 4], got [2, 1, 6]");
  EXPECT_WEFT_ERROR(lstm.forward(zeros({5, 3, 4}), {zeros({2, 3, 6}), Tensor()}), "LSTM: give both h_0 and c_0");
  EXPECT_WEFT_ERROR(lstm.forward(zeros({5, 3, 4}, {DType::Float64})),
                    "LSTM: input dtype float64 does not match the parameters' dtype float32");
  EXPECT_WEFT_ERROR(lstm.forward(zeros({0, 3, 4})), "LSTM: expected a sequence length larger than 0");
  GRU gru(4, 6, {.batch_first = true});
  EXPECT_WEFT_ERROR(gru.forward(zeros({3, 5, 4}), zeros({1, 5, 6})),
                    "GRU: expected h_0 of shape [1, 3, 6] for input of shape [3, 5, 4], got [1, 5, 6]");
  EXPECT_WEFT_ERROR(gru.forward(zeros({3, 5, 4}), zeros({1, 3, 6}, {DType::Float64})),
                    "GRU: h_0 has dtype float64 but the input has dtype float32");
  EXPECT_WEFT_ERROR(gru.forward(zeros({3})), "GRU: expected input to be 2D (T, in) or 3D (N, T, in), got shape [3]");
  Module& m = gru;
  EXPECT_WEFT_ERROR(m(Tensors{zeros({3, 5, 4}), zeros({1, 3, 6}), zeros({1, 3, 6})}),
                    "GRU: forward_multi takes {x} or {x, h_0}, got 3 tensors");
  RNNCell cell(4, 6);
  EXPECT_WEFT_ERROR(cell.forward(zeros({3, 5})), "RNNCell: input of shape [3, 5] has 5 features");
  EXPECT_WEFT_ERROR(cell.forward(zeros({3, 4}), zeros({6})), "RNNCell: expected h of shape [3, 6]");
  EXPECT_WEFT_ERROR(cell.forward(zeros({4}), zeros({1, 6})), "RNNCell: expected h of shape [6] for input of shape [4]");
  EXPECT_WEFT_ERROR(cell.forward(zeros({2, 3, 4})), "RNNCell: expected input to be 1D (in) or 2D (N, in)");
  LSTMCell lc(4, 6);
  EXPECT_WEFT_ERROR(lc.forward(zeros({3, 4}), {Tensor(), zeros({3, 6})}), "LSTMCell: give both h and c or neither");
  EXPECT_WEFT_ERROR(LSTM(4, 6, {.proj_size = 6}), "LSTM: proj_size must be >= 0 and smaller than hidden_size 6");
  EXPECT_WEFT_ERROR(RNN(4, 6, {.dropout = 1.5}), "RNN: dropout should be a number in range [0, 1], got 1.5");
  EXPECT_WEFT_ERROR(GRU(4, 6, {.num_layers = 0}), "GRU: num_layers must be greater than zero");
  EXPECT_WEFT_ERROR(GRUCell(4, 0), "GRUCell: input_size must be >= 0 and hidden_size > 0");
}

}  // namespace
}  // namespace weft::nn
