// Autocast: automatic mixed precision for a scope, per device type (torch.autocast).
//
// Contract: `AutocastGuard guard(DeviceType::CUDA, DType::BFloat16);` turns autocast
// on for ops whose tensors live on that device type, on the calling thread, until
// the guard is destroyed (thread-local, nestable; the destructor restores the
// previous state, so an inner `AutocastGuard(dev, dt, /*enabled=*/false)` disables
// it for a nested scope). Inside it:
//  - lower-precision ops (matmul, mm, bmm, linear, conv2d,
//    scaled_dot_product_attention) cast their float32/float16/bfloat16 inputs to the
//    autocast dtype (kernels accumulate in float32); float64 and integer tensors are
//    left alone, as in PyTorch;
//  - float32 ops (softmax, log_softmax, cross_entropy, nll_loss, mse_loss,
//    binary_cross_entropy_with_logits, layer_norm) cast float16/bfloat16 inputs up to
//    float32, so they compute and return float32.
// Casts go through the differentiable Tensor::to(DType), so gradients reach float32
// master parameters in float32. Casts of parameters (leaf tensors that require
// grad, while grad is recorded) are cached, as in PyTorch: a weight used by
// several ops is cast once. The cache lives while an enabled guard or an
// autocast::CastCacheScope is alive on the thread and is emptied when the last
// one ends; an entry is used only while its parameter's version is the one it
// was cast at (an in-place update casts again). A CastCacheScope around a step
// whose micro-batches each open their own guard (the pipeline runner, gradient
// accumulation) casts every weight once per step rather than once per
// micro-batch. A cached cast's node keeps its closure after a backward (it saves
// no tensors), so every micro-batch's backward passes through it into the
// parameter's float32 gradient. Autocast does not apply to backward formulas
// beyond what the forward recorded; run backward() outside the guard, as with
// torch.autocast.
#pragma once

#include "core/device.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace weft {

class AutocastGuard {
 public:
  explicit AutocastGuard(DeviceType device, DType dtype = DType::BFloat16, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DeviceType device_;
  bool prev_enabled_;
  DType prev_dtype_;
  bool holds_cache_;
};

namespace autocast {

bool is_enabled(DeviceType device);
// The lower-precision dtype of the innermost enabled guard for `device`.
DType dtype(DeviceType device);

// For lower-precision ops: `t` cast to the autocast dtype when autocast is on for
// t's device type and t is float32/float16/bfloat16; otherwise `t` itself.
Tensor lower(const Tensor& t);
// For float32 ops: a float16/bfloat16 `t` cast to float32 when autocast is on for
// t's device type; otherwise `t` itself.
Tensor upcast(const Tensor& t);

// Keeps the cast cache (see above) alive on this thread for its lifetime.
class CastCacheScope {
 public:
  CastCacheScope();
  ~CastCacheScope();
  CastCacheScope(const CastCacheScope&) = delete;
  CastCacheScope& operator=(const CastCacheScope&) = delete;
};
// Casts held in this thread's cache (for tests).
size_t cached_casts();

}  // namespace autocast
}  // namespace weft
