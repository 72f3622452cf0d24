// CUDA kernels of the fused attention tables (core/kernels/attention.h) on cuDNN's
// graph (backend) API, for float16 and bfloat16 (float32 softmax and accumulation).
//
// Two lowerings, tried in this order. Each is built once per configuration (pass,
// lowering, device, dtype, B, H, L, S, D, Dv, causal, strides) into a finalized
// execution plan, cached per thread (a plan is built with the thread's cuDNN handle
// for the device, see cudnn_handle.h):
//  1. native: one CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR operation (runtime
//     cuDNN >= 9.13.1) / SDPA_BWD_DESCRIPTOR (>= 9.17.0). Up to cuDNN 9.20 these
//     have no mask attribute (masks arrive through a score subgraph from 9.21 on),
//     so they serve non-causal attention only.
//  2. composite: the flash-attention operation graph that cuDNN's fused engines
//     pattern-match (the graph cudnn-frontend builds for its SDPA nodes; needs
//     cuDNN >= 9.0). Forward: S = (Q K^T) * scale [causal: GEN_INDEX rows/columns,
//     CMP_GE, BINARY_SELECT with the lowest float], M = max_j S, E = exp(S - M),
//     Z = sum_j E, stats = M + log Z, P = E / Z, O = P V. Backward: rowsum = sum_j
//     (dO * O), P = exp(S - stats) [same mask], dV = P^T dO, dS = P * (dO V^T -
//     rowsum) * scale, dK = dS^T Q, dQ = dS K through a float32 accumulator.
// Causal is top-left aligned (query i sees keys j <= i, PyTorch's is_causal), which
// CMP_GE(row index, column index) states directly, for L != S as well; a top-left
// causal row always keeps key 0, so no row is fully masked.
//
// Q, K, V (and dO) are described with their own strides (stride(-1) == 1, every
// other stride a positive multiple of 8 elements, base 16-byte aligned: what the
// tensor-core engines need); o, stats, dq, dk, dv are contiguous. A configuration
// cuDNN cannot run (runtime too old or 9.10.0/9.10.1 with their known SDPA bugs,
// head dim not a multiple of 8 or above 256, a tensor it cannot address, no engine
// from the heuristics, a finalize failure) makes the kernel return false with
// nothing usable written; the reason (cuDNN status and last-error message) is kept
// for sdpa_fused_last_decline() and a failed plan is cached so it is not rebuilt.
// Failures of cudnnBackendExecute throw. Workspaces (and the composite backward's
// float32 dQ accumulator and rowsum buffer) come from the caching allocator, on
// current_stream(device) under a DeviceGuard, like every other kernel.
#include "core/cuda/attention_cudnn.h"

#include <cudnn.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/cuda/cudnn_handle.h"
#include "core/cuda/runtime.h"
#include "core/dispatch.h"
#include "core/kernels/attention.h"
#include "core/ops.h"

namespace weft::cuda {
namespace {

std::atomic<int64_t> g_forward_calls{0};
std::atomic<int64_t> g_backward_calls{0};
std::atomic<int> g_enabled{-1};  // -1: not yet read from WEFT_CUDNN_SDPA
std::mutex g_decline_mu;

std::string& decline_slot() {
  static auto* s = new std::string();  // leaked: read by tests until exit
  return *s;
}

void note_decline(const std::string& why) {
  std::lock_guard<std::mutex> lk(g_decline_mu);
  decline_slot() = why;
}

// A configuration cuDNN cannot run. Thrown while describing/building/binding a plan
// and caught by the kernel, which then declines.
struct Unsupported {
  std::string why;
};

// cuDNN's status name plus its last-error message (which names the offending
// attribute or engine constraint).
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

// One backend descriptor, destroyed with the object. Every set/finalize is checked
// (a failure throws Unsupported naming the descriptor and the attribute).
class Desc {
 public:
  Desc(cudnnBackendDescriptorType_t type, const char* what) : what_(what) {
    check(cudnnBackendCreateDescriptor(type, &d_), std::string("creating ") + what_);
  }
  ~Desc() {
    if (d_ != nullptr) cudnnBackendDestroyDescriptor(d_);
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;

  cudnnBackendDescriptor_t get() const { return d_; }

  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count, const void* values) {
    check(cudnnBackendSetAttribute(d_, name, type, count, values),
          std::string(what_) + ": setting attribute " + std::to_string(static_cast<int>(name)));
  }
  void set_desc(cudnnBackendAttributeName_t name, const Desc& other) {
    cudnnBackendDescriptor_t o = other.get();
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o);
  }
  void set_int64(cudnnBackendAttributeName_t name, int64_t v) { set(name, CUDNN_TYPE_INT64, 1, &v); }
  void set_dtype(cudnnBackendAttributeName_t name, cudnnDataType_t v) { set(name, CUDNN_TYPE_DATA_TYPE, 1, &v); }
  void set_bool(cudnnBackendAttributeName_t name, bool v) { set(name, CUDNN_TYPE_BOOLEAN, 1, &v); }
  void finalize() { check(cudnnBackendFinalize(d_), std::string(what_) + ": finalize"); }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
  const char* what_;
};
using DescP = std::shared_ptr<Desc>;

DescP make_desc(cudnnBackendDescriptorType_t type, const char* what) { return std::make_shared<Desc>(type, what); }

using Dims = std::array<int64_t, 4>;

Dims packed_strides(const Dims& d) { return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1}; }

// Unique ids of the tensors bound in variant packs (virtual tensors count up from kFirstVirtual).
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
  kFirstVirtual = 100,
};

// An operation graph under construction. It owns every descriptor it creates; they
// move into the Plan, so they live as long as the execution plan that refers to them.
class GraphBuilder {
 public:
  // A finalized tensor descriptor (16-byte alignment, as cudnn-frontend declares).
  DescP tensor(int64_t uid, cudnnDataType_t dt, const Dims& dims, const Dims& strides, bool is_virtual = false,
               bool by_value = false) {
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
  // An intermediate that never touches memory.
  DescP virt(cudnnDataType_t dt, const Dims& dims, const Dims& strides) {
    return tensor(next_virtual_++, dt, dims, strides, /*is_virtual=*/true);
  }
  // A float32 scalar passed by value (the variant pack points at a host float).
  DescP scalar(int64_t uid) { return tensor(uid, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true); }

  // y = mode(x[, b[, t]]) elementwise; `axis` only for GEN_INDEX.
  void pointwise(cudnnPointwiseMode_t mode, const DescP& x, const DescP& b, const DescP& t, const DescP& y,
                 cudnnDataType_t math = CUDNN_DATA_FLOAT, int64_t axis = -1) {
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
  void unary(cudnnPointwiseMode_t mode, const DescP& x, const DescP& y) { pointwise(mode, x, nullptr, nullptr, y); }
  void binary(cudnnPointwiseMode_t mode, const DescP& x, const DescP& b, const DescP& y) {
    pointwise(mode, x, b, nullptr, y);
  }

  // c = a b over the last two dims, batched over the first two; float32 accumulation.
  void matmul(const DescP& a, const DescP& b, const DescP& c) {
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

  // y = reduce(x) over the dims where y has size 1.
  void reduction(cudnnReduceTensorOp_t kind, const DescP& x, const DescP& y) {
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

  // y is x with other dims/strides over the same elements (here: a transpose).
  void reshape(const DescP& x, const DescP& y) {
    DescP op = make_desc(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, "reshape operation");
    op->set_desc(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, *x);
    op->set_desc(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, *y);
    add_op(op);
  }

  // An operation set up by the caller (the native SDPA operations).
  void add_op(const DescP& op) {
    op->finalize();
    ops_.push_back(op);
  }

  // The top-left causal mask of scores s (B, H, L, S): keeps s[i][j] where i >= j,
  // the lowest float elsewhere (the graph cudnn-frontend builds for causal_mask).
  DescP causal_mask(const DescP& s, const Dims& dims, const Dims& strides) {
    DescP fill = scalar(kFill);
    DescP row = virt(CUDNN_DATA_INT32, dims, strides);
    pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, nullptr, row, CUDNN_DATA_FLOAT, /*axis=*/2);
    DescP col = virt(CUDNN_DATA_INT32, dims, strides);
    pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, nullptr, col, CUDNN_DATA_FLOAT, /*axis=*/3);
    DescP keep = virt(CUDNN_DATA_BOOLEAN, dims, strides);
    pointwise(CUDNN_POINTWISE_CMP_GE, row, col, nullptr, keep, CUDNN_DATA_BOOLEAN);
    DescP out = virt(CUDNN_DATA_FLOAT, dims, strides);
    pointwise(CUDNN_POINTWISE_BINARY_SELECT, s, fill, keep, out);  // y = keep ? s : fill
    return out;
  }

  const std::vector<DescP>& ops() const { return ops_; }
  std::vector<DescP> take_all() {
    std::vector<DescP> all = std::move(keep_);
    all.insert(all.end(), ops_.begin(), ops_.end());
    return all;
  }

 private:
  std::vector<DescP> keep_, ops_;
  int64_t next_virtual_ = kFirstVirtual;
};

// A finalized execution plan and everything it refers to.
struct Plan {
  std::vector<DescP> keep;
  DescP plan;
  int64_t workspace = 0;
};

// Operation graph -> heuristics (mode A) -> the first engine config whose
// execution plan finalizes.
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

// Plans by configuration, per thread (plans are built with this thread's handle).
// A configuration that failed keeps its reason and no plan.
using Key = std::vector<int64_t>;
struct Entry {
  std::shared_ptr<Plan> plan;
  std::string why;
};

std::map<Key, Entry>& plan_cache() {
  thread_local auto* cache = new std::map<Key, Entry>();  // leaked, like the handles
  return *cache;
}

template <typename Build>
std::shared_ptr<Plan> cached_plan(const Key& key, Build&& build, std::string& why) {
  std::map<Key, Entry>& cache = plan_cache();
  auto it = cache.find(key);
  if (it == cache.end()) {
    Entry e;
    try {
      e.plan = build();
    } catch (const Unsupported& u) {
      e.why = u.why;
    }
    it = cache.emplace(key, std::move(e)).first;
  }
  why = it->second.why;
  return it->second.plan;
}

// Binds the tensors' addresses and runs the plan on the handle's (current) stream.
void execute(const Plan& p, cudnnHandle_t handle, int device, const std::vector<int64_t>& uids,
             const std::vector<void*>& pointers) {
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
    WEFT_ERROR("scaled_dot_product_attention: cudnnBackendExecute failed: cuDNN error ", static_cast<int>(st), ": ",
               status_text(st));
}

// A 4-d tensor as cuDNN addresses it: dims, and strides made positive (a size-1 dim
// gets the stride a packed layout would give it; its value is never used).
struct Layout {
  Dims dims{}, strides{};
};

// False when cuDNN's tensor-core engines cannot address t: stride(-1) != 1, a zero
// stride, a stride that is not a multiple of 8 elements (16 bytes), or a base
// pointer not 16-byte aligned.
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

// describe(), else describe a packed copy (made on the current stream; t becomes the copy).
bool describe_or_copy(Tensor& t, Layout& l) {
  if (describe(t, l)) return true;
  t = clone(t.detach());  // contiguous, freshly allocated (aligned)
  return describe(t, l);
}

Layout contiguous_layout(const Dims& dims) { return {dims, packed_strides(dims)}; }

Dims swap_last(const Dims& d) { return {d[0], d[1], d[3], d[2]}; }

void append(Key& key, const Layout& l) { key.insert(key.end(), l.strides.begin(), l.strides.end()); }

// ---- graphs -------------------------------------------------------------------

struct Shapes {
  int64_t B, H, L, S, D, Dv;
  Dims scores() const { return {B, H, L, S}; }
  Dims rows() const { return {B, H, L, 1}; }
};

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
  if (causal) scores = g.causal_mask(scores, sd, ss);
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
  if (causal) centred = g.causal_mask(centred, sd, ss);
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

// ---- kernels ------------------------------------------------------------------

enum Pass : int64_t { kForward = 0, kBackward = 1 };
enum Lowering : int64_t { kNative = 0, kComposite = 1 };

Key make_key(Pass pass, Lowering lowering, int device, cudnnDataType_t io, const Shapes& s, bool causal,
             std::initializer_list<const Layout*> layouts) {
  Key key{pass, lowering, device, static_cast<int64_t>(io), s.B, s.H, s.L, s.S, s.D, s.Dv, causal ? 1 : 0};
  for (const Layout* l : layouts) append(key, *l);
  return key;
}

// Checks shared by both passes; sets why and returns false when cuDNN cannot run.
bool precheck(const Shapes& s, int64_t version, std::string& why) {
  if (!sdpa_fused_enabled()) {
    why = "disabled (set_sdpa_fused_enabled(false) or WEFT_CUDNN_SDPA=0)";
    return false;
  }
  if (s.D % 8 != 0 || s.Dv % 8 != 0 || s.D > 256 || s.Dv > 256) {
    why = "head dims D=" + std::to_string(s.D) + ", Dv=" + std::to_string(s.Dv) +
          " (cuDNN needs multiples of 8, at most 256)";
    return false;
  }
  if (version < 90000 || version == 91000 || version == 91001) {
    why = "cuDNN " + version_text(version) + " (fused attention needs 9.x, not 9.10.0/9.10.1)";
    return false;
  }
  return true;
}

bool forward_impl(cudnnDataType_t io, const Tensor& o, const Tensor& stats, const Tensor& q, const Tensor& k,
                  const Tensor& v, double scale, bool causal, std::string& why) {
  const Shapes s{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), v.size(3)};
  const int64_t version = static_cast<int64_t>(cudnnGetVersion());
  if (!precheck(s, version, why)) return false;
  if (!o.is_contiguous() || !stats.is_contiguous() || reinterpret_cast<uintptr_t>(o.raw_data()) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(stats.raw_data()) % 16 != 0) {
    why = "o or stats is not contiguous and 16-byte aligned";
    return false;
  }
  const int device = o.device().index;
  DeviceGuard guard(device);
  Tensor qq = q, kk = k, vv = v;
  Layout lq, lk, lv;
  if (!describe_or_copy(qq, lq) || !describe_or_copy(kk, lk) || !describe_or_copy(vv, lv)) {
    why = "q, k or v has a layout cuDNN cannot address";
    return false;
  }
  const Layout lo = contiguous_layout({s.B, s.H, s.L, s.Dv});
  cudnnHandle_t handle = cudnn_handle(device);
  float scale_f = static_cast<float>(scale), fill = std::numeric_limits<float>::lowest();
  std::string reasons;
  try {
    if (!causal && version >= 91301) {
      std::string w;
      auto plan = cached_plan(
          make_key(kForward, kNative, device, io, s, causal, {&lq, &lk, &lv}),
          [&] { return native_forward(handle, io, s, lq, lk, lv, lo); }, w);
      if (plan) {
        execute(*plan, handle, device, {kQ, kK, kV, kO, kStats, kScale},
                {qq.raw_data(), kk.raw_data(), vv.raw_data(), o.raw_data(), stats.raw_data(), &scale_f});
        return true;
      }
      reasons += "native SDPA_FWD: " + w + "; ";
    } else {
      reasons += causal ? "native SDPA_FWD: no causal mask before cuDNN 9.21; "
                        : "native SDPA_FWD: cuDNN " + version_text(version) + " < 9.13.1; ";
    }
    std::string w;
    auto plan = cached_plan(
        make_key(kForward, kComposite, device, io, s, causal, {&lq, &lk, &lv}),
        [&] { return composite_forward(handle, io, s, lq, lk, lv, lo, causal); }, w);
    if (plan) {
      std::vector<int64_t> uids{kQ, kK, kV, kO, kStats, kScale};
      std::vector<void*> ptrs{qq.raw_data(), kk.raw_data(), vv.raw_data(), o.raw_data(), stats.raw_data(), &scale_f};
      if (causal) uids.push_back(kFill), ptrs.push_back(&fill);
      execute(*plan, handle, device, uids, ptrs);
      return true;
    }
    reasons += "composite graph: " + w;
  } catch (const Unsupported& u) {
    reasons += u.why;
  }
  why = reasons;
  return false;
}

bool backward_impl(cudnnDataType_t io, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& d_o,
                   const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& stats,
                   double scale, bool causal, std::string& why) {
  const Shapes s{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), v.size(3)};
  const int64_t version = static_cast<int64_t>(cudnnGetVersion());
  if (!precheck(s, version, why)) return false;
  for (const Tensor* t : {&dq, &dk, &dv, &stats})
    if (!t->is_contiguous() || reinterpret_cast<uintptr_t>(t->raw_data()) % 16 != 0) {
      why = "dq, dk, dv or stats is not contiguous and 16-byte aligned";
      return false;
    }
  const int device = dq.device().index;
  DeviceGuard guard(device);
  Tensor qq = q, kk = k, vv = v, oo = o, gg = d_o;
  Layout lq, lk, lv, lo, ldo;
  if (!describe_or_copy(qq, lq) || !describe_or_copy(kk, lk) || !describe_or_copy(vv, lv) ||
      !describe_or_copy(oo, lo) || !describe_or_copy(gg, ldo)) {
    why = "q, k, v, o or the output gradient has a layout cuDNN cannot address";
    return false;
  }
  cudnnHandle_t handle = cudnn_handle(device);
  float scale_f = static_cast<float>(scale), fill = std::numeric_limits<float>::lowest(), one = 1.0f;
  std::string reasons;
  try {
    if (!causal && version >= 91700) {
      std::string w;
      auto plan = cached_plan(
          make_key(kBackward, kNative, device, io, s, causal, {&lq, &lk, &lv, &lo, &ldo}),
          [&] { return native_backward(handle, io, s, lq, lk, lv, lo, ldo); }, w);
      if (plan) {
        execute(*plan, handle, device, {kQ, kK, kV, kO, kdO, kStats, kScale, kdQ, kdK, kdV},
                {qq.raw_data(), kk.raw_data(), vv.raw_data(), oo.raw_data(), gg.raw_data(), stats.raw_data(), &scale_f,
                 dq.raw_data(), dk.raw_data(), dv.raw_data()});
        return true;
      }
      reasons += "native SDPA_BWD: " + w + "; ";
    } else {
      reasons += causal ? "native SDPA_BWD: no causal mask before cuDNN 9.21; "
                        : "native SDPA_BWD: cuDNN " + version_text(version) + " < 9.17.0; ";
    }
    if (version <= 91500 && s.S % 128 != 0) {
      // cudnn-frontend works around a backward bug of these versions with an extra
      // padding mask; not worth replicating.
      reasons += "composite graph: cuDNN " + version_text(version) + " <= 9.15 with S % 128 != 0";
    } else {
      std::string w;
      auto plan = cached_plan(
          make_key(kBackward, kComposite, device, io, s, causal, {&lq, &lk, &lv, &lo, &ldo}),
          [&] { return composite_backward(handle, io, s, lq, lk, lv, lo, ldo, causal); }, w);
      if (plan) {
        Tensor row_sum = empty({s.B, s.H, s.L, 1}, {DType::Float32, dq.device()});     // (B, H, L, 1)
        Tensor dq_accum = empty({s.B, s.H, s.L, s.D}, {DType::Float32, dq.device()});  // (B, H, L, D)
        zero_(dq_accum);  // cuDNN < 9.6 accumulates into it without clearing it first
        std::vector<int64_t> uids{kQ, kK, kV, kO, kdO, kStats, kScale, kdQ, kdK, kdV, kOne, kRowSum, kdQAccum};
        std::vector<void*> ptrs{qq.raw_data(),      kk.raw_data(),    vv.raw_data(), oo.raw_data(),
                                gg.raw_data(),      stats.raw_data(), &scale_f,      dq.raw_data(),
                                dk.raw_data(),      dv.raw_data(),    &one,          row_sum.raw_data(),
                                dq_accum.raw_data()};
        if (causal) uids.push_back(kFill), ptrs.push_back(&fill);
        execute(*plan, handle, device, uids, ptrs);
        return true;
      }
      reasons += "composite graph: " + w;
    }
  } catch (const Unsupported& u) {
    reasons += u.why;
  }
  why = reasons;
  return false;
}

template <typename T>
constexpr bool kFusedType = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

template <typename T>
bool cuda_sdpa_fused(const Tensor& o, const Tensor& stats, const Tensor& q, const Tensor& k, const Tensor& v,
                     double scale, bool causal) {
  if constexpr (!kFusedType<T>) {
    return false;
  } else {
    const cudnnDataType_t io = std::is_same_v<T, Half> ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
    std::string why;
    if (!forward_impl(io, o, stats, q, k, v, scale, causal, why)) {
      note_decline("forward: " + why);
      return false;
    }
    ++g_forward_calls;
    return true;
  }
}

template <typename T>
bool cuda_sdpa_fused_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& d_o, const Tensor& q,
                              const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& stats, double scale,
                              bool causal) {
  if constexpr (!kFusedType<T>) {
    return false;
  } else {
    const cudnnDataType_t io = std::is_same_v<T, Half> ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
    std::string why;
    if (!backward_impl(io, dq, dk, dv, d_o, q, k, v, o, stats, scale, causal, why)) {
      note_decline("backward: " + why);
      return false;
    }
    ++g_backward_calls;
    return true;
  }
}

constexpr uint32_t kFusedTypes = (1u << static_cast<int>(DType::Float16)) | (1u << static_cast<int>(DType::BFloat16));
WEFT_REGISTER_KERNEL(sdpa_fused_table(), DeviceType::CUDA, kFusedTypes, cuda_sdpa_fused);
WEFT_REGISTER_KERNEL(sdpa_fused_backward_table(), DeviceType::CUDA, kFusedTypes, cuda_sdpa_fused_backward);

}  // namespace

int64_t sdpa_fused_forward_calls() { return g_forward_calls.load(); }
int64_t sdpa_fused_backward_calls() { return g_backward_calls.load(); }

std::string sdpa_fused_last_decline() {
  std::lock_guard<std::mutex> lk(g_decline_mu);
  return decline_slot();
}

int64_t cudnn_runtime_version() { return static_cast<int64_t>(cudnnGetVersion()); }

void set_sdpa_fused_enabled(bool enabled) { g_enabled.store(enabled ? 1 : 0); }

bool sdpa_fused_enabled() {
  int e = g_enabled.load();
  if (e < 0) {
    const char* env = std::getenv("WEFT_CUDNN_SDPA");
    e = (env != nullptr && std::string(env) == "0") ? 0 : 1;
    int expected = -1;
    g_enabled.compare_exchange_strong(expected, e);  // a concurrent set_sdpa_fused_enabled wins
    e = g_enabled.load();
  }
  return e == 1;
}

}  // namespace weft::cuda
