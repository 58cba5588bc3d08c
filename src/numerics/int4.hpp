// Signed 4-bit integers (i4), two per byte: element 2k is the LOW nibble of byte k, element
// 2k+1 the high nibble (the order of NumPy/ml_dtypes' packed int4 and of ONNX INT4). Values
// -8..7 in two's complement. Reductions work nibble by nibble: sum and prod wrap modulo 16
// (as i8 wraps modulo 256), min/max compare signed values, divide truncates toward zero.
// Conversions from double (store_from_double) truncate toward zero, saturate to -8..7 and
// store NaN as 0, as for the other integer types.
//
// Kernel constraints (kernels.hpp): always_inline, builtins only.
#pragma once

#include <cstdint>

namespace inc::numerics {

// The signed value of nibble `hi` (0: low, 1: high) of byte b.
[[gnu::always_inline]] inline int i4_get(std::uint8_t b, unsigned hi) noexcept {
  const unsigned n = (b >> (4 * hi)) & 0xfu;
  return static_cast<int>(n ^ 8u) - 8;  // sign extension of a 4-bit two's complement value
}

// Byte b with nibble `hi` replaced by the low 4 bits of v (wrap-around modulo 16).
[[gnu::always_inline]] inline std::uint8_t i4_set(std::uint8_t b, unsigned hi, int v) noexcept {
  const unsigned shift = 4 * hi;
  const unsigned keep = b & ~(0xfu << shift) & 0xffu;
  return static_cast<std::uint8_t>(keep | ((static_cast<unsigned>(v) & 0xfu) << shift));
}

}  // namespace inc::numerics
