// IEEE 754 binary16 (f16) and bfloat16 (bf16) conversions with round-to-nearest-even,
// correct for NaN (quiet, sign kept), infinities, subnormals and overflow to infinity.
//
// The f32 <-> f16/bf16 conversions are inline and branch-free (selects only) so that GCC can
// vectorise the reduction loops that use them. NaN handling: a NaN stays a NaN with its sign and
// the top bits of its payload, and comes out quiet (a signalling NaN is quietened, as IEEE 754
// conversions do); a NaN never becomes an infinity.
//
// The f32 -> f16 subnormal path uses one f32 addition, so it relies on the default FP
// environment (round-to-nearest-even); flush-to-zero / denormals-are-zero do not affect it
// (all operands and results of that addition are normal f32 numbers).
#pragma once

#include <bit>
#include <cstdint>

namespace inc::numerics {

namespace detail {
// c ? a : b as bit masks. Plain ?: lets GCC sink the f32 operation feeding one arm into a
// branch, which it then cannot if-convert (the operation may trap), and the loop does not
// vectorise; with masks both arms are always computed.
inline std::uint32_t select_bits(bool c, std::uint32_t a, std::uint32_t b) noexcept {
  const std::uint32_t m = 0u - static_cast<std::uint32_t>(c);
  return (a & m) | (b & ~m);
}
}  // namespace detail

inline std::uint16_t f32_to_f16(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t ax = x & 0x7fffffffu;

  // Normal f16 range (|f| >= 2^-14): rebias the exponent and round the 13 dropped mantissa
  // bits to nearest-even with integer arithmetic; a carry moves into the exponent, up to inf.
  const std::uint32_t odd = (ax >> 13) & 1u;
  const std::uint32_t normal = (ax + 0xc8000fffu + odd) >> 13;  // 0xc8000000 = (15-127) << 23

  // Subnormal f16 range (|f| < 2^-14): adding 0.5f puts the f16 subnormal ulp (2^-24) at the
  // f32 ulp of 0.5, so the FPU does the round-to-nearest-even; 2^-14 itself comes out as 0x400.
  const float sub_f = std::bit_cast<float>(ax) + 0.5f;
  const std::uint32_t sub = std::bit_cast<std::uint32_t>(sub_f) - 0x3f000000u;

  // NaN: quiet bit set, top 9 payload bits kept.
  const std::uint32_t nan = 0x7e00u | ((ax >> 13) & 0x03ffu);

  std::uint32_t h = detail::select_bits(ax < 0x38800000u, sub, normal);
  h = detail::select_bits(ax >= 0x47800000u, 0x7c00u, h);  // |f| >= 2^16 or inf: overflow to inf
  h = detail::select_bits(ax > 0x7f800000u, nan, h);
  return static_cast<std::uint16_t>(h | sign);
}

inline float f16_to_f32(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t e = h & 0x7c00u;
  const std::uint32_t m = h & 0x03ffu;
  // Normal: rebias exponent (15 -> 127).
  const std::uint32_t normal = ((static_cast<std::uint32_t>(h) & 0x7fffu) << 13) + 0x38000000u;
  // Subnormal/zero: m * 2^-24 computed exactly as (2^-1 + m * 2^-24) - 2^-1.
  const std::uint32_t sub = std::bit_cast<std::uint32_t>(
      std::bit_cast<float>(0x3f000000u | m) - 0.5f);
  // Inf/NaN: max exponent; a NaN gets the quiet bit.
  const std::uint32_t special = 0x7f800000u | (m << 13) | (m != 0 ? 0x00400000u : 0u);
  std::uint32_t r = detail::select_bits(e == 0, sub, normal);
  r = detail::select_bits(e == 0x7c00u, special, r);
  return std::bit_cast<float>(r | sign);
}

inline std::uint16_t f32_to_bf16(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  // Round-to-nearest-even on the 16 dropped bits; the carry handles subnormals, the
  // normal/subnormal boundary and overflow to inf (never past inf for non-NaN input).
  const std::uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  const std::uint32_t nan = (x >> 16) | 0x0040u;
  const bool is_nan = (x & 0x7fffffffu) > 0x7f800000u;
  return static_cast<std::uint16_t>(is_nan ? nan : rounded);
}

inline float bf16_to_f32(std::uint16_t h) noexcept {
  std::uint32_t x = static_cast<std::uint32_t>(h) << 16;
  x |= (h & 0x7fffu) > 0x7f80u ? 0x00400000u : 0u;  // quieten a signalling NaN
  return std::bit_cast<float>(x);
}

// Direct f64 -> f16/bf16 with a single rounding (no double rounding through f32); used by
// store_from_double and the tests, not on hot paths.
std::uint16_t f64_to_f16(double d) noexcept;
std::uint16_t f64_to_bf16(double d) noexcept;

}  // namespace inc::numerics
