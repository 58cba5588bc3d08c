// Multicast results (docs/PROTOCOL.md, "Multicast results") on the seeded simulated network,
// which gives every member its own copy of a group datagram with its own loss, duplication and
// delay: results stay exact at 0/5/20% loss, the switch sends each result once, a member that
// misses one recovers through the unicast probe/resend path, mixed wishes stay unicast, and
// with a key one sealed datagram is accepted once by every member while replays and forgeries
// sent to the group are refused by all of them.
#include <gtest/gtest.h>

#include "src/proto/auth.hpp"
#include "tests/switch/sim_util.hpp"

namespace inc::sw::testing {
namespace {

using proto::Reason;
namespace auth = proto::auth;

constexpr std::uint32_t kJob = 7;
const Endpoint kGroup = Endpoint::ipv4(0xEFFF0001u, 0);  // 239.255.0.1 (simulated: no port)

// One switch daemon with `lanes` lanes whose job kJob has the group; n workers.
Topo multicast_flat(std::uint64_t seed, const SimFaults& f, std::uint16_t n, std::uint16_t lanes,
                    const std::optional<auth::Key>& key = std::nullopt) {
  Topo t;
  t.c = std::make_unique<SimCluster>(seed, f);
  SwitchConfig sc;
  sc.slots = 64;
  sc.slot_elems = 16;
  sc.incarnation = seed * 2 + 1;
  sc.auth_instance[3] = std::uint8_t(seed);
  sc.auth_seq_base = 1000;
  JobSpec spec{kJob, n, 4, proto::kNoMember, key};
  spec.multicast = kGroup;
  for (std::size_t i : t.c->add_switch_lanes(sc, lanes)) {
    t.switches.push_back(t.c->switch_endpoint(i));
    EXPECT_EQ(t.c->sw(i).admit(spec, 0), Reason::ok);
  }
  for (std::uint16_t m = 0; m < n; ++m) {
    WorkerConfig w = worker_cfg(kJob, m, t.switches[0]);
    w.key = key;
    w.instance[0] = std::uint8_t(m + 1);
    w.instance[1] = std::uint8_t(seed);
    w.seq_base = 5000;
    t.c->add_worker(w);
  }
  return t;
}

struct Vectors {
  std::vector<std::vector<std::int32_t>> in, out;
};

Vectors start_allreduce(Topo& t, std::uint16_t n, std::uint64_t count, std::uint64_t salt) {
  Vectors r;
  r.in.assign(n, std::vector<std::int32_t>(count));
  r.out.assign(n, std::vector<std::int32_t>(count, -1));
  for (std::uint16_t m = 0; m < n; ++m)
    for (std::uint64_t i = 0; i < count; ++i) r.in[m][i] = std::int32_t(1000 * m + i * 7 + salt);
  for (std::uint16_t m = 0; m < n; ++m)
    t.c->start(m, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(r.in[m]),
                                      wbytes(r.out[m]), count, n));
  return r;
}

void expect_exact(Topo& t, const Vectors& r, const std::string& where) {
  std::vector<std::int32_t> want(r.in[0].size(), 0);
  for (const auto& v : r.in)
    for (std::size_t i = 0; i < v.size(); ++i) want[i] += v[i];
  for (std::size_t m = 0; m < r.in.size(); ++m) {
    ASSERT_TRUE(t.c->worker(m).done()) << where << " worker " << m << ": " << t.c->worker(m).error().message;
    ASSERT_EQ(r.out[m], want) << where << " worker " << m;
  }
}

TEST(Multicast, ExactAtZeroFiveAndTwentyPercentLossWithOneDatagramPerResult) {
  for (double loss : {0.0, 0.05, 0.20})
    for (std::uint16_t lanes : {1, 2})
      for (std::uint64_t seed = 1; seed <= 4; ++seed) {
        const std::string where = "loss " + std::to_string(loss) + " lanes " +
                                  std::to_string(lanes) + " seed " + std::to_string(seed);
        const std::uint16_t n = 6;
        SimFaults f = faults_for(loss);
        if (loss == 0) f = SimFaults{.jitter = 0};  // in order: nothing to recover
        auto t = multicast_flat(seed, f, n, lanes);
        Vectors r = start_allreduce(t, n, 1500, seed);
        ASSERT_TRUE(t.c->run(200 * kSecond)) << where;
        expect_exact(t, r, where);
        if (HasFatalFailure()) return;
        std::uint64_t results = 0, multicast = 0, resent = 0, out = 0;
        for (std::uint16_t l = 0; l < lanes; ++l) {
          const auto& c = t.c->sw(l).counters();
          results += c.results;
          multicast += c.results_multicast;
          resent += c.results_resent;
          out += c.packets_out;
        }
        // Every result left once, to the group; what a member missed came again to it alone.
        EXPECT_EQ(results, (1500 + 15) / 16) << where;
        EXPECT_EQ(multicast, results) << where;
        EXPECT_EQ(t.c->net().multicast_sent, results) << where;
        for (std::uint16_t m = 0; m < n; ++m) {
          EXPECT_EQ(t.c->worker(m).multicast_group(), kGroup) << where;
          EXPECT_TRUE(t.c->net().subscribed(kGroup, Endpoint::node(std::uint32_t(lanes + m)))) << where;
        }
        if (loss == 0) {
          // Join answers and the results, not n per result.
          EXPECT_LE(out, results + std::uint64_t(n) * lanes + 8) << where;
          EXPECT_EQ(resent, 0u) << where;
        } else {
          EXPECT_GT(resent, 0u) << where << ": no member recovered a lost group datagram";
        }
      }
}

TEST(Multicast, ResultsWithMixedWishesStayUnicast) {
  // reduce_scatter: each chunk's payload is wanted by one member, the others get it elided:
  // one group datagram cannot serve both, so every result goes per member.
  const std::uint16_t n = 4;
  auto t = multicast_flat(5, faults_for(0.05), n, 1);
  const std::uint64_t count = 100;  // per member
  std::vector<std::vector<std::int32_t>> in(n, std::vector<std::int32_t>(count * n)), out(n, std::vector<std::int32_t>(count, -1));
  for (std::uint16_t m = 0; m < n; ++m)
    for (std::uint64_t i = 0; i < count * n; ++i) in[m][i] = std::int32_t(m * 100000 + i);
  for (std::uint16_t m = 0; m < n; ++m)
    t.c->start(m, WorkerOp::reduce_scatter(NumKind::i32, ReduceKind::sum, cbytes(in[m]),
                                           wbytes(out[m]), count, n, m));
  ASSERT_TRUE(t.c->run(100 * kSecond));
  for (std::uint16_t m = 0; m < n; ++m) {
    ASSERT_TRUE(t.c->worker(m).done()) << t.c->worker(m).error().message;
    for (std::uint64_t i = 0; i < count; ++i) {
      std::int32_t want = 0;
      for (std::uint16_t k = 0; k < n; ++k) want += in[k][m * count + i];
      ASSERT_EQ(out[m][i], want) << "member " << m << " element " << i;
    }
  }
  EXPECT_GT(t.c->sw(0).counters().results, 0u);
  EXPECT_EQ(t.c->sw(0).counters().results_multicast, 0u);
  EXPECT_EQ(t.c->net().multicast_sent, 0u);
}

// Between switches everything is unicast: a leaf does not join groups, so a parent whose job
// has one is misconfigured and the leaves refuse it.
TEST(Multicast, ALeafWhoseParentAnnouncesAGroupFailsTheJob) {
  SimCluster c(21, faults_for(0));
  SwitchConfig spine;
  spine.slots = 64;
  spine.slot_elems = 16;
  spine.incarnation = 43;
  const Endpoint sp = c.add_switch(spine);
  JobSpec root{kJob, 2, 4};
  root.multicast = kGroup;
  ASSERT_EQ(c.sw(0).admit(root, 0), Reason::ok);
  std::vector<Endpoint> leaves;
  for (std::uint16_t l = 0; l < 2; ++l) {
    SwitchConfig leaf = spine;
    leaf.incarnation = 45 + l;
    leaf.parent = sp;
    leaves.push_back(c.add_switch(leaf));
    ASSERT_EQ(c.sw(1 + l).admit({kJob, 2, 4, l}, 0), Reason::ok);
  }
  for (std::uint16_t l = 0; l < 2; ++l)
    for (std::uint16_t m = 0; m < 2; ++m) c.add_worker(worker_cfg(kJob, m, leaves[l]));
  std::vector<std::vector<std::int32_t>> in(4, std::vector<std::int32_t>(64, 1)), out(4, std::vector<std::int32_t>(64));
  for (std::size_t w = 0; w < 4; ++w)
    c.start(w, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in[w]), wbytes(out[w]), 64, 4));
  c.run(10 * kSecond);
  // The leaves refuse the parent's join_ack (as for other misconfigurations of a tree, each
  // member's join retry makes the leaf try again), so no chunk is ever aggregated at the root
  // and nothing goes to a group no switch listens to; the members stop at their join deadline.
  for (std::size_t l = 1; l <= 2; ++l) EXPECT_GE(c.sw(l).counters().jobs_failed, 1u) << "leaf " << l;
  EXPECT_EQ(c.sw(0).counters().aggregations, 0u);
  EXPECT_EQ(c.net().multicast_sent, 0u);
  for (std::size_t w = 0; w < 4; ++w) {
    EXPECT_TRUE(c.worker(w).failed()) << "worker " << w;
    EXPECT_NE(c.worker(w).error().message.find("no join_ack"), std::string::npos) << c.worker(w).error().message;
  }
}

// The attacker's view: a host on the link that joins the group reads every result (no
// confidentiality is promised), but cannot get a forged or replayed datagram accepted.
TEST(Multicast, OneSealedResultIsAcceptedOnceByEveryMemberReplaysAndForgeriesByNone) {
  const auth::Key key = auth::random_key();
  const std::uint16_t n = 5;
  auto t = multicast_flat(11, faults_for(0), n, 2, key);
  std::vector<std::vector<std::byte>> captured;
  t.c->net().tap = [&](Endpoint, Endpoint to, std::span<const std::byte> b) {
    if (to == kGroup && captured.size() < 40) captured.emplace_back(b.begin(), b.end());
  };
  const Endpoint eavesdropper = Endpoint::node(1000);
  auto [up, down] = t.c->shape(eavesdropper, {}, {});
  (void)up;
  t.c->net().subscribe(kGroup, eavesdropper);
  Vectors r = start_allreduce(t, n, 1200, 3);
  ASSERT_TRUE(t.c->run(100 * kSecond));
  expect_exact(t, r, "keyed");
  if (HasFatalFailure()) return;
  const std::uint64_t results = t.c->sw(0).counters().results + t.c->sw(1).counters().results;
  ASSERT_EQ(t.c->sw(0).counters().results_multicast + t.c->sw(1).counters().results_multicast, results);
  // No loss, no duplication: every member accepted every group datagram, each exactly once.
  for (std::uint16_t m = 0; m < n; ++m) {
    EXPECT_EQ(t.c->worker(m).report().unauthenticated, 0u) << "member " << m;
    EXPECT_EQ(t.c->worker(m).report().chunks, results) << "member " << m;
  }
  EXPECT_EQ(t.c->net().link_stats(down).packets, results) << "the eavesdropper reads the results";
  ASSERT_EQ(captured.size(), 40u);

  // Replays: the captured datagrams again, from the lanes' own endpoints, to the group.
  std::vector<std::uint64_t> before(n);
  for (std::uint16_t m = 0; m < n; ++m) before[m] = t.c->worker(m).report().unauthenticated;
  for (const auto& b : captured) {
    proto::PacketView v;
    ASSERT_EQ(proto::decode(b, v), Reason::ok);
    ASSERT_EQ(v.h.type, proto::PacketType::result);
    // The lane that sealed it, from the trailer's instance (add_switch_lanes: byte 0 ^= lane + 1).
    const auto lane = std::size_t(b[b.size() - proto::kAuthTrailerBytes]) - 1;
    ASSERT_LT(lane, 2u);
    t.c->inject(t.switches[lane], kGroup, b);
  }
  // Forgeries: a result in the switch's name, sealed under another key and not sealed at all.
  proto::Header h;
  h.type = proto::PacketType::result;
  h.member = proto::kNoMember;
  h.job = kJob;
  h.epoch = t.c->worker(0).epoch();
  h.elem = proto::ElemType::i32;
  h.op = proto::WireOp::sum;
  h.count = 16;
  std::vector<std::byte> forged(proto::kHeaderBytes + 64 + proto::kAuthTrailerBytes);
  proto::encode_header(h, forged.data());
  std::vector<std::byte> unsealed(forged.begin(), forged.begin() + proto::kHeaderBytes + 64);
  forged.resize(auth::Sealer(auth::random_key(), auth::random_instance(), 1 << 30)
                    .seal(forged.data(), proto::kHeaderBytes + 64));
  t.c->inject(t.switches[0], kGroup, forged);
  t.c->inject(t.switches[0], kGroup, unsealed);
  ASSERT_FALSE(t.c->run_until([] { return false; }, t.c->now() + 50 * kMillisecond));
  for (std::uint16_t m = 0; m < n; ++m)
    EXPECT_EQ(t.c->worker(m).report().unauthenticated - before[m], captured.size() + 2)
        << "member " << m << " took a replayed or forged group datagram";
  // The outputs are untouched.
  std::vector<std::int32_t> want(r.in[0].size(), 0);
  for (const auto& v : r.in)
    for (std::size_t i = 0; i < v.size(); ++i) want[i] += v[i];
  for (std::uint16_t m = 0; m < n; ++m) EXPECT_EQ(r.out[m], want) << "member " << m;
}

}  // namespace
}  // namespace inc::sw::testing
