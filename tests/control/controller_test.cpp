// The controller's sans-IO core (src/control/controller.*): trees, policies, leases and the
// rebuild after a restart, with seeded random sequences (the seed is printed on failure).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "src/control/controller.hpp"

namespace inc::control {
namespace {

namespace ctl = proto::ctl;
constexpr Nanos S = sw::kSecond;

sw::Topology fabric(const std::string& text) {
  std::string err;
  auto t = sw::parse_topology(text, err);
  EXPECT_TRUE(t) << err;
  return *t;
}

const char* kOne = "switch s0 127.0.0.1:7100 slots=64\n";
const char* kTwoLevel =
    "switch spine 127.0.0.1:7100 slots=64\n"
    "switch leaf0 127.0.0.1:7101 parent=spine slots=64 rate=100\n"
    "switch leaf1 127.0.0.1:7102 parent=spine slots=64 rate=100\n";

ctl::SwitchState state_of(const sw::Topology& t, const std::string& name, std::uint64_t inc = 1) {
  const sw::TopoSwitch* s = t.find(name);
  ctl::SwitchState st;
  st.name = name;
  st.ip = s->addr.ipv4_addr();
  st.port = s->addr.port();
  st.lanes = s->lanes;
  st.slots_per_lane = s->slots / s->lanes;
  st.slot_elems = s->slot_elems;
  st.incarnation = inc;
  if (!s->parent.empty()) {
    st.parent_ip = t.find(s->parent)->addr.ipv4_addr();
    st.parent_port = t.find(s->parent)->addr.port();
  }
  return st;
}

// (Shares at admission only: live re-balancing has its own tests, rebalance_test.cpp.)
Controller make(const std::string& text, Policy p, Nanos now = 0, std::uint64_t seed = 1) {
  ControllerConfig c;
  c.fabric = fabric(text);
  c.policy = p;
  c.seed = seed;
  c.rebalance = false;
  Controller ctl(c);
  for (const auto& s : c.fabric.switches) EXPECT_EQ(ctl.switch_state(state_of(c.fabric, s.name), now), "");
  return ctl;
}

ctl::TreeRequest req(std::vector<std::string> hosts, std::uint32_t slots = 32) {
  ctl::TreeRequest r;
  r.hosts = std::move(hosts);
  r.slots_wanted = slots;
  return r;
}

// (append, not operator+: GCC 12's -Wrestrict misfires on chains of string additions)
void add_host(std::string& text, const std::string& prefix, int i, const char* leaf) {
  text.append("host ").append(prefix).append(std::to_string(i)).append(" leaf=").append(leaf).append("\n");
}

std::vector<std::string> hosts(int n, const std::string& prefix = "h", int from = 0) {
  std::vector<std::string> v;
  for (int i = 0; i < n; ++i) v.push_back(std::string(prefix).append(std::to_string(from + i)));
  return v;
}

// Every switch's reservations fit its pool and match the jobs' trees.
void check_invariants(const Controller& c) {
  for (const auto& [n, s] : c.switches()) {
    std::uint64_t used = 0;
    for (const auto& [job, slots] : s.reserved) {
      used += slots;
      ASSERT_TRUE(c.jobs().count(job)) << "switch " << n << " reserves for unknown job " << job;
    }
    ASSERT_LE(used, c.pool(s)) << "switch " << n;
  }
  for (const auto& [id, j] : c.jobs())
    for (const auto& [sw, spec] : j.tree) ASSERT_TRUE(c.switches().at(sw).reserved.count(id)) << sw;
}

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

// ---- live re-balancing (fair policy; docs/CONTROLLER.md "Re-balancing") --------------------

// A switch as the controller sees it through its messages: it holds jobs, applies resizes when
// the test says (a shrink always; a grow only if the slots are free then), refuses an admission
// that does not fit (what the data plane does), and reports its state.
struct SimSwitch {
  std::string name;
  std::uint32_t pool = 64;
  std::map<std::uint32_t, ctl::SwitchJob> held;
  std::map<std::uint32_t, std::uint32_t> pending;  // job -> resize target
  std::uint32_t used() const {
    std::uint32_t u = 0;
    for (const auto& [id, j] : held) u += j.slots;
    return u;
  }
  // Takes the controller's actions for this switch; false (and why) if it over-promised.
  bool take(Controller& c, std::string& why) {
    auto acts = std::move(c.actions());
    c.actions().clear();
    for (const auto& a : acts) {
      if (a.sw != name) continue;
      switch (a.kind) {
        case SwitchAction::Kind::admit:
          if (used() + a.spec.slots > pool) {
            why = "admission of job " + std::to_string(a.spec.job) + " (" + std::to_string(a.spec.slots) +
                  " slots) does not fit: " + std::to_string(used()) + " of " + std::to_string(pool) + " used";
            return false;
          }
          held[a.spec.job] = a.spec;
          break;
        case SwitchAction::Kind::release:
          held.erase(a.spec.job);
          pending.erase(a.spec.job);
          break;
        case SwitchAction::Kind::resize:
          if (held.count(a.spec.job)) pending[a.spec.job] = a.spec.slots;
          break;
      }
    }
    return true;
  }
  // Applies the pending resize of `job` (its members drained) and tells the controller.
  void finish(Controller& c, std::uint32_t job, const sw::Topology& fab, Nanos now) {
    auto p = pending.find(job);
    if (p == pending.end()) return;
    auto& j = held.at(job);
    if (p->second <= j.slots || used() - j.slots + p->second <= pool) j.slots = p->second;
    pending.erase(p);
    c.resize_done(job, name, proto::Reason::ok, now);
    report(c, fab, now);
  }
  void report(Controller& c, const sw::Topology& fab, Nanos now) {
    ctl::SwitchState st = state_of(fab, name);
    for (const auto& [id, j] : held) st.jobs.push_back(j);
    EXPECT_EQ(c.switch_state(st, now), "");
  }
};

Controller make_rebalancing(const sw::Topology& fab) {
  ControllerConfig cfg;
  cfg.fabric = fab;
  Controller c(cfg);
  for (const auto& s : fab.switches) EXPECT_EQ(c.switch_state(state_of(fab, s.name), 0), "");
  return c;
}

// A spine and two leaves as model switches; every switch takes the controller's actions.
std::vector<SimSwitch> tree_switches() { return {{"spine", 64, {}, {}}, {"leaf0", 64, {}, {}}, {"leaf1", 64, {}, {}}}; }
bool take_all(Controller& c, std::vector<SimSwitch>& sws, std::string& why) {
  auto acts = c.actions();
  for (auto& s : sws) {
    c.actions() = acts;
    if (!s.take(c, why)) return false;
  }
  c.actions().clear();
  return true;
}

TEST(Rebalance, SharesAreRecomputedAsJobsComeAndGo) {
  const auto fab = fabric(kOne);
  Controller c = make_rebalancing(fab);
  SimSwitch s0{"s0", 64, {}, {}};
  std::string why;
  auto slots_of = [&](const Grant& g) { return s0.held.count(g.job) ? s0.held.at(g.job).slots : 0u; };
  auto a = c.request_tree(req(hosts(4)), 0);  // alone: 32 (wanted) of a share of 64
  auto b = c.request_tree(req(hosts(4)), 0);  // share 32: 32, free
  ASSERT_TRUE(s0.take(c, why)) << why;
  EXPECT_EQ(slots_of(a), 32u);
  EXPECT_EQ(slots_of(b), 32u);
  EXPECT_EQ(c.counters().resizes, 0u);
  // A third job: share 21. The two running jobs are asked to shrink; it waits for their slots.
  auto d = c.request_tree(req(hosts(4)), 0);
  ASSERT_TRUE(d.ok) << d.why;
  EXPECT_EQ(d.slots, 21u);
  ASSERT_TRUE(s0.take(c, why)) << why;
  EXPECT_EQ(s0.pending, (std::map<std::uint32_t, std::uint32_t>{{a.job, 21}, {b.job, 21}}));
  EXPECT_FALSE(s0.held.count(d.job));
  EXPECT_TRUE(c.jobs().at(d.job).waiting);
  EXPECT_EQ(c.free_slots(c.switches().at("s0")), 0u);  // nothing before the shrinks are done
  s0.finish(c, a.job, fab, S);
  ASSERT_TRUE(s0.take(c, why)) << why;
  EXPECT_FALSE(s0.held.count(d.job));  // 11 free: not yet
  s0.finish(c, b.job, fab, S);
  ASSERT_TRUE(s0.take(c, why)) << why;
  EXPECT_EQ(slots_of(d), 21u);
  EXPECT_FALSE(c.jobs().at(d.job).waiting);
  // A fourth: share 16 each.
  auto e = c.request_tree(req(hosts(4)), S);
  ASSERT_TRUE(s0.take(c, why)) << why;
  for (auto j : {a.job, b.job, d.job}) s0.finish(c, j, fab, 2 * S);
  ASSERT_TRUE(s0.take(c, why)) << why;
  for (const auto& g : {a, b, d, e}) EXPECT_EQ(slots_of(g), 16u) << g.job;
  // One leaves: the other three grow back to a share of 21.
  ASSERT_TRUE(c.release(a.job, a.lease));
  ASSERT_TRUE(s0.take(c, why)) << why;
  for (auto j : {b.job, d.job, e.job}) s0.finish(c, j, fab, 3 * S);
  ASSERT_TRUE(s0.take(c, why)) << why;
  for (const auto& g : {b, d, e}) EXPECT_EQ(slots_of(g), 21u) << g.job;
  EXPECT_LE(s0.used(), s0.pool);
}

TEST(Rebalance, OffSharesAreTakenAtAdmissionOnly) {
  const auto fab = fabric(kOne);
  ControllerConfig cfg;
  cfg.fabric = fab;
  cfg.rebalance = false;
  Controller c(cfg);
  ASSERT_EQ(c.switch_state(state_of(fab, "s0"), 0), "");
  c.request_tree(req(hosts(4)), 0);
  c.request_tree(req(hosts(4)), 0);
  EXPECT_EQ(c.request_tree(req(hosts(4)), 0).refusal, Refusal::no_slots);
  for (const auto& a : c.actions()) EXPECT_NE(a.kind, SwitchAction::Kind::resize);
}

// Trees of several switches are resized on every switch of the tree, to the same size: the
// least share over the tree (docs/PROTOCOL.md "Live resize of a tree"). A newcomer next to one
// waits until the switches it needs say the job moved there.
TEST(Rebalance, TreesOfSeveralSwitchesAreResizedOnEverySwitch) {
  std::string text = kTwoLevel;
  for (int i = 0; i < 4; ++i) add_host(text, "h", i, i % 2 ? "leaf1" : "leaf0");
  const auto fab = fabric(text);
  Controller c = make_rebalancing(fab);
  std::vector<SimSwitch> sws = tree_switches();
  std::string why;
  auto take = [&] { ASSERT_TRUE(take_all(c, sws, why)) << why; };
  auto a = c.request_tree(req(hosts(4), 64), 0);  // spans both leaves and the spine
  ASSERT_TRUE(a.ok) << a.why;
  EXPECT_EQ(a.tree.size(), 3u);
  take();
  for (auto& s : sws) EXPECT_EQ(s.held.at(a.job).slots, 64u) << s.name;
  auto b = c.request_tree(req({"h0", "h2"}, 64), 0);  // leaf0 only: share 32, held by a
  ASSERT_TRUE(b.ok) << b.why;
  EXPECT_EQ(b.tree.size(), 1u);
  EXPECT_TRUE(c.jobs().at(b.job).waiting);
  take();
  for (auto& s : sws) EXPECT_EQ(s.pending, (std::map<std::uint32_t, std::uint32_t>{{a.job, 32}})) << s.name;
  sws[0].finish(c, a.job, fab, S);  // the spine moves first (the leaves follow it)
  sws[2].finish(c, a.job, fab, S);
  take();
  EXPECT_TRUE(c.jobs().at(b.job).waiting);  // leaf0 still holds 64 for a
  EXPECT_FALSE(sws[1].held.count(b.job));
  sws[1].finish(c, a.job, fab, S);
  take();
  EXPECT_FALSE(c.jobs().at(b.job).waiting);
  EXPECT_EQ(sws[1].held.at(b.job).slots, 32u);
  for (auto& s : sws) EXPECT_EQ(s.held.at(a.job).slots, 32u) << s.name;
  EXPECT_EQ(c.jobs().at(a.job).slots, 32u);
  // b leaves: a grows back to 64 on every switch.
  ASSERT_TRUE(c.release(b.job, b.lease));
  take();
  for (auto& s : sws) EXPECT_EQ(s.pending, (std::map<std::uint32_t, std::uint32_t>{{a.job, 64}})) << s.name;
  for (auto& s : sws) s.finish(c, a.job, fab, 2 * S);
  take();
  for (auto& s : sws) EXPECT_EQ(s.held.at(a.job).slots, 64u) << s.name;
  EXPECT_EQ(c.jobs().at(a.job).slots, 64u);
}

// A switch of the tree refuses the resize: the others are asked back to the size they hold
// (a leaf waiting for its parent's boundary stops waiting), and the job keeps its size.
TEST(Rebalance, ARefusalOnOneSwitchTakesTheTreeBack) {
  std::string text = kTwoLevel;
  for (int i = 0; i < 4; ++i) add_host(text, "h", i, i % 2 ? "leaf1" : "leaf0");
  const auto fab = fabric(text);
  Controller c = make_rebalancing(fab);
  auto a = c.request_tree(req(hosts(4), 64), 0);
  for (const auto& [name, spec] : a.tree) {
    ctl::SwitchState st = state_of(fab, name);
    st.jobs.push_back(spec);
    ASSERT_EQ(c.switch_state(st, 0), "");
  }
  c.actions().clear();
  auto b = c.request_tree(req({"h0", "h2"}, 64), 0);
  ASSERT_TRUE(b.ok) << b.why;
  std::map<std::string, std::uint32_t> asked;
  for (const auto& x : c.actions())
    if (x.kind == SwitchAction::Kind::resize) asked[x.sw] = x.spec.slots;
  EXPECT_EQ(asked, (std::map<std::string, std::uint32_t>{{"spine", 32}, {"leaf0", 32}, {"leaf1", 32}}));
  c.actions().clear();
  c.resize_done(a.job, "spine", proto::Reason::unsupported, S);
  asked.clear();
  for (const auto& x : c.actions())
    if (x.kind == SwitchAction::Kind::resize && x.spec.job == a.job) asked[x.sw] = x.spec.slots;
  EXPECT_EQ(asked, (std::map<std::string, std::uint32_t>{{"leaf0", 64}, {"leaf1", 64}}));
  EXPECT_TRUE(c.jobs().at(a.job).fixed_size);
  EXPECT_EQ(c.jobs().at(a.job).slots, 64u);
}

// Seeded random jobs on one leaf or across the tree, departures and resizes finishing on each
// switch in any order: no switch gets an admission that does not fit, and once quiet every
// job holds the same size on every switch of its tree: min(wanted, the least share there).
TEST(Rebalance, SeededRandomTreesNeverPromiseASlotTwice) {
  std::string text = kTwoLevel;
  for (int i = 0; i < 8; ++i) add_host(text, "h", i, i < 4 ? "leaf0" : "leaf1");
  const auto fab = fabric(text);
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    Controller c = make_rebalancing(fab);
    std::vector<SimSwitch> sws = tree_switches();
    std::vector<Grant> live;
    std::string why;
    Nanos now = 0;
    auto take = [&] { return take_all(c, sws, why); };
    for (int step = 0; step < 300; ++step) {
      now += 10 * sw::kMillisecond;
      const auto r = rng() % 10;
      SimSwitch& s = sws[rng() % sws.size()];
      if (r < 3 && live.size() < 6) {
        const int x = int(rng() % 8), y = int(rng() % 8);
        auto g = c.request_tree(req({"h" + std::to_string(x), "h" + std::to_string(x == y ? (y + 1) % 8 : y)},
                                    std::uint32_t(4 + rng() % 40)), now);
        if (g.ok) live.push_back(g);
      } else if (r < 5 && !live.empty()) {
        const std::size_t k = rng() % live.size();
        ASSERT_TRUE(c.release(live[k].job, live[k].lease));
        live.erase(live.begin() + long(k));
      } else if (r < 8 && !s.pending.empty()) {
        auto it = s.pending.begin();
        std::advance(it, long(rng() % s.pending.size()));
        s.finish(c, it->first, fab, now);
      } else {
        s.report(c, fab, now);
      }
      ASSERT_TRUE(take()) << "seed " << seed << " step " << step << ": " << why;
      for (auto& g : live) ASSERT_TRUE(c.renew({g.job, g.lease, {}}, now));
    }
    for (int round = 0; round < 8; ++round) {
      for (auto& s : sws) {
        while (!s.pending.empty()) s.finish(c, s.pending.begin()->first, fab, now);
        ASSERT_TRUE(take()) << "seed " << seed << ": " << why;
      }
    }
    std::map<std::string, std::uint32_t> jobs_on;
    for (const auto& g : live)
      for (const auto& [name, spec] : g.tree) ++jobs_on[name];
    for (const auto& g : live) {
      std::uint32_t share = 64;
      for (const auto& [name, spec] : g.tree) share = std::min(share, 64 / jobs_on[name]);
      const std::uint32_t want = std::min(c.jobs().at(g.job).wanted, share);
      for (const auto& [name, spec] : g.tree) {
        auto& s = *std::find_if(sws.begin(), sws.end(), [&](const SimSwitch& x) { return x.name == name; });
        ASSERT_TRUE(s.held.count(g.job)) << "seed " << seed << ": job " << g.job << " never admitted on " << name;
        EXPECT_EQ(s.held.at(g.job).slots, want) << "seed " << seed << " job " << g.job << " on " << name;
      }
    }
  }
}

// Seeded random arrivals, departures, resizes finishing in any order, heartbeats: the switch
// never gets an admission that does not fit (no slot promised twice), every waiting job is
// admitted once the shrinks are done, and the shares converge to the fair ones.
TEST(Rebalance, SeededRandomSequencesNeverPromiseASlotTwice) {
  const auto fab = fabric(kOne);
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    std::mt19937_64 rng(seed);
    Controller c = make_rebalancing(fab);
    SimSwitch s0{"s0", 64, {}, {}};
    std::vector<Grant> live;
    std::string why;
    Nanos now = 0;
    for (int step = 0; step < 400; ++step) {
      now += 10 * sw::kMillisecond;
      const auto r = rng() % 10;
      if (r < 3 && live.size() < 8) {
        auto g = c.request_tree(req(hosts(2), std::uint32_t(4 + rng() % 40)), now);
        if (g.ok) live.push_back(g);
      } else if (r < 5 && !live.empty()) {
        const std::size_t k = rng() % live.size();
        ASSERT_TRUE(c.release(live[k].job, live[k].lease));
        live.erase(live.begin() + long(k));
      } else if (r < 8 && !s0.pending.empty()) {
        auto it = s0.pending.begin();
        std::advance(it, long(rng() % s0.pending.size()));
        s0.finish(c, it->first, fab, now);
      } else {
        s0.report(c, fab, now);
      }
      ASSERT_TRUE(s0.take(c, why)) << "seed " << seed << " step " << step << ": " << why;
      for (auto& g : live) ASSERT_TRUE(c.renew({g.job, g.lease, {}}, now));
    }
    // Quiet: every resize finishes; then every job is admitted, at its fair share or what it wants.
    for (int round = 0; round < 4; ++round) {
      while (!s0.pending.empty()) s0.finish(c, s0.pending.begin()->first, fab, now);
      ASSERT_TRUE(s0.take(c, why)) << "seed " << seed << ": " << why;
    }
    const std::uint32_t share = live.empty() ? 0 : 64 / std::uint32_t(live.size());
    for (const auto& g : live) {
      ASSERT_TRUE(s0.held.count(g.job)) << "seed " << seed << ": job " << g.job << " never admitted";
      EXPECT_EQ(s0.held.at(g.job).slots, std::min(c.jobs().at(g.job).wanted, share)) << "seed " << seed;
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
