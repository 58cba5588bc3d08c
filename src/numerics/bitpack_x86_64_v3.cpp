// The AVX2 steps of bitpack.hpp, compiled with -march=x86-64-v3; bitpack.cpp calls them only on
// CPUs that have it. 32 codes per step, reading and writing exactly their bytes (no overread:
// the wire's blocks lie back to back).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "numerics/bitpack.hpp"

#if !defined(__AVX2__)
#error "bitpack_x86_64_v3.cpp must be compiled with -march=x86-64-v3"
#endif

namespace inc::numerics::detail {

namespace {

// 32 codes -> 16 bytes: byte j = code 2j | code 2j+1 << 4 (vpmaddubsw: c0 * 1 + c1 * 16).
inline void pack4(const std::uint8_t* codes, std::uint8_t* out) noexcept {
  const __m256i c = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes)), _mm256_set1_epi8(0x0f));
  const __m256i w = _mm256_maddubs_epi16(c, _mm256_set1_epi16(0x1001));  // 16 words <= 0xff
  const __m256i b = _mm256_permute4x64_epi64(_mm256_packus_epi16(w, w), 0x08);  // the halves' 8 bytes together
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_castsi256_si128(b));
}

// 16 bytes -> 32 codes: the low and high nibbles interleaved.
inline void unpack4(const std::uint8_t* in, std::uint8_t* codes) noexcept {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in));
  const __m128i m = _mm_set1_epi8(0x0f);
  const __m128i lo = _mm_and_si128(b, m), hi = _mm_and_si128(_mm_srli_epi16(b, 4), m);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(codes), _mm_unpacklo_epi8(lo, hi));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + 16), _mm_unpackhi_epi8(lo, hi));
}

// 32 codes -> 24 bytes: per dword c0 | c1 << 6 | c2 << 12 | c3 << 18 (vpmaddubsw, then vpmaddwd
// by 1 and 4096), its three low bytes gathered per half (vpshufb), the halves' 12 bytes joined.
inline void pack6(const std::uint8_t* codes, std::uint8_t* out) noexcept {
  const __m256i c = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes)), _mm256_set1_epi8(0x3f));
  const __m256i w = _mm256_madd_epi16(_mm256_maddubs_epi16(c, _mm256_set1_epi16(0x4001)), _mm256_set1_epi32(0x10000001));
  const __m256i gather = _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1,
                                          0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
  const __m256i b = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(w, gather), _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 7, 7));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_castsi256_si128(b));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(out + 16), _mm256_extracti128_si256(b, 1));
}

// 24 bytes -> 32 codes: bytes 0-11 in the low half, 12-23 in the high one (loaded from 8, so
// nothing past the 24 bytes is read), three bytes per dword, each code moved to its own byte.
inline void unpack6(const std::uint8_t* in, std::uint8_t* codes) noexcept {
  const __m256i v = _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 8)),
                                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(in)));
  const __m256i spread = _mm256_setr_epi8(0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1,
                                          4, 5, 6, -1, 7, 8, 9, -1, 10, 11, 12, -1, 13, 14, 15, -1);
  const __m256i w = _mm256_shuffle_epi8(v, spread);  // per dword: the 24 bits of four codes
  __m256i c = _mm256_and_si256(w, _mm256_set1_epi32(0x3f));
  c = _mm256_or_si256(c, _mm256_and_si256(_mm256_slli_epi32(w, 2), _mm256_set1_epi32(0x3f00)));
  c = _mm256_or_si256(c, _mm256_and_si256(_mm256_slli_epi32(w, 4), _mm256_set1_epi32(0x3f0000)));
  c = _mm256_or_si256(c, _mm256_and_si256(_mm256_slli_epi32(w, 6), _mm256_set1_epi32(0x3f000000)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes), c);
}

}  // namespace

std::size_t pack_codes_x86_64_v3(unsigned bits, const std::uint8_t* codes, std::size_t n, std::uint8_t* out) noexcept {
  if (bits != 4 && bits != 6) return 0;
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32, out += 4 * bits) {
    if (bits == 4) pack4(codes + i, out);
    else pack6(codes + i, out);
  }
  return i;
}

std::size_t unpack_codes_x86_64_v3(unsigned bits, const std::uint8_t* in, std::size_t n, std::uint8_t* codes) noexcept {
  if (bits != 4 && bits != 6) return 0;
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32, in += 4 * bits) {
    if (bits == 4) unpack4(in, codes + i);
    else unpack6(in, codes + i);
  }
  return i;
}

}  // namespace inc::numerics::detail
