// Bulk f32 <-> fp8 / MX conversions (numerics/minifloat.hpp) against the scalar reference
// (fp8.hpp, mx.hpp), bit for bit, on every kernel variant this CPU has: every fp8 code decoded;
// f32 -> fp8 over every f32 whose low 13 bits are a few chosen patterns (every exponent, both
// signs; the ties, the values just beside them, subnormals, zero, NaN, infinity, saturation),
// plus random words; MX encode/decode of blocks of every magnitude, zero, NaN and infinite
// blocks, f32 subnormals, short last blocks, for every element type.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "numerics/minifloat.hpp"

using namespace inc::numerics;
using detail::KernelIsa;

namespace {

std::uint32_t bits(float f) { return __builtin_bit_cast(std::uint32_t, f); }

std::vector<KernelIsa> isas() {
  std::vector<KernelIsa> v;
  for (KernelIsa i : detail::kAllKernelIsas)
    if (detail::kernel_isa_available(i)) v.push_back(i);
  return v;
}

// f32 patterns: every exponent and sign with mantissas that make the fp8 ties and their
// neighbours (low bits around 1 << 19, 1 << 20 and the subnormal positions), and random words.
std::vector<float> inputs() {
  std::vector<float> v;
  const std::uint32_t mants[] = {0,        1,        0x7ffff,  0x80000,  0x80001,  0xfffff,  0x100000,
                                 0x100001, 0x17ffff, 0x180000, 0x180001, 0x280000, 0x380000, 0x400000,
                                 0x480000, 0x500000, 0x580000, 0x600000, 0x680000, 0x700000, 0x780000,
                                 0x7c0000, 0x7fffff, 0x3fffff, 0x200000, 0x600001, 0x5fffff};
  for (std::uint32_t s = 0; s < 2; ++s)
    for (std::uint32_t e = 0; e < 256; ++e)
      for (std::uint32_t m : mants) v.push_back(__builtin_bit_cast(float, (s << 31) | (e << 23) | m));
  std::mt19937 rng(11);
  for (int i = 0; i < 1 << 20; ++i) v.push_back(__builtin_bit_cast(float, static_cast<std::uint32_t>(rng())));
  // Uniform over fp8's range, where most of the codes are hit.
  std::uniform_real_distribution<float> d(-70000.0f, 70000.0f);
  for (int i = 0; i < 1 << 16; ++i) v.push_back(d(rng) * std::ldexp(1.0f, -static_cast<int>(i % 40)));
  for (float f : {464.0f, 480.0f, 448.0f, 449.0f, 61440.0f, 57344.0f, 65536.0f, 1e30f, -1e30f, INFINITY, -INFINITY, NAN, -NAN})
    v.push_back(f);
  return v;
}

}  // namespace

TEST(Minifloat, Fp8DecodeTableEqualsTheScalarDecoderForEveryCode) {
  std::vector<std::uint8_t> codes(256 * 3 + 5);
  for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<std::uint8_t>(i * 7);
  for (MxElem f : {MxElem::fp8_e4m3, MxElem::fp8_e5m2}) {
    std::vector<float> out(codes.size());
    fp8_to_f32(f, codes.data(), codes.size(), out.data());
    for (std::size_t i = 0; i < codes.size(); ++i) {
      const float want = f == MxElem::fp8_e4m3 ? e4m3_to_f32(codes[i]) : e5m2_to_f32(codes[i]);
      ASSERT_EQ(bits(out[i]), bits(want)) << "code " << int(codes[i]);
    }
  }
}

TEST(Minifloat, F32ToFp8EqualsTheScalarEncoderOnEveryVariant) {
  const std::vector<float> in = inputs();
  std::vector<std::uint8_t> out(in.size());
  for (KernelIsa isa : isas())
    for (MxElem f : {MxElem::fp8_e4m3, MxElem::fp8_e5m2})
      for (Fp8Overflow mode : {Fp8Overflow::ieee, Fp8Overflow::saturate}) {
        // Two alignments of the vector loop and its tail.
        for (std::size_t off : {0u, 3u}) {
          detail::f32_to_fp8_with(isa, f, in.data() + off, in.size() - off, out.data(), mode);
          for (std::size_t i = off; i < in.size(); ++i) {
            const std::uint8_t want = f == MxElem::fp8_e4m3 ? f32_to_e4m3(in[i], mode) : f32_to_e5m2(in[i], mode);
            ASSERT_EQ(int(out[i - off]), int(want))
                << name(isa) << " " << (f == MxElem::fp8_e4m3 ? "e4m3" : "e5m2") << " sat=" << (mode == Fp8Overflow::saturate)
                << " input " << in[i] << " (0x" << std::hex << bits(in[i]) << ")";
          }
        }
      }
}

TEST(Minifloat, F32ToFp8RoundsEveryTieToEvenAndEveryCodeBackToItself) {
  // Every finite code comes back as itself; the midpoints between neighbouring codes go to the
  // even one; (the tie above the largest finite value is the overflow rule's).
  for (KernelIsa isa : isas())
    for (MxElem f : {MxElem::fp8_e4m3, MxElem::fp8_e5m2}) {
      std::vector<float> vals, mids;
      std::vector<std::uint8_t> codes;
      for (unsigned c = 0; c < 0x80; ++c) {
        std::uint8_t b = static_cast<std::uint8_t>(c);
        float v;
        fp8_to_f32(f, &b, 1, &v);
        if (!std::isfinite(v)) continue;
        vals.push_back(v);
        codes.push_back(b);
      }
      for (std::size_t i = 0; i + 1 < vals.size(); ++i) mids.push_back((vals[i] + vals[i + 1]) / 2);  // exact in f32
      std::vector<std::uint8_t> out(vals.size()), mo(mids.size());
      detail::f32_to_fp8_with(isa, f, vals.data(), vals.size(), out.data(), Fp8Overflow::ieee);
      detail::f32_to_fp8_with(isa, f, mids.data(), mids.size(), mo.data(), Fp8Overflow::ieee);
      for (std::size_t i = 0; i < vals.size(); ++i) ASSERT_EQ(out[i], codes[i]) << vals[i];
      for (std::size_t i = 0; i < mids.size(); ++i)
        ASSERT_EQ(mo[i], codes[i] % 2 == 0 ? codes[i] : codes[i + 1]) << name(isa) << " tie " << mids[i];
    }
}

TEST(Minifloat, MxEncodeAndDecodeEqualTheReferenceForEveryElementType) {
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> d(-1, 1);
  const std::size_t block = kMxBlock, nblocks = 300, n = nblocks * block + 13;  // a short last block
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const int b = static_cast<int>(i / block);
    v[i] = d(rng) * std::ldexp(1.0f, b % 280 - 150);  // every scale, f32 subnormals included
  }
  for (std::size_t i = 32 * 5; i < 32 * 6; ++i) v[i] = 0;          // a zero block
  for (std::size_t i = 32 * 7; i < 32 * 8; ++i) v[i] = -0.0f;
  v[32 * 9 + 4] = NAN;
  v[32 * 10 + 31] = -INFINITY;
  for (std::size_t i = 32 * 11; i < 32 * 12; ++i) v[i] = 3.4028234663852886e38f * d(rng);  // near f32's max
  for (std::size_t i = 32 * 12; i < 32 * 13; ++i) v[i] = static_cast<float>(i % 17) - 8;  // ties at the element steps
  for (std::size_t i = 32 * 13; i < 32 * 14; ++i) v[i] = (static_cast<float>(i % 32) + 0.5f) / 4;
  for (MxElem e : {MxElem::fp8_e4m3, MxElem::fp8_e5m2, MxElem::fp6_e2m3, MxElem::fp6_e3m2, MxElem::fp4_e2m1, MxElem::int8})
    for (std::size_t blk : {block, std::size_t{16}, std::size_t{7}}) {
      const std::size_t ns = (n + blk - 1) / blk;
      std::vector<std::uint8_t> ws(ns), wc(n), s(ns), c(n);
      mx_encode(e, v.data(), n, blk, ws.data(), wc.data());
      for (KernelIsa isa : isas()) {
        detail::mx_encode_f32_with(isa, e, v.data(), n, blk, s.data(), c.data());
        ASSERT_EQ(s, ws) << name(isa) << " element type " << int(e) << " block " << blk;
        for (std::size_t i = 0; i < n; ++i)
          ASSERT_EQ(int(c[i]), int(wc[i])) << name(isa) << " element type " << int(e) << " block " << blk << " value " << v[i];
      }
      std::vector<double> want(n);
      std::vector<float> got(n);
      mx_decode(e, ws.data(), wc.data(), n, blk, want.data());
      mx_decode_f32(e, ws.data(), wc.data(), n, blk, got.data());
      for (std::size_t i = 0; i < n; ++i) {
        const float w = static_cast<float>(want[i]);
        if (std::isnan(w)) ASSERT_TRUE(std::isnan(got[i])) << i;
        else ASSERT_EQ(bits(got[i]), bits(w)) << "element type " << int(e) << " i " << i;
      }
    }
}
