// The composite fused-attention graphs as data: the list of tensors and nodes
// that core/cuda/attention_cudnn_graphs.cc lowers onto cuDNN's backend API. Free
// of CUDA so the node list is printed and compared on any machine
// (tests/cuda/sdpa_graph_spec_test.cc pins it against NVIDIA's cudnn-frontend).
//
// Note [sdpa graph]: cuDNN's fused flash-attention engines pattern-match the
// operation graph cudnn-frontend builds for its SDPA nodes, so the graph is
// built node for node as the frontend's CompositeSDPANode (forward, with
// CompositeSoftmaxNode) and CompositeSDPABackwardNode (backward) do for
// non-paged MHA without bias, alibi, padding or dropout, with causal masking as
// its CompositeDiagonalBandMaskNode (top-left diagonal, right bound 0). The
// reference is cudnn-frontend at 3929da2 (after v1.23.0; the graph of v1.11 and
// later for these options; the composite path is what the frontend builds
// for cuDNN before 9.21), nodes named as the frontend names them:
//   forward:  bmm1 = Q K^T; attn_scale; [gen_row_index, gen_col_index
//             (GEN_INDEX, INT32 out, float math), row>col (CMP_GE, boolean),
//             binary_select(S, fill, mask)]; softmax: Max, sub, exp, sum, log,
//             add (-> Stats = max + log sum), div (-> P in the I/O type);
//             bmm2 = P V -> O.
//   backward: mul_dO_O, reduce_dO_o, scale_dropout_inv (x 1 -> softmax_sum, a
//             real float32 buffer); matmul_Q_KT, mul_s_attn_scale, sub_s_m
//             (- Stats), [the mask, after the stats], exp_s, reshape_p,
//             matmul_pT_dO -> dV; matmul_dO_VT, sub_dP_softmax_sum,
//             mul_dP_exp_s, mul_dS_attn_scale, reshape_dS, matmul_dST_Q -> dK;
//             reshape_k, matmul_dS_K -> dQ_accum (float32, no reordering),
//             identity_dQ -> dQ.
//   The mask's fill is the lowest float before cuDNN 9.10, -inf from 9.10
//   (the frontend's get_negative_inf_value).
//
// Contract: Q, K, V, O and dO keep their own strides (Layout); Stats, dQ, dK, dV
// are packed. Bound tensors carry the Uid values below (attention_cudnn.cc binds
// them); virtual tensors get uids from kFirstVirtualUid up in creation order.
// Every node's inputs precede it. describe() is one line per node:
// "name = op(inputs) -> output dtype[dims]".
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace weft::cuda::sdpa_cudnn {

using Dims = std::array<int64_t, 4>;

// Row-major strides of a packed tensor with dims d; d with its last two entries swapped.
Dims packed(const Dims& d);
Dims swap_last(const Dims& d);

// Unique ids of the tensors bound in variant packs.
enum Uid : int64_t {
  kQ = 1,
  kK = 2,
  kV = 3,
  kO = 4,
  kStats = 5,
  kScale = 6,
  kFill = 7,
  kdO = 8,
  kdQ = 9,
  kdK = 10,
  kdV = 11,
  kOne = 12,
  kRowSum = 13,
  kdQAccum = 14,
};
inline constexpr int64_t kFirstVirtualUid = 100;

// Batch, heads, query length, key length, head dims of q/k and of v.
struct Shapes {
  int64_t B, H, L, S, D, Dv;
  Dims scores() const { return {B, H, L, S}; }
  Dims rows() const { return {B, H, L, 1}; }
};

// A 4-d tensor as cuDNN addresses it: dims, and strides made positive (a size-1 dim
// gets the stride a packed layout would give it; its value is never used).
struct Layout {
  Dims dims{}, strides{};
};
Layout contiguous_layout(const Dims& dims);

// The mask's fill value for a cuDNN version (cudnnGetVersion()).
float mask_fill(int64_t cudnn_version);

namespace spec {

enum class DType { kIo, kFloat, kInt32, kBool };  // kIo: the graph's float16/bfloat16
enum class Op { kMatmul, kPointwise, kReduction, kReshape };
enum class Mode {
  kNone,  // matmul, reshape
  kMul,
  kSub,
  kAdd,
  kDiv,
  kExp,
  kLog,
  kIdentity,
  kGenIndex,
  kCmpGe,
  kBinarySelect,
  kMax,  // reductions
  kSum,
};

struct Tensor {
  std::string name;
  int64_t uid;
  DType dtype;
  Dims dims, strides;
  bool is_virtual;
  bool by_value;  // a float32 scalar passed by value
};

struct Node {
  std::string name;
  Op op;
  Mode mode;
  std::vector<int> inputs;  // tensor indices: x[, b[, t]] (pointwise), a, b (matmul)
  int output;
  DType math;    // pointwise math precision; matmul and reduction compute in float
  int64_t axis;  // GEN_INDEX only, else -1
};

struct Graph {
  std::vector<Tensor> tensors;
  std::vector<Node> nodes;
  std::vector<std::string> describe() const;
  const Tensor& output_of(const std::string& node) const;
};

const char* name(DType d);
const char* name(Mode m);

Graph composite_forward(const Shapes& s, const Layout& q, const Layout& k, const Layout& v, const Layout& o,
                        bool causal);
Graph composite_backward(const Shapes& s, const Layout& q, const Layout& k, const Layout& v, const Layout& o,
                         const Layout& d_o, bool causal);

}  // namespace spec
}  // namespace weft::cuda::sdpa_cudnn
