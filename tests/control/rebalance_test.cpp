// Live re-balancing in the controller's sans-IO core (docs/CONTROLLER.md "Re-balancing"): shares
// recomputed as jobs come and go, resizes on every switch of a tree and on every lane of a
// switch, refusals taken back, and seeded random sequences that never promise a slot twice.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "src/control/controller.hpp"
#include "tests/control/controller_util.hpp"

namespace inc::control {
namespace {

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
// After the job sharing the tree with `job` left: the controller asks every switch to grow
// `job` back to 64; once each moved, each holds 64 for it.
void expect_grown_back(Controller& c, std::vector<SimSwitch>& sws, std::uint32_t job, const sw::Topology& fab) {
  std::string why;
  ASSERT_TRUE(take_all(c, sws, why)) << why;
  for (auto& s : sws) EXPECT_EQ(s.pending, (std::map<std::uint32_t, std::uint32_t>{{job, 64}})) << s.name;
  for (auto& s : sws) s.finish(c, job, fab, 2 * S);
  ASSERT_TRUE(take_all(c, sws, why)) << why;
  for (auto& s : sws) EXPECT_EQ(s.held.at(job).slots, 64u) << s.name;
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
  expect_grown_back(c, sws, a.job, fab);
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
        auto g = c.request_tree(req({std::string("h").append(std::to_string(x)), std::string("h").append(std::to_string(x == y ? (y + 1) % 8 : y))},
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

// A switch with several lanes is re-balanced like a one-lane one (its lanes take one boundary
// and one size: docs/PROTOCOL.md "Live resize of lanes"): the shares are per lane, the Resize
// goes to the switch, a newcomer waits for the shrinks. So is a tree of switches with several
// lanes (each leaf lane follows its parent's lane: docs/PROTOCOL.md "Live resize of a tree of
// lanes").
TEST(Rebalance, JobsOnASwitchWithSeveralLanesAreResized) {
  const auto fab = fabric("switch s0 127.0.0.1:7100 slots=128 lanes=2\n");  // 64 per lane
  Controller c = make_rebalancing(fab);
  SimSwitch s0{"s0", 64, {}, {}};
  std::string why;
  auto a = c.request_tree(req(hosts(4), 64), 0);
  ASSERT_TRUE(s0.take(c, why)) << why;
  EXPECT_EQ(s0.held.at(a.job).slots, 64u);
  EXPECT_NE(c.status_json(0).find("\"resizable\":true"), std::string::npos) << c.status_json(0);
  auto b = c.request_tree(req(hosts(4), 64), 0);  // share 32: a shrinks, b waits for it
  ASSERT_TRUE(b.ok) << b.why;
  ASSERT_TRUE(s0.take(c, why)) << why;
  EXPECT_EQ(s0.pending, (std::map<std::uint32_t, std::uint32_t>{{a.job, 32}}));
  EXPECT_TRUE(c.jobs().at(b.job).waiting);
  s0.finish(c, a.job, fab, S);
  ASSERT_TRUE(s0.take(c, why)) << why;
  EXPECT_EQ(s0.held.at(a.job).slots, 32u);
  EXPECT_EQ(s0.held.at(b.job).slots, 32u);
  // b leaves: a grows back to 64.
  ASSERT_TRUE(c.release(b.job, b.lease));
  ASSERT_TRUE(s0.take(c, why)) << why;
  EXPECT_EQ(s0.pending, (std::map<std::uint32_t, std::uint32_t>{{a.job, 64}}));
  s0.finish(c, a.job, fab, 2 * S);
  ASSERT_TRUE(s0.take(c, why)) << why;
  EXPECT_EQ(s0.held.at(a.job).slots, 64u);
  EXPECT_LE(s0.used(), s0.pool);
}

TEST(Rebalance, TreesOfSwitchesWithSeveralLanesAreResized) {
  std::string text =
      "switch spine 127.0.0.1:7100 slots=128 lanes=2\n"
      "switch leaf0 127.0.0.1:7110 parent=spine slots=128 lanes=2 rate=100\n"
      "switch leaf1 127.0.0.1:7120 parent=spine slots=128 lanes=2 rate=100\n";
  for (int i = 0; i < 4; ++i) add_host(text, "h", i, i % 2 ? "leaf1" : "leaf0");
  const auto fab = fabric(text);
  Controller c = make_rebalancing(fab);
  std::vector<SimSwitch> sws = tree_switches();  // 64 per lane each
  std::string why;
  auto take = [&] { ASSERT_TRUE(take_all(c, sws, why)) << why; };
  auto a = c.request_tree(req(hosts(4), 64), 0);  // spans both leaves and the spine
  ASSERT_TRUE(a.ok) << a.why;
  ASSERT_EQ(a.tree.size(), 3u);
  take();
  for (auto& s : sws) EXPECT_EQ(s.held.at(a.job).slots, 64u) << s.name;
  EXPECT_NE(c.status_json(0).find("\"resizable\":true"), std::string::npos) << c.status_json(0);
  auto b = c.request_tree(req({"h0", "h2"}, 64), 0);  // leaf0 only: share 32 per lane, held by a
  ASSERT_TRUE(b.ok) << b.why;
  EXPECT_TRUE(c.jobs().at(b.job).waiting);
  take();
  for (auto& s : sws) EXPECT_EQ(s.pending, (std::map<std::uint32_t, std::uint32_t>{{a.job, 32}})) << s.name;
  sws[2].finish(c, a.job, fab, S);  // in any order
  sws[0].finish(c, a.job, fab, S);
  take();
  EXPECT_TRUE(c.jobs().at(b.job).waiting);  // leaf0 still holds 64 per lane for a
  EXPECT_FALSE(sws[1].held.count(b.job));   // never over-promised
  sws[1].finish(c, a.job, fab, S);
  take();
  EXPECT_FALSE(c.jobs().at(b.job).waiting);
  EXPECT_EQ(sws[1].held.at(b.job).slots, 32u);
  for (auto& s : sws) EXPECT_EQ(s.held.at(a.job).slots, 32u) << s.name;
  // b leaves: a grows back to 64 per lane on every switch.
  ASSERT_TRUE(c.release(b.job, b.lease));
  expect_grown_back(c, sws, a.job, fab);
  for (auto& s : sws) EXPECT_LE(s.used(), s.pool) << s.name;
}

}  // namespace
}  // namespace inc::control
