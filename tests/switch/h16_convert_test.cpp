// The switch's f16/bf16 <-> f32 conversions of sum_widen (src/switch/arith_h16.cpp) on every
// kernel variant this CPU runs (generic: per element; x86_64_v3: F16C/AVX2) against
// src/numerics/half.hpp, which defines the bits (round to nearest even; a NaN keeps its sign and
// top payload bits and comes out quiet): widen over all 65536 patterns, narrow over every
// 16-bit value, the midpoints between neighbours (ties), one f32 ulp either side of them, every
// f32 NaN payload class and random bits, with its overflow count, at lengths with tails.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "src/numerics/half.hpp"
#include "src/numerics/kernel_isa.hpp"
#include "src/switch/arith.hpp"

namespace inc::sw {
namespace {

using numerics::detail::KernelIsa;

std::vector<KernelIsa> isas() {
  std::vector<KernelIsa> v;
  for (KernelIsa isa : numerics::detail::kAllKernelIsas)
    if (numerics::detail::kernel_isa_available(isa)) v.push_back(isa);
  return v;
}

std::uint32_t bits(float f) { return __builtin_bit_cast(std::uint32_t, f); }
float from_bits(std::uint32_t b) { return __builtin_bit_cast(float, b); }

TEST(SwitchH16Convert, WidenEveryPatternOnEveryVariant) {
  for (const auto t : {proto::ElemType::f16, proto::ElemType::bf16}) {
    std::vector<std::byte> src(2 * 65536 + 2);
    for (unsigned h = 0; h < 65536; ++h) {
      const auto v = static_cast<std::uint16_t>(h);
      std::memcpy(src.data() + 2 + 2 * h, &v, 2);  // 2 bytes in: not 4-aligned
    }
    for (KernelIsa isa : isas()) {
      for (std::size_t n : {std::size_t{65536}, std::size_t{65536 - 3}, std::size_t{7}, std::size_t{0}}) {
        std::vector<float> acc(65536, -1.0f);
        widen_h16_with(isa, t, acc.data(), src.data() + 2, n);
        for (std::size_t h = 0; h < n; ++h) {
          const auto v = static_cast<std::uint16_t>(h);
          const float want = t == proto::ElemType::f16 ? numerics::f16_to_f32(v) : numerics::bf16_to_f32(v);
          ASSERT_EQ(bits(acc[h]), bits(want)) << proto::name(t) << " " << name(isa) << " h=" << h;
        }
        if (n < acc.size()) {
          EXPECT_EQ(acc[n], -1.0f);  // nothing past n
        }
      }
    }
  }
}

// f32 inputs around every 16-bit value of the type.
std::vector<float> narrow_inputs(bool f16, std::mt19937& rng) {
  std::vector<float> v;
  for (unsigned h = 0; h < 65536; ++h) {
    const auto p = static_cast<std::uint16_t>(h);
    const float x = f16 ? numerics::f16_to_f32(p) : numerics::bf16_to_f32(p);
    const float y = f16 ? numerics::f16_to_f32(static_cast<std::uint16_t>(p + 1))
                        : numerics::bf16_to_f32(static_cast<std::uint16_t>(p + 1));
    v.push_back(x);
    if ((h & 0x7fff) < (f16 ? 0x7c00u : 0x7f80u) && (h & 0x7fff) != 0x7fff) {
      const float mid = x + (y - x) / 2;  // exact in f32 (both have fewer than 24 bits)
      v.push_back(mid);
      v.push_back(from_bits(bits(mid) + 1));
      v.push_back(from_bits(bits(mid) - 1));
    }
  }
  for (std::uint32_t m = 1; m < (1u << 23); m = m * 3 + 1)  // f32 NaN payloads, both signs
    for (std::uint32_t s : {0u, 0x80000000u}) v.push_back(from_bits(s | 0x7f800000u | m));
  for (float f : {3.4028235e38f, -3.4028235e38f, 65504.0f, 65519.99f, 65520.0f, -65520.0f, 1e-8f, -3e-8f})
    v.push_back(f);
  for (int i = 0; i < 200000; ++i) v.push_back(from_bits(rng()));
  // around the overflow threshold (f16: 65520; bf16: max + half an ulp = 0x7f7f8000), both signs
  const std::uint32_t thr = f16 ? 0x477ff000u : 0x7f7f8000u;
  for (int i = 0; i < 20000; ++i)
    v.push_back(from_bits((rng() & 0x80000000u) | (thr - 0x1000u + rng() % (f16 ? 0x2000u : 0x1000u + 0x8000u))));
  return v;
}

TEST(SwitchH16Convert, NarrowMatchesHalfHppAndCountsOverflowsOnEveryVariant) {
  std::mt19937 rng(99);
  for (const bool f16 : {true, false}) {
    const auto wide_t = f16 ? proto::ElemType::f16w : proto::ElemType::bf16w;
    const auto in = narrow_inputs(f16, rng);
    std::vector<std::uint16_t> want(in.size());
    std::uint32_t want_ev = 0;
    for (std::size_t i = 0; i < in.size(); ++i) {
      want[i] = f16 ? numerics::f32_to_f16(in[i]) : numerics::f32_to_bf16(in[i]);
      want_ev += (bits(in[i]) & 0x7fffffffu) < 0x7f800000u && (want[i] & 0x7fffu) >= (f16 ? 0x7c00u : 0x7f80u);
    }
    ASSERT_GT(want_ev, 100u);
    for (KernelIsa isa : isas()) {
      for (std::size_t n : {in.size(), in.size() - 5, std::size_t{13}, std::size_t{1}}) {
        std::vector<float> cells(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(n));
        const std::uint32_t ev = narrow_h16_with(isa, wide_t, reinterpret_cast<std::byte*>(cells.data()), n);
        std::uint32_t ev_n = 0;
        for (std::size_t i = 0; i < n; ++i)
          ev_n += (bits(in[i]) & 0x7fffffffu) < 0x7f800000u && (want[i] & 0x7fffu) >= (f16 ? 0x7c00u : 0x7f80u);
        EXPECT_EQ(ev, ev_n) << name(isa) << " n=" << n;
        for (std::size_t i = 0; i < n; ++i) {
          std::uint16_t h;
          std::memcpy(&h, reinterpret_cast<const std::byte*>(cells.data()) + 2 * i, 2);
          ASSERT_EQ(h, want[i]) << (f16 ? "f16 " : "bf16 ") << name(isa) << " i=" << i << " x=0x" << std::hex
                                << bits(in[i]);
        }
      }
    }
  }
}

// acc (f32) += every 16-bit pattern, on accumulators from 0 to near f32 max, inf and NaN: the
// sums (two NaNs aside: which one an add returns is the compiler's operand order) and the
// overflow events match the scalar reference.
TEST(SwitchH16Convert, AddIntoWideMatchesScalarOnEveryVariant) {
  std::mt19937 rng(7);
  const float accs[] = {0.0f, -1.5f, 3.4028235e38f, -3.4028235e38f, 3.38e38f, INFINITY, NAN, 1e-40f};
  for (const auto t : {proto::ElemType::f16, proto::ElemType::bf16}) {
    std::vector<std::byte> src(2 * 65536);
    for (unsigned h = 0; h < 65536; ++h) {
      const auto v = static_cast<std::uint16_t>(h);
      std::memcpy(src.data() + 2 * h, &v, 2);
    }
    std::vector<float> acc0(65536);
    for (auto& a : acc0) a = rng() % 3 == 0 ? from_bits(rng()) : accs[rng() % 8];
    std::vector<float> want = acc0;
    std::uint32_t want_ev = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      std::uint16_t h;
      std::memcpy(&h, src.data() + 2 * i, 2);
      const float y = t == proto::ElemType::f16 ? numerics::f16_to_f32(h) : numerics::bf16_to_f32(h);
      const float r = want[i] + y;
      want_ev += std::isfinite(want[i]) && std::isfinite(y) && !std::isfinite(r);
      want[i] = r;
    }
    if (t == proto::ElemType::bf16) {
      ASSERT_GT(want_ev, 100u);  // (f16 + f32 max stays finite)
    }
    for (KernelIsa isa : isas()) {
      for (std::size_t n : {std::size_t{65536}, std::size_t{65531}, std::size_t{5}}) {
        std::vector<float> acc = acc0;
        const std::uint32_t ev = add_h16_with(isa, t, acc.data(), src.data(), n);
        std::uint32_t ev_n = 0;
        for (std::size_t i = 0; i < n; ++i) {
          std::uint16_t h;
          std::memcpy(&h, src.data() + 2 * i, 2);
          const float y = t == proto::ElemType::f16 ? numerics::f16_to_f32(h) : numerics::bf16_to_f32(h);
          ev_n += std::isfinite(acc0[i]) && std::isfinite(y) && !std::isfinite(want[i]);
          if (!(std::isnan(acc[i]) && std::isnan(want[i]))) {
            ASSERT_EQ(bits(acc[i]), bits(want[i])) << proto::name(t) << " " << name(isa) << " i=" << i;
          }
        }
        EXPECT_EQ(ev, ev_n) << proto::name(t) << " " << name(isa) << " n=" << n;
        if (n < acc.size()) {
          EXPECT_EQ(bits(acc[n]), bits(acc0[n]));  // nothing past n
        }
      }
    }
  }
}

}  // namespace
}  // namespace inc::sw
