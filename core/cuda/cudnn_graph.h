// A thin C++ layer over cuDNN's graph (backend) API: owned descriptors, an
// operation-graph builder, plan finalization through the heuristics, and
// execution with a variant pack.
//
// Contract:
// - Every descriptor call is checked. While describing, building or finalizing
//   a graph a failure throws Unsupported (cuDNN's status name plus its
//   last-error message, and what was being set): the caller treats that
//   configuration as one cuDNN cannot run and falls back. Failures of
//   cudnnBackendExecute are real errors and throw weft::Error.
// - A Desc owns one backend descriptor and destroys it with itself. A
//   GraphBuilder owns every descriptor it creates; finalize_plan() moves them
//   into the Plan, so they live as long as the execution plan refers to them.
// - Tensors are 4-d with explicit dims and strides, 16-byte aligned; uids below
//   kFirstVirtualUid are the caller's (bound in variant packs), virtual tensors
//   are numbered from kFirstVirtualUid up.
// - finalize_plan picks the first engine config, in heuristics mode A's order,
//   whose execution plan finalizes, on the given handle (so the plan belongs to
//   that handle's thread and device, core/cuda/cudnn_handle.h).
// - execute() runs on the handle's (current) stream with a workspace from the
//   caching allocator (cudnn_workspace).
#pragma once

#include <cudnn.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace weft::cuda::cudnn_graph {

// A configuration cuDNN cannot run: thrown while describing/building/binding a plan.
struct Unsupported {
  std::string why;
};

// cuDNN's status name plus its last-error message (which names the offending
// attribute or engine constraint).
std::string status_text(cudnnStatus_t st);
// Throws Unsupported{what + ": " + status_text(st)} unless st is success.
void check(cudnnStatus_t st, const std::string& what);
// A cudnnGetVersion()-style number (major * 10000 + minor * 100 + patch) as "9.13.1".
std::string version_text(int64_t v);

// One backend descriptor, destroyed with the object. Every set/finalize is checked
// (a failure throws Unsupported naming the descriptor and the attribute).
class Desc {
 public:
  Desc(cudnnBackendDescriptorType_t type, const char* what);
  ~Desc();
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;

  cudnnBackendDescriptor_t get() const { return d_; }

  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count, const void* values);
  void set_desc(cudnnBackendAttributeName_t name, const Desc& other) {
    cudnnBackendDescriptor_t o = other.get();
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o);
  }
  void set_int64(cudnnBackendAttributeName_t name, int64_t v) { set(name, CUDNN_TYPE_INT64, 1, &v); }
  void set_dtype(cudnnBackendAttributeName_t name, cudnnDataType_t v) { set(name, CUDNN_TYPE_DATA_TYPE, 1, &v); }
  void set_bool(cudnnBackendAttributeName_t name, bool v) { set(name, CUDNN_TYPE_BOOLEAN, 1, &v); }
  void finalize();

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
  const char* what_;
};
using DescP = std::shared_ptr<Desc>;

DescP make_desc(cudnnBackendDescriptorType_t type, const char* what);

using Dims = std::array<int64_t, 4>;

// Row-major strides of a packed tensor with dims d.
Dims packed_strides(const Dims& d);
// The last two entries swapped (dims or strides of a transpose over the same memory).
Dims swap_last(const Dims& d);

// Virtual tensors get uids from here up; the caller's bound tensors use smaller ones.
inline constexpr int64_t kFirstVirtualUid = 100;

// An operation graph under construction.
class GraphBuilder {
 public:
  // A finalized tensor descriptor (16-byte alignment, as cudnn-frontend declares).
  DescP tensor(int64_t uid, cudnnDataType_t dt, const Dims& dims, const Dims& strides, bool is_virtual = false,
               bool by_value = false);
  // An intermediate that never touches memory.
  DescP virt(cudnnDataType_t dt, const Dims& dims, const Dims& strides) {
    return tensor(next_virtual_++, dt, dims, strides, /*is_virtual=*/true);
  }
  // A float32 scalar passed by value (the variant pack points at a host float).
  DescP scalar(int64_t uid) { return tensor(uid, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true); }

  // y = mode(x[, b[, t]]) elementwise; `axis` only for GEN_INDEX.
  void pointwise(cudnnPointwiseMode_t mode, const DescP& x, const DescP& b, const DescP& t, const DescP& y,
                 cudnnDataType_t math = CUDNN_DATA_FLOAT, int64_t axis = -1);
  void unary(cudnnPointwiseMode_t mode, const DescP& x, const DescP& y) { pointwise(mode, x, nullptr, nullptr, y); }
  void binary(cudnnPointwiseMode_t mode, const DescP& x, const DescP& b, const DescP& y) {
    pointwise(mode, x, b, nullptr, y);
  }
  // c = a b over the last two dims, batched over the first two; float32 accumulation.
  void matmul(const DescP& a, const DescP& b, const DescP& c);
  // y = reduce(x) over the dims where y has size 1.
  void reduction(cudnnReduceTensorOp_t kind, const DescP& x, const DescP& y);
  // y is x with other dims/strides over the same elements (here: a transpose).
  void reshape(const DescP& x, const DescP& y);
  // An operation set up by the caller (e.g. the native SDPA operations); finalizes it.
  void add_op(const DescP& op);

  const std::vector<DescP>& ops() const { return ops_; }
  // Every descriptor created so far (operands first, then operations), moved out.
  std::vector<DescP> take_all();

 private:
  std::vector<DescP> keep_, ops_;
  int64_t next_virtual_ = kFirstVirtualUid;
};

// A finalized execution plan and everything it refers to.
struct Plan {
  std::vector<DescP> keep;
  DescP plan;
  int64_t workspace = 0;
};

// Operation graph -> heuristics (mode A) -> the first engine config whose
// execution plan finalizes. Throws Unsupported when none does.
std::shared_ptr<Plan> finalize_plan(GraphBuilder& g, cudnnHandle_t handle);

// Binds the tensors' addresses (uids[i] -> pointers[i]) and runs the plan on the
// handle's (current) stream; a failure throws weft::Error naming `op`.
void execute(const Plan& p, cudnnHandle_t handle, int device, const std::vector<int64_t>& uids,
             const std::vector<void*>& pointers, const char* op);

}  // namespace weft::cuda::cudnn_graph
