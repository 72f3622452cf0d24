// Storage: a refcounted byte buffer owned through an Allocator, shared by views.
//
// Contract: a Storage's bytes live as long as any tensor refers to it. The
// storage also carries the version counter that every in-place write bumps; all
// views of one buffer share it (autograd compares versions of saved tensors).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "core/device.h"

namespace weft {

class Allocator {
 public:
  virtual ~Allocator() = default;
  // `device` is the storage's device (for CUDA: which GPU; allocators must not
  // depend on the caller's current device).
  virtual void* allocate(size_t nbytes, Device device) = 0;
  virtual void deallocate(void* ptr, size_t nbytes, Device device) = 0;
};

// 64-byte aligned host memory.
Allocator* cpu_allocator();

// Registry of allocators per device type (the CUDA backend registers its own).
Allocator* get_allocator(Device device);
void set_allocator(DeviceType type, Allocator* allocator);

class StorageImpl {
 public:
  StorageImpl(size_t nbytes, Device device, Allocator* allocator);
  // Wraps memory owned elsewhere; `deleter` (may be empty) runs on destruction.
  StorageImpl(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter);
  ~StorageImpl();
  StorageImpl(const StorageImpl&) = delete;
  StorageImpl& operator=(const StorageImpl&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }
  // In-place ops on this memory that autograd recorded (Note [views after an
  // in-place op] in core/autograd_meta.h); returns the new count.
  uint64_t autograd_writes() const { return autograd_writes_.load(std::memory_order_relaxed); }
  uint64_t bump_autograd_writes() { return autograd_writes_.fetch_add(1, std::memory_order_relaxed) + 1; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  Allocator* allocator_ = nullptr;
  std::function<void(void*)> deleter_;
  std::atomic<uint64_t> version_{0};
  std::atomic<uint64_t> autograd_writes_{0};
};

using Storage = std::shared_ptr<StorageImpl>;

}  // namespace weft
