// Authentication of keyed jobs (docs/PROTOCOL.md "Authentication"), and the attacks it stops,
// played on the seeded simulated network: an attacker on the same network forges, replays,
// spoofs and mixes jobs; the switch and the workers refuse 100% of it, count it, never answer
// it, and the victim job's results stay exact.
#include <gtest/gtest.h>

#include <random>

#include "src/proto/auth.hpp"
#include "tests/switch/sim_util.hpp"

namespace inc::sw::testing {
namespace {

using proto::Reason;
namespace auth = proto::auth;

constexpr std::uint32_t kJob = 7;

SimFaults faults(double loss) { return faults_for(loss); }

auth::Instance instance_for(std::uint64_t n) {
  auth::Instance i{};
  for (int b = 0; b < 8; ++b) i[std::size_t(b)] = std::uint8_t(n >> (8 * b));
  i[15] = 0xA5;
  return i;
}

WorkerConfig keyed_worker(std::uint16_t m, Endpoint sw, const std::optional<auth::Key>& key,
                          std::uint32_t job = kJob) {
  WorkerConfig w = worker_cfg(job, m, sw);
  w.key = key;
  static std::uint64_t next = 1000;  // distinct per worker, as random ones are
  w.instance = instance_for(next++);
  w.seq_base = 5'000'000;
  return w;
}

// One switch (node 0) with keyed job kJob; n workers (nodes 1..n) holding `worker_key`.
Topo keyed_flat(std::uint64_t seed, const SimFaults& f, std::uint16_t n, const auth::Key& key,
                const std::optional<auth::Key>& worker_key) {
  Topo t;
  t.c = std::make_unique<SimCluster>(seed, f);
  SwitchConfig sc;
  sc.slots = 64;
  sc.slot_elems = 16;
  sc.incarnation = seed * 2 + 1;
  sc.auth_instance = instance_for(seed);
  sc.auth_seq_base = 77;
  t.switches.push_back(t.c->add_switch(sc));
  EXPECT_EQ(t.c->sw(0).admit({kJob, n, 4, proto::kNoMember, key}, 0), Reason::ok);
  for (std::uint16_t m = 0; m < n; ++m) t.c->add_worker(keyed_worker(m, t.switches[0], worker_key));
  return t;
}

struct Vectors {
  std::vector<std::vector<std::int32_t>> in, out;
};

// Starts an i32 allreduce of `count` elements with distinct inputs on every worker.
Vectors start_allreduce(Topo& t, std::uint16_t n, std::uint64_t count) {
  Vectors r;
  r.in.assign(n, std::vector<std::int32_t>(count));
  r.out.assign(n, std::vector<std::int32_t>(count, -1));
  for (std::uint16_t m = 0; m < n; ++m)
    for (std::uint64_t i = 0; i < count; ++i) r.in[m][i] = std::int32_t(1000 * m + i);
  for (std::uint16_t m = 0; m < n; ++m)
    t.c->start(m, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(r.in[m]),
                                      wbytes(r.out[m]), count, n));
  return r;
}

void expect_exact(Topo& t, const Vectors& r) {
  const std::size_t n = r.in.size();
  std::vector<std::int32_t> want(r.in[0].size(), 0);
  for (const auto& v : r.in)
    for (std::size_t i = 0; i < v.size(); ++i) want[i] += v[i];
  for (std::size_t m = 0; m < n; ++m) {
    ASSERT_TRUE(t.c->worker(m).done()) << "worker " << m << ": " << t.c->worker(m).error().message;
    ASSERT_EQ(r.out[m], want) << "worker " << m;
  }
}

std::uint64_t drops(SwitchDataPlane& sw, Reason r) {
  return sw.counters().drops_by_reason[std::size_t(r)];
}

// A datagram as an attacker builds it: header (+ payload), optionally sealed under `key`.
std::vector<std::byte> forge(const proto::Header& h, std::size_t payload_bytes,
                             const std::optional<auth::Key>& key, std::uint64_t seq = 1) {
  std::vector<std::byte> b(proto::kHeaderBytes + payload_bytes + proto::kAuthTrailerBytes);
  proto::encode_header(h, b.data());
  for (std::size_t i = 0; i < payload_bytes; ++i) b[proto::kHeaderBytes + i] = std::byte(0x11);
  std::size_t size = proto::kHeaderBytes + payload_bytes;
  if (key) size = auth::Sealer(*key, auth::random_instance(), seq).seal(b.data(), size);
  b.resize(size);
  return b;
}

TEST(Auth, KeyedJobsStayExactUnderLossDuplicationAndReordering) {
  const auth::Key key = auth::random_key();
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    auto t = keyed_flat(seed, faults(0.05), 5, key, key);
    Vectors r = start_allreduce(t, 5, 700);
    ASSERT_TRUE(t.c->run(100 * kSecond));
    expect_exact(t, r);
    if (HasFatalFailure()) return;
    EXPECT_EQ(drops(t.c->sw(0), Reason::unauthenticated), 0u) << "seed " << seed;
    // Duplicated datagrams are refused by the replay window (exactly-once needs no help).
    EXPECT_GT(drops(t.c->sw(0), Reason::replayed) + t.c->worker(0).report().unauthenticated, 0u)
        << "seed " << seed;
  }
}

TEST(Auth, KeyedTreesAndLanesStayExact) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    const auth::Key key = auth::random_key();
    // Two leaves under a spine, 2 lanes each: every switch seals and checks every hop.
    Topo t;
    t.c = std::make_unique<SimCluster>(seed, faults(0.03));
    SwitchConfig spine;
    spine.slots = 64;
    spine.slot_elems = 16;
    spine.incarnation = seed * 2 + 1;
    spine.auth_instance = instance_for(seed * 10);
    std::vector<Endpoint> leaf0;
    for (std::size_t i : t.c->add_switch_lanes(spine, 2))
      EXPECT_EQ(t.c->sw(i).admit({kJob, 2, 3, proto::kNoMember, key}, 0), Reason::ok);
    const Endpoint spine0 = t.c->switch_endpoint(0);
    const std::uint16_t per_leaf[2] = {2, 3};
    for (std::uint16_t l = 0; l < 2; ++l) {
      SwitchConfig leaf = spine;
      leaf.incarnation = seed * 2 + 3 + l;
      leaf.parent = spine0;
      leaf.auth_instance = instance_for(seed * 10 + 1 + l);
      auto idx = t.c->add_switch_lanes(leaf, 2);
      leaf0.push_back(t.c->switch_endpoint(idx[0]));
      for (std::size_t i : idx)
        EXPECT_EQ(t.c->sw(i).admit({kJob, per_leaf[l], 3, l, key}, 0), Reason::ok);
    }
    for (std::uint16_t l = 0; l < 2; ++l)
      for (std::uint16_t m = 0; m < per_leaf[l]; ++m)
        t.c->add_worker(keyed_worker(m, leaf0[l], key));
    Vectors r = start_allreduce(t, 5, 900);
    ASSERT_TRUE(t.c->run(100 * kSecond));
    expect_exact(t, r);
    if (HasFatalFailure()) return;
    for (std::size_t s = 0; s < 6; ++s)
      EXPECT_EQ(drops(t.c->sw(s), Reason::unauthenticated), 0u) << "switch " << s << " seed " << seed;
    EXPECT_GT(t.c->sw(0).counters().aggregations, 0u);
  }
}

// The forged-join attack of issue 8: before, one join with a random session reset the job
// (all ranks died with "the switch's epoch for the job changed"). Also forged contributions
// that carry the right epoch, from the attacker's address and spoofing a member's.
TEST(Auth, ForgedJoinsAndContributionsAreDroppedUnansweredAndTheSumsStayExact) {
  const auth::Key key = auth::random_key();
  auto t = keyed_flat(3, faults(0), 4, key, key);
  const Endpoint attacker = Endpoint::node(1000);
  auto [up, down] = t.c->shape(attacker, {}, {});
  (void)up;
  Vectors r = start_allreduce(t, 4, 3000);
  t.c->run_until([&] { return t.c->worker(0).report().chunks > 20; }, 10 * kSecond);
  const std::uint32_t epoch = t.c->sw(0).job_epoch(kJob);
  ASSERT_NE(epoch, 0u);
  std::mt19937_64 rng(5);
  const auth::Key wrong = auth::random_key();
  std::uint64_t forged = 0;
  for (int i = 0; i < 300; ++i) {
    proto::Header j;
    j.type = proto::PacketType::join;
    j.job = kJob;
    j.member = std::uint16_t(rng() % 4);
    j.aux = std::uint32_t(rng());  // any session, newer or older
    j.chunk = std::uint32_t(rng());
    t.c->inject(attacker, t.switches[0], forge(j, 0, std::nullopt));
    t.c->inject(attacker, t.switches[0], forge(j, 0, wrong));
    proto::Header d;
    d.type = proto::PacketType::data;
    d.flags = proto::flag::want_result;
    d.job = kJob;
    d.epoch = epoch;  // the epoch is known (a stale_epoch nack used to tell anyone)
    d.member = std::uint16_t(rng() % 4);
    d.chunk = std::uint32_t(rng() % 200);
    d.slot = std::uint16_t(d.chunk % 4);
    d.elem = proto::ElemType::i32;
    d.op = proto::WireOp::sum;
    d.count = 16;
    t.c->inject(attacker, t.switches[0], forge(d, 64, std::nullopt));
    t.c->inject(attacker, t.switches[0], forge(d, 64, wrong));
    // Spoofed: the member's own address as source.
    t.c->inject(Endpoint::node(1 + d.member), t.switches[0], forge(d, 64, wrong));
    forged += 5;
  }
  ASSERT_TRUE(t.c->run(100 * kSecond));
  expect_exact(t, r);
  EXPECT_EQ(t.c->sw(0).job_epoch(kJob), epoch) << "a forged join reset the job";
  EXPECT_EQ(t.c->sw(0).counters().job_resets, 0u);
  EXPECT_EQ(drops(t.c->sw(0), Reason::unauthenticated), forged);
  EXPECT_EQ(t.c->net().link_stats(down).packets, 0u) << "the switch answered the attacker";
}

// A join captured on the wire and replayed from another socket used to take over the member
// (its results went to the attacker). Data replayed later is refused too.
TEST(Auth, ReplayedJoinsAndDataAreRefused) {
  const auth::Key key = auth::random_key();
  auto t = keyed_flat(4, faults(0), 3, key, key);
  std::vector<std::vector<std::byte>> joins, data;
  const Endpoint w0 = Endpoint::node(1);
  t.c->net().tap = [&](Endpoint from, Endpoint, std::span<const std::byte> b) {
    proto::PacketView v;
    if (from != w0 || proto::decode(b, v) != Reason::ok) return;
    if (v.h.type == proto::PacketType::join) joins.emplace_back(b.begin(), b.end());
    if (v.h.type == proto::PacketType::data && data.size() < 30) data.emplace_back(b.begin(), b.end());
  };
  const Endpoint attacker = Endpoint::node(1000);
  auto [up, down] = t.c->shape(attacker, {}, {});
  (void)up;
  Vectors r = start_allreduce(t, 3, 4000);
  t.c->run_until([&] { return t.c->worker(0).report().chunks > 80; }, 10 * kSecond);
  ASSERT_FALSE(joins.empty());
  ASSERT_EQ(data.size(), 30u);
  for (const auto& j : joins) t.c->inject(attacker, t.switches[0], j);
  for (const auto& d : data) t.c->inject(attacker, t.switches[0], d);
  for (const auto& d : data) t.c->inject(w0, t.switches[0], d);  // from the member's address too
  ASSERT_TRUE(t.c->run(100 * kSecond));
  expect_exact(t, r);
  EXPECT_EQ(drops(t.c->sw(0), Reason::replayed), joins.size() + 2 * data.size());
  EXPECT_EQ(t.c->net().link_stats(down).packets, 0u) << "the replayed join took over the member";
}

// Two keyed jobs on one switch: a member of one, holding its own job's key, cannot touch the
// other (a packet sealed for job A and relabelled as job B fails B's check).
TEST(Auth, CrossJobPacketsAreRefused) {
  const auth::Key ka = auth::random_key(), kb = auth::random_key();
  SimCluster c(9, faults(0));
  SwitchConfig sc;
  sc.slots = 64;
  sc.slot_elems = 16;
  sc.auth_instance = instance_for(9);
  const Endpoint sw = c.add_switch(sc);
  ASSERT_EQ(c.sw(0).admit({1, 2, 4, proto::kNoMember, ka}, 0), Reason::ok);
  ASSERT_EQ(c.sw(0).admit({2, 2, 4, proto::kNoMember, kb}, 0), Reason::ok);
  std::vector<std::vector<std::byte>> from_a;
  c.net().tap = [&](Endpoint from, Endpoint, std::span<const std::byte> b) {
    proto::PacketView v;
    if (from == Endpoint::node(1) && proto::decode(b, v) == Reason::ok &&
        v.h.type == proto::PacketType::data && from_a.size() < 20)
      from_a.emplace_back(b.begin(), b.end());
  };
  for (std::uint16_t m = 0; m < 2; ++m) c.add_worker(keyed_worker(m, sw, ka, 1));
  for (std::uint16_t m = 0; m < 2; ++m) c.add_worker(keyed_worker(m, sw, kb, 2));
  std::vector<std::vector<std::int32_t>> in(4, std::vector<std::int32_t>(2000)), out(4, std::vector<std::int32_t>(2000));
  for (std::size_t w = 0; w < 4; ++w)
    for (std::size_t i = 0; i < 2000; ++i) in[w][i] = std::int32_t(w * 7 + i);
  for (std::size_t w = 0; w < 4; ++w)
    c.start(w, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in[w]), wbytes(out[w]), 2000, 2));
  c.run_until([&] { return c.worker(0).report().chunks > 60; }, 10 * kSecond);
  ASSERT_EQ(from_a.size(), 20u);
  for (auto b : from_a) {
    proto::store_u32(b.data() + 12, 2);  // job A's packet relabelled as job B
    c.inject(Endpoint::node(1), sw, b);
  }
  ASSERT_TRUE(c.run(100 * kSecond));
  for (std::size_t w = 0; w < 4; ++w) {
    ASSERT_TRUE(c.worker(w).done()) << c.worker(w).error().message;
    for (std::size_t i = 0; i < 2000; ++i)
      ASSERT_EQ(out[w][i], w < 2 ? in[0][i] + in[1][i] : in[2][i] + in[3][i]) << w << " " << i;
  }
  EXPECT_EQ(drops(c.sw(0), Reason::unauthenticated), 20u);
}

// Refusals and results forged in the switch's name (spoofed source): a worker of a keyed job
// ignores them all; before, one `job_failed` or `stale_epoch` nack ended the job.
TEST(Auth, ForgedRefusalsAndResultsDoNotReachTheWorkers) {
  const auth::Key key = auth::random_key();
  auto t = keyed_flat(5, faults(0), 3, key, key);
  Vectors r = start_allreduce(t, 3, 3000);
  t.c->run_until([&] { return t.c->worker(0).report().chunks > 20; }, 10 * kSecond);
  const std::uint32_t epoch = t.c->sw(0).job_epoch(kJob);
  const auth::Key wrong = auth::random_key();
  std::uint64_t sent = 0;
  for (std::uint32_t chunk = 0; chunk < 100; ++chunk) {
    for (std::uint16_t m = 0; m < 3; ++m) {
      proto::Header n;
      n.type = proto::PacketType::nack;
      n.job = kJob;
      n.epoch = epoch;
      n.member = m;
      n.chunk = chunk;
      n.reason = chunk % 2 ? Reason::job_failed : Reason::stale_epoch;
      n.aux = std::uint32_t(proto::PacketType::data);
      proto::Header res;
      res.type = proto::PacketType::result;
      res.job = kJob;
      res.epoch = epoch;
      res.member = proto::kNoMember;
      res.chunk = chunk + 40;
      res.slot = std::uint16_t(res.chunk % 4);
      res.elem = proto::ElemType::i32;
      res.op = proto::WireOp::sum;
      res.count = 16;
      res.aux = proto::events_aux(12345);  // a forged overflow count (docs/NUMERICS.md)
      for (const auto& k : {std::optional<auth::Key>{}, std::optional<auth::Key>{wrong}}) {
        t.c->inject(t.switches[0], Endpoint::node(1 + m), forge(n, 0, k));
        t.c->inject(t.switches[0], Endpoint::node(1 + m), forge(res, 64, k));
        sent += 2;
      }
    }
  }
  ASSERT_TRUE(t.c->run(100 * kSecond));
  expect_exact(t, r);
  std::uint64_t ignored = 0;
  for (std::size_t m = 0; m < 3; ++m) ignored += t.c->worker(m).report().unauthenticated;
  EXPECT_EQ(ignored, sent);
  for (std::size_t m = 0; m < 3; ++m) EXPECT_EQ(t.c->worker(m).report().events, 0u);  // none forged in
}

// A rank without the key cannot join a keyed job, and is told why; nor can a rank with a key
// join a job that the switch holds without one.
TEST(Auth, KeyMismatchesFailTheJoinWithAReason) {
  const auth::Key key = auth::random_key();
  {
    auto t = keyed_flat(6, faults(0), 2, key, std::nullopt);
    Vectors r = start_allreduce(t, 2, 100);
    t.c->run(100 * kSecond);
    EXPECT_TRUE(t.c->worker(0).failed());
    EXPECT_NE(t.c->worker(0).error().message.find("INC_KEY_FILE"), std::string::npos)
        << t.c->worker(0).error().message;
    EXPECT_GT(drops(t.c->sw(0), Reason::unauthenticated), 0u);
    EXPECT_EQ(t.c->sw(0).joined_members(kJob), 0);
  }
  {
    auto t = keyed_flat(7, faults(0), 2, key, auth::random_key());  // another key
    Vectors r = start_allreduce(t, 2, 100);
    t.c->run(100 * kSecond);
    EXPECT_TRUE(t.c->worker(0).failed());
    EXPECT_NE(t.c->worker(0).error().message.find("no authenticated answer"), std::string::npos)
        << t.c->worker(0).error().message;
    EXPECT_EQ(t.c->sw(0).joined_members(kJob), 0);
  }
}

}  // namespace
}  // namespace inc::sw::testing
