// Tests of the analytical model and the simulator (issue 4). Small sizes; no timing assertions.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <set>
#include <string>

#include "sim/analytical.hpp"
#include "sim/config.hpp"
#include "sim/engine.hpp"
#include "sim/flow.hpp"
#include "sim/scenario.hpp"
#include "sim/topology.hpp"

namespace inc::sim {
namespace {

using coll::Algorithm;

// ---- max-min fairness ------------------------------------------------------------------------

TEST(FlowNet, HandComputedMaxMin) {
  // Resource 0 (cap 10) carries f1 and f2; resource 1 (cap 4) carries f2 and f3.
  FlowNet net({10.0, 4.0});
  const std::uint32_t r0[] = {0}, r01[] = {0, 1}, r1[] = {1};
  const auto f1 = net.start(r0, 1, 100, 0);
  EXPECT_DOUBLE_EQ(net.rate(f1), 10);
  const auto f2 = net.start(r01, 2, 100, 0);
  // Bottleneck of f2 is resource 1 alone (4) vs sharing resource 0 (5): f2 = 4, f1 = 6.
  EXPECT_DOUBLE_EQ(net.rate(f2), 4);
  EXPECT_DOUBLE_EQ(net.rate(f1), 6);
  const auto f3 = net.start(r1, 1, 100, 0);
  // Resource 1 is now shared by two: 2 each; f1 takes the rest of resource 0: 8.
  EXPECT_DOUBLE_EQ(net.rate(f2), 2);
  EXPECT_DOUBLE_EQ(net.rate(f3), 2);
  EXPECT_DOUBLE_EQ(net.rate(f1), 8);
  net.finish(f3, 1.0);
  EXPECT_DOUBLE_EQ(net.rate(f2), 4);
  EXPECT_DOUBLE_EQ(net.rate(f1), 6);
  // Remaining bytes were advanced at the old rates: f1 ran 1 s at 8 B/s before the change.
  EXPECT_DOUBLE_EQ(net.finish_time(f1), 1.0 + (100.0 - 8.0) / 6.0);
}

TEST(FlowNet, RateCapIsRespectedAndLeftoverRedistributed) {
  FlowNet net({10.0});
  const std::uint32_t r0[] = {0};
  const auto a = net.start(r0, 1, 100, 0, 1.0);
  const auto b = net.start(r0, 1, 100, 0);
  EXPECT_DOUBLE_EQ(net.rate(a), 1);
  EXPECT_DOUBLE_EQ(net.rate(b), 9);
}

TEST(FlowNet, WeightedSharingIsInverseToWeight) {
  FlowNet net({9.0});
  const std::uint32_t r0[] = {0};
  const auto a = net.start(r0, 1, 100, 0, FlowNet::kNoCap, 1.0);
  const auto b = net.start(r0, 1, 100, 0, FlowNet::kNoCap, 2.0);
  EXPECT_DOUBLE_EQ(net.rate(a), 6);
  EXPECT_DOUBLE_EQ(net.rate(b), 3);
}

// Reference: progressive filling over all flows from scratch.
std::vector<double> reference_maxmin(const std::vector<double>& cap, const std::vector<std::vector<std::uint32_t>>& flows) {
  std::vector<double> rate(flows.size(), 0), rem = cap;
  std::vector<bool> fixed(flows.size(), false);
  std::size_t left = flows.size();
  while (left) {
    double best = 1e300;
    int br = -1;
    for (std::size_t r = 0; r < cap.size(); ++r) {
      int n = 0;
      for (std::size_t f = 0; f < flows.size(); ++f)
        if (!fixed[f] && std::count(flows[f].begin(), flows[f].end(), r)) ++n;
      if (n && rem[r] / n < best) best = rem[r] / n, br = static_cast<int>(r);
    }
    for (std::size_t f = 0; f < flows.size(); ++f)
      if (!fixed[f] && std::count(flows[f].begin(), flows[f].end(), static_cast<std::uint32_t>(br))) {
        fixed[f] = true;
        rate[f] = best;
        --left;
        for (auto r : flows[f]) rem[r] -= best;
      }
  }
  return rate;
}

TEST(FlowNet, IncrementalRefillMatchesFullRecomputation) {
  std::mt19937 rng(7);
  const int R = 12;
  std::vector<double> cap(R);
  for (auto& c : cap) c = 1 + rng() % 20;
  FlowNet net(cap);
  std::vector<std::uint32_t> ids;
  std::vector<std::vector<std::uint32_t>> paths;
  for (int step = 0; step < 300; ++step) {
    if (ids.empty() || rng() % 3) {
      std::vector<std::uint32_t> p;
      const int n = 1 + rng() % 3;
      while (static_cast<int>(p.size()) < n) {
        const std::uint32_t r = rng() % R;
        if (std::find(p.begin(), p.end(), r) == p.end()) p.push_back(r);
      }
      ids.push_back(net.start(p.data(), p.size(), 1e9, step));
      paths.push_back(p);
    } else {
      const std::size_t k = rng() % ids.size();
      net.finish(ids[k], step);
      ids.erase(ids.begin() + static_cast<long>(k));
      paths.erase(paths.begin() + static_cast<long>(k));
    }
    const auto ref = reference_maxmin(cap, paths);
    for (std::size_t i = 0; i < ids.size(); ++i)
      ASSERT_NEAR(net.rate(ids[i]), ref[i], 1e-9 * ref[i]) << "step " << step << " flow " << i;
  }
}

// ---- simulator vs formula --------------------------------------------------------------------

JobSpec job(Collective c, Algorithm a, int p, std::uint64_t bytes, std::uint64_t segment = 0) {
  JobSpec j;
  j.name = std::string(coll::name(a));
  j.params.coll = c;
  j.params.algo = a;
  j.params.nranks = p;
  j.params.count = count_for_bytes(c, p, bytes, DataType::f32);
  j.params.segment_bytes = segment;
  for (int i = 0; i < p; ++i) j.hosts.push_back(i);
  return j;
}

TEST(Simulator, RingOnSingleSwitchEqualsAlphaBeta) {
  for (int p : {2, 5, 8}) {
    TopoSpec ts;
    ts.kind = TopoKind::single_switch;
    ts.hosts = p;
    Topology topo(ts);
    SimOptions opt;
    opt.np.path_hops = 2;
    Simulator sim(topo, opt);
    const std::uint64_t bytes = 3840000;  // whole f32 shards for p = 2, 5, 8
    sim.add_job(job(Collective::allreduce, Algorithm::ring, p, bytes, bytes));  // one message per step
    const SimResult r = sim.run();
    const double model = collective_cost(Collective::allreduce, Algorithm::ring, p, bytes, opt.np).total_s;
    // 2(p-1) x (o + 2 hops + n/p beta): identical when nothing shares a link.
    EXPECT_NEAR(r.jobs[0].time_s(), model, 1e-9 * model) << "p=" << p;
  }
}

TEST(Simulator, IncHalvesHostTrafficOfRing) {
  const int p = 16;
  TopoSpec ts;
  ts.kind = TopoKind::fat_tree2;
  ts.hosts = p;
  ts.radix = 8;
  Topology topo(ts);
  double host_bytes[2];
  double times[2];
  int k = 0;
  for (Algorithm a : {Algorithm::ring, Algorithm::inc}) {
    Simulator sim(topo, SimOptions{});
    sim.add_job(job(Collective::allreduce, a, p, 1 << 20));
    const SimResult r = sim.run();
    host_bytes[k] = r.jobs[0].tier_bytes[0];
    times[k] = r.jobs[0].time_s();
    ++k;
  }
  // Ring: every host sends and receives 2(p-1)/p n; Core-INC: n each way.
  EXPECT_NEAR(host_bytes[0] / host_bytes[1], 2.0 * (p - 1) / p, 1e-9);
  EXPECT_LT(times[1], times[0]);
}

TEST(Simulator, LinksTouchedByOneBroadcastOnSmallFatTree) {
  // 8 hosts, radix 4: 4 leaves of 2 hosts, 2 spines. Broadcast from host 0 to all.
  TopoSpec ts;
  ts.kind = TopoKind::fat_tree2;
  ts.hosts = 8;
  ts.radix = 4;
  Topology topo(ts);
  auto run = [&](Algorithm a) {
    Simulator sim(topo, SimOptions{});
    JobSpec j = job(Collective::broadcast, a, 8, 1 << 16, 1 << 16);
    sim.add_job(j);
    return sim.run().jobs[0];
  };
  const JobResult inc = run(Algorithm::inc);
  const JobResult chain = run(Algorithm::pipelined_chain);
  // Switch replication: leaf0 -> spine, spine -> leaf1..3 = 4 switch-to-switch links;
  // host links: 1 up from the root, 7 down.
  EXPECT_EQ(inc.links_touched[1] + inc.links_touched[2], 4);
  EXPECT_EQ(inc.links_touched[0], 8);
  // Chain 0->1->...->7 crosses leaves 3 times (1->2, 3->4, 5->6): 6 switch-to-switch links;
  // each of 7 hops uses 2 host links.
  EXPECT_EQ(chain.links_touched[1] + chain.links_touched[2], 6);
  EXPECT_EQ(chain.links_touched[0], 14);
}

TEST(Simulator, FailedCableCarriesNothing) {
  TopoSpec ts;
  ts.kind = TopoKind::fat_tree2;
  ts.hosts = 8;
  ts.radix = 4;
  ts.failed_links = {"leaf0-spine0"};
  Topology topo(ts);
  for (Algorithm a : {Algorithm::ring, Algorithm::inc}) {
    Simulator sim(topo, SimOptions{});
    sim.add_job(job(Collective::allreduce, a, 8, 1 << 20));
    const SimResult r = sim.run();
    for (std::uint32_t l = 0; l < topo.links().size(); ++l)
      if (topo.link(l).failed) {
        EXPECT_EQ(r.link_bytes[l], 0) << topo.link_name(l);
      }
    EXPECT_GT(r.jobs[0].time_s(), 0);
  }
  TopoSpec bad = ts;
  bad.failed_links = {"leaf0-spine7"};
  EXPECT_THROW(Topology{bad}, Error);
}

// ---- fat_tree3 and rail: shape, routes, aggregation trees ------------------------------------

// A route from host a to host b is a walk over the topology's links through switches only,
// every up link before every down link (valley-free), no link twice.
void expect_walk(const Topology& t, int a, int b, const std::vector<std::uint32_t>& r) {
  const std::string what = fmt::format("route h{} -> h{}", a, b);
  ASSERT_FALSE(r.empty()) << what;
  EXPECT_EQ(t.link(r.front()).from, static_cast<std::uint32_t>(a)) << what;
  EXPECT_EQ(t.link(r.back()).to, static_cast<std::uint32_t>(b)) << what;
  bool down = false;
  for (std::size_t i = 0; i < r.size(); ++i) {
    if (i > 0) {
      EXPECT_EQ(t.link(r[i - 1]).to, t.link(r[i]).from) << what << ": link " << i << " does not continue the walk";
      EXPECT_TRUE(t.is_switch(t.link(r[i]).from)) << what << " passes through a host";
    }
    if (!t.link(r[i]).up) {
      down = true;
    } else {
      EXPECT_FALSE(down) << what << ": up again after going down at " << t.link_name(r[i]);
    }
    EXPECT_EQ(std::count(r.begin(), r.end(), r[i]), 1) << what << " uses " << t.link_name(r[i]) << " twice";
  }
}

std::string apex(const Topology& t, const std::vector<std::uint32_t>& r) {  // highest switch
  return t.node_name(t.link(r[r.size() / 2 - 1]).to);
}

TEST(Topology, FatTree3ShapeRoutesAndTrees) {
  // Radix 4 at 1:1: edges of 2 hosts and 2 up ports, 2 edges per pod, 2 aggregation switches
  // per pod with 2 core ports each: 16 hosts -> 8 edges, 4 pods, 8 aggs, 4 cores.
  TopoSpec ts;
  ts.kind = TopoKind::fat_tree3;
  ts.hosts = 16;
  ts.radix = 4;
  const Topology t(ts);
  EXPECT_EQ(t.num_nodes(), 16 + 8 + 8 + 4);
  EXPECT_EQ(t.links().size(), 2u * (16 + 8 * 2 + 8 * 2));  // host, edge-agg, agg-core cables
  std::set<std::uint32_t> core_links;
  for (int a = 0; a < 16; ++a)
    for (int b = 0; b < 16; ++b) {
      if (a == b) continue;
      std::vector<std::uint32_t> r;
      ASSERT_TRUE(t.route(a, b, r));
      expect_walk(t, a, b, r);
      const std::size_t hops = a / 2 == b / 2 ? 2 : a / 4 == b / 4 ? 4 : 6;  // edge, pod, across
      ASSERT_EQ(r.size(), hops) << "h" << a << " -> h" << b;
      EXPECT_NEAR(t.path_latency(r), hops * 0.6e-6, 1e-15);
      const std::string top = apex(t, r);
      const std::string want = hops == 2 ? fmt::format("edge{}", a / 2)
                               : hops == 4 ? fmt::format("agg{}.", a / 4)
                                           : std::string("core");
      EXPECT_EQ(top.rfind(want, 0), 0u) << "h" << a << " -> h" << b << " tops at " << top;
      for (auto l : r)
        if (t.link(l).tier == Tier::core) core_links.insert(l);
    }
  // ECMP over (agg, core) pairs: every agg-core cable carries traffic in both directions.
  EXPECT_EQ(core_links.size(), 2u * 16);

  // A failed cable is avoided by every route, and every pair still has one.
  TopoSpec fs = ts;
  fs.failed_links = {"agg0.0-core0.0", "edge3-agg1.1"};
  const Topology f(fs);
  for (int a = 0; a < 16; ++a)
    for (int b = 0; b < 16; ++b) {
      if (a == b) continue;
      std::vector<std::uint32_t> r;
      ASSERT_TRUE(f.route(a, b, r)) << "h" << a << " -> h" << b;
      for (auto l : r) EXPECT_FALSE(f.link(l).failed) << f.link_name(l);
    }

  // Aggregation trees at the lowest common level: an edge, a pod's agg, a core.
  struct Case {
    std::vector<int> members;
    std::string root;
    int depth, switches;
  };
  std::vector<int> all(16);
  for (int i = 0; i < 16; ++i) all[i] = i;
  for (const Case& c : {Case{{0, 1}, "edge0", 1, 1}, Case{{0, 1, 2, 3}, "agg0.", 2, 3},
                        Case{{5, 9}, "core", 3, 5}, Case{all, "core", 3, 8 + 4 + 1}}) {
    const AggTree tree = t.build_tree(c.members, 1);
    const std::string root = t.node_name(tree.nodes[0].node);
    EXPECT_EQ(root.rfind(c.root, 0), 0u) << root;
    EXPECT_EQ(tree.depth, c.depth) << root;
    EXPECT_EQ(tree.switch_count(), c.switches) << root;
    // Every member reaches the root in `depth` steps, each over a cable of the topology.
    for (std::size_t m = 0; m < c.members.size(); ++m) {
      int n = tree.member_node[m], steps = 0;
      EXPECT_EQ(tree.nodes[n].node, static_cast<std::uint32_t>(c.members[m]));
      for (; tree.nodes[n].parent >= 0; n = tree.nodes[n].parent, ++steps) {
        const Link& up = t.link(tree.nodes[n].up_link);
        EXPECT_EQ(up.from, tree.nodes[n].node);
        EXPECT_EQ(up.to, tree.nodes[tree.nodes[n].parent].node);
      }
      EXPECT_EQ(n, 0);
      EXPECT_EQ(steps, c.depth) << "member " << m << " under " << root;
    }
  }
}

TEST(Topology, RailShapeRoutesAndTrees) {
  // 8 servers of 4 GPUs; radix 8 at 1:1: rail leaves of 4 servers (4 down, 4 up), so 2 groups
  // x 4 rails = 8 leaves and 4 spines; one NVLink switch per server.
  TopoSpec ts;
  ts.kind = TopoKind::rail;
  ts.hosts = 32;
  ts.gpus_per_server = 4;
  ts.radix = 8;
  const Topology t(ts);
  EXPECT_EQ(t.num_nodes(), 32 + 8 + 8 + 4);
  EXPECT_EQ(t.links().size(), 2u * (32 + 32 + 8 * 4));  // rail, NVLink, leaf-spine cables
  for (int a = 0; a < 32; ++a)
    for (int b = 0; b < 32; ++b) {
      if (a == b) continue;
      std::vector<std::uint32_t> r;
      ASSERT_TRUE(t.route(a, b, r));
      expect_walk(t, a, b, r);
      const std::string what = fmt::format("h{} -> h{}", a, b);
      if (a / 4 == b / 4) {  // same server: NVLink only
        ASSERT_EQ(r.size(), 2u) << what;
        EXPECT_EQ(apex(t, r), fmt::format("nv{}", a / 4)) << what;
        for (auto l : r) EXPECT_EQ(t.link(l).tier, Tier::nvlink) << what;
        EXPECT_NEAR(t.path_latency(r), 2 * 0.3e-6, 1e-15);
        continue;
      }
      // Leaving the server: on the GPU's own rail leaf ("rail<gpu>.<group of 4 servers>").
      EXPECT_EQ(t.node_name(t.link(r[0]).to), fmt::format("rail{}.{}", a % 4, a / 16)) << what;
      EXPECT_EQ(t.node_name(t.link(r.back()).from), fmt::format("rail{}.{}", b % 4, b / 16)) << what;
      if (a % 4 == b % 4 && a / 16 == b / 16) {  // same rail leaf
        EXPECT_EQ(r.size(), 2u) << what;
      } else {  // another rail or group: through a spine
        ASSERT_EQ(r.size(), 4u) << what;
        EXPECT_EQ(apex(t, r).rfind("spine", 0), 0u) << what;
      }
      for (auto l : r) EXPECT_NE(t.link(l).tier, Tier::nvlink) << what;
    }
  // Core-INC trees: one rail within a group is one leaf; one rail across groups needs a spine.
  const AggTree one_leaf = t.build_tree({0, 4, 8, 12}, 1);
  EXPECT_EQ(t.node_name(one_leaf.nodes[0].node), "rail0.0");
  EXPECT_EQ(one_leaf.depth, 1);
  EXPECT_EQ(one_leaf.switch_count(), 1);
  const AggTree rail0 = t.build_tree({0, 4, 8, 12, 16, 20, 24, 28}, 1);
  EXPECT_EQ(t.node_name(rail0.nodes[0].node).rfind("spine", 0), 0u);
  EXPECT_EQ(rail0.depth, 2);
  EXPECT_EQ(rail0.switch_count(), 3);  // rail0.0, rail0.1, a spine

  // A ring inside one server moves nothing over the rails; across servers it does.
  auto ring = [&](std::vector<int> hosts) {
    Simulator sim(t, SimOptions{});
    JobSpec j = job(Collective::allreduce, Algorithm::ring, static_cast<int>(hosts.size()), 1 << 20);
    j.hosts = std::move(hosts);
    sim.add_job(j);
    return sim.run().jobs[0];
  };
  const JobResult in_server = ring({0, 1, 2, 3});
  EXPECT_EQ(in_server.tier_bytes[static_cast<int>(Tier::host)], 0.0);
  EXPECT_EQ(in_server.tier_bytes[static_cast<int>(Tier::edge_up)], 0.0);
  EXPECT_GT(in_server.tier_bytes[static_cast<int>(Tier::nvlink)], 0.0);
  const JobResult on_rail = ring({0, 4, 8, 12});
  EXPECT_GT(on_rail.tier_bytes[static_cast<int>(Tier::host)], 0.0);
  EXPECT_EQ(on_rail.tier_bytes[static_cast<int>(Tier::edge_up)], 0.0);  // one rail leaf
  EXPECT_EQ(on_rail.tier_bytes[static_cast<int>(Tier::nvlink)], 0.0);
}

TEST(Simulator, IncHalvesHostTrafficOfRingOnFatTree3) {
  const int p = 16;
  TopoSpec ts;
  ts.kind = TopoKind::fat_tree3;
  ts.hosts = p;
  ts.radix = 4;
  Topology topo(ts);
  JobResult r[2];
  int k = 0;
  for (Algorithm a : {Algorithm::ring, Algorithm::inc}) {
    Simulator sim(topo, SimOptions{});
    sim.add_job(job(Collective::allreduce, a, p, 1 << 20));
    r[k++] = sim.run().jobs[0];
  }
  EXPECT_NEAR(r[0].tier_bytes[0] / r[1].tier_bytes[0], 2.0 * (p - 1) / p, 1e-9);
  EXPECT_EQ(r[1].tree_depth, 3);
  EXPECT_EQ(r[1].tree_switches, 8 + 4 + 1);  // every edge, one agg per pod, one core
  EXPECT_LT(r[1].time_s(), r[0].time_s());
}

TEST(Simulator, EdgeOffloadRelievesHostMemory) {
  // A ring Allgather forwards every block but the rank's own. With a host memory bus slower
  // than receive + forward, the Edge-INC NIC (no read-back of forwarded data) finishes sooner.
  TopoSpec ts;
  ts.kind = TopoKind::single_switch;
  ts.hosts = 8;
  Topology topo(ts);
  SimOptions opt;
  opt.np.host_mem_GBps = 40;  // below 2 x 50 GB/s of receive + forward
  double t[2];
  for (int edge = 0; edge < 2; ++edge) {
    Simulator sim(topo, opt);
    JobSpec j = job(Collective::allgather, Algorithm::ring, 8, 8 << 20);
    j.edge_offload = edge;
    sim.add_job(j);
    t[edge] = sim.run().jobs[0].time_s();
  }
  EXPECT_LT(t[1], 0.7 * t[0]);
}

TEST(Simulator, TreesSharingSwitchMemorySlowEachOtherDown) {
  // 16 hosts in 4 leaves; two 8-rank Core-INC jobs interleaved so both trees cross every leaf.
  // 1 MiB of aggregation memory: a tree alone may keep 4 chunks of 256 KiB in flight; two trees
  // on the same leaf get 2 each, which halves the window-limited rate.
  TopoSpec ts;
  ts.kind = TopoKind::fat_tree2;
  ts.hosts = 16;
  ts.radix = 8;
  Topology topo(ts);
  SimOptions opt;
  opt.np.switch_memory_bytes = 1 << 20;
  auto inc_job = [](std::vector<int> hosts) {
    JobSpec j = job(Collective::allreduce, Algorithm::inc, 8, 16 << 20);
    j.hosts = std::move(hosts);
    return j;
  };
  const std::vector<int> a = {0, 1, 4, 5, 8, 9, 12, 13}, b = {2, 3, 6, 7, 10, 11, 14, 15};
  Simulator alone(topo, opt);
  alone.add_job(inc_job(a));
  const JobResult r1 = alone.run().jobs[0];
  Simulator shared(topo, opt);
  shared.add_job(inc_job(a));
  shared.add_job(inc_job(b));
  const SimResult r2 = shared.run();
  EXPECT_NEAR(r2.jobs[0].inc_window_cap_GBps, r1.inc_window_cap_GBps / 2, 1e-9);
  EXPECT_GT(r2.jobs[0].time_s(), 1.5 * r1.time_s());
  EXPECT_GT(r2.jobs[1].time_s(), 1.5 * r1.time_s());
}

// ---- analytical model ------------------------------------------------------------------------

TEST(Model, ClosedFormsAgreeWithSchedules) {
  const std::pair<Collective, Algorithm> cases[] = {
      {Collective::allreduce, Algorithm::ring},          {Collective::allreduce, Algorithm::recursive_doubling},
      {Collective::allreduce, Algorithm::rabenseifner},  {Collective::allreduce, Algorithm::inc},
      {Collective::reduce_scatter, Algorithm::ring},     {Collective::reduce_scatter, Algorithm::inc},
      {Collective::allgather, Algorithm::ring},          {Collective::allgather, Algorithm::recursive_doubling},
      {Collective::allgather, Algorithm::inc},           {Collective::broadcast, Algorithm::binomial_tree},
      {Collective::broadcast, Algorithm::pipelined_chain}, {Collective::broadcast, Algorithm::inc},
      {Collective::alltoall, Algorithm::pairwise},       {Collective::barrier, Algorithm::dissemination},
      {Collective::barrier, Algorithm::inc}};
  for (int p : {2, 3, 6, 8, 12, 16}) {
    for (auto [c, a] : cases) {
      // Divisible by 4 p for these p; 3 KiB takes the small in-network schedules.
      for (const std::uint64_t n : {3ull << 10, 3ull << 20}) {
        const StepCounts s = schedule_counts(c, a, p, n);
        const StepCounts f = closed_form_counts(c, a, p, static_cast<double>(n));
        const std::string what = std::string(name(c)) + "/" + std::string(coll::name(a)) + " p=" + std::to_string(p);
        EXPECT_EQ(s.rounds, f.rounds) << what;
        EXPECT_NEAR(s.bytes_sent, f.bytes_sent, 1e-9 * n) << what;
        EXPECT_NEAR(s.inc_bytes, f.inc_bytes, 1e-9 * n) << what;
        if (c != Collective::reduce_scatter || a != Algorithm::inc) {
          EXPECT_NEAR(s.bytes_reduced, f.bytes_reduced, 1e-9 * n) << what;
        }
        // Memory traffic (docs/EDGE.md): the closed forms mark the sends the schedules forward.
        EXPECT_NEAR(s.bytes_forwarded, f.bytes_forwarded, 1e-9 * n) << what;
        EXPECT_NEAR(s.mem_host, f.mem_host, 1e-9 * n) << what;
        EXPECT_NEAR(s.mem_edge, f.mem_edge, 1e-9 * n) << what;
      }
    }
  }
}

// Bytes through host memory per byte of the vector (docs/EDGE.md, "Memory traffic"): the
// model's closed forms and the simulator's per-host counter, host-driven and Edge-INC.
TEST(Model, HostMemoryBytesAgreeWithTheSimulator) {
  const std::pair<Collective, Algorithm> cases[] = {
      {Collective::allreduce, Algorithm::ring},       {Collective::allreduce, Algorithm::recursive_doubling},
      {Collective::allreduce, Algorithm::rabenseifner}, {Collective::reduce_scatter, Algorithm::ring},
      {Collective::allgather, Algorithm::ring},       {Collective::allgather, Algorithm::recursive_doubling},
      {Collective::broadcast, Algorithm::binomial_tree}, {Collective::broadcast, Algorithm::pipelined_chain},
      {Collective::alltoall, Algorithm::pairwise}};
  TopoSpec ts;
  ts.kind = TopoKind::single_switch;
  ts.hosts = 8;
  Topology topo(ts);
  for (int p : {2, 3, 4, 8})
    for (auto [c, a] : cases)
      for (int edge = 0; edge < 2; ++edge) {
        const std::uint64_t n = 3ull << 20;
        const std::string what = fmt::format("{}/{} p={} edge={}", name(c), coll::name(a), p, edge);
        SimOptions opt;
        opt.np.host_mem_GBps = 1;
        Simulator sim(topo, opt);
        JobSpec j = job(c, a, p, n);
        j.edge_offload = edge;
        sim.add_job(j);
        const double simulated = sim.run().jobs[0].host_mem_bytes / n;
        const double model =
            host_memory_bytes(closed_form_counts(c, a, p, static_cast<double>(n)), edge ? Offload::edge : Offload::host) / n;
        EXPECT_NEAR(simulated, model, 1e-6) << what;
      }
  // The issue's figures: a 4-rank ring allreduce moves 3 bytes per byte of the vector through
  // host memory when the host drives it, 1.75 when the NIC forwards (every send but the first
  // reads what the rank's previous receive wrote).
  const StepCounts ring = closed_form_counts(Collective::allreduce, Algorithm::ring, 4, 1 << 20);
  EXPECT_DOUBLE_EQ(host_memory_bytes(ring, Offload::host) / (1 << 20), 3.0);
  EXPECT_DOUBLE_EQ(host_memory_bytes(ring, Offload::edge) / (1 << 20), 1.75);
}

TEST(Model, PaperFigure5) {
  const PaperFigure5 f = paper_figure5(NetParams{});
  EXPECT_NEAR(f.floor_s, 8.0 * (1ull << 30) * 8 / 400e9, 1e-12);
  EXPECT_NEAR(f.floor_s, 0.1718, 0.0001);                         // the ~172 ms floor
  EXPECT_NEAR(f.ring_bw_s, 0.3433, 0.0001);                       // 2(p-1)/p n beta
  EXPECT_NEAR(f.ring.total_s, f.paper_ring_s, 0.01 * f.paper_ring_s);  // 352 ms within 1%
  EXPECT_GT(f.inc.total_s, f.floor_s);                            // INC can't beat the floor
  EXPECT_GT(f.floor_s, f.paper_inc_s);                            // ... but the paper's 151 ms does
  EXPECT_NEAR(f.implied_ratio, 0.49, 0.01);
  const int paper_times[] = {6, 13, 21, 30, 40};
  const int labels[] = {5, 11, 18, 26, 34};
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(std::lround(f.rows[i].gain_paper_times * 100), paper_times[i]);
    EXPECT_EQ(std::lround(f.rows[i].gain_ours * 100), labels[i]) << "share " << f.rows[i].share;
  }
}

TEST(Model, AmdahlGain) {
  EXPECT_DOUBLE_EQ(amdahl_gain(0.5, 0.5), 1.0 / 0.75 - 1);
  EXPECT_DOUBLE_EQ(amdahl_gain(0.2, 1.0), 0);
  EXPECT_NEAR(fit_ratio({0.1, 0.3, 0.5}, {amdahl_gain(0.1, 0.3), amdahl_gain(0.3, 0.3), amdahl_gain(0.5, 0.3)}), 0.3, 1e-6);
}

// ---- configuration errors --------------------------------------------------------------------

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::config);
    return e.what();
  }
  return "(no error)";
}

const char* kModel = R"([model]
parameters = 7e9
layers = 32
hidden = 4096
seq_len = 4096
global_batch = 64
[parallelism]
dp = 64
)";

TEST(Config, ModelFileErrorsNameFileLineAndKey) {
  // The file's values arrive where model_iteration reads them; what it leaves out keeps the
  // documented defaults (the name is the file's, TP on the NVLink-class network).
  const TrainingConfig c = parse_training_config(kModel, "m.toml");
  EXPECT_EQ(c.name, "m.toml");
  EXPECT_EQ(c.parameters, 7e9);
  EXPECT_EQ(c.layers, 32);
  EXPECT_EQ(c.hidden, 4096);
  EXPECT_EQ(c.seq_len, 4096);
  EXPECT_EQ(c.global_batch, 64);
  EXPECT_EQ(c.dp, 64);
  EXPECT_EQ(c.tp * c.pp * c.ep, 1);
  EXPECT_EQ(c.experts, 0);
  EXPECT_EQ(c.net.link_gbps, NetParams{}.link_gbps);
  EXPECT_EQ(c.tp_net.link_gbps, 7200);
  const TrainingConfig d = parse_training_config(std::string(kModel) + "[network]\nlink_gbps = 200\n", "m.toml");
  EXPECT_EQ(d.net.link_gbps, 200);
  EXPECT_EQ(d.dp, 64);
  std::string e = error_of([] { parse_training_config(std::string(kModel) + "[network]\nlink_gbps = -400\n", "m.toml"); });
  EXPECT_NE(e.find("m.toml:10"), std::string::npos) << e;
  EXPECT_NE(e.find("network.link_gbps"), std::string::npos) << e;
  e = error_of([] { parse_training_config(std::string(kModel) + "[network]\nlink_gbsp = 400\n", "m.toml"); });
  EXPECT_NE(e.find("m.toml:10"), std::string::npos) << e;
  EXPECT_NE(e.find("network.link_gbsp"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key"), std::string::npos) << e;
  e = error_of([] { parse_training_config("[model]\nparameters = 7e9\nlayers = 32\n", "x.toml"); });
  EXPECT_NE(e.find("x.toml:1"), std::string::npos) << e;
  EXPECT_NE(e.find("model.hidden"), std::string::npos) << e;
  EXPECT_NE(e.find("missing"), std::string::npos) << e;
  e = error_of([] { parse_training_config(std::string(kModel) + "accelerators = 100\n", "m.toml"); });
  EXPECT_NE(e.find("m.toml:9"), std::string::npos) << e;
  EXPECT_NE(e.find("parallelism.accelerators"), std::string::npos) << e;
  e = error_of([] { load_training_config("/nonexistent/model.toml"); });
  EXPECT_NE(e.find("/nonexistent/model.toml"), std::string::npos) << e;
}

const char* kScenario = R"([topology]
kind = "fat_tree2"
hosts = 16
radix = 8

[[job]]
name = "a"
ranks = 8
bytes = "1MiB"
)";

TEST(Config, ScenarioErrorsNameFileLineAndKey) {
  const Scenario ok = parse_scenario(kScenario, "s.toml");
  EXPECT_EQ(ok.jobs.size(), 1u);
  std::string e = error_of([] { parse_scenario(std::string(kScenario) + "\n[[job]]\nranks = 9\nbytes = 100\n", "s.toml"); });
  EXPECT_NE(e.find("s.toml:12"), std::string::npos) << e;  // more ranks than hosts
  EXPECT_NE(e.find("job[1].ranks"), std::string::npos) << e;
  e = error_of([] { parse_scenario(std::string(kScenario) + "colour = \"red\"\n", "s.toml"); });
  EXPECT_NE(e.find("s.toml:10"), std::string::npos) << e;
  EXPECT_NE(e.find("job[0].colour"), std::string::npos) << e;
  e = error_of([] { parse_scenario("[topology]\nkind = \"fat_tree2\"\nhosts = 8\nlink_gbps = -1\n[[job]]\nranks=2\nbytes=1\n", "t.toml"); });
  EXPECT_NE(e.find("t.toml:4"), std::string::npos) << e;
  EXPECT_NE(e.find("topology.link_gbps"), std::string::npos) << e;
  e = error_of([] { parse_scenario("[topology]\nkind = \"torus\"\nhosts = 8\n", "t.toml"); });
  EXPECT_NE(e.find("t.toml:2"), std::string::npos) << e;
  EXPECT_NE(e.find("topology.kind"), std::string::npos) << e;
  e = error_of([] { parse_scenario("[topology]\nkind = \"fat_tree2\"\nhosts = 8\n[[job]]\nbytes = 5\n", "t.toml"); });
  EXPECT_NE(e.find("job[0].ranks"), std::string::npos) << e;
  EXPECT_NE(e.find("missing"), std::string::npos) << e;
  e = error_of([] { parse_scenario("[topology]\nkind = \"fat_tree2\"\nhosts = = 8\n", "t.toml"); });
  EXPECT_NE(e.find("t.toml:3"), std::string::npos) << e;
}

TEST(Config, Sizes) {
  EXPECT_EQ(parse_size("8GiB"), 8ull << 30);
  EXPECT_EQ(parse_size("1.5 KiB"), 1536u);
  EXPECT_EQ(parse_size("4MB"), 4000000u);
  EXPECT_EQ(parse_size("100"), 100u);
  EXPECT_EQ(parse_size("1e3"), 1000u);
  EXPECT_THROW(parse_size("8 parsecs"), std::invalid_argument);
  EXPECT_THROW(parse_size("-1GiB"), std::invalid_argument);
}

}  // namespace

}  // namespace inc::sim
