#include "core/tensor_impl.h"

#include "core/autograd_meta.h"

namespace weft {
namespace {
std::atomic<int64_t> g_live{0};
}

TensorImpl::TensorImpl(Storage storage, int64_t offset, Shape sizes, Shape strides, DType dtype)
    : storage_(std::move(storage)),
      offset_(offset),
      sizes_(std::move(sizes)),
      strides_(std::move(strides)),
      dtype_(dtype) {
  if (storage_) history_mark_ = storage_->autograd_writes();
  refresh();
  g_live.fetch_add(1, std::memory_order_relaxed);
}

TensorImpl::~TensorImpl() { g_live.fetch_sub(1, std::memory_order_relaxed); }

int64_t TensorImpl::live_count() { return g_live.load(); }

void TensorImpl::set_sizes_strides(Shape sizes, Shape strides, int64_t offset) {
  sizes_ = std::move(sizes);
  strides_ = std::move(strides);
  offset_ = offset;
  refresh();
}

void TensorImpl::set_data(const TensorImpl& other) {
  storage_ = other.storage_;
  dtype_ = other.dtype_;
  history_mark_ = other.history_mark_;
  view_root_ = nullptr;  // this impl is not a view that autograd tracks
  view_made_without_grad_ = false;
  set_sizes_strides(other.sizes_, other.strides_, other.offset_);
}

void TensorImpl::refresh() {
  WEFT_INTERNAL_ASSERT(sizes_.size() == strides_.size());
  numel_ = numel_of(sizes_);
  contiguous_ = true;
  int64_t expected = 1;
  for (int64_t i = static_cast<int64_t>(sizes_.size()) - 1; i >= 0; --i) {
    if (sizes_[i] == 1) continue;
    if (strides_[i] != expected) {
      contiguous_ = false;
      break;
    }
    expected *= sizes_[i];
  }
  if (numel_ == 0) contiguous_ = true;
}

AutogradMeta& TensorImpl::ensure_autograd_meta() {
  if (!autograd_meta_) autograd_meta_ = std::make_unique<AutogradMeta>();
  return *autograd_meta_;
}

}  // namespace weft
