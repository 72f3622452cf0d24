// The NCCL backend's shared internals (nccl_common.h).
#include "parallel/comm/nccl/nccl_common.h"

#include "core/error.h"
#include "parallel/comm/nccl/nccl_wait.h"

namespace weft::parallel::detail {

std::string nccl_text(ncclResult_t rc, ncclComm_t comm) {
  std::string s = ncclGetErrorString(rc);
  if (comm != nullptr) {
    const char* last = ncclGetLastError(comm);
    if (last != nullptr && *last != '\0') s += std::string(" (") + last + ")";
  }
  return s;
}

ncclDataType_t nccl_type(DType d) {
  switch (d) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Float16: return ncclFloat16;
    case DType::Int64: return ncclInt64;
    case DType::Int32: return ncclInt32;
    case DType::UInt8:
    case DType::Bool: return ncclUint8;
  }
  return ncclUint8;
}

ncclRedOp_t nccl_op(const char* what, DType d, ReduceOp op) {
  WEFT_CHECK(op != ReduceOp::Avg || is_floating(d), what, ": ReduceOp::avg needs a floating dtype, got ", d);
  if (d == DType::Bool) return op == ReduceOp::Min ? ncclMin : ncclMax;
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
  }
  return ncclSum;
}

ncclResult_t settle(ncclComm_t comm, ncclResult_t rc, Clock::time_point deadline,
                    const std::function<void()>& on_poll) {
  ncclResult_t failed = ncclSuccess;
  auto query = [&] {
    ncclResult_t state = ncclSuccess;
    ncclResult_t q = ncclCommGetAsyncError(comm, &state);
    if (q != ncclSuccess) {
      failed = q;
      return static_cast<int>(q);
    }
    return static_cast<int>(state);
  };
  auto poll = [&] {
    if (on_poll) on_poll();
  };
  const int r = settle_until(static_cast<int>(rc), static_cast<int>(ncclInProgress), query, deadline,
                             std::chrono::duration_cast<std::chrono::milliseconds>(kNcclLivenessPollPeriod), poll);
  return failed != ncclSuccess ? failed : static_cast<ncclResult_t>(r);
}

double seconds(Duration d) { return static_cast<double>(d.count()) / 1000.0; }

}  // namespace weft::parallel::detail
