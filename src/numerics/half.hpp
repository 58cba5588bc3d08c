// IEEE 754 binary16 (f16) and bfloat16 (bf16) conversions with round-to-nearest-even,
// correct for NaN (quiet, sign kept), infinities, subnormals and overflow to infinity.
//
// The f32 <-> f16/bf16 conversions are inline and branch-free (selects only) so that GCC can
// vectorise the reduction loops that use them. NaN handling: a NaN stays a NaN with its sign and
// the top bits of its payload, and comes out quiet (a signalling NaN is quietened, as IEEE 754
// conversions and the F16C instructions do); a NaN never becomes an infinity.
//
// The f32 -> f16 subnormal path uses one f32 addition and f16 -> f32 one subtraction, so they
// rely on the default rounding mode (nearest-even); flush-to-zero / denormals-are-zero do not
// affect them (every operand and result of those operations is a normal f32 or zero).
//
// Implementation constraints (see kernels.hpp): these functions are always_inline and use only
// compiler builtins, so that a kernel file compiled for a wider ISA (-march=x86-64-v3) never
// leaves an out-of-line copy that the linker could hand to code running on an older CPU.
#pragma once

#include <cstdint>

namespace inc::numerics {

namespace detail {
// c ? a : b as bit masks. Plain ?: lets GCC sink the f32 operation feeding one arm into a
// branch, which it then cannot if-convert (the operation may trap), and the loop does not
// vectorise; with masks both arms are always computed.
[[gnu::always_inline]] inline std::uint32_t select_bits(bool c, std::uint32_t a,
                                                        std::uint32_t b) noexcept {
  const std::uint32_t m = 0u - static_cast<std::uint32_t>(c);
  return (a & m) | (b & ~m);
}
}  // namespace detail

[[gnu::always_inline]] inline std::uint16_t f32_to_f16(float f) noexcept {
  const std::uint32_t x = __builtin_bit_cast(std::uint32_t, f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t ax = x & 0x7fffffffu;
  // ax < 2^31, so signed comparisons are exact (and cheaper than unsigned ones in SSE2).
  const auto sax = static_cast<std::int32_t>(ax);

  // Normal f16 range (|f| >= 2^-14): rebias the exponent and round the 13 dropped mantissa
  // bits to nearest-even with integer arithmetic; a carry moves into the exponent, up to inf.
  const std::uint32_t odd = (ax >> 13) & 1u;
  const std::uint32_t normal = (ax + 0xc8000fffu + odd) >> 13;  // 0xc8000000 = (15-127) << 23

  // Subnormal f16 range (|f| < 2^-14): adding 0.5f puts the f16 subnormal ulp (2^-24) at the
  // f32 ulp of 0.5, so the FPU does the round-to-nearest-even; 2^-14 itself comes out as 0x400.
  const float sub_f = __builtin_bit_cast(float, ax) + 0.5f;
  const std::uint32_t sub = __builtin_bit_cast(std::uint32_t, sub_f) - 0x3f000000u;

  // NaN: quiet bit set, top 9 payload bits kept.
  const std::uint32_t nan = 0x7e00u | ((ax >> 13) & 0x03ffu);

  std::uint32_t h = detail::select_bits(sax < 0x38800000, sub, normal);
  h = detail::select_bits(sax >= 0x47800000, 0x7c00u, h);  // |f| >= 2^16 or inf: overflow to inf
  h = detail::select_bits(sax > 0x7f800000, nan, h);
  return static_cast<std::uint16_t>(h | sign);
}

[[gnu::always_inline]] inline float f16_to_f32(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const auto ah = static_cast<std::int32_t>(h & 0x7fffu);
  const auto m = static_cast<std::uint32_t>(h & 0x03ffu);
  // Normal: rebias exponent (15 -> 127).
  const std::uint32_t normal = (static_cast<std::uint32_t>(ah) << 13) + 0x38000000u;
  // Subnormal/zero: m * 2^-24 computed exactly as (2^-1 + m * 2^-24) - 2^-1.
  const std::uint32_t sub =
      __builtin_bit_cast(std::uint32_t, __builtin_bit_cast(float, 0x3f000000u | m) - 0.5f);
  // Inf/NaN: exponent 255 (rebias once more); a NaN gets the quiet bit.
  const std::uint32_t special = (normal + 0x38000000u) | (ah > 0x7c00 ? 0x00400000u : 0u);
  std::uint32_t r = detail::select_bits(ah < 0x0400, sub, normal);
  r = detail::select_bits(ah >= 0x7c00, special, r);
  return __builtin_bit_cast(float, r | sign);
}

[[gnu::always_inline]] inline std::uint16_t f32_to_bf16(float f) noexcept {
  const std::uint32_t x = __builtin_bit_cast(std::uint32_t, f);
  // Round-to-nearest-even on the 16 dropped bits; the carry handles subnormals, the
  // normal/subnormal boundary and overflow to inf (never past inf for non-NaN input).
  const std::uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  const std::uint32_t nan = (x >> 16) | 0x0040u;
  const bool is_nan = static_cast<std::int32_t>(x & 0x7fffffffu) > 0x7f800000;
  return static_cast<std::uint16_t>(detail::select_bits(is_nan, nan, rounded));
}

[[gnu::always_inline]] inline float bf16_to_f32(std::uint16_t h) noexcept {
  std::uint32_t x = static_cast<std::uint32_t>(h) << 16;
  x |= static_cast<std::int32_t>(h & 0x7fffu) > 0x7f80 ? 0x00400000u : 0u;  // quieten sNaN
  return __builtin_bit_cast(float, x);
}

// Direct f64 -> f16/bf16 with a single rounding (no double rounding through f32); used by
// store_from_double and the tests, not on hot paths.
std::uint16_t f64_to_f16(double d) noexcept;
std::uint16_t f64_to_bf16(double d) noexcept;

}  // namespace inc::numerics
