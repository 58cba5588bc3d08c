// Control packets (admit/release without a controller) are sealed under the switch's control
// key: the attacker's view (docs/PROTOCOL.md "Control plane"). A sniffed admit cannot be
// replayed, a forged, altered, unsealed or stale one is refused and counted, nothing refused is
// answered, and a victim job keeps aggregating exactly.
#include <gtest/gtest.h>

#include "src/proto/auth.hpp"
#include "tests/switch/dp_util.hpp"

namespace inc::sw {
namespace {

using namespace inc::sw::testing;
namespace auth = proto::auth;

constexpr std::uint64_t kWall = 1'800'000'000'000'000'000ull;  // the switch's wall clock at now = 0
constexpr Nanos kSec = 1'000'000'000;

auth::Key filled(std::uint8_t b) {
  auth::Key k;
  k.fill(b);
  return k;
}

class ControlAuth : public DataPlaneFixture {
 protected:
  const auth::Key key = filled(0x12);
  const auth::Instance inst = auth::random_instance();

  void make_switch(bool external = false, bool with_key = true) {
    auto c = cfg();
    c.slots = 16;
    if (with_key) c.control_key = key;
    c.external_control = external;
    c.auth_instance = auth::random_instance();
    make(c);
    sw->set_wall_offset(std::int64_t(kWall) - now);
  }
  // A control packet as a sender holding `k` seals it, sequence number `seq` (wall clock ns).
  std::vector<std::byte> control(PacketType t, std::uint32_t job, std::uint32_t slots,
                                 const auth::Key& k, std::uint64_t seq, std::uint32_t nonce = 77,
                                 bool seal = true, std::uint64_t reserved = 0) {
    Header h;
    h.type = t;
    h.elem = ElemType::raw;
    h.job = job;
    h.chunk = nonce;
    std::vector<std::byte> p;
    if (t == PacketType::admit) {
      proto::AdmitInfo a;
      a.key = reserved;
      a.slots = slots;
      a.members = 2;
      p.resize(proto::kAdmitInfoBytes);
      proto::write_admit_info(a, p.data());
    } else {
      p.resize(proto::kReleaseInfoBytes);
      proto::store_u64(p.data(), reserved);
    }
    h.count = std::uint16_t(p.size());
    std::vector<std::byte> b(proto::kHeaderBytes + p.size() + auth::kTrailerBytes);
    const std::size_t n = proto::encode(h, p, b);
    if (!seal) {
      b.resize(n);
      return b;
    }
    auth::seal(auth::Mac(k, inst), seq, b.data(), n);
    return b;
  }
  void deliver(const std::vector<std::byte>& b, Endpoint from = Endpoint::node(20)) {
    sw->on_packet(b, from, now);
  }
  std::uint64_t dropped(Reason r) const { return sw->counters().drops_by_reason[int(r)]; }
  // The raw datagrams the switch sent (answers are checked as the requester checks them).
  std::vector<std::vector<std::byte>> sent() {
    std::vector<std::vector<std::byte>> v;
    for (const auto& e : sw->outbox().entries()) {
      auto b = sw->outbox().bytes(e);
      v.emplace_back(b.begin(), b.end());
    }
    sw->outbox().clear();
    return v;
  }
  // An answer the requester accepts: sealed under the control key, echoing its nonce.
  static bool authentic_answer(const std::vector<std::byte>& d, const auth::Key& k, PacketType t,
                               std::uint32_t nonce) {
    proto::PacketView v;
    if (proto::decode(d, v) != Reason::ok || !v.sealed || v.h.type != t || v.h.chunk != nonce) return false;
    std::optional<auth::Mac> cache;
    auth::ReplayWindow w;
    return auth::open(k, cache, w, d) == auth::Verdict::ok;
  }
  // Job 7 (2 members, unkeyed, static) aggregating chunk c: the victim.
  void victim_chunk(std::uint32_t c, std::int32_t a, std::int32_t b) {
    send(Endpoint::node(1), data(7, 0, c, 4, 1), i32s({a}));
    send(Endpoint::node(2), data(7, 1, c, 4, 1), i32s({b}));
    auto out = drain();
    ASSERT_EQ(out.size(), 2u);
    for (const auto& o : out) {
      EXPECT_EQ(o.h.type, PacketType::result);
      EXPECT_EQ(as_i32(o.payload), std::vector<std::int32_t>{a + b});
    }
  }
};

TEST_F(ControlAuth, ASealedAdmitIsAnsweredSealedAndASniffedOneCannotBeReplayed) {
  make_switch();
  const auto admit = control(PacketType::admit, 5, 4, key, kWall + 1000, 4242);
  deliver(admit);
  auto out = sent();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(authentic_answer(out[0], key, PacketType::admit_ack, 4242));
  EXPECT_FALSE(authentic_answer(out[0], filled(0x13), PacketType::admit_ack, 4242));
  EXPECT_TRUE(sw->has_job(5));
  now += kSec;
  deliver(control(PacketType::release, 5, 0, key, kWall + kSec + 5, 4343));
  out = sent();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(authentic_answer(out[0], key, PacketType::release_ack, 4343));
  EXPECT_FALSE(sw->has_job(5));
  // The attacker replays the admit it sniffed, from its own address and from the sender's:
  // refused, counted, unanswered; the job stays released.
  deliver(admit, Endpoint::node(66));
  deliver(admit);
  EXPECT_TRUE(sent().empty());
  EXPECT_FALSE(sw->has_job(5));
  EXPECT_EQ(dropped(Reason::replayed), 2u);
  // ... also once the switch forgot the sender (its packets are stale by then).
  now += 40 * kSec;
  deliver(admit);
  EXPECT_TRUE(sent().empty());
  EXPECT_FALSE(sw->has_job(5));
  EXPECT_EQ(dropped(Reason::replayed), 3u);
}

TEST_F(ControlAuth, ForgedAlteredUnsealedAndStalePacketsAreRefusedAndTheVictimStaysExact) {
  make_switch();
  ASSERT_EQ(sw->admit({7, 2, 4}, now), Reason::ok);
  send(Endpoint::node(1), join(7, 0));
  send(Endpoint::node(2), join(7, 1));
  drain();
  victim_chunk(0, 1, 2);
  const std::uint64_t before = sw->counters().drops;
  // A wrong key, and the old format (unsealed, its key in clear): unauthenticated.
  deliver(control(PacketType::admit, 9, 16, filled(0x99), kWall + 10));
  deliver(control(PacketType::admit, 9, 16, key, kWall + 11, 77, false, 0x1234));
  deliver(control(PacketType::release, 7, 0, filled(0x99), kWall + 12));
  EXPECT_EQ(dropped(Reason::unauthenticated), 3u);
  // Every single bit of a sealed admit altered (the slots asked for, the job, the trailer...).
  const auto good = control(PacketType::admit, 9, 16, key, kWall + 20);
  std::uint64_t altered = 0;
  for (std::size_t i = 0; i < good.size(); ++i)
    for (int bit = 0; bit < 8; ++bit) {
      auto b = good;
      b[i] ^= std::byte(1u << bit);
      deliver(b);
      ++altered;
    }
  // Older or newer than 30 s against the switch's clock (a recorded packet; a sender whose
  // clock is off), correctly sealed: stale, counted as replayed.
  deliver(control(PacketType::admit, 9, 16, key, kWall - 31 * std::uint64_t(kSec)));
  deliver(control(PacketType::release, 7, 0, key, kWall + 31 * std::uint64_t(kSec)));
  EXPECT_EQ(dropped(Reason::replayed), 2u);
  EXPECT_EQ(sw->counters().drops - before, 3 + altered + 2);  // every one refused and counted
  EXPECT_TRUE(sent().empty()) << "a refused control packet was answered";
  EXPECT_FALSE(sw->has_job(9));
  EXPECT_TRUE(sw->has_job(7));
  victim_chunk(1, 10, 20);
  victim_chunk(2, -5, 5);
  // The right packet still works afterwards, and a non-zero reserved field (where the key
  // travelled in clear) under a right tag is refused with an authentic answer. (Some altered
  // headers above already failed decoding as bad_field.)
  const std::uint64_t bad_fields = dropped(Reason::bad_field);
  deliver(control(PacketType::admit, 9, 4, key, kWall + 30, 1, true, 0x1234));
  auto out = sent();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(authentic_answer(out[0], key, PacketType::nack, 1));
  EXPECT_EQ(dropped(Reason::bad_field), bad_fields + 1);
  deliver(control(PacketType::admit, 9, 4, key, kWall + 31, 2));
  out = sent();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(authentic_answer(out[0], key, PacketType::admit_ack, 2));
  EXPECT_TRUE(sw->has_job(9));
}

TEST_F(ControlAuth, WithoutAControlKeyEveryControlPacketIsRefused) {
  make_switch(false, false);
  deliver(control(PacketType::admit, 9, 4, key, kWall + 1));
  EXPECT_TRUE(sent().empty());
  EXPECT_EQ(dropped(Reason::control_refused), 1u);
  EXPECT_FALSE(sw->has_job(9));
}

// In a multi-lane daemon the lane checks the seal and hands the request to the daemon.
TEST_F(ControlAuth, ExternalControlIsHandedToTheDaemonOnlyWhenAuthentic) {
  make_switch(true);
  deliver(control(PacketType::admit, 5, 2, filled(0x99), kWall + 1));  // forged: never reaches it
  const auto admit = control(PacketType::admit, 5, 2, key, kWall + 2, 99);
  deliver(admit);
  deliver(admit);  // replayed: neither
  EXPECT_EQ(dropped(Reason::unauthenticated), 1u);
  EXPECT_EQ(dropped(Reason::replayed), 1u);
  EXPECT_TRUE(sent().empty());  // no answer before the daemon decided
  ASSERT_EQ(sw->control_events().size(), 1u);
  ControlEvent e = sw->control_events()[0];
  sw->control_events().clear();
  EXPECT_EQ(e.kind, ControlEvent::Kind::admit);
  EXPECT_EQ(e.spec, (JobSpec{5, 2, 2}));
  EXPECT_EQ(e.from, Endpoint::node(20));
  EXPECT_FALSE(sw->has_job(5));
  // The daemon admits on every lane, then answers from this one (sealed).
  ASSERT_EQ(sw->admit(e.spec, now, true), Reason::ok);
  sw->answer_control(e, Reason::ok);
  auto out = sent();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(authentic_answer(out[0], key, PacketType::admit_ack, 99));
  sw->answer_control(e, Reason::no_slots);
  out = sent();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(authentic_answer(out[0], key, PacketType::nack, 99));
  proto::PacketView v;
  ASSERT_EQ(proto::decode(out[0], v), Reason::ok);
  EXPECT_EQ(v.h.reason, Reason::no_slots);
}

}  // namespace
}  // namespace inc::sw
