// The host side of Note [deferred index checks], free of CUDA so it is tested
// on any machine (tests/cuda/index_check_log_test.cc).
//
// Note [deferred index checks]: indices that live on the GPU are range-checked
// by the kernels that read them (embedding, cross_entropy / nll_loss, gather,
// index_select, ...): a bad index is skipped (never read or written out of
// bounds) and reported into a slot of two words (flag, value) on the device.
// Reading a slot needs the stream synchronised; doing that after every such op
// stalled the GPU on every embedding and loss. Instead each op takes a slot
// from a per-device log and returns at once; the slots are read when the host
// synchronises anyway: a device-to-host copy (Tensor::cpu(), item(), ...) or
// weft::cuda::synchronize() (core/cuda/index_checks.h), or when the log is full
// (one synchronisation per kSlots checked ops). The first bad index then throws
// weft::Error naming the op that saw it, as PyTorch reports device-side asserts
// at the next synchronisation.
//
// Contract of IndexCheckLog (not thread-safe: the caller locks):
// - take(entry) reserves the next slot and returns its index, or -1 when all
//   kSlots are in use (flush first).
// - streams(): the distinct streams of the slots in use (to synchronise).
// - settle(words, n): words are the 2 * used() device words of the used slots,
//   read back; clears the log and returns the message of the first slot (in
//   take order) whose flag is set, "" when none is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft::cuda {

class IndexCheckLog {
 public:
  static constexpr int kSlots = 1024;
  struct Entry {
    const char* op;    // "embedding"
    const char* what;  // "index"
    int64_t bound;     // valid range [0, bound)
    void* stream;      // the stream the kernel runs on
  };

  int take(const Entry& e);
  int used() const { return static_cast<int>(entries_.size()); }
  bool empty() const { return entries_.empty(); }
  std::vector<void*> streams() const;
  std::string settle(const int64_t* words, int n);

 private:
  std::vector<Entry> entries_;
};

}  // namespace weft::cuda
