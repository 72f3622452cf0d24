// Layers that rearrange or pad their input without parameters: PixelShuffle,
// PixelUnshuffle, Unflatten, and the padding layers (ZeroPad, ConstantPad,
// ReflectionPad, ReplicationPad, CircularPad in 1-D and 2-D) over pad().
// Arguments, defaults and names are PyTorch's; padding is (left, right) or
// (left, right, top, bottom), or one amount for every side.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/nn_ops.h"
#include "nn/module.h"

namespace weft::nn {

class PixelShuffle : public Module {
 public:
  explicit PixelShuffle(int64_t upscale_factor) : Module("PixelShuffle"), upscale_factor(upscale_factor) {}
  Tensor forward(const Tensor& x) override { return pixel_shuffle(x, upscale_factor); }
  std::string extra_repr() const override { return "upscale_factor=" + std::to_string(upscale_factor); }
  int64_t upscale_factor;
};

class PixelUnshuffle : public Module {
 public:
  explicit PixelUnshuffle(int64_t downscale_factor) : Module("PixelUnshuffle"), downscale_factor(downscale_factor) {}
  Tensor forward(const Tensor& x) override { return pixel_unshuffle(x, downscale_factor); }
  std::string extra_repr() const override { return "downscale_factor=" + std::to_string(downscale_factor); }
  int64_t downscale_factor;
};

// Splits dim into `sizes` (one of them may be -1: inferred), the inverse of Flatten.
class Unflatten : public Module {
 public:
  Unflatten(int64_t dim, Shape sizes);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  int64_t dim;
  Shape sizes;
};

// Pads the last `spatial_dims` dims (1 or 2) with pad(x, padding, mode, value).
class Pad : public Module {
 public:
  Pad(const char* type, int spatial_dims, std::vector<int64_t> padding, PadMode mode, double value = 0.0);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::vector<int64_t> padding;  // (left, right) or (left, right, top, bottom)
  PadMode mode;
  double value;

 private:
  int spatial_dims_;
};

class ZeroPad1d : public Pad {
 public:
  explicit ZeroPad1d(int64_t p) : ZeroPad1d(std::array<int64_t, 2>{p, p}) {}
  explicit ZeroPad1d(std::array<int64_t, 2> p) : Pad("ZeroPad1d", 1, {p[0], p[1]}, PadMode::Constant) {}
};
class ZeroPad2d : public Pad {
 public:
  explicit ZeroPad2d(int64_t p) : ZeroPad2d(std::array<int64_t, 4>{p, p, p, p}) {}
  explicit ZeroPad2d(std::array<int64_t, 4> p) : Pad("ZeroPad2d", 2, {p[0], p[1], p[2], p[3]}, PadMode::Constant) {}
};
class ConstantPad1d : public Pad {
 public:
  ConstantPad1d(int64_t p, double value) : ConstantPad1d(std::array<int64_t, 2>{p, p}, value) {}
  ConstantPad1d(std::array<int64_t, 2> p, double value)
      : Pad("ConstantPad1d", 1, {p[0], p[1]}, PadMode::Constant, value) {}
};
class ConstantPad2d : public Pad {
 public:
  ConstantPad2d(int64_t p, double value) : ConstantPad2d(std::array<int64_t, 4>{p, p, p, p}, value) {}
  ConstantPad2d(std::array<int64_t, 4> p, double value)
      : Pad("ConstantPad2d", 2, {p[0], p[1], p[2], p[3]}, PadMode::Constant, value) {}
};
class ReflectionPad1d : public Pad {
 public:
  explicit ReflectionPad1d(int64_t p) : ReflectionPad1d(std::array<int64_t, 2>{p, p}) {}
  explicit ReflectionPad1d(std::array<int64_t, 2> p) : Pad("ReflectionPad1d", 1, {p[0], p[1]}, PadMode::Reflect) {}
};
class ReflectionPad2d : public Pad {
 public:
  explicit ReflectionPad2d(int64_t p) : ReflectionPad2d(std::array<int64_t, 4>{p, p, p, p}) {}
  explicit ReflectionPad2d(std::array<int64_t, 4> p)
      : Pad("ReflectionPad2d", 2, {p[0], p[1], p[2], p[3]}, PadMode::Reflect) {}
};
class ReplicationPad1d : public Pad {
 public:
  explicit ReplicationPad1d(int64_t p) : ReplicationPad1d(std::array<int64_t, 2>{p, p}) {}
  explicit ReplicationPad1d(std::array<int64_t, 2> p) : Pad("ReplicationPad1d", 1, {p[0], p[1]}, PadMode::Replicate) {}
};
class ReplicationPad2d : public Pad {
 public:
  explicit ReplicationPad2d(int64_t p) : ReplicationPad2d(std::array<int64_t, 4>{p, p, p, p}) {}
  explicit ReplicationPad2d(std::array<int64_t, 4> p)
      : Pad("ReplicationPad2d", 2, {p[0], p[1], p[2], p[3]}, PadMode::Replicate) {}
};
class CircularPad1d : public Pad {
 public:
  explicit CircularPad1d(int64_t p) : CircularPad1d(std::array<int64_t, 2>{p, p}) {}
  explicit CircularPad1d(std::array<int64_t, 2> p) : Pad("CircularPad1d", 1, {p[0], p[1]}, PadMode::Circular) {}
};
class CircularPad2d : public Pad {
 public:
  explicit CircularPad2d(int64_t p) : CircularPad2d(std::array<int64_t, 4>{p, p, p, p}) {}
  explicit CircularPad2d(std::array<int64_t, 4> p)
      : Pad("CircularPad2d", 2, {p[0], p[1], p[2], p[3]}, PadMode::Circular) {}
};

}  // namespace weft::nn
