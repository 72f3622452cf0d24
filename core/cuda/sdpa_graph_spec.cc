// The composite fused-attention graphs as data (core/cuda/sdpa_graph_spec.h,
// Note [sdpa graph]).
#include "core/cuda/sdpa_graph_spec.h"

#include <limits>

#include "core/error.h"
#include "core/shape.h"

namespace weft::cuda::sdpa_cudnn {

Dims packed(const Dims& d) { return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1}; }
Dims swap_last(const Dims& d) { return {d[0], d[1], d[3], d[2]}; }
Layout contiguous_layout(const Dims& dims) { return {dims, packed(dims)}; }

float mask_fill(int64_t cudnn_version) {
  return cudnn_version < 91000 ? std::numeric_limits<float>::lowest() : -std::numeric_limits<float>::infinity();
}

namespace spec {
namespace {

// Builds a Graph in the frontend's creation order.
class Builder {
 public:
  int bound(const std::string& name, int64_t uid, DType dt, const Dims& dims, const Dims& strides) {
    g_.tensors.push_back({name, uid, dt, dims, strides, false, false});
    return last();
  }
  int bound(const std::string& name, int64_t uid, DType dt, const Layout& l) {
    return bound(name, uid, dt, l.dims, l.strides);
  }
  int scalar(const std::string& name, int64_t uid) {
    g_.tensors.push_back({name, uid, DType::kFloat, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true});
    return last();
  }
  // A node whose output is a new virtual tensor named after it.
  int node(const std::string& name, Op op, Mode mode, std::vector<int> in, DType out_dt, const Dims& dims,
           const Dims& strides, DType math = DType::kFloat, int64_t axis = -1) {
    g_.tensors.push_back({name + ".out", next_virtual_++, out_dt, dims, strides, true, false});
    return into(name, op, mode, std::move(in), last(), math, axis);
  }
  // A node writing an existing (bound) tensor.
  int into(const std::string& name, Op op, Mode mode, std::vector<int> in, int out, DType math = DType::kFloat,
           int64_t axis = -1) {
    g_.nodes.push_back({name, op, mode, std::move(in), out, math, axis});
    return out;
  }
  // Pointwise with the output shaped like its first input.
  int pw(const std::string& name, Mode mode, std::vector<int> in, DType out_dt = DType::kFloat,
         DType math = DType::kFloat, int64_t axis = -1) {
    const Tensor& x = g_.tensors[static_cast<size_t>(in[0])];
    const Dims dims = x.dims, strides = x.strides;
    return node(name, Op::kPointwise, mode, std::move(in), out_dt, dims, strides, math, axis);
  }
  Graph take() { return std::move(g_); }

 private:
  int last() const { return static_cast<int>(g_.tensors.size()) - 1; }
  Graph g_;
  int64_t next_virtual_ = kFirstVirtualUid;
};

// The frontend's CompositeDiagonalBandMaskNode for a top-left right bound of 0
// (causal): keeps score[i][j] where row i >= column j, the fill elsewhere.
int causal_mask(Builder& b, int score, int fill) {
  const int row = b.pw("gen_row_index", Mode::kGenIndex, {score}, DType::kInt32, DType::kFloat, 2);
  const int col = b.pw("gen_col_index", Mode::kGenIndex, {score}, DType::kInt32, DType::kFloat, 3);
  const int keep = b.pw("row>col", Mode::kCmpGe, {row, col}, DType::kBool, DType::kBool);
  return b.pw("binary_select", Mode::kBinarySelect, {score, fill, keep});
}

}  // namespace

const char* name(DType d) {
  switch (d) {
    case DType::kIo: return "io";
    case DType::kFloat: return "float";
    case DType::kInt32: return "int32";
    case DType::kBool: return "bool";
  }
  return "?";
}

const char* name(Mode m) {
  switch (m) {
    case Mode::kNone: return "";
    case Mode::kMul: return "MUL";
    case Mode::kSub: return "SUB";
    case Mode::kAdd: return "ADD";
    case Mode::kDiv: return "DIV";
    case Mode::kExp: return "EXP";
    case Mode::kLog: return "LOG";
    case Mode::kIdentity: return "IDENTITY";
    case Mode::kGenIndex: return "GEN_INDEX";
    case Mode::kCmpGe: return "CMP_GE";
    case Mode::kBinarySelect: return "BINARY_SELECT";
    case Mode::kMax: return "MAX";
    case Mode::kSum: return "ADD";
  }
  return "?";
}

std::vector<std::string> Graph::describe() const {
  std::vector<std::string> out;
  for (const Node& n : nodes) {
    std::string s = n.name + " = ";
    switch (n.op) {
      case Op::kMatmul: s += "matmul"; break;
      case Op::kPointwise: s += std::string("pointwise:") + spec::name(n.mode); break;
      case Op::kReduction: s += std::string("reduction:") + spec::name(n.mode); break;
      case Op::kReshape: s += "reshape"; break;
    }
    s += "(";
    for (size_t i = 0; i < n.inputs.size(); ++i) s += (i ? ", " : "") + tensors[static_cast<size_t>(n.inputs[i])].name;
    const Tensor& y = tensors[static_cast<size_t>(n.output)];
    s += ") -> " + y.name + " " + spec::name(y.dtype) + shape_str(Shape(y.dims.begin(), y.dims.end()));
    if (n.op == Op::kPointwise) s += std::string(" math ") + spec::name(n.math);
    if (n.axis >= 0) s += " axis " + std::to_string(n.axis);
    out.push_back(s);
  }
  return out;
}

const Tensor& Graph::output_of(const std::string& node) const {
  for (const Node& n : nodes)
    if (n.name == node) return tensors[static_cast<size_t>(n.output)];
  WEFT_ERROR("sdpa graph: no node named '", node, "'");
}

Graph composite_forward(const Shapes& s, const Layout& q, const Layout& k, const Layout& v, const Layout& o,
                        bool causal) {
  const Dims sd = s.scores(), ss = packed(sd), rd = s.rows(), rs = packed(rd);
  Builder b;
  const int Q = b.bound("Q", kQ, DType::kIo, q);
  const int KT = b.bound("K^T", kK, DType::kIo, swap_last(k.dims), swap_last(k.strides));  // same memory as K
  const int V = b.bound("V", kV, DType::kIo, v);
  const int O = b.bound("O", kO, DType::kIo, o);
  const int stats = b.bound("Stats", kStats, DType::kFloat, rd, rs);
  const int scale = b.scalar("Attn_scale", kScale);
  int last = b.node("bmm1", Op::kMatmul, Mode::kNone, {Q, KT}, DType::kFloat, sd, ss);
  last = b.pw("attn_scale", Mode::kMul, {last, scale});
  if (causal) last = causal_mask(b, last, b.scalar("neg_inf", kFill));
  // CompositeSoftmaxNode with Stats
  const int mx = b.node("Max", Op::kReduction, Mode::kMax, {last}, DType::kFloat, rd, rs);
  const int sub = b.pw("sub", Mode::kSub, {last, mx});
  const int e = b.pw("exp", Mode::kExp, {sub});
  const int z = b.node("sum", Op::kReduction, Mode::kSum, {e}, DType::kFloat, rd, rs);
  const int log_z = b.pw("log", Mode::kLog, {z});
  b.into("add", Op::kPointwise, Mode::kAdd, {mx, log_z}, stats);
  const int p = b.pw("div", Mode::kDiv, {e, z}, DType::kIo);  // P in the I/O type: bmm2's A operand
  b.into("bmm2", Op::kMatmul, Mode::kNone, {p, V}, O);
  return b.take();
}

Graph composite_backward(const Shapes& s, const Layout& q, const Layout& k, const Layout& v, const Layout& o,
                         const Layout& d_o, bool causal) {
  const Dims sd = s.scores(), ss = packed(sd), rd = s.rows(), rs = packed(rd);
  const Dims td{s.B, s.H, s.S, s.L}, ts{s.H * s.L * s.S, s.L * s.S, 1, s.S};  // (S, L) transpose of scores
  Builder b;
  const int Q = b.bound("Q", kQ, DType::kIo, q);
  const int KT = b.bound("K^T", kK, DType::kIo, swap_last(k.dims), swap_last(k.strides));  // (B, H, D, S)
  const int VT = b.bound("V^T", kV, DType::kIo, swap_last(v.dims), swap_last(v.strides));  // (B, H, Dv, S)
  const int O = b.bound("O", kO, DType::kIo, o);
  const int dO = b.bound("dO", kdO, DType::kIo, d_o);
  const int stats = b.bound("Stats", kStats, DType::kFloat, rd, rs);
  const int dQ = b.bound("dQ", kdQ, DType::kIo, q.dims, packed(q.dims));
  const int dK = b.bound("dK", kdK, DType::kIo, k.dims, packed(k.dims));
  const int dV = b.bound("dV", kdV, DType::kIo, v.dims, packed(v.dims));
  const int scale = b.scalar("Attn_scale", kScale);
  const int one = b.scalar("one", kOne);
  const int fill = causal ? b.scalar("neg_inf", kFill) : -1;

  // softmax_sum = sum_j dO * O (x the dropout slot's 1), a float32 buffer
  const Dims dod{s.B, s.H, s.L, s.Dv}, dos{s.H * s.L * s.Dv, s.L * s.Dv, s.H * s.Dv, 1};  // the frontend's strides
  int last = b.node("mul_dO_O", Op::kPointwise, Mode::kMul, {dO, O}, DType::kFloat, dod, dos);
  last = b.node("reduce_dO_o", Op::kReduction, Mode::kSum, {last}, DType::kFloat, rd, rs);
  const int row_sum = b.bound("softmax_sum", kRowSum, DType::kFloat, rd, rs);
  b.into("scale_dropout_inv", Op::kPointwise, Mode::kMul, {last, one}, row_sum);

  // P = exp(Q K^T * scale - Stats), masked after the stats
  last = b.node("matmul_Q_KT", Op::kMatmul, Mode::kNone, {Q, KT}, DType::kFloat, sd, ss);
  last = b.pw("mul_s_attn_scale", Mode::kMul, {last, scale});
  last = b.pw("sub_s_m", Mode::kSub, {last, stats});
  if (causal) last = causal_mask(b, last, fill);
  const int p = b.pw("exp_s", Mode::kExp, {last});

  // dV = P^T dO
  last = b.node("reshape_p", Op::kReshape, Mode::kNone, {p}, DType::kIo, td, ts);
  b.into("matmul_pT_dO", Op::kMatmul, Mode::kNone, {last, dO}, dV);

  // dS = (dO V^T - softmax_sum) * P * scale
  last = b.node("matmul_dO_VT", Op::kMatmul, Mode::kNone, {dO, VT}, DType::kFloat, sd, ss);
  last = b.pw("sub_dP_softmax_sum", Mode::kSub, {last, row_sum});
  last = b.pw("mul_dP_exp_s", Mode::kMul, {last, p});
  const int ds = b.pw("mul_dS_attn_scale", Mode::kMul, {last, scale});

  // dK = dS^T Q
  last = b.node("reshape_dS", Op::kReshape, Mode::kNone, {ds}, DType::kIo, td, ts);
  b.into("matmul_dST_Q", Op::kMatmul, Mode::kNone, {last, Q}, dK);

  // dQ = dS K through a float32 accumulator
  const Dims kt_dims = swap_last(k.dims), kt_strides = swap_last(k.strides);
  last = b.node("reshape_k", Op::kReshape, Mode::kNone, {KT}, DType::kFloat, swap_last(kt_dims), swap_last(kt_strides));
  const int dq_accum = b.bound("dQ_accum", kdQAccum, DType::kFloat, q.dims, packed(q.dims));
  b.into("matmul_dS_K", Op::kMatmul, Mode::kNone, {ds, last}, dq_accum);
  b.into("identity_dQ", Op::kPointwise, Mode::kIdentity, {dq_accum}, dQ);
  return b.take();
}

}  // namespace spec
}  // namespace weft::cuda::sdpa_cudnn
