// OCP Microscaling block formats (src/numerics/mx.*) against a reference written from the
// spec: element values by ldexp from sign/exponent/mantissa, the scale from frexp, and each
// element the nearest representable value by brute force over all codes (ties to the even
// code, values beyond the largest saturate to it), for random blocks and the edge cases.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "numerics/mx.hpp"

namespace inc::numerics {
namespace {

struct Fmt {
  const char* name;
  MxElem e;
  int ebits, mbits, bias, emax;  // ebits = 0: MXINT8
  int codes;                     // number of codes (2^bits)
};
const Fmt kFmts[] = {
    {"mxfp8_e4m3", MxElem::fp8_e4m3, 4, 3, 7, 8, 256}, {"mxfp8_e5m2", MxElem::fp8_e5m2, 5, 2, 15, 15, 256},
    {"mxfp6_e2m3", MxElem::fp6_e2m3, 2, 3, 1, 2, 64},  {"mxfp6_e3m2", MxElem::fp6_e3m2, 3, 2, 3, 4, 64},
    {"mxfp4_e2m1", MxElem::fp4_e2m1, 2, 1, 1, 2, 16},  {"mxint8", MxElem::int8, 0, 0, 0, 0, 256},
};

// NaN for the codes that are not finite numbers (fp8 NaN/inf).
double ref_value(const Fmt& f, unsigned c) {
  if (f.ebits == 0) return static_cast<std::int8_t>(c) / 64.0;
  const unsigned sign = c >> (f.ebits + f.mbits) & 1;
  const unsigned e = (c >> f.mbits) & ((1u << f.ebits) - 1), m = c & ((1u << f.mbits) - 1);
  if (f.e == MxElem::fp8_e4m3 && e == 15 && m == 7) return NAN;
  if (f.e == MxElem::fp8_e5m2 && e == 31) return NAN;
  const double v = e == 0 ? std::ldexp(m, 1 - f.bias - f.mbits) : std::ldexp(1.0 + std::ldexp(m, -f.mbits), static_cast<int>(e) - f.bias);
  return sign ? -v : v;
}

std::uint8_t ref_element(const Fmt& f, double x) {
  if (x == 0) return (std::signbit(x) && f.ebits) ? static_cast<std::uint8_t>(1u << (f.ebits + f.mbits)) : 0;
  unsigned best = 0;
  double bd = INFINITY;
  for (unsigned c = 0; c < static_cast<unsigned>(f.codes); ++c) {
    const double v = ref_value(f, c);
    if (std::isnan(v) || (v == 0 && f.ebits && c != 0)) continue;
    const double d = std::fabs(x - v);
    if (d < bd || (d == bd && (c & 1u) == 0)) bd = d, best = c;
  }
  if (best == 0 && std::signbit(x) && f.ebits) best = 1u << (f.ebits + f.mbits);  // -0
  return static_cast<std::uint8_t>(best);
}

void check_block(const Fmt& f, const std::vector<float>& v, std::size_t block) {
  const std::size_t nb = (v.size() + block - 1) / block;
  std::vector<std::uint8_t> scales(nb), codes(v.size());
  mx_encode(f.e, v.data(), v.size(), block, scales.data(), codes.data());
  std::vector<double> back(v.size());
  mx_decode(f.e, scales.data(), codes.data(), v.size(), block, back.data());
  for (std::size_t b = 0; b < nb; ++b) {
    double amax = 0;
    bool special = false;
    for (std::size_t i = b * block; i < std::min(v.size(), (b + 1) * block); ++i) {
      special |= !std::isfinite(v[i]);
      amax = std::max(amax, std::fabs(static_cast<double>(v[i])));
    }
    if (special) {
      ASSERT_EQ(scales[b], 0xff) << f.name;
      for (std::size_t i = b * block; i < std::min(v.size(), (b + 1) * block); ++i) ASSERT_TRUE(std::isnan(back[i]));
      continue;
    }
    int ex = 0;
    std::frexp(amax, &ex);  // amax = m * 2^ex, m in [0.5, 1): floor(log2(amax)) = ex - 1
    int shared = amax == 0 ? -127 : std::clamp(ex - 1 - f.emax, -127, 127);
    ASSERT_EQ(scales[b], shared + 127) << f.name << " block " << b << " amax " << amax;
    for (std::size_t i = b * block; i < std::min(v.size(), (b + 1) * block); ++i) {
      const std::uint8_t want = ref_element(f, std::ldexp(static_cast<double>(v[i]), -shared));
      ASSERT_EQ(codes[i], want) << f.name << " element " << i << " value " << v[i] << " scale 2^" << shared;
      ASSERT_EQ(back[i], std::ldexp(1.0, shared) * ref_value(f, want)) << f.name << " decode " << i;
    }
  }
}

TEST(Mx, ScaleCodesDecode) {
  for (unsigned c = 0; c < 255; ++c) EXPECT_EQ(e8m0_to_double(static_cast<std::uint8_t>(c)), std::ldexp(1.0, static_cast<int>(c) - 127));
  EXPECT_TRUE(std::isnan(e8m0_to_double(0xff)));
}

TEST(Mx, EveryElementCodeDecodes) {
  for (const Fmt& f : kFmts)
    for (unsigned c = 0; c < static_cast<unsigned>(f.codes); ++c) {
      const double want = ref_value(f, c), got = mx_element_value(f.e, static_cast<std::uint8_t>(c));
      if (std::isnan(want)) EXPECT_FALSE(std::isfinite(got)) << f.name << " " << c;
      else EXPECT_EQ(got, want) << f.name << " code " << c;
    }
  // Named maxima: 448, 57344, 7.5, 28, 6, 127/64.
  EXPECT_EQ(mx_element_value(MxElem::fp6_e2m3, 0x1f), 7.5);
  EXPECT_EQ(mx_element_value(MxElem::fp6_e3m2, 0x1f), 28.0);
  EXPECT_EQ(mx_element_value(MxElem::fp4_e2m1, 0x7), 6.0);
  EXPECT_EQ(mx_element_value(MxElem::int8, 0x7f), 127.0 / 64);
}

TEST(Mx, RandomBlocksMatchTheSpecReference) {
  std::mt19937_64 rng(0x3a3a);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::uniform_int_distribution<int> spread(-40, 40);
  for (const Fmt& f : kFmts)
    for (int trial = 0; trial < 300; ++trial) {
      std::vector<float> v(kMxBlock * 2 + 5);  // two full blocks and a short one
      const int s = spread(rng);
      for (auto& x : v) x = std::ldexp(g(rng), s + (trial % 3 == 0 ? spread(rng) / 8 : 0));
      ASSERT_NO_FATAL_FAILURE(check_block(f, v, kMxBlock)) << "trial " << trial << " seed 0x3a3a";
    }
}

TEST(Mx, EdgeCases) {
  for (const Fmt& f : kFmts) {
    SCOPED_TRACE(f.name);
    std::vector<float> zeros(kMxBlock, 0.0f);
    zeros[3] = -0.0f;
    ASSERT_NO_FATAL_FAILURE(check_block(f, zeros, kMxBlock));  // scale code 0, zero elements
    std::vector<float> nan(kMxBlock, 1.0f);
    nan[7] = NAN;
    ASSERT_NO_FATAL_FAILURE(check_block(f, nan, kMxBlock));  // NaN scale 0xFF, all NaN
    std::vector<float> inf(kMxBlock, 1.0f);
    inf[0] = -INFINITY;
    ASSERT_NO_FATAL_FAILURE(check_block(f, inf, kMxBlock));
    // Saturation: amax just below the next power of two rounds above the element maximum
    // (e.g. 7.9 in E2M1's binade [4, 8) rounds to 8 > 6): clamped to the maximum.
    std::vector<float> sat(kMxBlock, 0.25f);
    sat[1] = 7.9f;
    sat[2] = -7.99f;
    ASSERT_NO_FATAL_FAILURE(check_block(f, sat, kMxBlock));
    // Subnormal elements: small values next to a large one.
    std::vector<float> sub(kMxBlock);
    for (std::size_t i = 0; i < sub.size(); ++i) sub[i] = std::ldexp(1.0f + static_cast<float>(i) / 32, -static_cast<int>(i) / 2);
    sub[0] = 100.0f;
    ASSERT_NO_FATAL_FAILURE(check_block(f, sub, kMxBlock));
    // Scale clamped at 2^-127 (f32 subnormals) and at the top of the f32 range.
    std::vector<float> tiny(kMxBlock, 0x1p-140f), huge(kMxBlock, 0x1.fffffep127f);
    ASSERT_NO_FATAL_FAILURE(check_block(f, tiny, kMxBlock));
    ASSERT_NO_FATAL_FAILURE(check_block(f, huge, kMxBlock));
  }
  // One block's NaN does not spread to the next.
  std::vector<float> two(2 * kMxBlock, 2.0f);
  two[0] = NAN;
  std::vector<std::uint8_t> s(2), c(two.size());
  mx_encode(MxElem::fp8_e4m3, two.data(), two.size(), kMxBlock, s.data(), c.data());
  EXPECT_EQ(s[0], 0xff);
  EXPECT_EQ(s[1], 127 + 1 - 8);  // floor(log2 2) - 8
}

TEST(Mx, BlockFloatingPointAnyBlockSize) {
  const Fmt& f = kFmts[5];  // int8 elements with an E8M0 shared exponent
  std::mt19937_64 rng(7);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (std::size_t block : {1u, 2u, 7u, 16u, 64u, 100u}) {
    std::vector<float> v(301);
    for (auto& x : v) x = g(rng) * 1000.0f;
    ASSERT_NO_FATAL_FAILURE(check_block(f, v, block)) << "block " << block;
  }
}

}  // namespace
}  // namespace inc::numerics
