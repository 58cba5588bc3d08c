// infer_dependencies: a hand-made schedule with known hazards, fences, and a randomised
// comparison against the O(n^2) definition (same happens-before order).
#include <gtest/gtest.h>

#include <bitset>
#include <random>
#include <set>
#include <vector>

#include "coll/schedule.hpp"
#include "tests/coll/ops_builder.hpp"

namespace inc::coll {
namespace {

using namespace test;

std::set<std::uint32_t> deps_of(const RankSchedule& s, std::uint32_t i) {
  return {s.deps.begin() + s.dep_begin[i], s.deps.begin() + s.dep_begin[i + 1]};
}

TEST(Dependencies, HandMadeHazards) {
  RankSchedule s;
  s.ops = {
      recv(1, out(0, 100)),                                       // 0: writes out[0,100)
      send(1, out(50, 100)),                                      // 1: reads out[50,150): RAW on 0
      recv(1, out(120, 80)),                                      // 2: writes out[120,200): WAR on 1
      make_op(OpKind::copy, 1, in(0, 10), out(0, 10)),            // 3: writes out[0,10): WAW on 0 only
      send(1, scr(0, 8)),                                         // 4: scratch, untouched: none
      send(1, in(0, 1000)),                                       // 5: reads input: none (reads don't conflict)
      make_op(OpKind::recv_reduce, 1, out(0, 200), out(0, 200)),  // 6: RAW 0,2,3; WAR 1
      send(1, out(0, 0)),                                         // 7: zero bytes: none
      make_op(OpKind::reduce, 1, scr(0, 8), out(199, 1)),         // 8: reads scr (no writer), r/w out[199]: 6
      recv(1, scr(4, 8)),                                         // 9: WAR on 4 and 8 (readers of scr[4,8))
      send(1, out(100, 20)),                                      // 10: RAW on 6 (6 overwrote 0's bytes)
      recv(1, in(500, 4)),                                        // 11: WAR on 5 (hand-made; not a real schedule)
  };
  infer_dependencies(s);
  ASSERT_EQ(s.dep_begin.size(), s.ops.size() + 1);
  EXPECT_EQ(deps_of(s, 0), (std::set<std::uint32_t>{}));
  EXPECT_EQ(deps_of(s, 1), (std::set<std::uint32_t>{0}));
  EXPECT_EQ(deps_of(s, 2), (std::set<std::uint32_t>{1}));
  EXPECT_EQ(deps_of(s, 3), (std::set<std::uint32_t>{0}));
  EXPECT_EQ(deps_of(s, 4), (std::set<std::uint32_t>{}));
  EXPECT_EQ(deps_of(s, 5), (std::set<std::uint32_t>{}));
  EXPECT_EQ(deps_of(s, 6), (std::set<std::uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(deps_of(s, 7), (std::set<std::uint32_t>{}));
  EXPECT_EQ(deps_of(s, 8), (std::set<std::uint32_t>{6}));
  EXPECT_EQ(deps_of(s, 9), (std::set<std::uint32_t>{4, 8}));
  EXPECT_EQ(deps_of(s, 10), (std::set<std::uint32_t>{6}));
  EXPECT_EQ(deps_of(s, 11), (std::set<std::uint32_t>{5}));
}

TEST(Dependencies, FenceWaitsForEverythingEarlier) {
  RankSchedule s;
  s.ops = {
      send(1, out(0, 0)),      // 0
      recv(1, out(0, 0)),      // 1
      recv(1, out(0, 4)),      // 2
      send(1, out(0, 4)),      // 3: RAW on 2
      send(1, out(0, 0)),      // 4: fence -> 0, 1, 3 (2 is covered by 3)
      recv(1, out(8, 0)),      // 5: not a fence: nothing
      send(1, out(0, 0)),      // 6: fence -> 4, 5
  };
  s.ops[4].fence = true;
  s.ops[6].fence = true;
  infer_dependencies(s);
  EXPECT_EQ(deps_of(s, 4), (std::set<std::uint32_t>{0, 1, 3}));
  EXPECT_EQ(deps_of(s, 5), (std::set<std::uint32_t>{}));
  EXPECT_EQ(deps_of(s, 6), (std::set<std::uint32_t>{4, 5}));
}

// Random schedules: the transitive closure of the inferred dependencies equals that of the
// definition (every pair i < j of ops with overlapping regions of one buffer, one of them
// writing), and every inferred dependency is such a pair.
// aligned: regions drawn from a fixed set of disjoint chunks (the fast path of
// infer_dependencies); otherwise arbitrary, partially overlapping ranges (the interval maps).
void check_against_quadratic_definition(bool aligned) {
  constexpr int N = 128;
  std::mt19937_64 rng(aligned ? 11 : 7);
  for (int trial = 0; trial < 25; ++trial) {
    RankSchedule s;
    auto region = [&]() {
      Region r;
      r.buf = static_cast<BufferId>(rng() % 3);
      if (aligned) {
        r.offset = (rng() % 6) * 16;
        r.bytes = rng() % 7 == 0 ? 0 : 16;
      } else {
        r.offset = rng() % 64;
        r.bytes = rng() % 5 == 0 ? 0 : 1 + rng() % 24;
      }
      return r;
    };
    for (int i = 0; i < N; ++i) {
      const auto k = static_cast<OpKind>(rng() % 5);  // send .. reduce
      Op o = make_op(k, 1, region(), region());
      if (k == OpKind::reduce || k == OpKind::recv_reduce) {
        if (rng() % 2) o.src = o.dst;  // in place
        else o.src.bytes = o.dst.bytes;
      }
      if (k == OpKind::copy) o.src.bytes = o.dst.bytes;
      o.fence = rng() % 40 == 0;
      s.ops.push_back(o);
    }
    infer_dependencies(s);

    auto reads = [](const Op& o) {
      std::vector<Region> r;
      if (o.kind != OpKind::recv) r.push_back(o.src);
      if (o.kind == OpKind::reduce) r.push_back(o.dst);
      return r;
    };
    auto writes = [](const Op& o) {
      std::vector<Region> w;
      if (o.kind != OpKind::send) w.push_back(o.dst);
      return w;
    };
    auto overlap = [](const Region& a, const Region& b) {
      return a.buf == b.buf && a.bytes && b.bytes && a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
    };
    auto conflict = [&](const Op& a, const Op& b) {
      for (const Region& wa : writes(a)) {
        for (const Region& rb : reads(b)) if (overlap(wa, rb)) return true;
        for (const Region& wb : writes(b)) if (overlap(wa, wb)) return true;
      }
      for (const Region& ra : reads(a))
        for (const Region& wb : writes(b)) if (overlap(ra, wb)) return true;
      return false;
    };
    std::vector<std::bitset<N>> want(N), got(N);  // closure: ancestors of each op
    for (int j = 0; j < N; ++j) {
      for (int i = 0; i < j; ++i)
        if (conflict(s.ops[static_cast<std::size_t>(i)], s.ops[static_cast<std::size_t>(j)]) ||
            s.ops[static_cast<std::size_t>(j)].fence)
          want[static_cast<std::size_t>(j)] |= want[static_cast<std::size_t>(i)], want[static_cast<std::size_t>(j)].set(static_cast<std::size_t>(i));
      for (auto d = s.dep_begin[static_cast<std::size_t>(j)]; d < s.dep_begin[static_cast<std::size_t>(j) + 1]; ++d) {
        const std::uint32_t i = s.deps[d];
        ASSERT_LT(i, static_cast<std::uint32_t>(j));
        EXPECT_TRUE(conflict(s.ops[i], s.ops[static_cast<std::size_t>(j)]) || s.ops[static_cast<std::size_t>(j)].fence)
            << "trial " << trial << ": op " << j << " depends on " << i << " without a hazard";
        got[static_cast<std::size_t>(j)] |= got[i];
        got[static_cast<std::size_t>(j)].set(i);
      }
      ASSERT_EQ(got[static_cast<std::size_t>(j)], want[static_cast<std::size_t>(j)]) << "trial " << trial << " op " << j;
    }
  }
}

TEST(Dependencies, SameOrderAsTheQuadraticDefinition) { check_against_quadratic_definition(false); }
TEST(Dependencies, AlignedRegionsSameOrderAsTheQuadraticDefinition) {
  check_against_quadratic_definition(true);
}

}  // namespace
}  // namespace inc::coll
