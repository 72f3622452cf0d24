// Internals the NCCL backend's files share (not part of its interface): error
// text, dtype and reduce-op mappings, and settle() for the non-blocking
// communicator (Note [nccl non-blocking] in process_group_nccl.cc).
#pragma once

#include <nccl.h>

#include <chrono>
#include <functional>
#include <string>

#include "core/dtype.h"
#include "parallel/comm/process_group.h"

namespace weft::parallel::detail {

using Clock = std::chrono::steady_clock;
// How often a waiting Work looks at the MPI heartbeats.
constexpr auto kNcclLivenessPollPeriod = std::chrono::milliseconds(10);

// NCCL's error string plus the communicator's last error, if any.
std::string nccl_text(ncclResult_t rc, ncclComm_t comm);
ncclDataType_t nccl_type(DType d);
// bool: sum and max are logical or, min is logical and (values are 0 or 1).
ncclRedOp_t nccl_op(const char* what, DType d, ReduceOp op);
// Note [nccl non-blocking]: waits out ncclInProgress until `deadline`;
// `on_poll` (may throw) runs every kNcclLivenessPollPeriod meanwhile.
ncclResult_t settle(ncclComm_t comm, ncclResult_t rc, Clock::time_point deadline,
                    const std::function<void()>& on_poll = nullptr);
// Milliseconds as seconds, for messages.
double seconds(Duration d);

}  // namespace weft::parallel::detail
