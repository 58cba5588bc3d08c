// Switch arithmetic, explicit as on switch silicon: what a slot can add and how.
//  * i32 sum: two's-complement wrap-around (exact modulo 2^32, hence order-independent), plus a
//    sticky overflow flag raised when any partial sum left the i32 range. flag == 0 proves the
//    result is the exact integer sum; flag == 1 means some partial sum wrapped (the value is
//    still exact modulo 2^32 and may be right if later terms brought it back).
//  * f32 sum: IEEE binary32 adds in arrival order (not reproducible across runs).
//  * i32/f32 min/max (f32: IEEE 754-2019 maximum/minimum: NaN wins, -0 < +0); raw copy
//    (replication only).
//  * f16/bf16 (2 bytes on the wire), policy per collective (docs/NUMERICS.md, "In the switch"):
//    - sum (narrow): the cells hold f16/bf16 and every add widens both operands to f32, adds
//      and rounds once to nearest-even (src/numerics reduce(), the hosts' kernel): the result
//      of each add is the correctly rounded 16-bit sum; the total depends on arrival order.
//    - sum_widen: a switch adding two or more inputs widens them into f32 cells (f16w/bf16w,
//      exact) and adds in f32; partial sums travel wide between switches; the root rounds once.
//    - min/max: exact (IEEE 754-2019 minimum/maximum, as on the hosts).
//  * i8/u8 (1 byte on the wire): sums wrap modulo 2^8 (as on the hosts, so every policy gives
//    the hosts' bits); the overflow flag says whether a sum left the type's range.
//    - sum (narrow): 8-bit cells; the flag is raised when any partial sum wrapped (order
//      dependent: a total that fits may still be flagged).
//    - sum_widen: i32 cells from the first aggregating hop (exact); the root wraps the total
//      to 8 bits and raises the flag exactly when the total does not fit.
//    - min/max: exact.
//  * e4m3/e5m2 (OCP fp8, 1 byte on the wire): as the hosts add them.
//    - sum (narrow): fp8 cells; each add widens to f32, adds and rounds once to nearest-even
//      with IEEE overflow (e4m3 NaN, e5m2 infinity), as the hosts' kernel; the overflow flag is
//      raised when a finite pair gave a non-finite sum.
//    - sum_widen: f32 cells (e4m3w/e5m2w) from the first aggregating hop; the root rounds
//      once (flag: a finite total that does not fit).  min/max: exact.
//  * i4 (two per byte, `count` in bytes): sums wrap modulo 16 as on the hosts, the flag as for
//    i8 (narrow: any partial sum out of -8..7; sum_widen: two i16 cells per byte (i4w), the
//    root wraps and flags exactly the totals out of range, exact below 4096 members).
//  * MX blocks (arith_mx.cpp): decoded into 32 f32 accumulators per block (exact: a power-of-
//    two scale times an element of at most 4 significant bits), added in f32, re-quantised
//    per the OCP rule (mx_encode) at every aggregating hop (sum) or once at the root
//    (sum_widen).
//  * fx32: f32 carried as i32 fixed point with a per-block shared exponent agreed in a first
//    round (SwitchML), so the switch only adds integers and the result does not depend on the
//    arrival order or tree shape. The conversions run on the workers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/numerics/kernel_isa.hpp"
#include "src/proto/packet.hpp"

namespace inc::sw {

// acc[i] = acc[i] (op) src[i]; `src` may be unaligned (packet payload). Returns the add's
// numeric events (src/numerics/events.hpp: elements whose sum wrapped or overflowed to
// infinity; 0 for min/max). For raw/copy, does nothing (replication never combines).
std::uint32_t combine(proto::ElemType t, proto::WireOp op, void* acc, const std::byte* src,
             std::size_t count) noexcept;
// The same where the cells hold `acc_t` and the payload `src_t`: equal, or acc_t is the widened
// accumulator of src_t (sum_widen: a narrow input from a member that did not aggregate).
std::uint32_t combine(proto::ElemType acc_t, proto::ElemType src_t, proto::WireOp op, void* acc,
             const std::byte* src, std::size_t count) noexcept;
// sum_widen's first aggregating hop: acc[i] = src[i] widened (exact): to f32 for f16/bf16, to
// i32 for i8/u8 (`acc` then holds i32).
void widen_into(proto::ElemType src_t, float* acc, const std::byte* src, std::size_t n) noexcept;
// The root of a sum_widen: the accumulators in `cells` narrowed into the narrow type, packed at
// the start of `cells`: f16w/bf16w rounded once to nearest-even; i8w/u8w wrapped modulo 2^8.
// Adds to `events` the totals that do not fit (i8w/u8w out of range; f16w/bf16w finite but
// rounded to infinity). Returns the narrow type.
proto::ElemType narrow_in_place(proto::ElemType wide_t, void* cells, std::size_t n,
                                std::uint32_t& events) noexcept;

// widen_into / narrow_in_place / combine for f16/bf16 (f16w/bf16w) with an explicit kernel
// variant (arith_h16.cpp): generic converts one element at a time, x86_64_v3 8 at a time by
// F16C/AVX2 (an unavailable variant falls back to generic); identical bits and counts. narrow
// returns the events (finite accumulators rounded to infinity). widen_into, narrow_in_place and
// combine use the variant the hosts' kernels use (numerics::detail::selected_kernel_isa()).
void widen_h16_with(numerics::detail::KernelIsa isa, proto::ElemType src_t, float* acc,
                    const std::byte* src, std::size_t n) noexcept;
std::uint32_t narrow_h16_with(numerics::detail::KernelIsa isa, proto::ElemType wide_t, std::byte* cells,
                              std::size_t n) noexcept;
// acc[i] (f32) += src[i] (f16/bf16) widened: a narrow input into a sum_widen accumulator (a
// member below that did not aggregate), with its events (finite operands, non-finite sum).
std::uint32_t add_h16_with(numerics::detail::KernelIsa isa, proto::ElemType src_t, float* acc,
                           const std::byte* src, std::size_t n) noexcept;

// MX blocks (arith_mx.cpp): acc (f32, 32 per block, of the widened type acc_t) += the blocks
// of src (acc_t itself: f32 partial sums; or its narrow MX type: decoded exactly).
void add_mx_blocks(proto::ElemType acc_t, proto::ElemType src_t, float* acc, const std::byte* src,
                   std::size_t blocks) noexcept;
// The f32 accumulators of `blocks` blocks re-quantised in place into the narrow MX type (the
// OCP conversion: shared scale from the largest magnitude, elements to nearest-even,
// saturating; a block with NaN or infinity gets the NaN scale).
void narrow_mx_blocks(proto::ElemType wide_t, void* cells, std::size_t blocks) noexcept;

// Both return their events (elements whose add wrapped / overflowed to infinity).
std::uint32_t add_i32_wrap(std::int32_t* acc, const std::byte* src, std::size_t n) noexcept;
std::uint32_t add_f32(float* acc, const std::byte* src, std::size_t n) noexcept;
// The element types whose events also raise the `overflow` flag: the integers (wrap) and OCP
// fp8 (a finite pair giving a non-finite sum, as the hosts' fp8 kernel flags it). f16/bf16/f32
// overflows only count.
constexpr bool raises_overflow_flag(proto::ElemType t) noexcept {
  using proto::ElemType;
  return t == ElemType::i32 || t == ElemType::i8 || t == ElemType::u8 || t == ElemType::i8w ||
         t == ElemType::u8w || t == ElemType::i4 || t == ElemType::i4w || t == ElemType::e4m3 ||
         t == ElemType::e5m2;
}

// fx32 block conversions.
inline constexpr std::int32_t kFxZeroBlock = -100000;    // exponent of an all-zero block
// ... of a block whose elements are all -0 (below kFxZeroBlock: the members' maximum is this
// only if every member's block is all -0, and the block then sums to -0 as IEEE adds do).
inline constexpr std::int32_t kFxNegativeZeroBlock = kFxZeroBlock - 1;
inline constexpr std::int32_t kFxNonFinite = 0x7FFFFFFF;  // a block holds NaN or infinity
// Smallest e with |x| < 2^e for every x of the block (kFxZeroBlock if all are zero,
// kFxNegativeZeroBlock if all are -0).
std::int32_t fx32_block_exponent(const float* x, std::size_t n) noexcept;
// Headroom bits so that `contributors` values of magnitude <= 2^(30-h) sum without overflow.
int fx32_headroom(std::uint32_t contributors) noexcept;
// q[i] = round_half_even(x[i] * 2^(30 - h - e)); requires e to be >= every block exponent.
void fx32_encode(const float* x, std::size_t n, std::int32_t e, int h, std::int32_t* q) noexcept;
// x[i] = (float)(q[i] * 2^(e - 30 + h)), one rounding.
void fx32_decode(const std::int32_t* q, std::size_t n, std::int32_t e, int h, float* x) noexcept;

}  // namespace inc::sw
