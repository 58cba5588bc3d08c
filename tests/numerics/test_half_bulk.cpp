// f16/bf16 <-> f32 for whole vectors (src/numerics/minifloat.hpp: half_to_f32, f32_to_half), every
// compiled variant against the scalar conversions of half.hpp, bit for bit (NaNs included):
// every 16-bit pattern widened; narrowing of every f32 near a rounding point of either format
// (each 16-bit pattern with the dropped bits at 0, just below, at and just above the tie, and
// all ones), a million random words, every length 0-40 (tails), unaligned, and in place.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "numerics/half.hpp"
#include "numerics/kernel_isa.hpp"
#include "tests/numerics/kernel_isas.hpp"
#include "numerics/minifloat.hpp"

namespace inc::numerics {
namespace {

using detail::KernelIsa;

std::vector<KernelIsa> isas() { return testing::available_isas(); }

std::uint16_t scalar_narrow(DataType t, std::uint32_t x) {
  const float f = __builtin_bit_cast(float, x);
  return t == DataType::f16 ? f32_to_f16(f) : f32_to_bf16(f);
}

TEST(HalfBulk, EveryPatternWidensAsTheScalarConversion) {
  std::vector<std::uint16_t> h(65536 + 3);
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = static_cast<std::uint16_t>(i);
  for (DataType t : {DataType::f16, DataType::bf16})
    for (KernelIsa isa : isas())
      for (std::size_t skew : {0u, 1u, 3u}) {  // 2-byte and odd offsets into the buffer
        std::vector<unsigned char> in(2 * h.size() + 8);
        std::memcpy(in.data() + skew, h.data(), 2 * h.size());
        std::vector<float> out(h.size() + 1, -7.0f);
        detail::half_to_f32_with(isa, t, in.data() + skew, h.size(), out.data());
        for (std::size_t i = 0; i < h.size(); ++i) {
          const float want = t == DataType::f16 ? f16_to_f32(h[i]) : bf16_to_f32(h[i]);
          ASSERT_EQ(__builtin_bit_cast(std::uint32_t, out[i]), __builtin_bit_cast(std::uint32_t, want))
              << name(t) << " pattern " << h[i] << " " << detail::name(isa);
        }
        ASSERT_EQ(out.back(), -7.0f) << "written past the end";
      }
}

std::vector<std::uint32_t> narrowing_inputs(DataType t) {
  std::vector<std::uint32_t> v;
  // The bits a 16-bit result drops: 16 for bf16; 13 for f16 (normal results; subnormal ones
  // drop more, and their ties come from the random words and the binade sweep below).
  const unsigned drop = t == DataType::bf16 ? 16 : 13;
  const std::uint32_t tie = 1u << (drop - 1), all = (1u << drop) - 1;
  for (std::uint32_t hi = 0; hi < (1u << (32 - drop)); ++hi)
    for (std::uint32_t lo : {0u, tie - 1, tie, tie + 1, all}) v.push_back(hi << drop | lo);
  if (t == DataType::f16)  // every f32 in f16's subnormal and lowest normal binades, sampled densely
    for (std::uint32_t x = 0x33000000u; x < 0x38800000u; x += 0x101) v.push_back(x), v.push_back(x | 0x80000000u);
  std::mt19937 rng(14);
  for (int i = 0; i < 1000000; ++i) v.push_back(static_cast<std::uint32_t>(rng()));
  return v;
}

TEST(HalfBulk, NarrowingRoundsAsTheScalarConversionAtEveryTie) {
  for (DataType t : {DataType::f16, DataType::bf16}) {
    const auto x = narrowing_inputs(t);
    std::vector<std::uint16_t> want(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) want[i] = scalar_narrow(t, x[i]);
    for (KernelIsa isa : isas()) {
      std::vector<unsigned char> out(2 * x.size() + 2, 0xee);
      detail::f32_to_half_with(isa, t, reinterpret_cast<const float*>(x.data()), x.size(), out.data());
      for (std::size_t i = 0; i < x.size(); ++i) {
        std::uint16_t got;
        std::memcpy(&got, out.data() + 2 * i, 2);
        ASSERT_EQ(got, want[i]) << name(t) << " f32 0x" << std::hex << x[i] << " " << detail::name(isa);
      }
      ASSERT_EQ(out[2 * x.size()], 0xee) << "written past the end";
    }
  }
}

TEST(HalfBulk, EveryLengthInPlaceAndNot) {
  std::mt19937 rng(15);
  for (DataType t : {DataType::f16, DataType::bf16})
    for (std::size_t n = 0; n <= 40; ++n)
      for (KernelIsa isa : isas()) {
        std::vector<std::uint32_t> x(n);
        for (auto& w : x) w = static_cast<std::uint32_t>(rng());
        std::vector<unsigned char> out(2 * n + 4, 0xee), inplace(4 * n + 4, 0xee);
        if (n) std::memcpy(inplace.data(), x.data(), 4 * n);
        detail::f32_to_half_with(isa, t, reinterpret_cast<const float*>(x.data()), n, out.data());
        detail::f32_to_half_with(isa, t, reinterpret_cast<const float*>(inplace.data()), n, inplace.data());
        for (std::size_t i = 0; i < n; ++i) {
          std::uint16_t a, b;
          std::memcpy(&a, out.data() + 2 * i, 2);
          std::memcpy(&b, inplace.data() + 2 * i, 2);
          ASSERT_EQ(a, scalar_narrow(t, x[i])) << name(t) << " n=" << n << " i=" << i << " " << detail::name(isa);
          ASSERT_EQ(b, a) << "in place: " << name(t) << " n=" << n << " i=" << i << " " << detail::name(isa);
        }
        ASSERT_EQ(out[2 * n], 0xee) << "written past the end";
        std::vector<float> back(n + 1, -7.0f);
        detail::half_to_f32_with(isa, t, out.data(), n, back.data());
        ASSERT_EQ(back[n], -7.0f) << "written past the end";
      }
}

}  // namespace
}  // namespace inc::numerics
