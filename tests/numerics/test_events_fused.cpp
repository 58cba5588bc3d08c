// The event count fused into the sum's loop (src/numerics/kernels_counted.hpp) against a
// scalar reference written here, element by element: for every element type, every compiled
// kernel variant, many lengths (whole blocks, tails, fewer elements than a block), in place
// (dst == a, dst == b) and not, on random bits and on adversarial inputs (events at a block's
// first/last element and in the tail, inf/NaN operands that trip the float screen without an
// event, next to real overflows). The sum must be reduce()'s, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "numerics/events.hpp"
#include "numerics/kernel_isa.hpp"
#include "numerics/reduce.hpp"

namespace inc::numerics {
namespace {

using detail::KernelIsa;

constexpr DataType kAll[] = {DataType::f64, DataType::f32, DataType::f16, DataType::bf16, DataType::i8,
                             DataType::u8,  DataType::i32, DataType::u32, DataType::i64, DataType::u64,
                             DataType::e4m3, DataType::e5m2, DataType::i4};

template <class T>
T get(const unsigned char* p, std::size_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof(T));
  return v;
}

template <class T>
std::uint64_t int_ref(const unsigned char* a, const unsigned char* b, std::size_t n) {
  std::uint64_t ev = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const __int128 s = static_cast<__int128>(get<T>(a, i)) + static_cast<__int128>(get<T>(b, i));
    ev += s < static_cast<__int128>(std::numeric_limits<T>::min()) ||
          s > static_cast<__int128>(std::numeric_limits<T>::max());
  }
  return ev;
}

template <class F>
std::uint64_t float_ref(const unsigned char* a, const unsigned char* b, std::size_t n) {
  std::uint64_t ev = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const F x = get<F>(a, i), y = get<F>(b, i);
    ev += std::isfinite(x) && std::isfinite(y) && !std::isfinite(x + y);
  }
  return ev;
}

// Element-wise: finite operands (decoded by load_as_double) whose one-element sum is not.
std::uint64_t narrow_float_ref(DataType t, const unsigned char* a, const unsigned char* b, std::size_t n) {
  std::uint64_t ev = 0;
  const std::size_t sz = size_of(t);
  for (std::size_t i = 0; i < n; ++i) {
    unsigned char r[2];
    reduce(t, ReduceOp::sum, r, a + i * sz, b + i * sz, 1);
    ev += std::isfinite(load_as_double(t, a, i)) && std::isfinite(load_as_double(t, b, i)) &&
          !std::isfinite(load_as_double(t, r, 0));
  }
  return ev;
}

std::uint64_t i4_ref(const unsigned char* a, const unsigned char* b, std::size_t n) {
  std::uint64_t ev = 0;
  for (std::size_t i = 0; i < 2 * n; ++i) {
    const double s = load_as_double(DataType::i4, a, i) + load_as_double(DataType::i4, b, i);
    ev += s < -8 || s > 7;
  }
  return ev;
}

std::uint64_t reference(DataType t, const unsigned char* a, const unsigned char* b, std::size_t n) {
  switch (t) {
    case DataType::f64: return float_ref<double>(a, b, n);
    case DataType::f32: return float_ref<float>(a, b, n);
    case DataType::i8: return int_ref<std::int8_t>(a, b, n);
    case DataType::u8: return int_ref<std::uint8_t>(a, b, n);
    case DataType::i32: return int_ref<std::int32_t>(a, b, n);
    case DataType::u32: return int_ref<std::uint32_t>(a, b, n);
    case DataType::i64: return int_ref<std::int64_t>(a, b, n);
    case DataType::u64: return int_ref<std::uint64_t>(a, b, n);
    case DataType::i4: return i4_ref(a, b, n);
    default: return narrow_float_ref(t, a, b, n);
  }
}

// Bit patterns of the type's large magnitudes (both signs) and its non-finite values.
std::vector<std::uint64_t> edges(DataType t) {
  switch (t) {
    case DataType::f64: return {0x7fefffffffffffffull, 0x7fe0000000000000ull, 0x7ff0000000000000ull, 0x7ff8000000000001ull, 0x7ff0000000000001ull, 0x3ff0000000000000ull};
    case DataType::f32: return {0x7f7fffff, 0x7f000000, 0x7f7ffffe, 0x7f800000, 0x7fc00001, 0x7f800001, 0x3f800000};
    case DataType::f16: return {0x7bff, 0x7800, 0x7c00, 0x7e01, 0x7c01, 0x3c00};
    case DataType::bf16: return {0x7f7f, 0x7f00, 0x7f80, 0x7fc1, 0x7f81, 0x3f80};
    case DataType::e4m3: return {0x7e, 0x7d, 0x7f, 0x70, 0x38};
    case DataType::e5m2: return {0x7b, 0x78, 0x7c, 0x7d, 0x7f, 0x3c};
    default: {
      const unsigned bits = 8 * static_cast<unsigned>(size_of(t));
      const std::uint64_t top = bits == 64 ? ~0ull : (1ull << bits) - 1;
      return {top, top >> 1, top >> 2, (top >> 1) + 1, 1, top - 1};  // max, half-range, min, ...
    }
  }
}

// Adversarial buffer: mostly small values; events and screen trips placed by `mode`.
std::vector<unsigned char> make(DataType t, std::size_t n, int mode, std::mt19937_64& rng) {
  const std::size_t sz = size_of(t);
  std::vector<unsigned char> v(n * sz);
  const auto e = edges(t);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t bits = rng();
    bool small = true;
    if (mode == 0) small = false;                               // raw random bits
    else if (mode == 1) small = rng() % 64 != 0;                 // sparse edges
    else if (mode == 2) small = (i % 16 != 0 && i % 16 != 15 && i + 1 != n);  // block ends, last
    else if (mode == 3) small = rng() % 2 != 0;                  // dense edges
    if (small) {
      if (is_floating(t)) store_from_double(t, v.data(), i, static_cast<double>(static_cast<int>(bits % 7)) - 3.0);
      else std::memset(v.data() + i * sz, static_cast<int>(bits % 3), 1), std::memset(v.data() + i * sz + 1, 0, sz - 1);
      continue;
    }
    if (mode != 0) bits = e[rng() % e.size()] | ((rng() & 1) ? 1ull << (8 * sz - 1) : 0);  // random sign
    std::memcpy(v.data() + i * sz, &bits, sz);  // little-endian: the low bytes
  }
  return v;
}

std::vector<KernelIsa> isas() {
  std::vector<KernelIsa> v;
  for (KernelIsa isa : detail::kAllKernelIsas)
    if (detail::kernel_isa_available(isa)) v.push_back(isa);
  return v;
}

// Same bits, except that two NaNs are equal (which NaN an add of two NaNs returns depends on
// the operand order the compiler picked: "NaN payloads aside", kernels.hpp).
::testing::AssertionResult same_sums(DataType t, const std::vector<unsigned char>& got,
                                     const std::vector<unsigned char>& want, std::size_t n) {
  const std::size_t sz = t == DataType::i4 ? 1 : size_of(t);
  for (std::size_t i = 0; i < n; ++i) {
    if (std::memcmp(got.data() + i * sz, want.data() + i * sz, sz) == 0) continue;
    if (is_floating(t) && std::isnan(load_as_double(t, got.data(), i)) && std::isnan(load_as_double(t, want.data(), i)))
      continue;
    return ::testing::AssertionFailure() << "element " << i << " differs";
  }
  return ::testing::AssertionSuccess();
}

void check_one(DataType t, const std::vector<unsigned char>& a, const std::vector<unsigned char>& b,
               std::size_t n, const char* what) {
  const std::uint64_t want = reference(t, a.data(), b.data(), n);
  std::vector<unsigned char> sum(a.size());
  reduce(t, ReduceOp::sum, sum.data(), a.data(), b.data(), n);
  SCOPED_TRACE(std::string(name(t)) + " n=" + std::to_string(n) + " " + what);
  {
    std::vector<unsigned char> d(a.size());
    EXPECT_EQ(reduce_counted(t, ReduceOp::sum, d.data(), a.data(), b.data(), n), want);
    EXPECT_TRUE(same_sums(t, d, sum, n));
  }
  {
    auto d = a;  // dst == a
    EXPECT_EQ(reduce_counted(t, ReduceOp::sum, d.data(), d.data(), b.data(), n), want);
    EXPECT_TRUE(same_sums(t, d, sum, n));
  }
  {
    auto d = b;  // dst == b
    EXPECT_EQ(reduce_counted(t, ReduceOp::sum, d.data(), a.data(), d.data(), n), want);
    EXPECT_TRUE(same_sums(t, d, sum, n));
  }
  for (KernelIsa isa : isas()) {  // each variant's fused kernel directly
    auto d = a;
    std::uint64_t ev = ~0ull;
    if (!detail::sum_counted_with(isa, t, d.data(), d.data(), b.data(), n, ev)) continue;
    EXPECT_EQ(ev, want) << name(isa);
    EXPECT_TRUE(same_sums(t, d, sum, n)) << name(isa);
  }
}

TEST(EventsFused, MatchesScalarReferenceOnEveryTypeLengthAndVariant) {
  std::mt19937_64 rng(2027);
  std::vector<std::size_t> lengths;
  for (std::size_t n = 0; n <= 300; ++n) lengths.push_back(n);
  for (std::size_t n : {511u, 512u, 513u, 1000u, 4099u, 16384u + 31u}) lengths.push_back(n);
  for (DataType t : kAll)
    for (std::size_t n : lengths)
      for (int mode = 0; mode < 4; ++mode) {
        if (n > 300 && mode == 0) continue;
        const auto a = make(t, n, mode, rng), b = make(t, n, mode, rng);
        check_one(t, a, b, n, mode == 0 ? "random" : mode == 1 ? "sparse" : mode == 2 ? "block ends" : "dense");
      }
}

// inf/NaN operands trip the float screen without an event; an overflow next to them still counts.
TEST(EventsFused, NonFiniteOperandsTripTheScreenButCountNothing) {
  for (std::size_t n : {32u, 64u, 100u}) {
    std::vector<float> x(n, 1.0f), y(n, 2.0f);
    x[3] = INFINITY;
    y[5] = NAN;
    x[7] = INFINITY, y[7] = -INFINITY;
    std::vector<unsigned char> a(4 * n), b(4 * n);
    std::memcpy(a.data(), x.data(), a.size());
    std::memcpy(b.data(), y.data(), b.size());
    check_one(DataType::f32, a, b, n, "non-finite only");
    ASSERT_EQ(reference(DataType::f32, a.data(), b.data(), n), 0u);
    x[9] = 3e38f, y[9] = 3e38f;  // one overflow in the same block
    x[n - 1] = -3e38f, y[n - 1] = -3e38f;  // and one at the end
    std::memcpy(a.data(), x.data(), a.size());
    std::memcpy(b.data(), y.data(), b.size());
    ASSERT_EQ(reference(DataType::f32, a.data(), b.data(), n), 2u);
    check_one(DataType::f32, a, b, n, "non-finite and overflows");
  }
}

// bf16, fp8 and i4 (the small types' fused loop, kernels_counted.hpp): each kind of event -- an
// overflow of either sign (bf16/e5m2 to infinity, e4m3 to NaN), an i4 wrap up and down in the low
// and the high nibble -- and the non-finite operands that trip the screen without an event, in a
// block's first and last element and in the tail, alone and beside each other.
TEST(EventsFused, SmallTypesCountEveryEventKind) {
  struct Case {
    DataType t;
    std::vector<std::pair<std::uint8_t, std::uint8_t>> events, quiet;  // bytes of a 1-byte element
    std::vector<std::pair<std::uint16_t, std::uint16_t>> events16, quiet16;
  };
  const Case cases[] = {
      {DataType::bf16, {}, {}, {{0x7f7f, 0x7f7f}, {0xff7f, 0xff7f}, {0x7f70, 0x7f40}}, {{0x7f80, 0x3f80}, {0x7fc1, 0x3f80}, {0xff80, 0x7f80}, {0x7f7f, 0xff7f}}},
      {DataType::e4m3, {{0x7e, 0x7e}, {0xfe, 0xfe}, {0x7c, 0x78}}, {{0x7f, 0x38}, {0xff, 0x7e}, {0x7e, 0xfe}}, {}, {}},
      {DataType::e5m2, {{0x7b, 0x7b}, {0xfb, 0xfb}, {0x7a, 0x78}}, {{0x7c, 0x3c}, {0xfc, 0x7c}, {0x7d, 0x3c}, {0x7b, 0xfb}}, {}, {}},
      {DataType::i4, {{0x07, 0x01}, {0x08, 0x0f}, {0x70, 0x10}, {0x80, 0xf0}, {0x77, 0x11}}, {{0x07, 0x0f}, {0x88, 0x77}, {0xf0, 0x70}}, {}, {}},
  };
  std::mt19937_64 rng(33);
  for (const Case& c : cases) {
    const std::size_t sz = size_of(c.t), block = 128 / sz;
    const bool wide = sz == 2;
    const std::size_t kinds = wide ? c.events16.size() : c.events.size();
    const std::size_t quiets = wide ? c.quiet16.size() : c.quiet.size();
    for (std::size_t n : {block, 2 * block + 5, 3 * block + block / 2, std::size_t{7}}) {
      for (std::size_t trial = 0; trial < 40; ++trial) {
        std::vector<unsigned char> a(n * sz), b(n * sz);
        for (std::size_t i = 0; i < n; ++i) {  // small values: 1.0 (floats) or 1 + 1 nibbles (i4)
          const std::uint16_t one = c.t == DataType::bf16 ? 0x3f80 : c.t == DataType::e4m3 ? 0x38 : c.t == DataType::e5m2 ? 0x3c : 0x11;
          std::memcpy(a.data() + i * sz, &one, sz);
          std::memcpy(b.data() + i * sz, &one, sz);
        }
        // events and quiet trips at the ends of blocks, the last element and random places
        const std::size_t places[] = {0, block - 1 < n ? block - 1 : n - 1, n - 1, rng() % n, rng() % n};
        for (std::size_t p : places) {
          const bool ev = (rng() & 1) != 0 || quiets == 0;
          const std::size_t k = rng() % (ev ? kinds : quiets);
          std::uint16_t x, y;
          if (wide) std::tie(x, y) = ev ? c.events16[k] : c.quiet16[k];
          else std::tie(x, y) = ev ? c.events[k] : c.quiet[k];
          if (rng() & 1) std::swap(x, y);
          std::memcpy(a.data() + p * sz, &x, sz);
          std::memcpy(b.data() + p * sz, &y, sz);
        }
        check_one(c.t, a, b, n, "event kinds");
      }
    }
    // each event kind alone counts once per element, each quiet trip counts nothing
    for (std::size_t k = 0; k < kinds + quiets; ++k) {
      std::vector<unsigned char> a(block * sz, 0), b(block * sz, 0);
      std::uint16_t x, y;
      if (wide) std::tie(x, y) = k < kinds ? c.events16[k] : c.quiet16[k - kinds];
      else std::tie(x, y) = k < kinds ? c.events[k] : c.quiet[k - kinds];
      std::memcpy(a.data() + 5 * sz, &x, sz);
      std::memcpy(b.data() + 5 * sz, &y, sz);
      const std::uint64_t want = reference(c.t, a.data(), b.data(), block);
      if (k >= kinds) EXPECT_EQ(want, 0u) << name(c.t) << " quiet case " << k - kinds;
      else EXPECT_GE(want, 1u) << name(c.t) << " event case " << k;
      check_one(c.t, a, b, block, k < kinds ? "one event" : "one quiet trip");
    }
  }
}

// The counted sums of the small types give reduce()'s bits exactly, NaN payloads and signs
// included (same_sums above lets two NaNs pass): every pair of fp8 and i4 bytes, and bf16 pairs
// of every pattern with NaNs, infinities and large values of both signs, on every variant.
TEST(EventsFused, SmallTypesEqualReduceBitForBitNaNsIncluded) {
  std::mt19937_64 rng(44);
  for (DataType t : {DataType::e4m3, DataType::e5m2, DataType::i4, DataType::bf16}) {
    const std::size_t sz = size_of(t), n = 65536 + 77;
    std::vector<unsigned char> a(n * sz), b(n * sz);
    for (std::size_t i = 0; i < n; ++i) {
      if (sz == 1) {
        a[i] = static_cast<unsigned char>(i & 0xff);
        b[i] = static_cast<unsigned char>((i >> 8) & 0xff);
        continue;
      }
      const auto x = static_cast<std::uint16_t>(i), y = static_cast<std::uint16_t>(rng() % 3 == 0 ? rng() : (rng() & 0x80ff) | 0x7f00);
      std::memcpy(a.data() + 2 * i, &x, 2);
      std::memcpy(b.data() + 2 * i, &y, 2);
    }
    for (KernelIsa isa : isas()) {
      std::vector<unsigned char> want(a.size()), got = a;
      reduce_with(isa, t, ReduceOp::sum, want.data(), a.data(), b.data(), n);
      std::uint64_t ev = 0;
      ASSERT_TRUE(detail::sum_counted_with(isa, t, got.data(), got.data(), b.data(), n, ev));
      for (std::size_t i = 0; i < n * sz; ++i)
        ASSERT_EQ(got[i], want[i]) << name(t) << " byte " << i << " " << name(isa);
    }
  }
}

}  // namespace
}  // namespace inc::numerics
