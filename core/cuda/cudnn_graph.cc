// cuDNN graph (backend) API wrapper (core/cuda/cudnn_graph.h).
#include "core/cuda/cudnn_graph.h"

#include <algorithm>

#include "core/cuda/cudnn_handle.h"
#include "core/error.h"
#include "core/tensor.h"

namespace weft::cuda::cudnn_graph {

std::string status_text(cudnnStatus_t st) {
  std::string s = cudnnGetErrorString(st);
  char buf[1024] = {0};
  cudnnGetLastErrorString(buf, sizeof(buf));
  if (buf[0] != '\0') s += std::string(" (") + buf + ")";
  return s;
}

void check(cudnnStatus_t st, const std::string& what) {
  if (st != CUDNN_STATUS_SUCCESS) throw Unsupported{what + ": " + status_text(st)};
}

std::string version_text(int64_t v) {
  return std::to_string(v / 10000) + "." + std::to_string(v % 10000 / 100) + "." + std::to_string(v % 100);
}

Desc::Desc(cudnnBackendDescriptorType_t type, const char* what) : what_(what) {
  check(cudnnBackendCreateDescriptor(type, &d_), std::string("creating ") + what_);
}

Desc::~Desc() {
  if (d_ != nullptr) cudnnBackendDestroyDescriptor(d_);
}

void Desc::set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count, const void* values) {
  check(cudnnBackendSetAttribute(d_, name, type, count, values),
        std::string(what_) + ": setting attribute " + std::to_string(static_cast<int>(name)));
}

void Desc::finalize() { check(cudnnBackendFinalize(d_), std::string(what_) + ": finalize"); }

DescP make_desc(cudnnBackendDescriptorType_t type, const char* what) { return std::make_shared<Desc>(type, what); }

Dims packed_strides(const Dims& d) { return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1}; }

Dims swap_last(const Dims& d) { return {d[0], d[1], d[3], d[2]}; }

DescP GraphBuilder::tensor(int64_t uid, cudnnDataType_t dt, const Dims& dims, const Dims& strides, bool is_virtual,
                           bool by_value) {
  DescP t = make_desc(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor descriptor");
  t->set_int64(CUDNN_ATTR_TENSOR_UNIQUE_ID, uid);
  t->set_dtype(CUDNN_ATTR_TENSOR_DATA_TYPE, dt);
  t->set_int64(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, 16);
  t->set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data());
  t->set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data());
  t->set_bool(CUDNN_ATTR_TENSOR_IS_VIRTUAL, is_virtual);
  t->set_bool(CUDNN_ATTR_TENSOR_IS_BY_VALUE, by_value);
  t->finalize();
  keep_.push_back(t);
  return t;
}

void GraphBuilder::pointwise(cudnnPointwiseMode_t mode, const DescP& x, const DescP& b, const DescP& t, const DescP& y,
                             cudnnDataType_t math, int64_t axis) {
  DescP pw = make_desc(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "pointwise descriptor");
  pw->set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
  pw->set_dtype(CUDNN_ATTR_POINTWISE_MATH_PREC, math);
  if (axis >= 0) pw->set_int64(CUDNN_ATTR_POINTWISE_AXIS, axis);
  pw->finalize();
  keep_.push_back(pw);
  DescP op = make_desc(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "pointwise operation");
  op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, *pw);
  op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, *x);
  if (b) op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
  if (t) op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
  op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, *y);
  add_op(op);
}

void GraphBuilder::matmul(const DescP& a, const DescP& b, const DescP& c) {
  DescP mm = make_desc(CUDNN_BACKEND_MATMUL_DESCRIPTOR, "matmul descriptor");
  mm->set_dtype(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_DATA_FLOAT);
  mm->finalize();
  keep_.push_back(mm);
  DescP op = make_desc(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "matmul operation");
  op->set_desc(CUDNN_ATTR_OPERATION_MATMUL_ADESC, *a);
  op->set_desc(CUDNN_ATTR_OPERATION_MATMUL_BDESC, *b);
  op->set_desc(CUDNN_ATTR_OPERATION_MATMUL_CDESC, *c);
  op->set_desc(CUDNN_ATTR_OPERATION_MATMUL_DESC, *mm);
  add_op(op);
}

void GraphBuilder::reduction(cudnnReduceTensorOp_t kind, const DescP& x, const DescP& y) {
  DescP red = make_desc(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "reduction descriptor");
  red->set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &kind);
  red->set_dtype(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_DATA_FLOAT);
  red->finalize();
  keep_.push_back(red);
  DescP op = make_desc(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "reduction operation");
  op->set_desc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, *x);
  op->set_desc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, *y);
  op->set_desc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, *red);
  add_op(op);
}

void GraphBuilder::reshape(const DescP& x, const DescP& y) {
  DescP op = make_desc(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, "reshape operation");
  op->set_desc(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, *x);
  op->set_desc(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, *y);
  add_op(op);
}

void GraphBuilder::add_op(const DescP& op) {
  op->finalize();
  ops_.push_back(op);
}

std::vector<DescP> GraphBuilder::take_all() {
  std::vector<DescP> all = std::move(keep_);
  all.insert(all.end(), ops_.begin(), ops_.end());
  return all;
}

std::shared_ptr<Plan> finalize_plan(GraphBuilder& g, cudnnHandle_t handle) {
  auto p = std::make_shared<Plan>();
  DescP graph = make_desc(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
  graph->set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  std::vector<cudnnBackendDescriptor_t> ops;
  for (const DescP& op : g.ops()) ops.push_back(op->get());
  graph->set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(ops.size()),
             ops.data());
  graph->finalize();
  p->keep = g.take_all();
  p->keep.push_back(graph);

  DescP heur = make_desc(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "engine heuristics");
  heur->set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, *graph);
  cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  heur->set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  heur->finalize();
  int64_t count = 0;
  check(cudnnBackendGetAttribute(heur->get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                 nullptr),
        "engine heuristics: counting results");
  if (count <= 0) throw Unsupported{"the engine heuristics found no engine for the graph"};
  std::vector<DescP> cfgs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    cfgs.push_back(make_desc(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config"));
    raw.push_back(cfgs.back()->get());
  }
  int64_t returned = 0;
  check(cudnnBackendGetAttribute(heur->get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                 &returned, raw.data()),
        "engine heuristics: reading results");
  std::string first_failure;
  for (int64_t i = 0; i < std::min(returned, count); ++i) {
    DescP plan = make_desc(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "execution plan");
    plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    plan->set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, *cfgs[i]);
    const cudnnStatus_t st = cudnnBackendFinalize(plan->get());
    if (st != CUDNN_STATUS_SUCCESS) {
      if (first_failure.empty()) first_failure = status_text(st);
      continue;
    }
    int64_t ws = 0, n = 0;
    check(cudnnBackendGetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &ws),
          "execution plan: reading the workspace size");
    p->keep.push_back(cfgs[i]);
    p->plan = plan;
    p->workspace = ws;
    return p;
  }
  throw Unsupported{"none of the " + std::to_string(returned) +
                    " engine configs from the heuristics finalized (first: " + first_failure + ")"};
}

void execute(const Plan& p, cudnnHandle_t handle, int device, const std::vector<int64_t>& uids,
             const std::vector<void*>& pointers, const char* op) {
  Tensor ws = cudnn_workspace(device, static_cast<size_t>(p.workspace));
  void* ws_ptr = ws.defined() ? ws.raw_data() : nullptr;
  Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack");
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(uids.size()), uids.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, static_cast<int64_t>(pointers.size()),
           pointers.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws_ptr);
  pack.finalize();
  const cudnnStatus_t st = cudnnBackendExecute(handle, p.plan->get(), pack.get());
  if (st != CUDNN_STATUS_SUCCESS)
    WEFT_ERROR(op, ": cudnnBackendExecute failed: cuDNN error ", static_cast<int>(st), ": ", status_text(st));
}

}  // namespace weft::cuda::cudnn_graph
