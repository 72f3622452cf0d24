// The device side of Note [deferred index checks] (core/cuda/index_check_log.h).
//
// Contract:
// - index_check_slot(device, stream, op, what, bound): two zeroed int64 words on
//   `device` (zeroed on `stream`) for one kernel's bad-index report: word 0 set
//   to 1 when an index outside [0, bound) was seen, word 1 one such value. If
//   the device's log is full it is flushed first (a synchronisation).
// - flush_index_checks(device): synchronises the streams that have unread
//   slots, reads them in one copy and throws weft::Error for the first bad
//   index ("embedding: index 4 is out of bounds (valid range [0, 4)) ...").
//   Cheap when nothing is pending. Device-to-host copies and
//   weft::cuda::synchronize() call it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace weft::cuda {

unsigned long long* index_check_slot(int device, cudaStream_t stream, const char* op, const char* what, int64_t bound);
void flush_index_checks(int device);

}  // namespace weft::cuda
