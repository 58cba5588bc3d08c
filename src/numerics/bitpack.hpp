// Bit packing of element codes (MX fp6 / fp4 on the wire and in the MX DataTypes' blocks, and
// the edge engine's MX handlers): n codes of `bits` bits, one per byte in its low bits, packed
// least significant bit first (code i at bit i * bits), into (n * bits + 7) / 8 bytes whose
// unused top bits are zero; a code's bits above `bits` are ignored. Two variants, bit for bit
// the same (tests/numerics/test_bitpack.cpp):
//   - generic: a 32-bit accumulator, a byte at a time (any bits 1..8);
//   - x86_64_v3 (AVX2, chosen at run time as the reduction kernels): 32 codes per step for 4
//     and 6 bits (4: one multiply-add of neighbouring codes, 6: two, then a byte shuffle; the
//     reverse: a byte shuffle and shifts), the rest (a tail shorter than 32, other widths) as
//     the generic loop.
#pragma once

#include <cstddef>
#include <cstdint>

#include "numerics/kernel_isa.hpp"

namespace inc::numerics {

// Packs codes[0, n) into out; returns out + (n * bits + 7) / 8.
std::uint8_t* pack_codes(unsigned bits, const std::uint8_t* codes, std::size_t n, std::uint8_t* out) noexcept;
// The reverse: n codes from in, each in the low bits of its byte (the top bits zero).
void unpack_codes(unsigned bits, const std::uint8_t* in, std::size_t n, std::uint8_t* codes) noexcept;

namespace detail {
// The same with an explicit variant (tests, benchmarks); an unavailable one falls back to generic.
std::uint8_t* pack_codes_with(KernelIsa isa, unsigned bits, const std::uint8_t* codes, std::size_t n,
                              std::uint8_t* out) noexcept;
void unpack_codes_with(KernelIsa isa, unsigned bits, const std::uint8_t* in, std::size_t n,
                       std::uint8_t* codes) noexcept;
// The AVX2 steps (bitpack_x86_64_v3.cpp): whole groups of 32 codes of 4 or 6 bits; return how
// many codes they did (a multiple of 32; 0 for other widths).
std::size_t pack_codes_x86_64_v3(unsigned bits, const std::uint8_t* codes, std::size_t n, std::uint8_t* out) noexcept;
std::size_t unpack_codes_x86_64_v3(unsigned bits, const std::uint8_t* in, std::size_t n, std::uint8_t* codes) noexcept;
}  // namespace detail

}  // namespace inc::numerics
