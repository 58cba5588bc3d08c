// Live resize of a job on a switch with several lanes (docs/PROTOCOL.md "Live resize of
// lanes"): on the seeded simulated network, a job striped over 2..4 lanes is shrunk and then
// grown while its members stream allreduces, with loss, duplication and reordering. The steps
// of resize_lanes reach the lanes in seed-dependent orders, with packets delivered between
// them (lanes other than lane 0 may see members drain and join again before the boundary
// reaches them). Lane 0 picks the boundary, the others take it, every lane moves to the same
// size; every result stays exact, and the slots a shrink frees are refused to another job on
// each lane until that lane moved.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <optional>
#include <vector>

#include "tests/switch/lane_driver.hpp"

namespace inc::sw {
namespace {

using namespace inc::sw::testing;

bool any_pending(Topo& t, std::uint16_t lanes) {
  for (std::uint16_t l = 0; l < lanes; ++l)
    if (t.c->sw(l).resize_pending(7)) return true;
  return false;
}

// On each lane: the slots beyond `keep` are refused to another job until the job moved off
// them there (admitting job 8 with all the lane's other slots fails while job 7 holds `held`).
void check_freed_refused(Topo& t, std::uint16_t lanes, std::uint32_t shrunk_to, std::uint64_t seed) {
  for (std::uint16_t l = 0; l < lanes; ++l) {
    SwitchDataPlane& sw = t.c->sw(l);
    if (sw.snapshot().jobs.at(0).spec.slots == shrunk_to) continue;
    EXPECT_EQ(sw.admit({8, 1, 64 - shrunk_to}, t.c->now()), proto::Reason::no_slots) << "seed " << seed << " lane " << l;
  }
}

struct Case {
  double loss;
  std::uint16_t lanes;
};

class LanesResize : public ::testing::TestWithParam<Case> {};

// 2..4 members stream 10 allreduces of 600 i32 (8-element slots) over 8 slots per lane; the
// job is shrunk to 3 slots on every lane, later grown to 12.
TEST_P(LanesResize, ShrinkThenGrowMidStreamStaysExact) {
  const auto [loss, L] = GetParam();
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    const std::uint16_t n = std::uint16_t(2 + seed % 3);
    auto t = flat_lanes(seed, faults_for(loss), n, 8, 8, L);
    constexpr int kOps = 10;
    ResizeStream stream(t, n, kOps, 600, seed);
    auto chunks = [&] { return t.c->worker(0).report().chunks; };
    ASSERT_TRUE(t.c->run_until([&] { return chunks() > 40 + 3 * seed; }, 50 * kSecond)) << "seed " << seed;

    LaneDriver shrink{t, L, seed};
    shrink.gap = (seed % 3) * 20'000;
    shrink.late_boundary = seed % 4 == 3;
    shrink.check = [&] { check_freed_refused(t, L, 3, seed); };
    ASSERT_EQ(resize_lanes(shrink, 7, 3), proto::Reason::ok) << "seed " << seed;
    ASSERT_TRUE(t.c->run_until([&] {
      check_freed_refused(t, L, 3, seed);
      return !any_pending(t, L);
    }, 50 * kSecond)) << "seed " << seed << ": the shrink never completed";
    expect_moved(t, L, 3, 1, seed);
    ASSERT_TRUE(t.c->run_until([&] { return members_hold(t, n, 3); }, 50 * kSecond)) << "seed " << seed;
    const auto at_shrink = chunks();
    EXPECT_LT(at_shrink, std::uint64_t(kOps * 75)) << "seed " << seed << ": resized after the stream ended";

    // Grow 3 -> 12 once job 8 is gone from every lane.
    ASSERT_TRUE(t.c->run_until([&] { return chunks() > at_shrink + 40; }, 50 * kSecond)) << "seed " << seed;
    for (std::uint16_t l = 0; l < L; ++l) ASSERT_TRUE(t.c->sw(l).release(8));
    LaneDriver grow{t, L, seed + 1};
    grow.gap = ((seed + 1) % 3) * 20'000;
    grow.late_boundary = seed % 4 == 1;
    ASSERT_EQ(resize_lanes(grow, 7, 12), proto::Reason::ok) << "seed " << seed;
    // The grow's slots are the job's on every lane from now on (reserved until it moves):
    // another job cannot take them from one lane and leave the lanes at two sizes.
    for (std::uint16_t l = 0; l < L; ++l)
      EXPECT_EQ(t.c->sw(l).admit({9, 1, 64 - 12 + 1}, t.c->now()), proto::Reason::no_slots) << "seed " << seed << " lane " << l;
    ASSERT_TRUE(t.c->run(100 * kSecond)) << "seed " << seed;
    for (std::uint16_t l = 0; l < L; ++l) {
      EXPECT_EQ(t.c->sw(l).counters().job_resizes, 2u) << "seed " << seed << " lane " << l;
      EXPECT_EQ(t.c->sw(l).snapshot().jobs.at(0).spec.slots, 12u) << "seed " << seed << " lane " << l;
    }
    stream.check(t, 12, seed);
  }
}
INSTANTIATE_TEST_SUITE_P(LossAndLanes, LanesResize,
                         ::testing::Values(Case{0.0, 2}, Case{0.05, 2}, Case{0.20, 2}, Case{0.0, 3},
                                           Case{0.05, 3}, Case{0.20, 4}, Case{0.05, 4}),
                         [](const ::testing::TestParamInfo<Case>& i) {  // stable ctest names
                           return "loss" + std::to_string(int(i.param.loss * 100 + 0.5)) + "_lanes" +
                                  std::to_string(i.param.lanes);
                         });

// A grow that does not fit on one lane keeps the old size on every lane (the others' reserved
// slots are given back), and the job carries on, exact.
TEST(LanesResizeEdges, AGrowThatDoesNotFitOnOneLaneKeepsTheSizeEverywhere) {
  auto t = flat_lanes(3, faults_for(0.05), 3, 4, 8, 3);
  ASSERT_EQ(t.c->sw(2).admit({8, 1, 60}, 0), proto::Reason::ok);  // the rest of lane 2's pool
  ResizeStream stream(t, 3, 6, 400, 3);
  ASSERT_TRUE(t.c->run_until([&] { return t.c->worker(0).report().chunks > 20; }, 50 * kSecond));
  LaneDriver d{t, 3, 3};
  ASSERT_EQ(resize_lanes(d, 7, 16), proto::Reason::ok);
  EXPECT_FALSE(any_pending(t, 3));
  for (std::uint16_t l = 0; l < 2; ++l)  // nothing kept in reserve on the lanes that had room
    EXPECT_EQ(t.c->sw(l).admit({9, 1, 60}, t.c->now()), proto::Reason::ok) << "lane " << l;
  ASSERT_TRUE(t.c->run(100 * kSecond));
  for (std::uint16_t l = 0; l < 3; ++l) {
    EXPECT_EQ(t.c->sw(l).counters().job_resizes, 0u);
    EXPECT_EQ(t.c->sw(l).snapshot().jobs.at(0).spec.slots, 4u);
  }
  stream.check(t, 4, 3);
}

// A job nobody joined moves at its first join on each lane: every member finds the new size
// on every lane.
TEST(LanesResizeEdges, AJobNobodyJoinedMovesAtItsFirstJoin) {
  auto t = flat_lanes(5, faults_for(0.05), 2, 8, 8, 2);
  LaneDriver d{t, 2, 5};
  ASSERT_EQ(resize_lanes(d, 7, 2), proto::Reason::ok);
  EXPECT_TRUE(any_pending(t, 2));  // until someone comes
  ResizeStream stream(t, 2, 3, 100, 5);
  ASSERT_TRUE(t.c->run(20 * kSecond));
  EXPECT_FALSE(any_pending(t, 2));
  for (std::uint16_t l = 0; l < 2; ++l) EXPECT_EQ(t.c->sw(l).snapshot().jobs.at(0).spec.slots, 2u);
  stream.check(t, 2, 5);
}

// What the lanes refuse, and that a refusal by one lane leaves every lane as it was.
TEST(LanesResizeEdges, ARefusalTakesTheOtherLanesBack) {
  auto t = flat_lanes(1, faults_for(0.0), 2, 8, 8, 3);
  LaneDriver d{t, 3, 1};
  EXPECT_EQ(resize_lanes(d, 99, 4), proto::Reason::unknown_job);
  EXPECT_EQ(resize_lanes(d, 7, 0), proto::Reason::bad_slot);
  EXPECT_EQ(resize_lanes(d, 7, 8), proto::Reason::ok);  // its size: nothing to do
  EXPECT_FALSE(any_pending(t, 3));
  // Lane 1 lost the job (released there): the others are taken back, their reserve freed.
  ASSERT_TRUE(t.c->sw(1).release(7));
  EXPECT_EQ(resize_lanes(d, 7, 20), proto::Reason::unknown_job);
  EXPECT_FALSE(any_pending(t, 3));
  for (std::uint16_t l : {0, 2}) {
    EXPECT_EQ(t.c->sw(l).snapshot().jobs.at(0).spec.slots, 8u);
    EXPECT_EQ(t.c->sw(l).admit({9, 1, 56}, 0), proto::Reason::ok) << "lane " << l;
  }
  // One at a time: a second resize while one is under way is refused, the first stands.
  auto u = flat_lanes(2, faults_for(0.0), 2, 8, 8, 2);
  ResizeStream stream(u, 2, 4, 400, 2);
  ASSERT_TRUE(u.c->run_until([&] { return u.c->worker(0).report().chunks > 10; }, 50 * kSecond));
  LaneDriver e{u, 2, 2};
  ASSERT_EQ(resize_lanes(e, 7, 4), proto::Reason::ok);
  ASSERT_TRUE(any_pending(u, 2));
  EXPECT_EQ(resize_lanes(e, 7, 6), proto::Reason::unexpected);
  ASSERT_TRUE(u.c->run(100 * kSecond));
  for (std::uint16_t l = 0; l < 2; ++l) EXPECT_EQ(u.c->sw(l).snapshot().jobs.at(0).spec.slots, 4u);
  stream.check(u, 4, 2);
  // A leaf with several lanes follows its parent's lanes (resize_tree_lanes_test.cpp): asked
  // alone, each lane waits for its parent's boundary; asked back to its size, it stops waiting.
  auto h = two_level_lanes(1, faults_for(0.0), {2, 2}, 4, 8, 2, 2);
  ResizeStream hs(h, 4, 2, 200, 1);
  ASSERT_TRUE(h.c->run_until([&] { return h.c->worker(0).report().chunks > 4; }, 50 * kSecond));
  LaneDriver f{h, 2, 1};
  f.first = 2;  // the first leaf's lanes (after the spine's two)
  EXPECT_EQ(resize_lanes(f, 7, 2), proto::Reason::ok);
  EXPECT_TRUE(h.c->sw(2).resize_pending(7));
  EXPECT_TRUE(h.c->sw(3).resize_pending(7));
  EXPECT_EQ(resize_lanes(f, 7, 4), proto::Reason::ok);
  EXPECT_FALSE(h.c->sw(2).resize_pending(7));
  EXPECT_FALSE(h.c->sw(3).resize_pending(7));
  ASSERT_TRUE(h.c->run(100 * kSecond));
  hs.check(h, 4, 1);
}

}  // namespace
}  // namespace inc::sw
