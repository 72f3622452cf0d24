// Fused-attention lowerings onto cuDNN graphs (core/cuda/attention_cudnn_graphs.h).
#include "core/cuda/attention_cudnn_graphs.h"

#include <cstdint>

#include "core/ops.h"

namespace weft::cuda::sdpa_cudnn {

using cudnn_graph::DescP;
using cudnn_graph::finalize_plan;
using cudnn_graph::GraphBuilder;
using cudnn_graph::make_desc;
using cudnn_graph::packed_strides;
using cudnn_graph::swap_last;
using cudnn_graph::Unsupported;

bool describe(const Tensor& t, Layout& l) {
  for (int d = 0; d < 4; ++d) {
    l.dims[d] = t.size(d);
    l.strides[d] = t.stride(d);
  }
  if (l.dims[3] != 1 && l.strides[3] != 1) return false;
  l.strides[3] = 1;
  for (int d = 2; d >= 0; --d)
    if (l.dims[d] == 1) l.strides[d] = l.dims[d + 1] * l.strides[d + 1];
  for (int d = 0; d < 3; ++d)
    if (l.strides[d] <= 0 || l.strides[d] % 8 != 0) return false;
  return reinterpret_cast<uintptr_t>(t.raw_data()) % 16 == 0;
}

bool describe_or_copy(Tensor& t, Layout& l) {
  if (describe(t, l)) return true;
  t = clone(t.detach());  // contiguous, freshly allocated (aligned)
  return describe(t, l);
}

Layout contiguous_layout(const Dims& dims) { return {dims, packed_strides(dims)}; }

DescP causal_mask(GraphBuilder& g, const DescP& s, const Dims& dims, const Dims& strides) {
  DescP fill = g.scalar(kFill);
  DescP row = g.virt(CUDNN_DATA_INT32, dims, strides);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, nullptr, row, CUDNN_DATA_FLOAT, /*axis=*/2);
  DescP col = g.virt(CUDNN_DATA_INT32, dims, strides);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, nullptr, col, CUDNN_DATA_FLOAT, /*axis=*/3);
  DescP keep = g.virt(CUDNN_DATA_BOOLEAN, dims, strides);
  g.pointwise(CUDNN_POINTWISE_CMP_GE, row, col, nullptr, keep, CUDNN_DATA_BOOLEAN);
  DescP out = g.virt(CUDNN_DATA_FLOAT, dims, strides);
  g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, s, fill, keep, out);  // y = keep ? s : fill
  return out;
}

std::shared_ptr<Plan> native_forward(cudnnHandle_t h, cudnnDataType_t io, const Shapes& s, const Layout& q,
                                     const Layout& k, const Layout& v, const Layout& o) {
#if CUDNN_VERSION >= 91300
  GraphBuilder g;
  DescP Q = g.tensor(kQ, io, q.dims, q.strides), K = g.tensor(kK, io, k.dims, k.strides),
        V = g.tensor(kV, io, v.dims, v.strides), O = g.tensor(kO, io, o.dims, o.strides),
        St = g.tensor(kStats, CUDNN_DATA_FLOAT, s.rows(), packed_strides(s.rows())), Sc = g.scalar(kScale);
  DescP op = make_desc(CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR, "SDPA forward operation");
  op->set_desc(CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, *Q);
  op->set_desc(CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, *K);  // K itself (B, H, S, D), not K^T
  op->set_desc(CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, *V);
  op->set_desc(CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, *O);
  op->set_desc(CUDNN_ATTR_OPERATION_SDPA_FWD_STATSDESC, *St);
  op->set_desc(CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, *Sc);
  g.add_op(op);
  return finalize_plan(g, h);
#else
  (void)h, (void)io, (void)s, (void)q, (void)k, (void)v, (void)o;
  throw Unsupported{"built against cuDNN headers older than 9.13"};
#endif
}

std::shared_ptr<Plan> native_backward(cudnnHandle_t h, cudnnDataType_t io, const Shapes& s, const Layout& q,
                                      const Layout& k, const Layout& v, const Layout& o, const Layout& d_o) {
#if CUDNN_VERSION >= 91700
  GraphBuilder g;
  DescP Q = g.tensor(kQ, io, q.dims, q.strides), K = g.tensor(kK, io, k.dims, k.strides),
        V = g.tensor(kV, io, v.dims, v.strides), O = g.tensor(kO, io, o.dims, o.strides),
        dO = g.tensor(kdO, io, d_o.dims, d_o.strides),
        St = g.tensor(kStats, CUDNN_DATA_FLOAT, s.rows(), packed_strides(s.rows())), Sc = g.scalar(kScale),
        dQ = g.tensor(kdQ, io, q.dims, packed_strides(q.dims)), dK = g.tensor(kdK, io, k.dims, packed_strides(k.dims)),
        dV = g.tensor(kdV, io, v.dims, packed_strides(v.dims));
  DescP op = make_desc(CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR, "SDPA backward operation");
  op->set_desc(CUDNN_ATTR_OPERATION_SDPA_BWD_QDESC, *Q);
  op->set_desc(CUDNN_ATTR_OPERATION_SDPA_BWD_KDESC, *K);
  op->set_desc(CUDNN_ATTR_OPERATION_SDPA_BWD_VDESC, *V);
  op->set_desc(CUDNN_ATTR_OPERATION_SDPA_BWD_ODESC, *O);
  op->set_desc(CUDNN_ATTR_OPERATION_SDPA_BWD_STATSDESC, *St);
  op->set_desc(CUDNN_ATTR_OPERATION_SDPA_BWD_SCALEDESC, *Sc);
  op->set_desc(CUDNN_ATTR_OPERATION_SDPA_BWD_DQDESC, *dQ);
  op->set_desc(CUDNN_ATTR_OPERATION_SDPA_BWD_DKDESC, *dK);
  op->set_desc(CUDNN_ATTR_OPERATION_SDPA_BWD_DVDESC, *dV);
  op->set_desc(CUDNN_ATTR_OPERATION_SDPA_BWD_DODDESC, *dO);
  g.add_op(op);
  return finalize_plan(g, h);
#else
  (void)h, (void)io, (void)s, (void)q, (void)k, (void)v, (void)o, (void)d_o;
  throw Unsupported{"built against cuDNN headers older than 9.17"};
#endif
}

std::shared_ptr<Plan> composite_forward(cudnnHandle_t h, cudnnDataType_t io, const Shapes& s, const Layout& q,
                                        const Layout& k, const Layout& v, const Layout& o, bool causal) {
  const Dims sd = s.scores(), ss = packed_strides(sd), rd = s.rows(), rs = packed_strides(rd);
  GraphBuilder g;
  DescP Q = g.tensor(kQ, io, q.dims, q.strides);
  DescP KT = g.tensor(kK, io, swap_last(k.dims), swap_last(k.strides));  // K^T (B, H, D, S): same memory
  DescP V = g.tensor(kV, io, v.dims, v.strides);
  DescP O = g.tensor(kO, io, o.dims, o.strides);
  DescP St = g.tensor(kStats, CUDNN_DATA_FLOAT, rd, rs);
  DescP scale = g.scalar(kScale);

  DescP qk = g.virt(CUDNN_DATA_FLOAT, sd, ss);
  g.matmul(Q, KT, qk);  // Q K^T (B, H, L, S)
  DescP scores = g.virt(CUDNN_DATA_FLOAT, sd, ss);
  g.binary(CUDNN_POINTWISE_MUL, qk, scale, scores);
  if (causal) scores = causal_mask(g, scores, sd, ss);
  DescP mx = g.virt(CUDNN_DATA_FLOAT, rd, rs);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, scores, mx);  // M (B, H, L, 1)
  DescP shifted = g.virt(CUDNN_DATA_FLOAT, sd, ss);
  g.binary(CUDNN_POINTWISE_SUB, scores, mx, shifted);
  DescP e = g.virt(CUDNN_DATA_FLOAT, sd, ss);
  g.unary(CUDNN_POINTWISE_EXP, shifted, e);
  DescP z = g.virt(CUDNN_DATA_FLOAT, rd, rs);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, e, z);  // Z (B, H, L, 1)
  DescP log_z = g.virt(CUDNN_DATA_FLOAT, rd, rs);
  g.unary(CUDNN_POINTWISE_LOG, z, log_z);
  g.binary(CUDNN_POINTWISE_ADD, mx, log_z, St);  // stats = M + log Z
  DescP p = g.virt(io, sd, ss);                  // P in the I/O type: the second GEMM's A operand
  g.binary(CUDNN_POINTWISE_DIV, e, z, p);
  g.matmul(p, V, O);
  return finalize_plan(g, h);
}

std::shared_ptr<Plan> composite_backward(cudnnHandle_t h, cudnnDataType_t io, const Shapes& s, const Layout& q,
                                         const Layout& k, const Layout& v, const Layout& o, const Layout& d_o,
                                         bool causal) {
  const Dims sd = s.scores(), ss = packed_strides(sd), rd = s.rows(), rs = packed_strides(rd);
  const Dims td{s.B, s.H, s.S, s.L}, ts{s.H * s.L * s.S, s.L * s.S, 1, s.S};  // (S, L) transpose of scores
  GraphBuilder g;
  DescP Q = g.tensor(kQ, io, q.dims, q.strides);
  DescP KT = g.tensor(kK, io, swap_last(k.dims), swap_last(k.strides));  // (B, H, D, S)
  DescP VT = g.tensor(kV, io, swap_last(v.dims), swap_last(v.strides));  // (B, H, Dv, S)
  DescP O = g.tensor(kO, io, o.dims, o.strides);
  DescP dO = g.tensor(kdO, io, d_o.dims, d_o.strides);
  DescP St = g.tensor(kStats, CUDNN_DATA_FLOAT, rd, rs);
  DescP dQ = g.tensor(kdQ, io, q.dims, packed_strides(q.dims));
  DescP dK = g.tensor(kdK, io, k.dims, packed_strides(k.dims));
  DescP dV = g.tensor(kdV, io, v.dims, packed_strides(v.dims));
  DescP scale = g.scalar(kScale), one = g.scalar(kOne);
  DescP row_sum = g.tensor(kRowSum, CUDNN_DATA_FLOAT, rd, rs);                            // float32 buffer
  DescP dq_accum = g.tensor(kdQAccum, CUDNN_DATA_FLOAT, q.dims, packed_strides(q.dims));  // float32 buffer

  // row_sum = sum_j dO * O (B, H, L, 1)
  DescP d_o_o = g.virt(CUDNN_DATA_FLOAT, o.dims, packed_strides(o.dims));
  g.binary(CUDNN_POINTWISE_MUL, dO, O, d_o_o);
  DescP red = g.virt(CUDNN_DATA_FLOAT, rd, rs);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, d_o_o, red);
  g.binary(CUDNN_POINTWISE_MUL, red, one, row_sum);  // (the dropout-scale slot of the pattern; 1 here)

  // P = exp(Q K^T * scale - stats), masked (B, H, L, S)
  DescP qk = g.virt(CUDNN_DATA_FLOAT, sd, ss);
  g.matmul(Q, KT, qk);
  DescP scores = g.virt(CUDNN_DATA_FLOAT, sd, ss);
  g.binary(CUDNN_POINTWISE_MUL, qk, scale, scores);
  DescP centred = g.virt(CUDNN_DATA_FLOAT, sd, ss);
  g.binary(CUDNN_POINTWISE_SUB, scores, St, centred);
  if (causal) centred = causal_mask(g, centred, sd, ss);
  DescP p = g.virt(CUDNN_DATA_FLOAT, sd, ss);
  g.unary(CUDNN_POINTWISE_EXP, centred, p);

  // dV = P^T dO
  DescP pt = g.virt(io, td, ts);
  g.reshape(p, pt);
  g.matmul(pt, dO, dV);

  // dS = P * (dO V^T - row_sum) * scale
  DescP dp = g.virt(CUDNN_DATA_FLOAT, sd, ss);
  g.matmul(dO, VT, dp);
  DescP dp_c = g.virt(CUDNN_DATA_FLOAT, sd, ss);
  g.binary(CUDNN_POINTWISE_SUB, dp, row_sum, dp_c);
  DescP pdp = g.virt(CUDNN_DATA_FLOAT, sd, ss);
  g.binary(CUDNN_POINTWISE_MUL, dp_c, p, pdp);
  DescP ds = g.virt(CUDNN_DATA_FLOAT, sd, ss);
  g.binary(CUDNN_POINTWISE_MUL, pdp, scale, ds);

  // dK = dS^T Q
  DescP dst = g.virt(io, td, ts);
  g.reshape(ds, dst);
  g.matmul(dst, Q, dK);

  // dQ = dS K, accumulated in float32, then converted
  DescP kr = g.virt(CUDNN_DATA_FLOAT, k.dims, k.strides);  // K (B, H, S, D) from K^T
  g.reshape(KT, kr);
  g.matmul(ds, kr, dq_accum);
  g.unary(CUDNN_POINTWISE_IDENTITY, dq_accum, dQ);
  return finalize_plan(g, h);
}

}  // namespace weft::cuda::sdpa_cudnn
