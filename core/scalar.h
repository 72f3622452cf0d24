// Scalar: a number passed to an op (fill value, alpha, clamp bound), integral,
// floating or boolean, converted to the kernel's element type at dispatch.
#pragma once

#include <cstdint>
#include <ostream>
#include <type_traits>

#include "core/dtype.h"

namespace weft {

class Scalar {
 public:
  enum class Kind : uint8_t { Int, Float, Bool };
  Scalar() : Scalar(int64_t{0}) {}
  template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(Kind::Int), i_(static_cast<int64_t>(v)), d_(static_cast<double>(v)) {}  // NOLINT
  template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : kind_(Kind::Float), i_(static_cast<int64_t>(v)), d_(static_cast<double>(v)) {}  // NOLINT
  Scalar(bool v) : kind_(Kind::Bool), i_(v), d_(v) {}                                           // NOLINT
  Scalar(BFloat16 v) : Scalar(static_cast<float>(v)) {}                                         // NOLINT
  Scalar(Half v) : Scalar(static_cast<float>(v)) {}                                             // NOLINT

  Kind kind() const { return kind_; }
  bool is_floating() const { return kind_ == Kind::Float; }
  bool is_integral() const { return kind_ == Kind::Int; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  double to_double() const { return d_; }
  int64_t to_int() const { return i_; }

  template <typename T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>) return i_ != 0 || d_ != 0.0;
    else if constexpr (std::is_integral_v<T>)
      return static_cast<T>(kind_ == Kind::Float ? static_cast<int64_t>(d_) : i_);
    else if constexpr (std::is_same_v<T, double>) return kind_ == Kind::Float ? d_ : static_cast<double>(i_);
    else return T(static_cast<float>(kind_ == Kind::Float ? d_ : static_cast<double>(i_)));
  }
  // The dtype a tensor made from this scalar alone would have.
  DType default_dtype() const {
    return kind_ == Kind::Float ? DType::Float32 : kind_ == Kind::Int ? DType::Int64 : DType::Bool;
  }

 private:
  Kind kind_;
  int64_t i_;
  double d_;
};

inline std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  if (s.is_floating()) return os << s.to_double();
  if (s.is_bool()) return os << (s.to_int() ? "true" : "false");
  return os << s.to_int();
}

}  // namespace weft
