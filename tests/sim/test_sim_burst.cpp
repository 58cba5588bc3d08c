// Token-bucket links in the simulator (issue 12: the emulated testbed's tbf shapers): closed
// forms of one flow, an idle gap, flows sharing a bucketed host link or up link, a joining flow
// and a lock-step ring; buckets off = the simulator without them; folding keeps them; the
// [network] keys. Small sizes; no timing assertions.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "sim/analytical.hpp"
#include "sim/config.hpp"
#include "sim/engine.hpp"
#include "sim/scenario.hpp"
#include "sim/topology.hpp"
#include "tests/sim/hand_program.hpp"

namespace inc::sim {
namespace {

using coll::Op;
using coll::OpKind;
using namespace inc::sim::test;

// 1 Gb/s links passing a 125 KB bucket (1 ms at the rate) at 4 Gb/s; no latency, no overhead.
constexpr double kR = 1.25e8, kP = 5e8, kB = 125000;

NetParams bucket_params(bool on) {
  NetParams np;
  np.link_gbps = 1;
  np.hop_latency_us = 0;
  np.host_overhead_us = 0;
  if (on) {
    np.link_burst_bytes = kB;
    np.burst_peak_gbps = 4;
  }
  return np;
}

SimResult bucketed(TopoSpec ts, const NetParams& np, std::vector<std::vector<Op>> ops, std::vector<int> hosts = {}) {
  ts.link_gbps = 1;
  ts.hop_latency_us = 0;
  SimOptions opt;
  opt.np = np;
  return run(Topology(ts), opt, program(std::move(ops)), std::move(hosts));
}

TopoSpec one_switch(int hosts) {
  TopoSpec ts;
  ts.kind = TopoKind::single_switch;
  ts.hosts = hosts;
  return ts;
}

// One flow of S bytes on links whose buckets hold T tokens: S / P while they last, i.e. up to
// S* = P T / (P - R) bytes, then the rest at R.
double one_flow(double S, double T) {
  const double s_star = kP * T / (kP - kR);
  return S <= s_star ? S / kP : T / (kP - kR) + (S - s_star) / kR;
}

TEST(Buckets, OneFlowOnAnIdleLinkPassesItsBucketAtThePeak) {
  for (double S : {100000.0, 166000.0, 200000.0, 1048576.0}) {
    const auto s = static_cast<std::uint64_t>(S);
    const SimResult r = bucketed(one_switch(2), bucket_params(true), {{send(1, out(0, s))}, {recv(0, out(0, s))}});
    EXPECT_NEAR(r.makespan_s / one_flow(S, kB), 1.0, 1e-9) << S;
    EXPECT_EQ(r.buckets, 4u);  // both directions of both host links
    EXPECT_EQ(r.buckets_emptied, S > kP * kB / (kP - kR) ? 2u : 0u) << S;  // h0 up, h1 down
  }
  // Past S*, the bucket saved B / R: S / R - B / R.
  EXPECT_NEAR(one_flow(1048576, kB), (1048576 - kB) / kR, 1e-12);
}

TEST(Buckets, SecondMessageAfterAnIdleGapGetsRateTimesGapTokensBack) {
  // Rank 0 sends M, reduces it in place for g (M gamma; the reduce waits for the send, the
  // second send for the reduce), sends it again; rank 1's two receives are posted at once. The
  // first message empties the bucket; the gap gives back min(B, R g).
  const std::uint64_t M = 1 << 20;
  for (double g : {0.5e-3, 2e-3}) {
    NetParams np = bucket_params(true);
    np.reduce_GBps = static_cast<double>(M) / g / 1e9;
    const SimResult r = bucketed(one_switch(2), np,
                                 {{send(1, out(0, M)), make_op(OpKind::reduce, -1, out(0, M), out(0, M)), send(1, out(0, M))},
                                  {recv(0, out(0, M)), recv(0, out(M, M))}});
    const double expect = one_flow(M, kB) + g + one_flow(M, std::min(kB, kR * g));
    EXPECT_NEAR(r.makespan_s / expect, 1.0, 1e-9) << g;
    EXPECT_EQ(r.buckets_emptied, 4u) << g;
  }
}

TEST(Buckets, TwoFlowsShareABucketedLink) {
  // Hosts 0 and 1 send S to host 2. Its down link's bucket drains at P - R = 3R, each up link's
  // at P/2 - R = R, so the down link runs dry first (B / 3R), then the two flows share R and the
  // up links fill again: the down link passes 2S with its B for free, (2S - B) / R.
  const std::uint64_t S = 1 << 20;
  const SimResult r = bucketed(one_switch(3), bucket_params(true),
                               {{send(2, out(0, S))}, {send(2, out(0, S))}, {recv(0, out(0, S)), recv(1, out(S, S))}});
  EXPECT_NEAR(r.makespan_s / ((2.0 * S - kB) / kR), 1.0, 1e-9);
  EXPECT_EQ(r.buckets_emptied, 1u);
}

TEST(Buckets, UplinkBucketSharedByFourFlows) {
  // Two leaves of 4 hosts with one up link each (radix 5, 4:1); hosts 0-3 send S to hosts 4-7.
  // The up link and the spine's link down to leaf 1 carry 4 flows at P/4 = R each (the host
  // links' buckets hold: load = rate), drain at 3R and run dry after B / 3R; then the flows share
  // R: (4S - B) / R.
  TopoSpec ts;
  ts.kind = TopoKind::fat_tree2;
  ts.hosts = 8;
  ts.radix = 5;
  ts.oversubscription = 4;
  const std::uint64_t S = 1 << 20;
  std::vector<std::vector<Op>> ops(8);
  for (int h = 0; h < 4; ++h) {
    ops[h] = {send(h + 4, out(0, S))};
    ops[h + 4] = {recv(h, out(0, S))};
  }
  const SimResult on = bucketed(ts, bucket_params(true), ops);
  EXPECT_NEAR(on.makespan_s / ((4.0 * S - kB) / kR), 1.0, 1e-9);
  EXPECT_EQ(on.buckets_emptied, 2u);  // leaf0 -> spine, spine -> leaf1
  const SimResult off = bucketed(ts, bucket_params(false), ops);
  EXPECT_NEAR(off.makespan_s / (4.0 * S / kR), 1.0, 1e-12);
}

// Allreduce (f32) of `bytes` on hosts 0-7.
JobSpec allreduce8(coll::Algorithm a, double bytes) {
  JobSpec j;
  j.name = std::string(coll::name(a));
  j.params.coll = Collective::allreduce;
  j.params.algo = a;
  j.params.count = static_cast<std::uint64_t>(bytes / 4);
  for (int h = 0; h < 8; ++h) j.hosts.push_back(h);
  return j;
}

// Allreduce of 1 MiB on 8 hosts: ring on one switch, Rabenseifner and Core-INC on 2 leaves at 2:1.
std::vector<SimResult> three_collectives(const NetParams& np, bool fold = true, bool symmetric = true) {
  std::vector<SimResult> out;
  for (auto a : {coll::Algorithm::ring, coll::Algorithm::rabenseifner, coll::Algorithm::inc}) {
    TopoSpec ts;
    ts.kind = a == coll::Algorithm::ring ? TopoKind::single_switch : TopoKind::fat_tree2;
    ts.hosts = 8;
    ts.radix = 6;
    ts.oversubscription = 2;
    ts.routing = Routing::dmodk;
    ts.link_gbps = 1;
    const Topology topo(ts);
    SimOptions opt;
    opt.np = np;
    opt.matching = Matching::ready;
    opt.fold_symmetric = fold;
    opt.symmetric_schedules = symmetric;
    Simulator sim(topo, opt);
    sim.add_job(allreduce8(a, 1 << 20));
    out.push_back(sim.run());
  }
  return out;
}

TEST(Buckets, OffIsTheSimulatorWithoutThem) {
  // A peak and a floor without link_burst leave the buckets off: the same run, bit for bit.
  NetParams np = bucket_params(false);
  const auto base = three_collectives(np);
  np.burst_peak_gbps = 4;
  np.link_burst_min_bytes = kB;
  const auto same = three_collectives(np);
  for (std::size_t i = 0; i < base.size(); ++i) {
    EXPECT_EQ(same[i].makespan_s, base[i].makespan_s) << i;
    EXPECT_EQ(same[i].events, base[i].events) << i;
    EXPECT_EQ(same[i].refills, base[i].refills) << i;
    EXPECT_EQ(same[i].buckets, 0u) << i;
  }
  // On, every one of them is faster, by at most what the buckets hold.
  const auto on = three_collectives(bucket_params(true));
  for (std::size_t i = 0; i < base.size(); ++i) EXPECT_LT(on[i].makespan_s, base[i].makespan_s) << i;
}

TEST(Buckets, FoldedAndSymmetricRunsKeepThem) {
  // Identical links get identical buckets, so a folded ring (and the symmetric layout) still
  // gives every rank's run.
  const NetParams np = bucket_params(true);
  const auto folded = three_collectives(np, true, true);
  const auto every = three_collectives(np, false, true);
  const auto full = three_collectives(np, false, false);
  EXPECT_GT(folded[0].jobs[0].fold, 1u);
  EXPECT_GT(folded[0].buckets_emptied, 0u);
  for (std::size_t i = 0; i < folded.size(); ++i) {
    EXPECT_NEAR(folded[i].makespan_s / every[i].makespan_s, 1.0, 1e-12) << i;
    EXPECT_NEAR(full[i].makespan_s / every[i].makespan_s, 1.0, 1e-12) << i;
  }
}

TEST(Buckets, AFlowJoiningBringsTheEmptyTimeForward) {
  // Host 0 sends S to hosts 2 and 3 (its up link gives each P/2 = 2R), so host 2's down link
  // starts at load 2R (empty in B/R = 1 ms); host 1's S to host 2 joins after 0.1 ms (a
  // reduce of S at 10.49 GB/s first) at P - 2R, the load becomes 4R and the empty time moves
  // to 0.4 ms, before the one scheduled. Host 0's up link runs dry at 1/3 ms, host 2's at 0.4
  // ms; from then on the three flows share the two dry links at R/2 each and end together.
  // Host 2's link carried 2S at R or more from the start and passed its B at the peak:
  // (2S - B) / R.
  const std::uint64_t S = 1 << 20;
  NetParams np = bucket_params(true);
  np.reduce_GBps = static_cast<double>(S) / 1e-4 / 1e9;
  const SimResult r = bucketed(one_switch(4), np,
                               {{send(2, out(0, S)), send(3, out(0, S))},
                                {make_op(OpKind::reduce, -1, out(0, S), out(0, S)), send(2, out(0, S))},
                                {recv(0, out(0, S)), recv(1, out(S, S))},
                                {recv(0, out(0, S))}});
  EXPECT_NEAR(r.makespan_s / ((2.0 * S - kB) / kR), 1.0, 1e-9);
  EXPECT_EQ(r.buckets_emptied, 2u);
}

TEST(Buckets, LockStepRingSavesOneBucketPerLink) {
  // Ring Allreduce of n on 8 ranks, one switch, no latency or overhead: every link carries one
  // message of n/8 after another with no gap, so its bucket drains once over the run (each
  // message's start moves the empty time to where the last one had it: the event scheduled
  // then, stale, asks for it again) and the run takes (14 n/8 - B) / R, folded or not.
  const double n = 1 << 20;
  for (bool fold : {true, false}) {
    TopoSpec ts = one_switch(8);
    ts.link_gbps = 1;
    ts.hop_latency_us = 0;
    const Topology topo(ts);
    SimOptions opt;
    opt.np = bucket_params(true);
    opt.fold_symmetric = fold;
    Simulator sim(topo, opt);
    sim.add_job(allreduce8(coll::Algorithm::ring, n));
    const SimResult r = sim.run();
    EXPECT_EQ(r.jobs[0].fold, fold ? 8u : 1u);
    EXPECT_NEAR(r.makespan_s / ((14 * n / 8 - kB) / kR), 1.0, 1e-9) << fold;
  }
}

TEST(Config, BucketKeysAndFlagsValues) {
  const std::string base = "[topology]\nkind = \"single_switch\"\nhosts = 2\nlink_gbps = 1\n";
  const std::string job = "[[job]]\nranks = 2\nbytes = 1024\n";
  auto net = [&](const std::string& keys) { return parse_scenario(base + "[network]\n" + keys + job, "b.toml").opt.np; };
  const NetParams t = net("link_burst = \"1ms\"\nlink_burst_min = 74550\nburst_peak_gbps = 4\n");
  EXPECT_DOUBLE_EQ(t.link_burst_s, 1e-3);
  EXPECT_EQ(t.link_burst_bytes, 0);
  EXPECT_DOUBLE_EQ(t.link_burst_min_bytes, 74550);
  EXPECT_DOUBLE_EQ(t.burst_peak_gbps, 4);
  EXPECT_DOUBLE_EQ(t.burst_bytes(kR), 125000);          // 1 ms at 1 Gb/s
  EXPECT_DOUBLE_EQ(t.burst_bytes(kR / 10), 74550);      // the floor at 100 Mb/s
  EXPECT_EQ(validate(t), "");
  const NetParams b = net("link_burst = \"128KiB\"\nburst_peak_gbps = 4\n");
  EXPECT_DOUBLE_EQ(b.link_burst_bytes, 131072);
  EXPECT_EQ(b.link_burst_s, 0);
  EXPECT_DOUBLE_EQ(net("link_burst = 125000\nburst_peak_gbps = 4\n").link_burst_bytes, 125000);
  EXPECT_FALSE(net("burst_peak_gbps = 4\n").buckets());
  // Refused, naming the key: a bad unit, a floor without a bucket; and a peak not above the rate.
  for (const char* bad : {"link_burst = \"1xs\"\n", "link_burst = \"fast\"\n", "link_burst_min = 1000\n"}) {
    try {
      net(bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("b.toml:6: key 'network.link_burst"), std::string::npos) << e.what();
    }
  }
  const NetParams nopeak = net("link_burst = \"1ms\"\n");
  EXPECT_NE(validate(nopeak).find("burst_peak_gbps"), std::string::npos) << validate(nopeak);
  // Links as fast as the peak or faster get no bucket (the run as without them).
  NetParams slow = bucket_params(true);
  slow.burst_peak_gbps = 1;
  const SimResult r = bucketed(one_switch(2), slow, {{send(1, out(0, 1000000))}, {recv(0, out(0, 1000000))}});
  EXPECT_EQ(r.buckets, 0u);
  EXPECT_NEAR(r.makespan_s, 1e6 / kR, 1e-12);
  double bytes = 1, seconds = 1;
  parse_size_or_time("500 us", bytes, seconds);
  EXPECT_DOUBLE_EQ(seconds, 500e-6);
  EXPECT_EQ(bytes, 0);
}

}  // namespace
}  // namespace inc::sim
