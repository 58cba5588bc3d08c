// Overflow counts of sums (src/numerics/events.hpp) against references written here: integer
// sums exact in 64 bits and compared with the type's range, 16-bit and fp8 values decoded with
// ldexp and summed exactly in double (then compared with the rounding threshold to infinity),
// f32/f64 by the definition (finite operands, infinite IEEE sum).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "numerics/events.hpp"
#include "numerics/reduce.hpp"
#include "tests/numerics/h16_reference.hpp"

namespace inc::numerics {
namespace {

using inc::testing::h16::decode;
using inc::testing::h16::kBF16;
using inc::testing::h16::kF16;

// Checks sum_overflows and reduce_counted (in place and not) against `want`, and that
// reduce_counted stores what reduce() stores.
void check(DataType t, const std::vector<unsigned char>& a, const std::vector<unsigned char>& b,
           std::size_t n, std::uint64_t want) {
  EXPECT_EQ(sum_overflows(t, a.data(), b.data(), n), want) << name(t);
  std::vector<unsigned char> d1(a.size()), d2 = a;
  reduce(t, ReduceOp::sum, d1.data(), a.data(), b.data(), n);
  EXPECT_EQ(reduce_counted(t, ReduceOp::sum, d2.data(), d2.data(), b.data(), n), want) << name(t);
  EXPECT_EQ(d1, d2) << name(t);
  EXPECT_EQ(reduce_counted(t, ReduceOp::max, d2.data(), a.data(), b.data(), n), 0u) << name(t);
}

TEST(Events, EightBitIntegersAllPairs) {
  for (DataType t : {DataType::i8, DataType::u8}) {
    std::vector<unsigned char> a(65536), b(65536);
    std::uint64_t want = 0;
    for (unsigned i = 0; i < 65536; ++i) {
      a[i] = static_cast<unsigned char>(i & 0xff);
      b[i] = static_cast<unsigned char>(i >> 8);
      const long s = t == DataType::i8 ? long(static_cast<signed char>(a[i])) + static_cast<signed char>(b[i])
                                       : long(a[i]) + b[i];
      want += t == DataType::i8 ? (s < -128 || s > 127) : s > 255;
    }
    check(t, a, b, 65536, want);
  }
}

TEST(Events, Int4AllBytePairs) {
  std::vector<unsigned char> a(65536), b(65536);
  std::uint64_t want = 0;
  for (unsigned i = 0; i < 65536; ++i) {
    a[i] = static_cast<unsigned char>(i & 0xff);
    b[i] = static_cast<unsigned char>(i >> 8);
    for (int sh : {0, 4}) {
      auto nib = [&](unsigned x) { int v = (x >> sh) & 0xf; return v >= 8 ? v - 16 : v; };
      const int s = nib(a[i]) + nib(b[i]);
      want += s < -8 || s > 7;
    }
  }
  check(DataType::i4, a, b, 65536, want);
}

template <class T>
void wide_integers(DataType t) {
  std::mt19937_64 rng(static_cast<unsigned>(t) + 5);
  const std::size_t n = 5003;  // crosses reduce_counted's blocks
  std::vector<unsigned char> a(n * sizeof(T)), b(n * sizeof(T));
  std::uint64_t want = 0;
  for (std::size_t i = 0; i < n; ++i) {
    T x = static_cast<T>(rng()), y = static_cast<T>(rng());
    if (i % 3 == 0) y = static_cast<T>(y >> 3);  // also small ones
    if (i == 7) { x = std::numeric_limits<T>::max(); y = 1; }
    if (i == 8) { x = std::numeric_limits<T>::min(); y = static_cast<T>(-1); }
    std::memcpy(a.data() + i * sizeof(T), &x, sizeof(T));
    std::memcpy(b.data() + i * sizeof(T), &y, sizeof(T));
    const __int128 s = static_cast<__int128>(x) + static_cast<__int128>(y);
    want += s < static_cast<__int128>(std::numeric_limits<T>::min()) ||
            s > static_cast<__int128>(std::numeric_limits<T>::max());
  }
  check(t, a, b, n, want);
}

TEST(Events, WideIntegersRandomAndEdges) {
  wide_integers<std::int32_t>(DataType::i32);
  wide_integers<std::uint32_t>(DataType::u32);
  wide_integers<std::int64_t>(DataType::i64);
  wide_integers<std::uint64_t>(DataType::u64);
}

template <class F>
void floats(DataType t) {
  std::mt19937_64 rng(11);
  const F big = std::numeric_limits<F>::max();
  const F inf = std::numeric_limits<F>::infinity(), nan = std::numeric_limits<F>::quiet_NaN();
  std::vector<F> x, y;
  // edge cases: max + max, max - max, inf + 1, NaN + max, max + ulp/2 (rounds to max)
  const F edges[][2] = {{big, big}, {big, -big}, {inf, F(1)}, {nan, big}, {-big, -big}, {big, std::nextafter(big, F(0)) - big}};
  for (const auto& e : edges) { x.push_back(e[0]); y.push_back(e[1]); }
  std::uniform_real_distribution<F> u(F(0.4), F(1));
  for (int i = 0; i < 4000; ++i) {
    x.push_back(big * u(rng) * (rng() % 2 ? 1 : -1));
    y.push_back(big * u(rng) * (rng() % 2 ? 1 : -1));
  }
  std::uint64_t want = 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    want += std::isfinite(x[i]) && std::isfinite(y[i]) && !std::isfinite(x[i] + y[i]);
  std::vector<unsigned char> a(x.size() * sizeof(F)), b(a.size());
  std::memcpy(a.data(), x.data(), a.size());
  std::memcpy(b.data(), y.data(), b.size());
  ASSERT_GT(want, 500u);
  check(t, a, b, x.size(), want);
}

TEST(Events, FloatsOverflowToInfinity) {
  floats<float>(DataType::f32);
  floats<double>(DataType::f64);
}

// 16-bit floats: the rounded sum is infinite exactly when the exact sum reaches the overflow
// threshold (f16: 65520 = 65504 + half an ulp; bf16: max + half an ulp), ties going up.
TEST(Events, SixteenBitFloatsRandomPairsAndEveryTopValue) {
  for (bool bf : {false, true}) {
    const auto f = bf ? kBF16 : kF16;
    const double thr = bf ? std::ldexp(255.5, 120) : 65520.0;
    std::mt19937_64 rng(bf + 3);
    std::vector<std::uint16_t> x, y;
    for (unsigned hi = 0x7000; hi < 0x8000; hi += 3)  // large magnitudes, both signs, inf, NaN
      for (unsigned k = 0; k < 16; ++k) {
        x.push_back(std::uint16_t(hi | (k & 1 ? 0x8000 : 0)));
        y.push_back(std::uint16_t((rng() & 0x0fff) | 0x7000 | (k & 2 ? 0x8000 : 0)));
      }
    if (bf)  // bf16's large values have top byte 0x7f
      for (auto* v : {&x, &y})
        for (auto& b : *v) b = std::uint16_t((b & 0x80ff) | 0x7f00);
    std::uint64_t want = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double a = decode(x[i], f), b = decode(y[i], f);
      want += std::isfinite(a) && std::isfinite(b) && std::fabs(a + b) >= thr;
    }
    std::vector<unsigned char> A(2 * x.size()), B(A.size());
    std::memcpy(A.data(), x.data(), A.size());
    std::memcpy(B.data(), y.data(), B.size());
    ASSERT_GT(want, 100u);
    check(bf ? DataType::bf16 : DataType::f16, A, B, x.size(), want);
  }
}

TEST(Events, NonFiniteElementsAreCounted) {
  const float f[] = {1, INFINITY, -INFINITY, NAN, 3e38f, -0.0f};
  EXPECT_EQ(count_nonfinite(DataType::f32, f, 6), 3u);
  const std::uint16_t h[] = {0x7c00, 0xfc00, 0x7e00, 0x7bff, 0x0001};
  EXPECT_EQ(count_nonfinite(DataType::f16, h, 5), 3u);
  const std::uint16_t g[] = {0x7f80, 0xff81, 0x7f7f, 0x7c00};
  EXPECT_EQ(count_nonfinite(DataType::bf16, g, 4), 2u);
  const std::uint8_t e[] = {0x7f, 0xff, 0x7e, 0x7c};
  EXPECT_EQ(count_nonfinite(DataType::e4m3, e, 4), 2u);
  EXPECT_EQ(count_nonfinite(DataType::e5m2, e, 4), 4u);
  const std::int32_t i[] = {0x7fffffff, -1};
  EXPECT_EQ(count_nonfinite(DataType::i32, i, 2), 0u);
}

}  // namespace
}  // namespace inc::numerics
