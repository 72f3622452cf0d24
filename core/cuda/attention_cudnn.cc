// CUDA kernels of the fused attention tables (core/kernels/attention.h) on cuDNN's
// graph (backend) API, for float16 and bfloat16 (float32 softmax and accumulation).
// This file is the policy: which lowering to try, when to decline, what to bind.
// The graphs are in attention_cudnn_graphs.h, the backend-API wrapper in
// cudnn_graph.h, the per-thread plan cache in cudnn_plan_cache.h.
//
// Two lowerings, tried in this order. Each is built once per configuration (pass,
// lowering, device, dtype, B, H, L, S, D, Dv, causal, strides) into a finalized
// execution plan, cached per thread (a plan is built with the thread's cuDNN handle
// for the device, see cudnn_handle.h):
//  1. native: one SDPA_FWD operation (runtime cuDNN >= 9.13.1) / SDPA_BWD
//     (>= 9.17.0); non-causal attention only (no mask attribute before 9.21).
//  2. composite: the flash-attention operation graph cuDNN's fused engines
//     pattern-match, node for node as cudnn-frontend builds it (Note [sdpa graph]
//     in sdpa_graph_spec.h; cuDNN >= 9.0; the backward not on <= 9.15 with
//     S % 128 != 0).
//
// Q, K, V (and dO) are described with their own strides when cuDNN can address
// them, else packed copies are made; o, stats, dq, dk, dv must be contiguous and
// 16-byte aligned. A configuration cuDNN cannot run (runtime too old or
// 9.10.0/9.10.1 with their known SDPA bugs, head dim not a multiple of 8 or above
// 256, a tensor it cannot address, no engine from the heuristics, a finalize
// failure) makes the kernel return false with nothing usable written; the reason
// (cuDNN status and last-error message) is kept for sdpa_fused_last_decline() and
// a failed plan is cached so it is not rebuilt. Failures of cudnnBackendExecute
// throw. Workspaces (and the composite backward's float32 dQ accumulator and
// rowsum buffer) come from the caching allocator, on current_stream(device) under
// a DeviceGuard, like every other kernel.
#include "core/cuda/attention_cudnn.h"

#include <cudnn.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "core/cuda/attention_cudnn_graphs.h"
#include "core/cuda/cudnn_graph.h"
#include "core/cuda/cudnn_handle.h"
#include "core/cuda/cudnn_plan_cache.h"
#include "core/cuda/runtime.h"
#include "core/dispatch.h"
#include "core/kernels/attention.h"
#include "core/ops.h"

namespace weft::cuda {
namespace {

using cudnn_graph::cached_plan;
using cudnn_graph::PlanKey;
using cudnn_graph::Unsupported;
using cudnn_graph::version_text;
using namespace sdpa_cudnn;  // Uid, Shapes, Layout and the lowerings

constexpr const char* kOp = "scaled_dot_product_attention";

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

void execute(const cudnn_graph::Plan& p, cudnnHandle_t handle, int device, const std::vector<int64_t>& uids,
             const std::vector<void*>& pointers) {
  cudnn_graph::execute(p, handle, device, uids, pointers, kOp);
}

void append(PlanKey& key, const Layout& l) { key.insert(key.end(), l.strides.begin(), l.strides.end()); }

enum Pass : int64_t { kForward = 0, kBackward = 1 };
enum Lowering : int64_t { kNative = 0, kComposite = 1 };

PlanKey make_key(Pass pass, Lowering lowering, int device, cudnnDataType_t io, const Shapes& s, bool causal,
                 std::initializer_list<const Layout*> layouts) {
  PlanKey key{pass, lowering, device, static_cast<int64_t>(io), s.B, s.H, s.L, s.S, s.D, s.Dv, causal ? 1 : 0};
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
  float scale_f = static_cast<float>(scale), fill = mask_fill(version);
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
  float scale_f = static_cast<float>(scale), fill = mask_fill(version), one = 1.0f;
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
        if (version < 90600) zero_(dq_accum);  // before 9.6 cuDNN accumulates without clearing (as the frontend)
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
