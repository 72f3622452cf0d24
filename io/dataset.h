// Datasets: indexable collections of (data, target) examples, and the batch
// collate that stacks examples into one batch.
//
// Contract:
// - Dataset::get(i) for 0 <= i < size() returns one Example; it must be safe to
//   call concurrently from several threads (the DataLoader's workers do).
// - TensorDataset(data, targets) indexes dim 0 of both: data [N, ...] and targets
//   [N, ...] (targets may be undefined for unlabelled data). Examples are views
//   (no copy) of the detached tensors.
// - collate stacks examples along a new dim 0: data [B, ...], target [B, ...].
//   Every example must have the same shape and dtype and live on the CPU; the
//   result is a fresh contiguous tensor (memcpy per example), never a view.
// - ExampleTransform maps one example to another with a generator seeded per
//   example (io/transforms.h, io/dataloader.h), so random transforms are
//   deterministic.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"

namespace weft::io {

struct Example {
  Tensor data;
  Tensor target;  // may be undefined
};
// A batch has the same shape as an example with a leading batch dim.
using Batch = Example;

using ExampleTransform = std::function<Example(const Example&, Generator&)>;

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // Thread-safe; errors (weft::Error) for i outside [0, size()).
  virtual Example get(int64_t i) const = 0;
};

class TensorDataset : public Dataset {
 public:
  // data [N, ...], targets [N, ...] or undefined.
  TensorDataset(const Tensor& data, const Tensor& targets = Tensor());
  int64_t size() const override { return size_; }
  Example get(int64_t i) const override;
  const Tensor& data() const { return data_; }
  const Tensor& targets() const { return targets_; }

 private:
  Tensor data_, targets_;
  int64_t size_ = 0;
};

// Stacks same-shaped, same-dtype CPU tensors along a new dim 0 ([B, ...]).
// `what` names the field in errors ("data", "target").
Tensor stack_tensors(const std::vector<Tensor>& items, const std::string& what = "tensor");

// Stacks examples into a batch. Targets must be all defined or all undefined.
Batch collate(const std::vector<Example>& examples);

}  // namespace weft::io
