// Reproducible sums (Accumulate::reproducible) in real processes, run by `inc launch --switch`
// / `--topology` (CMakeLists.txt): f32, bf16 and f16 allreduce and reduce_scatter through the
// switch tree and through every host algorithm must give the same bits, on every rank, equal
// to the correctly rounded exact sum (long double here, rounded once); the report gives the
// policy, 8 bytes per element on the link and the window's limits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "inc/inc.hpp"
#include "tests/api/inc_traffic.hpp"
#include "tests/api/mp_util.hpp"
#include "tests/numerics/h16_reference.hpp"

using namespace inc;
using inc::testing::same_everywhere;
using inc::testing::world;

namespace {

namespace h16 = inc::testing::h16;

// Element i of rank r: magnitudes over 2^-12 .. 2^12, exact in every type below.
double val(int r, std::uint64_t i) {
  const std::uint64_t h = (i * 2654435761u + static_cast<std::uint64_t>(r) * 97531u) ^ (i >> 5);
  const int e = static_cast<int>(h % 24) - 12;
  const double m = 1.0 + static_cast<double>((h >> 5) % 128) / 128.0;  // 8 significant bits
  return ((h >> 17) & 1 ? -1.0 : 1.0) * std::ldexp(m, e);
}

std::vector<std::byte> encode(DataType t, const std::vector<double>& v) {
  std::vector<std::byte> b(v.size() * size_of(t));
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (t == DataType::f32) {
      const float x = static_cast<float>(v[i]);
      std::memcpy(b.data() + 4 * i, &x, 4);
    } else {
      const std::uint16_t x = h16::round_once(v[i], t == DataType::f16 ? h16::kF16 : h16::kBF16);
      std::memcpy(b.data() + 2 * i, &x, 2);
    }
  }
  return b;
}

CallOptions repro(const char* algo) {
  CallOptions o;
  o.algo = algo;
  o.accumulate = Accumulate::reproducible;
  return o;
}

}  // namespace

TEST(IncRepro, SwitchAndEveryHostAlgorithmGiveTheSameBits) {
  auto& comm = world();
  const int p = comm.size(), rank = comm.rank();
  for (DataType t : {DataType::f32, DataType::bf16, DataType::f16})
    for (std::uint64_t n : {std::uint64_t{1}, std::uint64_t{1000}, std::uint64_t{100003}}) {
      const std::string what = std::string(name(t)) + " n=" + std::to_string(n);
      std::vector<double> mine(n);
      for (std::uint64_t i = 0; i < n; ++i) mine[i] = val(rank, i);
      const auto in = encode(t, mine);
      // The reference: the exact sum (long double: 24 binades x 8 bits, a few ranks) rounded once.
      std::vector<double> exact(n);
      for (std::uint64_t i = 0; i < n; ++i) {
        long double s = 0;
        for (int r = 0; r < p; ++r) {
          std::vector<double> one{val(r, i)};
          const auto b = encode(t, one);
          s += t == DataType::f32 ? [&] { float x; std::memcpy(&x, b.data(), 4); return double(x); }()
                                  : [&] { std::uint16_t x; std::memcpy(&x, b.data(), 2);
                                          return h16::decode(x, t == DataType::f16 ? h16::kF16 : h16::kBF16); }();
        }
        exact[i] = static_cast<double>(s);
      }
      const auto want = encode(t, exact);  // one rounding (f32: double -> float of an exact double)

      std::vector<std::byte> sw(in.size());
      comm.allreduce(in.data(), sw.data(), n, t, ReduceOp::sum, repro("inc"));
      Report rep = comm.last_report();
      ASSERT_TRUE(rep.in_network) << what << ": " << rep.reason;
      EXPECT_EQ(rep.accumulate, Accumulate::reproducible) << what;
      EXPECT_EQ(rep.link_bytes_per_element, 8u) << what;
      EXPECT_EQ(rep.inexact_blocks, 0u) << what;
      EXPECT_EQ(rep.nonfinite_blocks, 0u) << what;
      // The limbs (8 B per element) and the pre-pass (8 B per 256 elements), plus headers.
      EXPECT_GE(rep.bytes_sent, n * 8) << what;
      if (n == 100003) {
        EXPECT_LT(inc_test::first_transmission_bytes(rep), n * 8 + n * 8 / 8)
            << what << ": " << rep.retransmissions << " retransmissions, " << rep.bytes_resent << " B resent";
      }
      ASSERT_TRUE(same_everywhere(comm, sw)) << what;
      EXPECT_EQ(sw, want) << what << ": not the correctly rounded exact sum";
      for (const char* algo : {"ring", "recursive_doubling", "rabenseifner"}) {
        std::vector<std::byte> host(in.size());
        comm.allreduce(in.data(), host.data(), n, t, ReduceOp::sum, repro(algo));
        rep = comm.last_report();
        EXPECT_FALSE(rep.in_network) << what << " " << algo;
        EXPECT_EQ(rep.accumulate, Accumulate::reproducible) << what << " " << algo;
        EXPECT_EQ(host, sw) << what << ": " << algo << " differs from the switch";
      }
      // In place, and reduce_scatter through the switch and the ring: each rank's shard.
      std::vector<std::byte> inplace = in;
      comm.allreduce(inplace.data(), inplace.data(), n, t, ReduceOp::sum, repro("ring"));
      EXPECT_EQ(inplace, sw) << what << " in place";
      const std::uint64_t shard = n / static_cast<std::uint64_t>(p);
      if (shard == 0) continue;
      std::vector<std::byte> all(shard * static_cast<std::uint64_t>(p) * size_of(t));
      std::memcpy(all.data(), in.data(), all.size());
      for (const char* algo : {"inc", "ring"}) {
        std::vector<std::byte> mine_rs(shard * size_of(t));
        comm.reduce_scatter(all.data(), mine_rs.data(), shard, t, ReduceOp::sum, repro(algo));
        // The shard of the allreduce of the first p x shard elements: the same blocks (the
        // block exponents cover the whole input), so the same bits.
        std::vector<std::byte> ref(all.size());
        comm.allreduce(all.data(), ref.data(), shard * static_cast<std::uint64_t>(p), t, ReduceOp::sum, repro("ring"));
        EXPECT_TRUE(std::equal(mine_rs.begin(), mine_rs.end(),
                               ref.begin() + static_cast<std::ptrdiff_t>(static_cast<std::uint64_t>(rank) * shard * size_of(t))))
            << what << " reduce_scatter " << algo;
      }
    }
}

TEST(IncRepro, WhatTheWindowCannotHoldIsReportedAndStillReproducible) {
  auto& comm = world();
  const std::uint64_t n = 1000;
  std::vector<float> in(n), sw(n), host(n);
  for (std::uint64_t i = 0; i < n; ++i) in[i] = static_cast<float>(val(comm.rank(), i));
  if (comm.rank() == 0) in[5] = std::ldexp(1.0f, -100);  // block 0: beyond the 62-bit window
  if (comm.rank() == comm.size() - 1) in[600] = INFINITY;  // block 2: non-finite
  comm.allreduce(in.data(), sw.data(), n, DataType::f32, ReduceOp::sum, repro("inc"));
  const Report a = comm.last_report();
  comm.allreduce(in.data(), host.data(), n, DataType::f32, ReduceOp::sum, repro("ring"));
  const Report b = comm.last_report();
  for (const Report& r : {a, b}) {
    EXPECT_EQ(r.inexact_blocks, 1u);
    EXPECT_EQ(r.nonfinite_blocks, 1u);
  }
  EXPECT_EQ(std::memcmp(sw.data(), host.data(), n * 4), 0);
  EXPECT_TRUE(std::isnan(sw[600]) && std::isnan(sw[512]) && !std::isnan(sw[511]));
  // A product has no reproducible form: refused, not silently rounded.
  CallOptions o = repro("ring");
  EXPECT_THROW(comm.allreduce(in.data(), sw.data(), n, DataType::f32, ReduceOp::prod, o), Error);
  EXPECT_THROW(comm.allreduce(in.data(), sw.data(), n / 2, DataType::f64, ReduceOp::sum, o), Error);
}
