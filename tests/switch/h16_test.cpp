// f16/bf16 through the switch on the seeded simulated network: the three places a sum can
// round (narrow: every add; widen: once at the root; min/max: never), the bytes per element on
// each hop, and the same bits on every rank, against references written here independently of
// src/numerics (decoding with ldexp, exact sums in double, rounding with an explicit tie rule).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tests/numerics/h16_reference.hpp"
#include "tests/switch/sim_util.hpp"

namespace inc::sw::testing {
namespace {

using namespace inc::testing::h16;

// Random values whose magnitudes lie in [2^-4, 2^4): any f32 partial sum of up to 64 of them
// is exact (quantum 2^-14 for f16, 2^-11 for bf16; sums below 2^10), so the widened path must
// give exactly round_once(exact sum), whatever the order.
std::vector<std::uint16_t> inputs(std::mt19937_64& rng, std::size_t n, Format f) {
  std::uniform_int_distribution<int> ex(-4, 3), mant(0, (1 << f.mant) - 1), sgn(0, 1);
  std::vector<std::uint16_t> v(n);
  for (auto& b : v)
    b = std::uint16_t((sgn(rng) << 15) | std::uint32_t(ex(rng) + f.bias) << f.mant | mant(rng));
  return v;
}

struct Case {
  bool bf16;
  std::vector<std::uint16_t> leaves;  // members per leaf; one entry: a single switch
};

Topo make(const Case& c, std::uint64_t seed, const SimFaults& f, std::uint32_t slot_elems) {
  std::uint16_t n = 0;
  for (auto m : c.leaves) n += m;
  return c.leaves.size() == 1 ? flat(seed, f, n, 4, slot_elems) : two_level(seed, f, c.leaves, 4, slot_elems);
}

std::uint16_t members(const Case& c) {
  std::uint16_t n = 0;
  for (auto m : c.leaves) n += m;
  return n;
}

NumKind kind(bool bf16, bool widen) {
  return bf16 ? (widen ? NumKind::bf16_widen : NumKind::bf16) : (widen ? NumKind::f16_widen : NumKind::f16);
}

// Runs one allreduce; returns every rank's result.
std::vector<std::vector<std::uint16_t>> run(Topo& t, NumKind k, ReduceKind op,
                                            const std::vector<std::vector<std::uint16_t>>& in) {
  const auto n = std::uint16_t(in.size());
  const std::size_t count = in[0].size();
  std::vector<std::vector<std::uint16_t>> out(n, std::vector<std::uint16_t>(count));
  for (std::uint16_t r = 0; r < n; ++r)
    t.c->start(r, WorkerOp::allreduce(k, op, cbytes(in[r]), wbytes(out[r]), count, n));
  EXPECT_TRUE(t.c->run(100 * kSecond));
  for (std::uint16_t r = 0; r < n; ++r)
    EXPECT_TRUE(t.c->worker(r).done()) << "rank " << r << ": " << t.c->worker(r).error().message;
  return out;
}

const std::vector<Case> kCases = {
    {false, {6}}, {true, {6}}, {false, {1, 5}}, {true, {1, 5}}, {false, {3, 3}}, {false, {1, 1, 4}}, {true, {2, 1, 3}},
};

TEST(H16, WidenRoundsOnceAtTheRootOnEveryTreeUnderLoss) {
  for (const Case& c : kCases)
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
      const Format f = c.bf16 ? kBF16 : kF16;
      const std::uint16_t n = members(c);
      const std::size_t count = 700;  // several chunks, the last one partial
      std::mt19937_64 rng(seed * 31 + n);
      std::vector<std::vector<std::uint16_t>> in;
      for (std::uint16_t r = 0; r < n; ++r) in.push_back(inputs(rng, count, f));
      Topo t = make(c, seed, faults_for(0.05), 64);
      auto out = run(t, kind(c.bf16, true), ReduceKind::sum, in);
      for (std::size_t i = 0; i < count; ++i) {
        double exact = 0;
        for (const auto& v : in) exact += decode(v[i], f);
        const std::uint16_t want = round_once(exact, f);
        for (std::uint16_t r = 0; r < n; ++r)
          ASSERT_EQ(out[r][i], want) << (c.bf16 ? "bf16" : "f16") << " leaves " << c.leaves.size()
                                     << " seed " << seed << " rank " << r << " element " << i
                                     << " exact " << exact;
      }
    }
}

// Narrow: each add rounds, so the sum depends on the order; with partial sums that are all
// exact in 16 bits (small integers) it must still be the exact sum, and whatever the inputs
// every rank gets the same bits, within n - 1 roundings of the exact sum.
TEST(H16, NarrowIsExactWhenEveryPartialSumIsAndTheSameBitsEverywhere) {
  for (const Case& c : kCases)
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
      const Format f = c.bf16 ? kBF16 : kF16;
      const std::uint16_t n = members(c);
      const std::size_t count = 900;
      std::mt19937_64 rng(seed * 17 + n);
      std::uniform_int_distribution<int> small(-20, 20);
      std::vector<std::vector<std::uint16_t>> ints(n, std::vector<std::uint16_t>(count));
      for (auto& v : ints)
        for (auto& b : v) b = round_once(small(rng), f);
      Topo t = make(c, seed, faults_for(0.05), 64);
      auto out = run(t, kind(c.bf16, false), ReduceKind::sum, ints);
      for (std::size_t i = 0; i < count; ++i) {
        double exact = 0;
        for (const auto& v : ints) exact += decode(v[i], f);
        for (std::uint16_t r = 0; r < n; ++r) ASSERT_EQ(out[r][i], round_once(exact, f)) << i;
      }
      std::vector<std::vector<std::uint16_t>> in;
      for (std::uint16_t r = 0; r < n; ++r) in.push_back(inputs(rng, count, f));
      Topo t2 = make(c, seed + 100, faults_for(0.05), 64);
      out = run(t2, kind(c.bf16, false), ReduceKind::sum, in);
      for (std::size_t i = 0; i < count; ++i) {
        double exact = 0;
        for (const auto& v : in) exact += decode(v[i], f);
        // Each of the n - 1 adds errs by at most half an ulp of a partial sum below 2^7.
        const double bound = (n - 1) * std::ldexp(0.5, 6 - f.mant);
        for (std::uint16_t r = 0; r < n; ++r) {
          ASSERT_EQ(out[r][i], out[0][i]) << "rank " << r << " element " << i;
          ASSERT_LE(std::fabs(decode(out[r][i], f) - exact), bound) << i;
        }
      }
    }
}

TEST(H16, MinMaxAreExactWithNaNAndSignedZero) {
  for (bool bf16 : {false, true})
    for (ReduceKind op : {ReduceKind::min, ReduceKind::max}) {
      const Format f = bf16 ? kBF16 : kF16;
      const std::uint16_t n = 5;
      const std::size_t count = 300;
      std::mt19937_64 rng(7 + bf16);
      std::vector<std::vector<std::uint16_t>> in;
      for (std::uint16_t r = 0; r < n; ++r) in.push_back(inputs(rng, count, f));
      in[2][0] = 0x8000;  // -0 against +0 everywhere else
      for (std::uint16_t r = 0; r < n; ++r) in[r][0] = r == 2 ? 0x8000 : 0;
      in[3][1] = bf16 ? 0x7fc0 : 0x7e00;  // a quiet NaN wins
      Topo t = two_level(11, faults_for(0.05), {2, 3}, 4, 32);
      auto out = run(t, kind(bf16, false), op, in);
      for (std::size_t i = 0; i < count; ++i) {
        if (i == 1) {
          for (std::uint16_t r = 0; r < n; ++r) EXPECT_TRUE(std::isnan(decode(out[r][i], f)));
          continue;
        }
        std::uint16_t best = in[0][i];
        for (const auto& v : in) {
          const double a = decode(v[i], f), b = decode(best, f);
          if (op == ReduceKind::max ? (a > b || (a == b && !(v[i] & 0x8000))) : (a < b || (a == b && (v[i] & 0x8000))))
            best = v[i];
        }
        for (std::uint16_t r = 0; r < n; ++r) ASSERT_EQ(out[r][i], best) << "element " << i;
      }
    }
}

// The bytes per element on each hop: the members send and receive 2; a leaf with one member
// passes its member's narrow values up (it adds nothing); a leaf adding two or more sends f32
// partial sums (4) under widen, 2 under narrow. The spine's payload bytes in are counted.
TEST(H16, BytesPerElementOnEveryHop) {
  SimFaults none;
  none.jitter = 0;
  const std::size_t count = 1000;
  const std::uint32_t slot_elems = 64;
  struct Want {
    std::vector<std::uint16_t> leaves;
    bool widen;
    std::uint64_t spine_payload;  // bytes of payload the spine received from its leaves
  };
  for (const Want& w : {Want{{1, 4}, true, count * 2 + count * 4}, Want{{3, 2}, true, 2 * count * 4},
                        Want{{3, 2}, false, 2 * count * 2}, Want{{1, 1}, true, 2 * count * 2}}) {
    std::uint16_t n = 0;
    for (auto m : w.leaves) n += m;
    Topo t = two_level(5, none, w.leaves, 4, slot_elems);
    std::vector<std::vector<std::uint16_t>> in(n, std::vector<std::uint16_t>(count, 0x3c00));  // 1.0
    auto out = run(t, kind(false, w.widen), ReduceKind::sum, in);
    ASSERT_EQ(out[0][0], round_once(n, kF16));
    const auto spine = t.c->sw(0).snapshot().jobs.at(0).counters;
    EXPECT_EQ(spine.bytes_in - spine.packets_in * proto::kHeaderBytes, w.spine_payload)
        << "widen " << w.widen << " leaves " << w.leaves.size();
    // Members: 2 bytes per element each way. A widened chunk holds slot_elems elements (the
    // f32 accumulator must fit the slot); a narrow one twice that.
    const std::uint64_t per_chunk = w.widen ? slot_elems : 2 * slot_elems;
    const std::uint64_t chunks = (count + per_chunk - 1) / per_chunk;
    for (std::uint16_t r = 0; r < n; ++r) {
      const auto& rep = t.c->worker(r).report();
      EXPECT_EQ(rep.retransmissions, 0u);
      EXPECT_EQ(rep.bytes_sent, count * 2 + (chunks + 1) * proto::kHeaderBytes);  // + join
      EXPECT_EQ(rep.bytes_received,
                count * 2 + chunks * proto::kHeaderBytes + proto::kHeaderBytes + proto::kJoinInfoBytes);
    }
  }
}

// Members that disagree on the policy (narrow sum against sum_widen) are refused, never mixed.
TEST(H16, MixedPoliciesAreAMismatchNotAWrongResult) {
  const std::uint16_t n = 3;
  Topo t = flat(3, SimFaults{}, n, 4, 32);
  // One chunk of the same count under either policy: only the operation tells them apart.
  const std::size_t count = 20;
  std::vector<std::vector<std::uint16_t>> in(n, std::vector<std::uint16_t>(count, 0x3c00));
  std::vector<std::vector<std::uint16_t>> out(n, std::vector<std::uint16_t>(count));
  for (std::uint16_t r = 0; r < n; ++r)
    t.c->start(r, WorkerOp::allreduce(r == 1 ? NumKind::f16 : NumKind::f16_widen, ReduceKind::sum,
                                      cbytes(in[r]), wbytes(out[r]), count, n));
  t.c->run(10 * kSecond);
  bool all_done = true;
  for (std::uint16_t r = 0; r < n; ++r) all_done &= t.c->worker(r).done();
  EXPECT_FALSE(all_done);
  EXPECT_GT(t.c->sw(0).counters().drops_by_reason[std::size_t(proto::Reason::mismatch)], 0u);
}

}  // namespace
}  // namespace inc::sw::testing
