// DDP communication hooks (parallel/data/comm_hooks.h).
#include "parallel/data/comm_hooks.h"

#include "core/autograd_meta.h"
#include "core/ops.h"

namespace weft::parallel {

void ThenWork::wait(Duration timeout) {
  inner_->wait(timeout);
  if (then_) {
    auto fn = std::move(then_);
    then_ = nullptr;
    fn();
  }
}

WorkPtr allreduce_avg_hook(ProcessGroup& group, Tensor& bucket) {
  AllreduceOptions o;
  o.op = ReduceOp::Avg;
  return group.allreduce(bucket, o);
}

WorkPtr bf16_compress_hook(ProcessGroup& group, Tensor& bucket) {
  WEFT_CHECK(bucket.is_floating_point(), "bf16_compress_hook: bucket must be floating point, got ", bucket.dtype());
  NoGradGuard ng;
  auto wire = std::make_shared<Tensor>(bucket.to(DType::BFloat16).contiguous());  // (n,) bfloat16
  AllreduceOptions o;
  o.op = ReduceOp::Sum;
  WorkPtr w = group.allreduce(*wire, o);
  Tensor out = bucket;
  double inv = 1.0 / static_cast<double>(group.size());
  return std::make_shared<ThenWork>(w, [wire, out, inv]() mutable {
    NoGradGuard ng2;
    Tensor back = wire->to(out.dtype());
    back.mul_(Scalar(inv));
    out.copy_(back);
  });
}

}  // namespace weft::parallel
