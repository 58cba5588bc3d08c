// Internal to inc: which compiled instruction-set variant of the reduction kernels runs.
// reduce() picks the best one the CPU supports, once per process; tests and benchmarks use
// this header to run every available variant explicitly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "inc/types.hpp"

namespace inc::numerics::detail {

enum class KernelIsa : std::uint8_t {
  generic,    // whatever the build targets (SSE2 on x86-64); f16 conversions in integer code
  x86_64_v3,  // AVX2 + F16C (+ FMA, BMI2): f16 conversions by vcvtph2ps / vcvtps2ph
};
inline constexpr KernelIsa kAllKernelIsas[] = {KernelIsa::generic, KernelIsa::x86_64_v3};

constexpr std::string_view name(KernelIsa isa) noexcept {
  return isa == KernelIsa::generic ? "generic" : "x86_64_v3";
}

// Compiled into this build and supported by this CPU.
bool kernel_isa_available(KernelIsa isa) noexcept;

// The variant reduce() uses.
KernelIsa selected_kernel_isa() noexcept;

// reduce() with an explicit variant; an unavailable one falls back to generic.
void reduce_with(KernelIsa isa, DataType t, ReduceOp op, void* dst, const void* a, const void* b,
                 std::size_t count) noexcept;

// reduce(t, sum, ...) that also returns its numeric events (events.hpp) in the same loop
// (kernels_counted.hpp), with an explicit variant (an unavailable one falls back to generic).
// false, with nothing done, for the types without a fused kernel (events.cpp counts those in
// a pass of its own).
bool sum_counted_with(KernelIsa isa, DataType t, void* dst, const void* a, const void* b,
                      std::size_t count, std::uint64_t& events) noexcept;

// divide() with an explicit variant; an unavailable one falls back to generic.
void divide_with(KernelIsa isa, DataType t, void* buf, std::size_t count, std::uint64_t n) noexcept;

}  // namespace inc::numerics::detail
