// AES-256-GMAC with VPCLMULQDQ on 256-bit registers (AVX2): two blocks per carry-less
// multiplication, Karatsuba (three multiplications per block pair instead of four: the middle
// product from (a_hi + a_lo)(b_hi + b_lo), the keys' halves pre-added in Tables::karatsuba),
// 32 blocks (512 bytes) per reduction, and the two lanes added before the one reduction. For CPUs
// with VPCLMULQDQ but without AVX-512 (AMD Zen 3, Intel Alder Lake and later cores), where the
// 128-bit path runs one block per instruction. Compiled with AVX2, VPCLMULQDQ, PCLMULQDQ,
// AES-NI; called only when the CPU has them. The arithmetic: gmac_x86_inl.hpp; the tables come
// from clmul_setup.
#include "src/proto/gmac_x86_inl.hpp"

namespace inc::proto::gmac::x86 {
namespace {

inline __m256i bswap256(__m256i x) {
  return _mm256_shuffle_epi8(
      x, _mm256_broadcastsi128_si256(_mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)));
}

// a*b for two blocks, Karatsuba: LO, HI and the middle product before LO and HI are taken out
// of it (that happens once, in reduce256: the sums are linear). `k` holds b_hi + b_lo in both
// halves of each lane.
inline void mul_add256(__m256i a, __m256i b, __m256i k, __m256i& lo, __m256i& mi, __m256i& hi) {
  lo = _mm256_xor_si256(lo, _mm256_clmulepi64_epi128(a, b, 0x00));
  hi = _mm256_xor_si256(hi, _mm256_clmulepi64_epi128(a, b, 0x11));
  const __m256i as = _mm256_xor_si256(a, _mm256_shuffle_epi32(a, 0x4e));  // a_hi + a_lo
  mi = _mm256_xor_si256(mi, _mm256_clmulepi64_epi128(as, k, 0x00));
}

// Adds the two lanes, takes LO and HI out of the Karatsuba middle term, reduces once.
inline __m128i reduce256(__m256i lo, __m256i mi, __m256i hi) {
  const __m128i l = _mm_xor_si128(_mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1));
  const __m128i h = _mm_xor_si128(_mm256_castsi256_si128(hi), _mm256_extracti128_si256(hi, 1));
  __m128i m = _mm_xor_si128(_mm256_castsi256_si128(mi), _mm256_extracti128_si256(mi, 1));
  m = _mm_xor_si128(m, _mm_xor_si128(l, h));
  return reduce128(l, m, h);
}

// y += `len` bytes at p (whole blocks).
inline void absorb256(const Tables& t, __m128i& y, const std::uint8_t* p, std::size_t len) {
  const std::uint8_t* pw = &t.powers[0][0];
  const std::uint8_t* kw = &t.karatsuba[0][0];
  while (len >= 512) {
    __m256i lo = _mm256_setzero_si256(), mi = lo, hi = lo;
    // The blocks that do not wait for y first, so that they overlap the previous reduction.
    for (int k = 1; k < 16; ++k)
      mul_add256(bswap256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * k))),
                 _mm256_load_si256(reinterpret_cast<const __m256i*>(pw + 32 * k)),
                 _mm256_load_si256(reinterpret_cast<const __m256i*>(kw + 32 * k)), lo, mi, hi);
    mul_add256(_mm256_xor_si256(bswap256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))),
                                _mm256_zextsi128_si256(y)),
               _mm256_load_si256(reinterpret_cast<const __m256i*>(pw)),
               _mm256_load_si256(reinterpret_cast<const __m256i*>(kw)), lo, mi, hi);
    y = reduce256(lo, mi, hi);
    p += 512;
    len -= 512;
  }
  if (len == 0) return;
  // 1..31 blocks get H^m..H^1: powers[32-m ..]; an odd last block is loaded alone, against
  // H^1 and the zero entry after it.
  const std::size_t m = len / 16;
  const std::uint8_t* base = pw + 16 * (32 - m);
  const std::uint8_t* kbase = kw + 16 * (32 - m);
  __m256i lo = _mm256_setzero_si256(), mi = lo, hi = lo;
  std::size_t off = 0;
  for (; off + 32 <= len; off += 32) {
    __m256i x = bswap256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + off)));
    if (off == 0) x = _mm256_xor_si256(x, _mm256_zextsi128_si256(y));
    mul_add256(x, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + off)),
               _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kbase + off)), lo, mi, hi);
  }
  if (off < len) {
    __m128i x = bswap128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + off)));
    if (off == 0) x = _mm_xor_si128(x, y);
    mul_add256(_mm256_zextsi128_si256(x), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + off)),
               _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kbase + off)), lo, mi, hi);
  }
  y = reduce256(lo, mi, hi);
}

}  // namespace

void avx2_tag(const Tables& t, const Part* parts, std::size_t nparts, const std::uint8_t* iv,
              const std::uint8_t* pad, std::uint8_t* out) {
  tag_of_parts(
      t, [&t](__m128i& y, const std::uint8_t* p, std::size_t len) { absorb256(t, y, p, len); }, parts, nparts, iv,
      pad, out);
}

}  // namespace inc::proto::gmac::x86
