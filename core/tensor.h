// Tensor: a cheap value handle to a shared TensorImpl.
//
// Contract: copying a Tensor copies the handle (both refer to the same data);
// clone() copies data. A default-constructed Tensor is "undefined" (defined() is
// false); autograd uses undefined tensors for "zero gradient". Methods are thin
// forwards to the free functions in core/ops.h, defined in core/tensor_methods.h.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/scalar.h"
#include "core/shape.h"
#include "core/tensor_impl.h"

namespace weft {

class Node;
class RemovableHandle;

// What a factory makes: dtype, device, requires_grad. Like libtorch's, a DType
// or a Device converts implicitly, so zeros({n}, DType::Int64),
// arange(0, T, 1, kInt64) and ones({n}, Device("cuda")) read as in PyTorch; the
// with_* methods return a copy with one field changed (libtorch spells them
// .dtype(d), .device(d), .requires_grad(b)). Unlike libtorch's, every field has
// a value (float32, CPU, false): the *_like factories take a bare DType or
// Device to change only that field of the source tensor's options.
struct TensorOptions {
  DType dtype = DType::Float32;
  Device device = kCPU;
  bool requires_grad = false;

  constexpr TensorOptions() = default;
  constexpr TensorOptions(DType d) : dtype(d) {}        // NOLINT(google-explicit-constructor)
  constexpr TensorOptions(Device dev) : device(dev) {}  // NOLINT(google-explicit-constructor)
  constexpr TensorOptions(DType d, Device dev, bool grad = false) : dtype(d), device(dev), requires_grad(grad) {}

  constexpr TensorOptions with_dtype(DType d) const { return {d, device, requires_grad}; }
  constexpr TensorOptions with_device(Device dev) const { return {dtype, dev, requires_grad}; }
  constexpr TensorOptions with_requires_grad(bool grad = true) const { return {dtype, device, grad}; }
  friend constexpr bool operator==(const TensorOptions&, const TensorOptions&) = default;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

  // ---- metadata ----
  const Shape& sizes() const { return checked()->sizes(); }
  const Shape& shape() const { return sizes(); }
  int64_t size(int64_t dim) const;
  const Shape& strides() const { return checked()->strides(); }
  int64_t stride(int64_t dim) const;
  int64_t dim() const { return checked()->dim(); }
  int64_t ndim() const { return dim(); }
  int64_t numel() const { return checked()->numel(); }
  DType dtype() const { return checked()->dtype(); }
  Device device() const { return checked()->device(); }
  TensorOptions options() const { return {dtype(), device(), false}; }
  int64_t storage_offset() const { return checked()->offset(); }
  bool is_contiguous() const { return checked()->is_contiguous(); }
  bool is_floating_point() const { return is_floating(dtype()); }
  size_t element_size() const { return weft::element_size(dtype()); }
  size_t nbytes() const { return numel() * element_size(); }

  // Pointer to the first element; checks that T matches dtype().
  template <typename T>
  T* data_ptr() const {
    WEFT_CHECK(dtype() == dtype_of<T>, "data_ptr: tensor has dtype ", dtype(), " but ", dtype_of<T>, " was requested");
    return static_cast<T*>(checked()->data());
  }
  void* raw_data() const { return checked()->data(); }

  // The value of a one-element tensor (any shape with numel 1), converted to T
  // (float, double, int64_t, int32_t, uint8_t, bool, BFloat16, Half).
  template <typename T>
  T item() const;
  Scalar item() const;

  // ---- autograd ----
  bool requires_grad() const;
  // Only leaves (and only floating dtypes) may have requires_grad set.
  Tensor& requires_grad_(bool value = true);
  Tensor& set_requires_grad(bool value) { return requires_grad_(value); }
  Tensor grad() const;
  void set_grad(const Tensor& g) const;
  void zero_grad() const;  // sets grad to undefined
  const std::shared_ptr<Node>& grad_fn() const;
  int output_nr() const;
  bool is_leaf() const;
  // Keeps .grad on a non-leaf after backward.
  void retain_grad() const;
  // Runs the engine of //autograd (Note [backward engine] in core/autograd_meta.h:
  // without //autograd linked it is an error). `gradient` may be omitted for
  // one-element tensors. Same as autograd::backward(*this, gradient,
  // retain_graph, create_graph) (create_graph: Note [double backward]).
  void backward(const Tensor& gradient = Tensor(), std::optional<bool> retain_graph = std::nullopt,
                bool create_graph = false) const;
  // A tensor hook sees the gradient flowing into this tensor and may replace it
  // by returning a defined tensor (return an undefined Tensor to keep it).
  RemovableHandle register_hook(std::function<Tensor(const Tensor&)> hook) const;
  // Called once this leaf's .grad is final for the current backward.
  RemovableHandle register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const;
  Tensor detach() const;
  Tensor& detach_();
  uint64_t version() const { return checked()->storage()->version(); }
  void bump_version() const { checked()->storage()->bump_version(); }

  // ---- conversion / copies (core/ops.h) ----
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;
  Tensor to(const TensorOptions& opts) const;
  Tensor clone() const;
  Tensor contiguous() const;
  Tensor& copy_(const Tensor& src);
  Tensor& fill_(const Scalar& value);
  Tensor& zero_();
  Tensor cpu() const { return to(kCPU); }

  // ---- views ----
  Tensor view(const Shape& shape) const;
  Tensor reshape(const Shape& shape) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor expand(const Shape& sizes) const;
  Tensor expand_as(const Tensor& other) const { return expand(other.sizes()); }
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;

  // ---- math (core/ops.h) ----
  Tensor add(const Tensor& o, const Scalar& alpha = 1) const;
  Tensor sub(const Tensor& o, const Scalar& alpha = 1) const;
  Tensor mul(const Tensor& o) const;
  Tensor div(const Tensor& o) const;
  Tensor pow(const Tensor& o) const;
  Tensor pow(const Scalar& e) const;
  Tensor neg() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor abs() const;
  Tensor relu() const;
  Tensor sigmoid() const;
  Tensor tanh() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor erf() const;
  Tensor log1p() const;
  Tensor expm1() const;
  Tensor reciprocal() const;
  Tensor floor() const;
  Tensor ceil() const;
  Tensor round() const;
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max) const;
  Tensor matmul(const Tensor& o) const;
  Tensor sum() const;
  Tensor sum(const std::vector<int64_t>& dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const std::vector<int64_t>& dims, bool keepdim = false) const;
  Tensor max() const;
  Tensor min() const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;
  Tensor masked_fill(const Tensor& mask, const Scalar& value) const;
  Tensor cumsum(int64_t dim) const;

  // ---- rearranging and sorting (core/ops.h) ----
  Tensor flip(const std::vector<int64_t>& dims) const;
  Tensor roll(const std::vector<int64_t>& shifts, const std::vector<int64_t>& dims = {}) const;
  Tensor repeat(const std::vector<int64_t>& repeats) const;
  Tensor tile(const std::vector<int64_t>& reps) const;
  std::vector<Tensor> unbind(int64_t dim = 0) const;
  std::tuple<Tensor, Tensor> sort(int64_t dim = -1, bool descending = false) const;
  Tensor argsort(int64_t dim = -1, bool descending = false) const;
  std::tuple<Tensor, Tensor> topk(int64_t k, int64_t dim = -1, bool largest = true) const;

  // in-place arithmetic (bump the version counter)
  Tensor& add_(const Tensor& o, const Scalar& alpha = 1);
  Tensor& add_(const Scalar& o);
  Tensor& sub_(const Tensor& o, const Scalar& alpha = 1);
  Tensor& mul_(const Tensor& o);
  Tensor& mul_(const Scalar& o);
  Tensor& div_(const Tensor& o);
  Tensor& div_(const Scalar& o);

  std::string str() const;  // readable printing (core/print.cc)

 private:
  TensorImpl* checked() const {
    WEFT_CHECK(impl_ != nullptr, "operation on an undefined tensor");
    return impl_.get();
  }
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Makes a tensor viewing `impl`'s storage with new geometry (no autograd).
Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset);

}  // namespace weft
