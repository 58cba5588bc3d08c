// The f16/bf16 <-> f32 conversions of sum_widen in the switch (arith.hpp: widen_into at the first
// aggregating hop, narrow_in_place at the root), per kernel variant (numerics/kernel_isa.hpp):
//  * generic: one element at a time with the portable conversions of numerics/half.hpp;
//  * x86_64_v3: 8 elements per step, f16 by F16C (vcvtph2ps; vcvtps2ph with an explicit
//    round-to-nearest-even immediate, independent of MXCSR), bf16 by AVX2 shifts and the same
//    integer rounding as f32_to_bf16. Compiled here under a target attribute and used only when
//    the CPU has x86-64-v3 (the hosts' kernels ask the same question).
// Both give identical bits, NaN included: F16C quietens a NaN keeping its sign and the top
// payload bits, which is how half.hpp defines it; tests/switch/h16_convert_test.cpp checks
// every f16/bf16 pattern and the f32 rounding boundaries against the generic path.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "src/numerics/half.hpp"
#include "src/switch/arith.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define INC_SWITCH_F16C 1
#endif

namespace inc::sw {

namespace {

template <float (*Widen)(std::uint16_t)>
void widen_scalar(float* acc, const std::byte* src, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    std::uint16_t b;
    std::memcpy(&b, src + 2 * i, 2);
    acc[i] = Widen(b);
  }
}

// Elements from..n-1 in place: element i's 2 bytes land at 2i, below its own f32 at 4i (and
// below every f32 not yet read). Counts the finite accumulators that round to infinity (`inf`:
// the narrow type's exponent mask).
template <std::uint16_t (*Narrow)(float)>
std::uint32_t narrow_scalar(std::byte* p, std::size_t from, std::size_t n, std::uint16_t inf) noexcept {
  std::uint32_t ev = 0;
  for (std::size_t i = from; i < n; ++i) {
    float x;
    std::memcpy(&x, p + 4 * i, 4);
    const std::uint16_t h = Narrow(x);
    std::uint32_t xb;
    std::memcpy(&xb, &x, 4);
    ev += ((xb & 0x7fffffffu) <= 0x7f7fffffu) & ((h & 0x7fffu) >= inf);
    std::memcpy(p + 2 * i, &h, 2);
  }
  return ev;
}

// acc[i] += src[i] widened, from element `from`; events: finite operands, non-finite sum (as
// add_f32; with 16-bit inputs it needs ~2^100 members).
template <float (*Widen)(std::uint16_t)>
std::uint32_t add_scalar(float* acc, const std::byte* src, std::size_t from, std::size_t n) noexcept {
  constexpr float kMax = 3.40282347e38f;
  std::uint32_t ev = 0;
  for (std::size_t i = from; i < n; ++i) {
    std::uint16_t b;
    std::memcpy(&b, src + 2 * i, 2);
    const float x = acc[i], y = Widen(b), r = x + y;
    ev += (std::fabs(x) <= kMax) & (std::fabs(y) <= kMax) & (std::fabs(r) > kMax);
    acc[i] = r;
  }
  return ev;
}

#if defined(INC_SWITCH_F16C)
#define INC_V3 [[gnu::target("avx2,f16c")]]

// 8 f16/bf16 at p widened to f32 (f16_to_f32 / bf16_to_f32).
INC_V3 inline __m256 widen8_v3(bool f16, const std::byte* p) noexcept {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if (f16) return _mm256_cvtph_ps(h);
  // bf16: the top half of an f32; a signalling NaN is quietened (bf16_to_f32)
  const __m256i x = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)),
                                         _mm256_set1_epi32(0x7f800000));
  return _mm256_castsi256_ps(_mm256_or_si256(x, _mm256_and_si256(nan, _mm256_set1_epi32(0x00400000))));
}

INC_V3 void widen_v3(bool f16, float* acc, const std::byte* src, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(acc + i, widen8_v3(f16, src + 2 * i));
  if (f16) widen_scalar<numerics::f16_to_f32>(acc + i, src + 2 * i, n - i);
  else widen_scalar<numerics::bf16_to_f32>(acc + i, src + 2 * i, n - i);
}

// 8 f32 -> 8 bf16 (f32_to_bf16: nearest-even on the 16 dropped bits; NaN: quiet bit set).
INC_V3 inline __m128i to_bf16_v3(__m256i x) noexcept {
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i rounded = _mm256_srli_epi32(
      _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)),
                       _mm256_and_si256(_mm256_srli_epi32(x, 16), one)),
      16);
  const __m256i nan = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x0040));
  const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)),
                                            _mm256_set1_epi32(0x7f800000));
  const __m256i r = _mm256_blendv_epi8(rounded, nan, is_nan);
  // 32 -> 16 bits (every lane <= 0xffff, so the unsigned saturation never bites); packus works
  // per 128-bit half, so put the halves' results together again.
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
  return _mm256_castsi256_si128(packed);
}

INC_V3 std::uint32_t narrow_v3(bool f16, std::byte* p, std::size_t n) noexcept {
  const __m256i abs = _mm256_set1_epi32(0x7fffffff);
  const __m256i max_finite = _mm256_set1_epi32(0x7f7fffff);
  const __m256i h_inf_m1 = _mm256_set1_epi32(f16 ? 0x7bff : 0x7f7f);
  const __m256i h_abs = _mm256_set1_epi32(0x7fff);
  std::uint32_t ev = 0;
  std::size_t i = 0;
  // Reads 32 bytes at 4i, writes 16 at 2i: below every f32 not yet read (4i + 32 >= 2i + 16).
  for (; i + 8 <= n; i += 8) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 4 * i));
    const __m128i h = f16 ? _mm256_cvtps_ph(_mm256_castsi256_ps(x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
                          : to_bf16_v3(x);
    const __m256i finite = _mm256_cmpgt_epi32(_mm256_add_epi32(max_finite, _mm256_set1_epi32(1)),
                                              _mm256_and_si256(x, abs));
    const __m256i h_over = _mm256_cmpgt_epi32(_mm256_and_si256(_mm256_cvtepu16_epi32(h), h_abs), h_inf_m1);
    const int m = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_and_si256(finite, h_over)));
    ev += static_cast<std::uint32_t>(__builtin_popcount(static_cast<unsigned>(m)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p + 2 * i), h);
  }
  // The tail in place as the generic path does it, from element i.
  return ev + (f16 ? narrow_scalar<numerics::f32_to_f16>(p, i, n, 0x7c00)
                   : narrow_scalar<numerics::f32_to_bf16>(p, i, n, 0x7f80));
}

INC_V3 std::uint32_t add_v3(bool f16, float* acc, const std::byte* src, std::size_t n) noexcept {
  const __m256i abs = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  std::uint32_t ev = 0;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(acc + i), y = widen8_v3(f16, src + 2 * i);
    const __m256 r = _mm256_add_ps(x, y);
    // |x|, |y| below the infinity pattern and |r| not: signed compares on the magnitudes' bits
    const __m256i ax = _mm256_and_si256(_mm256_castps_si256(x), abs);
    const __m256i ay = _mm256_and_si256(_mm256_castps_si256(y), abs);
    const __m256i ar = _mm256_and_si256(_mm256_castps_si256(r), abs);
    const __m256i e = _mm256_andnot_si256(_mm256_cmpgt_epi32(inf, ar),
                                          _mm256_and_si256(_mm256_cmpgt_epi32(inf, ax), _mm256_cmpgt_epi32(inf, ay)));
    ev += static_cast<std::uint32_t>(__builtin_popcount(static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(e)))));
    _mm256_storeu_ps(acc + i, r);
  }
  return ev + (f16 ? add_scalar<numerics::f16_to_f32>(acc, src, i, n) : add_scalar<numerics::bf16_to_f32>(acc, src, i, n));
}
#undef INC_V3
#endif

bool use_v3(numerics::detail::KernelIsa isa) noexcept {
#if defined(INC_SWITCH_F16C)
  return isa == numerics::detail::KernelIsa::x86_64_v3 && numerics::detail::kernel_isa_available(isa);
#else
  (void)isa;
  return false;
#endif
}

}  // namespace

void widen_h16_with(numerics::detail::KernelIsa isa, proto::ElemType src_t, float* acc,
                    const std::byte* src, std::size_t n) noexcept {
  const bool f16 = src_t == proto::ElemType::f16;
#if defined(INC_SWITCH_F16C)
  if (use_v3(isa)) return widen_v3(f16, acc, src, n);
#endif
  (void)isa;
  if (f16) widen_scalar<numerics::f16_to_f32>(acc, src, n);
  else widen_scalar<numerics::bf16_to_f32>(acc, src, n);
}

std::uint32_t add_h16_with(numerics::detail::KernelIsa isa, proto::ElemType src_t, float* acc,
                           const std::byte* src, std::size_t n) noexcept {
  const bool f16 = src_t == proto::ElemType::f16;
#if defined(INC_SWITCH_F16C)
  if (use_v3(isa)) return add_v3(f16, acc, src, n);
#endif
  (void)isa;
  return f16 ? add_scalar<numerics::f16_to_f32>(acc, src, 0, n) : add_scalar<numerics::bf16_to_f32>(acc, src, 0, n);
}

std::uint32_t narrow_h16_with(numerics::detail::KernelIsa isa, proto::ElemType wide_t, std::byte* cells,
                              std::size_t n) noexcept {
  const bool f16 = wide_t == proto::ElemType::f16w;
#if defined(INC_SWITCH_F16C)
  if (use_v3(isa)) return narrow_v3(f16, cells, n);
#endif
  (void)isa;
  return f16 ? narrow_scalar<numerics::f32_to_f16>(cells, 0, n, 0x7c00)
             : narrow_scalar<numerics::f32_to_bf16>(cells, 0, n, 0x7f80);
}

}  // namespace inc::sw
