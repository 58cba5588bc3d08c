// AES-256-GMAC with VPCLMULQDQ on 512-bit registers: four blocks per carry-less multiplication,
// 32 blocks (512 bytes) per reduction, masked loads for the last 1..31 blocks (compiled with AVX-512 F/BW/VL,
// VPCLMULQDQ, PCLMULQDQ, AES-NI; called only when the CPU has them). The arithmetic:
// gmac_x86_inl.hpp; the tables come from clmul_setup.
// GCC 12 reports the deliberately undefined registers of its AVX-512 cast/extract intrinsics
// (_mm256_undefined_pd) as uninitialized once they are inlined here (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "src/proto/gmac_x86_inl.hpp"

namespace inc::proto::gmac::x86 {
namespace {

inline __m512i bswap512(__m512i x) {
  return _mm512_shuffle_epi8(
      x, _mm512_broadcast_i32x4(_mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)));
}

inline void mul_add512(__m512i a, __m512i b, __m512i& lo, __m512i& mi, __m512i& hi) {
  lo = _mm512_xor_si512(lo, _mm512_clmulepi64_epi128(a, b, 0x00));
  mi = _mm512_ternarylogic_epi64(mi, _mm512_clmulepi64_epi128(a, b, 0x01), _mm512_clmulepi64_epi128(a, b, 0x10), 0x96);
  hi = _mm512_xor_si512(hi, _mm512_clmulepi64_epi128(a, b, 0x11));
}

// Reduces the four lanes (the fold is linear, so lane by lane) and adds them up.
inline __m128i reduce512(__m512i lo, __m512i mi, __m512i hi) {
  const __m512i c = _mm512_broadcast_i32x4(_mm_set_epi64x(0, static_cast<long long>(kFold)));
  mi = _mm512_ternarylogic_epi64(mi, _mm512_clmulepi64_epi128(lo, c, 0x00), _mm512_shuffle_epi32(lo, _MM_PERM_BADC),
                                 0x96);
  hi = _mm512_ternarylogic_epi64(hi, _mm512_clmulepi64_epi128(mi, c, 0x00), _mm512_shuffle_epi32(mi, _MM_PERM_BADC),
                                 0x96);
  const __m256i h = _mm256_xor_si256(_mm512_castsi512_si256(hi), _mm512_extracti64x4_epi64(hi, 1));
  return _mm_xor_si128(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

// y += `len` bytes at p (whole blocks).
inline void absorb512(const Tables& t, __m128i& y, const std::uint8_t* p, std::size_t len) {
  const std::uint8_t* pw = &t.powers[0][0];
  if (len >= 512) {
    __m512i h[8];  // H^32..H^1, four per register
    for (int k = 0; k < 8; ++k) h[k] = _mm512_load_si512(pw + 64 * k);
    do {
      __m512i lo = _mm512_setzero_si512(), mi = lo, hi = lo;
      // The blocks that do not wait for y first, so that they overlap the previous reduction.
      for (int k = 1; k < 8; ++k) mul_add512(bswap512(_mm512_loadu_si512(p + 64 * k)), h[k], lo, mi, hi);
      mul_add512(_mm512_xor_si512(bswap512(_mm512_loadu_si512(p)), _mm512_zextsi128_si512(y)), h[0], lo, mi, hi);
      y = reduce512(lo, mi, hi);
      p += 512;
      len -= 512;
    } while (len >= 512);
  }
  if (len == 0) return;
  // 1..32 blocks get H^m..H^1: powers[32-m ..], read past H^1 into the zero entries.
  const std::size_t m = (len + 15) / 16;
  const std::uint8_t* base = pw + 16 * (32 - m);
  __m512i lo = _mm512_setzero_si512(), mi = lo, hi = lo;
  for (std::size_t off = 0; off < len; off += 64) {
    const std::size_t rest = len - off;
    const __mmask64 mask = rest >= 64 ? ~__mmask64(0) : (__mmask64(1) << rest) - 1;
    __m512i x = bswap512(_mm512_maskz_loadu_epi8(mask, p + off));
    if (off == 0) x = _mm512_xor_si512(x, _mm512_zextsi128_si512(y));
    mul_add512(x, _mm512_loadu_si512(base + off), lo, mi, hi);
  }
  y = reduce512(lo, mi, hi);
}

}  // namespace

void avx512_tag(const Tables& t, const Part* parts, std::size_t nparts, const std::uint8_t* iv,
                const std::uint8_t* pad, std::uint8_t* out) {
  tag_of_parts(
      t, [&t](__m128i& y, const std::uint8_t* p, std::size_t len) { absorb512(t, y, p, len); }, parts, nparts, iv,
      pad, out);
}

}  // namespace inc::proto::gmac::x86
