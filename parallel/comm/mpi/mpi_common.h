// Internals the MPI backend's files share (not part of its interface): the
// tags of its messages, the process-wide failure flag, WEFT_MPI_CHECK, and the
// mappings from weft's dtypes and reduce ops to MPI's.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/tensor.h"
#include "parallel/comm/process_group.h"

namespace weft::parallel::detail {

// Tags. A group's side communicator carries announcements (Note [arrival
// announcements]), debug fingerprints and p2p headers (Note [p2p headers]);
// its data communicator carries collectives, user point-to-point payloads
// (tags 0..kMaxUserTag) and MPI_Comm_create_group's own traffic.
constexpr int kAnnounceTag = 7;       // side
constexpr int kCreateGroupTag = 11;   // data, MPI_Comm_create_group
constexpr int kHeartbeatTag = 13;     // the liveness monitor's own communicator
constexpr int kFingerprintTag = 17;   // side, send/recv pairs of check_fingerprint
constexpr int kMaxUserTag = 32767;    // the largest tag MPI guarantees
constexpr int kP2PHeaderTag = 32768;  // side: the header of user tag t has tag kP2PHeaderTag + t
// How often a waiting Work looks at the heartbeats.
constexpr auto kLivenessPollPeriod = std::chrono::milliseconds(10);

// Set once an MPI call failed or an unfinished request was abandoned
// (had_collective_failure() reads it).
std::atomic<bool>& failure_flag();
std::string mpi_error_string(int rc);

#define WEFT_MPI_CHECK(call, ...)                                                                         \
  do {                                                                                                    \
    int rc_ = (call);                                                                                     \
    if (rc_ != MPI_SUCCESS) {                                                                             \
      ::weft::parallel::detail::failure_flag() = true;                                                    \
      WEFT_ERROR(__VA_ARGS__, ": ", #call, " failed: ", ::weft::parallel::detail::mpi_error_string(rc_)); \
    }                                                                                                     \
  } while (0)

// The MPI datatype carrying `d` (float16/bfloat16 travel as uint16).
MPI_Datatype mpi_type(DType d);
// The MPI op reducing `d` with `op` (Avg: MPI_SUM, divided afterwards);
// float16/bfloat16 use user-defined ops computing in float, bool logical ones.
MPI_Op mpi_op(const char* what, DType d, ReduceOp op);
// In place x /= size for a contiguous floating buffer of n elements.
void divide_in_place(void* data, int64_t n, DType d, int size);
// A CPU, contiguous, defined tensor of at most 2^31-1 elements, or an error
// naming `what`.
void check_tensor(const char* what, const Tensor& t);
// "allgather(float32, 8 elements)".
std::string describe(const char* what, const Tensor& t);
// Steady-clock time in nanoseconds.
int64_t now_ns();

}  // namespace weft::parallel::detail
