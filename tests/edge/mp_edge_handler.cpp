// Collectives through the edge engine with a conversion handler on the wire (INC_EDGE_HANDLER,
// set by CMakeLists.txt; run by `inc launch --edge`): every receive op of the proxies' schedules
// runs through the handler chain. Checked against references computed here:
//  * bf16/f16: f32 data of small integers, exact in 16 bits at every partial sum: exact results;
//  * int8: data whose every block quantises exactly (integers, block maximum 127 on each rank,
//    sums of the same sign per block: partial sums quantise with an integer scale) are exact
//    for broadcast and allgather; random data lies within the quantiser's bound of the exact sum;
//  * e4m3/e5m2 and the MX formats (mxfp8, mxfp8e5m2, mxfp6e2m3, mxfp6e3m2, mxint8, bfp16): f32
//    data of integers 0..2, whose every partial sum (<= 8 at 4 ranks) is exact in the format;
//    mxfp4: integers 0..1 (partial sums <= 4, exact in E2M1 under any block scale): exact results;
//  * i32 data is not converted: exact.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "inc/inc.hpp"

using namespace inc;

namespace {

Communicator& world() {
  static Communicator c = Communicator::init();
  return c;
}

std::string handler() {
  const char* h = std::getenv("INC_EDGE_HANDLER");
  return h ? h : "";
}

const char* const kAlgos[] = {"ring", "rd", "rabenseifner"};

// The inputs of AllreduceF32ThroughTheConversion are (i * 7 + rank * 13) % modulus(): small
// enough that every partial sum is exact in the wire format (bf16/f16: <= 60 x 4 < 256; the
// 8-bit formats: <= 2 x 4 = 8, exact in E5M2's 3 significant bits and in an MX block).
int modulus() {
  const std::string h = handler();
  return h == "bf16" || h == "f16" || h == "int8" ? 61 : h == "mxfp4" ? 2 : 3;
}

// The 8-bit and smaller formats: one byte or less per element on the wire.
bool ocp(const std::string& h) { return h == "e4m3" || h == "e5m2" || h.starts_with("mx") || h == "bfp16"; }

}  // namespace

TEST(EdgeHandler, TheJobIsOffloadedWithItsWireHandler) {
  auto& c = world();
  ASSERT_TRUE(c.offloaded());
  float v = 1, s = 0;
  c.allreduce(&v, &s, 1, DataType::f32, ReduceOp::sum);
  EXPECT_EQ(s, static_cast<float>(c.size()));
  const Report r = c.last_report();
  EXPECT_EQ(r.offload, "edge");
  EXPECT_NE(r.reason.find("wire handler " + handler()), std::string::npos) << r.reason;
}

// The engines really put the format on the wire: values it cannot carry arrive converted.
TEST(EdgeHandler, TheWireFormatIsReallyUsed) {
  auto& c = world();
  if (c.size() < 2) GTEST_SKIP() << "needs a receiver";
  const std::string h = handler();
  // bf16 and f16 round 1 + 2^-20 to 1; int8 quantises 0.004 in a block whose maximum is 1 to
  // one step of 1/127.
  std::vector<float> v(256, 0.004f);
  v[0] = 1.0f + 1.0f / (1 << 20);
  std::vector<float> sent = v;
  c.broadcast(v.data(), v.size(), DataType::f32, 0);
  if (c.rank() == 0) {
    EXPECT_EQ(v, sent);
    return;
  }
  if (h == "int8") {
    const float scale = sent[0] / 127.0f;  // the block's maximum / 127
    EXPECT_NEAR(v[0], sent[0], sent[0] / 254);
    EXPECT_EQ(v[1], scale) << "0.004 arrives as one step";
  } else if (ocp(h)) {
    // fp8, MXFP8 (scale 2^-8 or 2^-15 in a block whose maximum is 1) and MXFP6 E3M2 (scale
    // 2^-4, subnormal step 2^-4) carry 0.004 as 2^-8; MXINT8 and BFP (scale 1, elements in
    // steps of 2^-6), MXFP6 E2M3 (scale 2^-2, step 2^-3) and MXFP4 (scale 2^-2, step 2^-1) as 0.
    const bool zero = h == "mxint8" || h == "bfp16" || h == "mxfp6e2m3" || h == "mxfp4";
    EXPECT_EQ(v[0], 1.0f) << h << " carries 1 + 2^-20 as 1";
    EXPECT_EQ(v[1], zero ? 0.0f : 0.00390625f) << h;
  } else {
    EXPECT_EQ(v[0], 1.0f) << h << " carries 1 + 2^-20 as 1";
    EXPECT_EQ(v[1], h == "bf16" ? 0.003997802734375f : 0.004001617431640625f);
  }
}

TEST(EdgeHandler, AllreduceF32ThroughTheConversion) {
  auto& c = world();
  const int p = c.size(), me = c.rank();
  const bool int8 = handler() == "int8";
  for (const char* algo : kAlgos)
    for (std::size_t n : {std::size_t{1}, std::size_t{255}, std::size_t{257}, std::size_t{100003}}) {
      // Small integers: every partial sum is exact in bf16/f16 (|sum| <= 4 * 60 < 256).
      std::vector<float> in(n), out(n, -1);
      for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<float>((static_cast<int>(i) * 7 + me * 13) % modulus());
      CallOptions o;
      o.algo = algo;
      c.allreduce(in.data(), out.data(), n, DataType::f32, ReduceOp::sum, o);
      for (std::size_t i = 0; i < n; ++i) {
        double want = 0;
        for (int r = 0; r < p; ++r) want += (static_cast<int>(i) * 7 + r * 13) % modulus();
        // int8: each of at most 2(p-1) quantisations of a partial sum (<= 60p) errs by at most
        // half its block's scale (max/127).
        const double bound = int8 ? 2.0 * (p - 1) * (60.0 * p / 127 / 2) : 0;
        ASSERT_LE(std::fabs(out[i] - want), bound) << algo << " n=" << n << " i=" << i << " got " << out[i];
      }
      EXPECT_EQ(c.last_report().offload, "edge");
    }
}

TEST(EdgeHandler, BroadcastAndAllgatherOfExactlyQuantisableData) {
  auto& c = world();
  const int p = c.size(), me = c.rank();
  const std::size_t n = 256 * 5 + 3;
  // 8-bit formats (modulus 3): integers -8..8, exact in E4M3/E5M2 and, with 8 at the head of
  // every 16 elements (each block), in MXFP8 (elements v x 2^5 or v x 2^12), MXFP6 (v / 2 or
  // v x 2), MXINT8 and BFP (v / 8 in steps of 2^-6); MXFP4 (modulus 2): integers -4..4 with 4 at
  // the heads (elements v, E2M1 has 0, 1, 2, 3, 4).
  const bool small = modulus() <= 3, fp4 = modulus() == 2;
  auto value = [small, fp4](int r, std::size_t i) {
    const std::size_t k = i * 31 + static_cast<std::size_t>(r) * 7;
    if (fp4) return i % 16 == 0 ? 4.0f : static_cast<float>(static_cast<int>(k % 9) - 4);
    if (small) return i % 16 == 0 ? 8.0f : static_cast<float>(static_cast<int>(k % 17) - 8);
    return i % 256 == 0 ? 127.0f : static_cast<float>(static_cast<int>(k % 255) - 127);
  };
  std::vector<float> b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = me == p - 1 ? value(p - 1, i) : 0;
  c.broadcast(b.data(), n, DataType::f32, p - 1);
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(b[i], value(p - 1, i)) << i;
  std::vector<float> mine(n), all(n * static_cast<std::size_t>(p));
  for (std::size_t i = 0; i < n; ++i) mine[i] = value(me, i);
  c.allgather(mine.data(), all.data(), n, DataType::f32);
  for (int r = 0; r < p; ++r)
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(all[static_cast<std::size_t>(r) * n + i], value(r, i)) << r << " " << i;
}

TEST(EdgeHandler, IntegersAreNotConverted) {
  auto& c = world();
  const std::size_t n = 4099;
  std::vector<std::int32_t> in(n), out(n);
  for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<std::int32_t>(i * 100003 + static_cast<std::size_t>(c.rank()));
  auto req = c.iallreduce(in.data(), out.data(), n, DataType::i32, ReduceOp::sum);
  req.wait();
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t want = 0;
    for (int r = 0; r < c.size(); ++r) want += static_cast<std::int64_t>(i * 100003) + r;
    ASSERT_EQ(out[i], static_cast<std::int32_t>(want)) << i;
  }
}
