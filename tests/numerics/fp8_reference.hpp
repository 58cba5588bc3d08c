// A reference for OCP fp8 (e4m3, e5m2) written from the definitions, independent of
// src/numerics, for the switch and process tests: values by ldexp from sign/exponent/mantissa,
// rounding = the nearest finite value (ties to the even code) with the OCP
// non-saturating overflow (e4m3 NaN 0x7f, e5m2 infinity 0x7c, from the midpoint to the next
// binade's first value on).
#pragma once

#include <cmath>
#include <cstdint>

namespace inc::testing::fp8 {

struct Fp8 {
  int ebits, mbits, bias;
  bool e4m3;
  double value(std::uint8_t b) const {
    const int e = (b >> mbits) & ((1 << ebits) - 1), m = b & ((1 << mbits) - 1);
    const double v = e == 0 ? std::ldexp(m, 1 - bias - mbits) : std::ldexp((1 << mbits) + m, e - bias - mbits);
    return (b & 0x80) ? -v : v;
  }
  bool finite(std::uint8_t b) const { return e4m3 ? (b & 0x7f) != 0x7f : (b & 0x7c) != 0x7c; }
  // The nearest of the finite non-negative codes (ascending in value, so a binary search finds
  // the two neighbours), ties to the even code; then the sign.
  std::uint8_t round(double x) const {
    const double limit = e4m3 ? 464 : 61440;
    const std::uint8_t sign = std::signbit(x) ? 0x80 : 0;
    const double ax = std::fabs(x);
    if (ax >= limit) return std::uint8_t(sign | (e4m3 ? 0x7f : 0x7c));
    const int top = e4m3 ? 0x7e : 0x7b;  // the largest finite code
    int lo = 0, hi = top;                // value(lo) <= ax < value(hi), or ax beyond the top
    if (ax >= value(std::uint8_t(top))) return std::uint8_t(sign | top);
    while (hi - lo > 1) {
      const int mid = (lo + hi) / 2;
      (value(std::uint8_t(mid)) <= ax ? lo : hi) = mid;
    }
    const double dl = ax - value(std::uint8_t(lo)), dh = value(std::uint8_t(hi)) - ax;
    const int best = dl < dh || (dl == dh && (lo & 1) == 0) ? lo : hi;
    return std::uint8_t(best | sign);
  }
};
inline const Fp8 kE4M3{4, 3, 7, true};
inline const Fp8 kE5M2{5, 2, 15, false};

}  // namespace inc::testing::fp8
