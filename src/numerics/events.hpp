// Numeric events of reductions (docs/NUMERICS.md, "Overflow and saturation counts"): what a
// sum lost to the range of its type, counted the same way on every path (the hosts' reduction
// steps here, the switch's adds in src/switch/arith.cpp, which calls these functions), so a
// count means the same whatever ran.
//
// One event = one element of one add (a + b) whose exact result does not fit the type:
//  * integers (i8, u8, i32, u32, i64, u64, i4): the add wrapped (signed overflow, or a carry out
//    of an unsigned type); the stored value is still the sum modulo 2^bits;
//  * floats (f64, f32, f16, bf16, e4m3, e5m2): both operands finite and the rounded result not
//    (overflow to infinity; e4m3, which has no infinity, gives NaN).
// Only sums (ReduceOp::sum and avg's sum) are counted; prod/min/max count nothing.
// A kernel of another element type counts the same way: per element, per add, in the add.
#pragma once

#include <cstddef>
#include <cstdint>

#include "inc/types.hpp"

namespace inc::numerics {

// Events of dst = a + b (type t), without computing dst.
std::uint64_t sum_overflows(DataType t, const void* a, const void* b, std::size_t count) noexcept;

// reduce(t, op, dst, a, b, count) (dst may alias a and/or b, as for reduce) returning its
// events (0 unless op is sum or avg).
std::uint64_t reduce_counted(DataType t, ReduceOp op, void* dst, const void* a, const void* b,
                             std::size_t count) noexcept;

// Elements of x that are NaN or infinite (0 for integer types). i4 counts bytes, as reduce().
std::uint64_t count_nonfinite(DataType t, const void* x, std::size_t count) noexcept;

// The operations whose steps are counted (sum, and avg's sum).
constexpr bool counts_events(ReduceOp op) noexcept {
  return op == ReduceOp::sum || op == ReduceOp::avg;
}

}  // namespace inc::numerics
