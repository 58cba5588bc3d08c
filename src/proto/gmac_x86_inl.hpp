// Internal to gmac_clmul.cpp and gmac_avx512.cpp (both compiled with at least AES-NI, PCLMULQDQ
// and SSSE3): the GHASH arithmetic they share. Everything here has internal linkage, so each
// file gets its own copy compiled with its own flags.
//
// GHASH (NIST SP 800-38D) multiplies in GF(2^128) with the coefficients of each 16-byte block
// in reflected bit order. We byte-swap each block, so that a block is a 128-bit polynomial whose
// bit i holds the coefficient of x^(127-i), and work modulo the reciprocal polynomial
// P* = x^128 + x^127 + x^126 + x^121 + 1. In that form the GCM product of A and B is
// rev(A) * rev(B) * x^-127 mod P*. A carry-less 128x128 multiplication gives the 256-bit
// product LO + x^64 MI + x^128 HI; two Montgomery folds of 64 bits each (a 64-bit word w at the
// bottom equals w * (x^63 + x^62 + x^57) * x^64 + w * x^128 mod P*, i.e. one carry-less
// multiplication by 0xc200000000000000 and a swap of halves) divide it by x^128. The missing
// factor x is folded into the key once: the tables hold H^k * x, so that a multiplication by a
// table entry is exactly the GCM multiplication by H^k.
//
// Because the fold is linear, the products of many blocks by their powers of H are summed
// unreduced and reduced once (aggregated reduction): for blocks X1..Xm after state Y,
//   Y' = (Y + X1) H^m + X2 H^(m-1) + ... + Xm H.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "src/proto/gmac_x86.hpp"

namespace inc::proto::gmac::x86 {
namespace {

// The low 64 bits of P* minus its x^128 term, shifted down by 64: x^63 + x^62 + x^57.
constexpr std::uint64_t kFold = 0xc200000000000000ull;

inline __m128i bswap128(__m128i x) {
  return _mm_shuffle_epi8(x, _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
}

// 256-bit product a*b as LO, MI (at x^64), HI (at x^128), added to the running sums.
inline void mul_add128(__m128i a, __m128i b, __m128i& lo, __m128i& mi, __m128i& hi) {
  lo = _mm_xor_si128(lo, _mm_clmulepi64_si128(a, b, 0x00));
  mi = _mm_xor_si128(mi, _mm_xor_si128(_mm_clmulepi64_si128(a, b, 0x01), _mm_clmulepi64_si128(a, b, 0x10)));
  hi = _mm_xor_si128(hi, _mm_clmulepi64_si128(a, b, 0x11));
}

// (LO + x^64 MI + x^128 HI) * x^-128 mod P*.
inline __m128i reduce128(__m128i lo, __m128i mi, __m128i hi) {
  const __m128i c = _mm_set_epi64x(0, static_cast<long long>(kFold));
  mi = _mm_xor_si128(mi, _mm_xor_si128(_mm_clmulepi64_si128(lo, c, 0x00), _mm_shuffle_epi32(lo, 0x4e)));
  return _mm_xor_si128(hi, _mm_xor_si128(_mm_clmulepi64_si128(mi, c, 0x00), _mm_shuffle_epi32(mi, 0x4e)));
}

// J0 = iv || 0x00000001 built in a register (byte 15 = 1 is bit 56 of the high half): a block
// written byte-wise to memory and loaded back would wait for its stores to retire.
inline __m128i j0_of(const std::uint8_t* iv) {
  std::uint64_t lo;
  std::uint32_t hi;
  std::memcpy(&lo, iv, 8);
  std::memcpy(&hi, iv + 8, 4);
  return _mm_set_epi64x(static_cast<long long>((1ull << 56) | hi), static_cast<long long>(lo));
}

inline __m128i aes256_encrypt(const Tables& t, __m128i x) {
  const auto* rk = reinterpret_cast<const __m128i*>(t.round_keys);
  x = _mm_xor_si128(x, _mm_loadu_si128(rk));
  for (int i = 1; i < 14; ++i) x = _mm_aesenc_si128(x, _mm_loadu_si128(rk + i));
  return _mm_aesenclast_si128(x, _mm_loadu_si128(rk + 14));
}

// GHASH of the concatenation of `parts`, zero-padded, then the length block (bit length of the
// additional data, 64 bits big-endian, and 0 for the empty ciphertext); the tag is its
// byte-swapped value XOR AES(J0), J0 = iv || 0x00000001 (the pad). absorb(y, p, len) adds `len` bytes (whole
// blocks) to state y, one reduction per 512 bytes or less. Each reduction waits for the previous
// one, so pieces are gathered into 512-byte strides: whole strides are hashed where they lie,
// everything else is copied into `stage` (a packet's header, the start of its payload, its tail
// with the length block: at most two copies of under 512 bytes).
template <class Absorb>
inline void tag_of_parts(const Tables& t, Absorb absorb, const Part* parts, std::size_t nparts,
                         const std::uint8_t* iv, const std::uint8_t* pad, std::uint8_t* out) {
  // AES(J0) first unless precomputed (`pad`): independent of the hash, it runs in the shadow of
  // the first blocks.
  const __m128i e = pad ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(pad)) : aes256_encrypt(t, j0_of(iv));
  constexpr std::size_t kStride = 512;
  __m128i y = _mm_setzero_si128();
  alignas(64) std::uint8_t stage[kStride + 32];
  std::size_t staged = 0;
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < nparts; ++i) {
    const std::uint8_t* p = parts[i].data;
    std::size_t n = parts[i].size;
    total += n;
    while (n > 0) {
      if (staged == 0 && n >= kStride) {
        const std::size_t whole = n & ~(kStride - 1);
        absorb(y, p, whole);
        p += whole;
        n -= whole;
        continue;
      }
      const std::size_t take = n < kStride - staged ? n : kStride - staged;
      std::memcpy(stage + staged, p, take);
      staged += take;
      p += take;
      n -= take;
      if (staged == kStride) {
        absorb(y, stage, kStride);
        staged = 0;
      }
    }
  }
  // The last block zero-padded, then the length block.
  const std::size_t padded = (staged + 15) & ~std::size_t(15);
  std::memset(stage + staged, 0, padded - staged);
  const std::uint64_t bits = total * 8;
  for (int i = 0; i < 8; ++i) stage[padded + std::size_t(i)] = std::uint8_t(bits >> (56 - 8 * i));
  std::memset(stage + padded + 8, 0, 8);
  absorb(y, stage, padded + 16);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_xor_si128(bswap128(y), e));
}

}  // namespace
}  // namespace inc::proto::gmac::x86
