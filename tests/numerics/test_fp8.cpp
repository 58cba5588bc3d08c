// OCP fp8 (E4M3, E5M2): every pattern decoded, encoding against an independent reference over
// every tie and boundary plus a dense strided sweep of all f32 patterns, both overflow modes,
// f64 single rounding, and the reduction kernels over all 65536 operand pairs on every
// kernel variant.
//
// The reference is written from the specification's definitions, not from src/numerics:
// values decoded with ldexp from (sign, exponent, mantissa); encoding picks the nearest of the
// sorted finite values by comparing distances (long double), ties to the even pattern, with
// one virtual value past the largest finite one (the next binade's first value: 480 for E4M3,
// 65536 for E5M2) standing for "overflow".
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "numerics/fp8.hpp"
#include "numerics/kernel_isa.hpp"
#include "numerics/reduce.hpp"
#include "tests/numerics/byte_pairs.hpp"

namespace inc::numerics {
namespace {

struct Format {
  const char* name;
  DataType t;
  int mbits, bias;
  bool ieee;  // E5M2: infinities and several NaNs; E4M3: no infinity, NaN = S.1111.111
  unsigned max_finite;
};
constexpr Format kE4M3{"e4m3", DataType::e4m3, 3, 7, false, 0x7e};
constexpr Format kE5M2{"e5m2", DataType::e5m2, 2, 15, true, 0x7b};

bool ref_is_nan(const Format& f, unsigned b) {
  const unsigned a = b & 0x7f;
  return f.ieee ? (a >> f.mbits) == 31u && (a & ((1u << f.mbits) - 1)) != 0 : a == 0x7f;
}
bool ref_is_inf(const Format& f, unsigned b) { return f.ieee && (b & 0x7f) == 0x7c; }

long double ref_decode(const Format& f, unsigned b) {
  const unsigned a = b & 0x7f;
  const int e = static_cast<int>(a >> f.mbits);
  const int m = static_cast<int>(a & ((1u << f.mbits) - 1));
  long double v;
  if (ref_is_nan(f, b)) v = std::numeric_limits<long double>::quiet_NaN();
  else if (ref_is_inf(f, b)) v = std::numeric_limits<long double>::infinity();
  else if (e == 0) v = std::ldexp(static_cast<long double>(m), 1 - f.bias - f.mbits);
  else v = std::ldexp(1.0L + std::ldexp(static_cast<long double>(m), -f.mbits), e - f.bias);
  return (b & 0x80) ? -v : v;
}

// Magnitudes of patterns 0..max_finite, then the virtual overflow value.
std::vector<long double> ref_magnitudes(const Format& f) {
  std::vector<long double> v;
  for (unsigned b = 0; b <= f.max_finite; ++b) v.push_back(ref_decode(f, b));
  const long double top = v.back();
  const int top_exp = std::ilogb(top);
  v.push_back(std::ldexp(1.0L, top_exp + 1));  // 480 is not 2^9: see below
  if (!f.ieee) v.back() = top + std::ldexp(1.0L, top_exp - f.mbits);  // E4M3: 448 + 32
  return v;
}

// Nearest by distance, ties to the even pattern; the virtual value means overflow.
std::uint8_t ref_encode(const Format& f, const std::vector<long double>& mags, long double x,
                        bool saturate) {
  const unsigned nan = f.ieee ? 0x7e : 0x7f;
  const unsigned over = saturate ? f.max_finite : (f.ieee ? 0x7c : 0x7f);
  const unsigned sign = std::signbit(x) ? 0x80 : 0;
  if (std::isnan(x)) return static_cast<std::uint8_t>(sign | nan);
  const long double a = std::fabs(x);
  unsigned k;
  if (std::isinf(a) || a >= mags.back()) {
    k = f.max_finite + 1;
  } else {
    const auto it = std::upper_bound(mags.begin(), mags.end(), a);  // first > a
    const unsigned hi = static_cast<unsigned>(it - mags.begin());
    const unsigned lo = hi - 1;
    const long double dl = a - mags[lo], dh = mags[hi] - a;
    k = dl < dh ? lo : dh < dl ? hi : ((lo & 1u) == 0 ? lo : hi);
  }
  return static_cast<std::uint8_t>(sign | (k > f.max_finite ? over : k));
}

std::uint8_t encode(const Format& f, double x, Fp8Overflow m = Fp8Overflow::ieee) {
  return f.ieee ? f64_to_e5m2(x, m) : f64_to_e4m3(x, m);
}
std::uint8_t encode32(const Format& f, float x, Fp8Overflow m = Fp8Overflow::ieee) {
  return f.ieee ? f32_to_e5m2(x, m) : f32_to_e4m3(x, m);
}
float decode(const Format& f, std::uint8_t b) { return f.ieee ? e5m2_to_f32(b) : e4m3_to_f32(b); }

class Fp8 : public ::testing::TestWithParam<Format> {};

TEST_P(Fp8, EveryPatternDecodesExactly) {
  const Format& f = GetParam();
  int nans = 0;
  for (unsigned b = 0; b < 256; ++b) {
    const long double want = ref_decode(f, b);
    const float got = decode(f, static_cast<std::uint8_t>(b));
    if (std::isnan(want)) {
      ++nans;
      ASSERT_TRUE(std::isnan(got)) << f.name << " pattern " << b;
      EXPECT_EQ(std::signbit(got), (b & 0x80) != 0) << b;
      const auto bits = __builtin_bit_cast(std::uint32_t, got);
      EXPECT_NE(bits & 0x00400000u, 0u) << "quiet NaN expected for pattern " << b;
    } else {
      ASSERT_EQ(static_cast<long double>(got), want) << f.name << " pattern " << b;
      EXPECT_EQ(std::signbit(got), (b & 0x80) != 0) << b;  // -0 too
    }
  }
  EXPECT_EQ(nans, f.ieee ? 6 : 2);
  // The named values of the specification.
  EXPECT_EQ(decode(f, static_cast<std::uint8_t>(f.max_finite)), f.ieee ? 57344.0f : 448.0f);
  EXPECT_EQ(decode(f, 1), f.ieee ? 0x1p-16f : 0x1p-9f);                       // min subnormal
  EXPECT_EQ(decode(f, static_cast<std::uint8_t>(1u << f.mbits)), f.ieee ? 0x1p-14f : 0x1p-6f);  // min normal
  if (f.ieee) {
    EXPECT_EQ(decode(f, 0xfc), -std::numeric_limits<float>::infinity());
  }
}

TEST_P(Fp8, EveryValueRoundTrips) {
  const Format& f = GetParam();
  for (unsigned b = 0; b < 256; ++b) {
    const float v = decode(f, static_cast<std::uint8_t>(b));
    const unsigned want = ref_is_nan(f, b) ? ((b & 0x80) | (f.ieee ? 0x7e : 0x7f)) : b;
    EXPECT_EQ(encode32(f, v), want) << f.name << " pattern " << b;
    EXPECT_EQ(encode(f, static_cast<double>(v)), want) << f.name << " pattern " << b;
  }
}

// Every tie and boundary: for each pair of neighbouring values (including the virtual overflow
// value and the negative side), the exact midpoint and the f32/f64 values one ulp either side
// of it, and each value plus/minus one ulp; in both overflow modes.
TEST_P(Fp8, EveryTieAndBoundaryAgainstReference) {
  const Format& f = GetParam();
  const auto mags = ref_magnitudes(f);
  std::vector<long double> points;
  for (std::size_t k = 0; k + 1 < mags.size(); ++k) {
    const long double mid = (mags[k] + mags[k + 1]) / 2;
    points.push_back(mid);
    points.push_back(mags[k]);
  }
  points.push_back(mags.back());
  points.push_back(mags.back() * 2);
  points.push_back(std::numeric_limits<long double>::infinity());
  std::size_t checked = 0;
  for (const long double p : points) {
    for (const long double s : {p, -p}) {
      const auto fs = static_cast<float>(s);  // every point is exact in f32
      ASSERT_EQ(static_cast<long double>(fs), s);
      const float fv[] = {fs, std::nextafter(fs, -INFINITY), std::nextafter(fs, INFINITY)};
      const double d = static_cast<double>(s);
      const double dv[] = {d, std::nextafter(d, -INFINITY), std::nextafter(d, INFINITY)};
      for (const auto mode : {Fp8Overflow::ieee, Fp8Overflow::saturate}) {
        const bool sat = mode == Fp8Overflow::saturate;
        for (float x : fv) {
          ASSERT_EQ(encode32(f, x, mode), ref_encode(f, mags, x, sat))
              << f.name << " f32 " << std::hexfloat << x << (sat ? " saturating" : "");
          ++checked;
        }
        for (double x : dv) {
          ASSERT_EQ(encode(f, x, mode), ref_encode(f, mags, x, sat))
              << f.name << " f64 " << std::hexfloat << x << (sat ? " saturating" : "");
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 3000u);
}

// Every 61st f32 pattern (70M inputs: every exponent, every sign, NaNs and infinities), both
// modes, plus 2M random doubles around the fp8 range.
TEST_P(Fp8, DenseSweepOfF32AndRandomF64) {
  const Format& f = GetParam();
  const auto mags = ref_magnitudes(f);
  for (std::uint64_t u = 0; u <= 0xffffffffull; u += 61) {
    const float x = __builtin_bit_cast(float, static_cast<std::uint32_t>(u));
    const std::uint8_t got = encode32(f, x);
    const std::uint8_t want = ref_encode(f, mags, x, false);
    if (got != want) FAIL() << f.name << " f32 " << std::hexfloat << x << " got " << int{got} << " want " << int{want};
    if ((u & 0xffff) < 61) {
      const std::uint8_t gs = encode32(f, x, Fp8Overflow::saturate);
      if (gs != ref_encode(f, mags, x, true)) FAIL() << f.name << " saturating " << std::hexfloat << x;
    }
  }
  std::mt19937_64 rng(0x8f8f);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  std::uniform_int_distribution<int> ex(-30, 20);
  for (int i = 0; i < 2000000; ++i) {
    const double x = std::ldexp(mant(rng), ex(rng)) * ((i & 1) ? -1 : 1);
    const auto mode = (i & 2) ? Fp8Overflow::saturate : Fp8Overflow::ieee;
    if (encode(f, x, mode) != ref_encode(f, mags, x, mode == Fp8Overflow::saturate))
      FAIL() << f.name << " f64 " << std::hexfloat << x << " seed 0x8f8f";
  }
}

TEST(Fp8Named, OverflowModesAndSpecialValues) {
  // E4M3: 464 is the tie between 448 and the missing 480 and goes to 448 (even); above it
  // overflows to NaN, or 448 saturating. An infinity is NaN / 448.
  EXPECT_EQ(f32_to_e4m3(464.0f), 0x7e);
  EXPECT_EQ(f32_to_e4m3(464.00003f), 0x7f);
  EXPECT_EQ(f32_to_e4m3(-1e6f), 0xff);
  EXPECT_EQ(f32_to_e4m3(-1e6f, Fp8Overflow::saturate), 0xfe);
  EXPECT_EQ(f32_to_e4m3(INFINITY), 0x7f);
  EXPECT_EQ(f32_to_e4m3(-INFINITY, Fp8Overflow::saturate), 0xfe);
  // E5M2: 61440 is the tie between 57344 (odd mantissa) and 65536 (inf): overflows.
  EXPECT_EQ(f32_to_e5m2(61439.996f), 0x7b);
  EXPECT_EQ(f32_to_e5m2(61440.0f), 0x7c);
  EXPECT_EQ(f32_to_e5m2(61440.0f, Fp8Overflow::saturate), 0x7b);
  EXPECT_EQ(f32_to_e5m2(-INFINITY), 0xfc);
  EXPECT_EQ(f32_to_e5m2(INFINITY, Fp8Overflow::saturate), 0x7b);
  // NaN keeps its sign in both modes.
  EXPECT_EQ(f32_to_e5m2(-NAN), 0xfe);
  EXPECT_EQ(f32_to_e4m3(-NAN, Fp8Overflow::saturate), 0xff);
  // Subnormals and underflow: half the smallest subnormal is a tie to 0, just above it is 1.
  EXPECT_EQ(f32_to_e4m3(0x1p-10f), 0x00);
  EXPECT_EQ(f32_to_e4m3(-0x1p-10f), 0x80);
  EXPECT_EQ(f32_to_e4m3(0x1.000002p-10f), 0x01);
  EXPECT_EQ(f32_to_e4m3(0x1.8p-9f), 0x02);  // 1.5 x min subnormal: tie to even (2)
  EXPECT_EQ(f32_to_e5m2(0x1.cp-15f), 0x04); // 0.875 x min normal: rounds up to the min normal
  // f64 -> fp8 rounds once: 1 + 2^-4 + 2^-40 is above the tie between 1 and 1.125.
  EXPECT_EQ(f64_to_e4m3(1.0 + 0x1p-4 + 0x1p-40), 0x39);
  EXPECT_EQ(f64_to_e4m3(1.0 + 0x1p-4), 0x38);
}

// All 65536 operand pairs, every op, on every kernel variant: the kernel's result is the
// correctly rounded fp8 value of the exact result (computed in long double: sums and products
// of two fp8 values are exact there), NaN where IEEE says so.
TEST_P(Fp8, ReduceAllPairsEveryOpEveryVariant) {
  const Format& f = GetParam();
  const auto mags = ref_magnitudes(f);
  test::for_all_byte_pairs(f.t, [&](detail::KernelIsa isa, ReduceOp op, const auto& a, const auto& b,
                                    const auto& out) {
    for (unsigned i = 0; i < 65536; ++i) {
      const long double x = ref_decode(f, a[i]), y = ref_decode(f, b[i]);
      long double r;
      switch (op) {
        case ReduceOp::prod: r = x * y; break;
        case ReduceOp::min:
          r = (std::isnan(x) || std::isnan(y)) ? NAN : (x == y ? (std::signbit(x) ? x : y) : std::min(x, y));
          break;
        case ReduceOp::max:
          r = (std::isnan(x) || std::isnan(y)) ? NAN : (x == y ? (std::signbit(x) ? y : x) : std::max(x, y));
          break;
        default: r = x + y;
      }
      const std::uint8_t want = ref_encode(f, mags, r, false);
      if (std::isnan(r)) {
        ASSERT_TRUE(ref_is_nan(f, out[i])) << f.name << " " << name(op) << " " << int{a[i]} << "," << int{b[i]};
      } else {
        ASSERT_EQ(out[i], want) << f.name << " " << name(op) << " " << int{a[i]} << "," << int{b[i]}
                                << " isa " << detail::name(isa);
      }
    }
    if (op != ReduceOp::sum) return;
    // In place (dst == a) gives the same as out of place.
    std::vector<std::uint8_t> inplace = a;
    detail::reduce_with(isa, f.t, ReduceOp::sum, inplace.data(), inplace.data(), b.data(), 65536);
    EXPECT_EQ(inplace, out);
  });
}

// divide (avg's finalisation): every pattern by every divisor 1..64 and a few large ones gives
// the fp8 value nearest to the exact quotient (checked by exact cross-multiplication), ties even.
TEST_P(Fp8, DivideEveryPatternCorrectlyRounded) {
  const Format& f = GetParam();
  const auto mags = ref_magnitudes(f);
  std::vector<std::uint64_t> divisors;
  for (std::uint64_t d = 1; d <= 64; ++d) divisors.push_back(d);
  for (std::uint64_t d : {100ull, 1000ull, 2048ull}) divisors.push_back(d);
  for (const std::uint64_t d : divisors) {
    std::vector<std::uint8_t> buf(256);
    for (unsigned i = 0; i < 256; ++i) buf[i] = static_cast<std::uint8_t>(i);
    divide(f.t, buf.data(), buf.size(), d);
    for (unsigned i = 0; i < 256; ++i) {
      const long double v = ref_decode(f, i);
      if (std::isnan(v)) {
        EXPECT_TRUE(ref_is_nan(f, buf[i]));
        continue;
      }
      if (std::isinf(v)) {
        EXPECT_EQ(buf[i], i) << "inf / d";
        continue;
      }
      // Brute force: the finite magnitude c minimising |v| - d*c (exact in long double).
      const long double av = std::fabs(v);
      unsigned best = 0;
      for (unsigned k = 1; k < mags.size() - 1; ++k) {
        const long double dk = std::fabs(av - d * mags[k]), db = std::fabs(av - d * mags[best]);
        if (dk < db || (dk == db && (k & 1u) == 0)) best = k;
      }
      const unsigned want = (i & 0x80) | best;
      ASSERT_EQ(buf[i], want) << f.name << " pattern " << i << " / " << d;
    }
  }
}

// load_as_double / store_from_double go through the same conversions (store non-saturating).
TEST_P(Fp8, ElementAccess) {
  const Format& f = GetParam();
  std::uint8_t buf[3] = {0x11, 0x22, 0x33};
  for (unsigned b = 0; b < 256; ++b) {
    buf[1] = static_cast<std::uint8_t>(b);
    const double v = load_as_double(f.t, buf, 1);
    if (ref_is_nan(f, b)) {
      EXPECT_TRUE(std::isnan(v));
      continue;
    }
    EXPECT_EQ(static_cast<long double>(v), ref_decode(f, b));
    buf[1] = 0;
    store_from_double(f.t, buf, 1, v);
    EXPECT_EQ(buf[1], b);
  }
  EXPECT_EQ(buf[0], 0x11);
  EXPECT_EQ(buf[2], 0x33);
  store_from_double(f.t, buf, 1, 1e9);
  EXPECT_EQ(buf[1], f.ieee ? 0x7c : 0x7f);
}

INSTANTIATE_TEST_SUITE_P(Numerics, Fp8, ::testing::Values(kE4M3, kE5M2),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace inc::numerics
