// Bulk f32 <-> fp8 / MX conversions (minifloat.hpp): decode tables, the generic (scalar)
// encoders, and the dispatch to the AVX2 ones.
#include "numerics/minifloat.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "numerics/half.hpp"
#include "numerics/mx_type.hpp"

namespace inc::numerics {

namespace {

using Table = std::array<float, 256>;

// code -> f32 of every element format: the numerics module's table (mx_type.hpp, built once
// from the scalar decoders; for fp8 elements mx_element_value is e4m3_to_f32 / e5m2_to_f32).
const Table& table(MxElem e) noexcept { return mx_element_table(e); }

bool use_v3(detail::KernelIsa isa) noexcept {
  return isa == detail::KernelIsa::x86_64_v3 && detail::kernel_isa_available(isa);
}

// The element format as the vector encoder sees it; MX elements saturate (no NaN occurs: a
// block with a NaN or an infinity is encoded by the caller).
[[maybe_unused]] detail::MiniFmt mini(MxElem e, Fp8Overflow mode) noexcept {
  const bool sat = mode == Fp8Overflow::saturate;
  switch (e) {
    case MxElem::fp8_e4m3: return {3, 7, 0x7e, sat ? 0x7eu : 0x7fu, 0x7f, 7};
    case MxElem::fp8_e5m2: return {2, 15, 0x7b, sat ? 0x7bu : 0x7cu, 0x7e, 7};
    case MxElem::fp6_e2m3: return {3, 1, 0x1f, 0x1f, 0x1f, 5};
    case MxElem::fp6_e3m2: return {2, 3, 0x1f, 0x1f, 0x1f, 5};
    case MxElem::fp4_e2m1: return {1, 1, 0x7, 0x7, 0x7, 3};
    case MxElem::int8: break;
  }
  return {};
}

}  // namespace

namespace detail {

void f32_to_fp8_with(KernelIsa isa, MxElem fmt, const float* in, std::size_t n, std::uint8_t* out,
                     Fp8Overflow mode) noexcept {
#if defined(INC_NUMERICS_X86_64_V3)
  if (use_v3(isa)) return encode_minifloat_x86_64_v3(mini(fmt, mode), in, n, out);
#else
  (void)isa;
#endif
  const bool e4 = fmt == MxElem::fp8_e4m3;
  for (std::size_t i = 0; i < n; ++i) out[i] = e4 ? f32_to_e4m3(in[i], mode) : f32_to_e5m2(in[i], mode);
}

std::uint64_t f32_to_fp8_counted_with(KernelIsa isa, MxElem fmt, const float* in, std::size_t n,
                                      std::uint8_t* out) noexcept {
  const unsigned first = fmt == MxElem::fp8_e4m3 ? 0x7f : 0x7c;  // e4m3: NaN only; e5m2: inf, NaN
#if defined(INC_NUMERICS_X86_64_V3)
  if (use_v3(isa)) return encode_minifloat_counted_x86_64_v3(mini(fmt, Fp8Overflow::ieee), first, in, n, out);
#else
  (void)isa;
#endif
  // The scalar encoder, then the count (e4m3: NaN S.1111.111; e5m2: the exponent all ones).
  f32_to_fp8_with(KernelIsa::generic, fmt, in, n, out, Fp8Overflow::ieee);
  const std::uint8_t mask = first == 0x7f ? 0x7f : 0x7c;
  std::uint64_t ev = 0;
  for (std::size_t i = 0; i < n; ++i) ev += std::isfinite(in[i]) && (out[i] & mask) == mask;
  return ev;
}

void mx_encode_f32_with(KernelIsa isa, MxElem e, const float* v, std::size_t n, std::size_t block,
                        std::uint8_t* scales, std::uint8_t* codes) noexcept {
#if !defined(INC_NUMERICS_X86_64_V3)
  (void)isa;
  return mx_encode(e, v, n, block, scales, codes);
#else
  if (!use_v3(isa) || block == 0) return mx_encode(e, v, n, block, scales, codes);
  // mx_encode's blocks, with the elements scaled in f32 and encoded 8 at a time.
  constexpr std::size_t kChunk = 256;
  float scaled[kChunk];
  for (std::size_t b0 = 0, s = 0; b0 < n; b0 += block, ++s) {
    const std::size_t end = b0 + block < n ? b0 + block : n;
    // The largest magnitude as the largest |bits| (the order of non-negative floats); inf/NaN
    // patterns are above every finite one: mx_block_scale's result, 8 values per step.
    const std::uint32_t amax = abs_max_bits_x86_64_v3(v + b0, end - b0);
    scales[s] = amax >= 0x7f800000u ? kE8M0NaN : mx_scale_of_amax(e, __builtin_bit_cast(float, amax));
    if (scales[s] == kE8M0NaN) {  // a NaN or an infinity: the NaN scale, zero codes
      std::fill(codes + b0, codes + end, std::uint8_t{0});
      continue;
    }
    const int shared = scales[s] - 127;
    const float inv = std::ldexp(1.0f, -shared);  // 2^-127 .. 2^127: an f32
    for (std::size_t c0 = b0; c0 < end; c0 += kChunk) {
      const std::size_t k = end - c0 < kChunk ? end - c0 : kChunk;
      for (std::size_t i = 0; i < k; ++i) scaled[i] = v[c0 + i] * inv;
      if (e == MxElem::int8) encode_mxint8_x86_64_v3(scaled, k, codes + c0);
      else encode_minifloat_x86_64_v3(mini(e, Fp8Overflow::saturate), scaled, k, codes + c0);
    }
  }
#endif
}

void half_to_f32_with(KernelIsa isa, DataType t, const void* in, std::size_t n, float* out) noexcept {
  const bool f16 = t == DataType::f16;
  std::size_t i = 0;
#if defined(INC_NUMERICS_X86_64_V3)
  if (use_v3(isa)) i = half_to_f32_x86_64_v3(f16, in, n, out);
#else
  (void)isa;
#endif
  const auto* p = static_cast<const unsigned char*>(in);
  for (; i < n; ++i) {
    std::uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    out[i] = f16 ? f16_to_f32(h) : bf16_to_f32(h);
  }
}

void f32_to_half_with(KernelIsa isa, DataType t, const float* in, std::size_t n, void* out) noexcept {
  const bool f16 = t == DataType::f16;
  std::size_t i = 0;
#if defined(INC_NUMERICS_X86_64_V3)
  if (use_v3(isa)) i = f32_to_half_x86_64_v3(f16, in, n, out);
#else
  (void)isa;
#endif
  auto* p = static_cast<unsigned char*>(out);
  for (; i < n; ++i) {  // front to back, each value read before its 2 bytes are written
    float x;
    std::memcpy(&x, in + i, 4);
    const std::uint16_t h = f16 ? f32_to_f16(x) : f32_to_bf16(x);
    std::memcpy(p + 2 * i, &h, 2);
  }
}

}  // namespace detail

void half_to_f32(DataType t, const void* in, std::size_t n, float* out) noexcept {
  detail::half_to_f32_with(detail::selected_kernel_isa(), t, in, n, out);
}

void f32_to_half(DataType t, const float* in, std::size_t n, void* out) noexcept {
  detail::f32_to_half_with(detail::selected_kernel_isa(), t, in, n, out);
}

void f32_to_fp8(MxElem fmt, const float* in, std::size_t n, std::uint8_t* out, Fp8Overflow mode) noexcept {
  detail::f32_to_fp8_with(detail::selected_kernel_isa(), fmt, in, n, out, mode);
}

void fp8_to_f32(MxElem fmt, const std::uint8_t* in, std::size_t n, float* out) noexcept {
  const Table& t = table(fmt);
  for (std::size_t i = 0; i < n; ++i) out[i] = t[in[i]];
}

void mx_encode_f32(MxElem e, const float* v, std::size_t n, std::size_t block, std::uint8_t* scales,
                   std::uint8_t* codes) noexcept {
  detail::mx_encode_f32_with(detail::selected_kernel_isa(), e, v, n, block, scales, codes);
}

void mx_decode_f32(MxElem e, const std::uint8_t* scales, const std::uint8_t* codes, std::size_t n,
                   std::size_t block, float* out) noexcept {
  if (block == 0) return;
  // One rounding of the exact product scale x element, as (float) of mx_decode's double.
  const Table& t = table(e);
  for (std::size_t b0 = 0; b0 < n; b0 += block) {
    const std::size_t end = b0 + block < n ? b0 + block : n;
    const std::uint8_t sc = scales[b0 / block];
    const float x = sc == kE8M0NaN ? __builtin_nanf("") : std::ldexp(1.0f, sc - 127);
    for (std::size_t i = b0; i < end; ++i) out[i] = x * t[codes[i]];
  }
}

}  // namespace inc::numerics
