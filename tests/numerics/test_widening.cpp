// The wide accumulators' width passes (src/numerics/widening.hpp): every compiled variant against
// the scalar (generic) passes, bit for bit and event for event. Widening: every 16-bit and 8-bit
// pattern, every MX scale with random codes; narrowing: every f32 at, just below and just above
// each rounding point of the 16- and 8-bit formats (all 2^16 top halves x 6 low halves), a
// million random words and the specials; random wide sums of 2-8 ranks' inputs (widen, add in
// f32, narrow) with overflows; each at every length 0-40 and unaligned offsets (the tails).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "numerics/kernel_isa.hpp"
#include "numerics/reduce.hpp"
#include "numerics/widening.hpp"
#include "tests/numerics/kernel_isas.hpp"

namespace inc::numerics {
namespace {

using detail::KernelIsa;

constexpr DataType kTypes[] = {DataType::f16,        DataType::bf16,       DataType::e4m3,       DataType::e5m2,
                               DataType::mxfp8_e4m3, DataType::mxfp8_e5m2, DataType::mxint8,     DataType::mxfp4,
                               DataType::mxfp6_e2m3, DataType::mxfp6_e3m2};

std::uint32_t bits(float f) { return __builtin_bit_cast(std::uint32_t, f); }

// Storage of the type holding every pattern: all 16- or 8-bit words; MX: for each of the 256
// scale codes, a block of random code bytes (every byte is a valid code in every packing).
std::vector<unsigned char> every_pattern(DataType t) {
  std::vector<unsigned char> v;
  if (is_mx(t)) {
    std::mt19937 rng(5);
    for (int scale = 0; scale < 256; ++scale)
      for (int rep = 0; rep < 3; ++rep) {
        v.push_back(static_cast<unsigned char>(scale));
        for (std::size_t i = 1; i < size_of(t); ++i) v.push_back(static_cast<unsigned char>(rng()));
      }
    for (int c = 0; c < 256 && size_of(t) == 1 + kMxBlockElements; c += 32) {  // 8-bit: every code
      v.push_back(127);
      for (int i = 0; i < 32; ++i) v.push_back(static_cast<unsigned char>(c + i));
    }
  } else if (size_of(t) == 2) {
    for (int h = 0; h < 65536; ++h) v.push_back(static_cast<unsigned char>(h)), v.push_back(static_cast<unsigned char>(h >> 8));
  } else {
    for (int c = 0; c < 256; ++c) v.push_back(static_cast<unsigned char>(c));
  }
  return v;
}

// widen on `isa` == widen on generic for `units` units at byte offset `skew`, nothing past the end.
void expect_widen_same(KernelIsa isa, DataType t, const unsigned char* src, std::size_t units, std::size_t skew) {
  const std::size_t n = units * elements_per_unit(t);
  std::vector<unsigned char> in(units * size_of(t) + skew);
  std::memcpy(in.data() + skew, src, units * size_of(t));
  std::vector<float> want(n), got(n + 1, -7.0f);
  detail::widen_to_f32_with(KernelIsa::generic, t, in.data() + skew, units, want.data());
  detail::widen_to_f32_with(isa, t, in.data() + skew, units, got.data());
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_EQ(bits(got[i]), bits(want[i])) << name(t) << " " << detail::name(isa) << " element " << i << " of " << n
                                           << " skew " << skew;
  ASSERT_EQ(got[n], -7.0f) << name(t) << ": written past the end";
}

// narrow on `isa` == narrow on generic (bytes and events) for n elements' units at unaligned dst.
void expect_narrow_same(KernelIsa isa, DataType t, const float* src, std::size_t units, std::size_t skew) {
  const std::size_t bytes = units * size_of(t);
  std::vector<unsigned char> want(bytes + skew + 1, 0xa5), got(bytes + skew + 1, 0xa5);
  const std::uint64_t ew = detail::narrow_from_f32_with(KernelIsa::generic, t, src, units, want.data() + skew);
  const std::uint64_t eg = detail::narrow_from_f32_with(isa, t, src, units, got.data() + skew);
  ASSERT_EQ(eg, ew) << name(t) << " " << detail::name(isa) << " events, " << units << " units";
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], want[i]) << name(t) << " " << detail::name(isa) << " byte " << i << " of " << bytes << " skew " << skew;
}

TEST(WidthPasses, EveryPatternWidensAsTheScalarPass) {
  for (DataType t : kTypes) {
    const std::vector<unsigned char> p = every_pattern(t);
    const std::size_t units = p.size() / size_of(t);
    for (KernelIsa isa : testing::available_isas()) {
      for (std::size_t skew : {0u, 1u, 3u}) expect_widen_same(isa, t, p.data(), units, skew);
      for (std::size_t u = 0; u <= 40 && u <= units; ++u)  // the tails, from an odd unit on
        expect_widen_same(isa, t, p.data() + (units > 41 ? size_of(t) : 0), std::min(u, units - 1), 1);
    }
  }
}

// f32 words at and around every rounding point of the 16- and 8-bit formats (their ties sit at
// bit 15 (bf16), 12 (f16), 19 (e4m3) and 20 (e5m2) of a normal value), specials, random words.
std::vector<float> narrowing_inputs() {
  std::vector<float> v;
  for (std::uint32_t hi = 0; hi < 65536; ++hi)
    for (std::uint32_t lo : {0u, 1u, 0x0fffu, 0x1000u, 0x1001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu})
      v.push_back(__builtin_bit_cast(float, hi << 16 | lo));
  std::mt19937 rng(21);
  for (int i = 0; i < 1000000; ++i) v.push_back(__builtin_bit_cast(float, static_cast<std::uint32_t>(rng())));
  for (float f : {65504.0f, 65520.0f, 65519.996f, 448.0f, 464.0f, 464.00003f, 57344.0f, 61440.0f, 61439.996f,
                  3.3895314e38f, 3.4028235e38f, 1e-45f, -0.0f})
    v.push_back(f), v.push_back(-f);
  while (v.size() % kMxBlockElements != 0) v.push_back(1.0f);
  return v;
}

TEST(WidthPasses, NarrowingGivesTheScalarPassBitsAndEvents) {
  const std::vector<float> in = narrowing_inputs();
  for (DataType t : kTypes) {
    const std::size_t epu = elements_per_unit(t), units = in.size() / epu;
    if (is_mx(t) && t != DataType::mxfp8_e4m3 && t != DataType::mxfp4) continue;  // one pass for all MX: two suffice
    for (KernelIsa isa : testing::available_isas()) {
      expect_narrow_same(isa, t, in.data(), units, 0);
      for (std::size_t u = 0; u <= 40; ++u) expect_narrow_same(isa, t, in.data() + epu * 7, u, 1);  // tails, unaligned
      std::vector<float> shifted(in.begin() + 1, in.begin() + 1 + 41 * static_cast<std::ptrdiff_t>(epu));
      for (std::size_t u = 0; u <= 40; ++u) expect_narrow_same(isa, t, shifted.data(), u, 3);
    }
  }
}

// Random wide sums: P ranks' inputs of the type (random patterns, a quarter of them near the
// top of the range, so that some f32 totals overflow the type), widened, added in f32 and
// narrowed once, on every variant: the same f32 sums, results and events as generic.
TEST(WidthPasses, RandomWideSumsNarrowTheSameOnEveryVariant) {
  std::mt19937 rng(33);
  for (DataType t : kTypes) {
    std::uint64_t events_seen = 0;
    for (int P = 2; P <= 8; ++P)
      for (std::size_t units : {1u, 7u, 33u, 1001u}) {
        const std::size_t n = units * elements_per_unit(t), bytes = units * size_of(t);
        std::vector<float> w_v(n);
        std::vector<std::vector<float>> accs(testing::available_isas().size(), std::vector<float>(n, 0.0f));
        for (int r = 0; r < P; ++r) {
          std::vector<unsigned char> in(bytes);
          for (auto& b : in) b = static_cast<unsigned char>(rng());
          if (!is_mx(t))  // a quarter of the elements near the top of the range
            for (std::size_t i = size_of(t) - 1; i < bytes; i += 4 * size_of(t)) in[i] = static_cast<unsigned char>((in[i] & 0x80) | (t == DataType::bf16 ? 0x7f : 0x7b));
          std::size_t k = 0;
          for (KernelIsa isa : testing::available_isas()) {
            detail::widen_to_f32_with(isa, t, in.data(), units, w_v.data());
            reduce(DataType::f32, ReduceOp::sum, accs[k].data(), accs[k].data(), w_v.data(), n);
            ++k;
          }
        }
        std::vector<unsigned char> out_g(bytes), out_v(bytes);
        const std::uint64_t eg = detail::narrow_from_f32_with(KernelIsa::generic, t, accs[0].data(), units, out_g.data());
        events_seen += eg;
        for (std::size_t k = 1; k < accs.size(); ++k) {
          ASSERT_EQ(std::memcmp(accs[k].data(), accs[0].data(), 4 * n), 0) << name(t) << " f32 sums differ";
          const KernelIsa isa = testing::available_isas()[k];
          EXPECT_EQ(detail::narrow_from_f32_with(isa, t, accs[k].data(), units, out_v.data()), eg) << name(t);
          ASSERT_EQ(out_v, out_g) << name(t) << " " << P << " ranks, " << units << " units";
        }
      }
    // (bf16's range is f32's: its totals overflow in the f32 adds, counted there, not here.)
    if (!is_mx(t) && t != DataType::bf16) {
      EXPECT_GT(events_seen, 0u) << name(t) << ": no overflow exercised";
    }
  }
}

}  // namespace
}  // namespace inc::numerics
