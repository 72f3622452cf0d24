// The fused-attention graphs as data (core/cuda/sdpa_graph_spec.h) pinned node
// for node against NVIDIA's cudnn-frontend (Note [sdpa graph]): the node list
// each expected table below was transcribed from, in creation order, is
//   forward:  CompositeSDPANode::expand_node (node/scaled_dot_product_flash_attention.h):
//             matmul "bmm1", pointwise "attn_scale", the causal mask
//             (attn_score_modifiers.h sliding_window_mask -> diagonal_band_mask.h
//             CompositeDiagonalBandMaskNode: "gen_row_index", "gen_col_index" with
//             INT32 outputs and the graph's compute type, "row>col" CMP_GE in
//             BOOLEAN, "binary_select"), CompositeSoftmaxNode (softmax.h: "Max",
//             "sub", "exp", "sum", "log", "add" -> Stats, "div"), then "bmm2" with
//             P in the I/O type;
//   backward: CompositeSDPABackwardNode::expand_node: "mul_dO_O" (virtual,
//             strides {h*s_q*d_v, s_q*d_v, h*d_v, 1}), "reduce_dO_o",
//             "scale_dropout_inv" (x one -> softmax_sum, not virtual, float),
//             "matmul_Q_KT", "mul_s_attn_scale", "sub_s_m", then the mask, "exp_s",
//             "reshape_p", "matmul_pT_dO", "matmul_dO_VT" (no dropout: no multiply
//             after it), "sub_dP_softmax_sum", "mul_dP_exp_s", "mul_dS_attn_scale",
//             "reshape_dS", "matmul_dST_Q", "reshape_k", "matmul_dS_K" -> dQ_accum
//             (float, packed, no reordering type), "identity_dQ".
// cudnn-frontend 3929da2 (after v1.23.0). Older frontends differ: up to v1.9 the
// backward masked before subtracting the stats and the index math ran in INT32,
// up to v1.10 dP was multiplied by one, up to v1.7 dQ_accum had the F16x16
// reordering type; softmax_sum was a real tensor in every version.
#include "core/cuda/sdpa_graph_spec.h"

#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/testing.h"

namespace weft::cuda::sdpa_cudnn {
namespace {

using spec::DType;
using spec::Graph;

const Shapes kS{2, 3, 64, 128, 64, 32};  // B, H, L, S, D, Dv

Graph forward(bool causal) {
  return spec::composite_forward(kS, contiguous_layout({2, 3, 64, 64}), contiguous_layout({2, 3, 128, 64}),
                                 contiguous_layout({2, 3, 128, 32}), contiguous_layout({2, 3, 64, 32}), causal);
}

Graph backward(bool causal) {
  return spec::composite_backward(kS, contiguous_layout({2, 3, 64, 64}), contiguous_layout({2, 3, 128, 64}),
                                  contiguous_layout({2, 3, 128, 32}), contiguous_layout({2, 3, 64, 32}),
                                  contiguous_layout({2, 3, 64, 32}), causal);
}

std::vector<std::string> names(const Graph& g) {
  std::vector<std::string> out;
  for (const spec::Node& n : g.nodes) out.push_back(n.name);
  return out;
}

void print(const Graph& g) {
  for (const std::string& line : g.describe()) std::printf("  %s\n", line.c_str());
}

TEST(SdpaGraphSpec, ForwardNodeListIsTheFrontends) {
  const std::vector<std::string> plain = {"bmm1", "attn_scale", "Max", "sub", "exp",
                                          "sum",  "log",        "add", "div", "bmm2"};
  EXPECT_EQ(names(forward(false)), plain);
  const std::vector<std::string> causal = {"bmm1",          "attn_scale", "gen_row_index", "gen_col_index", "row>col",
                                           "binary_select", "Max",        "sub",           "exp",           "sum",
                                           "log",           "add",        "div",           "bmm2"};
  EXPECT_EQ(names(forward(true)), causal);
}

TEST(SdpaGraphSpec, ForwardCausalNodes) {
  const Graph g = forward(true);
  print(g);
  const std::vector<std::string> want = {
      "bmm1 = matmul(Q, K^T) -> bmm1.out float[2, 3, 64, 128]",
      "attn_scale = pointwise:MUL(bmm1.out, Attn_scale) -> attn_scale.out float[2, 3, 64, 128] math float",
      "gen_row_index = pointwise:GEN_INDEX(attn_scale.out) -> gen_row_index.out int32[2, 3, 64, 128] math float "
      "axis 2",
      "gen_col_index = pointwise:GEN_INDEX(attn_scale.out) -> gen_col_index.out int32[2, 3, 64, 128] math float "
      "axis 3",
      "row>col = pointwise:CMP_GE(gen_row_index.out, gen_col_index.out) -> row>col.out bool[2, 3, 64, 128] math bool",
      "binary_select = pointwise:BINARY_SELECT(attn_scale.out, neg_inf, row>col.out) -> binary_select.out "
      "float[2, 3, 64, 128] math float",
      "Max = reduction:MAX(binary_select.out) -> Max.out float[2, 3, 64, 1]",
      "sub = pointwise:SUB(binary_select.out, Max.out) -> sub.out float[2, 3, 64, 128] math float",
      "exp = pointwise:EXP(sub.out) -> exp.out float[2, 3, 64, 128] math float",
      "sum = reduction:ADD(exp.out) -> sum.out float[2, 3, 64, 1]",
      "log = pointwise:LOG(sum.out) -> log.out float[2, 3, 64, 1] math float",
      "add = pointwise:ADD(Max.out, log.out) -> Stats float[2, 3, 64, 1] math float",
      "div = pointwise:DIV(exp.out, sum.out) -> div.out io[2, 3, 64, 128] math float",
      "bmm2 = matmul(div.out, V) -> O io[2, 3, 64, 32]",
  };
  EXPECT_EQ(g.describe(), want);
}

TEST(SdpaGraphSpec, BackwardNodeListIsTheFrontends) {
  const std::vector<std::string> plain = {"mul_dO_O",
                                          "reduce_dO_o",
                                          "scale_dropout_inv",
                                          "matmul_Q_KT",
                                          "mul_s_attn_scale",
                                          "sub_s_m",
                                          "exp_s",
                                          "reshape_p",
                                          "matmul_pT_dO",
                                          "matmul_dO_VT",
                                          "sub_dP_softmax_sum",
                                          "mul_dP_exp_s",
                                          "mul_dS_attn_scale",
                                          "reshape_dS",
                                          "matmul_dST_Q",
                                          "reshape_k",
                                          "matmul_dS_K",
                                          "identity_dQ"};
  EXPECT_EQ(names(backward(false)), plain);
  std::vector<std::string> causal = plain;
  // the mask comes after the stats are subtracted, before exp_s
  causal.insert(causal.begin() + 6, {"gen_row_index", "gen_col_index", "row>col", "binary_select"});
  EXPECT_EQ(names(backward(true)), causal);
}

TEST(SdpaGraphSpec, BackwardCausalNodes) {
  const Graph g = backward(true);
  print(g);
  const std::vector<std::string> want = {
      "mul_dO_O = pointwise:MUL(dO, O) -> mul_dO_O.out float[2, 3, 64, 32] math float",
      "reduce_dO_o = reduction:ADD(mul_dO_O.out) -> reduce_dO_o.out float[2, 3, 64, 1]",
      "scale_dropout_inv = pointwise:MUL(reduce_dO_o.out, one) -> softmax_sum float[2, 3, 64, 1] math float",
      "matmul_Q_KT = matmul(Q, K^T) -> matmul_Q_KT.out float[2, 3, 64, 128]",
      "mul_s_attn_scale = pointwise:MUL(matmul_Q_KT.out, Attn_scale) -> mul_s_attn_scale.out float[2, 3, 64, 128] "
      "math float",
      "sub_s_m = pointwise:SUB(mul_s_attn_scale.out, Stats) -> sub_s_m.out float[2, 3, 64, 128] math float",
      "gen_row_index = pointwise:GEN_INDEX(sub_s_m.out) -> gen_row_index.out int32[2, 3, 64, 128] math float axis 2",
      "gen_col_index = pointwise:GEN_INDEX(sub_s_m.out) -> gen_col_index.out int32[2, 3, 64, 128] math float axis 3",
      "row>col = pointwise:CMP_GE(gen_row_index.out, gen_col_index.out) -> row>col.out bool[2, 3, 64, 128] math bool",
      "binary_select = pointwise:BINARY_SELECT(sub_s_m.out, neg_inf, row>col.out) -> binary_select.out "
      "float[2, 3, 64, 128] math float",
      "exp_s = pointwise:EXP(binary_select.out) -> exp_s.out float[2, 3, 64, 128] math float",
      "reshape_p = reshape(exp_s.out) -> reshape_p.out io[2, 3, 128, 64]",
      "matmul_pT_dO = matmul(reshape_p.out, dO) -> dV io[2, 3, 128, 32]",
      "matmul_dO_VT = matmul(dO, V^T) -> matmul_dO_VT.out float[2, 3, 64, 128]",
      "sub_dP_softmax_sum = pointwise:SUB(matmul_dO_VT.out, softmax_sum) -> sub_dP_softmax_sum.out "
      "float[2, 3, 64, 128] math float",
      "mul_dP_exp_s = pointwise:MUL(sub_dP_softmax_sum.out, exp_s.out) -> mul_dP_exp_s.out float[2, 3, 64, 128] "
      "math float",
      "mul_dS_attn_scale = pointwise:MUL(mul_dP_exp_s.out, Attn_scale) -> mul_dS_attn_scale.out "
      "float[2, 3, 64, 128] math float",
      "reshape_dS = reshape(mul_dS_attn_scale.out) -> reshape_dS.out io[2, 3, 128, 64]",
      "matmul_dST_Q = matmul(reshape_dS.out, Q) -> dK io[2, 3, 128, 64]",
      "reshape_k = reshape(K^T) -> reshape_k.out float[2, 3, 128, 64]",
      "matmul_dS_K = matmul(mul_dS_attn_scale.out, reshape_k.out) -> dQ_accum float[2, 3, 64, 64]",
      "identity_dQ = pointwise:IDENTITY(dQ_accum) -> dQ io[2, 3, 64, 64] math float",
  };
  EXPECT_EQ(g.describe(), want);
}

const spec::Tensor& tensor(const Graph& g, const std::string& name) {
  for (const spec::Tensor& t : g.tensors)
    if (t.name == name) return t;
  ADD_FAILURE() << "no tensor " << name;
  return g.tensors.front();
}

TEST(SdpaGraphSpec, TensorsAreTheFrontends) {
  const Graph g = backward(true);
  // K^T and V^T: the same memory as K (B, H, S, D) and V with the last two dims swapped
  EXPECT_EQ(tensor(g, "K^T").dims, (Dims{2, 3, 64, 128}));
  EXPECT_EQ(tensor(g, "K^T").strides, (Dims{128 * 64 * 3, 128 * 64, 1, 64}));
  EXPECT_EQ(tensor(g, "V^T").strides, (Dims{128 * 32 * 3, 128 * 32, 1, 32}));
  // dO * O: the frontend's virtual strides {h*s_q*d_v, s_q*d_v, h*d_v, 1}
  EXPECT_EQ(g.output_of("mul_dO_O").strides, (Dims{3 * 64 * 32, 64 * 32, 3 * 32, 1}));
  // softmax_sum and dQ_accum: real float32 buffers, packed
  for (const char* n : {"softmax_sum", "dQ_accum"}) {
    EXPECT_FALSE(tensor(g, n).is_virtual) << n;
    EXPECT_EQ(tensor(g, n).dtype, DType::kFloat) << n;
  }
  EXPECT_EQ(tensor(g, "softmax_sum").uid, kRowSum);
  EXPECT_EQ(tensor(g, "softmax_sum").strides, (Dims{3 * 64, 64, 1, 1}));
  EXPECT_EQ(tensor(g, "dQ_accum").uid, kdQAccum);
  EXPECT_EQ(tensor(g, "dQ_accum").strides, (Dims{3 * 64 * 64, 64 * 64, 64, 1}));
  // the transposes of P and dS over the same elements
  EXPECT_EQ(g.output_of("reshape_p").strides, (Dims{3 * 64 * 128, 64 * 128, 1, 128}));
  EXPECT_EQ(g.output_of("reshape_dS").strides, (Dims{3 * 64 * 128, 64 * 128, 1, 128}));
  // K for dQ: K^T's memory read as (B, H, S, D)
  EXPECT_EQ(g.output_of("reshape_k").strides, (Dims{128 * 64 * 3, 128 * 64, 64, 1}));
  // scalars are float32 by value
  for (const char* n : {"Attn_scale", "one", "neg_inf"}) {
    EXPECT_TRUE(tensor(g, n).by_value) << n;
    EXPECT_EQ(tensor(g, n).dims, (Dims{1, 1, 1, 1})) << n;
  }
  EXPECT_EQ(tensor(g, "neg_inf").uid, kFill);
  EXPECT_EQ(tensor(g, "one").uid, kOne);
}

TEST(SdpaGraphSpec, StridedInputsKeepTheirStrides) {
  // q (B, L, H, D) memory viewed as (B, H, L, D): strides {L*H*D, D, H*D, 1}
  const Layout q{{2, 3, 64, 64}, {64 * 3 * 64, 64, 3 * 64, 1}};
  const Graph g = spec::composite_forward(kS, q, contiguous_layout({2, 3, 128, 64}), contiguous_layout({2, 3, 128, 32}),
                                          contiguous_layout({2, 3, 64, 32}), false);
  EXPECT_EQ(tensor(g, "Q").strides, q.strides);
}

TEST(SdpaGraphSpec, WellFormed) {
  for (const Graph& g : {forward(false), forward(true), backward(false), backward(true)}) {
    std::set<int64_t> uids;
    for (const spec::Tensor& t : g.tensors) {
      EXPECT_TRUE(uids.insert(t.uid).second) << "duplicate uid " << t.uid;
      EXPECT_EQ(t.is_virtual, t.uid >= kFirstVirtualUid) << t.name;
    }
    // every tensor a node reads is bound or written by an earlier node; each is written once
    std::set<int> written;
    for (size_t i = 0; i < g.tensors.size(); ++i)
      if (!g.tensors[i].is_virtual) written.insert(static_cast<int>(i));
    std::set<int> outputs;
    for (const spec::Node& n : g.nodes) {
      for (int in : n.inputs) EXPECT_TRUE(written.count(in)) << n.name << " reads " << g.tensors[in].name;
      EXPECT_TRUE(outputs.insert(n.output).second) << n.name;
      written.insert(n.output);
    }
  }
}

TEST(SdpaGraphSpec, MaskFillFollowsTheFrontend) {
  EXPECT_EQ(mask_fill(90500), std::numeric_limits<float>::lowest());
  EXPECT_TRUE(std::isinf(mask_fill(91000)) && mask_fill(91000) < 0);
  EXPECT_TRUE(std::isinf(mask_fill(91900)) && mask_fill(91900) < 0);
}

}  // namespace
}  // namespace weft::cuda::sdpa_cudnn
