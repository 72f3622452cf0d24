// The caching allocator's block logic against a fake backend (host memory, fake
// events), so it runs on every machine: rounding, pools, reuse per stream,
// splitting and merging, record_stream deferral, OOM retry, statistics.
#include "core/cuda/caching_allocator.h"

#include <cstdlib>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "tests/testing.h"

namespace weft::cuda {
namespace {

class FakeBackend : public MemoryBackend {
 public:
  size_t capacity = 1ull << 40;
  size_t used = 0;
  int allocs = 0, frees = 0;
  std::set<int*> events_pending;
  void* raw_alloc(int, size_t bytes) override {
    if (used + bytes > capacity) return nullptr;
    used += bytes;
    ++allocs;
    void* p = std::malloc(bytes);
    sizes[p] = bytes;
    return p;
  }
  void raw_free(int, void* p) override {
    used -= sizes.at(p);
    sizes.erase(p);
    ++frees;
    std::free(p);
  }
  void* record_event(int, void*) override {
    int* e = new int(0);
    events_pending.insert(e);
    return e;
  }
  bool event_done(void* e) override { return events_pending.count(static_cast<int*>(e)) == 0; }
  void destroy_event(void* e) override { delete static_cast<int*>(e); }
  void complete_all() { events_pending.clear(); }
  // Note [cudaFree and communication]: what release_blocker() answers, and how often it was asked
  std::string blocker;
  int blocker_calls = 0;
  std::string release_blocker(int) override {
    ++blocker_calls;
    return blocker;
  }
  std::map<void*, size_t> sizes;
};

void* const kS0 = nullptr;
void* const kS1 = reinterpret_cast<void*>(0x1);

TEST(CachingAllocator, RoundsAndPicksSegments) {
  EXPECT_EQ(CachingAllocator::round_size(1), 512u);
  EXPECT_EQ(CachingAllocator::round_size(513), 1024u);
  EXPECT_EQ(CachingAllocator::segment_size(512), 2u << 20);
  EXPECT_EQ(CachingAllocator::segment_size(1u << 20), 2u << 20);
  EXPECT_EQ(CachingAllocator::segment_size((1u << 20) + 512), 20u << 20);
  EXPECT_EQ(CachingAllocator::segment_size(11u << 20), 12u << 20);
}

TEST(CachingAllocator, SmallBlocksShareOneSegmentAndAreReused) {
  FakeBackend be;
  CachingAllocator a(&be);
  void* p = a.malloc(0, 100, kS0);
  void* q = a.malloc(0, 1000, kS0);
  EXPECT_EQ(be.allocs, 1);  // both carved from one 2 MiB segment
  EXPECT_EQ(static_cast<char*>(q) - static_cast<char*>(p), 512);
  EXPECT_EQ(a.block_size(q), 1024u);
  MemoryStats s = a.stats(0);
  EXPECT_EQ(s.allocated, 1536);
  EXPECT_EQ(s.reserved, 2 << 20);
  a.free(p);
  void* r = a.malloc(0, 200, kS0);
  EXPECT_EQ(r, p);  // reused, best fit
  EXPECT_EQ(be.allocs, 1);
  a.free(q);
  a.free(r);
  EXPECT_EQ(a.stats(0).allocated, 0);
  EXPECT_EQ(a.stats(0).peak_allocated, 1536);
}

TEST(CachingAllocator, FreedNeighboursMergeBackIntoTheWholeSegment) {
  FakeBackend be;
  CachingAllocator a(&be);
  void* p = a.malloc(0, 512, kS0);
  void* q = a.malloc(0, 512, kS0);
  void* r = a.malloc(0, 512, kS0);
  a.free(q);
  a.free(p);  // merges with q's block
  a.free(r);  // merges everything: one free 2 MiB block
  a.empty_cache();
  EXPECT_EQ(be.frees, 1);
  EXPECT_EQ(a.stats(0).reserved, 0);
  EXPECT_EQ(a.stats(0).num_segments, 0);
}

TEST(CachingAllocator, EmptyCacheKeepsSegmentsInUse) {
  FakeBackend be;
  CachingAllocator a(&be);
  void* p = a.malloc(0, 512, kS0);
  void* big = a.malloc(0, 30u << 20, kS0);
  a.free(big);
  a.empty_cache();
  EXPECT_EQ(be.frees, 1);  // the large one; the small segment still has p
  EXPECT_EQ(a.stats(0).reserved, 2 << 20);
  a.free(p);
}

TEST(CachingAllocator, BlocksAreNotSharedAcrossStreamsOrDevices) {
  FakeBackend be;
  CachingAllocator a(&be);
  void* p = a.malloc(0, 4096, kS0);
  a.free(p);
  void* q = a.malloc(0, 4096, kS1);
  EXPECT_NE(q, p);
  void* r = a.malloc(1, 4096, kS0);
  EXPECT_NE(r, p);
  EXPECT_EQ(be.allocs, 3);
  void* s = a.malloc(0, 4096, kS0);
  EXPECT_EQ(s, p);
  EXPECT_EQ(a.stats(1).reserved, 2 << 20);
}

TEST(CachingAllocator, RecordStreamDefersReuseUntilTheEventCompletes) {
  FakeBackend be;
  CachingAllocator a(&be);
  void* p = a.malloc(0, 8192, kS0);
  a.record_stream(p, kS1);
  a.free(p);
  void* q = a.malloc(0, 8192, kS0);
  EXPECT_NE(q, p);  // p still in use by stream 1
  be.complete_all();
  void* r = a.malloc(0, 8192, kS0);
  EXPECT_EQ(r, p);
}

TEST(CachingAllocator, LargeBlocksSplitOnlyWhenMoreThanOneMiBRemains) {
  FakeBackend be;
  CachingAllocator a(&be);
  void* p = a.malloc(0, 19u << 20, kS0);  // 20 MiB segment, 1 MiB would remain: no split
  EXPECT_EQ(a.block_size(p), 20u << 20);
  void* q = a.malloc(0, 2u << 20, kS0);  // new 20 MiB segment, split: 18 MiB remain free
  EXPECT_EQ(a.block_size(q), 2u << 20);
  void* r = a.malloc(0, 4u << 20, kS0);
  EXPECT_EQ(static_cast<char*>(r) - static_cast<char*>(q), 2 << 20);
  EXPECT_EQ(be.allocs, 2);
  a.free(p);
  a.free(q);
  a.free(r);
}

TEST(CachingAllocator, OutOfMemoryRetriesAfterEmptyingThenReports) {
  FakeBackend be;
  be.capacity = 24u << 20;
  CachingAllocator a(&be);
  void* p = a.malloc(0, 15u << 20, kS0);  // 20 MiB segment
  a.free(p);                              // cached
  void* q = a.malloc(0, 4u << 20, kS1);   // other stream: cache unusable, retry frees it
  EXPECT_EQ(a.stats(0).num_retries, 1);
  EXPECT_WEFT_ERROR(a.malloc(0, 30u << 20, kS0), "CUDA out of memory: tried to allocate 31457280 bytes");
  EXPECT_EQ(a.stats(0).num_ooms, 1);
  a.free(q);
  EXPECT_WEFT_ERROR(a.free(reinterpret_cast<void*>(0x1234)), "did not allocate");
}

TEST(CachingAllocator, OutOfMemoryDoesNotReleaseWhileCommunicationIsInFlight) {
  // Note [cudaFree and communication]: cudaFree would synchronise the device with
  // an NCCL kernel waiting for a peer; the allocator reports instead of hanging.
  FakeBackend be;
  be.capacity = 24u << 20;
  be.blocker = "1 communication operation(s) (NCCL) still in flight on cuda:0";
  CachingAllocator a(&be);
  void* p = a.malloc(0, 15u << 20, kS0);
  a.free(p);  // cached, only usable by kS0
  EXPECT_WEFT_ERROR(a.malloc(0, 4u << 20, kS1),
                    "cached segments were not released: 1 communication operation(s) (NCCL) still in flight on cuda:0");
  EXPECT_EQ(be.frees, 0);  // nothing was released (no device-wide synchronisation)
  EXPECT_EQ(be.blocker_calls, 1);
  EXPECT_EQ(a.stats(0).num_ooms, 1);
  // once the communication is done the same request releases the cache and succeeds
  be.blocker = "";
  void* q = a.malloc(0, 4u << 20, kS1);
  EXPECT_EQ(be.frees, 1);
  a.free(q);
}

TEST(CachingAllocator, ABlockWhoseEventCompletedIsReusedWithoutReleasing) {
  FakeBackend be;
  be.capacity = 20u << 20;
  CachingAllocator a(&be);
  void* p = a.malloc(0, 15u << 20, kS0);
  a.record_stream(p, kS1);
  a.free(p);  // pending on kS1's event
  be.blocker = "communication in flight";
  be.complete_all();
  // the pending block is released by the allocation itself; no segment is freed
  void* q = a.malloc(0, 15u << 20, kS0);
  EXPECT_EQ(q, p);
  EXPECT_EQ(be.frees, 0);
  a.free(q);
}

TEST(CachingAllocator, DeviceOfAnyAddressInsideASegment) {
  FakeBackend be;
  CachingAllocator a(&be);
  void* p = a.malloc(3, 4096, kS0);
  void* q = a.malloc(1, 12u << 20, kS0);
  EXPECT_EQ(a.device_of(p), 3);
  EXPECT_EQ(a.device_of(static_cast<char*>(p) + 100), 3);             // a view's data pointer
  EXPECT_EQ(a.device_of(static_cast<char*>(p) + (2u << 20) - 1), 3);  // last byte of the 2 MiB segment
  EXPECT_EQ(a.device_of(q), 1);
  EXPECT_EQ(a.device_of(static_cast<char*>(q) + (12u << 20) - 1), 1);
  int on_stack = 0;
  EXPECT_EQ(a.device_of(&on_stack), -1);
  a.free(p);
  a.free(q);
  a.empty_cache();
  EXPECT_EQ(a.device_of(q), -1);  // released segments are forgotten
}

}  // namespace
}  // namespace weft::cuda
