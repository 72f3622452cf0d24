// TensorImpl: what a Tensor handle points to. Storage + offset + sizes + strides +
// dtype, plus the autograd metadata slot (defined in core/autograd_meta.h).
//
// Contract: sizes/strides/offset are in elements. Views are separate TensorImpls
// sharing one Storage (and so one version counter). live_count() counts live
// TensorImpls, which the leak tests watch.
#pragma once

#include <atomic>
#include <memory>

#include "core/device.h"
#include "core/dtype.h"
#include "core/shape.h"
#include "core/storage.h"

namespace weft {

struct AutogradMeta;

class TensorImpl {
 public:
  TensorImpl(Storage storage, int64_t offset, Shape sizes, Shape strides, DType dtype);
  ~TensorImpl();
  TensorImpl(const TensorImpl&) = delete;
  TensorImpl& operator=(const TensorImpl&) = delete;

  const Storage& storage() const { return storage_; }
  int64_t offset() const { return offset_; }
  const Shape& sizes() const { return sizes_; }
  const Shape& strides() const { return strides_; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_->device(); }
  int64_t numel() const { return numel_; }
  int64_t dim() const { return static_cast<int64_t>(sizes_.size()); }
  bool is_contiguous() const { return contiguous_; }
  void* data() const {
    return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(element_size(dtype_));
  }

  // Metadata changes (used by views and by in-place resizing ops such as set_).
  void set_sizes_strides(Shape sizes, Shape strides, int64_t offset);
  // Makes this impl refer to `other`'s data (storage, geometry, dtype) while
  // keeping its own identity and autograd metadata: Module::to() uses it so
  // handles held by layers follow the conversion (PyTorch's set_data).
  void set_data(const TensorImpl& other);

  bool is_view() const { return is_view_; }
  void set_is_view(bool v) { is_view_ = v; }
  // Note [views after an in-place op] (core/autograd_meta.h): the storage's
  // autograd_writes() when this impl's autograd history last described its
  // data, or kNoHistoryMark for an alias outside autograd (detach()).
  static constexpr uint64_t kNoHistoryMark = ~uint64_t{0};
  uint64_t history_mark() const { return history_mark_; }
  void set_history_mark(uint64_t m) { history_mark_ = m; }
  bool history_is_stale() const {
    return history_mark_ != kNoHistoryMark && storage_ && history_mark_ != storage_->autograd_writes();
  }
  // Note [views after an in-place op]: for a view made from a tensor inside
  // autograd, the tensor that is not a view whose memory it shows (its root),
  // and whether grad mode was off when it (or a view it was taken from) was
  // made; null for other tensors.
  const std::shared_ptr<TensorImpl>& view_root() const { return view_root_; }
  bool view_made_without_grad() const { return view_made_without_grad_; }
  void set_view_root(std::shared_ptr<TensorImpl> root, bool made_without_grad) {
    view_root_ = std::move(root);
    view_made_without_grad_ = made_without_grad;
  }
  // A 0-dim tensor made from a C++ number: it does not raise the result dtype
  // category of a tensor it meets (x_int * 2 stays int, x_f16 * 2.0 stays f16).
  bool is_wrapped_number() const { return wrapped_number_; }
  void set_wrapped_number(bool v) { wrapped_number_ = v; }

  AutogradMeta* autograd_meta() const { return autograd_meta_.get(); }
  AutogradMeta& ensure_autograd_meta();

  static int64_t live_count();

 private:
  void refresh();
  Storage storage_;
  int64_t offset_;
  Shape sizes_, strides_;
  DType dtype_;
  int64_t numel_ = 1;
  bool contiguous_ = true;
  bool is_view_ = false;
  bool wrapped_number_ = false;
  bool view_made_without_grad_ = false;
  uint64_t history_mark_ = 0;
  std::shared_ptr<TensorImpl> view_root_;
  std::unique_ptr<AutogradMeta> autograd_meta_;
};

}  // namespace weft
