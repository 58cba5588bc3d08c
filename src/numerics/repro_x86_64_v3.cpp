// The host passes of reproducible sums (repro.hpp) with AVX2 (+ F16C for f16), compiled with
// -march=x86-64-v3 and chosen at run time like the reduction kernels (kernel_isa.hpp). Each
// entry point does the whole vectors of every block and hands the rest (and the blocks of
// zeros and NaN, whose output is a constant) to the scalar code in repro.cpp, so both paths give
// identical bits, which tests/numerics/test_repro_isa.cpp checks. Only intrinsics and builtins
// here (ODR: see kernels.hpp).
//
//  scan    8 values per step: f32 bits -> (exponent field, mantissa); the top and lowest set
//          bit from exact int -> float conversions of m and m & -m; per-block max.
//  encode  4 values per step in 64-bit lanes: X = m * 2^sh, or m / 2^-sh rounded to nearest
//          even; lo = X mod 2^L and hi = floor(X / 2^L) land as one 64-bit word (lo | hi << 32).
//  decode  4 values per step: V = hi * 2^L + lo; rounded to odd at <= 53 bits (the top bit
//          from a double conversion, which may be one too high: rounding to odd at 52 bits
//          is as good, 52 >= 24 + 2), converted exactly, scaled by a power of two; f32 then
//          rounds once; f16/bf16 go through an f32 rounded to odd (24 >= 11 + 2 and 8 + 2), so
//          the last rounding is still the only one.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "numerics/repro.hpp"

#if !defined(__AVX2__) || !defined(__F16C__)
#error "repro_x86_64_v3.cpp must be compiled with -march=x86-64-v3"
#endif

namespace inc::numerics::repro::detail {

namespace {

// 8 elements as f32 bit patterns (f16/bf16 widened exactly).
[[gnu::always_inline]] inline __m256i load8(DataType t, const std::byte* p) noexcept {
  if (t == DataType::f32) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if (t == DataType::f16) return _mm256_castps_si256(_mm256_cvtph_ps(h));
  return _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
}

// The exponent field of a float's bits (as an int).
[[gnu::always_inline]] inline __m256i expo(__m256 f) noexcept {
  return _mm256_srli_epi32(_mm256_castps_si256(f), 23);
}

[[gnu::always_inline]] inline std::int32_t hmax(__m256i v) noexcept {
  __m128i m = _mm_max_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  m = _mm_max_epi32(m, _mm_shuffle_epi32(m, 0x4e));
  m = _mm_max_epi32(m, _mm_shuffle_epi32(m, 0xb1));
  return _mm_cvtsi128_si32(m);
}

// Split of 8 f32 bit patterns: m (integer significand), q (its exponent), finite nonzero mask,
// nonfinite mask, sign mask.
struct Split {
  __m256i m, q, finite, nonfinite, negative;
};
[[gnu::always_inline]] inline Split split8(__m256i b) noexcept {
  const __m256i e = _mm256_and_si256(_mm256_srli_epi32(b, 23), _mm256_set1_epi32(0xff));
  const __m256i f = _mm256_and_si256(b, _mm256_set1_epi32(0x7fffff));
  const __m256i sub = _mm256_cmpeq_epi32(e, _mm256_setzero_si256());
  Split s;
  s.nonfinite = _mm256_cmpeq_epi32(e, _mm256_set1_epi32(0xff));
  const __m256i zero = _mm256_cmpeq_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x7fffffff)), _mm256_setzero_si256());
  s.finite = _mm256_andnot_si256(_mm256_or_si256(zero, s.nonfinite), _mm256_set1_epi32(-1));
  s.m = _mm256_andnot_si256(sub, _mm256_or_si256(f, _mm256_set1_epi32(0x800000)));
  s.m = _mm256_or_si256(s.m, _mm256_and_si256(sub, f));
  s.m = _mm256_and_si256(s.m, s.finite);  // 0 for zeros and NaN/inf
  s.q = _mm256_blendv_epi8(_mm256_sub_epi32(e, _mm256_set1_epi32(150)), _mm256_set1_epi32(-149), sub);
  s.negative = _mm256_srai_epi32(b, 31);
  return s;
}

template <class F>
void by_block(std::uint64_t n, std::uint64_t elem0, std::uint64_t step, F f) {
  std::uint64_t i = 0;
  while (i < n) {
    const std::uint64_t b = (elem0 + i) / kBlock;
    const std::uint64_t end = (b + 1) * kBlock - elem0 < n ? (b + 1) * kBlock - elem0 : n;
    const std::uint64_t vec_end = i + (end - i) / step * step;
    f(b, i, vec_end, end);
    i = end;
  }
}

}  // namespace

void scan_x86_64_v3(DataType t, const void* x, std::uint64_t n, std::uint64_t elem0, std::int32_t* out) noexcept {
  const auto* p = static_cast<const std::byte*>(x);
  const std::uint64_t esz = t == DataType::f32 ? 4 : 2;  // (no inline calls here: ODR)
  by_block(n, elem0, 8, [&](std::uint64_t b, std::uint64_t i, std::uint64_t vec_end, std::uint64_t end) {
    const __m256i lowest = _mm256_set1_epi32(INT32_MIN);
    __m256i vhi = lowest, vlo = lowest;
    for (std::uint64_t j = i; j < vec_end; j += 8) {
      const Split s = split8(load8(t, p + j * esz));
      // |x| < 2^(q + bit_width(m)); the lowest set bit is q + ctz(m): both from exact conversions
      const __m256i bw = _mm256_sub_epi32(expo(_mm256_cvtepi32_ps(s.m)), _mm256_set1_epi32(126));
      const __m256i low = _mm256_and_si256(s.m, _mm256_sub_epi32(_mm256_setzero_si256(), s.m));
      const __m256i tz = _mm256_sub_epi32(expo(_mm256_cvtepi32_ps(low)), _mm256_set1_epi32(127));
      __m256i hi = _mm256_blendv_epi8(lowest, _mm256_add_epi32(s.q, bw), s.finite);
      hi = _mm256_blendv_epi8(hi, _mm256_set1_epi32(kNonFinite), s.nonfinite);
      const __m256i nlo = _mm256_blendv_epi8(lowest, _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_add_epi32(s.q, tz)), s.finite);
      vhi = _mm256_max_epi32(vhi, hi);
      vlo = _mm256_max_epi32(vlo, nlo);
    }
    if (vec_end > i) {
      out[2 * b] = out[2 * b] > hmax(vhi) ? out[2 * b] : hmax(vhi);
      out[2 * b + 1] = out[2 * b + 1] > hmax(vlo) ? out[2 * b + 1] : hmax(vlo);
    }
    if (end > vec_end) scan_generic(t, p + vec_end * esz, end - vec_end, elem0 + vec_end, out);  // (scalar)
  });
}

void encode_x86_64_v3(DataType t, const void* x, std::uint64_t n, std::uint64_t elem0, const std::int32_t* exps,
                      int nranks, std::int32_t* limbs) noexcept {
  const auto* p = static_cast<const std::byte*>(x);
  const std::uint64_t esz = t == DataType::f32 ? 4 : 2;  // (no inline calls here: ODR)
  const int L = limb_bits(nranks);
  const __m256i lo_mask = _mm256_set1_epi64x(static_cast<long long>((std::uint64_t{1} << L) - 1));
  const __m256i one = _mm256_set1_epi64x(1), zero = _mm256_setzero_si256();
  by_block(n, elem0, 8, [&](std::uint64_t b, std::uint64_t i, std::uint64_t vec_end, std::uint64_t end) {
    const std::int32_t e = exps[2 * b];
    if (e == kNonFinite || e == kZero) {  // all zero limbs
      encode_generic(t, p + i * esz, end - i, elem0 + i, exps, nranks, limbs + 2 * i);
      return;
    }
    const __m256i shift = _mm256_set1_epi32(2 * L - e);
    for (std::uint64_t j = i; j < vec_end; j += 8) {
      const Split s = split8(load8(t, p + j * esz));
      const __m256i sh32 = _mm256_add_epi32(s.q, shift);  // X = m * 2^sh
      for (int half = 0; half < 2; ++half) {
        const __m128i m4 = half ? _mm256_extracti128_si256(s.m, 1) : _mm256_castsi256_si128(s.m);
        const __m128i sh4 = half ? _mm256_extracti128_si256(sh32, 1) : _mm256_castsi256_si128(sh32);
        const __m128i ng4 = half ? _mm256_extracti128_si256(s.negative, 1) : _mm256_castsi256_si128(s.negative);
        const __m256i m = _mm256_cvtepu32_epi64(m4);
        const __m256i sh = _mm256_cvtepi32_epi64(sh4);
        const __m256i neg_x = _mm256_cvtepi32_epi64(ng4);
        const __m256i left = _mm256_cmpgt_epi64(zero, sh);  // sh < 0: shift right, rounding
        const __m256i up_sh = _mm256_andnot_si256(left, sh);
        const __m256i mag_left = _mm256_sllv_epi64(m, up_sh);
        // k = min(-sh, 40) (m < 2^24: anything from 26 on gives 0 with the same rounding)
        __m256i k = _mm256_sub_epi64(zero, sh);
        k = _mm256_blendv_epi8(k, _mm256_set1_epi64x(40), _mm256_cmpgt_epi64(k, _mm256_set1_epi64x(40)));
        k = _mm256_and_si256(k, left);  // (lanes shifting left: unused)
        const __m256i kk = _mm256_or_si256(k, _mm256_andnot_si256(left, one));  // >= 1 everywhere
        __m256i mag_right = _mm256_srlv_epi64(m, kk);
        const __m256i rem = _mm256_and_si256(m, _mm256_sub_epi64(_mm256_sllv_epi64(one, kk), one));
        const __m256i halfv = _mm256_sllv_epi64(one, _mm256_sub_epi64(kk, one));
        const __m256i tie_odd = _mm256_and_si256(_mm256_cmpeq_epi64(rem, halfv),
                                                 _mm256_cmpeq_epi64(_mm256_and_si256(mag_right, one), one));
        const __m256i up = _mm256_or_si256(_mm256_cmpgt_epi64(rem, halfv), tie_odd);
        mag_right = _mm256_sub_epi64(mag_right, up);  // + 1 where rounding up (up = -1)
        const __m256i mag = _mm256_blendv_epi8(mag_left, mag_right, left);
        const __m256i X = _mm256_sub_epi64(_mm256_xor_si256(mag, neg_x), neg_x);  // signed
        const __m256i sx = _mm256_cmpgt_epi64(zero, X);
        const __m256i lo = _mm256_and_si256(X, lo_mask);
        const __m256i hi = _mm256_xor_si256(_mm256_srl_epi64(_mm256_xor_si256(X, sx), _mm_cvtsi32_si128(L)), sx);  // floor
        const __m256i w = _mm256_or_si256(lo, _mm256_slli_epi64(hi, 32));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(limbs + 2 * (j + 4 * half)), w);
      }
    }
    if (end > vec_end) encode_generic(t, p + vec_end * esz, end - vec_end, elem0 + vec_end, exps, nranks, limbs + 2 * vec_end);
  });
}

void decode_x86_64_v3(DataType t, const std::int32_t* limbs, std::uint64_t n, std::uint64_t elem0,
                      const std::int32_t* exps, int nranks, void* y) noexcept {
  auto* out = static_cast<std::byte*>(y);
  const std::uint64_t esz = t == DataType::f32 ? 4 : 2;  // (no inline calls here: ODR)
  const int L = limb_bits(nranks);
  const __m256i zero = _mm256_setzero_si256(), one = _mm256_set1_epi64x(1);
  const __m256i lo32 = _mm256_set1_epi64x(0xffffffffLL), bias32 = _mm256_set1_epi64x(0x80000000LL);
  const __m256i odd_idx = _mm256_setr_epi32(1, 3, 5, 7, 0, 0, 0, 0), even_idx = _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0);
  const __m256d two32 = _mm256_set1_pd(4294967296.0), two31 = _mm256_set1_pd(2147483648.0);
  // a 64-bit lane (< 2^62, >= 0) as a double: exact below 2^53, else rounded once
  auto to_double = [&](__m256i v) {
    const __m128i h = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(v, odd_idx));
    const __m128i l = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(v, even_idx));
    const __m256d dl = _mm256_add_pd(_mm256_cvtepi32_pd(_mm_xor_si128(l, _mm_set1_epi32(INT32_MIN))), two31);
    return _mm256_add_pd(_mm256_mul_pd(_mm256_cvtepi32_pd(h), two32), dl);
  };
  by_block(n, elem0, 4, [&](std::uint64_t b, std::uint64_t i, std::uint64_t vec_end, std::uint64_t end) {
    const std::int32_t e = exps[2 * b];
    if (e == kNonFinite || e == kZero) {  // constant NaN / +0
      decode_generic(t, limbs + 2 * i, end - i, elem0 + i, exps, nranks, out + i * esz);
      return;
    }
    const __m256i scale_bias = _mm256_set1_epi64x(e - 2 * L + 1023);
    for (std::uint64_t j = i; j < vec_end; j += 4) {
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(limbs + 2 * j));
      const __m256i lo = _mm256_and_si256(w, lo32);  // lo sums are in [0, 2^31)
      const __m256i hi = _mm256_sub_epi64(_mm256_xor_si256(_mm256_srli_epi64(w, 32), bias32), bias32);
      const __m256i V = _mm256_add_epi64(_mm256_sll_epi64(hi, _mm_cvtsi32_si128(L)), lo);
      const __m256i s = _mm256_cmpgt_epi64(zero, V);
      const __m256i mag = _mm256_sub_epi64(_mm256_xor_si256(V, s), s);
      // bit width from the (possibly rounded-up) double: its exponent field - 1022
      const __m256i bw = _mm256_sub_epi64(_mm256_srli_epi64(_mm256_castpd_si256(to_double(mag)), 52), _mm256_set1_epi64x(1022));
      __m256i sh = _mm256_sub_epi64(bw, _mm256_set1_epi64x(53));
      sh = _mm256_andnot_si256(_mm256_cmpgt_epi64(zero, sh), sh);  // max(0, .)
      const __m256i sticky = _mm256_andnot_si256(
          _mm256_cmpeq_epi64(_mm256_and_si256(mag, _mm256_sub_epi64(_mm256_sllv_epi64(one, sh), one)), zero), one);
      const __m256i m2 = _mm256_or_si256(_mm256_srlv_epi64(mag, sh), sticky);  // < 2^53: exact below
      const __m256d pow2 = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(sh, scale_bias), 52));
      __m256d d = _mm256_mul_pd(to_double(m2), pow2);
      d = _mm256_or_pd(d, _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_srli_epi64(s, 63), 63)));  // sign
      __m128 f = _mm256_cvtpd_ps(d);  // nearest (f32: the one rounding)
      if (t == DataType::f32) {
        _mm_storeu_ps(reinterpret_cast<float*>(out + 4 * j), f);
        continue;
      }
      // f16/bf16: f rounded to odd instead (if inexact and even, step towards d)
      const __m256d back = _mm256_cvtps_pd(f);
      const __m256d absmask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffLL));
      const __m256d inexact = _mm256_cmp_pd(back, d, _CMP_NEQ_UQ);
      const __m256d below = _mm256_cmp_pd(_mm256_and_pd(back, absmask), _mm256_and_pd(d, absmask), _CMP_LT_OQ);
      const __m256d step = _mm256_and_pd(inexact, _mm256_blendv_pd(_mm256_set1_pd(-1.0), _mm256_set1_pd(1.0), below));
      __m128i fb = _mm_castps_si128(f);
      const __m128i even = _mm_cmpeq_epi32(_mm_and_si128(fb, _mm_set1_epi32(1)), _mm_setzero_si128());
      fb = _mm_add_epi32(fb, _mm_and_si128(even, _mm256_cvtpd_epi32(step)));
      if (t == DataType::f16) {
        _mm_storel_epi64(reinterpret_cast<__m128i*>(out + 2 * j),
                         _mm_cvtps_ph(_mm_castsi128_ps(fb), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      } else {  // bf16: nearest-even on the top 16 bits (no NaN here)
        const __m128i r = _mm_srli_epi32(
            _mm_add_epi32(_mm_add_epi32(fb, _mm_set1_epi32(0x7fff)), _mm_and_si128(_mm_srli_epi32(fb, 16), _mm_set1_epi32(1))), 16);
        _mm_storel_epi64(reinterpret_cast<__m128i*>(out + 2 * j), _mm_packus_epi32(r, r));
      }
    }
    if (end > vec_end) decode_generic(t, limbs + 2 * vec_end, end - vec_end, elem0 + vec_end, exps, nranks, out + vec_end * esz);
  });
}

}  // namespace inc::numerics::repro::detail
