// f16 / bf16 <-> f32 (and f64 -> f16/bf16) conversions against the slow reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "numerics/half.hpp"
#include "reference.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace inc::numerics {
namespace {

using ref::bits_of;
using ref::float_of;

bool is_nan16(ref::Format f, std::uint16_t h) {
  const int mant_bits = f.p - 1;
  const std::uint16_t exp_mask = static_cast<std::uint16_t>(((1u << f.exp_bits) - 1) << mant_bits);
  return (h & exp_mask) == exp_mask && (h & ((1u << mant_bits) - 1)) != 0;
}

std::uint16_t to16(ref::Format f, float x) { return f.p == 11 ? f32_to_f16(x) : f32_to_bf16(x); }
float from16(ref::Format f, std::uint16_t h) { return f.p == 11 ? f16_to_f32(h) : bf16_to_f32(h); }
std::uint16_t d_to16(ref::Format f, double x) { return f.p == 11 ? f64_to_f16(x) : f64_to_bf16(x); }

// Checks that `got` is the correctly rounded conversion of the finite/infinite value v, or
// (for NaN input) a quiet NaN of the same sign.
void expect_rounding(ref::Format f, long double v, std::uint16_t got, const char* what) {
  const int sign_shift = f.p - 1 + f.exp_bits;
  if (std::isnan(v)) {
    EXPECT_TRUE(is_nan16(f, got)) << what << ": NaN became " << std::hex << got;
    EXPECT_EQ((got >> sign_shift) & 1, std::signbit(v) ? 1 : 0) << what;
    EXPECT_NE(got & (1u << (f.p - 2)), 0u) << what << ": NaN not quiet " << std::hex << got;
    return;
  }
  const long double want = ref::round_to(f, v);
  const long double have = ref::decode(f, got);
  EXPECT_EQ(have, want) << what << ": input " << static_cast<double>(v) << " -> 0x" << std::hex
                        << got;
  EXPECT_EQ((got >> sign_shift) & 1, std::signbit(v) ? 1 : 0) << what << " sign";
}

class HalfFormats : public ::testing::TestWithParam<int> {
 protected:
  ref::Format fmt() const { return GetParam() == 0 ? ref::kF16 : ref::kBF16; }
};

// Every 16-bit pattern: widening is exact (checked against the ldexp decoder), and narrowing
// the result gives the same pattern back (NaNs come back quiet with sign and payload).
TEST_P(HalfFormats, ExhaustiveRoundTrip) {
  const ref::Format f = fmt();
  const std::uint16_t quiet = static_cast<std::uint16_t>(1u << (f.p - 2));
  for (std::uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<std::uint16_t>(i);
    const float x = from16(f, h);
    const long double want = ref::decode(f, h);
    if (is_nan16(f, h)) {
      ASSERT_TRUE(std::isnan(x)) << std::hex << i;
      ASSERT_EQ(std::signbit(x), std::signbit(want)) << std::hex << i;
      ASSERT_NE(bits_of(x) & 0x00400000u, 0u) << "widened NaN not quiet " << std::hex << i;
      ASSERT_EQ(to16(f, x), h | quiet) << std::hex << i;
      ASSERT_EQ(d_to16(f, x), h | quiet) << std::hex << i;
    } else {
      ASSERT_EQ(static_cast<long double>(x), want) << std::hex << i;
      ASSERT_EQ(std::signbit(x), std::signbit(want)) << std::hex << i;
      ASSERT_EQ(to16(f, x), h) << std::hex << i;
      ASSERT_EQ(d_to16(f, static_cast<double>(x)), h) << std::hex << i;
    }
  }
}

// Every rounding boundary: for each pair of neighbouring finite 16-bit values, the exact
// midpoint (a tie) and the f32 values one ulp either side of it, plus each value +- 1 f32 ulp.
TEST_P(HalfFormats, AllMidpointsAndNeighbours) {
  const ref::Format f = fmt();
  for (std::uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<std::uint16_t>(i);
    const long double lo = ref::decode(f, h);
    if (std::isnan(lo) || std::isinf(lo)) continue;
    // Next pattern away from zero; for the max finite value, the next "value" is the
    // overflow boundary 2^(emax+1) (the midpoint is then the overflow threshold).
    const long double hi = ref::decode(f, static_cast<std::uint16_t>(h + 1));
    const long double next =
        std::isinf(hi) ? std::copysign(std::ldexp(1.0L, f.emax + 1), lo) : hi;
    const float mid = static_cast<float>((lo + next) / 2);  // exact: fits in f32
    ASSERT_EQ(static_cast<long double>(mid), (lo + next) / 2);
    const std::uint32_t mb = bits_of(mid);
    const std::uint32_t vb = bits_of(static_cast<float>(lo));
    // (vb - 1 from +-0 is a NaN pattern, which is checked as a NaN.)
    for (std::uint32_t b : {mb, mb - 1, mb + 1, vb, vb + 1, vb - 1}) {
      const float x = float_of(b);
      expect_rounding(f, x, to16(f, x), "f32");
      expect_rounding(f, x, d_to16(f, x), "f64");
      if (::testing::Test::HasFailure()) FAIL() << "pattern " << std::hex << i << " f32 " << b;
    }
  }
}

TEST_P(HalfFormats, RandomFloats) {
  const ref::Format f = fmt();
  const unsigned seed = 12345;
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  for (int i = 0; i < 2'000'000; ++i) {
    std::uint32_t b = rng();
    // Half the samples in the exponent window where the 16-bit format is not saturated.
    if (i % 2 == 0) {
      const std::uint32_t lo_exp = f.p == 11 ? 127 - 26 : 0;
      const std::uint32_t span = f.p == 11 ? 45 : 256;
      b = (b & 0x807fffffu) | (((lo_exp + (rng() % span)) & 0xffu) << 23);
    }
    const float x = float_of(b);
    expect_rounding(f, x, to16(f, x), "f32");
    if (::testing::Test::HasFailure()) FAIL() << "input bits " << std::hex << b;
  }
}

INSTANTIATE_TEST_SUITE_P(Numerics, HalfFormats, ::testing::Values(0, 1),
                         [](const auto& info) { return info.param == 0 ? "f16" : "bf16"; });

TEST(Half, EdgeCasesF16) {
  EXPECT_EQ(f32_to_f16(0.0f), 0x0000);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);                   // max finite
  EXPECT_EQ(f32_to_f16(65519.996f), 0x7bff);                 // just below overflow threshold
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);                   // threshold: tie to even -> inf
  EXPECT_EQ(f32_to_f16(-1e10f), 0xfc00);                     // overflow keeps sign
  EXPECT_EQ(f32_to_f16(INFINITY), 0x7c00);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -14)), 0x0400);      // smallest normal
  EXPECT_EQ(f32_to_f16(std::ldexp(1023.0f, -24)), 0x03ff);   // largest subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(2047.0f, -25)), 0x0400);   // tie between them -> even (normal)
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);      // smallest subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);      // half of it: tie -> even (0)
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -26)), 0x0001);      // above the tie
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);      // 1.5 ulp: tie -> even (2)
  EXPECT_EQ(f32_to_f16(-std::ldexp(1.0f, -25)), 0x8000);     // -0 after rounding
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie -> even (down)
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -149)), 0x0000);     // f32 subnormal
  // NaN payloads: quiet, sign and top payload bits kept, never infinity.
  EXPECT_EQ(f32_to_f16(float_of(0x7f800001u)), 0x7e00);      // sNaN with a low payload bit
  EXPECT_EQ(f32_to_f16(float_of(0xff800001u)), 0xfe00);
  EXPECT_EQ(f32_to_f16(float_of(0x7fc00000u)), 0x7e00);
  EXPECT_EQ(f32_to_f16(float_of(0x7fa02000u)), 0x7f01);      // payload 0x101 kept, quiet set
  EXPECT_EQ(bits_of(f16_to_f32(0x7c01)), 0x7fc02000u);       // sNaN widened quiet
  EXPECT_EQ(bits_of(f16_to_f32(0xfc00)), 0xff800000u);
  EXPECT_EQ(bits_of(f16_to_f32(0x8000)), 0x80000000u);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0x03ff), std::ldexp(1023.0f, -24));
}

TEST(Half, EdgeCasesBF16) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_bf16(float_of(0x3f808000u)), 0x3f80);     // tie -> even (down)
  EXPECT_EQ(f32_to_bf16(float_of(0x3f818000u)), 0x3f82);     // tie -> even (up)
  EXPECT_EQ(f32_to_bf16(float_of(0x3f808001u)), 0x3f81);
  EXPECT_EQ(f32_to_bf16(float_of(0x7f7f7fffu)), 0x7f7f);     // below overflow threshold
  EXPECT_EQ(f32_to_bf16(float_of(0x7f7f8000u)), 0x7f80);     // threshold: tie to even -> inf
  EXPECT_EQ(f32_to_bf16(float_of(0x7f7fffffu)), 0x7f80);     // FLT_MAX -> inf
  EXPECT_EQ(f32_to_bf16(float_of(0xff7fffffu)), 0xff80);
  EXPECT_EQ(f32_to_bf16(float_of(0x007f8000u)), 0x0080);     // largest subnormals round up to
  EXPECT_EQ(f32_to_bf16(float_of(0x007f7fffu)), 0x007f);     // the smallest normal, or not
  EXPECT_EQ(f32_to_bf16(float_of(0x00008000u)), 0x0000);     // tie -> even (0)
  EXPECT_EQ(f32_to_bf16(float_of(0x00018000u)), 0x0002);     // tie -> even (up)
  EXPECT_EQ(f32_to_bf16(float_of(0x7f800001u)), 0x7fc0);     // sNaN: quiet, not inf
  EXPECT_EQ(f32_to_bf16(float_of(0xffffffffu)), 0xffff);
  EXPECT_EQ(f32_to_bf16(float_of(0x7f810000u)), 0x7fc1);
  EXPECT_EQ(bits_of(bf16_to_f32(0x7f81)), 0x7fc10000u);
  EXPECT_EQ(bits_of(bf16_to_f32(0xff80)), 0xff800000u);
  EXPECT_EQ(bits_of(bf16_to_f32(0x0001)), 0x00010000u);      // subnormal
}

// f64 -> f16/bf16 rounds once: a value just above a tie must not be rounded to the tie by an
// intermediate f32 and then to even.
TEST(Half, F64RoundsOnce) {
  const double above_tie_f16 = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  EXPECT_EQ(f32_to_f16(static_cast<float>(above_tie_f16)), 0x3c00);  // double rounding
  EXPECT_EQ(f64_to_f16(above_tie_f16), 0x3c01);
  const double above_tie_bf16 = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  EXPECT_EQ(f64_to_bf16(above_tie_bf16), 0x3f81);
  EXPECT_EQ(f64_to_f16(1e300), 0x7c00);
  EXPECT_EQ(f64_to_f16(-1e-300), 0x8000);
  EXPECT_EQ(f64_to_f16(std::ldexp(1.0, -1074)), 0x0000);
  EXPECT_EQ(f64_to_bf16(1e300), 0x7f80);
  EXPECT_EQ(f64_to_f16(65520.0), 0x7c00);
  EXPECT_EQ(f64_to_f16(65519.999999), 0x7bff);
  EXPECT_EQ(f64_to_f16(std::nan("")), 0x7e00);
  EXPECT_EQ(f64_to_f16(-std::nan("")), 0xfe00);

  const unsigned seed = 777;
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 1'000'000; ++i) {
    // Random f64 in the interesting exponent window (including subnormal results).
    const std::uint64_t b = (rng() & 0x800fffffffffffffull) |
                            (static_cast<std::uint64_t>(1023 - 30 + rng() % 50) << 52);
    double d;
    std::memcpy(&d, &b, 8);
    expect_rounding(ref::kF16, d, f64_to_f16(d), "f64->f16");
    expect_rounding(ref::kBF16, d, f64_to_bf16(d), "f64->bf16");
    if (::testing::Test::HasFailure()) FAIL() << "input bits " << std::hex << b;
  }
}

#if defined(__x86_64__)
// Cross-check against the F16C instructions where the CPU has them.
__attribute__((target("f16c"))) std::uint16_t hw_f32_to_f16(float x) {
  return static_cast<std::uint16_t>(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c"))) float hw_f16_to_f32(std::uint16_t h) { return _cvtsh_ss(h); }

TEST(Half, MatchesF16CHardware) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "CPU without F16C";
  for (std::uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<std::uint16_t>(i);
    ASSERT_EQ(bits_of(f16_to_f32(h)), bits_of(hw_f16_to_f32(h))) << std::hex << i;
  }
  std::mt19937 rng(99);
  for (int i = 0; i < 20'000'000; ++i) {
    const float x = float_of(rng());
    ASSERT_EQ(f32_to_f16(x), hw_f32_to_f16(x)) << std::hex << bits_of(x);
  }
}
#endif

}  // namespace
}  // namespace inc::numerics
