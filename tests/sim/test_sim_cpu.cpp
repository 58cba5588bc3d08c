// CPU of software switches and hosts in the simulator's Core-INC (issue 12): a switch's CPU
// per datagram (switch_packet_us, multicast results), a host's per datagram (host_packet_us),
// and the emulated testbed's shared cores (cpu_cores). Each case is built so that one of these
// is the bottleneck, and the simulated time is checked against its closed form. (The [network]
// keys: SimCpu.NetFileKeysAndTheirRanges in test_sim_scale.cpp, beside the file's other keys.)
#include <gtest/gtest.h>

#include "sim/analytical.hpp"
#include "sim/engine.hpp"
#include "sim/topology.hpp"

namespace inc::sim {
namespace {

constexpr double kBytes = 4 << 20;  // per host: 512 datagrams of 8 KiB
constexpr double kDatagrams = kBytes / 8192;
constexpr double kLinkS = kBytes * 8 / 1e9;  // 33.6 ms at 1 Gb/s

// Core-INC Allreduce of kBytes on 8 hosts at 1 Gb/s with 8 KiB slots, one simulated chunk per
// datagram; one switch, or two leaves of 4 hosts under one spine.
double inc_time(const NetParams& base, bool two_levels) {
  TopoSpec ts;
  ts.kind = two_levels ? TopoKind::fat_tree2 : TopoKind::single_switch;
  ts.hosts = 8;
  ts.radix = 8;  // fat_tree2: 4 hosts and 4 up links per leaf
  ts.link_gbps = 1;
  ts.hop_latency_us = 0;
  ts.routing = Routing::dmodk;
  const Topology topo(ts);
  SimOptions opt;
  opt.np = base;
  opt.np.link_gbps = 1;
  opt.np.hop_latency_us = 0;
  opt.np.host_overhead_us = 0;
  opt.np.inc_chunk_bytes = 8192;
  opt.np.switch_memory_bytes = 512 << 10;
  opt.max_inc_chunks = static_cast<int>(kDatagrams);
  Simulator sim(topo, opt);
  JobSpec j;
  j.name = "inc";
  j.params.coll = Collective::allreduce;
  j.params.algo = coll::Algorithm::inc;
  j.params.count = static_cast<std::uint64_t>(kBytes / 4);
  for (int h = 0; h < 8; ++h) j.hosts.push_back(h);
  sim.add_job(j);
  if (two_levels) {
    EXPECT_EQ(topo.build_tree(j.hosts, 0).switch_count(), 3);
  }
  return sim.run().makespan_s;
}

// inc model's closed form for the same Allreduce as inc_time: one switch (1 level, 2 hops) or
// two levels (4 hops).
double model_time(NetParams np, bool two_levels) {
  np.link_gbps = 1;
  np.hop_latency_us = 0;
  np.host_overhead_us = 0;
  np.inc_chunk_bytes = 8192;
  np.switch_memory_bytes = 512 << 10;
  np.inc_tree_levels = two_levels ? 2 : 1;
  np.path_hops = two_levels ? 4 : 2;
  return collective_cost(Collective::allreduce, coll::Algorithm::inc, 8, kBytes, np).total_s;
}

TEST(SimCpu, SoftwareSwitchCpuPerDatagramSetsThePace) {
  // One switch, 20 us per datagram: per 8 KiB chunk 8 in and 8 results out (unicast) = 320 us,
  // ten times the link's 65.5 us; with multicast 8 in and 1 out = 180 us. The link's share is
  // one chunk up and one down (pipeline fill), 131 us, under 1% of either.
  NetParams np;
  np.switch_packet_us = 20;
  const double unicast = inc_time(np, false);
  EXPECT_NEAR(unicast / (kDatagrams * 16 * 20e-6), 1.0, 0.01) << unicast;
  np.switch_multicast = true;
  const double multicast = inc_time(np, false);
  EXPECT_NEAR(multicast / (kDatagrams * 9 * 20e-6), 1.0, 0.01) << multicast;
  // Without the term the links decide (4 MiB at 1 Gb/s).
  np.switch_packet_us = 0;
  EXPECT_NEAR(inc_time(np, false) / kLinkS, 1.0, 0.01);
}

TEST(SimCpu, TwoLevelSwitchesOnTheirOwnCpusOrOnSharedCores) {
  // Two levels, 20 us per datagram, multicast to hosts: a leaf handles 4 in, 1 up, 1 down from
  // the spine and 1 multicast = 7 datagrams per chunk (140 us), the spine 2 in and 2 out (80 us,
  // unicast: its children are switches). On their own CPUs the leaves set the pace; on one
  // shared core all three switches' 2 x 7 + 4 = 18 datagrams (360 us) do, on two cores half.
  NetParams np;
  np.switch_packet_us = 20;
  np.switch_multicast = true;
  const double own = inc_time(np, true);
  EXPECT_NEAR(own / (kDatagrams * 7 * 20e-6), 1.0, 0.01) << own;
  np.cpu_cores = 1;
  const double one = inc_time(np, true);
  EXPECT_NEAR(one / (kDatagrams * 18 * 20e-6), 1.0, 0.01) << one;
  np.cpu_cores = 2;
  const double two = inc_time(np, true);
  EXPECT_NEAR(two / (kDatagrams * 9 * 20e-6), 1.0, 0.02) << two;
}

TEST(SimCpu, HostCpuPerDatagramAndSharedCores) {
  // One switch, no switch cost, 50 us of host CPU per datagram sent or received: each host
  // spends 100 us per chunk on its own CPU (the links need 65.5 us); with the 8 hosts on 2
  // shared cores, 8 x 100 / 2 = 400 us per chunk.
  NetParams np;
  np.host_packet_us = 50;
  const double own = inc_time(np, false);
  EXPECT_NEAR(own / (kDatagrams * 100e-6), 1.0, 0.01) << own;
  np.cpu_cores = 2;
  const double shared = inc_time(np, false);
  EXPECT_NEAR(shared / (kDatagrams * 400e-6), 1.0, 0.01) << shared;
  // Below the links' pace the host CPU hides behind them (10 us: 20 us per chunk).
  np.host_packet_us = 10;
  np.cpu_cores = 0;
  EXPECT_NEAR(inc_time(np, false) / kLinkS, 1.0, 0.01);
}

TEST(SimCpu, ModelPredictsTheSameCpuBoundsOnOneSwitch) {
  // inc model's closed form against the simulator on one switch of 8 hosts: the switch's CPU
  // (unicast 16, multicast 9 datagrams per chunk) and the hosts' on 2 shared cores.
  auto model = [](const NetParams& np) { return model_time(np, false); };
  NetParams np;
  np.switch_packet_us = 20;
  EXPECT_NEAR(model(np) / inc_time(np, false), 1.0, 0.01);
  np.switch_multicast = true;
  EXPECT_NEAR(model(np) / inc_time(np, false), 1.0, 0.01);
  np = NetParams{};
  np.host_packet_us = 50;
  np.cpu_cores = 2;
  EXPECT_NEAR(model(np) / (kDatagrams * 400e-6), 1.0, 0.01);
  EXPECT_NEAR(model(np) / inc_time(np, false), 1.0, 0.01);
  np.cpu_cores = 0;  // own CPUs: 100 us per chunk
  EXPECT_NEAR(model(np) / (kDatagrams * 100e-6), 1.0, 0.01);
}

TEST(SimCpu, ModelCountsTheTestbedsTwoLeavesOfFour) {
  // inc model's closed form on two levels against the simulator's two leaves of 4 under a spine
  // (inc_leaf_fan_in = 4, the testbed's shape): 20 us per switch datagram with multicast, 50 us
  // per host datagram, 2 shared cores: per chunk (2 x 7 + 4) x 20 + 16 x 50 = 1160 us of CPU, 580
  // us on 2 cores. A balanced tree (fan-in ceil(8^(1/2)) = 3: 3 leaves of 3, 3, 2 under a root
  // of 3) counts 8 + 3 x 2 + 3 + (3 + 3) = 23 switch datagrams: 1260 us, 630 on 2 cores.
  auto model = [](const NetParams& np) { return model_time(np, true); };
  NetParams np;
  np.switch_packet_us = 20;
  np.host_packet_us = 50;
  np.switch_multicast = true;
  np.cpu_cores = 2;
  np.inc_leaf_fan_in = 4;
  EXPECT_NEAR(model(np) / (kDatagrams * 580e-6), 1.0, 0.01) << model(np);
  EXPECT_NEAR(model(np) / inc_time(np, true), 1.0, 0.02) << model(np) << " " << inc_time(np, true);
  np.cpu_cores = 0;  // own CPUs: the busiest is a leaf, 7 x 20 = 140 us per chunk (a host: 100 us)
  EXPECT_NEAR(model(np) / (kDatagrams * 140e-6), 1.0, 0.01) << model(np);
  np.cpu_cores = 2;
  np.inc_leaf_fan_in = 0;
  EXPECT_NEAR(model(np) / (kDatagrams * 630e-6), 1.0, 0.01) << model(np);
  // The switch ALU: a leaf of 4 children passes switch_reduce_GBps / 4 per tree, at 0.2 GB/s
  // 50 MB/s: 2.5x the time of the link's 125 MB/s.
  NetParams alu;
  alu.switch_reduce_GBps = 0.2;
  alu.inc_leaf_fan_in = 4;
  EXPECT_NEAR(model(alu) / (kBytes / 0.05e9), 1.0, 0.02) << model(alu);
}

// ---- host algorithms on the shared cores (cpu_cores): reductions and ready notices -------------

// Allreduce of n bytes by `algo` on p hosts of one switch whose links are so fast (1 Pb/s) that
// only the hosts' CPU counts: each reduction takes n / reduce_GBps, each ready notice
// ready_notice_us of its receiver's CPU (Matching::ready, every message above the threshold).
double host_cpu_time(NetParams np, coll::Algorithm algo, int p, double n, Matching m = Matching::dataflow) {
  TopoSpec ts;
  ts.kind = TopoKind::single_switch;
  ts.hosts = p;
  ts.link_gbps = 1e6;
  ts.hop_latency_us = 0;
  const Topology topo(ts);
  SimOptions opt;
  np.link_gbps = 1e6;
  np.hop_latency_us = 0;
  np.host_overhead_us = 0;
  opt.np = np;
  opt.matching = m;
  opt.eager_threshold = 0;
  Simulator sim(topo, opt);
  JobSpec j;
  j.name = "host";
  j.params.coll = Collective::allreduce;
  j.params.algo = algo;
  j.params.nranks = p;
  j.params.count = static_cast<std::uint64_t>(n / 4);
  j.params.segment_bytes = static_cast<std::uint64_t>(n);
  for (int h = 0; h < p; ++h) j.hosts.push_back(h);
  sim.add_job(j);
  return sim.run().makespan_s;
}

TEST(SimCpu, HostReductionsWaitForTheSharedCores) {
  // Recursive doubling on 4 hosts: 2 steps, each rank reduces the whole 4 MiB once per step,
  // 4.19 ms at 1 GB/s (the 1 Pb/s links add 0.07 us). On their own CPUs the steps take 2 x 4.19
  // ms; on c shared cores the 8 reductions queue: 8 x 4.19 / c (the cores never idle: a rank's
  // next reduction is ready once its partner's previous one is done, and the line is FIFO).
  NetParams np;
  np.reduce_GBps = 1;
  const double r = kBytes / 1e9;
  const auto algo = coll::Algorithm::recursive_doubling;
  EXPECT_NEAR(host_cpu_time(np, algo, 4, kBytes) / (2 * r), 1.0, 1e-3);
  for (int c : {1, 2, 4}) {
    np.cpu_cores = c;
    EXPECT_NEAR(host_cpu_time(np, algo, 4, kBytes) / (8 * r / c), 1.0, 1e-3) << c << " cores";
  }
  // A ring on 4 hosts (one schedule for every rank: the simulator would fold it on its own
  // CPUs): 3 reduce-scatter steps of n/4 each, 3 r / 4 on own CPUs, 4 x 3 r / 4 / c shared.
  const auto ring = coll::Algorithm::ring;
  np.cpu_cores = 0;
  EXPECT_NEAR(host_cpu_time(np, ring, 4, kBytes) / (0.75 * r), 1.0, 1e-3);
  for (int c : {1, 2}) {
    np.cpu_cores = c;
    EXPECT_NEAR(host_cpu_time(np, ring, 4, kBytes) / (3 * r / c), 1.0, 1e-3) << c << " cores";
  }
}

TEST(SimCpu, ReadyNoticesWaitForTheSharedCores) {
  // Two hosts exchange 4 MiB once (recursive doubling, p = 2) under Matching::ready: each
  // receiver's notice costs 300 us of its CPU; nothing is reduced (reduce_GBps 0). On their own
  // CPUs both notices are sent at once (300 us), on one shared core one after the other (600 us),
  // and the later sender's message leaves then.
  NetParams np;
  np.ready_notice_us = 300;
  const auto algo = coll::Algorithm::recursive_doubling;
  EXPECT_NEAR(host_cpu_time(np, algo, 2, kBytes, Matching::ready) / 300e-6, 1.0, 1e-3);
  np.cpu_cores = 1;
  EXPECT_NEAR(host_cpu_time(np, algo, 2, kBytes, Matching::ready) / 600e-6, 1.0, 1e-3);
  np.cpu_cores = 2;
  EXPECT_NEAR(host_cpu_time(np, algo, 2, kBytes, Matching::ready) / 300e-6, 1.0, 1e-3);
  // The notice and a reduction share the core: 2 x 300 us, then the two 4.19 ms reductions.
  np.cpu_cores = 1;
  np.reduce_GBps = 1;
  EXPECT_NEAR(host_cpu_time(np, algo, 2, kBytes, Matching::ready) / (600e-6 + 2 * kBytes / 1e9), 1.0, 1e-3);
}

}  // namespace
}  // namespace inc::sim
