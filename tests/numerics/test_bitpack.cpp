// Bit packing of element codes (src/numerics/bitpack.hpp), every compiled variant against a
// reference written here bit by bit (code i's bit k is bit i * bits + k of the packed bytes):
// every pair of neighbouring codes (all 8-bit values, so the bits above the width are ignored)
// and every pair of neighbouring packed bytes at every offset in a group of 32 codes, random
// buffers of every length 0-300 and some longer ones, unaligned pointers; nothing is written
// beyond the packed bytes (guards), and unpack gives the codes with their top bits zero.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "numerics/bitpack.hpp"
#include "numerics/kernel_isa.hpp"
#include "tests/numerics/kernel_isas.hpp"

namespace inc::numerics {
namespace {

using detail::KernelIsa;

std::vector<KernelIsa> isas() { return testing::available_isas(); }

std::size_t packed_bytes(unsigned bits, std::size_t n) { return (n * bits + 7) / 8; }

std::vector<std::uint8_t> ref_pack(unsigned bits, const std::vector<std::uint8_t>& codes) {
  std::vector<std::uint8_t> out(packed_bytes(bits, codes.size()), 0);
  for (std::size_t i = 0; i < codes.size(); ++i)
    for (unsigned k = 0; k < bits; ++k)
      if (codes[i] >> k & 1u) out[(i * bits + k) / 8] |= static_cast<std::uint8_t>(1u << ((i * bits + k) % 8));
  return out;
}

std::vector<std::uint8_t> ref_unpack(unsigned bits, const std::vector<std::uint8_t>& in, std::size_t n) {
  std::vector<std::uint8_t> codes(n, 0);
  for (std::size_t i = 0; i < n; ++i)
    for (unsigned k = 0; k < bits; ++k)
      if (in[(i * bits + k) / 8] >> ((i * bits + k) % 8) & 1u) codes[i] |= static_cast<std::uint8_t>(1u << k);
  return codes;
}

constexpr std::uint8_t kGuard = 0xa5;

bool same(const std::uint8_t* a, const std::uint8_t* b, std::size_t n) { return n == 0 || std::memcmp(a, b, n) == 0; }

// Packs and unpacks `codes` with every variant at pointer offset `skew`, against the reference.
void check(unsigned bits, const std::vector<std::uint8_t>& codes, std::size_t skew, const char* what) {
  const std::size_t n = codes.size(), nb = packed_bytes(bits, n);
  const auto want = ref_pack(bits, codes);
  for (KernelIsa isa : isas()) {
    SCOPED_TRACE(std::string(what) + " bits=" + std::to_string(bits) + " n=" + std::to_string(n) + " " +
                 std::string(detail::name(isa)));
    std::vector<std::uint8_t> src(n + skew), out(nb + skew + 16, kGuard);
    if (n) std::memcpy(src.data() + skew, codes.data(), n);
    std::uint8_t* end = detail::pack_codes_with(isa, bits, src.data() + skew, n, out.data() + skew);
    ASSERT_EQ(end, out.data() + skew + nb);
    ASSERT_TRUE(same(out.data() + skew, want.data(), nb));
    for (std::size_t i = skew + nb; i < out.size(); ++i) ASSERT_EQ(out[i], kGuard) << "written past the end at " << i;
    std::vector<std::uint8_t> back(n + skew + 16, kGuard);
    detail::unpack_codes_with(isa, bits, out.data() + skew, n, back.data() + skew);
    const auto want_codes = ref_unpack(bits, want, n);
    ASSERT_TRUE(same(back.data() + skew, want_codes.data(), n));
    for (std::size_t i = skew + n; i < back.size(); ++i) ASSERT_EQ(back[i], kGuard) << "written past the end at " << i;
  }
}

// Unpacks arbitrary bytes (every bit pattern a wire may carry) against the reference.
void check_unpack(unsigned bits, const std::vector<std::uint8_t>& in, std::size_t n, const char* what) {
  const auto want = ref_unpack(bits, in, n);
  for (KernelIsa isa : isas()) {
    std::vector<std::uint8_t> got(n + 16, kGuard);
    detail::unpack_codes_with(isa, bits, in.data(), n, got.data());
    ASSERT_TRUE(same(got.data(), want.data(), n)) << what << " bits=" << bits << " " << detail::name(isa);
    for (std::size_t i = n; i < got.size(); ++i) ASSERT_EQ(got[i], kGuard);
  }
}

TEST(BitPack, EveryPairOfNeighbouringCodesAtEveryOffset) {
  std::mt19937_64 rng(11);
  for (unsigned bits : {4u, 6u, 8u}) {
    // codes[s + 2m], codes[s + 2m + 1] = every pair of 8-bit values; s shifts the pairs through
    // every position of a group of 32 codes (and the dword of four 6-bit codes).
    for (std::size_t s = 0; s < 32; ++s) {
      std::vector<std::uint8_t> codes(s + 2 * 65536 + 5);
      for (auto& c : codes) c = static_cast<std::uint8_t>(rng());
      for (std::size_t m = 0; m < 65536; ++m) {
        codes[s + 2 * m] = static_cast<std::uint8_t>(m >> 8);
        codes[s + 2 * m + 1] = static_cast<std::uint8_t>(m);
      }
      check(bits, codes, s % 3, "pairs");
    }
  }
}

TEST(BitPack, EveryPairOfNeighbouringPackedBytesAtEveryOffset) {
  std::mt19937_64 rng(12);
  for (unsigned bits : {4u, 6u}) {
    for (std::size_t s = 0; s < 24; ++s) {  // 24 bytes: one group of 32 six-bit codes
      std::vector<std::uint8_t> in(s + 2 * 65536 + 8);
      for (auto& b : in) b = static_cast<std::uint8_t>(rng());
      for (std::size_t m = 0; m < 65536; ++m) {
        in[s + 2 * m] = static_cast<std::uint8_t>(m >> 8);
        in[s + 2 * m + 1] = static_cast<std::uint8_t>(m);
      }
      check_unpack(bits, in, in.size() * 8 / bits, "byte pairs");
    }
  }
}

TEST(BitPack, RandomCodesOfEveryLengthAndAlignment) {
  std::mt19937_64 rng(13);
  std::vector<std::size_t> lengths;
  for (std::size_t n = 0; n <= 300; ++n) lengths.push_back(n);
  for (std::size_t n : {511u, 1024u, 4096u + 17u, 32768u + 31u}) lengths.push_back(n);
  for (unsigned bits : {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u})
    for (std::size_t n : lengths) {
      std::vector<std::uint8_t> codes(n);
      for (auto& c : codes) c = static_cast<std::uint8_t>(rng());
      check(bits, codes, n % 5, "random");
    }
}

}  // namespace
}  // namespace inc::numerics
