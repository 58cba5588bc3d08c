// Bulk conversions between f32 and the OCP 8-bit and MX element formats (fp8.hpp, mx.hpp), for
// loops over whole vectors (the edge engine's conversion handlers). Every function here gives
// bit for bit what the scalar reference gives (f32_to_e4m3 etc. per element, mx_encode /
// mx_decode with the result rounded to f32):
//   - fp8 / MX element -> f32: one lookup in a 256-entry table per format (built once from the
//     scalar decoder);
//   - f32 -> fp8 / MX element: round to nearest even, overflow as the mode says (OCP: E4M3 ->
//     NaN, E5M2 -> infinity, or saturation to the largest finite value), NaN kept with its sign.
//     AVX2 (x86-64-v3) when the CPU has it, 8 values per step: normal results by integer
//     rounding of the f32 pattern, subnormal ones by one f32 addition of 2^(23 + 1 - bias - M),
//     which the FPU rounds to the subnormal step. The generic variant is the scalar code.
// The MX encoder scales each block by 2^-shared in f32: exact for every result of 2^-126 or more;
// smaller ones round to a zero element either way (the smallest element step is 2^-16).
#pragma once

#include <cstddef>
#include <cstdint>

#include "inc/types.hpp"
#include "numerics/fp8.hpp"
#include "numerics/kernel_isa.hpp"
#include "numerics/mx.hpp"

namespace inc::numerics {

// One of fp8 E4M3/E5M2 (the format of DataType::e4m3/e5m2) or an MX element type.
// out[i] = f32_to_e4m3(in[i], mode) (or e5m2).
void f32_to_fp8(MxElem fmt, const float* in, std::size_t n, std::uint8_t* out, Fp8Overflow mode) noexcept;
// out[i] = e4m3_to_f32(in[i]) (or e5m2): fmt is fp8_e4m3 or fp8_e5m2.
void fp8_to_f32(MxElem fmt, const std::uint8_t* in, std::size_t n, float* out) noexcept;

// mx_encode of f32 values (same scales and codes).
void mx_encode_f32(MxElem e, const float* v, std::size_t n, std::size_t block, std::uint8_t* scales,
                   std::uint8_t* codes) noexcept;
// mx_decode rounded to f32: out[i] = (float)(scale(block of i) * element(codes[i])).
void mx_decode_f32(MxElem e, const std::uint8_t* scales, const std::uint8_t* codes, std::size_t n,
                   std::size_t block, float* out) noexcept;

// f16 or bf16 (t) to f32 and back, for whole vectors: out[i] = f16_to_f32(in[i]) / bf16_to_f32
// (exact; a NaN comes out quiet), and f32_to_f16 / f32_to_bf16 (nearest even). AVX2 + F16C when
// the CPU has them, 8 values per step (f16: vcvtph2ps / vcvtps2ph with an explicit
// nearest-even immediate; bf16: shifts and half.hpp's integer rounding), the same bits.
// f32_to_half may narrow in place (out == in): element i's 2 bytes land below its f32.
void half_to_f32(DataType t, const void* in, std::size_t n, float* out) noexcept;
void f32_to_half(DataType t, const float* in, std::size_t n, void* out) noexcept;

namespace detail {
void half_to_f32_with(KernelIsa isa, DataType t, const void* in, std::size_t n, float* out) noexcept;
void f32_to_half_with(KernelIsa isa, DataType t, const float* in, std::size_t n, void* out) noexcept;
// The AVX2 loops (minifloat_x86_64_v3.cpp): whole groups of 8; return how many they did.
std::size_t half_to_f32_x86_64_v3(bool f16, const void* in, std::size_t n, float* out) noexcept;
std::size_t f32_to_half_x86_64_v3(bool f16, const float* in, std::size_t n, void* out) noexcept;

// The same with an explicit variant (tests, benchmarks); an unavailable one falls back to generic.
void f32_to_fp8_with(KernelIsa isa, MxElem fmt, const float* in, std::size_t n, std::uint8_t* out,
                     Fp8Overflow mode) noexcept;
void mx_encode_f32_with(KernelIsa isa, MxElem e, const float* v, std::size_t n, std::size_t block,
                        std::uint8_t* scales, std::uint8_t* codes) noexcept;

// A minifloat element format as the vector encoder sees it: M mantissa bits, exponent bias,
// the largest finite magnitude pattern, the code of an overflow and of a NaN (without sign), and
// the sign bit's position.
struct MiniFmt {
  int mbits, bias;
  unsigned max_finite, overflow, nan;
  int sign_bit;
};
// Element codes of n finite-or-not f32 values, the AVX2 way (minifloat_x86_64_v3.cpp).
void encode_minifloat_x86_64_v3(const MiniFmt& f, const float* in, std::size_t n, std::uint8_t* out) noexcept;
// The same, counting the events (widening.hpp): finite inputs whose magnitude code is `first` or
// more (the format's first non-finite code).
std::uint64_t encode_minifloat_counted_x86_64_v3(const MiniFmt& f, unsigned first, const float* in, std::size_t n,
                                                 std::uint8_t* out) noexcept;
// f32_to_half_x86_64_v3 adding to `events` the finite inputs whose result is infinite or NaN.
std::size_t f32_to_half_counted_x86_64_v3(bool f16, const float* in, std::size_t n, void* out,
                                          std::uint64_t& events) noexcept;
// e4m3 (e4m3 true) or e5m2 codes -> f32 as the scalar decoders: whole groups of 16, returns how many.
// With `scaled`, each value times scale as table_to_f32_x86_64_v3 (MX blocks of fp8 elements).
std::size_t fp8_to_f32_x86_64_v3(bool e4m3, const std::uint8_t* in, std::size_t n, bool scaled, float scale,
                                 float* out) noexcept;
// out[i] = table[in[i]], times scale if `scaled` (a gather per 8): whole groups of 8, returns how many.
std::size_t table_to_f32_x86_64_v3(const float* table, const std::uint8_t* in, std::size_t n, bool scaled,
                                   float scale, float* out) noexcept;
// f32 -> e4m3 / e5m2 (ieee overflow) returning the events, with an explicit variant.
std::uint64_t f32_to_fp8_counted_with(KernelIsa isa, MxElem fmt, const float* in, std::size_t n,
                                      std::uint8_t* out) noexcept;
// The largest (bits & 0x7fffffff) of k values (0 for k = 0): |x| of the largest magnitude, or
// an inf/NaN pattern (>= 0x7f800000) if the values hold one.
std::uint32_t abs_max_bits_x86_64_v3(const float* v, std::size_t k) noexcept;
// MXINT8 elements: round(x * 64) to nearest even, clamped to [-128, 127].
void encode_mxint8_x86_64_v3(const float* in, std::size_t n, std::uint8_t* out) noexcept;
}  // namespace detail

}  // namespace inc::numerics
