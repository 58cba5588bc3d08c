// The ranks' start skew (NetParams::start_skew, sim/skew.hpp; docs/SIMULATOR.md "Start skew") and
// the switch-to-switch link rate (TopoSpec::uplink_gbps): closed forms on hand-written programs,
// the draws' determinism, inc bench's statistic over draws, and no skew = the run without it.
// Small sizes; no timing assertions.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "sim/engine.hpp"
#include "sim/program.hpp"
#include "sim/scenario.hpp"
#include "sim/skew.hpp"
#include "sim/topology.hpp"
#include "tests/sim/hand_program.hpp"

namespace inc::sim {
namespace {

using namespace inc::sim::test;

constexpr double kBw = 400e9 / 8;  // bytes/s of every link (the defaults)
constexpr double kO = 2e-6, kHop = 0.6e-6;

Topology one_switch(int hosts) {
  TopoSpec ts;
  ts.kind = TopoKind::single_switch;
  ts.hosts = hosts;
  return Topology(ts);
}

// A job of `p` ranks on hosts first..first + p - 1 (f32, the algorithm's segments).
JobSpec job(const char* name, Collective c, coll::Algorithm a, int p, std::uint64_t bytes, int first = 0) {
  JobSpec j;
  j.name = name;
  j.params.coll = c;
  j.params.algo = a;
  j.params.nranks = p;
  j.params.count = bytes / 4;
  for (int h = first; h < first + p; ++h) j.hosts.push_back(h);
  return j;
}

// A hand-written program whose ranks start at `starts` (seconds after the job's start).
SimResult run_at(const Topology& topo, Program prog, std::vector<double> starts, SimOptions opt = {}) {
  Simulator sim(topo, opt);
  JobSpec j;
  j.name = "hand";
  j.params.nranks = prog.nranks;
  for (int r = 0; r < prog.nranks; ++r) j.hosts.push_back(r);
  j.rank_start_s = std::move(starts);
  sim.add_job(j, std::move(prog));
  return sim.run();
}

// Rank 0 sends M to rank 1. The message moves once both are posted, i.e. at the later start D,
// and both ranks end at D + a + M/B (a = o + 2 hops): the early rank's time holds the wait.
TEST(StartSkew, TwoRanksExchangeOneMessageAfterTheLaterStart) {
  const double M = 4e6, a = kO + 2 * kHop, D = 300e-6;
  const auto mm = static_cast<std::uint64_t>(M);
  for (int late : {0, 1}) {
    std::vector<double> starts(2, 0.0);
    starts[static_cast<std::size_t>(late)] = D;
    const SimResult r = run_at(one_switch(2), program({{send(1, out(0, mm))}, {recv(0, out(0, mm))}}), starts);
    ASSERT_EQ(r.jobs[0].rank_end_s.size(), 2u);
    for (int k = 0; k < 2; ++k) {
      EXPECT_NEAR(r.jobs[0].rank_start_s[k], starts[k], 1e-12);
      EXPECT_NEAR(r.jobs[0].rank_end_s[k], D + a + M / kBw, 1e-9) << "late " << late << " rank " << k;
    }
    EXPECT_NEAR(r.makespan_s, D + a + M / kBw, 1e-9);
  }
}

// Ranks 0 and 1 each send M to rank 2 (its receives posted at its start, 0); rank 1 starts D
// later. Rank 0's flow is alone for D, then both share rank 2's link: rank 0's ends at
// a + 2M/B - D, rank 1's at a + 2M/B. Each sender's own time is a + 2M/B - D, D shorter than in
// lock step (both a + 2M/B), while the receiver's stays a + 2M/B.
TEST(StartSkew, StaggeredSendersOnASharedLinkEachSaveTheStagger) {
  const double M = 4e6, a = kO + 2 * kHop;
  const auto mm = static_cast<std::uint64_t>(M);
  const auto prog = [&] {
    return program({{send(2, out(0, mm))}, {send(2, out(0, mm))}, {recv(0, out(0, mm)), recv(1, out(mm, mm))}});
  };
  for (double D : {0.0, 10e-6, 50e-6}) {
    const SimResult r = run_at(one_switch(3), prog(), {0.0, D, 0.0});
    const auto& j = r.jobs[0];
    EXPECT_NEAR(j.rank_end_s[0] - j.rank_start_s[0], a + 2 * M / kBw - D, 1e-9) << D;
    EXPECT_NEAR(j.rank_end_s[1] - j.rank_start_s[1], a + 2 * M / kBw - D, 1e-9) << D;
    EXPECT_NEAR(j.rank_end_s[2] - j.rank_start_s[2], a + 2 * M / kBw, 1e-9) << D;
  }
}

// The draws: uniform in [0, S], a function of (seed, draw, job) alone; S = a + b x MiB.
TEST(StartSkew, DrawsAreSeededUniformAndTheWidthGrowsWithTheSize) {
  const auto x = draw_start_offsets(8, 1e-3, 7, 3, 0);
  EXPECT_EQ(x, draw_start_offsets(8, 1e-3, 7, 3, 0));
  EXPECT_NE(x, draw_start_offsets(8, 1e-3, 8, 3, 0));
  EXPECT_NE(x, draw_start_offsets(8, 1e-3, 7, 4, 0));
  EXPECT_NE(x, draw_start_offsets(8, 1e-3, 7, 3, 1));
  double sum = 0;
  int n = 0;
  for (int d = 0; d < 500; ++d)
    for (double v : draw_start_offsets(8, 1e-3, 1, d, 0)) {
      EXPECT_GE(v, 0);
      EXPECT_LT(v, 1e-3);
      sum += v;
      ++n;
    }
  EXPECT_NEAR(sum / n, 0.5e-3, 0.02e-3);  // 4,000 draws: the mean's sd is 4.6 us
  NetParams np;
  EXPECT_FALSE(np.start_skew());
  np.start_skew_us = 500;
  np.start_skew_us_per_MiB = 1000;
  EXPECT_TRUE(np.start_skew());
  EXPECT_NEAR(np.start_skew_s(4 << 20), 4.5e-3, 1e-15);
}

// inc bench's figure over K draws: with the message above, rank i's time in draw k is
// max(o_0k, o_1k) - o_ik + a + M/B, so the statistic is the larger over i of the mean of
// (max - o_i), plus a + M/B; the span's mean is that of |o_0 - o_1| plus a + M/B.
TEST(StartSkew, RunSkewedReportsTheMostOverRanksOfTheMeanTime) {
  const double M = 4e6, a = kO + 2 * kHop, S = 200e-6;
  const auto mm = static_cast<std::uint64_t>(M);
  const Topology topo = one_switch(2);
  SimOptions opt;
  opt.np.start_skew_us = S * 1e6;
  opt.start_skew_draws = 5;
  opt.start_skew_seed = 42;
  // run_skewed builds jobs from their params: a 2-rank pairwise Alltoall sends one message
  // each way instead; use a Broadcast of M from rank 0, one message 0 -> 1 unsegmented.
  JobSpec j;
  j.name = "bcast";
  j.params.coll = Collective::broadcast;
  j.params.algo = coll::Algorithm::binomial_tree;
  j.params.nranks = 2;
  j.params.count = mm / 4;
  j.params.segment_bytes = mm;
  j.hosts = {0, 1};
  const SkewedRun r = run_skewed(topo, opt, {j}, {M});
  ASSERT_EQ(r.draws, 5);
  double mean0 = 0, mean1 = 0, span = 0;
  for (int d = 0; d < 5; ++d) {
    const auto o = draw_start_offsets(2, S, 42, d, 0);
    const double hi = std::max(o[0], o[1]);
    mean0 += (hi - o[0]) / 5;
    mean1 += (hi - o[1]) / 5;
    span += std::abs(o[0] - o[1]) / 5;
  }
  EXPECT_NEAR(r.jobs[0].width_s, S, 1e-15);
  EXPECT_NEAR(r.jobs[0].time_s, std::max(mean0, mean1) + a + M / kBw, 1e-9);
  EXPECT_EQ(r.jobs[0].slowest_rank, mean0 >= mean1 ? 0 : 1);
  EXPECT_NEAR(r.jobs[0].mean_rank_s, (mean0 + mean1) / 2 + a + M / kBw, 1e-9);
  EXPECT_NEAR(r.jobs[0].span_s, span + a + M / kBw, 1e-9);
  // The same seed again: the same figures, bit for bit.
  const SkewedRun again = run_skewed(topo, opt, {j}, {M});
  EXPECT_EQ(again.jobs[0].time_s, r.jobs[0].time_s);
  EXPECT_EQ(again.jobs[0].span_s, r.jobs[0].span_s);
}

// Two streams of one job (the same hosts) are the same processes: their ranks start together;
// another job's ranks draw their own starts.
TEST(StartSkew, StreamsOfOneJobShareTheirRanksStarts) {
  const Topology topo = one_switch(8);
  const JobSpec a = job("rs", Collective::reduce_scatter, coll::Algorithm::ring, 4, 1 << 18);
  const JobSpec b = job("ag", Collective::allgather, coll::Algorithm::ring, 4, 1 << 18);
  const JobSpec c = job("other", Collective::reduce_scatter, coll::Algorithm::ring, 4, 1 << 18, 4);
  SimOptions opt;
  opt.np.start_skew_us = 100;
  opt.start_skew_draws = 1;
  const SkewedRun r = run_skewed(topo, opt, {a, b, c}, {1e6, 1e6, 1e6});
  EXPECT_EQ(r.first.jobs[0].rank_start_s, r.first.jobs[1].rank_start_s);
  EXPECT_NE(r.first.jobs[0].rank_start_s, r.first.jobs[2].rank_start_s);
}

// No skew is the run without it: every rank at 0 gives the lock-step times (a symmetric ring,
// folded without starts, simulated whole with them), and a width of 0 gives every rank the job's
// time.
TEST(StartSkew, ZeroOffsetsAreTheRunWithoutStarts) {
  TopoSpec ts;
  ts.kind = TopoKind::fat_tree2;
  ts.hosts = 16;
  ts.radix = 8;
  ts.routing = Routing::dmodk;
  const Topology topo(ts);
  for (auto algo : {coll::Algorithm::ring, coll::Algorithm::rabenseifner, coll::Algorithm::inc}) {
    const JobSpec j = job("j", Collective::allreduce, algo, 16, 1 << 20);
    SimOptions opt;
    opt.matching = Matching::ready;
    Simulator plain(topo, opt);
    plain.add_job(j);
    const SimResult a = plain.run();
    JobSpec z = j;
    z.rank_start_s.assign(16, 0.0);
    Simulator zero(topo, opt);
    zero.add_job(z);
    const SimResult b = zero.run();
    EXPECT_EQ(a.makespan_s, b.makespan_s) << coll::name(algo);
    EXPECT_EQ(a.link_bytes, b.link_bytes) << coll::name(algo);
    EXPECT_EQ(b.jobs[0].fold, 1u);
    for (double e : b.jobs[0].rank_end_s) EXPECT_LE(e, b.makespan_s);
    EXPECT_EQ(*std::max_element(b.jobs[0].rank_end_s.begin(), b.jobs[0].rank_end_s.end()), b.makespan_s);
    opt.np.start_skew_us_per_MiB = 0;
    opt.np.start_skew_us = 0;
    opt.start_skew_draws = 2;
    const SkewedRun s = run_skewed(topo, opt, {j}, {1 << 20});
    EXPECT_EQ(s.jobs[0].time_s, a.jobs[0].time_s()) << coll::name(algo);
    EXPECT_EQ(s.jobs[0].span_s, a.jobs[0].time_s()) << coll::name(algo);
  }
}

// A ring that folds by the symmetry of its routes (one switch: two ranks stand for all) is
// simulated whole once its ranks start apart: the same as with the fold turned off.
TEST(StartSkew, RanksStartingApartAreNotFolded) {
  const Topology topo = one_switch(8);
  JobSpec j = job("ring", Collective::allreduce, coll::Algorithm::ring, 8, 1 << 20);
  SimOptions opt;
  {
    Simulator sim(topo, opt);
    sim.add_job(j);
    ASSERT_GT(sim.run().jobs[0].fold, 1u);  // the premise: without starts it folds
  }
  j.rank_start_s = {0, 3e-6, 1e-6, 7e-6, 2e-6, 0, 5e-6, 4e-6};
  Simulator folded(topo, opt);
  folded.add_job(j);
  const SimResult a = folded.run();
  opt.fold_symmetric = false;
  Simulator whole(topo, opt);
  whole.add_job(j);
  const SimResult b = whole.run();
  EXPECT_EQ(a.jobs[0].fold, 1u);
  EXPECT_EQ(a.makespan_s, b.makespan_s);
  EXPECT_EQ(a.jobs[0].rank_end_s, b.jobs[0].rank_end_s);
  EXPECT_GT(a.makespan_s - 7e-6, a.jobs[0].rank_end_s[0] - 1e-3);  // sanity: a finite run
}

TEST(StartSkew, BadStartsAndKeysAreRefused) {
  JobSpec j;
  j.name = "hand";
  j.params.nranks = 2;
  j.hosts = {0, 1};
  j.rank_start_s = {0.0};
  const Topology two = one_switch(2);  // the simulator keeps a reference
  Simulator sim(two, SimOptions{});
  EXPECT_THROW(sim.add_job(j, program({{send(1, out(0, 8))}, {recv(0, out(0, 8))}})), Error);
  j.rank_start_s = {0.0, -1.0};
  EXPECT_THROW(sim.add_job(j, program({{send(1, out(0, 8))}, {recv(0, out(0, 8))}})), Error);
  const std::string base = "[topology]\nkind = \"single_switch\"\nhosts = 4\n[[job]]\nranks = 4\nbytes = \"1MiB\"\n";
  const Scenario s = parse_scenario(
      base + "[network]\nstart_skew_us = 700\nstart_skew_us_per_MiB = 900\n[sim]\nstart_skew_draws = 5\nstart_skew_seed = 9\n",
      "s.toml");
  EXPECT_DOUBLE_EQ(s.opt.np.start_skew_us, 700);
  EXPECT_DOUBLE_EQ(s.opt.np.start_skew_us_per_MiB, 900);
  EXPECT_EQ(s.opt.start_skew_draws, 5);
  EXPECT_EQ(s.opt.start_skew_seed, 9u);
  EXPECT_EQ(s.topo.uplink_gbps, 0);
  const std::string fat = "[topology]\nkind = \"fat_tree2\"\nhosts = 8\nradix = 5\noversubscription = 4\nuplink_gbps = 2\n"
                          "[[job]]\nranks = 8\nbytes = \"1MiB\"\n";
  EXPECT_EQ(parse_scenario(fat, "s.toml").topo.uplink_gbps, 2);
  EXPECT_THROW(parse_scenario(base + "[network]\nstart_skew_us = -1\n", "s.toml"), Error);
  EXPECT_THROW(parse_scenario(base + "[sim]\nstart_skew_draws = 0\n", "s.toml"), Error);
  SimOptions opt;
  opt.np.start_skew_us = 10;
  opt.start_skew_draws = 0;
  JobSpec k = j;
  k.rank_start_s.clear();
  EXPECT_THROW(run_skewed(one_switch(2), opt, {k}, {8}), Error);
}

// One fat uplink (uplink_gbps) against host-rate up links: two 1 Gb/s hosts of leaf 0 sending M
// to leaf 1 share a 1 Gb/s uplink (o + 4 hops + 2M/B) but not a 2 Gb/s one (o + 4 hops + M/B).
TEST(Topology, UplinkGbpsSetsTheSwitchToSwitchLinks) {
  const double M = 1e6, B = 1e9 / 8;
  const auto mm = static_cast<std::uint64_t>(M);
  TopoSpec ts;
  ts.kind = TopoKind::fat_tree2;
  ts.hosts = 8;
  ts.radix = 5;  // leaves of 4 hosts and 1 up link, 1 spine
  ts.oversubscription = 4;
  ts.link_gbps = 1;
  SimOptions opt;
  opt.np.link_gbps = 1;
  const auto prog = [&] {
    return program({{send(4, out(0, mm))}, {send(5, out(0, mm))}, {}, {}, {recv(0, out(0, mm))}, {recv(1, out(0, mm))}});
  };
  const SimResult thin = run(Topology(ts), opt, prog(), {0, 1, 2, 3, 4, 5});
  EXPECT_NEAR(thin.makespan_s, kO + 4 * kHop + 2 * M / B, 1e-9);
  ts.uplink_gbps = 2;
  const Topology fat(ts);
  EXPECT_NE(fat.describe().find("oversubscription 2:1"), std::string::npos) << fat.describe();
  EXPECT_NEAR(run(fat, opt, prog(), {0, 1, 2, 3, 4, 5}).makespan_s, kO + 4 * kHop + M / B, 1e-9);
  ts.uplink_gbps = -1;
  EXPECT_THROW(Topology{ts}, Error);
}

}  // namespace
}  // namespace inc::sim
