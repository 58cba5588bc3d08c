// The reduction kernels compiled with -march=x86-64-v3 (AVX2 + F16C); reduce() calls them
// only on CPUs that have these extensions (see kernel_isa.hpp). Everything in kernels.hpp has
// internal linkage, so nothing compiled here can be linked into baseline code by accident.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "numerics/kernels.hpp"
#include "numerics/kernels_counted.hpp"

#if !defined(__F16C__) || !defined(__AVX2__)
#error "reduce_x86_64_v3.cpp must be compiled with -march=x86-64-v3"
#endif

namespace inc::numerics {
namespace {

// f16 sum/prod through the F16C conversions, 8 elements per step. GCC 12 does not vectorise
// _Float16 <-> float conversions by itself (it needs AVX512-FP16 for that), so this one loop
// uses the intrinsics; the arithmetic is still the shared Op on a vector of 8 floats.
// vcvtph2ps is exact and quietens NaNs keeping the payload; vcvtps2ph rounds to nearest-even
// (explicit immediate, independent of MXCSR) with the same NaN rule: bit-identical to
// f16_to_f32/f32_to_f16, which the tests check against the same reference.
template <class Op>
void combine_f16c(void* dst, const void* a, const void* b, std::size_t n) noexcept {
  auto* d = static_cast<std::uint16_t*>(dst);
  const auto* x = static_cast<const std::uint16_t*>(a);
  const auto* y = static_cast<const std::uint16_t*>(b);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 vx = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    const __m256 vy = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y + i)));
    const __m256 r = Op::apply(vx, vy);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; i < n; ++i) {
    const float r = Op::apply(_cvtsh_ss(x[i]), _cvtsh_ss(y[i]));
    d[i] = static_cast<std::uint16_t>(_cvtss_sh(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
}

// f16 sum and its events (events.hpp) in one loop, 32 elements per block: the screen is the
// rounded results' |h| >= 0x7c00 (infinity or NaN: every event gives one, and so does an inf or
// NaN operand, which makes the sum non-finite), tested once per block before the block is
// stored; a tripped block is counted exactly from its operands (events.cpp's predicate).
std::uint64_t sum_counted_f16c(void* dst, const void* a, const void* b, std::size_t n) noexcept {
  auto* d = static_cast<std::uint16_t*>(dst);
  const auto* x = static_cast<const std::uint16_t*>(a);
  const auto* y = static_cast<const std::uint16_t*>(b);
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  const __m128i abs = _mm_set1_epi16(0x7fff), exp_low = _mm_set1_epi16(0x0400);
  const __m128i sign = _mm_set1_epi16(static_cast<short>(0x8000));
  auto event = [](std::uint16_t u, std::uint16_t v) noexcept -> unsigned {
    const auto r = static_cast<std::uint16_t>(_cvtss_sh(_cvtsh_ss(u) + _cvtsh_ss(v), kRound));
    return ((u & 0x7fffu) < 0x7c00u) & ((v & 0x7fffu) < 0x7c00u) & ((r & 0x7fffu) >= 0x7c00u);
  };
  std::uint64_t ev = 0;
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m128i r[4];
    __m128i s = _mm_setzero_si128();
    for (int k = 0; k < 4; ++k) {
      const __m256 vx = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i + 8 * k)));
      const __m256 vy = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y + i + 8 * k)));
      r[k] = _mm256_cvtps_ph(_mm256_add_ps(vx, vy), kRound);
      s = _mm_or_si128(s, _mm_add_epi16(_mm_and_si128(r[k], abs), exp_low));  // sign: |h| >= 0x7c00
    }
    if (__builtin_expect(!_mm_testz_si128(s, sign), 0))
      for (std::size_t k = i; k < i + 32; ++k) ev += event(x[k], y[k]);
    for (int k = 0; k < 4; ++k) _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i + 8 * k), r[k]);
  }
  for (; i < n; ++i) {
    const std::uint16_t u = x[i], v = y[i];
    ev += event(u, v);
    d[i] = static_cast<std::uint16_t>(_cvtss_sh(_cvtsh_ss(u) + _cvtsh_ss(v), kRound));
  }
  return ev;
}

// Same for divide: x / d in f32, rounded once.
void divide_f16c(void* buf, std::size_t n, float d) noexcept {
  auto* p = static_cast<std::uint16_t*>(buf);
  const __m256 vd = _mm256_set1_ps(d);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p + i),
                     _mm256_cvtps_ph(_mm256_div_ps(v, vd),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; i < n; ++i)
    p[i] = static_cast<std::uint16_t>(
        _cvtss_sh(_cvtsh_ss(p[i]) / d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// The lane tests of the fused counted sums (kernels_counted.hpp): vptest; vpmovmskb + popcnt
// (the top bit of every byte, kept for the bytes holding a lane's sign bit).
struct AnyLanesAvx2 {
  template <std::size_t kBytes>
  [[gnu::always_inline]] static bool any(const kern::Mask256& v) noexcept {
    return !_mm256_testz_si256(__builtin_bit_cast(__m256i, v),
                               _mm256_set1_epi64x(static_cast<long long>(kern::kSignBits<kBytes>)));
  }
  template <std::size_t kBytes>
  [[gnu::always_inline]] static unsigned count(const kern::Mask256& v) noexcept {
    constexpr unsigned kSignBytes = kBytes == 1 ? 0xffffffffu : kBytes == 4 ? 0x88888888u : 0x80808080u;
    const auto m = static_cast<unsigned>(_mm256_movemask_epi8(__builtin_bit_cast(__m256i, v)));
    return static_cast<unsigned>(__builtin_popcount(m & kSignBytes));
  }
};

}  // namespace

namespace detail {
bool sum_counted_x86_64_v3(DataType t, void* dst, const void* a, const void* b, std::size_t n,
                           std::uint64_t& events) noexcept {
  if (t == DataType::f16) {
    events = sum_counted_f16c(dst, a, b, n);
    return true;
  }
  return kern::sum_counted_all<AnyLanesAvx2>(t, dst, a, b, n, events);
}

void reduce_x86_64_v3(DataType t, ReduceOp op, void* dst, const void* a, const void* b,
                      std::size_t n) noexcept {
  // Everything except f16 sum/prod/avg is the shared code, vectorised here with AVX2.
  if (t == DataType::f16 && n > 0) {
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: return combine_f16c<kern::Sum>(dst, a, b, n);
      case ReduceOp::prod: return combine_f16c<kern::Prod>(dst, a, b, n);
      default: break;
    }
  }
  kern::reduce_all<kern::F16Soft>(t, op, dst, a, b, n);
}

void divide_x86_64_v3(DataType t, void* buf, std::size_t count, std::uint64_t n) noexcept {
  if (t == DataType::f16) return divide_f16c(buf, count, static_cast<float>(n));
  kern::divide_all<kern::F16Soft>(t, buf, count, n);
}
}  // namespace detail

}  // namespace inc::numerics
