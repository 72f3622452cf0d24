// A stream-aware caching allocator for device memory (PyTorch-style), kept free of
// CUDA so its block logic is tested on any machine with a fake backend.
//
// Contract:
//  - malloc(device, n, stream) returns a block of at least n bytes (rounded up to
//    512) that `stream` may use at once. Requests <= 1 MiB are carved from 2 MiB
//    segments (the small pool); larger ones from segments of 20 MiB (requests under
//    10 MiB) or rounded up to 2 MiB. A cached block is reused only by the stream that
//    freed it, so stream order alone makes reuse safe.
//  - free() returns a block to its pool at once, merged with free neighbours of the
//    same segment; if other streams were recorded with record_stream(), the block
//    is held until an event recorded on each of them completes.
//  - On a failed device allocation, all cached free segments of that device are
//    released and the allocation retried once; then an error reports the request,
//    the device and the memory statistics. Note [cudaFree and communication]:
//    releasing a segment (cudaFree) synchronises the whole device, so it would
//    wait on a communication kernel that waits for a peer, and that peer may be
//    waiting for this process: before releasing, the allocator asks the backend
//    (release_blocker(), which may wait a bounded time); when communication is
//    still in flight nothing is released and the out-of-memory error says why,
//    instead of a hang.
//  - device_of(p): the device of the segment holding p (any address inside a
//    segment, e.g. a view's data pointer), or -1 when p is not weft's device
//    memory; a map lookup, no driver call.
//  - empty_cache() releases every segment with no block in use. Statistics per
//    device: bytes allocated (in blocks handed out), reserved (segments held), and
//    their peaks. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace weft::cuda {

// Where segments and stream events come from (the CUDA runtime, or a test fake).
class MemoryBackend {
 public:
  virtual ~MemoryBackend() = default;
  // nullptr when the device is out of memory; throws for other failures.
  virtual void* raw_alloc(int device, size_t bytes) = 0;
  virtual void raw_free(int device, void* ptr) = 0;
  // An event marking the end of the work queued so far on `stream`.
  virtual void* record_event(int device, void* stream) = 0;
  virtual bool event_done(void* event) = 0;
  virtual void destroy_event(void* event) = 0;
  // Note [cudaFree and communication]: "" when releasing segments of `device` is
  // safe now (may wait a bounded time for that), else why not.
  virtual std::string release_blocker(int device) {
    (void)device;
    return "";
  }
};

struct MemoryStats {
  int64_t allocated = 0;  // bytes in blocks handed out
  int64_t reserved = 0;   // bytes in segments obtained from the backend
  int64_t peak_allocated = 0;
  int64_t peak_reserved = 0;
  int64_t num_allocs = 0;    // malloc calls served
  int64_t num_segments = 0;  // segments currently held
  int64_t num_retries = 0;   // backend allocations retried after emptying the cache
  int64_t num_ooms = 0;      // out-of-memory errors raised
};

class CachingAllocator {
 public:
  static constexpr size_t kRound = 512;
  static constexpr size_t kSmallRequest = 1 << 20;  // <= 1 MiB: small pool
  static constexpr size_t kSmallSegment = 2 << 20;  // 2 MiB
  static constexpr size_t kMidRequest = 10 << 20;   // < 10 MiB: 20 MiB segments
  static constexpr size_t kMidSegment = 20 << 20;
  static constexpr size_t kLargeRound = 2 << 20;
  static constexpr size_t kMinLargeSplit = 1 << 20;  // large blocks split if > 1 MiB remains

  explicit CachingAllocator(MemoryBackend* backend);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  void* malloc(int device, size_t bytes, void* stream);
  void free(void* ptr);
  // `stream` (other than the allocating one) uses the block; delays its reuse.
  void record_stream(void* ptr, void* stream);
  // Releases unused segments of `device` (all devices when -1).
  void empty_cache(int device = -1);
  MemoryStats stats(int device) const;
  void reset_peak_stats(int device);
  // Size of the block behind `ptr` (as rounded), for tests and diagnostics.
  size_t block_size(void* ptr) const;
  // The device of the segment containing `p`; -1 if none does.
  int device_of(const void* p) const;

  static size_t round_size(size_t bytes);
  static size_t segment_size(size_t rounded);

 private:
  struct Block;
  struct BlockLess {
    bool operator()(const Block* a, const Block* b) const;
  };
  using FreeSet = std::set<Block*, BlockLess>;

  FreeSet& pool_for(size_t rounded) { return rounded <= kSmallRequest ? small_ : large_; }
  Block* find_free(int device, size_t rounded, void* stream);
  // A fresh segment for a request (retrying once after releasing the cache);
  // throws the out-of-memory error.
  Block* new_segment(int device, size_t rounded, size_t bytes, void* stream);
  bool has_free_segments(int device) const;
  void insert_free(Block* b);
  void release_block(Block* b);  // merge into neighbours and return to the pool
  void process_pending();
  void release_segments(int device);
  MemoryStats& stats_of(int device);

  MemoryBackend* backend_;
  mutable std::mutex mu_;
  FreeSet small_, large_;
  std::unordered_map<void*, Block*> active_;
  struct Pending {
    Block* block;
    std::vector<void*> events;
  };
  std::vector<Pending> pending_;
  std::map<int, MemoryStats> stats_;
  // segment base address -> (bytes, device), for device_of()
  std::map<uintptr_t, std::pair<size_t, int>> segments_;
};

}  // namespace weft::cuda
