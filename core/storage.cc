#include "core/storage.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

#include <sys/mman.h>

#include "core/error.h"

namespace weft {
namespace {

// Note [huge pages]: the whole 2 MiB pages inside a block are marked for
// transparent huge pages (Linux's default THP mode, "madvise", gives them only
// where asked). A GEMM reads its operands' rows one row length apart, 1.5 to
// 6 KiB in the GPT, so with 4 KiB pages packing a block of rows touches about
// a page per row and misses the first-level TLB; with 2 MiB pages a 12 MB
// activation is six entries. Single-threaded GEMMs of the GPT's shapes and
// sgemm 1024 ran 0-4% faster (median of alternated calls) on an AVX-512 Xeon.
// Blocks keep malloc's placement and 64-byte alignment: only the huge pages a
// block covers entirely are marked, so no page is made huge for a block that
// does not fill it, and peak RSS stays what it was (forcing 2 MiB alignment
// instead added 17% to the GPT's, through the gaps it left). Where the kernel
// has no THP, madvise fails and pages stay small; the memory is the same
// either way.
void advise_huge_pages(void* p, size_t nbytes) {
  constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kHugePage - 1) / kHugePage * kHugePage;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + nbytes) / kHugePage * kHugePage;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

class CpuAllocator final : public Allocator {
 public:
  CpuAllocator() {
    // Keep large blocks in the heap and freed memory mapped: without this every
    // big temporary is a fresh mmap whose pages fault in on first touch, which
    // costs more than the elementwise op writing it (a 16 MB relu: 5 ms vs 0.4 ms).
    mallopt(M_MMAP_THRESHOLD, 512 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
  }
  void* allocate(size_t nbytes, Device) override {
    if (nbytes == 0) return nullptr;
    const size_t rounded = (nbytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    WEFT_CHECK(p != nullptr, "cpu allocator: out of memory allocating ", nbytes, " bytes");
    advise_huge_pages(p, rounded);
    return p;
  }
  void deallocate(void* ptr, size_t, Device) override { std::free(ptr); }
};

Allocator* g_allocators[kNumDeviceTypes] = {cpu_allocator(), nullptr};

}  // namespace

Allocator* cpu_allocator() {
  static CpuAllocator a;
  return &a;
}

Allocator* get_allocator(Device device) {
  Allocator* a = g_allocators[static_cast<int>(device.type)];
  WEFT_CHECK(a != nullptr, "no allocator for device ", device, " (is the CUDA backend linked and a GPU visible?)");
  return a;
}

void set_allocator(DeviceType type, Allocator* allocator) { g_allocators[static_cast<int>(type)] = allocator; }

StorageImpl::StorageImpl(size_t nbytes, Device device, Allocator* allocator)
    : nbytes_(nbytes), device_(device), allocator_(allocator) {
  data_ = allocator_->allocate(nbytes, device);
}

StorageImpl::StorageImpl(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter)
    : data_(data), nbytes_(nbytes), device_(device), deleter_(std::move(deleter)) {}

StorageImpl::~StorageImpl() {
  if (allocator_) allocator_->deallocate(data_, nbytes_, device_);
  else if (deleter_) deleter_(data_);
}

}  // namespace weft
