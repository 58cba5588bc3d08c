// The control protocol (src/proto/control.*, src/control/conn.*): every message round-trips,
// bad bytes are refused with a reason, and sealed frames cannot be forged, altered, replayed
// or moved to another connection.
#include <gtest/gtest.h>

#include "src/control/conn.hpp"
#include "src/proto/control.hpp"

namespace inc::control {
namespace {

namespace ctl = proto::ctl;

proto::auth::Key key(std::uint8_t b) {
  proto::auth::Key k{};
  k.fill(b);
  return k;
}

std::vector<ctl::Message> samples() {
  ctl::SwitchState st;
  st.name = "leaf0";
  st.ip = 0x7F000001;
  st.port = 7101;
  st.lanes = 2;
  st.slots_per_lane = 512;
  st.slot_elems = 256;
  st.jobs = {{5, 3, 16, 1}};
  st.static_jobs = {{1, 4, 8, proto::kNoMember}};
  ctl::TreeReply rep;
  rep.ok = true;
  rep.why = "tree";
  rep.job = 5;
  rep.slots = 16;
  rep.lease = 99;
  rep.lease_ms = 10000;
  rep.key = key(7);
  rep.root = "spine";
  rep.ranks = {{"leaf0", 0x7F000001, 7101, 0}, {"leaf1", 0x7F000001, 7102, 0}};
  rep.tree = {{"spine", {5, 2, 16, proto::kNoMember}}, {"leaf0", {5, 1, 16, 0}}};
  return {st,
          ctl::Admit{3, {5, 3, 16, 1}, key(9)},
          ctl::Release{4, 5},
          ctl::Outcome{3, 5, 0},
          ctl::TreeRequest{32, "comm 1", {"h0", "h1", "h2"}, 54000},
          rep,
          ctl::LeaseRenew{5, 99, rep.tree},
          ctl::LeaseReply{5, true},
          ctl::TreeRelease{5, 99},
          ctl::StatusRequest{},
          ctl::StatusReply{"{}"},
          ctl::Resize{6, 5, 12}};
}

TEST(ControlWire, EveryMessageRoundTripsAndEveryTruncationIsRefused) {
  for (const auto& m : samples()) {
    auto b = ctl::encode(m);
    std::string why;
    auto d = ctl::decode(b, why);
    ASSERT_TRUE(d) << why;
    EXPECT_EQ(d->index(), m.index());
    EXPECT_EQ(ctl::encode(*d), b);
    for (std::size_t n = 0; n < b.size(); ++n) {
      std::string w;
      EXPECT_FALSE(ctl::decode(std::span(b).first(n), w)) << "type " << m.index() << " cut at " << n;
      EXPECT_FALSE(w.empty());
    }
    auto longer = b;
    longer.push_back(std::byte{0});
    std::string w;
    EXPECT_FALSE(ctl::decode(longer, w));
    EXPECT_NE(w.find("left over"), std::string::npos);
  }
}

TEST(ControlWire, FieldsOutOfRangeAreRefused) {
  std::string why;
  ctl::Admit a{1, {5, std::uint16_t(proto::kMaxMembers + 1), 16, proto::kNoMember}, key(1)};  // 1025 members
  EXPECT_FALSE(ctl::decode(ctl::encode(a), why));
  a.spec = {0, 3, 16, proto::kNoMember};  // job 0
  EXPECT_FALSE(ctl::decode(ctl::encode(a), why));
  ctl::TreeRequest r{70000, "", {"h"}};  // slots above 65535
  EXPECT_FALSE(ctl::decode(ctl::encode(r), why));
  r = {1, "", {}};  // no ranks
  EXPECT_FALSE(ctl::decode(ctl::encode(r), why));
  r = {1, "", {"h"}, ctl::kMaxWaitMs + 1};  // a wait above INC_TIMEOUT's bound
  EXPECT_FALSE(ctl::decode(ctl::encode(r), why));
  r.wait_ms = ctl::kMaxWaitMs;
  EXPECT_TRUE(ctl::decode(ctl::encode(r), why)) << why;
  EXPECT_FALSE(ctl::decode(ctl::encode(ctl::Resize{1, 5, 0}), why));  // a resize to no slots
  EXPECT_FALSE(ctl::decode(ctl::encode(ctl::Resize{1, 5, 0x10000}), why));
  EXPECT_FALSE(ctl::decode(ctl::encode(ctl::Resize{1, 0, 4}), why));  // job 0
  std::vector<std::byte> unknown{std::byte{200}};
  EXPECT_FALSE(ctl::decode(unknown, why));
  EXPECT_NE(why.find("unknown message type"), std::string::npos);
}

// A client and a server session wired back to back in memory.
struct Pair {
  Session c{key(1), true, ctl::Role::job};
  Session s{key(1), false, ctl::Role::job};
  bool pump() {
    auto a = std::move(c.out());
    c.out().clear();
    auto b = std::move(s.out());
    s.out().clear();
    return s.in(a) && c.in(b);
  }
};

TEST(ControlWire, SessionsCarryMessagesBothWays) {
  Pair p;
  p.c.send(ctl::TreeRequest{8, "x", {"h0", "h1"}});
  ASSERT_TRUE(p.pump());
  ASSERT_TRUE(p.pump());
  EXPECT_EQ(p.s.peer_role(), ctl::Role::job);
  auto m = p.s.take();
  ASSERT_TRUE(m);
  EXPECT_EQ(std::get<ctl::TreeRequest>(*m).hosts.size(), 2u);
  p.s.send(ctl::LeaseReply{3, true});
  ASSERT_TRUE(p.pump());
  auto r = p.c.take();
  ASSERT_TRUE(r);
  EXPECT_EQ(std::get<ctl::LeaseReply>(*r).job, 3u);
}

TEST(ControlWire, ForgedAlteredReplayedAndMovedFramesAreRefused) {
  // Forged: a client with another secret.
  {
    Session c{key(2), true, ctl::Role::job}, s{key(1), false, ctl::Role::job};
    c.send(ctl::StatusRequest{});
    ASSERT_TRUE(s.in(c.out()));
    c.out().clear();
    ASSERT_TRUE(c.in(s.out()));
    EXPECT_FALSE(s.in(c.out()));  // the frame sealed under the wrong key
    EXPECT_NE(s.why().find("authentication"), std::string::npos) << s.why();
  }
  // Altered: one bit of a sealed frame.
  {
    Pair p;
    ASSERT_TRUE(p.pump());
    p.c.send(ctl::TreeRelease{5, 99});
    auto f = p.c.out();
    f[8] ^= std::byte{1};
    EXPECT_FALSE(p.s.in(f));
  }
  // A resize (controller -> switch) altered on the way: the switch's side refuses it.
  {
    Pair p;
    ASSERT_TRUE(p.pump());
    p.s.send(ctl::Resize{7, 5, 4});
    auto f = p.s.out();
    f[9] ^= std::byte{1};
    EXPECT_FALSE(p.c.in(f));
  }
  // Replayed within the connection: the counter moved on.
  {
    Pair p;
    ASSERT_TRUE(p.pump());
    p.c.send(ctl::TreeRelease{5, 99});
    auto f = p.c.out();
    ASSERT_TRUE(p.s.in(f));
    EXPECT_TRUE(p.s.take());
    EXPECT_FALSE(p.s.in(f));
  }
  // Moved to another connection (a capture replayed later): other nonces, other keys.
  {
    Pair p, q;
    ASSERT_TRUE(p.pump());
    ASSERT_TRUE(q.pump());
    p.c.send(ctl::TreeRelease{5, 99});
    EXPECT_FALSE(q.s.in(p.c.out()));
  }
  // A length beyond the bound is refused before anything is buffered.
  {
    Pair p;
    ASSERT_TRUE(p.pump());
    std::vector<std::byte> huge{std::byte{0xFF}, std::byte{0xFF}, std::byte{0xFF}, std::byte{0x7F}};
    EXPECT_FALSE(p.s.in(huge));
  }
  // A wrong magic or version in the hello.
  {
    Session s{key(1), false, ctl::Role::job};
    auto h = ctl::encode_hello({ctl::kVersion + 1, ctl::Role::job, {}});
    EXPECT_FALSE(s.in(h));
    EXPECT_NE(s.why().find("version"), std::string::npos);
  }
}

}  // namespace
}  // namespace inc::control
