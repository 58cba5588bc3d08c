// The arithmetic of reproducible sums (Accumulate::reproducible; docs/NUMERICS.md,
// "Reproducible sums"): the same bits on every path because every path adds integers.
//
//  1. scan: per block of kBlock elements of the call (by element index, so the blocks are
//     the same whatever the path), the largest exponent e (|x| < 2^e) and the negated
//     exponent of the lowest set bit of every value, as two i32. An i32 max over all ranks
//     (the pre-pass, on the hosts or in the switch) gives the agreed pair of each block.
//  2. encode: x as the integer X = round_half_even(x * 2^(2L - e)), |X| < 2^2L, where
//     L = 31 - ceil(log2(nranks)); carried as two i32 limbs lo = X mod 2^L (in [0, 2^L)) and
//     hi = floor(X / 2^L). Sums of nranks limbs never leave the i32 range, so wrap-around
//     i32 sums (the switch's, the hosts') are exact and any order gives the same limb sums.
//  3. decode: V = hi_sum * 2^L + lo_sum (exact in 64 bits), the sum is V * 2^(e - 2L),
//     rounded once to the call's type (to nearest, ties to even).
// Exact (the correctly rounded sum of the inputs) when every value of a block has its lowest
// set bit within the window: e - low <= 2L; otherwise the values are rounded when encoded,
// still the same bits on every path, and block_stats counts the block as inexact. A block
// holding NaN or an infinity on any rank gives NaN on all its elements (counted too).
#pragma once

#include <cstddef>
#include <cstdint>

#include "inc/types.hpp"
#include "numerics/kernel_isa.hpp"

namespace inc::numerics::repro {

using numerics::detail::KernelIsa;

inline constexpr std::uint64_t kBlock = 256;        // elements per shared exponent
inline constexpr std::uint64_t kLimbs = 2;          // i32 limbs per element on the wire
inline constexpr std::int32_t kZero = -(1 << 30);   // exponents of an all-zero block
inline constexpr std::int32_t kNonFinite = 0x7FFFFFFF;  // max exponent of a block with NaN/inf

constexpr bool supports(DataType t) noexcept {
  return t == DataType::f32 || t == DataType::f16 || t == DataType::bf16;
}
// Bits per limb for a sum of nranks contributions: 31 - ceil(log2(nranks)).
int limb_bits(int nranks) noexcept;
constexpr std::uint64_t blocks(std::uint64_t elems) noexcept { return (elems + kBlock - 1) / kBlock; }

// out[2b], out[2b+1] for every block b touched by elements [elem0, elem0 + n) of x (type t),
// x[0] being element elem0: the max exponent and negated low exponent of the block's values
// (kZero for a block of zeros; kNonFinite first when it holds NaN or an infinity). Blocks only
// partly covered take the max with what out already holds: zero-fill out with kZero first.
void scan(DataType t, const void* x, std::uint64_t n, std::uint64_t elem0, std::int32_t* out) noexcept;
// limbs[2i], limbs[2i+1] = lo, hi of element elem0 + i, at the agreed block exponents `exps`
// (indexed by the call's block numbers, as scan writes them).
void encode(DataType t, const void* x, std::uint64_t n, std::uint64_t elem0, const std::int32_t* exps,
            int nranks, std::int32_t* limbs) noexcept;
// y[i] (type t) = the limb sums of element elem0 + i, rounded once.
void decode(DataType t, const std::int32_t* limbs, std::uint64_t n, std::uint64_t elem0,
            const std::int32_t* exps, int nranks, void* y) noexcept;

namespace detail {
// The passes above on an explicit kernel variant (kernel_isa.hpp; tests and benchmarks): the
// scalar ones (generic) and the AVX2 ones (repro_x86_64_v3.cpp), bit-identical; an
// unavailable variant falls back to generic. scan/encode/decode use the selected variant.
void scan_with(KernelIsa isa, DataType t, const void* x, std::uint64_t n, std::uint64_t elem0,
               std::int32_t* out) noexcept;
void encode_with(KernelIsa isa, DataType t, const void* x, std::uint64_t n, std::uint64_t elem0,
                 const std::int32_t* exps, int nranks, std::int32_t* limbs) noexcept;
void decode_with(KernelIsa isa, DataType t, const std::int32_t* limbs, std::uint64_t n, std::uint64_t elem0,
                 const std::int32_t* exps, int nranks, void* y) noexcept;
// The scalar passes (also the AVX2 ones' tails and constant blocks).
void scan_generic(DataType t, const void* x, std::uint64_t n, std::uint64_t elem0, std::int32_t* out) noexcept;
void encode_generic(DataType t, const void* x, std::uint64_t n, std::uint64_t elem0, const std::int32_t* exps,
                    int nranks, std::int32_t* limbs) noexcept;
void decode_generic(DataType t, const std::int32_t* limbs, std::uint64_t n, std::uint64_t elem0,
                    const std::int32_t* exps, int nranks, void* y) noexcept;
}  // namespace detail

struct BlockStats {
  std::uint64_t inexact = 0;    // blocks whose values span more than the 2L-bit window
  std::uint64_t nonfinite = 0;  // blocks with NaN or an infinity (NaN on every element)
};
BlockStats block_stats(const std::int32_t* exps, std::uint64_t nblocks, int nranks) noexcept;

}  // namespace inc::numerics::repro
