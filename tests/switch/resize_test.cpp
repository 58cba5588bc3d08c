// Live resize of a running job (docs/PROTOCOL.md "Live resize"; docs/CONTROLLER.md
// "Re-balancing"): on the seeded simulated network, a job is shrunk and then grown while its
// members stream allreduces, with loss, duplication and reordering; every result stays exact,
// the members' window follows the new slot count, and the slots a shrink frees are taken by
// nobody else before every member moved off them.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "tests/switch/sim_util.hpp"

namespace inc::sw {
namespace {

using namespace inc::sw::testing;

class SimResize : public ::testing::TestWithParam<double> {};

// 3..5 members stream 12 allreduces of 400 i32 (8-element slots: 50 chunks each) over a job of
// 8 slots; after some chunks the job is shrunk to 3 slots, later grown to 12.
TEST_P(SimResize, ShrinkThenGrowMidStreamStaysExact) {
  const double loss = GetParam();
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    const std::uint16_t n = std::uint16_t(3 + seed % 3);
    auto t = flat(seed, faults_for(loss), n, 8, 8);
    constexpr int kOps = 12;
    ResizeStream stream(t, n, kOps, 400, seed);
    SwitchDataPlane& sw = t.c->sw(0);
    auto chunks = [&] { return t.c->worker(0).report().chunks; };
    ASSERT_TRUE(t.c->run_until([&] { return chunks() > 40 + seed; }, 50 * kSecond)) << "seed " << seed;

    // Shrink 8 -> 3. Until every member moved, the 5 slots it gives up stay the job's.
    ASSERT_EQ(sw.resize(7, 3), proto::Reason::ok);
    EXPECT_EQ(sw.admit({8, 1, 61}, t.c->now()), proto::Reason::no_slots) << "seed " << seed;
    ASSERT_TRUE(t.c->run_until([&] { return sw.counters().job_resizes == 1; }, 50 * kSecond))
        << "seed " << seed << ": the shrink never completed";
    EXPECT_EQ(sw.snapshot().jobs.at(0).spec.slots, 3u);
    EXPECT_EQ(sw.admit({8, 1, 61}, t.c->now()), proto::Reason::ok) << "seed " << seed;  // the freed slots
    ASSERT_TRUE(t.c->run_until([&] { return t.c->worker(0).joined() && t.c->worker(0).join_info().slots == 3; },
                               50 * kSecond));
    const auto at_shrink = chunks();
    EXPECT_LT(at_shrink, std::uint64_t(kOps * 50)) << "seed " << seed << ": resized after the stream ended";

    // Grow 3 -> 12 (in place once job 8 is gone).
    ASSERT_TRUE(t.c->run_until([&] { return chunks() > at_shrink + 30; }, 50 * kSecond));
    ASSERT_TRUE(sw.release(8));
    ASSERT_EQ(sw.resize(7, 12), proto::Reason::ok);
    ASSERT_TRUE(t.c->run(100 * kSecond));
    EXPECT_EQ(sw.counters().job_resizes, 2u) << "seed " << seed;
    EXPECT_EQ(sw.snapshot().jobs.at(0).spec.slots, 12u);
    stream.check(t, 12, seed);
  }
}
INSTANTIATE_TEST_SUITE_P(Loss, SimResize, ::testing::Values(0.0, 0.05, 0.20));

// A grow that does not fit in the pool when the members moved keeps the old size (and the job
// carries on, exact).
TEST(SimResizeEdges, AGrowThatDoesNotFitKeepsTheOldSize) {
  auto t = flat(3, faults_for(0.05), 3, 4, 8);
  SwitchDataPlane& sw = t.c->sw(0);
  ASSERT_EQ(sw.admit({8, 1, 60}, 0), proto::Reason::ok);  // the rest of the pool
  std::vector<std::int32_t> in(400, 1);
  std::vector<std::vector<std::vector<std::int32_t>>> out(3, std::vector<std::vector<std::int32_t>>(6, std::vector<std::int32_t>(400)));
  for (std::uint16_t r = 0; r < 3; ++r)
    for (int k = 0; k < 6; ++k)
      t.c->submit(r, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in), wbytes(out[r][k]), 400, 3));
  ASSERT_TRUE(t.c->run_until([&] { return t.c->worker(0).report().chunks > 20; }, 50 * kSecond));
  ASSERT_EQ(sw.resize(7, 16), proto::Reason::ok);
  ASSERT_TRUE(t.c->run(100 * kSecond));
  EXPECT_EQ(sw.counters().job_resizes, 1u);
  EXPECT_EQ(sw.snapshot().jobs.at(0).spec.slots, 4u);
  for (std::uint16_t r = 0; r < 3; ++r) {
    ASSERT_TRUE(t.c->worker(r).done()) << t.c->worker(r).error().message;
    for (auto& o : out[r]) ASSERT_EQ(o, std::vector<std::int32_t>(400, 3));
  }
}

// A job nobody joined yet moves at once: the members' join_acks carry the new size.
TEST(SimResizeEdges, AJobNobodyJoinedMovesAtOnce) {
  auto t = flat(5, faults_for(0.0), 2, 8, 8);
  SwitchDataPlane& sw = t.c->sw(0);
  ASSERT_EQ(sw.resize(7, 2), proto::Reason::ok);
  EXPECT_EQ(sw.counters().job_resizes, 1u);
  EXPECT_EQ(sw.snapshot().jobs.at(0).spec.slots, 2u);
  std::vector<std::int32_t> in(100, 2), o0(100), o1(100);
  t.c->submit(0, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in), wbytes(o0), 100, 2));
  t.c->submit(1, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in), wbytes(o1), 100, 2));
  ASSERT_TRUE(t.c->run(10 * kSecond));
  EXPECT_EQ(t.c->worker(0).join_info().slots, 2u);
  EXPECT_EQ(o0, std::vector<std::int32_t>(100, 4));
  EXPECT_EQ(o1, o0);
}

// Slots freed by shrinks here and there still serve: a job grown into two holes of the pool
// (its slot table maps them) streams exact results, with loss.
TEST(SimResizeEdges, AJobOnScatteredSlotsStaysExact) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    auto t = flat(seed, faults_for(0.1), 3, 8, 8);  // job 7: slots 0..7
    SwitchDataPlane& sw = t.c->sw(0);
    ASSERT_EQ(sw.admit({8, 1, 4}, 0), proto::Reason::ok);   // 8..11
    ASSERT_EQ(sw.admit({9, 1, 52}, 0), proto::Reason::ok);  // 12..63: full
    ASSERT_EQ(sw.resize(8, 2), proto::Reason::ok);           // nobody joined: at once, frees 10..11
    ASSERT_EQ(sw.resize(9, 50), proto::Reason::ok);          // frees 62..63
    ASSERT_EQ(sw.resize(7, 12), proto::Reason::ok);          // 0..7, 10, 11, 62, 63
    ASSERT_EQ(sw.snapshot().jobs.at(0).spec.slots, 12u);
    std::vector<std::int32_t> in(500);
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = std::int32_t(i * seed) - 100;
    std::vector<std::vector<std::int32_t>> out(3, std::vector<std::int32_t>(500));
    for (std::uint16_t r = 0; r < 3; ++r)
      t.c->submit(r, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in), wbytes(out[r]), 500, 3));
    ASSERT_TRUE(t.c->run(100 * kSecond));
    for (std::uint16_t r = 0; r < 3; ++r) {
      ASSERT_TRUE(t.c->worker(r).done()) << t.c->worker(r).error().message;
      EXPECT_EQ(t.c->worker(r).join_info().slots, 12u);
      for (std::size_t i = 0; i < in.size(); ++i) ASSERT_EQ(out[r][i], 3 * in[i]) << "seed " << seed;
    }
  }
}

// What the switch refuses: unknown jobs, sizes out of range and multi-lane switches (a leaf
// is resized too since the tree resize: TwoLevelResize.*).
TEST(SimResizeEdges, RefusedWhereTheBoundaryCannotBeAnnounced) {
  auto t = flat(1, faults_for(0.0), 2, 8, 8);
  EXPECT_EQ(t.c->sw(0).resize(99, 4), proto::Reason::unknown_job);
  EXPECT_EQ(t.c->sw(0).resize(7, 0), proto::Reason::bad_slot);
  EXPECT_EQ(t.c->sw(0).resize(7, 0x10000), proto::Reason::bad_slot);
  auto h = two_level(1, faults_for(0.0), {2, 2}, 4, 8);
  EXPECT_EQ(h.c->sw(1).resize(7, 2), proto::Reason::ok);  // a leaf (nobody joined: at once)
  auto l = flat_lanes(1, faults_for(0.0), 2, 4, 8, 2);
  EXPECT_EQ(l.c->sw(0).resize(7, 2), proto::Reason::unsupported);
}

// The result flag's aux: the distance in bits 8..31 (never 0), bits 1..7 zero.
TEST(SimResizeEdges, TheResultFlagIsValidated) {
  proto::Header h;
  h.type = proto::PacketType::result;
  h.flags = proto::flag::resize;
  std::byte buf[proto::kHeaderBytes];
  auto check = [&](std::uint32_t aux) {
    h.aux = aux;
    proto::encode_header(h, buf);
    proto::PacketView v;
    return proto::decode(std::span<const std::byte>(buf, sizeof buf), v);
  };
  EXPECT_EQ(check(5u << proto::kResizeShift), proto::Reason::ok);
  EXPECT_EQ(check((5u << proto::kResizeShift) | proto::kResultResent), proto::Reason::ok);
  EXPECT_EQ(check(0), proto::Reason::bad_field);
  EXPECT_EQ(check((5u << proto::kResizeShift) | 2), proto::Reason::bad_field);
  // With the flag, aux bits 8..31 are shared with the numeric events (bits 20..31).
  EXPECT_EQ(check(proto::resize_aux(5, 7)), proto::Reason::ok);
  EXPECT_EQ(proto::resize_distance(proto::resize_aux(5, 7)), 5u);
  h.aux = proto::resize_aux(5, 7);
  EXPECT_EQ(proto::header_events(h), 7u);
  EXPECT_EQ(proto::resize_distance(proto::resize_aux(proto::kMaxResizeDistance, 1u << 20)), proto::kMaxResizeDistance);
  h.aux = proto::resize_aux(proto::kMaxResizeDistance, 1u << 20);
  EXPECT_EQ(proto::header_events(h), proto::kMaxResizeEvents);  // saturates, never spills
  EXPECT_EQ(check(proto::resize_aux(0, 7)), proto::Reason::bad_field);  // no distance
  h.flags = 0;
  h.aux = 5u << proto::kResizeShift;
  EXPECT_EQ(proto::header_events(h), 5u);  // no flag: bits 8..31 are events only
  EXPECT_EQ(check(5u << proto::kResizeShift), proto::Reason::ok);
  h.type = proto::PacketType::pending;
  h.flags = proto::flag::resize;
  EXPECT_EQ(check(0), proto::Reason::bad_flags);  // results and joins only
  // On a join: the sender drained to a boundary (docs/PROTOCOL.md "Live resize of a tree of lanes").
  h.type = proto::PacketType::join;
  h.flags = proto::flag::resize | proto::flag::retransmit;
  EXPECT_EQ(check(1001), proto::Reason::ok);
  h.type = proto::PacketType::join_ack;
  EXPECT_EQ(check(0), proto::Reason::bad_flags);
}

}  // namespace
}  // namespace inc::sw
