// Unit tests of the switch data plane, driven packet by packet (no network).
#include "src/switch/dataplane.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstring>
#include <vector>

#include "src/switch/arith.hpp"
#include "tests/switch/dp_util.hpp"

namespace inc::sw {
namespace {

using proto::ElemType;
using proto::Header;
using proto::PacketType;
using proto::Reason;
using proto::WireOp;
using testing::Sent;

class DP : public testing::DataPlaneFixture {};

TEST_F(DP, AggregatesAndReplicatesToEveryMember) {
  setup(3, 4);
  send(Endpoint::node(1), data(7, 0, 0, 4, 3), i32s({1, 2, 3}));
  send(Endpoint::node(2), data(7, 1, 0, 4, 3), i32s({10, 20, 30}));
  EXPECT_TRUE(drain().empty());  // nothing until the last member
  send(Endpoint::node(3), data(7, 2, 0, 4, 3), i32s({100, 200, 300}));
  auto out = drain();
  ASSERT_EQ(out.size(), 3u);
  for (std::uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i].to, Endpoint::node(i + 1));
    EXPECT_EQ(out[i].h.type, PacketType::result);
    EXPECT_EQ(out[i].h.chunk, 0u);
    EXPECT_EQ(out[i].h.flags & proto::flag::overflow, 0);
    EXPECT_EQ(as_i32(out[i].payload), (std::vector<std::int32_t>{111, 222, 333}));
  }
  auto s = sw->snapshot();
  EXPECT_EQ(s.counters.aggregations, 1u);
  EXPECT_EQ(s.jobs[0].counters.aggregations, 1u);
  EXPECT_EQ(s.jobs[0].counters.packets_out, 3u + 3u);  // 3 join_acks + 3 results
}

TEST_F(DP, AMemberWhosePacketIsMissingIsToldOnceWhenItsNextArrives) {
  setup(2, 4);
  // Member 1 sends chunks 0 and 1; member 0's chunk 0 is lost, its chunk 1 arrives.
  send(Endpoint::node(2), data(7, 1, 0, 4, 1), i32s({1}));
  send(Endpoint::node(2), data(7, 1, 1, 4, 1), i32s({2}));
  EXPECT_TRUE(drain().empty());  // member 1 sent in order: nothing missing
  send(Endpoint::node(1), data(7, 0, 1, 4, 1), i32s({20}));  // member 0's chunk 1 before its 0
  auto out = drain();
  ASSERT_EQ(out.size(), 3u);  // chunk 1 completes (2 results) and member 0 hears of chunk 0
  const auto nk = std::find_if(out.begin(), out.end(), [](const Sent& x) { return x.h.type == PacketType::nack; });
  ASSERT_NE(nk, out.end());
  EXPECT_EQ(nk->to, Endpoint::node(1));
  EXPECT_EQ(nk->h.reason, Reason::missing);
  EXPECT_EQ(nk->h.chunk, 0u);
  EXPECT_EQ(nk->h.slot, 0u);
  EXPECT_EQ(nk->h.epoch, sw->job_epoch(7));
  EXPECT_EQ(sw->snapshot().counters.gaps_signalled, 1u);
  // Once per chunk and member: a later packet does not repeat it.
  send(Endpoint::node(1), data(7, 0, 2, 4, 1), i32s({30}));
  for (const auto& x : drain()) EXPECT_NE(x.h.type, PacketType::nack);
  // The repair completes chunk 0 exactly once.
  send(Endpoint::node(1), data(7, 0, 0, 4, 1, ElemType::i32, WireOp::sum,
                               proto::flag::want_result | proto::flag::retransmit), i32s({10}));
  out = drain();
  ASSERT_EQ(out.size(), 2u);
  for (const auto& x : out) {
    EXPECT_EQ(x.h.type, PacketType::result);
    EXPECT_EQ(as_i32(x.payload), (std::vector<std::int32_t>{11}));
  }
  EXPECT_EQ(sw->snapshot().counters.gaps_signalled, 1u);
}

TEST_F(DP, DuplicateIsNeverAddedTwiceAndLateRetransmissionGetsResult) {
  setup(2, 4);
  send(Endpoint::node(1), data(7, 0, 1, 4, 1), i32s({5}));
  send(Endpoint::node(1), data(7, 0, 1, 4, 1, ElemType::i32, WireOp::sum,
                               proto::flag::want_result | proto::flag::retransmit),
       i32s({5}));
  auto pend = drain_no_gaps();  // retransmission of an incomplete chunk: told who contributed
  ASSERT_EQ(pend.size(), 1u);
  EXPECT_EQ(pend[0].h.type, PacketType::pending);
  EXPECT_EQ(proto::load_u64(pend[0].payload.data()), 1u);
  EXPECT_EQ(pend[0].h.aux, 2u);
  send(Endpoint::node(2), data(7, 1, 1, 4, 1), i32s({7}));
  auto out = drain_no_gaps();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(as_i32(out[0].payload), std::vector<std::int32_t>{12});
  // Member 1 missed the result and retransmits: it gets the same result, nothing is re-added.
  send(Endpoint::node(2), data(7, 1, 1, 4, 1), i32s({7}));
  out = drain_no_gaps();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].to, Endpoint::node(2));
  EXPECT_EQ(as_i32(out[0].payload), std::vector<std::int32_t>{12});
  EXPECT_EQ(sw->counters().duplicates, 2u);
  EXPECT_EQ(sw->counters().results_resent, 1u);
  EXPECT_EQ(sw->counters().aggregations, 1u);
}

TEST_F(DP, ShadowCopyServesLateResultWhileOtherCopyAdvances) {
  setup(2, 2);  // S = 2: chunk 0 -> slot 0 copy 0, chunk 2 -> slot 0 copy 1, chunk 4 -> copy 0
  for (std::uint16_t m = 0; m < 2; ++m) send(Endpoint::node(m + 1), data(7, m, 0, 2, 1), i32s({1}));
  drain_no_gaps();
  // Member 0 got result 0 and moves on to chunk 2 (same slot, other copy).
  send(Endpoint::node(1), data(7, 0, 2, 2, 1), i32s({4}));
  // Member 1 lost result 0 and retransmits chunk 0: still served from copy 0.
  send(Endpoint::node(2), data(7, 1, 0, 2, 1), i32s({1}));
  auto out = drain_no_gaps();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.chunk, 0u);
  EXPECT_EQ(as_i32(out[0].payload), std::vector<std::int32_t>{2});
  // Chunk 4 (copy 0 again) before chunk 2 completed is outside the window.
  send(Endpoint::node(1), data(7, 0, 4, 2, 1), i32s({9}));
  EXPECT_EQ(sw->counters().drops_by_reason[int(Reason::out_of_window)], 1u);
  send(Endpoint::node(2), data(7, 1, 2, 2, 1), i32s({6}));
  out = drain_no_gaps();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(as_i32(out[0].payload), std::vector<std::int32_t>{10});
  // Now chunk 4 reuses copy 0; a late duplicate of chunk 0 is stale and dropped silently.
  send(Endpoint::node(1), data(7, 0, 4, 2, 1), i32s({100}));
  send(Endpoint::node(2), data(7, 1, 0, 2, 1), i32s({1}));
  EXPECT_TRUE(drain_no_gaps().empty());
  EXPECT_EQ(sw->counters().drops_by_reason[int(Reason::stale_chunk)], 1u);
  send(Endpoint::node(2), data(7, 1, 4, 2, 1), i32s({200}));
  out = drain_no_gaps();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(as_i32(out[1].payload), std::vector<std::int32_t>{300});
}

TEST_F(DP, I32WrapsAndReportsOverflow) {
  setup(2, 1);
  send(Endpoint::node(1), data(7, 0, 0, 1, 2), i32s({0x7FFFFFFF, -5}));
  send(Endpoint::node(2), data(7, 1, 0, 1, 2), i32s({1, -7}));
  auto out = drain();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_NE(out[0].h.flags & proto::flag::overflow, 0);
  EXPECT_EQ(as_i32(out[0].payload), (std::vector<std::int32_t>{INT32_MIN, -12}));
  // No overflow in the next chunk: the flag is per chunk.
  send(Endpoint::node(1), data(7, 0, 1, 1, 1), i32s({-1}));
  send(Endpoint::node(2), data(7, 1, 1, 1, 1), i32s({INT32_MIN + 1}));
  out = drain();
  EXPECT_EQ(out[0].h.flags & proto::flag::overflow, 0);
  EXPECT_EQ(as_i32(out[0].payload), std::vector<std::int32_t>{INT32_MIN});
}

TEST_F(DP, F32SumAndMinMax) {
  setup(2, 4);
  auto f32s = [](std::initializer_list<float> v) {
    std::vector<std::byte> b(v.size() * 4);
    std::memcpy(b.data(), v.begin(), b.size());
    return b;
  };
  send(Endpoint::node(1), data(7, 0, 0, 4, 2, ElemType::f32), f32s({1.5f, -2.0f}));
  send(Endpoint::node(2), data(7, 1, 0, 4, 2, ElemType::f32), f32s({0.25f, 8.0f}));
  auto out = drain();
  float r[2];
  std::memcpy(r, out[0].payload.data(), 8);
  EXPECT_EQ(r[0], 1.75f);
  EXPECT_EQ(r[1], 6.0f);
  send(Endpoint::node(1), data(7, 0, 1, 4, 2, ElemType::f32, WireOp::max), f32s({1.5f, -2.0f}));
  send(Endpoint::node(2), data(7, 1, 1, 4, 2, ElemType::f32, WireOp::max), f32s({0.25f, 8.0f}));
  out = drain();
  std::memcpy(r, out[0].payload.data(), 8);
  EXPECT_EQ(r[0], 1.5f);
  EXPECT_EQ(r[1], 8.0f);
  send(Endpoint::node(1), data(7, 0, 2, 4, 2, ElemType::i32, WireOp::min), i32s({3, -9}));
  send(Endpoint::node(2), data(7, 1, 2, 4, 2, ElemType::i32, WireOp::min), i32s({-4, 2}));
  out = drain();
  EXPECT_EQ(as_i32(out[0].payload), (std::vector<std::int32_t>{-4, -9}));
}

TEST_F(DP, WantBitsElideResultPayload) {
  setup(3, 4);  // reduce-scatter style: only member 1 wants the data
  send(Endpoint::node(1), data(7, 0, 0, 4, 2, ElemType::i32, WireOp::sum, 0), i32s({1, 2}));
  send(Endpoint::node(2), data(7, 1, 0, 4, 2), i32s({1, 2}));
  send(Endpoint::node(3), data(7, 2, 0, 4, 2, ElemType::i32, WireOp::sum, 0), i32s({1, 2}));
  auto out = drain();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_NE(out[0].h.flags & proto::flag::elided, 0);
  EXPECT_TRUE(out[0].payload.empty());
  EXPECT_EQ(as_i32(out[1].payload), (std::vector<std::int32_t>{3, 6}));
  EXPECT_NE(out[2].h.flags & proto::flag::elided, 0);
}

TEST_F(DP, RawReplicationAndEmptyContributions) {
  setup(3, 4);  // broadcast from member 2: the others contribute nothing
  send(Endpoint::node(1), data(7, 0, 0, 4, 0));
  std::vector<std::byte> msg = {std::byte(1), std::byte(2), std::byte(3), std::byte(0xFF), std::byte(9)};
  send(Endpoint::node(3), data(7, 2, 0, 4, 5, ElemType::raw, WireOp::copy, 0), msg);
  send(Endpoint::node(2), data(7, 1, 0, 4, 0));
  auto out = drain();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].payload, msg);
  EXPECT_EQ(out[1].payload, msg);
  EXPECT_TRUE(out[2].payload.empty());  // the root did not ask for it
  // Two members carrying data in a replication is a mismatch.
  send(Endpoint::node(1), data(7, 0, 1, 4, 5, ElemType::raw, WireOp::copy), msg);
  send(Endpoint::node(2), data(7, 1, 1, 4, 5, ElemType::raw, WireOp::copy), msg);
  out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.type, PacketType::nack);
  EXPECT_EQ(out[0].h.reason, Reason::mismatch);
}

TEST_F(DP, MismatchedCountOrTypeIsRefused) {
  setup(2, 4);
  send(Endpoint::node(1), data(7, 0, 0, 4, 2), i32s({1, 2}));
  send(Endpoint::node(2), data(7, 1, 0, 4, 3), i32s({1, 2, 3}));
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.reason, Reason::mismatch);
  EXPECT_EQ(out[0].h.aux & 0xFF, std::uint32_t(PacketType::data));
  EXPECT_EQ((out[0].h.aux >> 8) & 0xFFFF, 2u);  // what the switch holds
  send(Endpoint::node(2), data(7, 1, 0, 4, 2, ElemType::f32), i32s({1, 2}));
  EXPECT_EQ(drain()[0].h.reason, Reason::mismatch);
  EXPECT_EQ(sw->counters().drops_by_reason[int(Reason::mismatch)], 2u);
}

TEST_F(DP, RefusalsAreCountedByReason) {
  setup(2, 4);
  const auto& d = sw->counters().drops_by_reason;
  send(Endpoint::node(1), data(8, 0, 0, 4, 1), i32s({1}));  // unknown job
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.reason, Reason::unknown_job);
  EXPECT_EQ(d[int(Reason::unknown_job)], 1u);
  Header h = data(7, 0, 0, 4, 1);
  h.epoch ^= 1;  // another epoch
  send(Endpoint::node(1), h, i32s({1}));
  out = drain();
  EXPECT_EQ(out[0].h.reason, Reason::stale_epoch);
  EXPECT_EQ(out[0].h.epoch, sw->job_epoch(7));
  h = data(7, 2, 0, 4, 1);  // member out of range
  send(Endpoint::node(1), h, i32s({1}));
  EXPECT_EQ(d[int(Reason::bad_member)], 1u);
  h = data(7, 0, 0, 4, 1);
  h.slot = 1;  // chunk 0 belongs to slot 0
  send(Endpoint::node(1), h, i32s({1}));
  EXPECT_EQ(d[int(Reason::bad_slot)], 1u);
  send(Endpoint::node(9), data(7, 0, 0, 4, 1), i32s({1}));  // member 0 joined from node 1
  EXPECT_EQ(d[int(Reason::not_joined)], 1u);
  send(Endpoint::node(1), data(7, 0, 0, 4, 5), i32s({1, 2, 3, 4, 5}));  // > 4 cells
  EXPECT_EQ(d[int(Reason::too_large)], 1u);
  drain();
  // The switch keeps serving after all of it.
  send(Endpoint::node(1), data(7, 0, 0, 4, 1), i32s({1}));
  send(Endpoint::node(2), data(7, 1, 0, 4, 1), i32s({2}));
  out = drain();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(as_i32(out[0].payload), std::vector<std::int32_t>{3});
}

TEST_F(DP, MalformedAndForeignPacketsAreCountedAndIgnored) {
  setup(2, 4);
  std::vector<std::byte> junk(40, std::byte(0xAB));
  sw->on_packet(junk, Endpoint::node(5), now);
  sw->on_packet(std::span<const std::byte>(junk.data(), 3), Endpoint::node(5), now);
  std::vector<std::byte> b(proto::kHeaderBytes + 4);
  proto::encode(data(7, 0, 0, 4, 1), i32s({1}), b);
  b[4] = std::byte(7);  // future version
  sw->on_packet(b, Endpoint::node(1), now);
  EXPECT_TRUE(drain().empty());
  const auto& d = sw->counters().drops_by_reason;
  EXPECT_EQ(d[int(Reason::bad_magic)], 1u);
  EXPECT_EQ(d[int(Reason::too_short)], 1u);
  EXPECT_EQ(d[int(Reason::bad_version)], 1u);
  EXPECT_EQ(sw->counters().drops, 3u);
  EXPECT_EQ(sw->counters().packets_in, 2u + 3u);
}

TEST_F(DP, UnsupportedTypeIsRefused) {
  auto c = cfg();
  c.caps = proto::cap::i32_sum | proto::cap::raw_copy;  // no f32 adder
  make(c);
  ASSERT_EQ(sw->admit({7, 1, 2}, now), Reason::ok);
  send(Endpoint::node(1), join(7, 0));
  auto ack = drain();
  EXPECT_EQ(proto::read_join_info(ack[0].payload).caps, c.caps);
  send(Endpoint::node(1), data(7, 0, 0, 2, 1, ElemType::f32), i32s({1}));
  auto out = drain();
  EXPECT_EQ(out[0].h.reason, Reason::unsupported);
}

TEST_F(DP, SlotPoolAdmissionAndRelease) {
  make();  // 8 slots
  EXPECT_EQ(sw->admit({1, 2, 5}, now), Reason::ok);
  EXPECT_EQ(sw->admit({2, 2, 4}, now), Reason::no_slots);
  EXPECT_EQ(sw->admit({2, 2, 3}, now), Reason::ok);
  EXPECT_EQ(sw->admit({1, 2, 5}, now), Reason::ok);  // idempotent
  EXPECT_EQ(sw->admit({1, 3, 5}, now), Reason::job_exists);
  EXPECT_EQ(sw->admit({3, 0, 1}, now), Reason::bad_member);
  EXPECT_EQ(sw->admit({3, std::uint16_t(proto::kMaxMembers + 1), 1}, now), Reason::bad_member);
  EXPECT_EQ(sw->admit({3, 2, 0}, now), Reason::bad_slot);
  EXPECT_EQ(sw->admit({3, 2, 1, 0}, now), Reason::bad_field);  // no parent configured
  auto s = sw->snapshot();
  EXPECT_EQ(s.slots_allocated, 8u);
  EXPECT_EQ(s.jobs[0].slot_base, 0u);
  EXPECT_EQ(s.jobs[1].slot_base, 5u);
  EXPECT_TRUE(sw->release(1));
  EXPECT_FALSE(sw->release(1));
  EXPECT_EQ(sw->admit({4, 2, 5}, now), Reason::ok);
  EXPECT_EQ(sw->snapshot().slots_allocated, 8u);
}

TEST_F(DP, BusyCopiesAreReportedAsOccupancy) {
  setup(2, 4);
  send(Endpoint::node(1), data(7, 0, 0, 4, 1), i32s({1}));
  send(Endpoint::node(1), data(7, 0, 1, 4, 1), i32s({1}));
  EXPECT_EQ(sw->snapshot().jobs[0].busy_copies, 2u);
  send(Endpoint::node(2), data(7, 1, 0, 4, 1), i32s({1}));
  EXPECT_EQ(sw->snapshot().jobs[0].busy_copies, 1u);
}

// Control packets (admit/release): tests/switch/control_auth_test.cpp.

TEST_F(DP, DynamicJobWaitsForMembersNotYetJoined) {
  auto c = cfg();
  c.idle_timeout = kSecond;
  make(c);
  ASSERT_EQ(sw->admit({5, 2, 2}, now, true), Reason::ok);
  send(Endpoint::node(1), join(5, 0));
  drain();
  send(Endpoint::node(1), leave(5, 0));
  EXPECT_TRUE(sw->has_job(5)) << "released before member 1 joined";
  EXPECT_FALSE(sw->departed(5));
  send(Endpoint::node(2), join(5, 1));
  auto out = drain();
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.back().h.type, PacketType::join_ack);
  send(Endpoint::node(2), leave(5, 1));
  EXPECT_TRUE(sw->departed(5) || !sw->has_job(5));
  EXPECT_FALSE(sw->has_job(5)) << "every member joined and left: released";
}

TEST_F(DP, NewerSessionResetsJobOlderIsRefused) {
  setup(2, 2);
  auto e1 = sw->job_epoch(7);
  send(Endpoint::node(1), data(7, 0, 0, 2, 1), i32s({1}));  // half-done chunk of session 0
  send(Endpoint::node(1), join(7, 0, 5));
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.type, PacketType::join_ack);
  EXPECT_NE(out[0].h.epoch, e1);
  EXPECT_EQ(sw->snapshot().jobs[0].busy_copies, 0u);
  send(Endpoint::node(2), join(7, 1, 4));
  out = drain();
  EXPECT_EQ(out[0].h.reason, Reason::stale_epoch);
}

// Lane l of a leaf joins lane l of its parent; the members learn min(own lanes, parent's).
TEST_F(DP, LeafReportsTheMinimumLanesOfThePath) {
  auto c = cfg();
  c.parent = Endpoint::node(100);
  c.lanes = 4;
  c.lane = 1;
  make(c);
  ASSERT_EQ(sw->admit({7, 2, 2, 3}, now), Reason::ok);
  send(Endpoint::node(1), join(7, 0));
  auto up = drain();
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(up[0].to, Endpoint::node(100));
  EXPECT_EQ(up[0].h.type, PacketType::join);
  EXPECT_EQ(up[0].h.member, 3);
  auto parent_ack = [&](std::uint16_t lanes, std::uint16_t lane) {
    Header h;
    h.type = PacketType::join_ack;
    h.elem = ElemType::raw;
    h.count = proto::kJoinInfoBytes;
    h.job = 7;
    h.epoch = 0xABCD;
    h.chunk = up[0].h.chunk;  // echo our nonce
    std::vector<std::byte> p(proto::kJoinInfoBytes);
    proto::write_join_info({2, 2, 5, proto::cap::all, lanes, lane, 0}, p.data());
    send(Endpoint::node(100), h, p);
  };
  parent_ack(2, 1);
  auto acks = drain();
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].to, Endpoint::node(1));
  auto info = proto::read_join_info(acks[0].payload);
  EXPECT_EQ(info.lanes, 2);  // min(4, 2)
  EXPECT_EQ(info.lane, 1);
  EXPECT_EQ(info.slot_elems, 2u);  // min(4, 2) as before
  EXPECT_EQ(info.members, 2u);

  // A parent answering from another lane is misconfigured: the job fails visibly.
  c.lane = 0;
  make(c);
  ASSERT_EQ(sw->admit({7, 1, 2, 3}, now), Reason::ok);
  send(Endpoint::node(1), join(7, 0));
  up = drain();
  ASSERT_EQ(up.size(), 1u);
  parent_ack(2, 1);
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.type, PacketType::nack);
  EXPECT_EQ(out[0].h.reason, Reason::job_failed);
  EXPECT_EQ(sw->counters().jobs_failed, 1u);
}

TEST(Arith, Fx32RoundTripAndHeadroom) {
  EXPECT_EQ(fx32_headroom(1), 0);
  EXPECT_EQ(fx32_headroom(2), 1);
  EXPECT_EQ(fx32_headroom(5), 3);
  float x[4] = {1.0f, -0.75f, 0.0f, 3.5f};
  std::int32_t e = fx32_block_exponent(x, 4);
  EXPECT_EQ(e, 2);  // 3.5 < 2^2
  std::int32_t q[4];
  fx32_encode(x, 4, e, 3, q);
  float y[4];
  fx32_decode(q, 4, e, 3, y);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(x[i], y[i]);
  float bad[2] = {1.0f, std::numeric_limits<float>::infinity()};
  EXPECT_EQ(fx32_block_exponent(bad, 2), kFxNonFinite);
  float zero[2] = {0.0f, -0.0f};
  EXPECT_EQ(fx32_block_exponent(zero, 2), kFxZeroBlock);
}

// Issue 10: f32 min/max of +0 and -0 (and NaN) at the switch must not depend on which
// member's packet arrived first: IEEE 754-2019 maximum/minimum, as on the hosts.
TEST(Arith, F32MinMaxSignedZeroAndNaNIndependentOfOrder) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float cases[][2] = {{-0.0f, 0.0f}, {0.0f, -0.0f}, {nan, 1.0f}, {1.0f, nan}, {-0.0f, -0.0f}};
  for (auto [a, b] : cases)
    for (WireOp op : {WireOp::max, WireOp::min}) {
      float ab = a, ba = b;
      std::byte bb[4], ab_[4];
      std::memcpy(bb, &b, 4);
      std::memcpy(ab_, &a, 4);
      combine(ElemType::f32, op, &ab, bb, 1);  // a arrived first
      combine(ElemType::f32, op, &ba, ab_, 1);  // b arrived first
      std::uint32_t x, y;
      std::memcpy(&x, &ab, 4);
      std::memcpy(&y, &ba, 4);
      SCOPED_TRACE(::testing::Message() << a << " " << b << " " << proto::name(op));
      if (a != a || b != b) {
        EXPECT_TRUE(ab != ab && ba != ba);
        continue;
      }
      EXPECT_EQ(x, y);  // bitwise: the sign of zero too
      const bool zero_pair = a == 0.0f && b == 0.0f;
      if (zero_pair && (std::signbit(a) != std::signbit(b))) {
        EXPECT_EQ(std::signbit(ab), op == WireOp::min);  // max(-0,+0) = +0, min = -0
      }
    }
}

// Fixed point: a block that is -0 on every member sums to -0 (IEEE, as on the hosts); with a
// +0 anywhere it is +0.
TEST(Arith, Fx32SumOfNegativeZerosIsNegativeZero) {
  float neg[3] = {-0.0f, -0.0f, -0.0f}, pos[3] = {-0.0f, 0.0f, -0.0f};
  const std::int32_t en = fx32_block_exponent(neg, 3), ep = fx32_block_exponent(pos, 3);
  EXPECT_EQ(en, kFxNegativeZeroBlock);
  EXPECT_EQ(ep, kFxZeroBlock);
  std::int32_t q[3];
  float y[3];
  fx32_encode(neg, 3, en, 1, q);
  fx32_decode(q, 3, std::max(en, en), 1, y);  // the switch's max of the members' exponents
  for (float v : y) EXPECT_TRUE(v == 0.0f && std::signbit(v));
  fx32_decode(q, 3, std::max(en, ep), 1, y);
  for (float v : y) EXPECT_TRUE(v == 0.0f && !std::signbit(v));
}

}  // namespace
}  // namespace inc::sw
