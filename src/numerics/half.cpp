// Out-of-line conversions: f64 -> f16/bf16 with one rounding (round-to-nearest-even).
// The hot f32 <-> f16/bf16 conversions are inline in half.hpp.
#include "numerics/half.hpp"

#include <bit>
#include <cstdint>

namespace inc::numerics {
namespace {

// Round a double to a binary format with `Mant` stored mantissa bits and `Exp` exponent bits,
// returning its bit pattern. Works on the 53-bit significand with integer shifts so there is
// exactly one rounding step, also for results in the subnormal range.
template <int Mant, int Exp>
std::uint16_t f64_to_small(double d) noexcept {
  constexpr int bias = (1 << (Exp - 1)) - 1;
  constexpr std::uint64_t inf = std::uint64_t{(1u << Exp) - 1} << Mant;
  const std::uint64_t x = std::bit_cast<std::uint64_t>(d);
  const auto sign = static_cast<std::uint16_t>((x >> 63) << (Mant + Exp));
  const std::uint64_t ax = x & 0x7fffffffffffffffull;
  const std::uint64_t frac = ax & 0x000fffffffffffffull;
  const int e64 = static_cast<int>(ax >> 52);
  if (e64 == 0x7ff) {
    if (frac == 0) return static_cast<std::uint16_t>(sign | inf);
    // NaN: quiet bit plus the top payload bits.
    const std::uint64_t payload = frac >> (52 - Mant);
    const std::uint64_t quiet = std::uint64_t{1} << (Mant - 1);
    return static_cast<std::uint16_t>(sign | inf | quiet | payload);
  }
  if (e64 == 0) return sign;  // zero or f64 subnormal: far below half the smallest subnormal
  const int e = e64 - 1023;   // unbiased exponent, value = 1.frac * 2^e
  const std::uint64_t sig = frac | (std::uint64_t{1} << 52);
  int shift = 52 - Mant;
  if (e < 1 - bias) shift += (1 - bias) - e;  // subnormal result: fewer significand bits
  if (shift > 53) return sign;                // below half the smallest subnormal
  std::uint64_t q = sig >> shift;
  const std::uint64_t rem = sig & ((std::uint64_t{1} << shift) - 1);
  const std::uint64_t half = std::uint64_t{1} << (shift - 1);
  if (rem > half || (rem == half && (q & 1))) ++q;
  // Normal: q includes the implicit bit, which adds one to the biased exponent field, and a
  // rounding carry into bit Mant+1 moves the exponent up. Subnormal: q is the field itself.
  std::uint64_t bits;
  if (e < 1 - bias) {
    bits = q;
  } else {
    if (e > bias) return static_cast<std::uint16_t>(sign | inf);
    bits = (static_cast<std::uint64_t>(e + bias - 1) << Mant) + q;
  }
  if (bits >= inf) bits = inf;
  return static_cast<std::uint16_t>(sign | bits);
}

}  // namespace

std::uint16_t f64_to_f16(double d) noexcept { return f64_to_small<10, 5>(d); }
std::uint16_t f64_to_bf16(double d) noexcept { return f64_to_small<7, 8>(d); }

}  // namespace inc::numerics
