// Probes at the switch (docs/PROTOCOL.md, "Probes"): a header-only question about a chunk,
// never a contribution, never a change of slot state. Every answer, packet by packet, and the
// gap signal for chunks skipped before anyone's packet for them arrived.
#include <gtest/gtest.h>

#include <vector>

#include "src/switch/dataplane.hpp"
#include "tests/switch/dp_util.hpp"

namespace inc::sw {
namespace {

using proto::ElemType;
using proto::Header;
using proto::PacketType;
using proto::Reason;
using proto::WireOp;
using testing::Sent;
namespace flag = proto::flag;

class DPProbe : public testing::DataPlaneFixture {
 protected:
  Header probe(std::uint16_t m, std::uint32_t chunk, std::uint32_t S, bool want = false) {
    return data(7, m, chunk, S, 0, ElemType::none, WireOp::none,
                std::uint8_t(flag::probe | flag::retransmit | (want ? flag::want_result : 0)));
  }
  // The one packet a probe drew (to its sender), checked against the amplification bound: a
  // header, or the result with at most a slot's payload.
  Sent answer(Endpoint to) {
    auto out = drain();
    EXPECT_EQ(out.size(), 1u);
    if (out.empty()) return {};
    EXPECT_EQ(out[0].to, to);
    EXPECT_LE(out[0].payload.size(), std::size_t(4 * 4)) << "larger than a slot";
    return out[0];
  }
  static void expect_missing(const Sent& s, std::uint32_t chunk) {
    EXPECT_EQ(s.h.type, PacketType::nack);
    EXPECT_EQ(s.h.reason, Reason::missing);
    EXPECT_EQ(s.h.chunk, chunk);
    EXPECT_EQ(s.h.aux & 0xFF, std::uint32_t(PacketType::data));
    EXPECT_EQ(s.h.aux >> 8, proto::kMissingAnswersProbe);  // the answer to a probe
  }
};

// Every answer of a chunk's life, and none of them changes what the switch adds.
TEST_F(DPProbe, AnswersFollowTheChunkAndNeverContribute) {
  setup(2, 4);
  const Endpoint m0 = Endpoint::node(1), m1 = Endpoint::node(2);
  send(m0, data(7, 0, 0, 4, 1), i32s({5}));
  EXPECT_TRUE(drain().empty());
  // Aggregating without member 1's contribution: `missing` (member 1 then sends its data).
  send(m1, probe(1, 0, 4, true));
  expect_missing(answer(m1), 0);
  // Aggregating with member 0's: `pending`, with who contributed.
  send(m0, probe(0, 0, 4, true));
  Sent p = answer(m0);
  EXPECT_EQ(p.h.type, PacketType::pending);
  EXPECT_EQ(proto::load_u64(p.payload.data()), 1u);
  EXPECT_EQ(p.h.aux, 2u);
  EXPECT_EQ(p.h.flags & flag::awaiting_parent, 0);
  auto c = sw->counters();
  EXPECT_EQ(c.probes, 2u);
  EXPECT_EQ(c.retransmissions, 0u);  // probes are counted apart from data sent again
  EXPECT_EQ(c.aggregations, 0u);
  EXPECT_EQ(c.duplicates, 0u);
  EXPECT_EQ(c.gaps_signalled, 0u);
  EXPECT_EQ(sw->snapshot().jobs[0].busy_copies, 1u);
  // Member 1's data completes the chunk once: 5 + 7.
  send(m1, data(7, 1, 0, 4, 1), i32s({7}));
  auto out = drain();
  ASSERT_EQ(out.size(), 2u);
  for (const auto& r : out) {
    EXPECT_EQ(r.h.type, PacketType::result);
    EXPECT_EQ(r.h.aux, 0u);  // the result sent at completion
    EXPECT_EQ(as_i32(r.payload), std::vector<std::int32_t>{12});
  }
  // Complete: a probe asking for the payload gets the stored result again, marked resent.
  send(m1, probe(1, 0, 4, true));
  Sent r = answer(m1);
  EXPECT_EQ(r.h.type, PacketType::result);
  EXPECT_EQ(r.h.aux, proto::kResultResent);
  EXPECT_EQ(as_i32(r.payload), std::vector<std::int32_t>{12});
  // Without asking for it: only that the chunk is complete (a header, elided).
  send(m0, probe(0, 0, 4, false));
  r = answer(m0);
  EXPECT_EQ(r.h.type, PacketType::result);
  EXPECT_EQ(r.h.aux, proto::kResultResent);
  EXPECT_NE(r.h.flags & flag::elided, 0);
  EXPECT_TRUE(r.payload.empty());
  c = sw->counters();
  EXPECT_EQ(c.aggregations, 1u);
  EXPECT_EQ(c.results, 1u);
  EXPECT_EQ(c.results_resent, 2u);
  EXPECT_EQ(c.probes, 4u);
  EXPECT_EQ(c.duplicates, 0u);
}

// The payload goes only to a member that asked for it with its contribution: a probe cannot
// fetch more than the member's own data packet would have.
TEST_F(DPProbe, ResultPayloadOnlyIfTheContributionAskedForIt) {
  setup(2, 4);
  send(Endpoint::node(1), data(7, 0, 0, 4, 1, ElemType::i32, WireOp::sum, 0), i32s({1}));
  send(Endpoint::node(2), data(7, 1, 0, 4, 1), i32s({2}));
  drain();
  send(Endpoint::node(1), probe(0, 0, 4, true));
  Sent r = answer(Endpoint::node(1));
  EXPECT_EQ(r.h.type, PacketType::result);
  EXPECT_NE(r.h.flags & flag::elided, 0);
  EXPECT_TRUE(r.payload.empty());
}

// A copy not yet begun for the chunk (its previous use complete): the member's data has not
// arrived, so `missing`; the copy is not reset: its old result is still served.
TEST_F(DPProbe, ChunkNotYetBegunIsMissingAndResetsNothing) {
  setup(2, 2);  // S = 2: chunk 0 -> slot 0 copy 0, chunk 2 -> slot 0 copy 1, chunk 4 -> copy 0
  for (std::uint32_t chunk : {0u, 1u})
    for (std::uint16_t m = 0; m < 2; ++m) send(Endpoint::node(m + 1), data(7, m, chunk, 2, 1), i32s({1}));
  drain();
  send(Endpoint::node(1), probe(0, 2, 2));
  expect_missing(answer(Endpoint::node(1)), 2);
  EXPECT_EQ(sw->snapshot().jobs[0].busy_copies, 0u);  // nothing begun
  // Chunk 4 reuses copy 0 only after chunk 2 (copy 1) completed: out of the window, dropped.
  send(Endpoint::node(1), probe(0, 4, 2));
  EXPECT_TRUE(drain().empty());
  EXPECT_EQ(sw->counters().drops_by_reason[int(Reason::out_of_window)], 1u);
  // Chunks 2 and 3 complete; member 0 begins chunk 4 in copy 0: chunk 0 is gone (stale).
  for (std::uint32_t chunk : {2u, 3u})
    for (std::uint16_t m = 0; m < 2; ++m) send(Endpoint::node(m + 1), data(7, m, chunk, 2, 1), i32s({2}));
  drain();
  send(Endpoint::node(1), data(7, 0, 4, 2, 1), i32s({3}));
  drain();
  send(Endpoint::node(2), probe(1, 0, 2, true));
  EXPECT_TRUE(drain().empty());
  EXPECT_EQ(sw->counters().drops_by_reason[int(Reason::stale_chunk)], 1u);
  send(Endpoint::node(2), probe(1, 4, 2, true));
  expect_missing(answer(Endpoint::node(2)), 4);
  send(Endpoint::node(2), data(7, 1, 4, 2, 1), i32s({4}));
  auto out = drain();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(as_i32(out[0].payload), std::vector<std::int32_t>{7});
}

// A barrier's chunk is an empty contribution: a probe (also a bare header) must not count as
// one, or a member that never arrived would complete the barrier.
TEST_F(DPProbe, ProbeOfABarrierChunkIsNotAnEmptyContribution) {
  setup(2, 4);
  send(Endpoint::node(1), data(7, 0, 0, 4, 0));  // member 0's empty contribution
  EXPECT_TRUE(drain().empty());
  send(Endpoint::node(2), probe(1, 0, 4, true));
  expect_missing(answer(Endpoint::node(2)), 0);
  EXPECT_EQ(sw->counters().aggregations, 0u);
  send(Endpoint::node(2), data(7, 1, 0, 4, 0));
  auto out = drain();
  ASSERT_EQ(out.size(), 2u);
  for (const auto& r : out) EXPECT_EQ(r.h.type, PacketType::result);
}

// The gap signal is once per chunk and member; a probe neither uses it up nor repeats it.
TEST_F(DPProbe, ProbesLeaveTheGapSignalAlone) {
  setup(2, 4);
  send(Endpoint::node(2), data(7, 1, 0, 4, 1), i32s({1}));
  send(Endpoint::node(1), probe(0, 0, 4));  // member 0's chunk 0 was lost
  expect_missing(answer(Endpoint::node(1)), 0);
  EXPECT_EQ(sw->counters().gaps_signalled, 0u);
  send(Endpoint::node(1), data(7, 0, 1, 4, 1), i32s({2}));
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.reason, Reason::missing);
  EXPECT_EQ(out[0].h.chunk, 0u);
  EXPECT_EQ(out[0].h.aux >> 8, 0u);  // the gap signal, not a probe's answer
  EXPECT_EQ(sw->counters().gaps_signalled, 1u);
  send(Endpoint::node(1), probe(0, 0, 4));
  expect_missing(answer(Endpoint::node(1)), 0);  // asked again: answered again
  EXPECT_EQ(sw->counters().gaps_signalled, 1u);
}

// Chunks a member skipped before anyone's packet for them arrived (every member's queue lost
// the same burst) are signalled too, once: not again when the chunk begins.
TEST_F(DPProbe, ChunkSkippedBeforeItBeganIsSignalledOnce) {
  setup(2, 8);
  send(Endpoint::node(1), data(7, 0, 3, 8, 1), i32s({1}));  // member 0: chunks 0-2 lost
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);  // one header for the burst: chunk 2, and 1 and 0 in its detail
  EXPECT_EQ(out[0].h.type, PacketType::nack);
  EXPECT_EQ(out[0].h.reason, Reason::missing);
  EXPECT_EQ(out[0].h.chunk, 2u);
  EXPECT_EQ(out[0].h.slot, 2u);
  EXPECT_EQ(out[0].h.aux >> 8, (1u << 1) | (1u << 2));
  EXPECT_EQ(sw->counters().gaps_signalled, 3u);  // chunks
  for (std::uint32_t chunk = 0; chunk < 4; ++chunk)
    send(Endpoint::node(2), data(7, 1, chunk, 8, 1), i32s({10}));  // member 1 in order
  out = drain();
  ASSERT_EQ(out.size(), 2u);  // chunk 3 completes; no signal for member 1
  for (const auto& r : out) EXPECT_EQ(r.h.type, PacketType::result);
  send(Endpoint::node(1), data(7, 0, 4, 8, 1), i32s({1}));
  EXPECT_TRUE(drain().empty());  // chunks 0-2 begun since: already signalled
  EXPECT_EQ(sw->counters().gaps_signalled, 3u);
  for (std::uint32_t chunk = 0; chunk < 3; ++chunk)  // the repairs complete them once
    send(Endpoint::node(1), data(7, 0, chunk, 8, 1, ElemType::i32, WireOp::sum,
                                 flag::want_result | flag::retransmit), i32s({1}));
  out = drain();
  ASSERT_EQ(out.size(), 6u);
  for (const auto& r : out) EXPECT_EQ(as_i32(r.payload), std::vector<std::int32_t>{11});
  EXPECT_EQ(sw->counters().aggregations, 4u);
}

// A burst longer than one nack's span needs several nacks; a packet draws at most as many
// headers as it brought (a header-only packet: one), the oldest chunks then wait for a later
// signal or the member's probes. A probe's `missing` lists the burst too, without marking it.
TEST_F(DPProbe, LongBurstsAndTheAmplificationBound) {
  setup(2, 64);
  send(Endpoint::node(1), data(7, 0, 40, 64, 0));  // header-only: chunks 0-39 skipped
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.chunk, 39u);
  EXPECT_EQ(out[0].h.aux >> 8, ((1u << 24) - 1) & ~1u);  // 38 down to 16
  EXPECT_EQ(sw->counters().gaps_signalled, 24u);
  send(Endpoint::node(1), probe(0, 10, 64));  // chunks 0-15: never signalled, still missing
  Sent p = answer(Endpoint::node(1));
  EXPECT_EQ(p.h.chunk, 10u);
  EXPECT_EQ(p.h.aux >> 8, proto::kMissingAnswersProbe | (((1u << 11) - 1) & ~1u));  // 9..0
  EXPECT_EQ(sw->counters().gaps_signalled, 24u);
  send(Endpoint::node(1), data(7, 0, 41, 64, 4), i32s({1, 2, 3, 4}));  // 48 bytes: one nack
  out = drain();
  ASSERT_EQ(out.size(), 0u);  // nothing new skipped since chunk 40
  setup(2, 64);
  send(Endpoint::node(1), data(7, 0, 60, 64, 4), i32s({1, 2, 3, 4}));
  out = drain();
  ASSERT_EQ(out.size(), 1u);  // 48 bytes: one header's worth of answer, 24 chunks named
  EXPECT_EQ(sw->counters().gaps_signalled, 24u);
}

// A leaf whose chunk waits for its parent: a member's probe gets `pending` (awaiting the
// parent) and the partial aggregate goes up again, as for a retransmitted duplicate.
TEST_F(DPProbe, LeafAwaitingItsParentAnswersPendingAndResendsUpward) {
  auto c = cfg();
  c.parent = Endpoint::node(100);
  make(c);
  ASSERT_EQ(sw->admit({7, 2, 4, 3}, now), Reason::ok);
  send(Endpoint::node(1), join(7, 0));
  auto up = drain();
  ASSERT_EQ(up.size(), 1u);
  Header ack;
  ack.type = PacketType::join_ack;
  ack.elem = ElemType::raw;
  ack.count = proto::kJoinInfoBytes;
  ack.job = 7;
  ack.epoch = 0xABCD;
  ack.chunk = up[0].h.chunk;
  std::vector<std::byte> info(proto::kJoinInfoBytes);
  proto::write_join_info({4, 4, 3, proto::cap::all, 1, 0, 0}, info.data());
  send(Endpoint::node(100), ack, info);
  send(Endpoint::node(2), join(7, 1));
  drain();
  send(Endpoint::node(1), data(7, 0, 0, 4, 1), i32s({1}));
  send(Endpoint::node(2), data(7, 1, 0, 4, 1), i32s({2}));
  auto fwd = drain();
  ASSERT_EQ(fwd.size(), 1u);
  EXPECT_EQ(fwd[0].to, Endpoint::node(100));
  send(Endpoint::node(1), probe(0, 0, 4, true));
  auto out = drain();
  ASSERT_EQ(out.size(), 2u);
  const auto pend = std::find_if(out.begin(), out.end(), [](const Sent& s) { return s.h.type == PacketType::pending; });
  const auto again = std::find_if(out.begin(), out.end(), [](const Sent& s) { return s.h.type == PacketType::data; });
  ASSERT_NE(pend, out.end());
  ASSERT_NE(again, out.end());
  EXPECT_EQ(pend->to, Endpoint::node(1));
  EXPECT_NE(pend->h.flags & flag::awaiting_parent, 0);
  EXPECT_EQ(again->to, Endpoint::node(100));
  EXPECT_NE(again->h.flags & flag::retransmit, 0);
  EXPECT_EQ(again->h.flags & flag::probe, 0);  // upward goes the partial itself
  EXPECT_EQ(again->h.epoch, 0xABCDu);
  EXPECT_EQ(as_i32(again->payload), std::vector<std::int32_t>{3});
  EXPECT_EQ(sw->counters().upstream_resent, 1u);
  // The parent's result completes it; a probe then gets that result again.
  Header res;
  res.type = PacketType::result;
  res.member = proto::kNoMember;
  res.job = 7;
  res.epoch = 0xABCD;
  res.elem = ElemType::i32;
  res.op = WireOp::sum;
  res.count = 1;
  send(Endpoint::node(100), res, i32s({30}));
  EXPECT_EQ(drain().size(), 2u);
  send(Endpoint::node(2), probe(1, 0, 4, true));
  Sent r = answer(Endpoint::node(2));
  EXPECT_EQ(r.h.type, PacketType::result);
  EXPECT_EQ(as_i32(r.payload), std::vector<std::int32_t>{30});
}

// Every packet is untrusted: a probe gets the refusals any data packet gets, each a header.
TEST_F(DPProbe, RefusalsOfProbesAreHeaders) {
  setup(2, 4);
  send(Endpoint::node(9), probe(0, 0, 4, true));  // not the member's joined address
  Sent s = answer(Endpoint::node(9));
  EXPECT_EQ(s.h.reason, Reason::not_joined);
  EXPECT_TRUE(s.payload.empty());
  Header stale = probe(0, 0, 4, true);
  stale.epoch ^= 1;
  send(Endpoint::node(1), stale);
  s = answer(Endpoint::node(1));
  EXPECT_EQ(s.h.reason, Reason::stale_epoch);
  // A probe that carries data is malformed: dropped before any state is looked at.
  Header fat = probe(0, 0, 4, true);
  fat.elem = ElemType::i32;
  fat.op = WireOp::sum;
  fat.count = 1;
  send(Endpoint::node(1), fat, i32s({1}));
  EXPECT_TRUE(drain().empty());
  EXPECT_EQ(sw->counters().drops_by_reason[int(Reason::bad_elem_type)], 1u);
  EXPECT_EQ(sw->counters().aggregations, 0u);
  EXPECT_EQ(sw->snapshot().jobs[0].busy_copies, 0u);
}

}  // namespace
}  // namespace inc::sw
