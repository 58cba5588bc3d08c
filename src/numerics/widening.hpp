// The hosts' width passes of the wide accumulator policies (src/coll/widened.cpp, the schedule
// ops `widen` and `narrow`; docs/NUMERICS.md "Wide accumulators on the hosts"): whole buffers of
// f16, bf16, e4m3, e5m2 or an MX type to f32 and back, with the narrowing's overflow count.
//   widen:  exact (a NaN comes out quiet, as half.hpp / fp8.hpp decode it; MX: mx_decode_blocks)
//   narrow: one rounding to nearest even with IEEE overflow (f16/bf16/e5m2 to infinity, e4m3 to
//           NaN; MX: mx_encode_blocks, which saturates); returns the events: elements whose f32
//           is finite and whose result is not (none for MX).
// Counts are in units of t (MX: blocks of 32). Two compiled variants, as the reductions
// (kernel_isa.hpp): `generic`, the scalar loops (the reference the tests hold the other to), and
// `x86_64_v3`, 8 values per step (F16C / AVX2: widen by vcvtph2ps, the bf16 shift, a gather
// from the fp8 / MX element table; narrow by vcvtps2ph, the bf16 integer rounding and the AVX2
// minifloat encoder, each counting its events in the same loop). The same bits and counts.
#pragma once

#include <cstddef>
#include <cstdint>

#include "inc/types.hpp"
#include "numerics/kernel_isa.hpp"

namespace inc::numerics {

// The types the passes cover: f16, bf16, e4m3, e5m2 and the MX types.
bool has_width_passes(DataType t) noexcept;

// `units` units of t at src (any alignment) -> units x elements_per_unit(t) f32 at dst.
void widen_to_f32(DataType t, const void* src, std::size_t units, float* dst) noexcept;
// units x elements_per_unit(t) f32 at src -> `units` units of t at dst; returns the events.
std::uint64_t narrow_from_f32(DataType t, const float* src, std::size_t units, void* dst) noexcept;

namespace detail {
// The same with an explicit variant (tests, benchmarks); an unavailable one falls back to generic.
void widen_to_f32_with(KernelIsa isa, DataType t, const void* src, std::size_t units, float* dst) noexcept;
std::uint64_t narrow_from_f32_with(KernelIsa isa, DataType t, const float* src, std::size_t units,
                                   void* dst) noexcept;
}  // namespace detail

}  // namespace inc::numerics
