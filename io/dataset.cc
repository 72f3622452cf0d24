// TensorDataset and the memcpy batch collate (io/dataset.h).
#include "io/dataset.h"

#include <cstring>

#include "core/ops.h"

namespace weft::io {

TensorDataset::TensorDataset(const Tensor& data, const Tensor& targets) {
  WEFT_CHECK(data.defined(), "TensorDataset: data is undefined");
  WEFT_CHECK(data.dim() >= 1, "TensorDataset: data must have a leading example dim, got shape ",
             shape_str(data.sizes()));
  data_ = data.detach();
  size_ = data.size(0);
  if (targets.defined()) {
    WEFT_CHECK(targets.dim() >= 1, "TensorDataset: targets must have a leading example dim, got shape ",
               shape_str(targets.sizes()));
    WEFT_CHECK(targets.size(0) == size_, "TensorDataset: data has ", size_, " examples (shape ",
               shape_str(data.sizes()), ") but targets have ", targets.size(0), " (shape ", shape_str(targets.sizes()),
               ")");
    targets_ = targets.detach();
  }
}

Example TensorDataset::get(int64_t i) const {
  WEFT_CHECK(i >= 0 && i < size_, "TensorDataset::get: index ", i, " is out of range for a dataset of ", size_,
             " examples");
  Example e;
  e.data = data_.select(0, i);
  if (targets_.defined()) e.target = targets_.select(0, i);
  return e;
}

Tensor stack_tensors(const std::vector<Tensor>& items, const std::string& what) {
  WEFT_CHECK(!items.empty(), "collate: no ", what, " tensors to stack");
  const Tensor& first = items[0];
  WEFT_CHECK(first.defined(), "collate: ", what, " 0 is undefined");
  const Shape& shape = first.sizes();
  const DType dt = first.dtype();
  for (size_t i = 0; i < items.size(); ++i) {
    const Tensor& t = items[i];
    WEFT_CHECK(t.defined(), "collate: ", what, " ", i, " is undefined");
    WEFT_CHECK(t.device() == kCPU, "collate: ", what, " ", i, " is on ", t.device(), "; collate stacks CPU tensors");
    WEFT_CHECK(t.sizes() == shape, "collate: ", what, " ", i, " has shape ", shape_str(t.sizes()), " but ", what,
               " 0 has shape ", shape_str(shape));
    WEFT_CHECK(t.dtype() == dt, "collate: ", what, " ", i, " has dtype ", t.dtype(), " but ", what, " 0 has dtype ",
               dt);
  }
  Shape out_shape{static_cast<int64_t>(items.size())};
  out_shape.insert(out_shape.end(), shape.begin(), shape.end());
  Tensor out = empty(out_shape, {dt});
  const size_t bytes = first.nbytes();
  char* dst = static_cast<char*>(out.raw_data());
  for (size_t i = 0; i < items.size(); ++i) {
    Tensor c = items[i].is_contiguous() ? items[i] : items[i].contiguous();
    if (bytes > 0) std::memcpy(dst + i * bytes, c.raw_data(), bytes);
  }
  return out;
}

Batch collate(const std::vector<Example>& examples) {
  WEFT_CHECK(!examples.empty(), "collate: empty batch");
  std::vector<Tensor> data, targets;
  data.reserve(examples.size());
  const bool has_target = examples[0].target.defined();
  for (size_t i = 0; i < examples.size(); ++i) {
    data.push_back(examples[i].data);
    WEFT_CHECK(examples[i].target.defined() == has_target, "collate: example ", i, (has_target ? " has no" : " has a"),
               " target but example 0 ", (has_target ? "has one" : "does not"));
    if (has_target) targets.push_back(examples[i].target);
  }
  Batch b;
  b.data = stack_tensors(data, "data");
  if (has_target) b.target = stack_tensors(targets, "target");
  return b;
}

}  // namespace weft::io
