// reduce / divide / load_as_double / store_from_double against references computed exactly:
// integers in 128-bit arithmetic reduced modulo 2^bits by hand, f16/bf16/f32 in long double
// (exact or harmlessly double-rounded, see below), f64 in __float128.
//
// Why one wide rounding step followed by rounding to the element type gives the correctly
// rounded result: for +, *, / of two p-bit floats, rounding first to p' >= 2p + 2 bits and then
// to p bits equals rounding once (Figueroa, "When is double rounding innocuous?", 1995).
// long double (64 bits) covers f32 (24), f16 (11) and bf16 (8); __float128 (113) covers f64 (53).
// The same theorem is why the kernels' "widen f16/bf16 to f32, combine, round once" is exact.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "inc/types.hpp"
#include "numerics/half.hpp"
#include "numerics/kernel_isa.hpp"
#include "numerics/reduce.hpp"
#include "reference.hpp"

#if !defined(__SIZEOF_FLOAT128__)
#error "the f64 reference needs __float128 (or a 113-bit long double)"
#endif

namespace inc::numerics {
namespace {

using detail::KernelIsa;
using Quad = __float128;
using i128 = __int128;
using u128 = unsigned __int128;

constexpr DataType kAllTypes[] = {DataType::f64, DataType::f32, DataType::f16, DataType::bf16,
                                  DataType::i8,  DataType::u8,  DataType::i32, DataType::u32,
                                  DataType::i64, DataType::u64};
constexpr ReduceOp kAllOps[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max,
                                ReduceOp::avg};

// ---- exact integer reference ------------------------------------------------------------

// v modulo 2^bits, mapped to the two's complement range of T; spelled out with % rather than
// by unsigned truncation as the kernels do.
template <class T, class W>
T wrap_to(W v) {
  constexpr int bits = sizeof(T) * 8;
  const i128 mod = static_cast<i128>(u128{1} << bits);
  i128 r;
  if constexpr (std::is_signed_v<W>) {
    r = v % mod;
    if (r < 0) r += mod;
  } else {
    r = static_cast<i128>(v % static_cast<u128>(mod));
  }
  if (std::is_signed_v<T> && r >= mod / 2) r -= mod;
  return static_cast<T>(r);
}

template <class T>
T ref_int(ReduceOp op, T x, T y) {
  using W = std::conditional_t<std::is_signed_v<T>, i128, u128>;
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return wrap_to<T>(static_cast<W>(x) + static_cast<W>(y));
    case ReduceOp::prod: return wrap_to<T>(static_cast<W>(x) * static_cast<W>(y));
    case ReduceOp::min: return x < y ? x : y;
    case ReduceOp::max: return x < y ? y : x;
  }
  return 0;
}

// ---- floating-point reference -------------------------------------------------------------

// Documented min/max semantics (IEEE 754-2019 minimum/maximum): NaN if either is NaN,
// -0 < +0; otherwise the usual order.
template <class W>
W ref_float(ReduceOp op, W x, W y) {
  const W nan = std::numeric_limits<long double>::quiet_NaN();
  const bool any_nan = x != x || y != y;
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return x + y;
    case ReduceOp::prod: return x * y;
    case ReduceOp::min:
      if (any_nan) return nan;
      if (x == 0 && y == 0) return (std::signbit(static_cast<long double>(x)) ||
                                    std::signbit(static_cast<long double>(y)))
                                       ? W(-0.0L)
                                       : W(0.0L);
      return x < y ? x : y;
    case ReduceOp::max:
      if (any_nan) return nan;
      if (x == 0 && y == 0) return (std::signbit(static_cast<long double>(x)) &&
                                    std::signbit(static_cast<long double>(y)))
                                       ? W(-0.0L)
                                       : W(0.0L);
      return x < y ? y : x;
  }
  return nan;
}

// Outcome of one element check: empty when it matches, else a description.
std::string describe(DataType t, const void* a, const void* b, const void* got, std::size_t i) {
  return std::string(name(t)) + " element " + std::to_string(i) + ": " +
         std::to_string(load_as_double(t, a, i)) + ", " + std::to_string(load_as_double(t, b, i)) +
         " -> " + std::to_string(load_as_double(t, got, i));
}

template <class T>
T at(const void* p, std::size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(p) + i * sizeof(T), sizeof(T));
  return v;
}

// Returns the index of the first element of `got` that differs from the reference of
// op(a[i], b[i]), or n if all match.
template <class T>
std::size_t first_mismatch_int(ReduceOp op, const void* a, const void* b, const void* got,
                               std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (at<T>(got, i) != ref_int<T>(op, at<T>(a, i), at<T>(b, i))) return i;
  return n;
}

template <class T>
std::size_t first_mismatch_native_float(ReduceOp op, const void* a, const void* b,
                                        const void* got, std::size_t n) {
  using W = std::conditional_t<std::is_same_v<T, double>, Quad, long double>;
  for (std::size_t i = 0; i < n; ++i) {
    const T want = static_cast<T>(ref_float<W>(op, at<T>(a, i), at<T>(b, i)));
    const T have = at<T>(got, i);
    if (std::isnan(want)) {
      if (!std::isnan(have)) return i;
    } else if (have != want || std::signbit(have) != std::signbit(want)) {
      return i;
    }
  }
  return n;
}

std::size_t first_mismatch_half(ref::Format f, ReduceOp op, const void* a, const void* b,
                                const void* got, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const long double x = ref::decode(f, at<std::uint16_t>(a, i));
    const long double y = ref::decode(f, at<std::uint16_t>(b, i));
    const long double want = ref::round_to(f, ref_float<long double>(op, x, y));
    const std::uint16_t h = at<std::uint16_t>(got, i);
    const long double have = ref::decode(f, h);
    if (std::isnan(want)) {
      const std::uint16_t quiet = static_cast<std::uint16_t>(1u << (f.p - 2));
      if (!std::isnan(have) || (h & quiet) == 0) return i;
    } else if (have != want || std::signbit(have) != std::signbit(want)) {
      return i;
    }
  }
  return n;
}

std::size_t first_mismatch(DataType t, ReduceOp op, const void* a, const void* b,
                           const void* got, std::size_t n) {
  switch (t) {
    case DataType::f64: return first_mismatch_native_float<double>(op, a, b, got, n);
    case DataType::f32: return first_mismatch_native_float<float>(op, a, b, got, n);
    case DataType::f16: return first_mismatch_half(ref::kF16, op, a, b, got, n);
    case DataType::bf16: return first_mismatch_half(ref::kBF16, op, a, b, got, n);
    case DataType::i8: return first_mismatch_int<std::int8_t>(op, a, b, got, n);
    case DataType::u8: return first_mismatch_int<std::uint8_t>(op, a, b, got, n);
    case DataType::i32: return first_mismatch_int<std::int32_t>(op, a, b, got, n);
    case DataType::u32: return first_mismatch_int<std::uint32_t>(op, a, b, got, n);
    case DataType::i64: return first_mismatch_int<std::int64_t>(op, a, b, got, n);
    case DataType::u64: return first_mismatch_int<std::uint64_t>(op, a, b, got, n);
    case DataType::e4m3:
    case DataType::e5m2:
    case DataType::i4: break;  // tested exhaustively in test_fp8.cpp / test_int4.cpp
    case DataType::mxfp8_e4m3: case DataType::mxfp8_e5m2: case DataType::mxint8:
    case DataType::mxfp4: case DataType::mxfp6_e2m3: case DataType::mxfp6_e3m2: break;  // test_mx_type.cpp
  }
  return 0;
}

// Every compiled kernel variant this CPU can run (generic always; x86-64-v3 where present).
std::vector<KernelIsa> available_isas() {
  std::vector<KernelIsa> v;
  for (KernelIsa isa : detail::kAllKernelIsas)
    if (detail::kernel_isa_available(isa)) v.push_back(isa);
  return v;
}

// ---- inputs ---------------------------------------------------------------------------------

// Random element bit patterns with a bias towards interesting values: for floats a mix of raw
// random bits (NaN payloads, infinities, subnormals, huge values), moderate values whose sums
// and products stay finite, and exact specials; for integers random bits plus extremes.
std::vector<unsigned char> random_buffer(DataType t, std::size_t n, std::mt19937_64& rng) {
  const std::size_t sz = size_of(t);
  std::vector<unsigned char> buf(n * sz);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t bits = rng();
    const unsigned kind = static_cast<unsigned>(rng() % 16);
    switch (t) {
      case DataType::f64:
        if (kind < 8) bits = (bits & 0x800fffffffffffffull) | ((1023ull - 20 + rng() % 40) << 52);
        else if (kind == 8) bits = 0x7ff8000000000000ull | (bits & 0x8000000000000fffull);
        else if (kind == 9) bits = (bits & 0x8000000000000000ull) | (rng() & 1 ? 0x7ff0000000000000ull : 0);
        else if (kind == 10) bits &= 0x800fffffffffffffull;  // subnormal or zero
        break;
      case DataType::f32:
        if (kind < 8) bits = (bits & 0x807fffffu) | ((127u - 20 + rng() % 40) << 23);
        else if (kind == 8) bits = 0x7fc00000u | (bits & 0x80000fffu);
        else if (kind == 9) bits = (bits & 0x80000000u) | (rng() & 1 ? 0x7f800000u : 0);
        else if (kind == 10) bits &= 0x807fffffu;
        break;
      case DataType::f16:
      case DataType::bf16:
        if (kind < 6)  // [0.5, 1)
          bits = t == DataType::f16 ? (bits & 0x83ff) | 0x3800 : (bits & 0x807f) | 0x3f00;
        else if (kind == 6) bits &= 0x8000;                                             // +-0
        break;
      default:
        if (kind == 0) bits = 0;
        else if (kind == 1) bits = ~std::uint64_t{0};                     // -1 / max
        else if (kind == 2) bits = std::uint64_t{1} << (sz * 8 - 1);     // min signed
        else if (kind == 3) bits = (std::uint64_t{1} << (sz * 8 - 1)) - 1;  // max signed
        else if (kind < 8) bits %= 1000;
        break;
    }
    std::memcpy(buf.data() + i * sz, &bits, sz);  // little-endian: low bytes of bits
  }
  return buf;
}

struct Case {
  DataType type;
  ReduceOp op;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return std::string(name(info.param.type)) + "_" + std::string(name(info.param.op));
}

std::vector<Case> all_cases() {
  std::vector<Case> v;
  for (auto t : kAllTypes)
    for (auto op : kAllOps) v.push_back({t, op});
  return v;
}

class ReduceAll : public ::testing::TestWithParam<Case> {};

// Every type x op, counts 0, 1, 7 and 1000003, out of place with an unaligned start and
// guard bytes after the end that must stay untouched.
TEST_P(ReduceAll, MatchesReference) {
  const auto [t, op] = GetParam();
  const std::size_t sz = size_of(t);
  const std::uint64_t seed = 1000 + static_cast<unsigned>(t) * 10 + static_cast<unsigned>(op);
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);

  reduce(t, op, nullptr, nullptr, nullptr, 0);  // count 0 touches nothing

  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000003}}) {
    SCOPED_TRACE(::testing::Message() << "count " << n);
    const auto a = random_buffer(t, n, rng);
    const auto b = random_buffer(t, n, rng);
    constexpr std::size_t kGuard = 64;
    for (KernelIsa isa : available_isas()) {
      SCOPED_TRACE(::testing::Message() << "kernels " << detail::name(isa));
      // One element of offset so the vector loop starts unaligned.
      std::vector<unsigned char> out((n + 1) * sz + kGuard, 0xa5);
      void* dst = out.data() + sz;
      detail::reduce_with(isa, t, op, dst, a.data(), b.data(), n);
      const std::size_t bad = first_mismatch(t, op, a.data(), b.data(), dst, n);
      EXPECT_EQ(bad, n) << describe(t, a.data(), b.data(), dst, bad);
      for (std::size_t i = 0; i < sz; ++i) ASSERT_EQ(out[i], 0xa5) << "wrote before dst";
      for (std::size_t i = (n + 1) * sz; i < out.size(); ++i)
        ASSERT_EQ(out[i], 0xa5) << "wrote past dst[count-1] at byte " << i;
    }
  }
}

// In-place use: dst == a, dst == b, and dst == a == b.
TEST_P(ReduceAll, Aliasing) {
  const auto [t, op] = GetParam();
  const std::uint64_t seed = 5000 + static_cast<unsigned>(t) * 10 + static_cast<unsigned>(op);
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  const std::size_t n = 100003;
  const auto a = random_buffer(t, n, rng);
  const auto b = random_buffer(t, n, rng);
  for (KernelIsa isa : available_isas()) {
  SCOPED_TRACE(::testing::Message() << "kernels " << detail::name(isa));
  auto reduce = [isa](DataType t_, ReduceOp op_, void* d_, const void* a_, const void* b_,
                      std::size_t n_) { detail::reduce_with(isa, t_, op_, d_, a_, b_, n_); };

  auto x = a;
  reduce(t, op, x.data(), x.data(), b.data(), n);
  std::size_t bad = first_mismatch(t, op, a.data(), b.data(), x.data(), n);
  EXPECT_EQ(bad, n) << "dst == a: " << describe(t, a.data(), b.data(), x.data(), bad);

  auto y = b;
  reduce(t, op, y.data(), a.data(), y.data(), n);
  bad = first_mismatch(t, op, a.data(), b.data(), y.data(), n);
  EXPECT_EQ(bad, n) << "dst == b: " << describe(t, a.data(), b.data(), y.data(), bad);

  auto z = a;
  reduce(t, op, z.data(), z.data(), z.data(), n);
  bad = first_mismatch(t, op, a.data(), a.data(), z.data(), n);
  EXPECT_EQ(bad, n) << "dst == a == b: " << describe(t, a.data(), a.data(), z.data(), bad);

  std::vector<unsigned char> w(a.size());
  reduce(t, op, w.data(), a.data(), a.data(), n);
  bad = first_mismatch(t, op, a.data(), a.data(), w.data(), n);
  EXPECT_EQ(bad, n) << "a == b: " << describe(t, a.data(), a.data(), w.data(), bad);
  }
}

// The variants agree bit for bit, except which payload a NaN result carries when both
// operands are NaNs (x86 returns the first source operand's, and the compiler may swap the
// operands of a commutative operation); reduce() uses one of them.
TEST_P(ReduceAll, KernelVariantsAreBitIdentical) {
  const auto [t, op] = GetParam();
  const std::uint64_t seed = 7000 + static_cast<unsigned>(t) * 10 + static_cast<unsigned>(op);
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  const std::size_t n = 4099;
  const auto a = random_buffer(t, n, rng);
  const auto b = random_buffer(t, n, rng);
  std::vector<unsigned char> want(a.size());
  reduce(t, op, want.data(), a.data(), b.data(), n);
  for (KernelIsa isa : available_isas()) {
    std::vector<unsigned char> got(a.size());
    detail::reduce_with(isa, t, op, got.data(), a.data(), b.data(), n);
    const std::size_t sz = size_of(t);
    for (std::size_t i = 0; i < n; ++i) {
      if (std::memcmp(got.data() + i * sz, want.data() + i * sz, sz) == 0) continue;
      const bool both_nan = std::isnan(load_as_double(t, got.data(), i)) &&
                            std::isnan(load_as_double(t, want.data(), i)) &&
                            std::isnan(load_as_double(t, a.data(), i)) &&
                            std::isnan(load_as_double(t, b.data(), i));
      ASSERT_TRUE(both_nan) << detail::name(isa) << " vs reduce() using "
                            << detail::name(detail::selected_kernel_isa()) << ": "
                            << describe(t, a.data(), b.data(), got.data(), i) << " vs "
                            << load_as_double(t, want.data(), i);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Numerics, ReduceAll, ::testing::ValuesIn(all_cases()), case_name);

// ---- hand-written cases --------------------------------------------------------------------

template <class T>
T reduce1(ReduceOp op, T x, T y, DataType t) {
  T r{};
  reduce(t, op, &r, &x, &y, 1);
  return r;
}

TEST(Reduce, IntegerWrapAround) {
  using L8 = std::numeric_limits<std::int8_t>;
  using L32 = std::numeric_limits<std::int32_t>;
  using L64 = std::numeric_limits<std::int64_t>;
  EXPECT_EQ(reduce1<std::int8_t>(ReduceOp::sum, L8::max(), 1, DataType::i8), L8::min());
  EXPECT_EQ(reduce1<std::int8_t>(ReduceOp::prod, L8::min(), -1, DataType::i8), L8::min());
  EXPECT_EQ(reduce1<std::int8_t>(ReduceOp::prod, 16, 16, DataType::i8), 0);
  EXPECT_EQ(reduce1<std::uint8_t>(ReduceOp::sum, 255, 2, DataType::u8), 1);
  EXPECT_EQ(reduce1<std::uint8_t>(ReduceOp::prod, 255, 255, DataType::u8), 1);
  EXPECT_EQ(reduce1<std::int32_t>(ReduceOp::sum, L32::max(), 1, DataType::i32), L32::min());
  EXPECT_EQ(reduce1<std::int32_t>(ReduceOp::prod, 65536, 65536, DataType::i32), 0);
  EXPECT_EQ(reduce1<std::int32_t>(ReduceOp::prod, L32::min(), -1, DataType::i32), L32::min());
  EXPECT_EQ(reduce1<std::uint32_t>(ReduceOp::sum, 0xffffffffu, 0xffffffffu, DataType::u32),
            0xfffffffeu);
  EXPECT_EQ(reduce1<std::int64_t>(ReduceOp::sum, L64::min(), -1, DataType::i64), L64::max());
  EXPECT_EQ(reduce1<std::int64_t>(ReduceOp::prod, L64::min(), -1, DataType::i64), L64::min());
  EXPECT_EQ(reduce1<std::uint64_t>(ReduceOp::prod, ~0ull, ~0ull, DataType::u64), 1u);
  EXPECT_EQ(reduce1<std::int8_t>(ReduceOp::min, -128, 127, DataType::i8), -128);
  EXPECT_EQ(reduce1<std::uint64_t>(ReduceOp::max, ~0ull, 1, DataType::u64), ~0ull);
}

TEST(Reduce, FloatMinMaxNaNAndSignedZero) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (ReduceOp op : {ReduceOp::min, ReduceOp::max, ReduceOp::sum, ReduceOp::prod}) {
    EXPECT_TRUE(std::isnan(reduce1<float>(op, nan, 1.0f, DataType::f32))) << name(op);
    EXPECT_TRUE(std::isnan(reduce1<float>(op, 1.0f, nan, DataType::f32))) << name(op);
    EXPECT_TRUE(std::isnan(reduce1<double>(op, -3.0, std::nan(""), DataType::f64))) << name(op);
  }
  EXPECT_FALSE(std::signbit(reduce1<float>(ReduceOp::max, -0.0f, 0.0f, DataType::f32)));
  EXPECT_FALSE(std::signbit(reduce1<float>(ReduceOp::max, 0.0f, -0.0f, DataType::f32)));
  EXPECT_TRUE(std::signbit(reduce1<float>(ReduceOp::min, -0.0f, 0.0f, DataType::f32)));
  EXPECT_TRUE(std::signbit(reduce1<float>(ReduceOp::min, 0.0f, -0.0f, DataType::f32)));
  EXPECT_EQ(reduce1<double>(ReduceOp::max, -INFINITY, -1e308, DataType::f64), -1e308);
  EXPECT_EQ(reduce1<double>(ReduceOp::min, INFINITY, 5.0, DataType::f64), 5.0);
  // f16: NaN from either side, -0 < +0.
  const std::uint16_t h_nan = 0x7e00, h_one = 0x3c00, h_pz = 0x0000, h_nz = 0x8000;
  EXPECT_EQ(reduce1<std::uint16_t>(ReduceOp::max, h_one, h_nan, DataType::f16) & 0x7e00, 0x7e00);
  EXPECT_EQ(reduce1<std::uint16_t>(ReduceOp::min, h_nan, h_one, DataType::f16) & 0x7e00, 0x7e00);
  EXPECT_EQ(reduce1<std::uint16_t>(ReduceOp::max, h_nz, h_pz, DataType::f16), h_pz);
  EXPECT_EQ(reduce1<std::uint16_t>(ReduceOp::min, h_pz, h_nz, DataType::f16), h_nz);
}

// f16/bf16 combine in f32 and round once: 2048 + 1 is a tie in f16 (ulp 2) -> stays 2048, and
// 2048 + 3 -> 2052 (tie to even), which rounding each operand first would not give.
TEST(Reduce, HalfAccumulatesInF32AndRoundsOnce) {
  const std::uint16_t a[] = {f32_to_f16(2048.0f), f32_to_f16(2048.0f), f32_to_f16(65504.0f),
                             f32_to_f16(1.0f)};
  const std::uint16_t b[] = {f32_to_f16(1.0f), f32_to_f16(3.0f), f32_to_f16(16.0f),
                             f32_to_f16(std::ldexp(1.0f, -11))};
  std::uint16_t d[4];
  reduce(DataType::f16, ReduceOp::sum, d, a, b, 4);
  EXPECT_EQ(f16_to_f32(d[0]), 2048.0f);
  EXPECT_EQ(f16_to_f32(d[1]), 2052.0f);
  EXPECT_EQ(d[2], 0x7c00) << "65504 + 16 = 65520 rounds to inf";
  EXPECT_EQ(d[3], f32_to_f16(1.0f)) << "1 + 2^-11 is a tie -> even";
}

// ---- divide ---------------------------------------------------------------------------------

// Reference quotient: floats correctly rounded (one wide division, then rounding; the divisors
// below have at most 7 significant bits so the double-rounding argument holds for bf16 too),
// integers truncated toward zero computed from magnitudes.
template <class T, bool kHalf = false>
bool divide_matches(DataType t, const std::vector<unsigned char>& in,
                    const std::vector<unsigned char>& out, std::uint64_t d, std::size_t* where) {
  const std::size_t n = in.size() / sizeof(T);
  for (std::size_t i = 0; i < n; ++i) {
    *where = i;
    if constexpr (std::is_integral_v<T> && !kHalf) {
      const T x = at<T>(in.data(), i);
      const i128 wide = x;
      const bool negative = wide < 0;
      const u128 mag = static_cast<u128>(negative ? -wide : wide);
      const u128 qm = mag / d;
      const T want = static_cast<T>(negative ? -static_cast<i128>(qm) : static_cast<i128>(qm));
      if (at<T>(out.data(), i) != want) return false;
    } else {
      long double want;
      long double have;
      if (t == DataType::f16 || t == DataType::bf16) {
        const ref::Format f = t == DataType::f16 ? ref::kF16 : ref::kBF16;
        want = ref::round_to(f, ref::decode(f, at<std::uint16_t>(in.data(), i)) /
                                    static_cast<long double>(d));
        have = ref::decode(f, at<std::uint16_t>(out.data(), i));
      } else if (t == DataType::f32) {
        want = static_cast<float>(static_cast<long double>(at<float>(in.data(), i)) /
                                  static_cast<long double>(d));
        have = at<float>(out.data(), i);
      } else {
        want = static_cast<double>(static_cast<Quad>(at<double>(in.data(), i)) /
                                   static_cast<Quad>(d));
        have = at<double>(out.data(), i);
      }
      if (std::isnan(want) != std::isnan(have)) return false;
      if (!std::isnan(want) && (want != have || std::signbit(want) != std::signbit(have)))
        return false;
    }
  }
  return true;
}

class DivideAll : public ::testing::TestWithParam<DataType> {};

TEST_P(DivideAll, MatchesReference) {
  const DataType t = GetParam();
  const std::uint64_t seed = 9000 + static_cast<unsigned>(t);
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  divide(t, nullptr, 0, 3);
  std::vector<std::uint64_t> divisors = {1, 2, 3, 5, 7, 24, 96, 1000};
  if (!is_floating(t)) {
    // Integer quotients are exact for any divisor, including ones inexact as a double.
    for (std::uint64_t d : {127ull, 255ull, 65537ull, 2147483647ull, 4294967295ull,
                            4294967296ull, (1ull << 53) + 1, ~0ull})
      divisors.push_back(d);
  }
  for (std::uint64_t d : divisors) {
    for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{100003}}) {
      const auto in = random_buffer(t, n, rng);
      for (KernelIsa isa : available_isas()) {
      SCOPED_TRACE(::testing::Message() << "kernels " << detail::name(isa));
      auto out = in;
      detail::divide_with(isa, t, out.data(), n, d);
      std::size_t where = 0;
      bool ok = false;
      switch (t) {
        case DataType::f64: ok = divide_matches<double>(t, in, out, d, &where); break;
        case DataType::f32: ok = divide_matches<float>(t, in, out, d, &where); break;
        case DataType::f16:
        case DataType::bf16: ok = divide_matches<std::uint16_t, true>(t, in, out, d, &where); break;
        case DataType::i8: ok = divide_matches<std::int8_t>(t, in, out, d, &where); break;
        case DataType::u8: ok = divide_matches<std::uint8_t>(t, in, out, d, &where); break;
        case DataType::i32: ok = divide_matches<std::int32_t>(t, in, out, d, &where); break;
        case DataType::u32: ok = divide_matches<std::uint32_t>(t, in, out, d, &where); break;
        case DataType::i64: ok = divide_matches<std::int64_t>(t, in, out, d, &where); break;
        case DataType::u64: ok = divide_matches<std::uint64_t>(t, in, out, d, &where); break;
        case DataType::e4m3:
        case DataType::e5m2:
        case DataType::i4: ok = true; break;  // test_fp8.cpp / test_int4.cpp
        case DataType::mxfp8_e4m3: case DataType::mxfp8_e5m2: case DataType::mxint8:
        case DataType::mxfp4: case DataType::mxfp6_e2m3: case DataType::mxfp6_e3m2: ok = true; break;  // test_mx_type.cpp
      }
      ASSERT_TRUE(ok) << "divisor " << d << " count " << n << " element " << where << ": "
                      << load_as_double(t, in.data(), where) << " -> "
                      << load_as_double(t, out.data(), where);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Numerics, DivideAll, ::testing::ValuesIn(kAllTypes),
                         [](const auto& info) { return std::string(name(info.param)); });

TEST(Divide, EdgeCases) {
  std::int64_t i64[] = {std::numeric_limits<std::int64_t>::min(), -7, 7, -1};
  divide(DataType::i64, i64, 4, 2);
  EXPECT_EQ(i64[0], std::numeric_limits<std::int64_t>::min() / 2);
  EXPECT_EQ(i64[1], -3);  // truncation toward zero
  EXPECT_EQ(i64[2], 3);
  EXPECT_EQ(i64[3], 0);
  std::int64_t big[] = {std::numeric_limits<std::int64_t>::min(),
                        std::numeric_limits<std::int64_t>::max()};
  divide(DataType::i64, big, 2, ~0ull);  // divisor beyond int64: every quotient is 0
  EXPECT_EQ(big[0], 0);
  EXPECT_EQ(big[1], 0);
  std::uint64_t u[] = {~0ull};
  divide(DataType::u64, u, 1, ~0ull);
  EXPECT_EQ(u[0], 1u);
  std::int8_t i8[] = {-128, 127};
  divide(DataType::i8, i8, 2, 1000);
  EXPECT_EQ(i8[0], 0);
  EXPECT_EQ(i8[1], 0);
  float f[] = {1.0f, 0.0f};
  divide(DataType::f32, f, 2, 0);  // n == 0: left untouched, documented as a caller error
  EXPECT_EQ(f[0], 1.0f);
  std::uint16_t h[] = {f32_to_f16(65504.0f), 0x0001, 0x7c00};
  divide(DataType::f16, h, 3, 2);
  EXPECT_EQ(f16_to_f32(h[0]), 32752.0f);
  EXPECT_EQ(h[1], 0x0000);  // half the smallest subnormal: tie -> even (0)
  EXPECT_EQ(h[2], 0x7c00);
}

// avg = sum, then divide by the number of contributions (as NCCL does).
TEST(Divide, AvgIsSumThenDivide) {
  const float a[] = {1.0f, 2.0f, -3.0f};
  const float b[] = {2.0f, 2.0f, 0.5f};
  float d[3];
  reduce(DataType::f32, ReduceOp::avg, d, a, b, 3);
  divide(DataType::f32, d, 3, 2);
  EXPECT_EQ(d[0], 1.5f);
  EXPECT_EQ(d[1], 2.0f);
  EXPECT_EQ(d[2], -1.25f);
  const std::int32_t ia[] = {7, -7, std::numeric_limits<std::int32_t>::max()};
  const std::int32_t ib[] = {0, 0, 1};
  std::int32_t id[3];
  reduce(DataType::i32, ReduceOp::avg, id, ia, ib, 3);
  divide(DataType::i32, id, 3, 2);
  EXPECT_EQ(id[0], 3);
  EXPECT_EQ(id[1], -3);
  EXPECT_EQ(id[2], std::numeric_limits<std::int32_t>::min() / 2);  // the sum wrapped first
}

// ---- load_as_double / store_from_double ---------------------------------------------------

TEST(ElementAccess, ExactRoundTrips) {
  for (std::uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<std::uint16_t>(i);
    for (DataType t : {DataType::f16, DataType::bf16}) {
      const double v = load_as_double(t, &h, 0);
      const long double want =
          t == DataType::f16 ? ref::decode(ref::kF16, h) : ref::decode(ref::kBF16, h);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(v)) << std::hex << i;
        continue;
      }
      EXPECT_EQ(v, static_cast<double>(want)) << std::hex << i;
      std::uint16_t back = 0;
      store_from_double(t, &back, 0, v);
      ASSERT_EQ(back, h) << name(t) << " " << std::hex << i;
    }
  }
  std::mt19937_64 rng(4242);
  for (int i = 0; i < 100000; ++i) {
    const std::uint64_t bits = rng();
    for (DataType t : {DataType::i8, DataType::u8, DataType::i32, DataType::u32, DataType::f32,
                       DataType::f64}) {
      if ((t == DataType::f32 && std::isnan(ref::float_of(static_cast<std::uint32_t>(bits)))) ||
          (t == DataType::f64 && (bits & 0x7ff0000000000000ull) == 0x7ff0000000000000ull))
        continue;
      std::uint64_t back = 0;
      store_from_double(t, &back, 0, load_as_double(t, &bits, 0));
      const std::uint64_t mask = size_of(t) == 8 ? ~0ull : (1ull << (8 * size_of(t))) - 1;
      ASSERT_EQ(back, bits & mask) << name(t);
    }
    // 64-bit integers: exact up to 2^53 in magnitude.
    const std::int64_t s = static_cast<std::int64_t>(bits) >> 10;
    std::int64_t s_back = 0;
    store_from_double(DataType::i64, &s_back, 0, load_as_double(DataType::i64, &s, 0));
    ASSERT_EQ(s_back, s);
    const std::uint64_t u = bits >> 11;
    std::uint64_t u_back = 0;
    store_from_double(DataType::u64, &u_back, 0, load_as_double(DataType::u64, &u, 0));
    ASSERT_EQ(u_back, u);
  }
}

TEST(ElementAccess, IndexingAndUnalignedBuffers) {
  alignas(8) unsigned char buf[1 + 5 * 8] = {};
  for (DataType t : kAllTypes) {
    for (std::size_t i = 0; i < 5; ++i) store_from_double(t, buf + 1, i, static_cast<double>(i + 1));
    for (std::size_t i = 0; i < 5; ++i)
      EXPECT_EQ(load_as_double(t, buf + 1, i), static_cast<double>(i + 1)) << name(t);
  }
}

TEST(ElementAccess, StoreSaturatesAndTruncates) {
  std::int8_t i8 = 0;
  store_from_double(DataType::i8, &i8, 0, 1e9);
  EXPECT_EQ(i8, 127);
  store_from_double(DataType::i8, &i8, 0, -129.5);
  EXPECT_EQ(i8, -128);
  store_from_double(DataType::i8, &i8, 0, 128.0);
  EXPECT_EQ(i8, 127);
  store_from_double(DataType::i8, &i8, 0, 200.0);
  EXPECT_EQ(i8, 127);
  store_from_double(DataType::i8, &i8, 0, 127.9);
  EXPECT_EQ(i8, 127);
  store_from_double(DataType::i8, &i8, 0, -2.7);
  EXPECT_EQ(i8, -2);
  store_from_double(DataType::i8, &i8, 0, std::nan(""));
  EXPECT_EQ(i8, 0);
  std::uint8_t u8 = 1;
  store_from_double(DataType::u8, &u8, 0, -5.0);
  EXPECT_EQ(u8, 0);
  store_from_double(DataType::u8, &u8, 0, 255.9);
  EXPECT_EQ(u8, 255);
  store_from_double(DataType::u8, &u8, 0, 256.0);
  EXPECT_EQ(u8, 255);
  std::uint64_t u64 = 0;
  store_from_double(DataType::u64, &u64, 0, 1e30);
  EXPECT_EQ(u64, ~0ull);
  store_from_double(DataType::u64, &u64, 0, 18446744073709549568.0);  // largest double < 2^64
  EXPECT_EQ(u64, 18446744073709549568ull);
  std::int64_t i64 = 0;
  store_from_double(DataType::i64, &i64, 0, 9223372036854775808.0);  // 2^63
  EXPECT_EQ(i64, std::numeric_limits<std::int64_t>::max());
  store_from_double(DataType::i64, &i64, 0, -9223372036854775808.0);
  EXPECT_EQ(i64, std::numeric_limits<std::int64_t>::min());
  store_from_double(DataType::i64, &i64, 0, -INFINITY);
  EXPECT_EQ(i64, std::numeric_limits<std::int64_t>::min());
  std::int32_t i32 = 0;
  store_from_double(DataType::i32, &i32, 0, 3e9);
  EXPECT_EQ(i32, std::numeric_limits<std::int32_t>::max());
  std::uint32_t u32 = 0;
  store_from_double(DataType::u32, &u32, 0, 4294967295.0);
  EXPECT_EQ(u32, 4294967295u);
  // Floats: f16/bf16 round once from f64 (no double rounding through f32).
  std::uint16_t h = 0;
  store_from_double(DataType::f16, &h, 0, 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40));
  EXPECT_EQ(h, 0x3c01);
  float f = 0;
  store_from_double(DataType::f32, &f, 0, 1e300);
  EXPECT_TRUE(std::isinf(f));
}

}  // namespace
}  // namespace inc::numerics
