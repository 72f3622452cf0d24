// Fused-attention lowerings onto cuDNN graphs (core/cuda/attention_cudnn_graphs.h).
#include "core/cuda/attention_cudnn_graphs.h"

#include <cstdint>
#include <string>
#include <vector>

#include "core/ops.h"

namespace weft::cuda::sdpa_cudnn {

using cudnn_graph::DescP;
using cudnn_graph::finalize_plan;
using cudnn_graph::GraphBuilder;
using cudnn_graph::make_desc;
using cudnn_graph::packed_strides;
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

namespace {

cudnnDataType_t data_type(spec::DType d, cudnnDataType_t io) {
  switch (d) {
    case spec::DType::kIo: return io;
    case spec::DType::kFloat: return CUDNN_DATA_FLOAT;
    case spec::DType::kInt32: return CUDNN_DATA_INT32;
    case spec::DType::kBool: return CUDNN_DATA_BOOLEAN;
  }
  return CUDNN_DATA_FLOAT;
}

cudnnPointwiseMode_t pointwise_mode(spec::Mode m) {
  switch (m) {
    case spec::Mode::kMul: return CUDNN_POINTWISE_MUL;
    case spec::Mode::kSub: return CUDNN_POINTWISE_SUB;
    case spec::Mode::kAdd: return CUDNN_POINTWISE_ADD;
    case spec::Mode::kDiv: return CUDNN_POINTWISE_DIV;
    case spec::Mode::kExp: return CUDNN_POINTWISE_EXP;
    case spec::Mode::kLog: return CUDNN_POINTWISE_LOG;
    case spec::Mode::kIdentity: return CUDNN_POINTWISE_IDENTITY;
    case spec::Mode::kGenIndex: return CUDNN_POINTWISE_GEN_INDEX;
    case spec::Mode::kCmpGe: return CUDNN_POINTWISE_CMP_GE;
    case spec::Mode::kBinarySelect: return CUDNN_POINTWISE_BINARY_SELECT;
    default: break;
  }
  throw Unsupported{std::string("sdpa graph: ") + spec::name(m) + " is not a pointwise mode"};
}

}  // namespace

std::shared_ptr<Plan> build_plan(const spec::Graph& graph, cudnnDataType_t io, cudnnHandle_t h) {
  GraphBuilder g;
  std::vector<DescP> t;
  for (const spec::Tensor& x : graph.tensors)
    t.push_back(g.tensor(x.uid, data_type(x.dtype, io), x.dims, x.strides, x.is_virtual, x.by_value));
  auto in = [&](const spec::Node& n, size_t i) { return i < n.inputs.size() ? t[n.inputs[i]] : DescP(); };
  for (const spec::Node& n : graph.nodes) {
    const DescP& y = t[static_cast<size_t>(n.output)];
    switch (n.op) {
      case spec::Op::kMatmul: g.matmul(in(n, 0), in(n, 1), y); break;
      case spec::Op::kReshape: g.reshape(in(n, 0), y); break;
      case spec::Op::kReduction:
        g.reduction(n.mode == spec::Mode::kMax ? CUDNN_REDUCE_TENSOR_MAX : CUDNN_REDUCE_TENSOR_ADD, in(n, 0), y);
        break;
      case spec::Op::kPointwise:
        g.pointwise(pointwise_mode(n.mode), in(n, 0), in(n, 1), in(n, 2), y, data_type(n.math, io), n.axis);
        break;
    }
  }
  return finalize_plan(g, h);
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
  return build_plan(spec::composite_forward(s, q, k, v, o, causal), io, h);
}

std::shared_ptr<Plan> composite_backward(cudnnHandle_t h, cudnnDataType_t io, const Shapes& s, const Layout& q,
                                         const Layout& k, const Layout& v, const Layout& o, const Layout& d_o,
                                         bool causal) {
  return build_plan(spec::composite_backward(s, q, k, v, o, d_o, causal), io, h);
}

}  // namespace weft::cuda::sdpa_cudnn
