// AES-256-GMAC with AES-NI and PCLMULQDQ on 128-bit registers (compiled with -maes -mpclmul
// -mssse3; called only when the CPU has them), Karatsuba, 8 blocks per reduction; also the key
// set-up and the batched AES of J0 all x86 implementations share. The arithmetic: gmac_x86_inl.hpp.
#include "src/proto/gmac_x86_inl.hpp"

namespace inc::proto::gmac::x86 {
namespace {

// One step of the AES-256 key expansion (FIPS 197, 5.2): the next round key from the one two
// rounds back (`a`) and the word produced by aeskeygenassist, broadcast: each word of the
// result is the XOR of that word and all below it in `a`, and of the assist word.
inline __m128i expand_step(__m128i a, __m128i assist) {
  __m128i s = _mm_slli_si128(a, 4);
  a = _mm_xor_si128(a, s);
  s = _mm_slli_si128(s, 4);
  a = _mm_xor_si128(a, s);
  s = _mm_slli_si128(s, 4);
  return _mm_xor_si128(_mm_xor_si128(a, s), assist);
}

template <int Rcon>
inline void expand_pair(__m128i& a, __m128i& b, __m128i* out, bool last) {
  a = expand_step(a, _mm_shuffle_epi32(_mm_aeskeygenassist_si128(b, Rcon), 0xff));  // RotWord+SubWord+Rcon
  out[0] = a;
  if (last) return;
  b = expand_step(b, _mm_shuffle_epi32(_mm_aeskeygenassist_si128(a, 0), 0xaa));  // SubWord only
  out[1] = b;
}

// b * x mod P* (the key's extra factor x; see gmac_x86_inl.hpp), without a key-dependent branch.
inline __m128i mul_x(__m128i b) {
  std::uint64_t w[2];
  std::memcpy(w, &b, 16);
  const std::uint64_t carry = 0 - (w[1] >> 63);
  const std::uint64_t hi = (w[1] << 1) | (w[0] >> 63);
  const std::uint64_t lo = w[0] << 1;
  return _mm_set_epi64x(static_cast<long long>(hi ^ (carry & kFold)), static_cast<long long>(lo ^ (carry & 1)));
}

inline __m128i gf_mul(__m128i a, __m128i b) {
  __m128i lo = _mm_setzero_si128(), mi = lo, hi = lo;
  mul_add128(a, b, lo, mi, hi);
  return reduce128(lo, mi, hi);
}

// a*b, Karatsuba: three carry-less multiplications instead of mul_add128's four; the middle
// product from (a_hi + a_lo)(b_hi + b_lo) (`k`: b's halves added, Tables::karatsuba), LO and HI
// taken out of it once per reduction (the sums are linear).
inline void mul_add128k(__m128i a, __m128i b, __m128i k, __m128i& lo, __m128i& mi, __m128i& hi) {
  lo = _mm_xor_si128(lo, _mm_clmulepi64_si128(a, b, 0x00));
  hi = _mm_xor_si128(hi, _mm_clmulepi64_si128(a, b, 0x11));
  mi = _mm_xor_si128(mi, _mm_clmulepi64_si128(_mm_xor_si128(a, _mm_shuffle_epi32(a, 0x4e)), k, 0x00));
}

// Up to 8 whole blocks at x with H^m..H^1 (powers[32-m ..]), one reduction.
template <std::size_t M>
inline void absorb_up_to_8(const Tables& t, __m128i& y, const __m128i* x, std::size_t m) {
  const __m128i* h = reinterpret_cast<const __m128i*>(t.powers) + 32 - (M ? M : m);
  const __m128i* kh = reinterpret_cast<const __m128i*>(t.karatsuba) + 32 - (M ? M : m);
  __m128i lo = _mm_setzero_si128(), mi = lo, hi = lo;
  for (std::size_t k = 1; k < (M ? M : m); ++k)
    mul_add128k(bswap128(_mm_loadu_si128(x + k)), _mm_load_si128(h + k), _mm_load_si128(kh + k), lo, mi, hi);
  mul_add128k(_mm_xor_si128(y, bswap128(_mm_loadu_si128(x))), _mm_load_si128(h), _mm_load_si128(kh), lo, mi, hi);
  y = reduce128(lo, _mm_xor_si128(mi, _mm_xor_si128(lo, hi)), hi);
}

// y += `len` bytes at p (whole blocks), 8 blocks per reduction.
inline void absorb128(const Tables& t, __m128i& y, const std::uint8_t* p, std::size_t len) {
  const auto* x = reinterpret_cast<const __m128i*>(p);
  for (; len >= 128; len -= 128, x += 8) absorb_up_to_8<8>(t, y, x, 8);
  if (len > 0) absorb_up_to_8<0>(t, y, x, len / 16);
}

}  // namespace

void clmul_setup(const std::uint8_t* key, Tables& t) {
  auto* rk = reinterpret_cast<__m128i*>(t.round_keys);
  __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(key));
  __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(key + 16));
  rk[0] = a;
  rk[1] = b;
  expand_pair<0x01>(a, b, rk + 2, false);
  expand_pair<0x02>(a, b, rk + 4, false);
  expand_pair<0x04>(a, b, rk + 6, false);
  expand_pair<0x08>(a, b, rk + 8, false);
  expand_pair<0x10>(a, b, rk + 10, false);
  expand_pair<0x20>(a, b, rk + 12, false);
  expand_pair<0x40>(a, b, rk + 14, true);

  auto* pw = reinterpret_cast<__m128i*>(t.powers);
  const __m128i h1 = mul_x(bswap128(aes256_encrypt(t, _mm_setzero_si128())));
  __m128i h = h1;
  pw[31] = h1;  // powers[i] = H^(32-i)
  for (int k = 2; k <= 32; ++k) {
    h = gf_mul(h, h1);
    pw[32 - k] = h;
  }
  for (int i = 32; i < 36; ++i) pw[i] = _mm_setzero_si128();
  auto* kw = reinterpret_cast<__m128i*>(t.karatsuba);
  for (int i = 0; i < 36; ++i) kw[i] = _mm_xor_si128(pw[i], _mm_shuffle_epi32(pw[i], 0x4e));
}

void clmul_tag(const Tables& t, const Part* parts, std::size_t nparts, const std::uint8_t* iv,
               const std::uint8_t* pad, std::uint8_t* out) {
  tag_of_parts(
      t, [&t](__m128i& y, const std::uint8_t* p, std::size_t len) { absorb128(t, y, p, len); }, parts, nparts, iv,
      pad, out);
}

void aes_pads(const Tables& t, const std::uint8_t* ivs, std::size_t n, std::uint8_t* out) {
  // kPadBatch independent blocks round by round: each round's AESENC of one block waits for the
  // previous round of the same block only, so the 8 chains fill the AES units' pipelines.
  constexpr std::size_t B = Gmac::kPadBatch;
  const auto* rk = reinterpret_cast<const __m128i*>(t.round_keys);
  if (n == 0) return;
  if (n > B) n = B;
  __m128i x[B];
  const __m128i k0 = _mm_load_si128(rk);
  // Blocks past n encrypt the last IV again (never stored).
  for (std::size_t i = 0; i < B; ++i) x[i] = _mm_xor_si128(j0_of(ivs + kIvBytes * (i < n ? i : n - 1)), k0);
  for (int r = 1; r < 14; ++r) {
    const __m128i k = _mm_load_si128(rk + r);
    for (std::size_t i = 0; i < B; ++i) x[i] = _mm_aesenc_si128(x[i], k);
  }
  const __m128i kl = _mm_load_si128(rk + 14);
  for (std::size_t i = 0; i < n; ++i)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 16 * i), _mm_aesenclast_si128(x[i], kl));
}

}  // namespace inc::proto::gmac::x86
