// i8/u8 through the switch on the seeded simulated network: sums wrap modulo 2^8 under both
// policies (the hosts' bits), and the overflow flag is exact under widen (raised exactly when
// some total leaves the type's range), while narrow raises it whenever a partial sum wrapped.
// References: exact sums in 64-bit integers, written here.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "tests/switch/sim_util.hpp"

namespace inc::sw::testing {
namespace {

const std::vector<std::vector<std::uint16_t>> kTrees = {{6}, {1, 5}, {3, 3}, {2, 1, 3}};

TEST(I8, SumsWrapAsOnTheHostsUnderBothPoliciesOnEveryTree) {
  for (bool is_signed : {true, false})
    for (bool widen : {false, true})
      for (const auto& tree : kTrees) {
        std::uint16_t n = 0;
        for (auto m : tree) n += m;
        std::mt19937_64 rng(n * 7 + widen + 2 * is_signed);
        std::vector<std::vector<std::uint8_t>> in(n, std::vector<std::uint8_t>(1000));
        for (auto& v : in)
          for (auto& x : v) x = std::uint8_t(rng());
        Topo t = tree_of(tree, 3 + n, faults_for(0.05));
        const NumKind k = is_signed ? (widen ? NumKind::i8_widen : NumKind::i8)
                                    : (widen ? NumKind::u8_widen : NumKind::u8);
        ByteOutcome r = run_bytes(t, k, ReduceKind::sum, in);
        bool out_of_range = false;
        for (std::size_t i = 0; i < in[0].size(); ++i) {
          std::int64_t s = 0;
          for (const auto& v : in) s += is_signed ? std::int64_t(std::int8_t(v[i])) : std::int64_t(v[i]);
          out_of_range |= is_signed ? (s < -128 || s > 127) : s > 255;
          for (std::uint16_t m = 0; m < n; ++m) ASSERT_EQ(r.out[m][i], std::uint8_t(s)) << i;
        }
        ASSERT_TRUE(out_of_range);  // random bytes: some totals do not fit
        for (std::uint16_t m = 0; m < n; ++m) EXPECT_TRUE(r.overflow[m]) << "member " << m;
      }
}

// The paper's example, scaled to i8: 100 - 70 + 70 + 70 - 50 - 100 = 20 fits, although partial
// sums in arrival order leave the range. Widened, no overflow is reported; one element whose
// total is 200 is reported under both policies.
TEST(I8, WidenFlagsExactlyTheTotalsThatDoNotFit) {
  const std::vector<std::int8_t> terms = {100, -70, 70, 70, -50, -100};
  for (const auto& tree : kTrees) {
    const std::size_t count = 300;
    for (bool bad : {false, true}) {
      std::vector<std::vector<std::uint8_t>> in(6, std::vector<std::uint8_t>(count));
      std::mt19937_64 rng(count + bad);
      for (std::size_t i = 0; i < count; ++i) {
        std::vector<std::int8_t> p = terms;
        std::shuffle(p.begin(), p.end(), rng);
        for (std::size_t m = 0; m < 6; ++m) in[m][i] = std::uint8_t(p[m]);
      }
      if (bad) {  // total 200: wraps to 200 - 256
        for (std::size_t m = 0; m < 6; ++m) in[m][count / 2] = std::uint8_t(std::int8_t(m < 2 ? 100 : 0));
      }
      Topo t = tree_of(tree, 40 + bad, faults_for(0.02));
      ByteOutcome r = run_bytes(t, NumKind::i8_widen, ReduceKind::sum, in);
      for (std::uint16_t m = 0; m < 6; ++m) {
        EXPECT_EQ(r.overflow[m], bad) << "tree of " << tree.size() << " member " << m;
        for (std::size_t i = 0; i < count; ++i)
          ASSERT_EQ(r.out[m][i], std::uint8_t(bad && i == count / 2 ? 200 : 20)) << i;
      }
      if (bad) {
        Topo t2 = tree_of(tree, 50, faults_for(0.02));
        ByteOutcome rn = run_bytes(t2, NumKind::i8, ReduceKind::sum, in);
        for (std::uint16_t m = 0; m < 6; ++m) EXPECT_TRUE(rn.overflow[m]);
      }
    }
  }
}

TEST(I8, MinMaxAreExact) {
  for (bool is_signed : {true, false})
    for (ReduceKind op : {ReduceKind::min, ReduceKind::max}) {
      const std::uint16_t n = 5;
      std::mt19937_64 rng(9 + is_signed);
      std::vector<std::vector<std::uint8_t>> in(n, std::vector<std::uint8_t>(500));
      for (auto& v : in)
        for (auto& x : v) x = std::uint8_t(rng());
      Topo t = two_level(12, faults_for(0.05), {2, 3}, 4, 16);
      ByteOutcome r = run_bytes(t, is_signed ? NumKind::i8 : NumKind::u8, op, in);
      for (std::size_t i = 0; i < 500; ++i) {
        int best = is_signed ? int(std::int8_t(in[0][i])) : int(in[0][i]);
        for (const auto& v : in) {
          const int x = is_signed ? int(std::int8_t(v[i])) : int(v[i]);
          best = op == ReduceKind::max ? std::max(best, x) : std::min(best, x);
        }
        for (std::uint16_t m = 0; m < n; ++m) ASSERT_EQ(r.out[m][i], std::uint8_t(best)) << i;
        ASSERT_FALSE(r.overflow[0]);
      }
    }
}

}  // namespace
}  // namespace inc::sw::testing
