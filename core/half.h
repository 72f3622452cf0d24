// 16-bit floating point storage types: Half (IEEE binary16) and BFloat16.
//
// Contract: both are plain 2-byte values with exact conversion to float and
// round-to-nearest-even conversion from float (NaN stays NaN). Arithmetic goes
// through float; kernels load, compute in float and store.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>

namespace weft {

namespace detail {
inline uint32_t f2u(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float u2f(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace detail

struct BFloat16 {
  uint16_t x = 0;
  BFloat16() = default;
  BFloat16(float f) {  // NOLINT(google-explicit-constructor): numeric type
    // round to nearest even; NaN to the quiet NaN. Branch-free, so loops of
    // conversions vectorise.
    const uint32_t u = detail::f2u(f);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    x = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? 0x7fc0u : rounded);
  }
  operator float() const { return detail::u2f(static_cast<uint32_t>(x) << 16); }  // NOLINT
  static BFloat16 from_bits(uint16_t b) {
    BFloat16 r;
    r.x = b;
    return r;
  }
};

struct Half {
  uint16_t x = 0;
  Half() = default;
  Half(float f) { x = from_float(f); }            // NOLINT(google-explicit-constructor)
  operator float() const { return to_float(x); }  // NOLINT
  static Half from_bits(uint16_t b) {
    Half r;
    r.x = b;
    return r;
  }

  static float to_float(uint16_t h) {
    uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    uint32_t u;
    if (exp == 0) {
      if (mant == 0) {
        u = sign;
      } else {  // subnormal: normalise
        exp = 127 - 15 + 1;
        while ((mant & 0x400) == 0) {
          mant <<= 1;
          --exp;
        }
        mant &= 0x3ff;
        u = sign | (exp << 23) | (mant << 13);
      }
    } else if (exp == 0x1f) {
      u = sign | 0x7f800000u | (mant << 13);
    } else {
      u = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    return detail::u2f(u);
  }
  static uint16_t from_float(float f) {
    uint32_t u = detail::f2u(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
    if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
    if (abs < 0x38800000u) {                                               // subnormal or zero in half
      // add 0.5 in float then take bits: uses float rounding (nearest even)
      float a = detail::u2f(abs) + 0.5f;
      return static_cast<uint16_t>(sign | (detail::f2u(a) - 0x3f000000u));
    }
    uint32_t mant_odd = (abs >> 13) & 1u;
    abs += 0xc8000fffu + mant_odd;  // rebias exponent (-112<<23) and round
    return static_cast<uint16_t>(sign | (abs >> 13));
  }
};

inline std::ostream& operator<<(std::ostream& os, BFloat16 v) { return os << static_cast<float>(v); }
inline std::ostream& operator<<(std::ostream& os, Half v) { return os << static_cast<float>(v); }

}  // namespace weft
