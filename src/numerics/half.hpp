// IEEE 754 binary16 (f16) and bfloat16 (bf16) conversions with round-to-nearest-even,
// correct for NaN (quiet, sign kept), infinities, subnormals and overflow to infinity.
#pragma once

#include <cstdint>

namespace inc::numerics {

std::uint16_t f32_to_f16(float f) noexcept;
float f16_to_f32(std::uint16_t h) noexcept;
std::uint16_t f32_to_bf16(float f) noexcept;
float bf16_to_f32(std::uint16_t h) noexcept;

}  // namespace inc::numerics
