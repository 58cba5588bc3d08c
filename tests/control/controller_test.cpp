// The controller's sans-IO core (src/control/controller.*): trees, policies, leases and the
// rebuild after a restart, with seeded random sequences (the seed is printed on failure).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "src/control/controller.hpp"
#include "tests/control/controller_util.hpp"

namespace inc::control {
namespace {


TEST(Controller, FairShareShrinksForNewcomersAndGrowsBack) {
  Controller c = make(kOne, Policy::fair_share);
  std::vector<Grant> g;
  for (int i = 0; i < 4; ++i) g.push_back(c.request_tree(req(hosts(4)), 0));
  // 64 slots: 32 (wanted; share 64), 32 (share 64/2), then share 64/3 but nothing free.
  EXPECT_EQ(g[0].slots, 32u);
  EXPECT_EQ(g[1].slots, 32u);  // share 64/2 = 32, 32 free
  EXPECT_FALSE(g[2].ok);       // share 21 but nothing free
  EXPECT_EQ(g[2].refusal, Refusal::no_slots);
  EXPECT_NE(g[2].why.find("0 of 64 slots free"), std::string::npos) << g[2].why;
  ASSERT_TRUE(c.release(g[0].job, g[0].lease));
  auto h = c.request_tree(req(hosts(4)), 0);  // 2 jobs: share 64/2 = 32, 32 free
  EXPECT_EQ(h.slots, 32u);
  check_invariants(c);
}

TEST(Controller, FairShareGivesEachNewJobAtMostItsShare) {
  Controller c = make(kOne, Policy::fair_share);
  auto a = c.request_tree(req(hosts(4), 16), 0);
  auto b = c.request_tree(req(hosts(4), 64), 0);  // share 64/2 = 32
  auto d = c.request_tree(req(hosts(4), 64), 0);  // share 64/3 = 21, 16 free
  EXPECT_EQ(a.slots, 16u);
  EXPECT_EQ(b.slots, 32u);
  EXPECT_EQ(d.slots, 16u);
  EXPECT_NE(d.why.find("of 64 wanted"), std::string::npos) << d.why;
  check_invariants(c);
}

TEST(Controller, FairShareWithHeadroomLeavesRoomForTheJobsToCome) {
  ControllerConfig cfg;
  cfg.fabric = fabric(kOne);
  cfg.fair_jobs = 4;
  cfg.rebalance = false;  // (headroom at admission: the fifth job is refused, not made to wait)
  Controller c(cfg);
  ASSERT_EQ(c.switch_state(state_of(cfg.fabric, "s0"), 0), "");
  for (int i = 0; i < 4; ++i) {
    auto g = c.request_tree(req(hosts(2), 64), 0);
    ASSERT_TRUE(g.ok) << g.why;
    EXPECT_EQ(g.slots, 16u);
  }
  auto fifth = c.request_tree(req(hosts(2), 64), 0);  // share 64/5 = 12, nothing free
  EXPECT_FALSE(fifth.ok);
  check_invariants(c);
}

TEST(Controller, StaticPartitionRefusesBeyondItsParts) {
  Controller c = make(kOne, Policy::static_partition);
  std::vector<Grant> g;
  for (int i = 0; i < 4; ++i) {
    g.push_back(c.request_tree(req(hosts(2), 64), 0));
    ASSERT_TRUE(g.back().ok) << g.back().why;
    EXPECT_EQ(g.back().slots, 16u);
  }
  auto fifth = c.request_tree(req(hosts(2), 64), 0);
  EXPECT_FALSE(fifth.ok);
  EXPECT_EQ(fifth.refusal, Refusal::policy_limit);
  ASSERT_TRUE(c.release(g[1].job, g[1].lease));
  EXPECT_TRUE(c.request_tree(req(hosts(2), 64), 0).ok);
  check_invariants(c);
}

TEST(Controller, FirstComeHonoursItsLimits) {
  ControllerConfig cfg;
  cfg.fabric = fabric(kOne);
  cfg.policy = Policy::first_come;
  cfg.max_jobs = 2;
  cfg.max_job_slots = 24;
  Controller c(cfg);
  ASSERT_EQ(c.switch_state(state_of(cfg.fabric, "s0"), 0), "");
  auto a = c.request_tree(req(hosts(2), 64), 0);
  auto b = c.request_tree(req(hosts(2), 64), 0);
  auto d = c.request_tree(req(hosts(2), 1), 0);
  EXPECT_EQ(a.slots, 24u);
  EXPECT_EQ(b.slots, 24u);
  EXPECT_FALSE(d.ok);
  EXPECT_EQ(d.refusal, Refusal::policy_limit);
  EXPECT_EQ(c.counters().refused[std::size_t(Refusal::policy_limit)], 1u);
}

TEST(Controller, TreeSpansTheMembersWithTheRootAtTheirCommonAncestor) {
  std::string text = kTwoLevel;
  for (int i = 0; i < 4; ++i) add_host(text, "h", i, "leaf0");
  for (int i = 4; i < 8; ++i) add_host(text, "h", i, "leaf1");
  Controller c = make(text, Policy::fair_share);
  auto both = c.request_tree(req(hosts(8)), 0);
  ASSERT_TRUE(both.ok) << both.why;
  EXPECT_EQ(both.root, "spine");
  EXPECT_EQ(both.tree.size(), 3u);
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(both.ranks[std::size_t(r)].sw, r < 4 ? "leaf0" : "leaf1");
    EXPECT_EQ(both.ranks[std::size_t(r)].member, r % 4);
  }
  for (const auto& [sw, spec] : both.tree) {
    if (sw == "spine") EXPECT_EQ(spec.members, 2u);
    else EXPECT_EQ(spec.members, 4u);
    EXPECT_EQ(spec.parent_member == proto::kNoMember, sw == "spine");
  }
  // Ranks on one leaf: that leaf alone (no hop to the spine, no spine slots used).
  auto one = c.request_tree(req(hosts(3, "h", 4)), 0);
  ASSERT_TRUE(one.ok);
  EXPECT_EQ(one.root, "leaf1");
  EXPECT_EQ(one.tree.size(), 1u);
  EXPECT_EQ(c.switches().at("spine").reserved.count(one.job), 0u);
  // Admissions for every switch of both trees.
  EXPECT_EQ(c.actions().size(), 4u);
  check_invariants(c);
}

TEST(Controller, MoreThan64MembersUseMoreThanOneSwitch) {
  std::string text = kTwoLevel;
  for (int i = 0; i < 60; ++i) add_host(text, "a", i, "leaf0");
  for (int i = 0; i < 60; ++i) add_host(text, "b", i, "leaf1");
  Controller c = make(text, Policy::fair_share);
  auto h = hosts(60, "a");
  auto hb = hosts(60, "b");
  h.insert(h.end(), hb.begin(), hb.end());
  auto g = c.request_tree(req(h), 0);
  ASSERT_TRUE(g.ok) << g.why;
  EXPECT_EQ(g.ranks.size(), 120u);
  EXPECT_EQ(g.root, "spine");
  // 70 ranks on a leaf of 64 ports (ports=64) cannot be aggregated there: refused with the reason.
  std::string crowded = "switch spine 127.0.0.1:7100 slots=64\n"
                        "switch leaf0 127.0.0.1:7101 parent=spine slots=64 ports=64\n";
  for (int i = 0; i < 70; ++i) add_host(crowded, "a", i, "leaf0");
  Controller c2 = make(crowded, Policy::fair_share);
  auto r = c2.request_tree(req(hosts(70, "a")), 0);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.refusal, Refusal::too_many_members);
  EXPECT_NE(r.why.find("at most 64, its ports=64"), std::string::npos) << r.why;
}

// A switch takes up to its ports (default: the data plane's 1024 members): 100 ranks on one
// leaf, or on a fabric of one switch, get a tree of that one switch, members 0..99.
TEST(Controller, HundredMembersGetOneSwitch) {
  std::string text = kTwoLevel;
  for (int i = 0; i < 100; ++i) add_host(text, "a", i, "leaf0");
  for (const char* fab : {"leaf", "one"}) {
    SCOPED_TRACE(fab);
    Controller c = make(fab == std::string("leaf") ? text : std::string(kOne), Policy::fair_share);
    auto g = c.request_tree(req(hosts(100, "a")), 0);
    ASSERT_TRUE(g.ok) << g.why;
    const std::string sw = fab == std::string("leaf") ? "leaf0" : "s0";
    EXPECT_EQ(g.root, sw);
    ASSERT_EQ(g.tree.size(), 1u);
    EXPECT_EQ(g.tree[0].first, sw);
    EXPECT_EQ(g.tree[0].second.members, 100);
    EXPECT_EQ(g.tree[0].second.parent_member, proto::kNoMember);
    ASSERT_EQ(g.ranks.size(), 100u);
    for (std::uint16_t r = 0; r < 100; ++r) {
      EXPECT_EQ(g.ranks[r].sw, sw);
      EXPECT_EQ(g.ranks[r].member, r);
    }
  }
  // Above the data plane's limit on one leaf: refused, naming the limit.
  std::string huge = kTwoLevel;
  for (int i = 0; i < 1025; ++i) add_host(huge, "a", i, "leaf0");
  Controller c = make(huge, Policy::fair_share);
  auto r = c.request_tree(req(hosts(1025, "a")), 0);
  EXPECT_EQ(r.refusal, Refusal::too_many_members);
  EXPECT_NE(r.why.find("at most 1024, the data plane's limit"), std::string::npos) << r.why;
}

TEST(Controller, RefusesUnknownHostsAndSilentSwitches) {
  std::string text = std::string(kTwoLevel) + "host h0 leaf=leaf0\nhost h1 leaf=leaf1\n";
  ControllerConfig cfg;
  cfg.fabric = fabric(text);
  Controller c(cfg);
  EXPECT_EQ(c.request_tree(req({"h0", "nowhere"}), 0).refusal, Refusal::unknown_host);
  EXPECT_EQ(c.request_tree(req({"h0", "h1"}), 0).refusal, Refusal::switch_down);  // none registered
  for (auto n : {"spine", "leaf0", "leaf1"}) ASSERT_EQ(c.switch_state(state_of(cfg.fabric, n), 0), "");
  EXPECT_TRUE(c.request_tree(req({"h0", "h1"}), S).ok);
  auto late = c.request_tree(req({"h0", "h1"}), cfg.switch_timeout + 2 * S);
  EXPECT_EQ(late.refusal, Refusal::switch_down);
  EXPECT_NE(late.why.find("stopped heart-beating"), std::string::npos);
  // A switch at another address than the fabric's, or with another parent, is refused.
  auto wrong = state_of(cfg.fabric, "leaf0");
  wrong.port = 9999;
  EXPECT_NE(c.switch_state(wrong, 0), "");
  wrong = state_of(cfg.fabric, "leaf0");
  wrong.parent_port = 0;
  EXPECT_NE(c.switch_state(wrong, 0), "");
  wrong.name = "intruder";
  EXPECT_NE(c.switch_state(wrong, 0), "");
}

TEST(Controller, LeaseEndsWithoutHeartbeatsAndTheSlotsComeBack) {
  Controller c = make(kOne, Policy::first_come);
  auto g = c.request_tree(req(hosts(2), 64), 0);
  ASSERT_TRUE(g.ok);
  c.actions().clear();
  EXPECT_FALSE(c.request_tree(req(hosts(2), 64), 0).ok);
  const Nanos lease = c.config().lease;
  ASSERT_TRUE(c.renew({g.job, g.lease, {}}, lease - S));
  c.tick(lease + S);  // renewed: still there
  EXPECT_EQ(c.jobs().count(g.job), 1u);
  EXPECT_FALSE(c.renew({g.job, g.lease + 2, {}}, lease));  // a wrong lease id renews nothing
  c.tick(2 * lease);
  EXPECT_EQ(c.jobs().count(g.job), 0u);
  EXPECT_EQ(c.counters().expired, 1u);
  ASSERT_EQ(c.actions().size(), 1u);
  EXPECT_EQ(c.actions()[0].kind, SwitchAction::Kind::release);
  EXPECT_EQ(c.actions()[0].spec.job, g.job);
  c.actions().clear();
  // A heartbeat sent before the switch applied the release still lists the job: not adopted
  // again (the slots stay free), the release goes out again.
  auto st = state_of(c.config().fabric, "s0");
  st.jobs.push_back(g.tree[0].second);
  ASSERT_EQ(c.switch_state(st, 2 * lease), "");
  EXPECT_EQ(c.jobs().count(g.job), 0u);
  EXPECT_EQ(c.free_slots(c.switches().at("s0")), 64u);
  ASSERT_EQ(c.actions().size(), 1u);
  EXPECT_EQ(c.actions()[0].kind, SwitchAction::Kind::release);
  c.switch_state(state_of(c.config().fabric, "s0"), 2 * lease);
  EXPECT_TRUE(c.request_tree(req(hosts(2), 64), 2 * lease).ok);
}

TEST(Controller, RebuildsItsStateFromSwitchesAndJobsAfterARestart) {
  std::string text = std::string(kTwoLevel) + "host h0 leaf=leaf0\nhost h1 leaf=leaf1\n";
  Controller before = make(text, Policy::fair_share);
  auto g = before.request_tree(req({"h0", "h1"}, 16), 0);
  ASSERT_TRUE(g.ok);
  auto other = before.request_tree(req({"h0", "h1"}, 16), 0);  // a job that dies with the controller
  ASSERT_TRUE(other.ok);
  // The new controller hears the switches first: it adopts what they hold.
  ControllerConfig cfg = before.config();
  cfg.seed = 2;
  Controller after(cfg);
  for (const auto& [name, rec] : before.switches()) {
    auto st = state_of(cfg.fabric, name);
    for (const auto& [job, slots] : rec.reserved)
      for (const auto& [sw, spec] : before.jobs().at(job).tree)
        if (sw == name) st.jobs.push_back(spec);
    ASSERT_EQ(after.switch_state(st, 10 * S), "");
  }
  EXPECT_EQ(after.counters().adopted, 2u);
  EXPECT_EQ(after.free_slots(after.switches().at("spine")), 64u - 32u);
  // The job re-claims its tree with its lease; the other never comes back.
  ASSERT_TRUE(after.renew({g.job, g.lease, g.tree}, 11 * S));
  EXPECT_FALSE(after.jobs().at(g.job).adopted);
  EXPECT_TRUE(after.renew({g.job, g.lease, {}}, 12 * S));
  after.tick(10 * S + cfg.lease + S);
  EXPECT_EQ(after.jobs().count(g.job), 1u);
  EXPECT_EQ(after.jobs().count(other.job), 0u);
  EXPECT_EQ(after.free_slots(after.switches().at("spine")), 64u - 16u);
  // New jobs never reuse an id a switch holds.
  auto n = after.request_tree(req({"h0", "h1"}, 8), 12 * S);
  ASSERT_TRUE(n.ok);
  EXPECT_NE(n.job, g.job);
  check_invariants(after);
}

TEST(Controller, SeededRandomSequencesKeepReservationsWithinThePools) {
  std::string text = kTwoLevel;
  for (int i = 0; i < 8; ++i) add_host(text, "h", i, i < 4 ? "leaf0" : "leaf1");
  const std::uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (Policy p : {Policy::fair_share, Policy::static_partition, Policy::first_come}) {
    Controller c = make(text, p, 0, seed);
    std::vector<Grant> live;
    Nanos now = 0;
    for (int step = 0; step < 2000; ++step) {
      now += Nanos(rng() % (2 * S));
      for (const auto& s : c.config().fabric.switches)
        if (rng() % 4) c.switch_state(state_of(c.config().fabric, s.name), now);
      const int what = int(rng() % 4);
      if (what == 0) {
        std::vector<std::string> h;
        const int n = 1 + int(rng() % 8);
        for (int i = 0; i < n; ++i) h.push_back(std::string("h").append(std::to_string(rng() % 8)));
        auto g = c.request_tree(req(h, std::uint32_t(1 + rng() % 64)), now);
        if (g.ok) {
          ASSERT_EQ(g.ranks.size(), h.size());
          live.push_back(g);
        } else {
          ASSERT_FALSE(g.why.empty());
        }
      } else if (what == 1 && !live.empty()) {
        auto i = rng() % live.size();
        c.release(live[i].job, live[i].lease);
        live.erase(live.begin() + std::ptrdiff_t(i));
      } else if (what == 2 && !live.empty()) {
        c.renew({live[rng() % live.size()].job, live[rng() % live.size()].lease, {}}, now);
      } else {
        c.tick(now);
      }
      c.actions().clear();
      check_invariants(c);
      if (HasFatalFailure()) return;
    }
  }
}

}  // namespace
}  // namespace inc::control

namespace inc::control {
namespace {

// The shipped example fabrics load, and a job over every host of each gets a tree.
TEST(Controller, ShippedExampleFabricsGiveTrees) {
  for (const char* f : {"one-switch.topo", "fat-tree-2level.topo"}) {
    std::string err;
    auto t = sw::load_topology(std::string(INC_EXAMPLES) + "/controller/" + f, err);
    ASSERT_TRUE(t) << err;
    ControllerConfig cfg;
    cfg.fabric = *t;
    Controller c(cfg);
    for (const auto& s : t->switches) ASSERT_EQ(c.switch_state(state_of(*t, s.name), 0), "");
    ctl::TreeRequest r;
    for (const auto& h : t->hosts) r.hosts.push_back(h.name);
    if (r.hosts.empty()) r.hosts = {"a", "b"};
    auto g = c.request_tree(r, 0);
    ASSERT_TRUE(g.ok) << f << ": " << g.why;
    EXPECT_EQ(g.ranks.size(), r.hosts.size());
  }
}

}  // namespace
}  // namespace inc::control
