// f16/bf16 bit patterns for the tests of 16-bit sums through the switch (tests/switch/h16_test.cpp,
// tests/api/mp_inc_h16.cpp): decoding with ldexp and rounding an exact double once, nearest
// with ties to even, written independently of src/numerics. (tests/numerics/reference.hpp is
// the value-based reference of the conversion tests; these return bit patterns.)
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace inc::testing::h16 {

struct Format {
  int mant;  // stored mantissa bits
  int bias;
  int emax;  // largest unbiased exponent of a finite value
};
inline constexpr Format kF16{10, 15, 15};
inline constexpr Format kBF16{7, 127, 127};

inline double decode(std::uint16_t b, Format f) {
  const int ebits = 15 - f.mant;
  const int e = (b >> f.mant) & ((1 << ebits) - 1);
  const double m = b & ((1 << f.mant) - 1);
  const double s = (b & 0x8000) ? -1.0 : 1.0;
  if (e == (1 << ebits) - 1) return m ? NAN : s * INFINITY;
  if (e == 0) return s * std::ldexp(m, 1 - f.bias - f.mant);
  return s * std::ldexp(m + std::ldexp(1.0, f.mant), e - f.bias - f.mant);
}

// x (exact in double) rounded once to the format, nearest with ties to even.
inline std::uint16_t round_once(double x, Format f) {
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  x = std::fabs(x);
  if (x == 0) return sign;
  int k = 0;
  std::frexp(x, &k);  // x = g * 2^k, g in [0.5, 1)
  const int emin = 1 - f.bias;
  int e = std::max(k - 1, emin);
  double m = std::ldexp(x, f.mant - e);  // significand in units of the quantum (exact)
  double r = std::floor(m);
  const double frac = m - r;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(r, 2) == 1)) r += 1;
  if (r == std::ldexp(1.0, f.mant + 1)) {
    r /= 2;
    ++e;
  }
  const int ebits = 15 - f.mant;
  if (e > f.emax) return std::uint16_t(sign | (((1 << ebits) - 1) << f.mant));  // infinity
  const auto ri = static_cast<std::uint32_t>(r);
  if (ri < (1u << f.mant)) return std::uint16_t(sign | ri);  // subnormal
  return std::uint16_t(sign | std::uint32_t(e + f.bias) << f.mant | (ri - (1u << f.mant)));
}

}  // namespace inc::testing::h16
