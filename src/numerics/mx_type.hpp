// The MX block formats as element types of the library (DataType::mxfp8_e4m3 ... mxfp6_e3m2;
// include/inc/types.hpp): one storage unit is one block of 32 elements in the layout the
// switch's wire uses (an E8M0 scale byte, then the codes: one per byte for 8 bits, four per
// three bytes for fp6, two per byte for fp4), so a buffer moves unchanged from the API through
// the host algorithms and the switch. Counts here are blocks.
//
// The hosts' MX kernel (docs/NUMERICS.md "MX as a data type"): a reduction step decodes both
// operands exactly into f32 (a power-of-two scale times an element of at most 4 significant
// bits), combines in f32 and re-encodes once with the OCP conversion (mx_encode): the same
// arithmetic as a switch's aggregating hop under `narrow` (src/switch/arith_mx.cpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "inc/types.hpp"
#include "numerics/mx.hpp"

namespace inc::numerics {

// The element format of an MX DataType (t must satisfy is_mx(t)).
MxElem mx_elem_of(DataType t) noexcept;

// f32 value of every element code of e (exact), and of every E8M0 scale code (NaN for 0xFF).
const std::array<float, 256>& mx_element_table(MxElem e) noexcept;
const std::array<float, 256>& mx_scale_table() noexcept;

// `blocks` units of t decoded into blocks x 32 f32 values (exact unless a value exceeds f32's
// range), and encoded from them (the OCP conversion: mx_encode, one scale per 32 values).
void mx_decode_blocks(DataType t, const void* src, std::size_t blocks, float* out) noexcept;
void mx_encode_blocks(DataType t, const float* in, std::size_t blocks, void* dst) noexcept;

// The 32 element codes of one block's storage (the bytes after its scale), one per byte in the
// low bits: t's packing undone (8 bits: a copy; fp6: four per three bytes; fp4: two per byte).
// For code that walks blocks itself (the switch's accumulators, src/switch/arith_mx.cpp).
void mx_unpack_codes(DataType t, const std::uint8_t* packed, std::uint8_t* codes) noexcept;

// reduce() and divide() for the MX types (counts in blocks): decode, combine in f32 (sum/avg
// add, prod multiplies, min/max IEEE 754-2019 minimum/maximum as the other float types),
// re-encode; dst may alias a and/or b.
void mx_reduce(DataType t, ReduceOp op, void* dst, const void* a, const void* b, std::size_t blocks) noexcept;
void mx_divide(DataType t, void* buf, std::size_t blocks, std::uint64_t n) noexcept;
// Events of a sum (src/numerics/events.hpp): elements whose operands are finite and whose f32
// sum is not (the block's scale then becomes NaN). Non-finite decoded elements of x.
std::uint64_t mx_sum_overflows(DataType t, const void* a, const void* b, std::size_t blocks) noexcept;
std::uint64_t mx_count_nonfinite(DataType t, const void* x, std::size_t blocks) noexcept;

// Element i (counting elements) of an MX buffer: decoded; and set by re-encoding its block
// with element i replaced (for references and fill patterns; not a fast path).
double mx_load(DataType t, const void* buf, std::size_t i) noexcept;
void mx_store(DataType t, void* buf, std::size_t i, double v) noexcept;

}  // namespace inc::numerics
