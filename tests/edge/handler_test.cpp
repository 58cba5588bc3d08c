// The edge engine's packet handlers (src/edge/handler.hpp) against references computed here:
// reduce for every type and op against the host path's reduction of the whole vector; forward
// bitwise; bf16/f16 against one rounding of each value (f64 -> 16 bit, another code path);
// int8 against the quantiser's definition (scale = max|x|/127 per 256 elements, nearest even)
// and its error bound. Payloads arrive in random pieces, as the transport hands them over.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "edge/handler.hpp"
#include "numerics/fp8.hpp"
#include "numerics/mx.hpp"
#include "numerics/reduce.hpp"

using namespace inc;
using namespace inc::edge;

namespace {

const HandlerRegistry& reg() {
  static const HandlerRegistry r = HandlerRegistry::with_builtins();
  return r;
}

// Feed `wire` to a processor in random pieces, keeping what it did not consume (as TcpMesh does).
void feed(coll::MessageProcessor& p, const std::vector<std::byte>& wire, std::mt19937_64& rng) {
  std::uint64_t done = 0, avail_end = 0;
  while (done < wire.size()) {
    avail_end = std::min<std::uint64_t>(wire.size(), avail_end + 1 + rng() % 700);
    std::vector<std::byte> piece(wire.begin() + static_cast<long>(done), wire.begin() + static_cast<long>(avail_end));
    done += p.consume(done, piece.data(), piece.size());  // a fresh (aligned) buffer each time
  }
  p.finish();
}

struct Msg {
  coll::CollectiveParams params;
  std::vector<std::byte> dst, operand;
  coll::RecvMessage m;
};

Msg make_msg(DataType t, ReduceOp op, std::size_t n, coll::OpKind kind, const HandlerChain& chain) {
  Msg x;
  x.params.dtype = t;
  x.params.op = op;
  x.dst.assign(n * size_of(t), std::byte{0});
  x.operand.assign(n * size_of(t), std::byte{0});
  x.m.params = &x.params;
  x.m.kind = kind;
  x.m.bytes = n * size_of(t);
  x.m.wire_bytes = chain.wire_bytes(x.params, x.m.bytes);
  return x;
}

std::vector<std::byte> random_bytes(std::size_t n, std::mt19937_64& rng) {
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return v;
}

void fill_small(DataType t, std::vector<std::byte>& v, std::mt19937_64& rng, double lo, double hi) {
  std::uniform_real_distribution<double> d(lo, hi);
  for (std::size_t i = 0; i < v.size() / size_of(t); ++i) numerics::store_from_double(t, v.data(), i, d(rng));
}

// The sender's encode of `src`, then the receiver's chain fed in random pieces into x.dst
// (with x.operand for a receive-reduce).
void send_through(HandlerChain& chain, Msg& x, const std::vector<std::byte>& src, std::mt19937_64& rng) {
  std::vector<std::byte> wire(x.m.wire_bytes);
  chain.encode(x.params, src.data(), src.size(), wire.data());
  x.m.dst = x.dst.data();
  x.m.operand = x.operand.data();
  auto p = chain.open(x.m);
  feed(*p, wire, rng);
}

}  // namespace

TEST(EdgeHandlers, RegistryHasTheBuiltinsAndRefusesUnknownAndDuplicateNames) {
  auto r = HandlerRegistry::with_builtins();
  EXPECT_EQ(r.names(), (std::vector<std::string>{"bf16", "bfp16", "e4m3", "e5m2", "f16", "forward", "int8", "mxfp4",
                                                "mxfp6e2m3", "mxfp6e3m2", "mxfp8", "mxfp8e5m2", "mxint8", "reduce"}));
  try {
    r.get("fp4");
    FAIL() << "an unknown name was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::config);
    EXPECT_NE(std::string(e.what()).find("no handler named 'fp4' (known: bf16, bfp16, e4m3, e5m2, f16, forward, int8, mxfp4, mxfp6e2m3, mxfp6e3m2, mxfp8, mxfp8e5m2, mxint8, reduce)"),
              std::string::npos) << e.what();
  }
  // A second handler under a taken name, and one without a name.
  struct Named : Handler {
    std::string n;
    explicit Named(std::string s) : n(std::move(s)) {}
    std::string_view name() const override { return n; }
    std::string_view summary() const override { return "test"; }
    Role role() const override { return Role::apply; }
    std::size_t payload(Context&, const Chunk& c) const override { return c.bytes; }
  };
  EXPECT_THROW(r.add(std::make_unique<Named>("int8")), Error);
  EXPECT_THROW(r.add(std::make_unique<Named>("")), Error);
  r.add(std::make_unique<Named>("mine"));
  EXPECT_EQ(r.get("mine").name(), "mine");
  // A chain names a conversion handler that exists and converts.
  EXPECT_THROW(HandlerChain(r, "nope"), Error);
  EXPECT_THROW(HandlerChain(r, "reduce"), Error);
  EXPECT_THROW(HandlerChain(r, "", nullptr, "int8"), Error);
}

TEST(EdgeHandlers, ReduceEqualsTheHostReductionForEveryTypeAndOp) {
  std::mt19937_64 rng(1);
  HandlerCounts counts;
  HandlerChain chain(reg(), "", &counts);
  for (int ti = 0; ti < kNumDataTypes; ++ti)
    for (int oi = 0; oi < kNumReduceOps; ++oi) {
      const auto t = static_cast<DataType>(ti);
      const auto op = static_cast<ReduceOp>(oi);
      const std::size_t n = 1 + rng() % 3000;
      Msg x = make_msg(t, op, n, coll::OpKind::recv_reduce, chain);
      x.operand = random_bytes(x.m.bytes, rng);
      auto payload = random_bytes(x.m.bytes, rng);
      x.m.dst = x.dst.data();
      x.m.operand = x.operand.data();
      ASSERT_FALSE(chain.converts(x.params));
      auto p = chain.open(x.m);
      feed(*p, payload, rng);
      std::vector<std::byte> ref(x.m.bytes);
      numerics::reduce(t, op, ref.data(), x.operand.data(), payload.data(), n);
      EXPECT_EQ(0, std::memcmp(ref.data(), x.dst.data(), ref.size())) << name(t) << " " << name(op);
    }
  EXPECT_EQ(counts.headers, std::uint64_t{kNumDataTypes * kNumReduceOps});
  EXPECT_EQ(counts.completions, counts.headers.load());
  EXPECT_GT(counts.payloads, counts.headers.load());  // several chunks per message
}

TEST(EdgeHandlers, ForwardPlacesEveryByte) {
  std::mt19937_64 rng(2);
  HandlerChain chain(reg(), "");
  Msg x = make_msg(DataType::u8, ReduceOp::sum, 10007, coll::OpKind::recv, chain);
  x.m.dst = x.dst.data();
  auto payload = random_bytes(x.m.bytes, rng);
  auto p = chain.open(x.m);
  feed(*p, payload, rng);
  EXPECT_EQ(payload, x.dst);
}

TEST(EdgeHandlers, Narrow16RoundsEachValueOnceAndWidensBack) {
  std::mt19937_64 rng(3);
  for (DataType fmt16 : {DataType::bf16, DataType::f16}) {
    HandlerChain chain(reg(), fmt16 == DataType::bf16 ? "bf16" : "f16");
    const std::size_t n = 5001;
    Msg x = make_msg(DataType::f32, ReduceOp::sum, n, coll::OpKind::recv_reduce, chain);
    ASSERT_TRUE(chain.converts(x.params));
    ASSERT_EQ(x.m.wire_bytes, n * 2);
    std::vector<std::byte> src(n * 4);
    fill_small(DataType::f32, src, rng, -3e4, 3e4);
    fill_small(DataType::f32, x.operand, rng, -10, 10);
    send_through(chain, x, src, rng);
    for (std::size_t i = 0; i < n; ++i) {
      std::uint16_t h = 0;
      numerics::store_from_double(fmt16, &h, 0, numerics::load_as_double(DataType::f32, src.data(), i));
      const float want = static_cast<float>(numerics::load_as_double(DataType::f32, x.operand.data(), i)) +
                         static_cast<float>(numerics::load_as_double(fmt16, &h, 0));
      ASSERT_EQ(want, static_cast<float>(numerics::load_as_double(DataType::f32, x.dst.data(), i))) << i;
    }
    // Not an f32 collective: passed through unconverted.
    coll::CollectiveParams i32;
    i32.dtype = DataType::i32;
    EXPECT_FALSE(chain.converts(i32));
    EXPECT_EQ(chain.wire_bytes(i32, 400), 400u);
  }
}

TEST(EdgeHandlers, Int8QuantisesPerBlockWithItsScale) {
  std::mt19937_64 rng(4);
  HandlerChain chain(reg(), "int8");
  for (DataType t : {DataType::f32, DataType::bf16, DataType::f16}) {
    const std::size_t n = 256 * 9 + 77;  // a short last block
    Msg x = make_msg(t, ReduceOp::sum, n, coll::OpKind::recv, chain);
    ASSERT_EQ(x.m.wire_bytes, 10u * 4 + n);  // 10 scales + one byte per element
    std::vector<std::byte> src(n * size_of(t));
    fill_small(t, src, rng, -100, 100);
    for (std::size_t i = 256; i < 512; ++i) numerics::store_from_double(t, src.data(), i, 0.0);  // an all-zero block
    numerics::store_from_double(t, src.data(), 600, NAN);  // a block with a NaN
    std::vector<std::byte> wire(x.m.wire_bytes);
    chain.encode(x.params, src.data(), src.size(), wire.data());
    x.m.dst = x.dst.data();
    auto p = chain.open(x.m);
    feed(*p, wire, rng);
    for (std::size_t b = 0; b * 256 < n; ++b) {
      const std::size_t first = b * 256, k = std::min<std::size_t>(256, n - first);
      double maxabs = 0;
      bool has_nan = false;
      for (std::size_t i = first; i < first + k; ++i) {
        const double v = numerics::load_as_double(t, src.data(), i);
        has_nan = has_nan || std::isnan(v);
        maxabs = std::max(maxabs, std::fabs(v));
      }
      const float scale = static_cast<float>(maxabs) / 127.0f;
      for (std::size_t i = first; i < first + k; ++i) {
        const double v = numerics::load_as_double(t, src.data(), i);
        const double got = numerics::load_as_double(t, x.dst.data(), i);
        if (has_nan) {
          ASSERT_TRUE(std::isnan(got)) << i;
          continue;
        }
        const float q = scale > 0 ? std::nearbyint(static_cast<float>(v) / scale) : 0.0f;
        std::vector<std::byte> one(size_of(t));
        numerics::store_from_double(t, one.data(), 0, static_cast<double>(q * scale));
        const double want = numerics::load_as_double(t, one.data(), 0);
        ASSERT_EQ(want, got) << name(t) << " element " << i;
        ASSERT_LE(std::fabs(got - v), scale / 2 * 1.01 + std::fabs(v) / 128) << i;  // the error bound
      }
    }
    EXPECT_EQ(0.0, numerics::load_as_double(t, x.dst.data(), 300));
  }
}

TEST(EdgeHandlers, Int8ThenReduceSumsTheDequantisedValues) {
  std::mt19937_64 rng(5);
  HandlerChain chain(reg(), "int8");
  const std::size_t n = 1000;
  Msg x = make_msg(DataType::f32, ReduceOp::max, n, coll::OpKind::recv_reduce, chain);
  std::vector<float> src(n), operand(n);
  for (std::size_t i = 0; i < n; ++i) src[i] = static_cast<float>(static_cast<int>(i % 255) - 127), operand[i] = 0.5f;
  for (std::size_t b = 0; b < n; b += 256) src[b] = 127;  // every block's maximum: scale 1
  std::memcpy(x.operand.data(), operand.data(), n * 4);
  std::vector<std::byte> wire(x.m.wire_bytes);
  chain.encode(x.params, reinterpret_cast<const std::byte*>(src.data()), n * 4, wire.data());
  x.m.dst = x.dst.data();
  x.m.operand = x.operand.data();
  auto p = chain.open(x.m);
  feed(*p, wire, rng);
  // Integers in [-127, 127] with a block maximum of 127 quantise exactly (scale 1).
  for (std::size_t i = 0; i < n; ++i) {
    float got;
    std::memcpy(&got, x.dst.data() + 4 * i, 4);
    ASSERT_EQ(got, std::max(src[i], 0.5f)) << i;
  }
}

TEST(EdgeHandlers, ATruncatedOrOverlongPayloadIsAnError) {
  std::mt19937_64 rng(6);
  HandlerChain chain(reg(), "int8");
  Msg x = make_msg(DataType::f32, ReduceOp::sum, 300, coll::OpKind::recv, chain);
  x.m.dst = x.dst.data();
  std::vector<std::byte> wire(x.m.wire_bytes);
  auto p = chain.open(x.m);
  // The whole message but for its last byte, then claimed complete.
  EXPECT_EQ(p->consume(0, wire.data(), wire.size() - 1), 260u);
  EXPECT_THROW(p->finish(), Error);
  auto q = chain.open(x.m);
  EXPECT_THROW(q->consume(0, wire.data(), wire.size() + 1), Error);
  auto r = chain.open(x.m);
  EXPECT_THROW(r->consume(5, wire.data(), 10), Error);  // out of order
}

namespace {

// The fp8 value nearest to x by brute force over every code (ties to the even code), as the
// OCP text defines it, not through numerics::f64_to_e4m3: E4M3's 0x7f and E5M2's 0x7c stand for
// the first value past the largest finite one (480, 65536) so that rounding there overflows
// (E4M3 -> NaN, E5M2 -> infinity); `saturate` clamps to the largest finite value instead.
double nearest_fp8(DataType fmt, double x, bool saturate = false) {
  if (std::isnan(x)) return NAN;
  const bool e4 = fmt == DataType::e4m3;
  const unsigned past = e4 ? 0x7f : 0x7c;
  const double max = e4 ? 448 : 57344;
  auto value = [&](unsigned code) {
    if (code == past) return e4 ? 480.0 : 65536.0;
    return static_cast<double>(e4 ? numerics::e4m3_to_f32(static_cast<std::uint8_t>(code))
                                  : numerics::e5m2_to_f32(static_cast<std::uint8_t>(code)));
  };
  const double ax = std::fabs(x);
  unsigned best = 0;
  for (unsigned code = 1; code <= past; ++code) {
    const double d = std::fabs(value(code) - ax), db = std::fabs(value(best) - ax);
    if (d < db || (d == db && code % 2 == 0)) best = code;
  }
  double r = value(best);
  if (best == past || ax > value(past)) r = saturate ? max : (e4 ? NAN : INFINITY);
  return std::signbit(x) ? -r : r;
}

}  // namespace

// fp8 on the wire, f32 in the engine: each value rounded once to the nearest fp8 (checked by
// brute force over the codes), then summed into the f32 operand without another rounding.
TEST(EdgeHandlers, Fp8RoundsEachValueOnceAndSumsWide) {
  std::mt19937_64 rng(7);
  for (DataType fmt : {DataType::e4m3, DataType::e5m2}) {
    HandlerChain chain(reg(), fmt == DataType::e4m3 ? "e4m3" : "e5m2");
    const std::size_t n = 9001;
    Msg x = make_msg(DataType::f32, ReduceOp::sum, n, coll::OpKind::recv_reduce, chain);
    ASSERT_TRUE(chain.converts(x.params));
    ASSERT_EQ(x.m.wire_bytes, n) << "one byte per element";
    std::vector<std::byte> src(n * 4);
    fill_small(DataType::f32, src, rng, -7e4, 7e4);  // beyond both formats' range at the ends
    for (std::size_t i = 0; i < 2000; ++i)  // small magnitudes: subnormals and zero
      numerics::store_from_double(DataType::f32, src.data(), i, std::ldexp(std::uniform_real_distribution<double>(-1, 1)(rng), -static_cast<int>(i % 24)));
    numerics::store_from_double(DataType::f32, src.data(), 2001, 464.0);    // E4M3's tie at the top: 448
    numerics::store_from_double(DataType::f32, src.data(), 2002, 61440.0);  // E5M2's: overflow
    numerics::store_from_double(DataType::f32, src.data(), 2003, NAN);
    fill_small(DataType::f32, x.operand, rng, -1, 1);
    send_through(chain, x, src, rng);
    for (std::size_t i = 0; i < n; ++i) {
      const double q = nearest_fp8(fmt, numerics::load_as_double(DataType::f32, src.data(), i));
      const float want = static_cast<float>(numerics::load_as_double(DataType::f32, x.operand.data(), i)) + static_cast<float>(q);
      const float got = static_cast<float>(numerics::load_as_double(DataType::f32, x.dst.data(), i));
      if (std::isnan(want)) ASSERT_TRUE(std::isnan(got)) << name(fmt) << " " << i;
      else ASSERT_EQ(want, got) << name(fmt) << " element " << i << " of " << numerics::load_as_double(DataType::f32, src.data(), i);
    }
    const float top = 448.0f + static_cast<float>(numerics::load_as_double(DataType::f32, x.operand.data(), 2001));
    EXPECT_EQ(top, static_cast<float>(numerics::load_as_double(DataType::f32, x.dst.data(), 2001))) << "464 -> 448";
    const double over = numerics::load_as_double(DataType::f32, x.dst.data(), 2002);  // 61440
    EXPECT_TRUE(fmt == DataType::e4m3 ? std::isnan(over) : over == INFINITY) << name(fmt) << " " << over;
  }
}

// MXFP8 / MXINT8 on the wire: per 32 elements an E8M0 scale X = 2^(floor(log2 max|v|) - emax)
// and elements v / X rounded to nearest even, saturated (the OCP MX text, computed here);
// decoded exactly into f32 and placed (a plain receive) or, for f16, rounded once to f16.
TEST(EdgeHandlers, MxBlocksOf32WithAnE8M0Scale) {
  std::mt19937_64 rng(8);
  for (const char* h : {"mxfp8", "mxint8"}) {
    const bool fp8 = std::string(h) == "mxfp8";
    HandlerChain chain(reg(), h);
    for (DataType t : {DataType::f32, DataType::f16}) {
      const std::size_t n = 32 * 40 + 7;  // a short last block
      Msg x = make_msg(t, ReduceOp::sum, n, coll::OpKind::recv, chain);
      ASSERT_EQ(x.m.wire_bytes, 41u + n) << "one scale byte per block + one byte per element";
      std::vector<std::byte> src(n * size_of(t));
      fill_small(t, src, rng, -1000, 1000);
      for (std::size_t b = 0; b < 40; ++b) {  // blocks of every magnitude, a zero block, a NaN block
        const double scale = std::ldexp(1.0, static_cast<int>(b) - 28);
        for (std::size_t i = b * 32; i < b * 32 + 32; ++i)
          numerics::store_from_double(t, src.data(), i, b == 5 ? 0.0 : numerics::load_as_double(t, src.data(), i) * scale);
      }
      numerics::store_from_double(t, src.data(), 32 * 7 + 3, NAN);  // (f16: blocks 27 on are infinite too)
      send_through(chain, x, src, rng);
      for (std::size_t first = 0; first < n; first += 32) {
        const std::size_t k = std::min<std::size_t>(32, n - first);
        double maxabs = 0;
        bool nan = false;
        for (std::size_t i = first; i < first + k; ++i) {
          const double v = numerics::load_as_double(t, src.data(), i);
          nan = nan || !std::isfinite(v);  // a NaN or an infinity: the NaN scale
          maxabs = std::max(maxabs, std::fabs(v));
        }
        const int e = maxabs > 0 ? std::clamp(std::ilogb(maxabs) - (fp8 ? 8 : 0), -127, 127) : -127;
        const double X = std::ldexp(1.0, e);
        for (std::size_t i = first; i < first + k; ++i) {
          const double v = numerics::load_as_double(t, src.data(), i);
          const double got = numerics::load_as_double(t, x.dst.data(), i);
          if (nan) {
            ASSERT_TRUE(std::isnan(got)) << h << " " << i;
            continue;
          }
          const double elem = fp8 ? nearest_fp8(DataType::e4m3, v / X, true)
                                  : std::clamp(std::nearbyint(v / X * 64), -128.0, 127.0) / 64;
          std::vector<std::byte> one(size_of(t));
          numerics::store_from_double(t, one.data(), 0, elem * X);
          ASSERT_EQ(numerics::load_as_double(t, one.data(), 0), got) << h << " " << name(t) << " element " << i << " of " << v;
        }
      }
    }
  }
}

// A plain receive that no handler changes is deposited by the transport (no copy through the
// chain); a converted one, a receive-reduce, or a chain with its own forward handler is not.
TEST(EdgeHandlers, PlainUnconvertedReceivesAreDepositedWithoutAHandler) {
  HandlerCounts counts;
  HandlerChain plain(reg(), "", &counts), int8(reg(), "int8", &counts);
  Msg f32 = make_msg(DataType::f32, ReduceOp::sum, 100, coll::OpKind::recv, plain);
  Msg i32 = make_msg(DataType::i32, ReduceOp::sum, 100, coll::OpKind::recv, plain);
  Msg red = make_msg(DataType::f32, ReduceOp::sum, 100, coll::OpKind::recv_reduce, plain);
  EXPECT_TRUE(plain.deposits(f32.m));
  EXPECT_FALSE(plain.deposits(red.m));
  EXPECT_FALSE(int8.deposits(f32.m)) << "int8 converts f32: its handler must run";
  EXPECT_TRUE(int8.deposits(i32.m)) << "int8 does not convert i32";
  EXPECT_EQ(counts.deposited, 2u);
  auto r = HandlerRegistry::with_builtins();
  struct MyForward : Handler {
    std::string_view name() const override { return "myforward"; }
    std::string_view summary() const override { return "test"; }
    Role role() const override { return Role::apply; }
    std::size_t payload(Context&, const Chunk& c) const override { return c.bytes; }
  };
  r.add(std::make_unique<MyForward>());
  HandlerChain own(r, "", nullptr, "reduce", "myforward");
  EXPECT_FALSE(own.deposits(f32.m)) << "a chain's own forward handler sees every plain receive";
}

// The MX handlers and block floating point: element type, block, bits per code on the wire.
struct MxFmt {
  const char* name;
  numerics::MxElem e;
  std::size_t block;
  unsigned bits;
};
constexpr MxFmt kMxFormats[] = {{"mxfp8", numerics::MxElem::fp8_e4m3, 32, 8}, {"mxfp8e5m2", numerics::MxElem::fp8_e5m2, 32, 8},
                                {"mxfp6e2m3", numerics::MxElem::fp6_e2m3, 32, 6}, {"mxfp6e3m2", numerics::MxElem::fp6_e3m2, 32, 6},
                                {"mxfp4", numerics::MxElem::fp4_e2m1, 32, 4},     {"mxint8", numerics::MxElem::int8, 32, 8},
                                {"bfp16", numerics::MxElem::int8, 16, 8}};

// Every MX handler (and block floating point) against the reference encoder and decoder of
// src/numerics (mx_encode / mx_decode, scalar, through double): the wire carries per block one
// scale byte and the element codes packed to their width (6 or 4 bits), and the receiver's
// values are the reference's decoded values in the collective's type, placed or summed.
TEST(EdgeHandlers, EveryMxFormatEqualsTheReferenceEncoderThroughThePackedWire) {
  std::mt19937_64 rng(9);
  for (const MxFmt& f : kMxFormats) {
    HandlerChain chain(reg(), f.name);
    for (DataType t : {DataType::f32, DataType::f16, DataType::bf16})
      for (coll::OpKind kind : {coll::OpKind::recv, coll::OpKind::recv_reduce}) {
        const std::size_t n = f.block * 40 + 7;  // a short last block
        Msg x = make_msg(t, ReduceOp::sum, n, kind, chain);
        ASSERT_TRUE(chain.converts(x.params));
        ASSERT_EQ(x.m.wire_bytes, 41 + 40 * (f.block * f.bits / 8) + (7 * f.bits + 7) / 8) << f.name << ": packed codes";
        std::vector<std::byte> src(n * size_of(t));
        fill_small(t, src, rng, -1000, 1000);
        for (std::size_t b = 0; b < 40; ++b)  // blocks of every magnitude, a zero block
          for (std::size_t i = b * f.block; i < (b + 1) * f.block; ++i)
            numerics::store_from_double(t, src.data(), i, b == 5 ? 0.0 : numerics::load_as_double(t, src.data(), i) * std::ldexp(1.0, static_cast<int>(b) - 20));
        numerics::store_from_double(t, src.data(), f.block * 7 + 3, NAN);
        fill_small(t, x.operand, rng, -1, 1);
        send_through(chain, x, src, rng);
        // The reference: the f32 values (exact for f16/bf16), encoded and decoded by src/numerics.
        std::vector<float> v(n);
        for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(numerics::load_as_double(t, src.data(), i));
        std::vector<std::uint8_t> scales((n + f.block - 1) / f.block), codes(n);
        numerics::mx_encode(f.e, v.data(), n, f.block, scales.data(), codes.data());
        std::vector<double> dec(n);
        numerics::mx_decode(f.e, scales.data(), codes.data(), n, f.block, dec.data());
        std::vector<std::byte> want(n * size_of(t));
        for (std::size_t i = 0; i < n; ++i) numerics::store_from_double(t, want.data(), i, dec[i]);
        if (kind == coll::OpKind::recv_reduce) numerics::reduce(t, ReduceOp::sum, want.data(), x.operand.data(), want.data(), n);
        for (std::size_t i = 0; i < n; ++i) {
          const double w = numerics::load_as_double(t, want.data(), i), got = numerics::load_as_double(t, x.dst.data(), i);
          if (std::isnan(w)) ASSERT_TRUE(std::isnan(got)) << f.name << " " << i;
          else ASSERT_EQ(w, got) << f.name << " " << name(t) << " element " << i << " of " << v[i];
        }
      }
  }
}

// The f16/bf16 paths of the MX handlers and block floating point, and the packing of their
// codes, bit for bit against the scalar reference of src/numerics (the handlers' earlier
// per-element loops): the receiver, given a wire of every scale with every element code (packed
// here, bit by bit, least significant first), must place what mx_decode's double rounded once
// to the type gives; the sender, given every 16-bit pattern (in order and shuffled, so blocks
// hold NaNs, infinities, subnormals and mixed magnitudes), must put on the wire exactly the
// scales and packed codes of mx_encode of the values widened to f32. The fp8 handlers'
// receivers likewise for every fp8 code.
namespace {
void put_bits(std::vector<std::uint8_t>& out, std::size_t bit0, unsigned bits, unsigned code) {
  for (unsigned k = 0; k < bits; ++k)
    if (code >> k & 1u) out[(bit0 + k) / 8] |= static_cast<std::uint8_t>(1u << ((bit0 + k) % 8));
}
// [scale][codes packed to `bits`] per block, the last block possibly shorter.
std::vector<std::byte> reference_wire(const std::vector<std::uint8_t>& scales, const std::vector<std::uint8_t>& codes,
                                      std::size_t block, unsigned bits) {
  std::vector<std::uint8_t> w;
  for (std::size_t b = 0; b * block < codes.size(); ++b) {
    const std::size_t k = std::min(block, codes.size() - b * block);
    w.push_back(scales[b]);
    const std::size_t at = w.size();
    w.resize(at + (k * bits + 7) / 8, 0);
    for (std::size_t i = 0; i < k; ++i) put_bits(w, 8 * at + i * bits, bits, codes[b * block + i]);
  }
  std::vector<std::byte> out(w.size());
  std::memcpy(out.data(), w.data(), w.size());
  return out;
}
}  // namespace

TEST(EdgeHandlers, MxHalfPathsAndPackingEqualTheScalarReferenceBitForBit) {
  std::mt19937_64 rng(21);
  for (const MxFmt& f : kMxFormats) {
    HandlerChain chain(reg(), f.name);
    const std::size_t ncodes = std::size_t{1} << f.bits;
    for (DataType t : {DataType::f32, DataType::f16, DataType::bf16}) {
      SCOPED_TRACE(std::string(f.name) + " " + std::string(name(t)));
      {  // receive: every scale x every code, and a short last block
        const std::size_t per_scale = (ncodes + f.block - 1) / f.block * f.block;
        const std::size_t n = 256 * per_scale + 5;
        std::vector<std::uint8_t> scales((n + f.block - 1) / f.block), codes(n);
        for (std::size_t i = 0; i < n; ++i) codes[i] = static_cast<std::uint8_t>((i % per_scale) % ncodes);
        for (std::size_t b = 0; b < scales.size(); ++b) scales[b] = static_cast<std::uint8_t>(b * f.block / per_scale % 256);
        scales.back() = 130;  // the short last block with a finite scale, so that its codes show
        const auto wire = reference_wire(scales, codes, f.block, f.bits);
        Msg x = make_msg(t, ReduceOp::sum, n, coll::OpKind::recv, chain);
        ASSERT_EQ(x.m.wire_bytes, wire.size());
        x.m.dst = x.dst.data();
        auto p = chain.open(x.m);
        feed(*p, wire, rng);
        std::vector<double> dec(n);
        numerics::mx_decode(f.e, scales.data(), codes.data(), n, f.block, dec.data());
        std::vector<std::byte> want(n * size_of(t));
        for (std::size_t i = 0; i < n; ++i) numerics::store_from_double(t, want.data(), i, dec[i]);
        for (std::size_t i = 0; i < n; ++i)
          ASSERT_EQ(0, std::memcmp(x.dst.data() + i * size_of(t), want.data() + i * size_of(t), size_of(t)))
              << "element " << i << ": scale " << int(scales[i / f.block]) << " code " << int(codes[i]);
      }
      if (t == DataType::f32) continue;
      for (bool shuffled : {false, true}) {  // send: every 16-bit pattern
        std::vector<std::uint16_t> h(65536 + 9);
        for (std::size_t i = 0; i < h.size(); ++i) h[i] = static_cast<std::uint16_t>(i);
        if (shuffled) std::shuffle(h.begin(), h.end(), rng);
        const std::size_t n = h.size();
        std::vector<std::byte> src(2 * n);
        std::memcpy(src.data(), h.data(), 2 * n);
        std::vector<float> v(n);
        for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(numerics::load_as_double(t, src.data(), i));
        std::vector<std::uint8_t> scales((n + f.block - 1) / f.block), codes(n);
        numerics::mx_encode(f.e, v.data(), n, f.block, scales.data(), codes.data());
        const auto want = reference_wire(scales, codes, f.block, f.bits);
        coll::CollectiveParams params;
        params.dtype = t;
        ASSERT_EQ(chain.wire_bytes(params, 2 * n), want.size());
        std::vector<std::byte> wire(want.size());
        chain.encode(params, src.data(), 2 * n, wire.data());
        for (std::size_t i = 0; i < want.size(); ++i)
          ASSERT_EQ(wire[i], want[i]) << "wire byte " << i << (shuffled ? " (shuffled)" : "");
      }
    }
  }
  for (const char* h : {"e4m3", "e5m2"}) {
    HandlerChain chain(reg(), h);
    const bool e4 = std::string(h) == "e4m3";
    for (DataType t : {DataType::f16, DataType::bf16}) {
      const std::size_t n = 256 * 3 + 7;
      std::vector<std::byte> wire(n);
      for (std::size_t i = 0; i < n; ++i) wire[i] = static_cast<std::byte>(i % 256);
      Msg x = make_msg(t, ReduceOp::sum, n, coll::OpKind::recv, chain);
      x.m.dst = x.dst.data();
      auto p = chain.open(x.m);
      feed(*p, wire, rng);
      for (std::size_t i = 0; i < n; ++i) {
        const auto c = static_cast<std::uint8_t>(i % 256);
        std::byte want[2];
        numerics::store_from_double(t, want, 0, e4 ? numerics::e4m3_to_f32(c) : numerics::e5m2_to_f32(c));
        ASSERT_EQ(0, std::memcmp(x.dst.data() + 2 * i, want, 2)) << h << " " << name(t) << " code " << int(c);
      }
    }
  }
}
