// Element types: the DType enum, its C++ types, sizes, names, promotion and the
// dtype dispatch helper used by kernels.
//
// Contract: every DType maps to exactly one C++ type (CppType<D>) and back
// (dtype_of<T>). dispatch(dt, op, f) calls f(type_tag<T>{}) for the dtype's C++
// type and throws a clear error naming the op for dtypes outside the chosen set.
#pragma once

#include <cstdint>
#include <ostream>
#include <string_view>

#include "core/error.h"
#include "core/half.h"

namespace weft {

enum class DType : uint8_t { Float32, Float64, BFloat16, Float16, Int64, Int32, UInt8, Bool };
inline constexpr int kNumDTypes = 8;

constexpr std::string_view dtype_name(DType d) {
  switch (d) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::BFloat16: return "bfloat16";
    case DType::Float16: return "float16";
    case DType::Int64: return "int64";
    case DType::Int32: return "int32";
    case DType::UInt8: return "uint8";
    case DType::Bool: return "bool";
  }
  return "?";
}
inline std::ostream& operator<<(std::ostream& os, DType d) { return os << dtype_name(d); }

// libtorch-style spellings: zeros({n}, kInt64), x.to(kBFloat16).
inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;
inline constexpr DType kBFloat16 = DType::BFloat16;
inline constexpr DType kFloat16 = DType::Float16;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kInt32 = DType::Int32;
inline constexpr DType kUInt8 = DType::UInt8;
inline constexpr DType kBool = DType::Bool;

constexpr size_t element_size(DType d) {
  switch (d) {
    case DType::Float64:
    case DType::Int64: return 8;
    case DType::Float32:
    case DType::Int32: return 4;
    case DType::BFloat16:
    case DType::Float16: return 2;
    case DType::UInt8:
    case DType::Bool: return 1;
  }
  return 0;
}
constexpr bool is_floating(DType d) {
  return d == DType::Float32 || d == DType::Float64 || d == DType::BFloat16 || d == DType::Float16;
}
constexpr bool is_integral(DType d, bool include_bool = false) {
  return d == DType::Int64 || d == DType::Int32 || d == DType::UInt8 || (include_bool && d == DType::Bool);
}

template <typename T>
struct type_tag {
  using type = T;
};

template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::Float32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::Float64;
};
template <>
struct DTypeOf<BFloat16> {
  static constexpr DType value = DType::BFloat16;
};
template <>
struct DTypeOf<Half> {
  static constexpr DType value = DType::Float16;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::Int64;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::Int32;
};
template <>
struct DTypeOf<uint8_t> {
  static constexpr DType value = DType::UInt8;
};
template <>
struct DTypeOf<bool> {
  static constexpr DType value = DType::Bool;
};
template <typename T>
inline constexpr DType dtype_of = DTypeOf<T>::value;

// The type arithmetic is done in: float for the 16-bit floats, else T itself.
template <typename T>
struct OpMath {
  using type = T;
};
template <>
struct OpMath<BFloat16> {
  using type = float;
};
template <>
struct OpMath<Half> {
  using type = float;
};
template <typename T>
using opmath_t = typename OpMath<T>::type;

// Sets of dtypes a kernel accepts, used by dispatch.
enum DTypeSet : uint32_t {
  kFloatingTypes = (1u << int(DType::Float32)) | (1u << int(DType::Float64)) | (1u << int(DType::BFloat16)) |
                   (1u << int(DType::Float16)),
  kIntegralTypes = (1u << int(DType::Int64)) | (1u << int(DType::Int32)) | (1u << int(DType::UInt8)),
  kNumericTypes = kFloatingTypes | kIntegralTypes,
  kAllTypes = kNumericTypes | (1u << int(DType::Bool)),
};
constexpr bool in_set(DType d, uint32_t set) { return (set >> int(d)) & 1u; }

// Calls f(type_tag<T>{}) with T the C++ type of `d`; throws if `d` is not in `set`.
template <uint32_t Set = kAllTypes, typename F>
decltype(auto) dispatch(DType d, std::string_view op, F&& f) {
  WEFT_CHECK(in_set(d, Set), op, ": not supported for dtype ", d);
  switch (d) {
    case DType::Float32:
      if constexpr (in_set(DType::Float32, Set)) return f(type_tag<float>{});
      break;
    case DType::Float64:
      if constexpr (in_set(DType::Float64, Set)) return f(type_tag<double>{});
      break;
    case DType::BFloat16:
      if constexpr (in_set(DType::BFloat16, Set)) return f(type_tag<BFloat16>{});
      break;
    case DType::Float16:
      if constexpr (in_set(DType::Float16, Set)) return f(type_tag<Half>{});
      break;
    case DType::Int64:
      if constexpr (in_set(DType::Int64, Set)) return f(type_tag<int64_t>{});
      break;
    case DType::Int32:
      if constexpr (in_set(DType::Int32, Set)) return f(type_tag<int32_t>{});
      break;
    case DType::UInt8:
      if constexpr (in_set(DType::UInt8, Set)) return f(type_tag<uint8_t>{});
      break;
    case DType::Bool:
      if constexpr (in_set(DType::Bool, Set)) return f(type_tag<bool>{});
      break;
  }
  WEFT_ERROR(op, ": not supported for dtype ", d);
}

// Type promotion between two tensor dtypes (PyTorch's rules for these types):
// bool < uint8 < int32 < int64 < {float16, bfloat16} < float32 < float64;
// float16 with bfloat16 gives float32.
DType promote_types(DType a, DType b);

}  // namespace weft
