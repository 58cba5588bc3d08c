// Reduction kernels: element-wise combine of two vectors of one element type.
// Written as plain loops over typed pointers that GCC vectorises at -O3; f16/bf16 are widened
// to f32, combined in f32 and rounded back once (round-to-nearest-even).
#pragma once

#include <cstddef>
#include <cstdint>

#include "inc/types.hpp"

namespace inc::numerics {

// dst[i] = a[i] (op) b[i] for i < count. dst may alias a and/or b (in-place use is the common
// case); partial overlap is not allowed. ReduceOp::avg combines as sum (finalise with divide).
// Integer sum/prod wrap around modulo 2^bits (two's complement), never undefined behaviour.
// Floating min/max are IEEE 754-2019 minimum/maximum: NaN if either operand is NaN, and
// -0 < +0 (commutative, so the order of combination does not matter); sum/prod propagate NaN.
// See docs/NUMERICS.md.
void reduce(DataType t, ReduceOp op, void* dst, const void* a, const void* b,
            std::size_t count) noexcept;

// buf[i] = buf[i] / n: the finalisation of ReduceOp::avg after a sum, as NCCL does.
// Floating types divide in their own precision (f16/bf16 via f32); integers truncate.
// n == 0 is a caller error and leaves buf untouched.
void divide(DataType t, void* buf, std::size_t count, std::uint64_t n) noexcept;

// i4 (two elements per byte): `count` of reduce() and divide() counts BYTES (pairs of
// elements), while the index i of load_as_double/store_from_double counts elements (nibbles;
// the store keeps the other nibble of the byte). fp8 stores are non-saturating (fp8.hpp).
// Element access through double, for references, verification and fill patterns.
// Exact for every value of f16/bf16/f32/f64/8- and 32-bit integers; 64-bit integers are exact
// up to 2^53 in magnitude. Stores round once to f16/bf16/f32 (nearest-even); to integers they
// truncate toward zero, saturate out-of-range values and store NaN as 0.
double load_as_double(DataType t, const void* buf, std::size_t i) noexcept;
void store_from_double(DataType t, void* buf, std::size_t i, double v) noexcept;

}  // namespace inc::numerics
