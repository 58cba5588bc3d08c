// OCP fp8 (e4m3, e5m2) and i4 through the switch on the seeded simulated network, under every
// policy: narrow (fp8 cells, each add rounded as the hosts' kernel; i4 nibbles wrapping),
// widen (f32 / 2 x i16 accumulators from the first aggregating hop, one rounding or wrap at the
// root), min/max exact; the overflow flag; 1 byte per element (i4: per two) on the host links.
// References written here, independent of src/numerics: fp8 values decoded with ldexp from
// sign/exponent/mantissa, rounding = the nearest of all finite values (ties to the even code),
// with the OCP overflow thresholds; i4 exact sums modulo 16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "tests/numerics/fp8_reference.hpp"
#include "tests/switch/sim_util.hpp"

namespace inc::sw::testing {
namespace {

using inc::testing::fp8::Fp8;
using inc::testing::fp8::kE4M3;
using inc::testing::fp8::kE5M2;

const std::vector<std::vector<std::uint16_t>> kTrees = {{6}, {1, 5}, {3, 3}, {2, 1, 3}};

// Random finite codes whose value is 0 or at least 2^-3 in magnitude: every f32 partial sum of
// six is exact (e4m3: a grid of 2^-6 below 6 x 448 < 2^12; e5m2: 2^-5 below 6 x 57344 < 2^19:
// at most 24 bits), so widen must give exactly one rounding of the exact sum whatever the
// tree, order and loss.
std::vector<std::vector<std::uint8_t>> fp8_inputs(const Fp8& f, std::uint16_t n, std::size_t count,
                                                  std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<std::uint8_t>> in(n, std::vector<std::uint8_t>(count));
  for (auto& v : in)
    for (auto& x : v) {
      do x = std::uint8_t(rng());
      while (!f.finite(x) || ((x & 0x7f) != 0 && std::fabs(f.value(x)) < 0.125));
    }
  return in;
}

TEST(Fp8Switch, WidenRoundsOnceAtTheRootOnEveryTreeUnderLoss) {
  for (const Fp8* f : {&kE4M3, &kE5M2})
    for (const auto& tree : kTrees) {
      std::uint16_t n = 0;
      for (auto m : tree) n += m;
      const auto in = fp8_inputs(*f, n, 1000, n + f->e4m3);
      Topo t = tree_of(tree, 5 + n, faults_for(0.05));
      const ByteOutcome r = run_bytes(t, f->e4m3 ? NumKind::e4m3_widen : NumKind::e5m2_widen, ReduceKind::sum, in);
      bool any_ov = false;
      for (std::size_t i = 0; i < in[0].size(); ++i) {
        double s = 0;
        for (const auto& v : in) s += f->value(v[i]);  // exact in double (grid 2^-6, < 2^19)
        const std::uint8_t want = f->round(s);
        any_ov |= !f->finite(want);
        for (std::uint16_t m = 0; m < n; ++m)
          ASSERT_EQ(r.out[m][i], want) << "e4m3 " << f->e4m3 << " leaves " << tree.size() << " i " << i;
      }
      for (std::uint16_t m = 0; m < n; ++m) EXPECT_EQ(r.overflow[m], any_ov);
    }
}

// Narrow: every add rounds in the switch. Small integers (e4m3: -2..2, e5m2: -1..1) keep every
// partial sum of six exact, so the result is exact whatever the order; random codes give the
// same bits on every member.
TEST(Fp8Switch, NarrowIsExactWhenEveryPartialSumIsAndTheSameBitsEverywhere) {
  for (const Fp8* f : {&kE4M3, &kE5M2})
    for (const auto& tree : kTrees) {
      std::uint16_t n = 0;
      for (auto m : tree) n += m;
      const int lim = f->e4m3 ? 2 : 1;
      std::mt19937_64 rng(n * 3 + f->e4m3);
      std::vector<std::vector<std::uint8_t>> in(n, std::vector<std::uint8_t>(700));
      for (auto& v : in)
        for (auto& x : v) x = f->round(double(int(rng() % (2 * lim + 1)) - lim));
      Topo t = tree_of(tree, 9 + n, faults_for(0.05));
      const NumKind k = f->e4m3 ? NumKind::e4m3 : NumKind::e5m2;
      ByteOutcome r = run_bytes(t, k, ReduceKind::sum, in);
      for (std::size_t i = 0; i < 700; ++i) {
        double s = 0;
        for (const auto& v : in) s += f->value(v[i]);
        for (std::uint16_t m = 0; m < n; ++m) ASSERT_EQ(f->value(r.out[m][i]), s) << i;
      }
      const auto rand_in = fp8_inputs(*f, n, 700, 77 + n);
      Topo t2 = tree_of(tree, 19 + n, faults_for(0.05));
      r = run_bytes(t2, k, ReduceKind::sum, rand_in);
      for (std::uint16_t m = 1; m < n; ++m) ASSERT_EQ(r.out[m], r.out[0]);
    }
}

// 448 + 448 - 448 - 448 = 0 fits e4m3 (57344 ... for e5m2), yet a partial sum does not: widen
// reports no overflow, and one element totalling 2 x max is reported (NaN / infinity) under
// both policies.
TEST(Fp8Switch, OverflowFlagsFollowThePolicy) {
  for (const Fp8* f : {&kE4M3, &kE5M2}) {
    const std::uint8_t mx = f->e4m3 ? 0x7e : 0x7b, neg = std::uint8_t(mx | 0x80);
    for (bool bad : {false, true}) {
      std::vector<std::vector<std::uint8_t>> in(4, std::vector<std::uint8_t>(100));
      for (std::size_t i = 0; i < 100; ++i)
        for (std::size_t m = 0; m < 4; ++m) in[m][i] = (m + i) % 2 ? mx : neg;
      if (bad) in[0][50] = in[1][50] = mx, in[2][50] = in[3][50] = 0;
      Topo t = tree_of({2, 2}, 30 + bad, faults_for(0.02));
      ByteOutcome r = run_bytes(t, f->e4m3 ? NumKind::e4m3_widen : NumKind::e5m2_widen, ReduceKind::sum, in);
      for (std::uint16_t m = 0; m < 4; ++m) {
        EXPECT_EQ(r.overflow[m], bad);
        for (std::size_t i = 0; i < 100; ++i)
          ASSERT_EQ(r.out[m][i], bad && i == 50 ? std::uint8_t(f->e4m3 ? 0x7f : 0x7c) : 0) << i;
      }
      if (bad) {
        Topo t2 = tree_of({2, 2}, 40, faults_for(0.02));
        ByteOutcome rn = run_bytes(t2, f->e4m3 ? NumKind::e4m3 : NumKind::e5m2, ReduceKind::sum, in);
        for (std::uint16_t m = 0; m < 4; ++m) EXPECT_TRUE(rn.overflow[m]);
      }
    }
  }
}

TEST(Fp8Switch, MinMaxAreExact) {
  for (const Fp8* f : {&kE4M3, &kE5M2})
    for (ReduceKind op : {ReduceKind::min, ReduceKind::max}) {
      const auto in = fp8_inputs(*f, 5, 500, 3 + f->e4m3);
      Topo t = two_level(12, faults_for(0.05), {2, 3}, 4, 16);
      ByteOutcome r = run_bytes(t, f->e4m3 ? NumKind::e4m3 : NumKind::e5m2, op, in);
      for (std::size_t i = 0; i < 500; ++i) {
        double best = f->value(in[0][i]);
        for (const auto& v : in) best = op == ReduceKind::max ? std::max(best, f->value(v[i])) : std::min(best, f->value(v[i]));
        ASSERT_EQ(f->value(r.out[0][i]), best) << i;
        for (std::uint16_t m = 1; m < 5; ++m) ASSERT_EQ(r.out[m][i], r.out[0][i]);
      }
    }
}

int nib(std::uint8_t b, int hi) { return int(((b >> (4 * hi)) & 0xf) ^ 8) - 8; }

// i4: element 2k in the low nibble of byte k; counts are bytes (an odd number of them here).
TEST(I4Switch, SumsWrapModulo16UnderBothPoliciesOnEveryTree) {
  for (bool widen : {false, true})
    for (const auto& tree : kTrees) {
      std::uint16_t n = 0;
      for (auto m : tree) n += m;
      std::mt19937_64 rng(n * 11 + widen);
      std::vector<std::vector<std::uint8_t>> in(n, std::vector<std::uint8_t>(1001));
      for (auto& v : in)
        for (auto& x : v) x = std::uint8_t(rng());
      Topo t = tree_of(tree, 60 + n, faults_for(0.05));
      ByteOutcome r = run_bytes(t, widen ? NumKind::i4_widen : NumKind::i4, ReduceKind::sum, in);
      bool out_of_range = false;
      for (std::size_t i = 0; i < in[0].size(); ++i) {
        int s[2] = {0, 0};
        for (const auto& v : in) s[0] += nib(v[i], 0), s[1] += nib(v[i], 1);
        for (int h : {0, 1}) out_of_range |= s[h] < -8 || s[h] > 7;
        const auto want = std::uint8_t(((s[0] % 16 + 16) % 16) | ((s[1] % 16 + 16) % 16) << 4);
        for (std::uint16_t m = 0; m < n; ++m) ASSERT_EQ(r.out[m][i], want) << i;
      }
      ASSERT_TRUE(out_of_range);
      for (std::uint16_t m = 0; m < n; ++m) EXPECT_TRUE(r.overflow[m]);
    }
}

// The paper's example: 7 - 5 + 5 + 5 - 3 - 7 = 2 in every order and tree: no overflow widened;
// a total of 8 (4 x 2) is flagged under both policies.
TEST(I4Switch, WidenFlagsExactlyTheTotalsThatDoNotFitAndMinMaxAreExact) {
  const std::vector<int> terms = {7, -5, 5, 5, -3, -7};
  for (const auto& tree : kTrees)
    for (bool bad : {false, true}) {
      std::vector<std::vector<std::uint8_t>> in(6, std::vector<std::uint8_t>(301));
      std::mt19937_64 rng(300 + bad);
      for (std::size_t i = 0; i < 301; ++i)
        for (int h : {0, 1}) {
          std::vector<int> p = terms;
          std::shuffle(p.begin(), p.end(), rng);
          for (std::size_t m = 0; m < 6; ++m) in[m][i] = std::uint8_t(in[m][i] | (p[m] & 0xf) << (4 * h));
        }
      if (bad)
        for (std::size_t m = 0; m < 6; ++m) in[m][150] = std::uint8_t(m < 4 ? 0x22 : 0);
      Topo t = tree_of(tree, 70 + bad, faults_for(0.02));
      ByteOutcome r = run_bytes(t, NumKind::i4_widen, ReduceKind::sum, in);
      for (std::uint16_t m = 0; m < 6; ++m) {
        EXPECT_EQ(r.overflow[m], bad);
        for (std::size_t i = 0; i < 301; ++i) ASSERT_EQ(r.out[m][i], bad && i == 150 ? 0x88 : 0x22) << i;
      }
      if (bad) {
        Topo t2 = tree_of(tree, 80, faults_for(0.02));
        ByteOutcome rn = run_bytes(t2, NumKind::i4, ReduceKind::sum, in);
        for (std::uint16_t m = 0; m < 6; ++m) EXPECT_TRUE(rn.overflow[m]);
      }
    }
  for (ReduceKind op : {ReduceKind::min, ReduceKind::max}) {
    std::mt19937_64 rng(5);
    std::vector<std::vector<std::uint8_t>> in(5, std::vector<std::uint8_t>(257));
    for (auto& v : in)
      for (auto& x : v) x = std::uint8_t(rng());
    Topo t = two_level(13, faults_for(0.05), {2, 3}, 4, 16);
    ByteOutcome r = run_bytes(t, NumKind::i4, op, in);
    for (std::size_t i = 0; i < 257; ++i) {
      int b[2] = {nib(in[0][i], 0), nib(in[0][i], 1)};
      for (const auto& v : in)
        for (int h : {0, 1}) b[h] = op == ReduceKind::max ? std::max(b[h], nib(v[i], h)) : std::min(b[h], nib(v[i], h));
      for (std::uint16_t m = 0; m < 5; ++m) ASSERT_EQ(r.out[m][i], std::uint8_t((b[0] & 0xf) | (b[1] & 0xf) << 4)) << i;
    }
  }
}

// Bytes on the members' links: 1 per fp8 element, 1 per two i4 elements, both ways; a narrow
// chunk holds 4 x slot_elems bytes, a widened one slot_elems (its accumulators fill the slot).
TEST(LowpSwitch, BytesPerElementOnTheHostLinks) {
  SimFaults none;
  none.jitter = 0;
  const std::uint32_t slot_elems = 16;
  for (NumKind k : {NumKind::e4m3, NumKind::e4m3_widen, NumKind::e5m2_widen, NumKind::i4, NumKind::i4_widen}) {
    const std::uint16_t n = 3;
    const std::size_t count = 1000;  // bytes: 1000 fp8 elements, 2000 i4 elements
    std::vector<std::vector<std::uint8_t>> in(n, std::vector<std::uint8_t>(count, 0x11));
    Topo t = flat(90, none, n, 4, slot_elems);
    run_bytes(t, k, ReduceKind::sum, in);
    const bool widen = WorkerOp::widens(k);
    const std::uint64_t per_chunk = widen ? slot_elems : 4 * slot_elems;
    const std::uint64_t chunks = (count + per_chunk - 1) / per_chunk;
    for (std::uint16_t r = 0; r < n; ++r) {
      const auto& rep = t.c->worker(r).report();
      EXPECT_EQ(rep.retransmissions, 0u);
      EXPECT_EQ(rep.bytes_sent, count + (chunks + 1) * proto::kHeaderBytes);  // + join
      EXPECT_EQ(rep.bytes_received, count + chunks * proto::kHeaderBytes + proto::kHeaderBytes + proto::kJoinInfoBytes);
    }
  }
}

}  // namespace
}  // namespace inc::sw::testing
