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

// One group of 32 blocks (512 bytes at p, whole) with H^32..H^1, y added to its first block,
// one reduction. The blocks that do not wait for y first, so that they overlap the previous
// reduction. The table pointers pass through an empty asm statement: otherwise the compiler
// hoists all 32 table loads out of the caller's loop and, short of registers, spills them to
// the stack on every call; as memory operands of the multiplications they cost nothing.
inline void stride32(const Tables& t, __m128i& y, const std::uint8_t* p) {
  const std::uint8_t* pw = &t.powers[0][0];
  const std::uint8_t* kw = &t.karatsuba[0][0];
  asm("" : "+r"(pw), "+r"(kw));
  __m256i lo = _mm256_setzero_si256(), mi = lo, hi = lo;
  for (int k = 1; k < 16; ++k) {
    mul_add256(bswap256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * k))),
               _mm256_load_si256(reinterpret_cast<const __m256i*>(pw + 32 * k)),
               _mm256_load_si256(reinterpret_cast<const __m256i*>(kw + 32 * k)), lo, mi, hi);
    // Keeps the sums in registers as written: else the compiler computes all 48 products
    // first, stores them on the stack and adds them up afterwards.
    asm("" : "+x"(lo), "+x"(mi), "+x"(hi));
  }
  mul_add256(_mm256_xor_si256(bswap256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))),
                              _mm256_zextsi128_si256(y)),
             _mm256_load_si256(reinterpret_cast<const __m256i*>(pw)),
             _mm256_load_si256(reinterpret_cast<const __m256i*>(kw)), lo, mi, hi);
  y = reduce256(lo, mi, hi);
}

// y += `len` bytes at p (whole blocks).
inline void absorb256(const Tables& t, __m128i& y, const std::uint8_t* p, std::size_t len) {
  const std::uint8_t* pw = &t.powers[0][0];
  const std::uint8_t* kw = &t.karatsuba[0][0];
  for (; len >= 512; p += 512, len -= 512) stride32(t, y, p);
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

// ---- without staging ----------------------------------------------------------------------
// A packet's covered bytes are one span (a receiver) or a 32-byte header, a payload and a
// 24-byte trailer part (a sender): every part but the last is then a multiple of 16 bytes, and
// the message is its parts' whole blocks where they lie, the last part's partial block and the
// length block. tag_of_parts (gmac_x86_inl.hpp) copies pieces into a stage buffer instead, and
// the vector loads that read back what byte-wise copies just wrote wait for the stores to
// retire (a failed store-to-load forward each); here the two last blocks are built in registers.

// Whole blocks of one part, in memory.
struct Run {
  const std::uint8_t* p;
  std::size_t blocks;
};
constexpr std::size_t kMaxRuns = 8;

// The last r (1..15) bytes before `end`, zero-padded to a block, loaded as the 16 bytes that end
// there (the part has at least 16) and shifted down: nothing outside the part is read.
inline __m128i tail_block(const std::uint8_t* end, std::size_t r) {
  alignas(16) static constexpr std::uint8_t kShift[32] = {0,    1,    2,    3,    4,    5,    6,    7,
                                                          8,    9,    10,   11,   12,   13,   14,   15,
                                                          0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                                                          0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80};
  // mask[i] = 16 - r + i (the byte r - i before the end) for i < r, else 0x80 (zero).
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(end - 16));
  return _mm_shuffle_epi8(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(kShift + 16 - r)));
}

// GHASH state after `runs` (whole blocks in memory, in order) and then `ne` blocks already
// byte-swapped in registers. Any grouping of the blocks is the same hash (gmac_x86_inl.hpp:
// Y' = (Y + X1) H^m + ... + Xm H for a group of m <= 32); the groups here are whole 512-byte
// strides of one run where the rest allows, else the next min(32, left) blocks, whatever runs
// they span, two blocks per multiplication where both lie in one run.
inline __m128i hash_runs(const Tables& t, const Run* runs, std::size_t nruns, const __m128i* extra, std::size_t ne) {
  std::size_t total = ne;
  for (std::size_t i = 0; i < nruns; ++i) total += runs[i].blocks;
  __m128i y = _mm_setzero_si128();
  std::size_t r = 0, e = 0;
  const std::uint8_t* p = nruns ? runs[0].p : nullptr;
  std::size_t left = nruns ? runs[0].blocks : 0;
  while (total > 0) {
    while (left == 0 && r + 1 < nruns) {
      ++r;
      p = runs[r].p;
      left = runs[r].blocks;
    }
    if (left >= 32) {
      stride32(t, y, p);
      p += 512;
      left -= 32;
      total -= 32;
      continue;
    }
    const std::size_t g = total < 32 ? total : 32;
    const std::uint8_t* base = &t.powers[32 - g][0];
    const std::uint8_t* kbase = &t.karatsuba[32 - g][0];
    __m256i lo = _mm256_setzero_si256(), mi = lo, hi = lo;
    for (std::size_t j = 0; j < g;) {
      while (left == 0 && r + 1 < nruns) {
        ++r;
        p = runs[r].p;
        left = runs[r].blocks;
      }
      __m256i x;
      std::size_t take = 1;
      if (left >= 2 && g - j >= 2) {
        x = bswap256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
        take = 2;
      } else if (left == 1 || (left >= 2 && g - j == 1)) {
        x = _mm256_zextsi128_si256(bswap128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
      } else {
        x = _mm256_zextsi128_si256(extra[e++]);
      }
      if (left > 0) {
        p += 16 * take;
        left -= take;
      }
      if (j == 0) x = _mm256_xor_si256(x, _mm256_zextsi128_si256(y));
      // The odd last block of a group: against H^1 and the zero entry after it.
      mul_add256(x, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + 16 * j)),
                 _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kbase + 16 * j)), lo, mi, hi);
      j += take;
    }
    y = reduce256(lo, mi, hi);
    total -= g;
  }
  return y;
}

// The tag without staging if the parts allow it (see above); false: they do not.
inline bool tag_unstaged(const Tables& t, const Part* parts, std::size_t nparts, const std::uint8_t* iv,
                         const std::uint8_t* pad, std::uint8_t* out) {
  std::size_t last = nparts;  // the last non-empty part
  while (last > 0 && parts[last - 1].size == 0) --last;
  if (last == 0 || last > kMaxRuns) return false;
  --last;
  Run runs[kMaxRuns];
  std::uint64_t total = 0;
  for (std::size_t i = 0; i <= last; ++i) {
    if (i < last && parts[i].size % 16 != 0) return false;
    runs[i] = {parts[i].data, parts[i].size / 16};
    total += parts[i].size;
  }
  const std::size_t r = parts[last].size % 16;
  if (r != 0 && parts[last].size < 16) return false;
  // AES(J0) first unless precomputed: it runs in the shadow of the hash.
  const __m128i e = pad ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(pad)) : aes256_encrypt(t, j0_of(iv));
  __m128i extra[2];
  std::size_t ne = 0;
  if (r != 0) extra[ne++] = bswap128(tail_block(parts[last].data + parts[last].size, r));
  // The length block (bit length of the data, 64 bits big-endian, then 0), byte-swapped: the
  // bit length in the high half.
  extra[ne++] = _mm_set_epi64x(static_cast<long long>(total * 8), 0);
  const __m128i y = hash_runs(t, runs, last + 1, extra, ne);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_xor_si128(bswap128(y), e));
  return true;
}

}  // namespace

void avx2_tag(const Tables& t, const Part* parts, std::size_t nparts, const std::uint8_t* iv,
              const std::uint8_t* pad, std::uint8_t* out) {
  if (tag_unstaged(t, parts, nparts, iv, pad, out)) return;
  tag_of_parts(
      t, [&t](__m128i& y, const std::uint8_t* p, std::size_t len) { absorb256(t, y, p, len); }, parts, nparts, iv,
      pad, out);
}

}  // namespace inc::proto::gmac::x86
