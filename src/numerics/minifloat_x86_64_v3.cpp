// f32 -> minifloat (fp8, fp6, fp4) and MXINT8 element encoders, and f16/bf16 <-> f32, compiled
// with -march=x86-64-v3 (AVX2, F16C), 8 values per step; minifloat.cpp calls them only on CPUs that have AVX2. The
// rounding is fp8detail::round_magnitude's, lane by lane in integers on the f32 pattern (no
// dependence on MXCSR): keep M mantissa bits (fewer below the format's smallest normal), round
// to nearest even, let the carry move into the exponent; then overflow, infinity and NaN codes.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "numerics/minifloat.hpp"

#if !defined(__AVX2__) || !defined(__F16C__)
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

// `mag`: the magnitude code (without the sign), for the counting encoder.
inline __m256i encode8(const MiniFmt& f, __m256i x, __m256i* mag = nullptr) noexcept {
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
  if (mag) *mag = m;
  return _mm256_or_si256(m, sign);
}

inline __m256i mxint8_8(__m256 x) noexcept {
  __m256 q = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(64.0f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  q = _mm256_min_ps(_mm256_max_ps(q, _mm256_set1_ps(-128.0f)), _mm256_set1_ps(127.0f));
  return _mm256_and_si256(_mm256_cvtps_epi32(q), _mm256_set1_epi32(0xff));
}

// 8 bf16 -> f32: the top half of the f32 pattern; a signalling NaN quietened (bf16_to_f32).
inline __m256 bf16_widen8(__m128i h) noexcept {
  const __m256i x = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
  return _mm256_castsi256_ps(_mm256_or_si256(x, _mm256_and_si256(nan, _mm256_set1_epi32(0x00400000))));
}

// 8 f32 -> bf16 (f32_to_bf16: nearest even on the dropped 16 bits, a NaN's quiet bit set).
inline __m128i bf16_narrow8(__m256i x) noexcept {
  const __m256i rounded = _mm256_srli_epi32(
      _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1))), 16);
  const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
  const __m256i r = _mm256_blendv_epi8(rounded, _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x0040)), is_nan);
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08));  // lanes <= 0xffff
}

// 8 f32 -> f16 (vcvtps2ph, nearest even whatever MXCSR says) or bf16.
inline __m128i half_narrow8(bool f16, __m256i x) noexcept {
  return f16 ? _mm256_cvtps_ph(_mm256_castsi256_ps(x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC) : bf16_narrow8(x);
}

}  // namespace

std::size_t half_to_f32_x86_64_v3(bool f16, const void* in, std::size_t n, float* out) noexcept {
  const auto* p = static_cast<const unsigned char*>(in);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i));
    _mm256_storeu_ps(out + i, f16 ? _mm256_cvtph_ps(h) : bf16_widen8(h));
  }
  return i;
}

// Reads 32 bytes at 4i before writing 16 at 2i: in place, no later value is overwritten.
std::size_t f32_to_half_x86_64_v3(bool f16, const float* in, std::size_t n, void* out) noexcept {
  auto* p = static_cast<unsigned char*>(out);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    const __m128i h = half_narrow8(f16, x);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p + 2 * i), h);
  }
  return i;
}

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

// Events of 8 narrowings (widening.hpp): lanes whose f32 is finite and whose result's magnitude
// code reaches `first` (the format's first non-finite one), given as 32-bit lanes.
inline unsigned events8(__m256i x, __m256i mag, __m256i first_minus_1) noexcept {
  const __m256i finite = _mm256_cmpgt_epi32(_mm256_set1_epi32(0x7f800000), _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)));
  const __m256i ev = _mm256_and_si256(finite, _mm256_cmpgt_epi32(mag, first_minus_1));
  return static_cast<unsigned>(__builtin_popcount(static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(ev)))));
}

std::uint64_t encode_minifloat_counted_x86_64_v3(const MiniFmt& f, unsigned first, const float* in, std::size_t n,
                                                 std::uint8_t* out) noexcept {
  const __m256i fm1 = _mm256_set1_epi32(static_cast<int>(first) - 1);
  std::uint64_t ev = 0;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    __m256i mag;
    store8(out + i, encode8(f, x, &mag));
    ev += events8(x, mag, fm1);
  }
  if (i < n) {  // the tail through the same lanes, zero-padded (a zero is no event)
    float t[8] = {};
    std::uint8_t o[8];
    std::memcpy(t, in + i, (n - i) * sizeof(float));
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t));
    __m256i mag;
    store8(o, encode8(f, x, &mag));
    ev += events8(x, mag, fm1);
    std::memcpy(out + i, o, n - i);
  }
  return ev;
}

// f32 -> f16 / bf16 as f32_to_half_x86_64_v3, counting the events: finite f32, |h| >= infinity.
std::size_t f32_to_half_counted_x86_64_v3(bool f16, const float* in, std::size_t n, void* out,
                                          std::uint64_t& events) noexcept {
  auto* p = static_cast<unsigned char*>(out);
  const __m128i habs = _mm_set1_epi16(0x7fff), inf_m1 = _mm_set1_epi16(f16 ? 0x7bff : 0x7f7f);
  std::uint64_t ev = 0;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    const __m128i h = half_narrow8(f16, x);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p + 2 * i), h);
    const __m256i finite = _mm256_cmpgt_epi32(_mm256_set1_epi32(0x7f800000), _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)));
    const __m128i finite16 = _mm_packs_epi32(_mm256_castsi256_si128(finite), _mm256_extracti128_si256(finite, 1));
    const __m128i ev16 = _mm_and_si128(finite16, _mm_cmpgt_epi16(_mm_and_si128(h, habs), inf_m1));
    ev += static_cast<unsigned>(__builtin_popcount(static_cast<unsigned>(_mm_movemask_epi8(ev16)))) / 2;
  }
  events += ev;
  return i;
}

// 8 e4m3 codes (in 32-bit lanes) -> f32 as e4m3_to_f32: normal ones rebiased in integers,
// subnormal ones m x 2^-9 (an exact f32 product), S.1111.111 the quiet NaN with its sign.
inline __m256 e4m3_widen8(__m256i c) noexcept {
  const __m256i a = _mm256_and_si256(c, _mm256_set1_epi32(0x7f));
  const __m256i normal = _mm256_add_epi32(_mm256_slli_epi32(a, 20), _mm256_set1_epi32(120 << 23));
  const __m256i sub = _mm256_castps_si256(_mm256_mul_ps(_mm256_cvtepi32_ps(a), _mm256_set1_ps(0x1p-9f)));
  __m256i r = _mm256_blendv_epi8(normal, sub, _mm256_cmpgt_epi32(_mm256_set1_epi32(8), a));
  r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7fc00000), _mm256_cmpeq_epi32(a, _mm256_set1_epi32(0x7f)));
  return _mm256_castsi256_ps(_mm256_or_si256(r, _mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(0x80)), 24)));
}

// e4m3 / e5m2 -> f32 (fp8.hpp's decoders), 16 per step. e5m2 is the top byte of an f16 with the
// same value (same exponent bias and width; subnormals, infinities and NaN payloads included),
// so vcvtph2ps widens it exactly and quietens a NaN as e5m2_to_f32 does.
// v x s, except that an element NaN stays itself (the scalar decode_block's product gives the
// element's NaN where both are NaN, whatever operand order the compiler picks).
inline __m256 scale8(__m256 v, __m256 s) noexcept {
  return _mm256_blendv_ps(_mm256_mul_ps(v, s), v, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}

std::size_t fp8_to_f32_x86_64_v3(bool e4m3, const std::uint8_t* in, std::size_t n, bool scaled, float scale,
                                 float* out) noexcept {
  const __m256 s = _mm256_set1_ps(scale);
  auto put = [&](float* o, __m256 v) { _mm256_storeu_ps(o, scaled ? scale8(v, s) : v); };
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    if (e4m3) {
      put(out + i, e4m3_widen8(_mm256_cvtepu8_epi32(c)));
      put(out + i + 8, e4m3_widen8(_mm256_cvtepu8_epi32(_mm_srli_si128(c, 8))));
    } else {
      put(out + i, _mm256_cvtph_ps(_mm_unpacklo_epi8(_mm_setzero_si128(), c)));
      put(out + i + 8, _mm256_cvtph_ps(_mm_unpackhi_epi8(_mm_setzero_si128(), c)));
    }
  }
  return i;
}

std::uint32_t abs_max_bits_x86_64_v3(const float* v, std::size_t k) noexcept {
  __m256i m = _mm256_setzero_si256();
  std::size_t i = 0;
  for (; i + 8 <= k; i += 8)
    m = _mm256_max_epi32(m, _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + i)),
                                              _mm256_set1_epi32(0x7fffffff)));
  __m128i h = _mm_max_epi32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
  h = _mm_max_epi32(h, _mm_shuffle_epi32(h, 0x4e));
  h = _mm_max_epi32(h, _mm_shuffle_epi32(h, 0xb1));
  auto r = static_cast<std::uint32_t>(_mm_cvtsi128_si32(h));
  for (; i < k; ++i) {
    std::uint32_t b;
    std::memcpy(&b, v + i, 4);
    b &= 0x7fffffffu;
    r = b > r ? b : r;
  }
  return r;
}

// out[i] = table[in[i]] (scale8'd where `scaled`), by vgatherdps: whole groups of 8.
std::size_t table_to_f32_x86_64_v3(const float* table, const std::uint8_t* in, std::size_t n, bool scaled,
                                   float scale, float* out) noexcept {
  std::size_t i = 0;
  const __m256 s = _mm256_set1_ps(scale);
  if (scaled) {
    for (; i + 8 <= n; i += 8) {
      const __m256i idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(in + i)));
      _mm256_storeu_ps(out + i, scale8(_mm256_i32gather_ps(table, idx, 4), s));
    }
  } else {
    for (; i + 8 <= n; i += 8) {
      const __m256i idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(in + i)));
      _mm256_storeu_ps(out + i, _mm256_i32gather_ps(table, idx, 4));
    }
  }
  return i;
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
