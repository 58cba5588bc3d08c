// The MX block formats as DataTypes (src/numerics/mx_type.*): the block layout is the reference
// encoder's scale and codes packed bit by bit (this file's packing, element k at bits k*b ..
// k*b+b-1), and every kernel (reduce for each op, divide, element access, event counts) is
// decode -> one f32 operation -> the reference encoder, byte for byte.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "numerics/events.hpp"
#include "numerics/mx.hpp"
#include "numerics/mx_type.hpp"
#include "numerics/reduce.hpp"

namespace inc::numerics {
namespace {

constexpr std::size_t K = 32;
constexpr DataType kTypes[] = {DataType::mxfp8_e4m3, DataType::mxfp8_e5m2, DataType::mxint8,
                               DataType::mxfp4,      DataType::mxfp6_e2m3, DataType::mxfp6_e3m2};

unsigned bits_of(DataType t) {
  return t == DataType::mxfp4 ? 4 : (t == DataType::mxfp6_e2m3 || t == DataType::mxfp6_e3m2) ? 6 : 8;
}

// The reference: mx_encode's scale and codes, packed here bit by bit.
std::vector<std::uint8_t> ref_encode(DataType t, const std::vector<float>& v) {
  const std::size_t blocks = v.size() / K;
  std::vector<std::uint8_t> out(blocks * size_of(t), 0);
  for (std::size_t b = 0; b < blocks; ++b) {
    std::uint8_t codes[K];
    std::uint8_t* blk = out.data() + b * size_of(t);
    mx_encode(mx_elem_of(t), v.data() + b * K, K, K, blk, codes);
    for (std::size_t k = 0; k < K; ++k)
      for (unsigned j = 0; j < bits_of(t); ++j)
        if ((codes[k] >> j) & 1) blk[1 + (k * bits_of(t) + j) / 8] |= std::uint8_t(1u << ((k * bits_of(t) + j) % 8));
  }
  return out;
}
std::vector<double> ref_decode(DataType t, const std::vector<std::uint8_t>& buf) {
  const std::size_t blocks = buf.size() / size_of(t);
  std::vector<double> out(blocks * K);
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::uint8_t* blk = buf.data() + b * size_of(t);
    std::uint8_t codes[K] = {};
    for (std::size_t k = 0; k < K; ++k)
      for (unsigned j = 0; j < bits_of(t); ++j)
        if ((blk[1 + (k * bits_of(t) + j) / 8] >> ((k * bits_of(t) + j) % 8)) & 1) codes[k] |= std::uint8_t(1u << j);
    mx_decode(mx_elem_of(t), blk, codes, K, K, out.data() + b * K);
  }
  return out;
}

// Random blocks: values N(0,1) x 2^s with s per block in -10..10 (and some exact zeros).
std::vector<float> random_values(std::mt19937_64& g, std::size_t blocks) {
  std::normal_distribution<float> nd;
  std::vector<float> v(blocks * K);
  for (std::size_t b = 0; b < blocks; ++b) {
    const int s = static_cast<int>(g() % 21) - 10;
    for (std::size_t k = 0; k < K; ++k) v[b * K + k] = g() % 16 == 0 ? 0.0f : std::ldexp(nd(g), s);
  }
  return v;
}

TEST(MxType, SizesAndNames) {
  EXPECT_EQ(size_of(DataType::mxfp8_e4m3), 33u);
  EXPECT_EQ(size_of(DataType::mxint8), 33u);
  EXPECT_EQ(size_of(DataType::mxfp6_e3m2), 25u);
  EXPECT_EQ(size_of(DataType::mxfp4), 17u);
  for (DataType t : kTypes) {
    EXPECT_EQ(elements_per_unit(t), 32u);
    EXPECT_EQ(unit_alignment(t), 1u);
    EXPECT_EQ(parse_data_type(name(t)), t);
  }
  EXPECT_EQ(parse_data_type("MXFP8"), DataType::mxfp8_e4m3);
}

TEST(MxType, LayoutIsTheReferenceEncodersCodesPacked) {
  std::mt19937_64 g(9);
  for (DataType t : kTypes) {
    const auto v = random_values(g, 64);
    std::vector<std::uint8_t> got(64 * size_of(t));
    mx_encode_blocks(t, v.data(), 64, got.data());
    ASSERT_EQ(got, ref_encode(t, v)) << name(t);
    std::vector<float> back(64 * K);
    mx_decode_blocks(t, got.data(), 64, back.data());
    const auto want = ref_decode(t, got);
    for (std::size_t i = 0; i < back.size(); ++i) {
      ASSERT_EQ(static_cast<double>(back[i]), want[i]) << name(t) << " " << i;
      ASSERT_EQ(load_as_double(t, got.data(), i), want[i]) << name(t) << " " << i;
    }
  }
}

// reduce() of two buffers: per element the exact f32 operation (the double result of two
// decoded values, exact here, rounded once to f32; min/max with -0 < +0), then the reference
// encoder.
TEST(MxType, ReduceIsDecodeCombineInF32ReencodeForEveryOp) {
  std::mt19937_64 g(17);
  for (DataType t : kTypes)
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::prod, ReduceOp::min, ReduceOp::max}) {
      const std::size_t blocks = 37;
      const auto a = ref_encode(t, random_values(g, blocks)), b = ref_encode(t, random_values(g, blocks));
      const auto da = ref_decode(t, a), db = ref_decode(t, b);
      std::vector<float> r(blocks * K);
      for (std::size_t i = 0; i < r.size(); ++i) {
        const double x = da[i], y = db[i];
        r[i] = op == ReduceOp::prod ? static_cast<float>(x * y)
               : op == ReduceOp::min ? static_cast<float>(x == y ? (std::signbit(x) ? x : y) : std::min(x, y))
               : op == ReduceOp::max ? static_cast<float>(x == y ? (std::signbit(x) ? y : x) : std::max(x, y))
                                     : static_cast<float>(x + y);
      }
      std::vector<std::uint8_t> out(a.size());
      reduce(t, op, out.data(), a.data(), b.data(), blocks);
      EXPECT_EQ(out, ref_encode(t, r)) << name(t) << " " << name(op);
      auto in_place = a;  // dst aliasing a, as the hosts' steps do
      reduce(t, op, in_place.data(), in_place.data(), b.data(), blocks);
      EXPECT_EQ(in_place, out) << name(t) << " " << name(op);
    }
}

TEST(MxType, DivideIsDecodeDivideInF32Reencode) {
  std::mt19937_64 g(23);
  for (DataType t : kTypes) {
    auto buf = ref_encode(t, random_values(g, 11));
    const auto d = ref_decode(t, buf);
    std::vector<float> r(d.size());
    for (std::size_t i = 0; i < r.size(); ++i) r[i] = static_cast<float>(d[i]) / 3.0f;
    divide(t, buf.data(), 11, 3);
    EXPECT_EQ(buf, ref_encode(t, r)) << name(t);
  }
}

TEST(MxType, StoreReencodesTheElementsBlock) {
  for (DataType t : kTypes) {
    std::vector<float> v(2 * K, 1.0f);
    auto buf = ref_encode(t, v);
    store_from_double(t, buf.data(), K + 5, 4.0);
    v[K + 5] = 4.0f;
    EXPECT_EQ(buf, ref_encode(t, v)) << name(t);
  }
}

// Sums whose f32 result overflows: one event per element, the block's scale becomes NaN; a
// block of NaN is not an event; a normal sum has none (the screen must not hide the first).
TEST(MxType, SumOverflowsAreCountedPerElement) {
  for (DataType t : {DataType::mxfp8_e4m3, DataType::mxint8, DataType::mxfp4}) {
    std::vector<float> big(K, std::ldexp(1.5f, 127)), small(K, 1.0f), nan(K, std::nanf(""));
    const auto a = ref_encode(t, big), s = ref_encode(t, small), n = ref_encode(t, nan);
    EXPECT_EQ(sum_overflows(t, a.data(), a.data(), 1), 32u) << name(t);
    EXPECT_EQ(sum_overflows(t, s.data(), s.data(), 1), 0u) << name(t);
    EXPECT_EQ(sum_overflows(t, a.data(), n.data(), 1), 0u) << name(t);
    std::vector<std::uint8_t> out(a.size());
    EXPECT_EQ(reduce_counted(t, ReduceOp::sum, out.data(), a.data(), a.data(), 1), 32u) << name(t);
    EXPECT_EQ(out[0], kE8M0NaN) << name(t);
    EXPECT_EQ(count_nonfinite(t, out.data(), 1), 32u) << name(t);
  }
}

}  // namespace
}  // namespace inc::numerics
