// Elementwise reduction of one buffer per rank, used by ProcessGroupInProc
// (run by the last rank to arrive at a collective).
//
// Contract: reduce_tensors(what, op, in) returns op over k of in[k], element by
// element, as the raw bytes of a tensor like in[0] (every input has in[0]'s
// dtype and element count and is contiguous on the CPU). Floating dtypes are
// reduced in float64 (NaN propagates through max/min; avg divides the sum by
// in.size()) and rounded once to the dtype; integers exactly (sum wraps);
// bool as or (sum, max) and and (min). Avg on a non-floating dtype is the
// caller's error to report; `what` names the collective in dtype errors.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "parallel/comm/process_group.h"

namespace weft::parallel::detail {

std::vector<uint8_t> reduce_tensors(const char* what, ReduceOp op, const std::vector<const Tensor*>& in);

}  // namespace weft::parallel::detail
