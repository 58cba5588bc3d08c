// OCP 8-bit floating point (OFP8, "OCP 8-bit Floating Point Specification" v1.0, also used by
// the OCP Microscaling formats):
//   E4M3: 1 sign, 4 exponent (bias 7), 3 mantissa bits. No infinities; one NaN per sign,
//         S.1111.111 (0x7f / 0xff); S.1111.110 = 448 is the largest finite value.
//   E5M2: 1 sign, 5 exponent (bias 15), 2 mantissa bits, IEEE 754-like: exponent 11111 with
//         mantissa 0 is an infinity, otherwise a NaN; 57344 is the largest finite value.
// Both have subnormals (exponent 0): E4M3 down to 2^-9, E5M2 down to 2^-16.
//
// Conversions to fp8 round to nearest, ties to even, once, from the exact input (an f32 is
// converted through double, which is exact). Overflow (the rounded magnitude exceeds the
// largest finite value) follows the OCP text's two modes:
//   Fp8Overflow::ieee      (non-saturating): E5M2 -> infinity, E4M3 -> NaN; an infinite input
//                          becomes E5M2's infinity and E4M3's NaN. The default, used by the
//                          reductions, so an overflow is seen, as f16's overflow to infinity.
//   Fp8Overflow::saturate  finite overflows and infinities clamp to +-max (448 or 57344), as
//                          CUDA's __NV_SATFINITE does.
// A NaN input gives a NaN of the same sign in both modes: E4M3 0x7f|sign, E5M2 0x7e|sign
// (the quiet pattern: top mantissa bit set). Decoding is exact; an E5M2 NaN decodes to a quiet
// f32 NaN. Rounding happens at the tie as if the format had one more binade: 464 (between 448
// and the missing 480) rounds to 448 (even mantissa) in E4M3, 61440 rounds up to the
// overflow in E5M2.
//
// Kernel constraints (kernels.hpp): always_inline, builtins only.
#pragma once

#include <cstdint>

namespace inc::numerics {

enum class Fp8Overflow : std::uint8_t { ieee, saturate };

namespace fp8detail {

// Round |d| (sign handled by the caller) to a format with M mantissa bits and exponent bias
// Bias; returns the magnitude pattern, which may exceed the format's range (the caller tests
// for overflow). d must be finite and not NaN.
template <int M, int Bias>
[[gnu::always_inline]] inline std::uint64_t round_magnitude(std::uint64_t ax) noexcept {
  const int biased = static_cast<int>(ax >> 52);
  if (biased == 0) return 0;  // double zero or subnormal (< 2^-1022): far below half an fp8 ulp
  const int e = biased - 1023;
  const std::uint64_t sig = (ax & ((std::uint64_t{1} << 52) - 1)) | (std::uint64_t{1} << 52);
  constexpr int kEmin = 1 - Bias;
  // Number of significand bits dropped: normal numbers keep M bits after the leading one,
  // subnormals (e < kEmin) keep fewer.
  const int shift = e >= kEmin ? 52 - M : 52 - M + (kEmin - e);
  if (shift > 54) return 0;  // value < 2^-2 ulp: rounds to zero
  std::uint64_t q = sig >> shift;
  const std::uint64_t rem = sig & ((std::uint64_t{1} << shift) - 1);
  const std::uint64_t half = std::uint64_t{1} << (shift - 1);
  if (rem > half || (rem == half && (q & 1u) != 0)) ++q;
  if (e < kEmin) return q;  // subnormal; q == 2^M is the smallest normal pattern
  // q in [2^M, 2^(M+1)]: the carry of q == 2^(M+1) moves into the exponent by itself.
  return (static_cast<std::uint64_t>(e + Bias) << M) + q - (std::uint64_t{1} << M);
}

template <int M, int Bias, unsigned kMaxFinite, unsigned kOverflow, unsigned kNaN>
[[gnu::always_inline]] inline std::uint8_t encode(double d, Fp8Overflow mode) noexcept {
  const std::uint64_t x = __builtin_bit_cast(std::uint64_t, d);
  const auto sign = static_cast<unsigned>((x >> 56) & 0x80u);
  const std::uint64_t ax = x & 0x7fffffffffffffffull;
  if (ax > 0x7ff0000000000000ull) return static_cast<std::uint8_t>(sign | kNaN);
  const unsigned over = mode == Fp8Overflow::saturate ? kMaxFinite : kOverflow;
  if (ax == 0x7ff0000000000000ull) return static_cast<std::uint8_t>(sign | over);
  const std::uint64_t m = round_magnitude<M, Bias>(ax);
  return static_cast<std::uint8_t>(sign | (m > kMaxFinite ? over : static_cast<unsigned>(m)));
}

}  // namespace fp8detail

[[gnu::always_inline]] inline std::uint8_t f64_to_e4m3(double d,
                                                       Fp8Overflow m = Fp8Overflow::ieee) noexcept {
  return fp8detail::encode<3, 7, 0x7e, 0x7f, 0x7f>(d, m);
}
[[gnu::always_inline]] inline std::uint8_t f64_to_e5m2(double d,
                                                       Fp8Overflow m = Fp8Overflow::ieee) noexcept {
  return fp8detail::encode<2, 15, 0x7b, 0x7c, 0x7e>(d, m);
}
// f32 -> fp8: exact widening to double, then the single rounding above.
[[gnu::always_inline]] inline std::uint8_t f32_to_e4m3(float f,
                                                       Fp8Overflow m = Fp8Overflow::ieee) noexcept {
  return f64_to_e4m3(static_cast<double>(f), m);
}
[[gnu::always_inline]] inline std::uint8_t f32_to_e5m2(float f,
                                                       Fp8Overflow m = Fp8Overflow::ieee) noexcept {
  return f64_to_e5m2(static_cast<double>(f), m);
}

// fp8 -> f32, exact. Normal values rebias the exponent; subnormals are m * 2^(1 - bias - M),
// an exact f32 product; E4M3's one NaN and E5M2's NaNs come out quiet (E5M2 keeps its payload).
namespace fp8detail {
template <unsigned M, unsigned Bias, bool kIeee>
[[gnu::always_inline]] inline float decode(std::uint8_t b) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(b & 0x80u) << 24;
  const unsigned a = b & 0x7fu;
  const unsigned e = a >> M;
  const unsigned m = a & ((1u << M) - 1);
  const float sub_ulp = __builtin_bit_cast(float, (127u + 1u - Bias - M) << 23);  // 2^(1-Bias-M)
  std::uint32_t r;
  if (kIeee && e == (0x7fu >> M)) r = m == 0 ? 0x7f800000u : (0x7fc00000u | (m << (23 - M)));
  else if (!kIeee && a == 0x7fu) r = 0x7fc00000u;
  else if (e == 0) r = __builtin_bit_cast(std::uint32_t, static_cast<float>(m) * sub_ulp);
  else r = ((e + 127u - Bias) << 23) | (m << (23 - M));
  return __builtin_bit_cast(float, r | sign);
}
}  // namespace fp8detail

[[gnu::always_inline]] inline float e4m3_to_f32(std::uint8_t b) noexcept {
  return fp8detail::decode<3, 7, false>(b);
}
[[gnu::always_inline]] inline float e5m2_to_f32(std::uint8_t b) noexcept {
  return fp8detail::decode<2, 15, true>(b);
}

}  // namespace inc::numerics
