// Image transforms applied per example: Normalize, RandomCrop (zero padding),
// RandomHorizontalFlip, Compose.
//
// Contract:
// - Images are [C, H, W] (or any leading dims before H, W for the spatial
//   transforms; Normalize also accepts [N, C, H, W]). Results are new contiguous
//   tensors of the input dtype (RandomHorizontalFlip returns the input itself,
//   made contiguous, when it does not flip); inputs are never modified.
// - Random transforms draw only from the Generator passed in. The DataLoader
//   passes one seeded by (seed, epoch, dataset index) (io/dataloader.h), so a
//   transformed example does not depend on the worker count or visiting order.
//   Draws: RandomCrop reserves 2 values (top = v0 mod (H + 2p - h + 1),
//   left = v1 mod (W + 2p - w + 1)); RandomHorizontalFlip reserves 1 value and
//   flips when uniform_float(v0) < p.
#pragma once

#include <functional>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"
#include "io/dataset.h"

namespace weft::io {

using TensorTransform = std::function<Tensor(const Tensor&, Generator&)>;

// Deterministic building blocks.
// x [C, H, W] or [N, C, H, W], float32/float64: (x - mean[c]) / std[c]. `mean`
// and `std` have C entries (or 1, used for every channel); std must be non-zero.
Tensor normalize(const Tensor& x, const std::vector<double>& mean, const std::vector<double>& std);
// x [..., H, W] -> [..., height, width]: the window at (top, left) of x padded
// with `padding` zeros on every side.
Tensor crop_padded(const Tensor& x, int64_t top, int64_t left, int64_t height, int64_t width, int64_t padding);
// x [..., H, W] reversed along W.
Tensor horizontal_flip(const Tensor& x);

struct Normalize {
  std::vector<double> mean, std;
  Normalize(std::vector<double> mean, std::vector<double> std);
  Tensor operator()(const Tensor& x, Generator& gen) const;
};

struct RandomCrop {
  int64_t height, width, padding;
  RandomCrop(int64_t size, int64_t padding = 0) : RandomCrop(size, size, padding) {}
  RandomCrop(int64_t height, int64_t width, int64_t padding);
  Tensor operator()(const Tensor& x, Generator& gen) const;
};

struct RandomHorizontalFlip {
  double p;
  explicit RandomHorizontalFlip(double p = 0.5);
  Tensor operator()(const Tensor& x, Generator& gen) const;
};

// Applies transforms in order with the same generator.
struct Compose {
  std::vector<TensorTransform> transforms;
  Tensor operator()(const Tensor& x, Generator& gen) const;
};

// Lifts an image transform to an example transform acting on Example::data.
ExampleTransform on_data(TensorTransform t);

}  // namespace weft::io
