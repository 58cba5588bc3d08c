// Live resize of a job on a two-level tree (docs/PROTOCOL.md "Live resize of a tree"): on the
// seeded simulated network, a job whose members hang off two or three leaves under one spine
// is shrunk and then grown while it streams, with loss, duplication and reordering. The spine
// picks the boundary, the leaves pass it down and join the spine again once their members
// drained, every switch of the tree moves to the spine's size; every result stays exact and
// the slots a shrink frees are taken by nobody else, on any switch, before it moved off them.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "tests/switch/sim_util.hpp"

namespace inc::sw {
namespace {

using namespace inc::sw::testing;

// The Resize of every switch of the tree, in an order that depends on the seed: the spine
// first, the leaves first, or the leaves only once the spine moved (a leaf follows its parent
// before its own Resize arrives; that Resize then finds the job at its size).
void resize_tree(Topo& t, std::size_t switches, std::uint32_t to, std::uint64_t seed, std::uint64_t done) {
  auto& c = *t.c;
  switch (seed % 3) {
    case 0:
      for (std::size_t s = 0; s < switches; ++s) ASSERT_EQ(c.sw(s).resize(7, to), proto::Reason::ok);
      break;
    case 1:
      for (std::size_t s = switches; s-- > 0;) ASSERT_EQ(c.sw(s).resize(7, to), proto::Reason::ok);
      break;
    default:
      ASSERT_EQ(c.sw(0).resize(7, to), proto::Reason::ok);
      ASSERT_TRUE(c.run_until([&] { return c.sw(0).counters().job_resizes == done; }, 50 * kSecond))
          << "seed " << seed << ": the spine never moved";
      for (std::size_t s = 1; s < switches; ++s) ASSERT_EQ(c.sw(s).resize(7, to), proto::Reason::ok);
      break;
  }
}

class TwoLevelResize : public ::testing::TestWithParam<double> {};

// 2 or 3 leaves of 1..3 members stream 10 allreduces of 400 i32 (8-element slots) over a job
// of 8 slots on every switch; the tree is shrunk to 3 slots, later grown to 12.
TEST_P(TwoLevelResize, ShrinkThenGrowMidStreamStaysExact) {
  const double loss = GetParam();
  for (std::uint64_t seed = 1; seed <= 9; ++seed) {
    std::vector<std::uint16_t> leaves{std::uint16_t(1 + seed % 3), std::uint16_t(1 + (seed / 3) % 3)};
    if (seed % 2) leaves.push_back(2);
    std::uint16_t n = 0;
    for (auto m : leaves) n += m;
    const std::size_t S = leaves.size() + 1;  // switches: the spine, then the leaves
    auto t = two_level(seed, faults_for(loss), leaves, 8, 8);
    constexpr int kOps = 10;
    ResizeStream stream(t, n, kOps, 400, seed);
    auto chunks = [&] { return t.c->worker(0).report().chunks; };
    ASSERT_TRUE(t.c->run_until([&] { return chunks() > 30 + seed; }, 50 * kSecond)) << "seed " << seed;

    // Shrink 8 -> 3 on every switch. On each, until the job moved there, the 5 slots it gives
    // up stay the job's: another job asking for them is refused.
    resize_tree(t, S, 3, seed, 1);
    for (std::size_t s = 0; s < S; ++s) {
      if (t.c->sw(s).snapshot().jobs.at(0).spec.slots != 3) {
        EXPECT_EQ(t.c->sw(s).admit({8, 1, 61}, t.c->now()), proto::Reason::no_slots) << "seed " << seed << " switch " << s;
      }
    }
    ASSERT_TRUE(t.c->run_until([&] {
      for (std::size_t s = 0; s < S; ++s)
        if (t.c->sw(s).resize_pending(7)) return false;
      return true;
    }, 50 * kSecond)) << "seed " << seed << ": the shrink never completed";
    expect_moved(t, S, 3, 1, seed);
    ASSERT_TRUE(t.c->run_until([&] { return members_hold(t, n, 3); }, 50 * kSecond)) << "seed " << seed;
    const auto at_shrink = chunks();
    EXPECT_LT(at_shrink, std::uint64_t(kOps * 50)) << "seed " << seed << ": resized after the stream ended";

    // Grow 3 -> 12 once job 8 is gone everywhere.
    ASSERT_TRUE(t.c->run_until([&] { return chunks() > at_shrink + 20; }, 50 * kSecond));
    for (std::size_t s = 0; s < S; ++s) ASSERT_TRUE(t.c->sw(s).release(8));
    resize_tree(t, S, 12, seed + 1, 2);
    ASSERT_TRUE(t.c->run(100 * kSecond));
    for (std::size_t s = 0; s < S; ++s) {
      EXPECT_FALSE(t.c->sw(s).resize_pending(7)) << "seed " << seed << " switch " << s;
      EXPECT_EQ(t.c->sw(s).counters().job_resizes, 2u) << "seed " << seed << " switch " << s;
      EXPECT_EQ(t.c->sw(s).snapshot().jobs.at(0).spec.slots, 12u) << "seed " << seed << " switch " << s;
    }
    stream.check(t, 12, seed);
  }
}
INSTANTIATE_TEST_SUITE_P(Loss, TwoLevelResize, ::testing::Values(0.0, 0.05, 0.20));

// A tree nobody joined moves at once on every switch; the members' join_acks carry the size.
TEST(TwoLevelResizeEdges, ATreeNobodyJoinedMovesAtOnce) {
  auto t = two_level(5, faults_for(0.05), {2, 1}, 8, 8);
  for (std::size_t s = 0; s < 3; ++s) {
    ASSERT_EQ(t.c->sw(s).resize(7, 2), proto::Reason::ok);
    EXPECT_FALSE(t.c->sw(s).resize_pending(7));
    EXPECT_EQ(t.c->sw(s).snapshot().jobs.at(0).spec.slots, 2u);
  }
  std::vector<std::int32_t> in(300, 2);
  std::vector<std::vector<std::int32_t>> out(3, std::vector<std::int32_t>(300));
  for (std::uint16_t r = 0; r < 3; ++r)
    t.c->submit(r, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in), wbytes(out[r]), 300, 3));
  ASSERT_TRUE(t.c->run(20 * kSecond));
  for (std::uint16_t r = 0; r < 3; ++r) {
    ASSERT_TRUE(t.c->worker(r).done()) << t.c->worker(r).error().message;
    EXPECT_EQ(t.c->worker(r).join_info().slots, 2u);
    EXPECT_EQ(out[r], std::vector<std::int32_t>(300, 6));
  }
}

// A leaf that moved at once (nobody had joined it) under a spine still at the old size takes
// the spine's size at its first join, and the spine's own resize then moves the whole tree.
TEST(TwoLevelResizeEdges, ALeafThatMovedAloneTakesItsParentsSize) {
  auto t = two_level(6, faults_for(0.05), {2, 2}, 8, 8);
  ASSERT_EQ(t.c->sw(2).resize(7, 3), proto::Reason::ok);  // nobody joined: at once
  EXPECT_EQ(t.c->sw(2).snapshot().jobs.at(0).spec.slots, 3u);
  std::vector<std::int32_t> in(800, 1);
  std::vector<std::vector<std::int32_t>> out(4, std::vector<std::int32_t>(800));
  for (std::uint16_t r = 0; r < 4; ++r)
    t.c->submit(r, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in), wbytes(out[r]), 800, 4));
  ASSERT_TRUE(t.c->run_until([&] { return t.c->worker(3).joined(); }, 20 * kSecond));
  EXPECT_EQ(t.c->sw(2).snapshot().jobs.at(0).spec.slots, 8u);  // the spine's
  EXPECT_EQ(t.c->worker(3).join_info().slots, 8u);
  ASSERT_EQ(t.c->sw(0).resize(7, 3), proto::Reason::ok);
  ASSERT_EQ(t.c->sw(1).resize(7, 3), proto::Reason::ok);
  ASSERT_TRUE(t.c->run(50 * kSecond));
  for (std::size_t s = 0; s < 3; ++s) EXPECT_EQ(t.c->sw(s).snapshot().jobs.at(0).spec.slots, 3u) << "switch " << s;
  for (std::uint16_t r = 0; r < 4; ++r) {
    ASSERT_TRUE(t.c->worker(r).done()) << t.c->worker(r).error().message;
    EXPECT_EQ(out[r], std::vector<std::int32_t>(800, 4));
  }
}

// A leaf asked to resize waits for its parent's boundary; asked back to its size (the
// controller takes back a resize the spine refused), it is done at once, nothing moved.
TEST(TwoLevelResizeEdges, ALeafWaitingForItsParentCanBeTakenBack) {
  auto t = two_level(7, faults_for(0.0), {1, 1}, 8, 8);
  std::vector<std::int32_t> in(2000, 1);
  std::vector<std::vector<std::int32_t>> out(2, std::vector<std::int32_t>(2000));
  for (std::uint16_t r = 0; r < 2; ++r)
    t.c->submit(r, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in), wbytes(out[r]), 2000, 2));
  ASSERT_TRUE(t.c->run_until([&] { return t.c->worker(0).report().chunks > 20; }, 20 * kSecond));
  ASSERT_EQ(t.c->sw(1).resize(7, 4), proto::Reason::ok);
  ASSERT_TRUE(t.c->run_until([&] { return t.c->worker(0).report().chunks > 60; }, 20 * kSecond));
  EXPECT_TRUE(t.c->sw(1).resize_pending(7));  // no boundary from the spine
  ASSERT_EQ(t.c->sw(1).resize(7, 8), proto::Reason::ok);
  EXPECT_FALSE(t.c->sw(1).resize_pending(7));
  ASSERT_TRUE(t.c->run(50 * kSecond));
  EXPECT_EQ(t.c->sw(1).counters().job_resizes, 0u);
  for (std::uint16_t r = 0; r < 2; ++r) {
    ASSERT_TRUE(t.c->worker(r).done()) << t.c->worker(r).error().message;
    EXPECT_EQ(out[r], std::vector<std::int32_t>(2000, 2));
  }
}

// A join that repeats the nonce the switch already answered is a late copy (a leaf sends its
// join to the parent again at every join its members retransmit, so copies of it may arrive
// after the parent moved): during the next resize it must not count as a move, else the
// switch would move the job before that member drained.
TEST(TwoLevelResizeEdges, ALateCopyOfAJoinIsNotAMove) {
  SwitchConfig cfg;
  cfg.slots = 64;
  cfg.slot_elems = 8;
  SwitchDataPlane sw(cfg);
  ASSERT_EQ(sw.admit({7, 2, 8}, 0), proto::Reason::ok);
  auto join = [&](std::uint16_t member, std::uint32_t nonce) {
    proto::Header h;
    h.type = proto::PacketType::join;
    h.member = member;
    h.job = 7;
    h.aux = 1001;  // the session
    h.chunk = nonce;
    std::byte b[proto::kHeaderBytes];
    proto::encode_header(h, b);
    sw.on_packet(std::span<const std::byte>(b, sizeof b), Endpoint::node(member + 1), 0);
  };
  join(0, 11);
  join(1, 21);
  ASSERT_EQ(sw.joined_members(7), 2);
  ASSERT_EQ(sw.resize(7, 4), proto::Reason::ok);  // both drained (nothing sent) and join again
  join(0, 12);
  join(1, 22);
  ASSERT_EQ(sw.counters().job_resizes, 1u);
  ASSERT_EQ(sw.resize(7, 2), proto::Reason::ok);
  join(0, 12);  // a late copy of member 0's last join
  join(1, 23);
  EXPECT_EQ(sw.counters().job_resizes, 1u) << "moved before member 0 joined again";
  EXPECT_TRUE(sw.resize_pending(7));
  join(0, 13);
  EXPECT_EQ(sw.counters().job_resizes, 2u);
  EXPECT_EQ(sw.snapshot().jobs.at(0).spec.slots, 2u);
}

}  // namespace
}  // namespace inc::sw
