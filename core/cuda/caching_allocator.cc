#include "core/cuda/caching_allocator.h"

#include <algorithm>
#include <string>
#include <tuple>

#include "core/error.h"

namespace weft::cuda {

struct CachingAllocator::Block {
  int device = 0;
  void* stream = nullptr;
  size_t size = 0;
  char* ptr = nullptr;
  bool small = false;
  bool allocated = false;
  Block* prev = nullptr;  // neighbours inside one segment
  Block* next = nullptr;
  std::set<void*> other_streams;
};

bool CachingAllocator::BlockLess::operator()(const Block* a, const Block* b) const {
  return std::make_tuple(a->device, reinterpret_cast<uintptr_t>(a->stream), a->size,
                         reinterpret_cast<uintptr_t>(a->ptr)) <
         std::make_tuple(b->device, reinterpret_cast<uintptr_t>(b->stream), b->size,
                         reinterpret_cast<uintptr_t>(b->ptr));
}

CachingAllocator::CachingAllocator(MemoryBackend* backend) : backend_(backend) {}

CachingAllocator::~CachingAllocator() {
  // Memory still in use at exit stays with the process; cached segments go back.
  std::lock_guard<std::mutex> lock(mu_);
  for (auto* set : {&small_, &large_}) {
    for (Block* b : *set) delete b;
    set->clear();
  }
}

size_t CachingAllocator::round_size(size_t bytes) {
  if (bytes < kRound) return kRound;
  return (bytes + kRound - 1) / kRound * kRound;
}

size_t CachingAllocator::segment_size(size_t rounded) {
  if (rounded <= kSmallRequest) return kSmallSegment;
  if (rounded < kMidRequest) return kMidSegment;
  return (rounded + kLargeRound - 1) / kLargeRound * kLargeRound;
}

MemoryStats& CachingAllocator::stats_of(int device) { return stats_[device]; }

CachingAllocator::Block* CachingAllocator::find_free(int device, size_t rounded, void* stream) {
  FreeSet& pool = pool_for(rounded);
  Block key;
  key.device = device;
  key.stream = stream;
  key.size = rounded;
  key.ptr = nullptr;
  auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->device != device || (*it)->stream != stream) return nullptr;
  Block* b = *it;
  pool.erase(it);
  return b;
}

void CachingAllocator::insert_free(Block* b) { (b->small ? small_ : large_).insert(b); }

bool CachingAllocator::has_free_segments(int device) const {
  for (const FreeSet* pool : {&small_, &large_})
    for (const Block* b : *pool)
      if (b->device == device && b->prev == nullptr && b->next == nullptr) return true;
  return false;
}

CachingAllocator::Block* CachingAllocator::new_segment(int device, size_t rounded, size_t bytes, void* stream) {
  MemoryStats& st = stats_of(device);
  const size_t seg = segment_size(rounded);
  void* p = backend_->raw_alloc(device, seg);
  std::string blocked;
  if (p == nullptr) {
    ++st.num_retries;
    // A block freed with record_stream() may have become usable meanwhile.
    process_pending();
    if (Block* b = find_free(device, rounded, stream)) return b;
    // Note [cudaFree and communication]: release the cache only where that
    // cannot wait on communication in flight.
    if (has_free_segments(device)) blocked = backend_->release_blocker(device);
    if (blocked.empty()) {
      release_segments(device);
      p = backend_->raw_alloc(device, seg);
    }
  }
  if (p == nullptr) {
    ++st.num_ooms;
    WEFT_ERROR(
        "CUDA out of memory: tried to allocate ", bytes, " bytes (a ", seg, "-byte segment) on cuda:", device, "; ",
        st.allocated, " bytes allocated, ", st.reserved, " bytes reserved by weft's caching allocator (",
        blocked.empty() ? std::string("empty_cache() was tried") : "cached segments were not released: " + blocked,
        ")");
  }
  Block* b = new Block;
  b->device = device;
  b->stream = stream;
  b->size = seg;
  b->ptr = static_cast<char*>(p);
  b->small = rounded <= kSmallRequest;
  st.reserved += static_cast<int64_t>(seg);
  st.peak_reserved = std::max(st.peak_reserved, st.reserved);
  ++st.num_segments;
  segments_[reinterpret_cast<uintptr_t>(p)] = {seg, device};
  return b;
}

void* CachingAllocator::malloc(int device, size_t bytes, void* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  process_pending();
  size_t rounded = round_size(bytes);
  MemoryStats& st = stats_of(device);
  Block* b = find_free(device, rounded, stream);
  if (b == nullptr) b = new_segment(device, rounded, bytes, stream);
  size_t remaining = b->size - rounded;
  bool split = b->small ? remaining >= kRound : remaining > kMinLargeSplit;
  if (split) {
    Block* rest = new Block;
    rest->device = device;
    rest->stream = stream;
    rest->size = remaining;
    rest->ptr = b->ptr + rounded;
    rest->small = b->small;
    rest->prev = b;
    rest->next = b->next;
    if (b->next) b->next->prev = rest;
    b->next = rest;
    b->size = rounded;
    insert_free(rest);
  }
  b->allocated = true;
  active_[b->ptr] = b;
  st.allocated += static_cast<int64_t>(b->size);
  st.peak_allocated = std::max(st.peak_allocated, st.allocated);
  ++st.num_allocs;
  return b->ptr;
}

void CachingAllocator::free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = active_.find(ptr);
  WEFT_CHECK(it != active_.end(), "CUDA caching allocator: free of a pointer it did not allocate (", ptr, ")");
  Block* b = it->second;
  active_.erase(it);
  b->allocated = false;
  stats_of(b->device).allocated -= static_cast<int64_t>(b->size);
  if (!b->other_streams.empty()) {
    Pending p{b, {}};
    for (void* s : b->other_streams) p.events.push_back(backend_->record_event(b->device, s));
    b->other_streams.clear();
    pending_.push_back(std::move(p));
    return;
  }
  release_block(b);
}

void CachingAllocator::record_stream(void* ptr, void* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = active_.find(ptr);
  WEFT_CHECK(it != active_.end(), "CUDA caching allocator: record_stream on a pointer it did not allocate (", ptr, ")");
  if (stream != it->second->stream) it->second->other_streams.insert(stream);
}

void CachingAllocator::release_block(Block* b) {
  // A neighbour can merge only when it is free and not waiting on events, i.e.
  // when it sits in a free set.
  auto mergeable = [&](Block* n) {
    if (n == nullptr || n->allocated) return false;
    FreeSet& pool = n->small ? small_ : large_;
    auto it = pool.find(n);
    if (it == pool.end() || *it != n) return false;
    pool.erase(it);
    return true;
  };
  if (mergeable(b->prev)) {
    Block* p = b->prev;
    p->size += b->size;
    p->next = b->next;
    if (b->next) b->next->prev = p;
    delete b;
    b = p;
  }
  if (mergeable(b->next)) {
    Block* n = b->next;
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    delete n;
  }
  insert_free(b);
}

void CachingAllocator::process_pending() {
  for (size_t i = 0; i < pending_.size();) {
    Pending& p = pending_[i];
    bool done = std::all_of(p.events.begin(), p.events.end(), [&](void* e) { return backend_->event_done(e); });
    if (!done) {
      ++i;
      continue;
    }
    for (void* e : p.events) backend_->destroy_event(e);
    Block* b = p.block;
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
    release_block(b);
  }
}

void CachingAllocator::release_segments(int device) {
  for (auto* pool : {&small_, &large_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block* b = *it;
      if ((device < 0 || b->device == device) && b->prev == nullptr && b->next == nullptr) {
        backend_->raw_free(b->device, b->ptr);
        segments_.erase(reinterpret_cast<uintptr_t>(b->ptr));
        MemoryStats& st = stats_of(b->device);
        st.reserved -= static_cast<int64_t>(b->size);
        --st.num_segments;
        it = pool->erase(it);
        delete b;
      } else {
        ++it;
      }
    }
  }
}

void CachingAllocator::empty_cache(int device) {
  std::lock_guard<std::mutex> lock(mu_);
  process_pending();
  release_segments(device);
}

MemoryStats CachingAllocator::stats(int device) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = stats_.find(device);
  return it == stats_.end() ? MemoryStats{} : it->second;
}

void CachingAllocator::reset_peak_stats(int device) {
  std::lock_guard<std::mutex> lock(mu_);
  MemoryStats& st = stats_of(device);
  st.peak_allocated = st.allocated;
  st.peak_reserved = st.reserved;
}

size_t CachingAllocator::block_size(void* ptr) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = active_.find(ptr);
  WEFT_CHECK(it != active_.end(), "CUDA caching allocator: unknown pointer ", ptr);
  return it->second->size;
}

int CachingAllocator::device_of(const void* p) const {
  const auto a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = segments_.upper_bound(a);
  if (it == segments_.begin()) return -1;
  --it;
  return a < it->first + it->second.first ? it->second.second : -1;
}

}  // namespace weft::cuda
