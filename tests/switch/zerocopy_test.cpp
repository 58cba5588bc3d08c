// Payloads sent by reference (docs/ARCHITECTURE.md, "The data path"): a worker sends each
// chunk from the op's input buffer and a switch sends results from the slot, without copying
// them into the outbox; the outbox reads them when the driver sends. These tests hold packets
// in the outbox across events, as a driver's batch does (the simulated network sends after
// every event and never sees that), and check that a referenced payload is read again by a
// retransmission, and copied before the memory it references changes: a result overwriting
// the input of an in-place op, an op finishing or failing, a slot taking its next chunk.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "src/switch/dataplane.hpp"
#include "src/switch/worker.hpp"
#include "tests/switch/dp_util.hpp"
#include "tests/switch/sim_util.hpp"

namespace inc::sw {
namespace {

using proto::ElemType;
using proto::Header;
using proto::PacketType;
using proto::Reason;
using proto::WireOp;

using testing::cbytes;
using testing::wbytes;

std::vector<std::int32_t> payload_i32(std::span<const std::byte> datagram) {
  proto::PacketView v;
  EXPECT_EQ(proto::decode(datagram, v), Reason::ok);
  std::vector<std::int32_t> x(v.payload.size() / 4);
  std::memcpy(x.data(), v.payload.data(), v.payload.size());
  return x;
}

Header header_of(std::span<const std::byte> datagram) {
  proto::PacketView v;
  EXPECT_EQ(proto::decode(datagram, v), Reason::ok);
  return v.h;
}

// ---- the outbox ----------------------------------------------------------------------------

TEST(OutboxRef, ReferencedPayloadIsReadWhenSentAndCopiedOnMaterialize) {
  Outbox o;
  std::vector<std::byte> src(100);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = std::byte(i);
  std::memset(o.reserve(8), 0xAB, 8);
  const std::size_t a = o.commit_ref(Endpoint::node(1), 8, src, 7);
  o.repeat(a, Endpoint::node(2));
  std::memset(o.reserve(4), 0xCD, 4);
  o.commit(Endpoint::node(3), 4);
  std::memset(o.reserve(8), 0xEF, 8);
  o.commit_ref(Endpoint::node(4), 8, std::span(src).subspan(10, 20), 9);
  EXPECT_EQ(o.references(), 3u);
  const auto& es = o.entries();
  ASSERT_EQ(es.size(), 4u);
  EXPECT_EQ(es[0].total(), 108u);
  EXPECT_EQ(o.payload(es[0]).data(), src.data());  // not copied
  EXPECT_EQ(o.payload(es[1]).data(), src.data());
  EXPECT_TRUE(o.payload(es[2]).empty());
  EXPECT_EQ(o.payload(es[3]).data(), src.data() + 10);
  // A change of the source before it is sent shows (the owner must not change it) ...
  src[0] = std::byte{0x55};
  EXPECT_EQ(o.bytes(es[0])[8], std::byte{0x55});
  // ... until the owner lets go of it: materialize(tag) copies its entries only.
  const std::uint64_t gen = o.generation();
  o.materialize(7);
  EXPECT_EQ(o.references(), 1u);
  src[0] = std::byte{0x66};
  for (std::size_t k : {0u, 1u}) {
    const auto b = o.bytes(es[k]);
    ASSERT_EQ(b.size(), 108u);
    EXPECT_EQ(b[0], std::byte{0xAB});
    EXPECT_EQ(b[8], std::byte{0x55});
    EXPECT_EQ(b[107], std::byte{99});
    EXPECT_TRUE(o.payload(es[k]).empty());
  }
  EXPECT_EQ(o.entries()[0].offset, o.entries()[1].offset) << "a repeat shares its copy";
  EXPECT_EQ(o.bytes(es[3])[8], std::byte{10});
  EXPECT_EQ(o.generation(), gen);
  o.clear();
  EXPECT_EQ(o.references(), 0u);
  EXPECT_GT(o.generation(), gen);
}

// ---- the switch: results from the slot -------------------------------------------------------

class DPRef : public testing::DataPlaneFixture {};

// A result resent from a copy (a probe), still queued when the copy takes its next chunk: the
// queued result carries the old aggregate, not the new contribution.
TEST_F(DPRef, QueuedResultKeepsItsBytesWhenTheSlotTakesTheNextChunk) {
  setup(2, 1);  // one slot: chunk c in copy c mod 2
  const Endpoint m0 = Endpoint::node(1), m1 = Endpoint::node(2);
  send(m0, data(7, 0, 0, 1, 2), i32s({1, 2}));
  send(m1, data(7, 1, 0, 1, 2), i32s({10, 20}));
  auto r0 = drain();
  ASSERT_EQ(r0.size(), 2u);
  EXPECT_EQ(as_i32(r0[0].payload), (std::vector<std::int32_t>{11, 22}));
  send(m0, data(7, 0, 1, 1, 2), i32s({3, 4}));
  send(m1, data(7, 1, 1, 1, 2), i32s({30, 40}));
  ASSERT_EQ(drain().size(), 2u);
  // Member 1 asks for chunk 0's result again (the switch references copy 0 for it) and, in the
  // same batch, member 0's chunk 2 opens copy 0's next use.
  send(m1, data(7, 1, 0, 1, 0, ElemType::none, WireOp::none,
                proto::flag::probe | proto::flag::retransmit | proto::flag::want_result));
  EXPECT_EQ(sw->outbox().references(), 1u);
  send(m0, data(7, 0, 2, 1, 2), i32s({5, 6}));
  EXPECT_EQ(sw->outbox().references(), 0u);  // the result was copied before the cells changed
  send(m1, data(7, 1, 2, 1, 2), i32s({50, 60}));
  auto out = drain();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].to, m1);
  EXPECT_EQ(out[0].h.chunk, 0u);
  EXPECT_EQ(out[0].h.aux, proto::kResultResent);
  EXPECT_EQ(as_i32(out[0].payload), (std::vector<std::int32_t>{11, 22}));
  for (std::size_t i : {1u, 2u}) {
    EXPECT_EQ(out[i].h.chunk, 2u);
    EXPECT_EQ(as_i32(out[i].payload), (std::vector<std::int32_t>{55, 66}));
  }
}

// Replication references the slot once for every member; counters count whole datagrams.
TEST_F(DPRef, ReplicationReferencesTheSlotOnce) {
  setup(3, 4);
  const std::uint64_t before = sw->counters().bytes_out;
  for (std::uint16_t m = 0; m < 3; ++m)
    send(Endpoint::node(m + 1), data(7, m, 0, 4, 4), i32s({m, 1, 2, 3}));
  const auto& o = sw->outbox();
  ASSERT_EQ(o.entries().size(), 3u);
  EXPECT_EQ(o.references(), 3u);
  for (const auto& e : o.entries()) {
    EXPECT_EQ(o.payload(e).data(), o.payload(o.entries()[0]).data());
    EXPECT_EQ(e.total(), proto::kHeaderBytes + 16);
  }
  EXPECT_EQ(sw->counters().bytes_out - before, 3 * (proto::kHeaderBytes + 16));
  for (const auto& s : drain()) EXPECT_EQ(as_i32(s.payload), (std::vector<std::int32_t>{3, 3, 6, 9}));
}

// ---- the worker: chunks from the op's input -------------------------------------------------

// Workers and one switch, connected by hand: packets stay in the outboxes until delivered.
struct Link {
  explicit Link(std::uint16_t members, std::uint32_t slots = 4) {
    SwitchConfig sc;
    sc.slots = 16;
    sc.slot_elems = 4;
    sc.incarnation = 5;
    sw = std::make_unique<SwitchDataPlane>(sc);
    EXPECT_EQ(sw->admit({7, members, slots}, 0), Reason::ok);
    for (std::uint16_t m = 0; m < members; ++m) {
      WorkerConfig c;
      c.job = 7;
      c.member = m;
      c.switch_ep = sw_ep;
      c.rto_initial = c.rto_min = 100'000;
      c.rto_max = 2 * kMillisecond;
      w.push_back(std::make_unique<WorkerProtocol>(c));
    }
  }
  static Endpoint ep(std::size_t i) { return Endpoint::node(std::uint32_t(i + 1)); }
  // Worker i's queued packets to the switch (or lost), then its outbox is cleared.
  void up(std::size_t i, bool deliver = true) {
    auto& o = w[i]->outbox();
    for (const auto& e : o.entries())
      if (deliver) sw->on_packet(o.bytes(e), ep(i), now);
    o.clear();
  }
  void down() {
    auto& o = sw->outbox();
    for (const auto& e : o.entries())
      for (std::size_t i = 0; i < w.size(); ++i)
        if (e.to == ep(i)) w[i]->on_packet(o.bytes(e), sw_ep, now);
    o.clear();
  }
  // Deliver everything until nothing moves; ticks when only timers are left.
  void settle() {
    for (int round = 0; round < 1000; ++round) {
      bool any = !sw->outbox().entries().empty();
      for (std::size_t i = 0; i < w.size(); ++i) {
        any |= !w[i]->outbox().entries().empty();
        up(i);
      }
      down();
      if (any) continue;
      bool busy = false;
      for (auto& x : w) busy |= x->busy();
      if (!busy) return;
      now += kMillisecond;
      for (auto& x : w)
        if (now >= x->next_deadline()) x->on_tick(now);
    }
    ADD_FAILURE() << "no progress";
  }
  // Join every worker (each has submitted) and leave their first chunks queued.
  void join() {
    for (std::size_t i = 0; i < w.size(); ++i) up(i);
    down();
    for (auto& x : w) ASSERT_TRUE(x->joined());
  }
  std::unique_ptr<SwitchDataPlane> sw;
  std::vector<std::unique_ptr<WorkerProtocol>> w;
  Endpoint sw_ep = Endpoint::node(0);
  Nanos now = 1'000'000;
};

bool within(const std::byte* p, std::span<const std::byte> buf) {
  return p >= buf.data() && p < buf.data() + buf.size();
}

// Every chunk's payload is a view of the input, first transmission and retransmissions alike.
TEST(WorkerRef, ChunksAndTheirRetransmissionsAreReadFromTheInput) {
  Link n(1);
  std::vector<std::int32_t> in{1, 2, 3, 4, 5, 6, 7, 8}, out(8, -1);
  n.w[0]->submit(WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in), wbytes(out), 8, 1), n.now);
  n.join();
  auto& o = n.w[0]->outbox();
  ASSERT_EQ(o.entries().size(), 2u);
  for (std::size_t k = 0; k < 2; ++k) {
    const auto& e = o.entries()[k];
    EXPECT_EQ(o.payload(e).data(), cbytes(in).data() + 16 * k) << "chunk " << k << " was copied";
    EXPECT_EQ(e.total(), proto::kHeaderBytes + 16);
  }
  EXPECT_EQ(o.references(), 2u);
  n.up(0, false);  // both lost
  // Time passes: the chunks are probed (`missing`) or deemed lost, and their data goes again,
  // read from the input once more.
  std::size_t retx = 0;
  for (int round = 0; round < 100 && n.w[0]->busy(); ++round) {
    for (const auto& e : o.entries()) {
      const Header h = header_of(o.bytes(e));
      if (h.type == PacketType::data && h.count > 0 && (h.flags & proto::flag::retransmit)) {
        ++retx;
        EXPECT_TRUE(within(o.payload(e).data(), cbytes(in)));
        EXPECT_EQ(payload_i32(o.bytes(e)),
                  (std::vector<std::int32_t>(in.begin() + 4 * h.chunk, in.begin() + 4 * h.chunk + 4)));
      }
    }
    const bool quiet = o.entries().empty() && n.sw->outbox().entries().empty();
    n.up(0);
    n.down();
    if (quiet) {
      n.now += kMillisecond;
      n.w[0]->on_tick(n.now);
    }
  }
  EXPECT_GE(retx, 2u);
  ASSERT_TRUE(n.w[0]->done()) << n.w[0]->error().message;
  EXPECT_EQ(out, in);
  WorkerCompletion c;
  ASSERT_TRUE(n.w[0]->poll_completion(c));
  EXPECT_GE(c.report.retransmissions, 2u);
}

// In place: a repair of chunk 0 is queued (still reading the buffer) when chunk 0's result
// arrives and overwrites that buffer. The repair must carry the contribution, and once the op
// completed nothing in the outbox reads the caller's buffer any more.
TEST(WorkerRef, AResultOverwritingTheInputOfAQueuedRepairCopiesItFirst) {
  Link n(2);
  std::vector<std::int32_t> a0{1, 2, 3, 4}, a1{10, 20, 30, 40};
  n.w[0]->submit(WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(a0), wbytes(a0), 4, 2), n.now);
  n.w[1]->submit(WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(a1), wbytes(a1), 4, 2), n.now);
  n.join();
  n.up(1);
  n.up(0);  // the chunk completes at the switch; both results are queued there
  ASSERT_EQ(n.sw->outbox().entries().size(), 2u);
  // The switch's gap signal for chunk 0 (as if member 0's packet had been lost): member 0
  // repairs it at once, from its buffer.
  Header h;
  h.type = PacketType::nack;
  h.reason = Reason::missing;
  h.job = 7;
  h.epoch = n.sw->job_epoch(7);
  h.aux = std::uint32_t(PacketType::data);
  std::vector<std::byte> nack(proto::kHeaderBytes);
  ASSERT_EQ(proto::encode(h, {}, nack), nack.size());
  n.w[0]->on_packet(nack, n.sw_ep, n.now);
  auto& o = n.w[0]->outbox();
  ASSERT_EQ(o.entries().size(), 1u);
  EXPECT_TRUE(header_of(o.bytes(o.entries()[0])).flags & proto::flag::retransmit);
  EXPECT_EQ(o.payload(o.entries()[0]).data(), cbytes(a0).data());
  // In the same batch, the result: {11, 22, 33, 44} lands in a0.
  n.down();
  EXPECT_EQ(a0, (std::vector<std::int32_t>{11, 22, 33, 44}));
  EXPECT_EQ(a1, (std::vector<std::int32_t>{11, 22, 33, 44}));
  ASSERT_TRUE(n.w[0]->done());
  WorkerCompletion c;
  ASSERT_TRUE(n.w[0]->poll_completion(c));
  // The queued repair still carries member 0's contribution, from a copy.
  ASSERT_EQ(o.entries().size(), 1u);
  EXPECT_EQ(o.references(), 0u);
  EXPECT_TRUE(o.payload(o.entries()[0]).empty());
  EXPECT_EQ(payload_i32(o.bytes(o.entries()[0])), (std::vector<std::int32_t>{1, 2, 3, 4}));
  // The switch treats it as the duplicate it is: never added twice.
  n.settle();
  EXPECT_EQ(a0, (std::vector<std::int32_t>{11, 22, 33, 44}));
  EXPECT_EQ(n.sw->counters().duplicates, 1u);
}

// A failure (or reset) hands the buffers back to the caller: queued packets stop reading them.
TEST(WorkerRef, FailureAndResetReleaseTheBuffers) {
  for (bool by_reset : {false, true}) {
    Link n(1);
    std::vector<std::int32_t> in{1, 2, 3, 4, 5, 6, 7, 8}, out(8);
    n.w[0]->submit(WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in), wbytes(out), 8, 1),
                   n.now);
    n.join();
    auto& o = n.w[0]->outbox();
    ASSERT_EQ(o.references(), 2u);
    if (by_reset) {
      n.w[0]->reset();
    } else {
      Header h;
      h.type = PacketType::nack;
      h.reason = Reason::job_failed;
      h.job = 7;
      h.epoch = n.sw->job_epoch(7);
      h.aux = std::uint32_t(PacketType::data);
      std::vector<std::byte> nack(proto::kHeaderBytes);
      ASSERT_EQ(proto::encode(h, {}, nack), nack.size());
      n.w[0]->on_packet(nack, n.sw_ep, n.now);
      ASSERT_TRUE(n.w[0]->failed());
    }
    EXPECT_EQ(o.references(), 0u);
    const std::vector<std::int32_t> sent = in;
    std::fill(in.begin(), in.end(), -7);  // the caller's again
    ASSERT_EQ(o.entries().size(), 2u);
    for (std::size_t k = 0; k < 2; ++k)
      EXPECT_EQ(payload_i32(o.bytes(o.entries()[k])),
                (std::vector<std::int32_t>(sent.begin() + 4 * k, sent.begin() + 4 * k + 4)));
  }
}

// Transformed payloads keep a staging copy: fx32's fixed-point values and block exponents.
TEST(WorkerRef, FixedPointPayloadsAreStaged) {
  Link n(1);
  std::vector<float> in{1.5f, -2.25f, 3.f, 0.5f}, out(4);
  n.w[0]->submit(WorkerOp::allreduce(NumKind::fx32, ReduceKind::sum, cbytes(in), wbytes(out), 4, 1),
                 n.now);
  n.join();
  auto& o = n.w[0]->outbox();
  ASSERT_EQ(o.entries().size(), 1u);  // the exponent round
  EXPECT_EQ(o.references(), 0u);
  n.up(0);
  n.down();
  ASSERT_EQ(o.entries().size(), 1u);  // the data round: fixed point, not the floats
  EXPECT_EQ(o.references(), 0u);
  n.settle();
  ASSERT_TRUE(n.w[0]->done()) << n.w[0]->error().message;
  EXPECT_EQ(out, in);
}

}  // namespace
}  // namespace inc::sw
