// f32 -> minifloat (fp8, fp6, fp4) and MXINT8 element encoders compiled with -march=x86-64-v3
// (AVX2), 8 values per step; minifloat.cpp calls them only on CPUs that have AVX2. The
// rounding is fp8detail::round_magnitude's, lane by lane in integers on the f32 pattern (no
// dependence on MXCSR): keep M mantissa bits (fewer below the format's smallest normal), round
// to nearest even, let the carry move into the exponent; then overflow, infinity and NaN codes.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "numerics/minifloat.hpp"

#if !defined(__AVX2__)
#error "minifloat_x86_64_v3.cpp must be compiled with -march=x86-64-v3"
#endif

namespace inc::numerics::detail {
namespace {

// The low byte of each of 8 int32 lanes (values 0..255), stored as 8 bytes.
inline void store8(std::uint8_t* out, __m256i v) noexcept {
  const __m256i w = _mm256_packus_epi32(v, v);   // per lane: 4 x u16, twice
  const __m256i b = _mm256_packus_epi16(w, w);   // per lane: 4 x u8, four times
  const __m256i c = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm256_castsi256_si128(c));
}

inline __m256i encode8(const MiniFmt& f, __m256i x) noexcept {
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i ax = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
  const __m256i sign = _mm256_sll_epi32(_mm256_srli_epi32(x, 31), _mm_cvtsi32_si128(f.sign_bit));
  // Exponent (f32 subnormals as 2^-126 with no implicit bit) and significand.
  const __m256i biased = _mm256_srli_epi32(ax, 23);
  const __m256i implicit = _mm256_slli_epi32(_mm256_min_epi32(biased, one), 23);
  const __m256i sig = _mm256_or_si256(_mm256_and_si256(ax, _mm256_set1_epi32(0x7fffff)), implicit);
  const __m256i e = _mm256_sub_epi32(_mm256_max_epi32(biased, one), _mm256_set1_epi32(127));  // unbiased
  const __m256i emin = _mm256_set1_epi32(1 - f.bias);
  // Bits dropped: 23 - M, plus one per binade below the smallest normal; at most 26 (the
  // significand has 24 bits: beyond that everything rounds to zero, and 1 << 25 stays positive).
  const __m256i below = _mm256_max_epi32(_mm256_sub_epi32(emin, e), _mm256_setzero_si256());
  const __m256i shift = _mm256_min_epi32(_mm256_add_epi32(_mm256_set1_epi32(23 - f.mbits), below), _mm256_set1_epi32(26));
  __m256i q = _mm256_srlv_epi32(sig, shift);
  const __m256i rem = _mm256_sub_epi32(sig, _mm256_sllv_epi32(q, shift));
  const __m256i half = _mm256_sllv_epi32(one, _mm256_sub_epi32(shift, one));
  const __m256i up = _mm256_or_si256(
      _mm256_cmpgt_epi32(rem, half),
      _mm256_and_si256(_mm256_cmpeq_epi32(rem, half), _mm256_cmpeq_epi32(_mm256_and_si256(q, one), one)));
  q = _mm256_sub_epi32(q, up);  // up is -1 where rounding up
  // Normal: ((e + bias) << M) + q - 2^M (a carry of q into 2^(M+1) moves into the exponent).
  const __m256i normal = _mm256_sub_epi32(
      _mm256_add_epi32(_mm256_sll_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(f.bias)), _mm_cvtsi32_si128(f.mbits)), q),
      _mm256_set1_epi32(1 << f.mbits));
  __m256i m = _mm256_blendv_epi8(normal, q, _mm256_cmpgt_epi32(emin, e));
  m = _mm256_blendv_epi8(m, _mm256_set1_epi32(static_cast<int>(f.overflow)),
                         _mm256_cmpgt_epi32(m, _mm256_set1_epi32(static_cast<int>(f.max_finite))));
  // Infinity: its pattern rounds far beyond max_finite (overflow, above). NaN:
  m = _mm256_blendv_epi8(m, _mm256_set1_epi32(static_cast<int>(f.nan)), _mm256_cmpgt_epi32(ax, _mm256_set1_epi32(0x7f800000)));
  return _mm256_or_si256(m, sign);
}

inline __m256i mxint8_8(__m256 x) noexcept {
  __m256 q = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(64.0f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  q = _mm256_min_ps(_mm256_max_ps(q, _mm256_set1_ps(-128.0f)), _mm256_set1_ps(127.0f));
  return _mm256_and_si256(_mm256_cvtps_epi32(q), _mm256_set1_epi32(0xff));
}

}  // namespace

void encode_minifloat_x86_64_v3(const MiniFmt& f, const float* in, std::size_t n, std::uint8_t* out) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) store8(out + i, encode8(f, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i))));
  if (i < n) {  // the tail through the same lanes, zero-padded
    float t[8] = {};
    std::uint8_t o[8];
    std::memcpy(t, in + i, (n - i) * sizeof(float));
    store8(o, encode8(f, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t))));
    std::memcpy(out + i, o, n - i);
  }
}

void encode_mxint8_x86_64_v3(const float* in, std::size_t n, std::uint8_t* out) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) store8(out + i, mxint8_8(_mm256_loadu_ps(in + i)));
  if (i < n) {
    float t[8] = {};
    std::uint8_t o[8];
    std::memcpy(t, in + i, (n - i) * sizeof(float));
    store8(o, mxint8_8(_mm256_loadu_ps(t)));
    std::memcpy(out + i, o, n - i);
  }
}

}  // namespace inc::numerics::detail
