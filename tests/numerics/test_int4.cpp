// i4 (signed 4-bit, two per byte, low nibble first): all 65536 byte pairs for every op on
// every kernel variant, divide for every byte and divisor, element access and saturation.
// Reference: nibbles decoded by hand (n >= 8 ? n - 16 : n), results reduced modulo 16 with %.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "numerics/kernel_isa.hpp"
#include "numerics/reduce.hpp"
#include "tests/numerics/byte_pairs.hpp"

namespace inc::numerics {
namespace {

int nib(unsigned byte, int hi) {
  const int n = static_cast<int>((byte >> (4 * hi)) & 0xf);
  return n >= 8 ? n - 16 : n;
}
unsigned wrap16(long v) { return static_cast<unsigned>(((v % 16) + 16) % 16); }

TEST(Int4, ReduceAllBytePairsEveryOpEveryVariant) {
  test::for_all_byte_pairs(DataType::i4, [](auto, ReduceOp op, const auto& a, const auto& b, const auto& out) {
    for (unsigned i = 0; i < 65536; ++i) {
      unsigned want = 0;
      for (int hi = 0; hi < 2; ++hi) {
        const long x = nib(a[i], hi), y = nib(b[i], hi);
        long r = x + y;
        if (op == ReduceOp::prod) r = x * y;
        if (op == ReduceOp::min) r = x < y ? x : y;
        if (op == ReduceOp::max) r = x > y ? x : y;
        want |= wrap16(r) << (4 * hi);
      }
      ASSERT_EQ(out[i], want) << name(op) << " bytes " << int{a[i]} << "," << int{b[i]};
    }
  });
  // The paper's example: 7 + (-5) wraps nowhere, 7 + 5 wraps to -4 (0xc).
  std::uint8_t x = 0x57, y = 0x55, r = 0;  // elements (7, 5) and (5, 5)
  reduce(DataType::i4, ReduceOp::sum, &r, &x, &y, 1);
  EXPECT_EQ(load_as_double(DataType::i4, &r, 0), -4.0);  // 7 + 5 = 12 = -4 mod 16
  EXPECT_EQ(load_as_double(DataType::i4, &r, 1), -6.0);  // 5 + 5 = 10 = -6 mod 16
}

TEST(Int4, DivideTruncatesEveryByteEveryDivisor) {
  for (std::uint64_t d : {1ull, 2ull, 3ull, 4ull, 5ull, 7ull, 8ull, 9ull, 15ull, 16ull, 17ull, ~0ull}) {
    std::vector<std::uint8_t> buf(256);
    for (unsigned i = 0; i < 256; ++i) buf[i] = static_cast<std::uint8_t>(i);
    divide(DataType::i4, buf.data(), buf.size(), d);
    for (unsigned i = 0; i < 256; ++i) {
      unsigned want = 0;
      for (int hi = 0; hi < 2; ++hi)
        want |= wrap16(static_cast<long>(std::trunc(nib(i, hi) / static_cast<double>(d)))) << (4 * hi);
      ASSERT_EQ(buf[i], want) << "byte " << i << " / " << d;
    }
  }
}

TEST(Int4, ElementAccessLowNibbleFirstAndSaturation) {
  std::uint8_t buf[2] = {0, 0};
  for (int v = -8; v <= 7; ++v) {
    store_from_double(DataType::i4, buf, 1, v);      // high nibble of byte 0
    store_from_double(DataType::i4, buf, 2, -1 - v); // low nibble of byte 1
    EXPECT_EQ(buf[0] >> 4, static_cast<unsigned>(v) & 0xf);
    EXPECT_EQ(buf[1] & 0xf, static_cast<unsigned>(-1 - v) & 0xf);
    EXPECT_EQ(load_as_double(DataType::i4, buf, 1), v);
    EXPECT_EQ(load_as_double(DataType::i4, buf, 2), -1 - v);
    EXPECT_EQ(buf[0] & 0xf, 0u) << "the other nibble is kept";
    EXPECT_EQ(buf[1] >> 4, 0u);
  }
  store_from_double(DataType::i4, buf, 0, 100.0);
  EXPECT_EQ(load_as_double(DataType::i4, buf, 0), 7.0);
  store_from_double(DataType::i4, buf, 0, -9.5);
  EXPECT_EQ(load_as_double(DataType::i4, buf, 0), -8.0);
  store_from_double(DataType::i4, buf, 0, -2.9);
  EXPECT_EQ(load_as_double(DataType::i4, buf, 0), -2.0);
  store_from_double(DataType::i4, buf, 0, NAN);
  EXPECT_EQ(load_as_double(DataType::i4, buf, 0), 0.0);
}

TEST(Int4, TypeTraits) {
  EXPECT_EQ(size_of(DataType::i4), 1u);
  EXPECT_EQ(elements_per_unit(DataType::i4), 2u);
  EXPECT_EQ(elements_per_unit(DataType::e4m3), 1u);
  EXPECT_FALSE(is_floating(DataType::i4));
  EXPECT_TRUE(is_floating(DataType::e5m2));
}

}  // namespace
}  // namespace inc::numerics
