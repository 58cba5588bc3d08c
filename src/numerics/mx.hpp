// OCP Microscaling (MX) block formats, spec v1.0: a block of k elements shares one E8M0 scale
// X = 2^(code - 127) (code 0xFF = NaN; no sign, no zero); element i's value is X * P_i.
//   MXFP8  E4M3 / E5M2   (OCP fp8, fp8.hpp)       emax_elem 8 / 15
//   MXFP6  E2M3 (bias 1, max 7.5) / E3M2 (bias 3, max 28), no inf/NaN   emax_elem 2 / 4
//   MXFP4  E2M1 (bias 1, max 6), no inf/NaN                            emax_elem 2
//   MXINT8 two's complement with an implied scale 2^-6 (-2 .. 1 63/64)  emax_elem 0
// k = 32 for the MX formats; block floating point (`bfp`) is MXINT8's encoding with any k.
//
// Encoding (the spec's conversion, section 6.3): shared_exp = floor(log2(max_i |V_i|)) -
// emax_elem, clamped to the scale's range [-127, 127]; P_i = V_i / X rounded to nearest, ties
// to even, saturating to the element's largest magnitude (the spec clamps normal values that
// exceed it). Choices where the spec leaves room, documented in docs/NUMERICS.md:
//   - a block holding a NaN or an infinity gets the NaN scale 0xFF (every element decodes to
//     NaN) and element codes 0;
//   - an all-zero block gets scale code 0 (2^-127) and zero elements (signs kept for fp);
//   - element codes are stored one per byte, in the low bits (sign at bit 7 for fp8, bit 5 for
//     fp6, bit 3 for fp4; MXINT8 as int8): packing 6- and 4-bit codes is a storage layout
//     the spec does not fix.
// Decoding is exact in double (X * P_i with P_i of at most 4 significant bits).
#pragma once

#include <cstddef>
#include <cstdint>

namespace inc::numerics {

enum class MxElem : std::uint8_t { fp8_e4m3, fp8_e5m2, fp6_e2m3, fp6_e3m2, fp4_e2m1, int8 };
inline constexpr std::size_t kMxBlock = 32;
inline constexpr std::uint8_t kE8M0NaN = 0xff;

// E8M0 scale code -> 2^(code - 127), NaN for 0xFF.
double e8m0_to_double(std::uint8_t code) noexcept;
// The value of one element code (without the block scale); NaN/inf as the format defines.
double mx_element_value(MxElem e, std::uint8_t code) noexcept;
// emax_elem: the exponent of the element format's largest power of two.
int mx_emax_elem(MxElem e) noexcept;

// The E8M0 scale code of one block of k values (the spec's shared exponent, clamped; kE8M0NaN
// if a value is NaN or infinite): what mx_encode stores for the block.
std::uint8_t mx_block_scale(MxElem e, const float* v, std::size_t k) noexcept;
// The same from the block's largest magnitude (finite, >= 0): for vector code that finds it.
std::uint8_t mx_scale_of_amax(MxElem e, float amax) noexcept;

// Encode n values in blocks of `block` (the last block may be shorter): scales[ceil(n/block)],
// codes[n]. block >= 1 (kMxBlock for the MX formats).
void mx_encode(MxElem e, const float* v, std::size_t n, std::size_t block, std::uint8_t* scales,
               std::uint8_t* codes) noexcept;
// out[i] = scale(block of i) * element(codes[i]), exact in double.
void mx_decode(MxElem e, const std::uint8_t* scales, const std::uint8_t* codes, std::size_t n,
               std::size_t block, double* out) noexcept;

}  // namespace inc::numerics
