// The reproducible mode's host passes (src/numerics/repro.hpp): the AVX2 variant
// (repro_x86_64_v3.cpp) gives the scalar one's bits on random and edge-case inputs: every
// type, rank counts 1..1024, offsets and lengths that cut blocks and vectors anywhere, blocks of
// zeros, of NaN/inf, values spanning beyond the window, subnormals, overflow to infinity and
// rounding ties. (That the scalar passes give the correctly rounded sum is tested in
// tests/switch/repro_test.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "numerics/kernel_isa.hpp"
#include "numerics/repro.hpp"

namespace inc::numerics::repro {
namespace {

using numerics::detail::kernel_isa_available;

std::vector<unsigned char> values(DataType t, std::size_t n, std::mt19937_64& rng, int kind) {
  const std::size_t esz = size_of(t);
  std::vector<unsigned char> v(n * esz);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t b = static_cast<std::uint32_t>(rng());
    if (kind == 1) b &= 0x80ffffffu | (std::uint32_t(rng() % 40 + 100) << 23);  // narrow exponent range
    if (kind == 2 && rng() % 7 == 0) b = 0;                                       // zeros
    if (kind == 3 && rng() % 97 == 0) b = 0x7f800000u | std::uint32_t(rng() % 2);  // inf / NaN
    if (kind == 4) b &= 0x807fffffu;                                              // subnormals
    if (t == DataType::f32) std::memcpy(v.data() + 4 * i, &b, 4);
    else {
      std::uint16_t h = static_cast<std::uint16_t>(b >> 16);
      if (kind == 4) h &= 0x83ffu;
      if (kind == 3 && rng() % 97 == 0) h = t == DataType::f16 ? 0x7c00 : 0x7f80;
      std::memcpy(v.data() + 2 * i, &h, 2);
    }
  }
  return v;
}

TEST(ReproIsa, ScanEncodeDecodeGiveTheScalarBits) {
  if (!kernel_isa_available(KernelIsa::x86_64_v3)) GTEST_SKIP() << "no AVX2/F16C on this CPU";
  std::mt19937_64 rng(42);
  std::size_t cases = 0;
  for (DataType t : {DataType::f32, DataType::f16, DataType::bf16})
    for (int nranks : {1, 2, 3, 8, 1024})
      for (int kind = 0; kind < 5; ++kind)
        for (int rep = 0; rep < 6; ++rep) {
          const std::uint64_t elem0 = rng() % 700;
          const std::uint64_t n = rng() % 1500 + 1;
          const std::uint64_t nb = blocks(elem0 + n);
          const auto x = values(t, n, rng, kind);
          // scan
          std::vector<std::int32_t> s1(2 * nb, kZero), s2 = s1;
          detail::scan_with(KernelIsa::generic, t, x.data(), n, elem0, s1.data());
          detail::scan_with(KernelIsa::x86_64_v3, t, x.data(), n, elem0, s2.data());
          ASSERT_EQ(s1, s2) << name(t) << " kind " << kind;
          // the agreed exponents: the scan's, raised now and then (other ranks' larger values),
          // some blocks forced to zero / non-finite
          std::vector<std::int32_t> exps = s1;
          for (std::uint64_t b = 0; b < nb; ++b) {
            if (exps[2 * b] != kNonFinite && exps[2 * b] != kZero && rng() % 3 == 0) exps[2 * b] += int(rng() % 20);
            if (rng() % 11 == 0) exps[2 * b] = kZero;
            if (rng() % 13 == 0) exps[2 * b] = kNonFinite;
          }
          // encode (values above a raised exponent are fine; above the agreed one never happen)
          std::vector<std::int32_t> l1(2 * n), l2(2 * n, 7);
          detail::encode_with(KernelIsa::generic, t, x.data(), n, elem0, exps.data(), nranks, l1.data());
          detail::encode_with(KernelIsa::x86_64_v3, t, x.data(), n, elem0, exps.data(), nranks, l2.data());
          ASSERT_EQ(l1, l2) << name(t) << " kind " << kind << " ranks " << nranks;
          // decode: the encoded limbs times a few ranks' worth, and random limb sums in range
          const int L = limb_bits(nranks);
          std::vector<std::int32_t> sums(2 * n);
          for (std::uint64_t i = 0; i < n; ++i) {
            if (rng() % 2) {
              sums[2 * i] = static_cast<std::int32_t>(std::uint32_t(l1[2 * i]) * std::uint32_t(nranks) % 0x80000000u);
              sums[2 * i + 1] = static_cast<std::int32_t>(std::int64_t(l1[2 * i + 1]) * (nranks > 4 ? 1 : nranks));
            } else {
              sums[2 * i] = static_cast<std::int32_t>(rng() % 0x80000000u);
              sums[2 * i + 1] = static_cast<std::int32_t>(static_cast<std::int64_t>(rng() % (std::uint64_t{1} << 31)) -
                                                          (std::int64_t{1} << 30)) >> (rng() % 31);
            }
          }
          (void)L;
          const std::size_t esz = size_of(t);
          std::vector<unsigned char> y1(n * esz), y2(n * esz, 0x5a);
          // exponents from the whole range, so that results overflow and underflow too
          std::vector<std::int32_t> dexps = exps;
          for (std::uint64_t b = 0; b < nb; ++b)
            if (dexps[2 * b] != kNonFinite && dexps[2 * b] != kZero && rng() % 4 == 0)
              dexps[2 * b] = static_cast<std::int32_t>(rng() % 300) - 160;
          detail::decode_with(KernelIsa::generic, t, sums.data(), n, elem0, dexps.data(), nranks, y1.data());
          detail::decode_with(KernelIsa::x86_64_v3, t, sums.data(), n, elem0, dexps.data(), nranks, y2.data());
          ASSERT_EQ(y1, y2) << name(t) << " kind " << kind << " ranks " << nranks << " elem0 " << elem0 << " n " << n;
          ++cases;
        }
  EXPECT_EQ(cases, 3u * 5 * 5 * 6);
}

// Ties and near-ties of the final rounding: limb sums V = k * 2^s +- {0, 1} around every
// rounding point of each type, both signs, at exponents that make the result normal,
// subnormal, or overflow.
TEST(ReproIsa, DecodeTiesGiveTheScalarBits) {
  if (!kernel_isa_available(KernelIsa::x86_64_v3)) GTEST_SKIP() << "no AVX2/F16C on this CPU";
  for (DataType t : {DataType::f32, DataType::f16, DataType::bf16})
    for (int nranks : {2, 64}) {
      const int L = limb_bits(nranks);
      const int p = t == DataType::f32 ? 24 : t == DataType::f16 ? 11 : 8;
      std::vector<std::int32_t> limbs;
      for (int top = p + 1; top <= 2 * L - 1; top += 3)
        for (std::int64_t d : {-1, 0, 1})
          for (std::int64_t mant : {std::int64_t(1), std::int64_t(3), (std::int64_t{1} << (p + 1)) - 1})
            for (int sign : {1, -1}) {
              // a value with `top` bits whose bit below the kept p bits is the tie bit
              const std::int64_t V = sign * (((std::int64_t{1} << (top - 1)) | (mant << (top - p - 1))) + d);
              limbs.push_back(static_cast<std::int32_t>(static_cast<std::uint64_t>(V) & ((std::uint64_t{1} << L) - 1)));
              limbs.push_back(static_cast<std::int32_t>(V >> L));
            }
      const std::uint64_t n = limbs.size() / 2;
      for (std::int32_t e : {-140, -60, -20, 0, 20, 60, 100, 129}) {
        std::vector<std::int32_t> exps(2 * blocks(n), e);
        std::vector<unsigned char> y1(n * size_of(t)), y2(y1.size());
        detail::decode_with(KernelIsa::generic, t, limbs.data(), n, 0, exps.data(), nranks, y1.data());
        detail::decode_with(KernelIsa::x86_64_v3, t, limbs.data(), n, 0, exps.data(), nranks, y2.data());
        ASSERT_EQ(y1, y2) << name(t) << " e " << e << " ranks " << nranks;
      }
    }
}

}  // namespace
}  // namespace inc::numerics::repro
