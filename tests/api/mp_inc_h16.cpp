// f16/bf16 (and i8/u8, fp8 and i4, at the end) collectives through a real switch (or a tree of switches) with every accumulator
// policy, run by `inc launch --switch` / `--topology` (CMakeLists.txt). Results are checked
// against references written here (decoding with ldexp, exact sums in double, one rounding
// with an explicit tie rule), every rank must hold the same bits, and each call's report must
// give the policy, the bytes per element on the rank's link and where rounding happened.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "inc/inc.hpp"
#include "tests/api/inc_traffic.hpp"
#include "tests/api/mp_util.hpp"
#include "tests/numerics/fp8_reference.hpp"
#include "tests/numerics/h16_reference.hpp"

using namespace inc;
using inc::testing::same_everywhere;
using inc::testing::world;

namespace {

using namespace inc::testing::h16;
Format format(DataType t) { return t == DataType::f16 ? kF16 : kBF16; }

// Magnitudes in [2^-4, 2^4): every f32 partial sum of up to 64 of them is exact, so widen and
// wide must give round_once(exact sum) whatever the order and the tree.
std::uint16_t val(DataType t, int r, std::uint64_t i) {
  const Format f = format(t);
  const std::uint64_t h = (i * 2654435761u + static_cast<std::uint64_t>(r) * 97531u) ^ (i >> 7);
  const int e = static_cast<int>(h % 8) - 4;
  const std::uint32_t mant = static_cast<std::uint32_t>((h >> 3) % (1u << f.mant));
  return static_cast<std::uint16_t>(((h >> 20) & 1) << 15 | std::uint32_t(e + f.bias) << f.mant | mant);
}

// A sum Allreduce of n elements under `acc`, and its report: in the network with that policy,
// `bpe` bytes per element on this rank's link (4 when wide) and, at n = 100003, traffic
// between n x bpe and n x bpe x 9/8 (headers). False if it did not run in the network.
template <class T>
bool sum_in_network(Communicator& comm, const std::vector<T>& in, std::vector<T>& out, DataType t, Accumulate acc,
                    std::uint32_t narrow_bpe, const std::string& what, Report& rep) {
  CallOptions o;
  o.accumulate = acc;
  const std::uint64_t n = in.size();
  // Ranks that checked the previous result at different speeds start together: a rank whose
  // chunks wait long for a slow peer retransmits them (counted apart, in bytes_resent).
  comm.barrier();
  comm.allreduce(in.data(), out.data(), n, t, ReduceOp::sum, o);
  rep = comm.last_report();
  EXPECT_TRUE(rep.in_network) << what << ": " << rep.reason;
  if (!rep.in_network) return false;
  EXPECT_EQ(rep.accumulate, acc) << what;
  const std::uint32_t bpe = acc == Accumulate::wide ? 4 : narrow_bpe;
  EXPECT_EQ(rep.link_bytes_per_element, bpe) << what;
  EXPECT_GE(rep.bytes_sent, n * bpe) << what;
  if (n == 100003) {
    EXPECT_LT(inc_test::first_transmission_bytes(rep), n * bpe + n * bpe / 8)
        << what << ": " << rep.retransmissions << " retransmissions, " << rep.bytes_resent << " B resent";
  }
  return true;
}

}  // namespace

TEST(IncH16, SumsRunInTheNetworkWithEachPolicyAndReportIt) {
  auto& comm = world();
  const int p = comm.size(), rank = comm.rank();
  for (DataType t : {DataType::f16, DataType::bf16})
    for (Accumulate acc : {Accumulate::narrow, Accumulate::widen, Accumulate::wide})
      for (std::uint64_t n : {std::uint64_t{1}, std::uint64_t{1000}, std::uint64_t{100003}}) {
        const Format f = format(t);
        std::vector<std::uint16_t> in(n), out(n);
        for (std::uint64_t i = 0; i < n; ++i) in[i] = val(t, rank, i);
        const std::string what = std::string(name(t)) + " " + std::string(name(acc)) + " n=" + std::to_string(n);
        Report rep;
        ASSERT_TRUE(sum_in_network(comm, in, out, t, acc, 2, what, rep));
        EXPECT_NE(rep.reason.find(acc == Accumulate::widen   ? "rounded once at the root"
                                  : acc == Accumulate::wide ? "rounds the f32 result once"
                                                            : "each add in a switch rounds"),
                  std::string::npos)
            << rep.reason;
        ASSERT_TRUE(same_everywhere(comm, out)) << what;
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < n; ++i) {
          double exact = 0;
          for (int r = 0; r < p; ++r) exact += decode(val(t, r, i), f);
          if (acc == Accumulate::narrow) {  // p - 1 roundings of partial sums below 2^7
            wrong += !(std::fabs(decode(out[i], f) - exact) <= (p - 1) * std::ldexp(0.5, 6 - f.mant));
          } else {
            wrong += out[i] != round_once(exact, f);
          }
        }
        EXPECT_EQ(wrong, 0u) << what;
      }
}

TEST(IncH16, AvgMinMaxAndReduceScatter) {
  auto& comm = world();
  const int p = comm.size(), rank = comm.rank();
  const std::uint64_t n = 5003;
  for (DataType t : {DataType::f16, DataType::bf16}) {
    const Format f = format(t);
    std::vector<std::uint16_t> in(n), out(n);
    for (std::uint64_t i = 0; i < n; ++i) in[i] = val(t, rank, i);
    for (ReduceOp op : {ReduceOp::avg, ReduceOp::min, ReduceOp::max}) {
      comm.allreduce(in.data(), out.data(), n, t, op);  // the communicator's default: widen
      const Report rep = comm.last_report();
      ASSERT_TRUE(rep.in_network) << rep.reason;
      EXPECT_EQ(rep.link_bytes_per_element, 2u);
      std::uint64_t wrong = 0;
      for (std::uint64_t i = 0; i < n; ++i) {
        double s = 0, mn = INFINITY, mx = -INFINITY;
        for (int r = 0; r < p; ++r) {
          const double x = decode(val(t, r, i), f);
          s += x, mn = std::min(mn, x), mx = std::max(mx, x);
        }
        // avg as on the hosts: the sum rounded once (at the root), then divided and rounded.
        const std::uint16_t want = op == ReduceOp::avg   ? round_once(decode(round_once(s, f), f) / p, f)
                                   : op == ReduceOp::min ? round_once(mn, f)
                                                         : round_once(mx, f);
        wrong += out[i] != want;
      }
      EXPECT_EQ(wrong, 0u) << name(t) << " " << name(op);
    }
    // Reduce_scatter: rank r's shard of the allreduce.
    const std::uint64_t shard = 777;
    std::vector<std::uint16_t> rin(shard * p), rout(shard);
    for (std::uint64_t i = 0; i < rin.size(); ++i) rin[i] = val(t, rank, i);
    comm.reduce_scatter(rin.data(), rout.data(), shard, t, ReduceOp::sum);
    ASSERT_TRUE(comm.last_report().in_network) << comm.last_report().reason;
    std::uint64_t wrong = 0;
    for (std::uint64_t i = 0; i < shard; ++i) {
      double exact = 0;
      for (int r = 0; r < p; ++r) exact += decode(val(t, r, rank * shard + i), f);
      wrong += rout[i] != round_once(exact, f);
    }
    EXPECT_EQ(wrong, 0u) << name(t) << " reduce_scatter";
  }
}

// i8/u8 (1 byte per element): sums wrap modulo 2^8 as on the hosts under both policies; the
// report's overflow flag is raised when a total leaves the range (and not when it fits and
// every partial sum does); min/max exact.
TEST(IncI8, SumsWrapAsOnTheHostsAndOverflowIsReported) {
  auto& comm = world();
  const int p = comm.size(), rank = comm.rank();
  const std::uint64_t n = 30011;
  for (Accumulate acc : {Accumulate::narrow, Accumulate::widen}) {
    CallOptions o;
    o.accumulate = acc;
    std::vector<std::int8_t> in(n), out(n);
    for (std::uint64_t i = 0; i < n; ++i) in[i] = static_cast<std::int8_t>((i * 7 + rank * 3) % 21) - 10;
    comm.barrier();  // start together (a rank waiting for a slow peer resends: bytes_resent)
    comm.allreduce(in.data(), out.data(), n, DataType::i8, ReduceOp::sum, o);
    Report rep = comm.last_report();
    ASSERT_TRUE(rep.in_network) << rep.reason;
    EXPECT_EQ(rep.accumulate, acc);
    EXPECT_EQ(rep.link_bytes_per_element, 1u);
    EXPECT_GE(rep.bytes_sent, n);
    EXPECT_LT(inc_test::first_transmission_bytes(rep), n + n / 8)
        << rep.retransmissions << " retransmissions, " << rep.bytes_resent << " B resent";
    EXPECT_FALSE(rep.overflow) << name(acc);
    std::uint64_t wrong = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
      int s = 0;
      for (int r = 0; r < p; ++r) s += static_cast<int>((i * 7 + r * 3) % 21) - 10;
      wrong += out[i] != s;
    }
    EXPECT_EQ(wrong, 0u) << name(acc);
    std::vector<std::uint8_t> big(n, 200), bout(n);  // every total 200 p: out of range
    comm.allreduce(big.data(), bout.data(), n, DataType::u8, ReduceOp::sum, o);
    rep = comm.last_report();
    ASSERT_TRUE(rep.in_network) << rep.reason;
    EXPECT_EQ(rep.overflow, p > 1) << name(acc);
    for (auto v : bout) ASSERT_EQ(v, static_cast<std::uint8_t>(200 * p));
  }
  std::vector<std::uint8_t> u(n), umax(n);
  for (std::uint64_t i = 0; i < n; ++i) u[i] = static_cast<std::uint8_t>(i * 13 + rank * 101);
  comm.allreduce(u.data(), umax.data(), n, DataType::u8, ReduceOp::max);
  ASSERT_TRUE(comm.last_report().in_network);
  for (std::uint64_t i = 0; i < n; ++i) {
    int m = 0;
    for (int r = 0; r < p; ++r) m = std::max(m, static_cast<int>(static_cast<std::uint8_t>(i * 13 + r * 101)));
    ASSERT_EQ(umax[i], m) << i;
  }
}

// OCP fp8 (1 byte per element) under every policy: widen and wide give one rounding of the
// exact sum (magnitudes in [2^-3, 2^3): every f32 partial sum is exact), narrow the exact sum
// where every partial sum is representable (integers -2..2); the same bits on every rank; the
// bytes on this rank's link; a total beyond 448 is reported as an overflow.
TEST(IncFp8, SumsRunInTheNetworkWithEachPolicyAndReportIt) {
  auto& comm = world();
  const int p = comm.size(), rank = comm.rank();
  namespace f8 = inc::testing::fp8;
  for (DataType t : {DataType::e4m3, DataType::e5m2})
    for (Accumulate acc : {Accumulate::narrow, Accumulate::widen, Accumulate::wide})
      for (std::uint64_t n : {std::uint64_t{1}, std::uint64_t{1001}, std::uint64_t{100003}}) {
        const f8::Fp8& f = t == DataType::e4m3 ? f8::kE4M3 : f8::kE5M2;
        auto val8 = [&](int r, std::uint64_t i) -> std::uint8_t {
          const std::uint64_t h = (i * 2654435761u + static_cast<std::uint64_t>(r) * 97531u) ^ (i >> 7);
          if (acc == Accumulate::narrow) return f.round(static_cast<double>(h % 5) - 2);
          const int e = static_cast<int>(h % 6) - 3;  // [2^-3, 2^3)
          const unsigned m = static_cast<unsigned>((h >> 3) % (1u << f.mbits));
          return static_cast<std::uint8_t>(((h >> 20) & 1) << 7 | unsigned(e + f.bias) << f.mbits | m);
        };
        std::vector<std::uint8_t> in(n), out(n);
        for (std::uint64_t i = 0; i < n; ++i) in[i] = val8(rank, i);
        const std::string what = std::string(name(t)) + " " + std::string(name(acc)) + " n=" + std::to_string(n);
        Report rep;
        ASSERT_TRUE(sum_in_network(comm, in, out, t, acc, 1, what, rep));
        EXPECT_FALSE(rep.overflow) << what;
        ASSERT_TRUE(same_everywhere(comm, out)) << what;
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < n; ++i) {
          double exact = 0;
          for (int r = 0; r < p; ++r) exact += f.value(val8(r, i));
          wrong += out[i] != f.round(exact);
        }
        EXPECT_EQ(wrong, 0u) << what;
      }
  for (Accumulate acc : {Accumulate::narrow, Accumulate::widen}) {  // 448 p: NaN, reported
    CallOptions o;
    o.accumulate = acc;
    std::vector<std::uint8_t> big(1000, 0x7e), r(1000);
    comm.allreduce(big.data(), r.data(), big.size(), DataType::e4m3, ReduceOp::sum, o);
    ASSERT_TRUE(comm.last_report().in_network);
    EXPECT_EQ(comm.last_report().overflow, p > 1) << name(acc);
    for (auto v : r) ASSERT_EQ(v, p > 1 ? 0x7f : 0x7e);
  }
  std::vector<std::uint8_t> x(777), mx(777);  // max: exact
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<std::uint8_t>((i * 13 + rank * 101) % 0x7e);
  comm.allreduce(x.data(), mx.data(), x.size(), DataType::e4m3, ReduceOp::max);
  ASSERT_TRUE(comm.last_report().in_network) << comm.last_report().reason;
  for (std::size_t i = 0; i < x.size(); ++i) {
    unsigned m = 0;
    for (int r = 0; r < p; ++r) m = std::max(m, static_cast<unsigned>((i * 13 + r * 101) % 0x7e));
    ASSERT_EQ(mx[i], m) << i;
  }
}

// i4 (two elements per byte, 0.5 byte per element on the link): sums wrap modulo 16 under both
// policies, overflow reported for totals out of -8..7 only; an even element count over an odd
// number of bytes; min exact.
TEST(IncI4, SumsWrapAndHalfAByteMovesPerElement) {
  auto& comm = world();
  const int p = comm.size(), rank = comm.rank();
  const std::uint64_t bytes = 30011, n = 2 * bytes;
  auto nib = [](std::uint64_t i, int r) { return static_cast<int>((i * 7 + static_cast<std::uint64_t>(r) * 3) % 3) - 1; };
  for (Accumulate acc : {Accumulate::narrow, Accumulate::widen}) {
    CallOptions o;
    o.accumulate = acc;
    std::vector<std::uint8_t> in(bytes), out(bytes);
    for (std::uint64_t b = 0; b < bytes; ++b)
      in[b] = static_cast<std::uint8_t>((nib(2 * b, rank) & 15) | (nib(2 * b + 1, rank) & 15) << 4);
    comm.barrier();  // start together (a rank waiting for a slow peer resends: bytes_resent)
    comm.allreduce(in.data(), out.data(), n, DataType::i4, ReduceOp::sum, o);
    Report rep = comm.last_report();
    ASSERT_TRUE(rep.in_network) << rep.reason;
    EXPECT_EQ(rep.accumulate, acc);
    EXPECT_GE(rep.bytes_sent, n / 2);
    EXPECT_LT(inc_test::first_transmission_bytes(rep), n / 2 + n / 16)
        << rep.retransmissions << " retransmissions, " << rep.bytes_resent << " B resent";
    EXPECT_FALSE(rep.overflow) << name(acc);  // |total| <= p <= 4
    std::uint64_t wrong = 0;
    for (std::uint64_t b = 0; b < bytes; ++b) {
      int s[2] = {0, 0};
      for (int r = 0; r < p; ++r) s[0] += nib(2 * b, r), s[1] += nib(2 * b + 1, r);
      wrong += out[b] != static_cast<std::uint8_t>((s[0] & 15) | (s[1] & 15) << 4);
    }
    EXPECT_EQ(wrong, 0u) << name(acc);
    std::vector<std::uint8_t> big(bytes, 0x77), bout(bytes);  // every total 7 p
    comm.allreduce(big.data(), bout.data(), n, DataType::i4, ReduceOp::sum, o);
    rep = comm.last_report();
    ASSERT_TRUE(rep.in_network);
    EXPECT_EQ(rep.overflow, p > 1) << name(acc);
    const unsigned w = static_cast<unsigned>(7 * p) & 15u;
    for (auto v : bout) ASSERT_EQ(v, w | w << 4);
  }
  std::vector<std::uint8_t> x(501), mn(501);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<std::uint8_t>(i * 29 + rank * 77);
  comm.allreduce(x.data(), mn.data(), 2 * x.size(), DataType::i4, ReduceOp::min);
  ASSERT_TRUE(comm.last_report().in_network) << comm.last_report().reason;
  for (std::size_t i = 0; i < x.size(); ++i)
    for (int h : {0, 1}) {
      int m = 7;
      for (int r = 0; r < p; ++r) {
        const unsigned v = (static_cast<unsigned>(i * 29 + r * 77) & 0xff) >> (4 * h) & 15u;
        m = std::min(m, static_cast<int>(v ^ 8u) - 8);
      }
      ASSERT_EQ((mn[i] >> (4 * h)) & 15, m & 15) << i;
    }
}

// Overflow counts and the per-hop numerics (docs/NUMERICS.md, "Overflow and saturation counts",
// "Per-hop numerics"), with real processes on one switch, on tree4.topo (two leaves of two) and
// on tree3_leaf1.topo (a leaf with one member). On a marked element ranks 0 and 1 hold a big
// value and the others 0, so exactly one add in the whole reduction overflows whatever the
// order, tree or algorithm: the switch reports `marked` on every rank; the ring's ranks count
// their own adds, which sum to `marked`.
TEST(IncEvents, OverflowCountsAndHopsAreReported) {
  auto& comm = world();
  const int p = comm.size(), rank = comm.rank();
  if (p < 2) GTEST_SKIP() << "needs two ranks";
  const std::uint64_t n = 20011;
  std::uint64_t marked = 0;
  std::vector<std::int8_t> in(n), out(n);
  std::vector<std::uint16_t> hin(n), hout(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    const bool mark = i % 5 == 2;
    marked += mark;
    in[i] = mark ? (rank < 2 ? 100 : 0) : static_cast<std::int8_t>(i % 3);
    hin[i] = mark ? (rank < 2 ? 0x7800 : 0) : 0x3c00;  // 32768 twice: infinity in f16
  }
  // Which tree (the test knows the topology files it runs with; INC_SWITCH alone: one switch).
  const char* topo = std::getenv("INC_TOPOLOGY");
  const std::string tree = topo ? std::string(topo) : "";
  const bool two_level = tree.find("tree4") != std::string::npos || tree.find("tree3_leaf1") != std::string::npos;
  const bool alone = tree.find("tree3_leaf1") != std::string::npos && rank == 0;  // one-member leaf
  for (Accumulate acc : {Accumulate::narrow, Accumulate::widen}) {
    CallOptions o;
    o.accumulate = acc;
    comm.allreduce(in.data(), out.data(), n, DataType::i8, ReduceOp::sum, o);
    Report rep = comm.last_report();
    ASSERT_TRUE(rep.in_network) << rep.reason;
    EXPECT_TRUE(rep.events_counted);
    EXPECT_EQ(rep.overflow_events, marked) << name(acc);
    EXPECT_EQ(rep.nonfinite_inputs, 0u);
    // hops: host -> first switch, (leaf -> spine), root -> hosts
    ASSERT_EQ(rep.hops.size(), two_level ? 3u : 2u) << name(acc);
    EXPECT_EQ(rep.hops.front().hop, two_level ? "host->leaf" : "host->switch");
    EXPECT_EQ(rep.hops.back().hop, two_level ? "spine->hosts" : "switch->hosts");
    EXPECT_EQ(rep.hops.front().bytes_per_element, 1.0);
    EXPECT_EQ(rep.hops.front().accumulator_bits, 8u);
    EXPECT_EQ(rep.hops.back().bytes_per_element, 1.0);
    if (two_level) {
      const bool wide = acc == Accumulate::widen && !alone;  // a one-member leaf passes 8 bits on
      EXPECT_EQ(rep.hops[1].hop, "leaf->spine");
      EXPECT_EQ(rep.hops[1].accumulator_bits, wide ? 32u : 8u) << name(acc) << " " << rep.hops[1].carries;
      EXPECT_EQ(rep.hops[1].bytes_per_element, wide ? 4.0 : 1.0) << name(acc);
    }
    for (Accumulate h16 : {acc}) {  // f16: the same overflows, to infinity
      CallOptions oh;
      oh.accumulate = h16;
      comm.allreduce(hin.data(), hout.data(), n, DataType::f16, ReduceOp::sum, oh);
      rep = comm.last_report();
      ASSERT_TRUE(rep.in_network) << rep.reason;
      EXPECT_EQ(rep.overflow_events, marked) << "f16 " << name(h16);
      for (std::uint64_t i = 2; i < n; i += 5) ASSERT_EQ(hout[i], 0x7c00) << i;
    }
  }
  // The ring on the hosts: each rank counts its own adds; together, once per marked element.
  CallOptions ring;
  ring.algo = "ring";
  in[0] = 0;
  std::vector<float> f(n, 1.0f), fo(n);
  f[1] = rank == 0 ? NAN : 1.0f;  // a non-finite input, counted where it is
  comm.allreduce(in.data(), out.data(), n, DataType::i8, ReduceOp::sum, ring);
  Report rep = comm.last_report();
  ASSERT_FALSE(rep.in_network);
  ASSERT_EQ(rep.hops.size(), 1u);
  EXPECT_EQ(rep.hops[0].hop, "host->host");
  std::uint64_t mine = rep.overflow_events, total = 0;
  comm.allreduce(&mine, &total, 1, DataType::u64, ReduceOp::sum);
  EXPECT_EQ(total, marked);
  comm.allreduce(f.data(), fo.data(), n, DataType::f32, ReduceOp::sum);
  EXPECT_EQ(comm.last_report().nonfinite_inputs, rank == 0 ? 1u : 0u);
}
