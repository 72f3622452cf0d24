// DDP communication hooks: how one gradient bucket is reduced across ranks.
//
// Contract:
// - A CommHook receives the group and a bucket (a flat contiguous 1-D tensor of
//   one floating dtype holding this rank's local gradients) and returns a Work.
//   When that Work's wait() returns, `bucket` holds the average of the ranks'
//   buckets. The hook may start the communication asynchronously; the reducer
//   calls wait() at the end of backward (or in the next forward, non-blocking mode).
// - allreduce_avg_hook (the default): one allreduce with ReduceOp::Avg.
// - bf16_compress_hook: casts the bucket to bfloat16, allreduces the sum in
//   bfloat16 (half the bytes on the wire), and on wait() writes sum / size back
//   in the bucket's dtype. Lossy: ~3 significant digits.
// - ThenWork wraps a Work with a completion step that runs once, on the first
//   successful wait(), on the waiting thread.
#pragma once

#include <functional>
#include <memory>

#include "parallel/comm/process_group.h"

namespace weft::parallel {

using CommHook = std::function<WorkPtr(ProcessGroup& group, Tensor& bucket)>;

WorkPtr allreduce_avg_hook(ProcessGroup& group, Tensor& bucket);
WorkPtr bf16_compress_hook(ProcessGroup& group, Tensor& bucket);

class ThenWork : public Work {
 public:
  ThenWork(WorkPtr inner, std::function<void()> then) : inner_(std::move(inner)), then_(std::move(then)) {}
  bool is_completed() override { return inner_->is_completed(); }
  void wait(Duration timeout = Duration::zero()) override;

 private:
  WorkPtr inner_;
  std::function<void()> then_;
};

}  // namespace weft::parallel
