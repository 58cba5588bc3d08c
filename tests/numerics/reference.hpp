// Slow, independent reference arithmetic for the numerics tests. Written differently from the
// library on purpose: decoding with ldexp, rounding with frexp/floor on long double values and
// an explicit tie rule, instead of bit manipulation.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace inc::numerics::ref {

// A binary floating-point format: p significand bits (with the implicit one), normal exponents
// emin..emax, e exponent-field bits.
struct Format {
  int p;
  int emin;
  int emax;
  int exp_bits;
};
inline constexpr Format kF16{11, -14, 15, 5};
inline constexpr Format kBF16{8, -126, 127, 8};
inline constexpr Format kF32{24, -126, 127, 8};

// Value of a 16-bit pattern (NaN for NaN patterns).
inline long double decode(Format f, std::uint16_t bits) {
  const int mant_bits = f.p - 1;
  const int bias = (1 << (f.exp_bits - 1)) - 1;
  const bool neg = (bits >> (mant_bits + f.exp_bits)) & 1;
  const int e = (bits >> mant_bits) & ((1 << f.exp_bits) - 1);
  const long double m = static_cast<long double>(bits & ((1u << mant_bits) - 1));
  long double v;
  if (e == (1 << f.exp_bits) - 1) {
    v = m == 0 ? HUGE_VALL : NAN;
  } else if (e == 0) {
    v = std::ldexp(m, f.emin - mant_bits);
  } else {
    v = std::ldexp(m + std::ldexp(1.0L, mant_bits), e - bias - mant_bits);
  }
  return neg ? -v : v;
}

// Round a finite or infinite long double to format f, nearest-even, overflow to infinity.
// Returns the rounded value (the caller compares values and sign bits).
inline long double round_to(Format f, long double v) {
  if (std::isnan(v)) return v;
  if (v == 0 || std::isinf(v)) return v;
  const long double a = std::fabs(v);
  int e2;
  std::frexp(a, &e2);  // a = m * 2^e2, m in [0.5, 1): leading bit has weight 2^(e2-1)
  const int lead = e2 - 1 < f.emin ? f.emin : e2 - 1;
  const long double quantum = std::ldexp(1.0L, lead - (f.p - 1));
  const long double scaled = a / quantum;  // exact: division by a power of two
  const long double down = std::floor(scaled);
  const long double frac = scaled - down;
  long double n = down;
  if (frac > 0.5L || (frac == 0.5L && std::fmod(down, 2.0L) == 1.0L)) n = down + 1;
  long double r = n * quantum;
  const long double max_finite = std::ldexp(2.0L - std::ldexp(1.0L, 1 - f.p), f.emax);
  if (r > max_finite) r = HUGE_VALL;
  return std::copysign(r, v);
}

inline std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float float_of(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline std::uint64_t bits_of(double f) {
  std::uint64_t u;
  std::memcpy(&u, &f, 8);
  return u;
}

}  // namespace inc::numerics::ref
