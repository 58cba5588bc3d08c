// Live resize of a job on a two-level tree of switches with several lanes (docs/PROTOCOL.md
// "Live resize of a tree of lanes"): on the seeded simulated network, a job whose members hang
// off 2 or 3 leaves under one spine, every switch a daemon of 2 or 3 lanes (leaf lane l a member
// of spine lane l), is shrunk and then grown while it streams, with loss, duplication and
// reordering. The Resizes reach the daemons in seed-dependent orders (the spine first, the
// leaves first, the leaves only once the spine's lane 0 moved, or only once the whole tree
// moved), and each daemon's lanes in seed-dependent orders with packets between them; the
// spine's lanes 1.. may take the boundary only after its lane 0 moved, so that the leaves'
// lanes 1.. see no flagged result and learn of the resize from their members' joins. Every
// result stays exact, every lane of every switch ends at the spine's size, and the slots a
// shrink frees are refused to another job on each lane until that lane moved.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/switch/lane_driver.hpp"

namespace inc::sw {
namespace {

using namespace inc::sw::testing;

struct Tree {
  std::uint16_t lanes;
  std::size_t daemons;  // the spine, then the leaves
  std::size_t switches() const { return lanes * daemons; }
};

bool any_pending(Topo& t, const Tree& tr) {
  for (std::size_t s = 0; s < tr.switches(); ++s)
    if (t.c->sw(s).resize_pending(7)) return true;
  return false;
}

// On every lane of every daemon: the slots beyond `to` stay the job's until that lane moved.
void check_freed_refused(Topo& t, const Tree& tr, std::uint32_t to, std::uint64_t seed) {
  for (std::size_t s = 0; s < tr.switches(); ++s) {
    SwitchDataPlane& sw = t.c->sw(s);
    if (sw.snapshot().jobs.at(0).spec.slots == to) continue;
    EXPECT_EQ(sw.admit({8, 1, 64 - to}, t.c->now()), proto::Reason::no_slots) << "seed " << seed << " switch " << s;
  }
}

// resize_lanes on daemon d (its lanes in a seed-dependent order, packets between them).
proto::Reason resize_daemon(Topo& t, const Tree& tr, std::size_t d, std::uint32_t to, std::uint64_t seed,
                            bool late_boundary, std::uint32_t check_to) {
  LaneDriver drv{t, tr.lanes, seed + d};
  drv.first = d * tr.lanes;
  drv.gap = ((seed + d) % 3) * 20'000;
  drv.late_boundary = late_boundary && d == 0;
  if (check_to) drv.check = [&t, &tr, check_to, seed] { check_freed_refused(t, tr, check_to, seed); };
  return resize_lanes(drv, 7, to);
}

// The Resize of every daemon of the tree, in an order that depends on the seed.
void resize_tree(Topo& t, const Tree& tr, std::uint32_t to, std::uint64_t seed, std::uint64_t done,
                 std::uint32_t check_to) {
  auto& c = *t.c;
  const bool late = seed % 5 == 2 || seed % 5 == 4;
  auto spine_lanes_moved = [&] {
    for (std::uint16_t l = 0; l < tr.lanes; ++l)
      if (c.sw(l).counters().job_resizes != done) return false;
    return true;
  };
  switch (seed % 4) {
    case 0:  // the spine first
      for (std::size_t d = 0; d < tr.daemons; ++d)
        ASSERT_EQ(resize_daemon(t, tr, d, to, seed, late, check_to), proto::Reason::ok) << "seed " << seed;
      break;
    case 1:  // the leaves first
      for (std::size_t d = tr.daemons; d-- > 0;)
        ASSERT_EQ(resize_daemon(t, tr, d, to, seed, late, check_to), proto::Reason::ok) << "seed " << seed;
      break;
    case 2:  // the leaves once the spine's lane 0 moved (their lanes follow before)
      ASSERT_EQ(resize_daemon(t, tr, 0, to, seed, late, check_to), proto::Reason::ok) << "seed " << seed;
      ASSERT_TRUE(c.run_until([&] { return c.sw(0).counters().job_resizes == done; }, 50 * kSecond))
          << "seed " << seed << ": the spine's lane 0 never moved";
      for (std::size_t d = 1; d < tr.daemons; ++d)
        ASSERT_EQ(resize_daemon(t, tr, d, to, seed, false, check_to), proto::Reason::ok) << "seed " << seed;
      break;
    default:  // the leaves only once every lane of the spine moved: they found out alone
      ASSERT_EQ(resize_daemon(t, tr, 0, to, seed, late, check_to), proto::Reason::ok) << "seed " << seed;
      ASSERT_TRUE(c.run_until([&] {
        if (check_to) check_freed_refused(t, tr, check_to, seed);
        return spine_lanes_moved();
      }, 50 * kSecond)) << "seed " << seed << ": the spine never moved";
      for (std::size_t d = 1; d < tr.daemons; ++d)
        ASSERT_EQ(resize_daemon(t, tr, d, to, seed, false, 0), proto::Reason::ok) << "seed " << seed;
      break;
  }
}

struct Case {
  double loss;
  std::uint16_t lanes;
};

class TreeLanesResize : public ::testing::TestWithParam<Case> {};

// 2 or 3 leaves of 1..3 members stream 10 allreduces of 600 i32 (8-element slots) over 8
// slots per lane on every switch; the tree is shrunk to 3 slots per lane, later grown to 12.
TEST_P(TreeLanesResize, ShrinkThenGrowMidStreamStaysExact) {
  const auto [loss, L] = GetParam();
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    std::vector<std::uint16_t> leaves{std::uint16_t(1 + seed % 3), std::uint16_t(1 + (seed / 3) % 3)};
    if (seed % 2) leaves.push_back(2);
    std::uint16_t n = 0;
    for (auto m : leaves) n += m;
    const Tree tr{L, leaves.size() + 1};
    auto t = two_level_lanes(seed, faults_for(loss), leaves, 8, 8, L, L);
    constexpr int kOps = 10;
    ResizeStream stream(t, n, kOps, 600, seed);
    auto chunks = [&] { return t.c->worker(0).report().chunks; };
    ASSERT_TRUE(t.c->run_until([&] { return chunks() > 40 + 3 * seed; }, 50 * kSecond)) << "seed " << seed;

    resize_tree(t, tr, 3, seed, 1, 3);
    ASSERT_TRUE(t.c->run_until([&] {
      check_freed_refused(t, tr, 3, seed);
      return !any_pending(t, tr);
    }, 50 * kSecond)) << "seed " << seed << ": the shrink never completed";
    expect_moved(t, tr.switches(), 3, 1, seed);
    ASSERT_TRUE(t.c->run_until([&] { return members_hold(t, n, 3); }, 50 * kSecond)) << "seed " << seed;
    const auto at_shrink = chunks();
    EXPECT_LT(at_shrink, std::uint64_t(kOps * 75)) << "seed " << seed << ": resized after the stream ended";

    // Grow 3 -> 12 once job 8 is gone from every lane.
    ASSERT_TRUE(t.c->run_until([&] { return chunks() > at_shrink + 40; }, 50 * kSecond)) << "seed " << seed;
    for (std::size_t s = 0; s < tr.switches(); ++s) ASSERT_TRUE(t.c->sw(s).release(8));
    resize_tree(t, tr, 12, seed + 1, 2, 0);
    ASSERT_TRUE(t.c->run(100 * kSecond)) << "seed " << seed;
    for (std::size_t s = 0; s < tr.switches(); ++s) {
      EXPECT_FALSE(t.c->sw(s).resize_pending(7)) << "seed " << seed << " switch " << s;
      EXPECT_EQ(t.c->sw(s).counters().job_resizes, 2u) << "seed " << seed << " switch " << s;
      EXPECT_EQ(t.c->sw(s).snapshot().jobs.at(0).spec.slots, 12u) << "seed " << seed << " switch " << s;
    }
    stream.check(t, 12, seed);
  }
}
INSTANTIATE_TEST_SUITE_P(LossAndLanes, TreeLanesResize,
                         ::testing::Values(Case{0.0, 2}, Case{0.05, 2}, Case{0.20, 2}, Case{0.0, 3},
                                           Case{0.05, 3}, Case{0.20, 3}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return "loss" + std::to_string(int(i.param.loss * 100 + 0.5)) + "_lanes" +
                                  std::to_string(i.param.lanes);
                         });

// A leaf's lanes that never saw a flagged result and never got their own Resize (the spine's
// lanes 1.. took the boundary once its lane 0 had moved): the members' joins tell them, the
// spine's answers carry the boundary, the whole tree moves, exact.
TEST(TreeLanesResizeEdges, LeafLanesLearnTheResizeFromTheirMembersJoins) {
  auto t = two_level_lanes(4, faults_for(0.05), {2, 2}, 8, 8, 2, 2);
  const Tree tr{2, 3};
  ResizeStream stream(t, 4, 6, 600, 4);
  ASSERT_TRUE(t.c->run_until([&] { return t.c->worker(0).report().chunks > 40; }, 50 * kSecond));
  ASSERT_EQ(resize_daemon(t, tr, 0, 4, 4, true, 0), proto::Reason::ok);  // the spine only
  ASSERT_TRUE(t.c->run_until([&] { return !any_pending(t, tr); }, 50 * kSecond));
  for (std::size_t s = 0; s < tr.switches(); ++s) {
    EXPECT_EQ(t.c->sw(s).counters().job_resizes, 1u) << "switch " << s;
    EXPECT_EQ(t.c->sw(s).snapshot().jobs.at(0).spec.slots, 4u) << "switch " << s;
  }
  ASSERT_TRUE(t.c->run(100 * kSecond));
  stream.check(t, 4, 4);
}

}  // namespace
}  // namespace inc::sw
