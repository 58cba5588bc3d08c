// Tests of the simulator's modelling choices (issue 12): topology shapes the radix can build,
// routing (ECMP, D-mod-k, adaptive) with its collision statistics, and matching semantics
// (dataflow, rendezvous per step, eager below a threshold, the runtime's ready notice). Every expectation is a closed form
// on a hand-written program or a small topology. Small sizes; no timing assertions.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "coll/schedule.hpp"
#include "sim/analytical.hpp"
#include "sim/config.hpp"
#include "sim/contention.hpp"
#include "sim/engine.hpp"
#include "sim/program.hpp"
#include "sim/scenario.hpp"
#include "sim/topology.hpp"

namespace inc::sim {
namespace {

using coll::BufferId;
using coll::Op;
using coll::OpKind;
using coll::Region;

Op make(OpKind k, int peer, Region src, Region dst) {
  Op o;
  o.kind = k;
  o.peer = peer;
  o.src = src;
  o.dst = dst;
  return o;
}
Region out(std::uint64_t off, std::uint64_t bytes) { return {BufferId::output, off, bytes}; }
Op send(int peer, Region r) { return make(OpKind::send, peer, r, {}); }
Op recv(int peer, Region r) { return make(OpKind::recv, peer, {}, r); }

Program program(std::vector<std::vector<Op>> ops) {
  std::vector<coll::RankSchedule> s(ops.size());
  for (std::size_t r = 0; r < ops.size(); ++r) {
    s[r].ops = std::move(ops[r]);
    coll::infer_dependencies(s[r]);
  }
  return link_program(s);
}

SimResult run(const Topology& topo, SimOptions opt, Program prog, std::vector<int> hosts = {}) {
  if (hosts.empty())
    for (int r = 0; r < prog.nranks; ++r) hosts.push_back(r);
  Simulator sim(topo, opt);
  JobSpec j;
  j.name = "hand";
  j.params.nranks = prog.nranks;
  j.hosts = hosts;
  sim.add_job(j, std::move(prog));
  return sim.run();
}

// ---- shapes ------------------------------------------------------------------------------------

TEST(Topology, OversubscriptionTheRadixCannotBuildIsRefused) {
  TopoSpec ts;
  ts.kind = TopoKind::fat_tree2;
  ts.hosts = 8;
  ts.radix = 4;
  ts.oversubscription = 2;  // 4 ports: 2:2 or 3:1, never 2:1
  try {
    Topology t(ts);
    FAIL() << "radix 4 built " << t.describe();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot be built with radix 4"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("3 (3:1)"), std::string::npos) << e.what();
  }
  ts.oversubscription = 3;
  EXPECT_NE(Topology(ts).describe().find("3:1"), std::string::npos);
  ts.radix = 6;
  ts.oversubscription = 2;  // 4 host ports, 2 up
  EXPECT_NE(Topology(ts).describe().find("(4 down, 2 up)"), std::string::npos) << Topology(ts).describe();
  ts.kind = TopoKind::fat_tree3;
  ts.radix = 5;
  ts.oversubscription = 1;
  EXPECT_THROW(Topology{ts}, Error);
}

// ---- routing -----------------------------------------------------------------------------------

constexpr double kBw = 400e9 / 8;  // bytes/s of every link
constexpr double kO = 2e-6, kHop = 0.6e-6;

// 8 hosts, radix 4: leaves of 2 hosts (h0 h1 | h2 h3 | h4 h5 | h6 h7), 2 spines.
Topology small_tree(Routing r, int hosts = 8, int radix = 4) {
  TopoSpec ts;
  ts.kind = TopoKind::fat_tree2;
  ts.hosts = hosts;
  ts.radix = radix;
  ts.routing = r;
  return Topology(ts);
}

// h0 -> h2 and h1 -> `dst` at once, M bytes each, both leaving leaf 0.
SimResult two_flows(Routing r, int dst, double M) {
  const auto m = static_cast<std::uint64_t>(M);
  std::vector<std::vector<Op>> ops(dst + 1);
  ops[0] = {send(2, out(0, m))};
  ops[1] = {send(dst, out(0, m))};
  ops[2] = {recv(0, out(0, m))};
  ops[dst] = {recv(1, out(0, m))};
  return run(small_tree(r), SimOptions{}, program(ops));
}

TEST(Routing, DmodkAndAdaptiveOnSmallFatTree) {
  const double M = 50e6, one = kO + 4 * kHop + M / kBw, shared = kO + 4 * kHop + 2 * M / kBw;
  // D-mod-k: destinations 2 and 4 are both 0 mod 2: one spine, one shared up-link.
  SimResult r = two_flows(Routing::dmodk, 4, M);
  EXPECT_NEAR(r.makespan_s, shared, 1e-9);
  EXPECT_EQ(r.routed_flows, 2u);
  EXPECT_EQ(r.collided_flows, 1u);
  EXPECT_EQ(r.max_link_flows, 2u);
  // Destinations 2 and 5: different spines.
  r = two_flows(Routing::dmodk, 5, M);
  EXPECT_NEAR(r.makespan_s, one, 1e-9);
  EXPECT_EQ(r.collided_flows, 0u);
  // Adaptive: the second flow sees the first one's up-link loaded and takes the other spine.
  r = two_flows(Routing::adaptive, 4, M);
  EXPECT_NEAR(r.makespan_s, one, 1e-9);
  EXPECT_EQ(r.collided_flows, 0u);
  EXPECT_EQ(r.max_link_flows, 1u);
  // ECMP: whichever spines the hash picks, the statistics say which closed form applies.
  for (int dst : {4, 5, 6, 7}) {
    r = two_flows(Routing::ecmp, dst, M);
    EXPECT_NEAR(r.makespan_s, r.collided_flows ? shared : one, 1e-9) << "dst " << dst;
  }
}

TEST(Routing, DmodkShiftPermutationIsCollisionFree) {
  // 16 hosts, radix 8: 4 leaves of 4 hosts, 4 spines. Every host h sends M to h + 4 (mod 16):
  // leaf l's four flows go to destinations 4(l+1) + {0..3}, distinct mod 4 under D-mod-k.
  const double M = 10e6;
  const auto m = static_cast<std::uint64_t>(M);
  std::vector<std::vector<Op>> ops(16);
  for (int h = 0; h < 16; ++h) ops[h] = {send((h + 4) % 16, out(0, m)), recv((h + 12) % 16, out(m, m))};
  const SimResult d = run(small_tree(Routing::dmodk, 16, 8), SimOptions{}, program(ops));
  EXPECT_NEAR(d.makespan_s, kO + 4 * kHop + M / kBw, 1e-9);
  EXPECT_EQ(d.routed_flows, 16u);
  EXPECT_EQ(d.collided_flows, 0u);
  EXPECT_EQ(d.max_link_flows, 1u);
  const SimResult a = run(small_tree(Routing::adaptive, 16, 8), SimOptions{}, program(ops));
  EXPECT_NEAR(a.makespan_s, kO + 4 * kHop + M / kBw, 1e-9);
  EXPECT_EQ(a.collided_flows, 0u);
}

TEST(Routing, DmodkOnFatTree3PicksPortsByDestination) {
  TopoSpec ts;
  ts.kind = TopoKind::fat_tree3;
  ts.hosts = 16;
  ts.radix = 4;  // edges of 2 hosts, 2 up; pods of 2 edges (4 hosts); 2 x 2 cores
  ts.routing = Routing::dmodk;
  const Topology t(ts);
  for (int b = 4; b < 16; ++b) {  // hosts of the other pods
    std::vector<std::uint32_t> p;
    ASSERT_TRUE(t.route(0, b, p));
    ASSERT_EQ(p.size(), 6u);
    // Up to agg (b mod 2) of pod 0, then core (b mod 2).((b / 2) mod 2).
    EXPECT_EQ(t.node_name(t.link(p[1]).to), "agg0." + std::to_string(b % 2)) << b;
    EXPECT_EQ(t.node_name(t.link(p[2]).to), "core" + std::to_string(b % 2) + "." + std::to_string((b / 2) % 2)) << b;
  }
}

// ---- matching semantics --------------------------------------------------------------------

// A hand-written program on one switch under matching m.
SimResult on_one_switch(Matching m, std::uint64_t threshold, std::vector<std::vector<Op>> ops, double notice_us = 0,
                        double reduce_GBps = 0) {
  TopoSpec ts;
  ts.kind = TopoKind::single_switch;
  ts.hosts = static_cast<int>(ops.size());
  SimOptions opt;
  opt.matching = m;
  opt.eager_threshold = threshold;
  opt.np.ready_notice_us = notice_us;
  opt.np.reduce_GBps = reduce_GBps;
  return run(Topology(ts), opt, program(std::move(ops)));
}

// Rank 2 sends M to rank 1; rank 1 receives it, copies it (a step that depends on it), and in
// the same later step receives S from rank 0. One switch: both messages end on h1's link.
SimResult late_receiver(Matching m, std::uint64_t threshold, double M, double S) {
  const auto mm = static_cast<std::uint64_t>(M), ss = static_cast<std::uint64_t>(S);
  return on_one_switch(m, threshold,
                       {{send(1, out(0, ss))},
                        {recv(2, out(0, mm)), make(OpKind::copy, -1, out(0, mm), {BufferId::scratch, 0, mm}),
                         recv(0, out(mm, ss))},
                        {send(1, out(0, mm))}});
}

TEST(Matching, StepsOfAHandWrittenProgram) {
  const std::uint64_t m = 1000;
  const Program p = program({{send(1, out(0, m))},
                             {recv(2, out(0, m)), make(OpKind::copy, -1, out(0, m), {BufferId::scratch, 0, m}),
                              recv(0, out(m, m)), send(2, out(m, m))},
                             {send(1, out(0, m)), recv(1, out(0, m))}});
  const std::vector<std::uint32_t> st = program_steps(p);
  // rank 0: one step; rank 1: recv | copy, recv | send (reads what the recv wrote); rank 2: the
  // recv overwrites what the send reads (write after read): two steps.
  EXPECT_EQ(st, (std::vector<std::uint32_t>{0, 0, 1, 1, 2, 0, 1}));
}

TEST(Matching, DataflowRendezvousAndEagerOnALateReceiver) {
  const double M = 5e6, S = 1e6, a = kO + 2 * kHop;
  // Dataflow: the receive from rank 0 is posted at once; both messages share h1's down link.
  EXPECT_NEAR(late_receiver(Matching::dataflow, 0, M, S).makespan_s, a + (M + S) / kBw, 1e-9);
  // Rendezvous: rank 0's send waits until rank 1 posts that receive, after M arrived.
  EXPECT_NEAR(late_receiver(Matching::rendezvous, 0, M, S).makespan_s, 2 * a + (M + S) / kBw, 1e-9);
  // Eager at or above S: S leaves at once and waits in rank 1's buffer; below S: rendezvous.
  EXPECT_NEAR(late_receiver(Matching::eager, 1000000, M, S).makespan_s, a + (M + S) / kBw, 1e-9);
  EXPECT_NEAR(late_receiver(Matching::eager, 999999, M, S).makespan_s, 2 * a + (M + S) / kBw, 1e-9);
}

// Matching::ready (the runtime's ready notice, src/coll/executor_ready.cpp). Rank 1 receives M
// from rank 0, then M from rank 2 into the same buffer (so that receive is posted only when the
// first is done); ranks 0 and 2 send at once. One switch, o + 2 hops = a.
SimResult two_receives(Matching m, std::uint64_t threshold, double M, double notice_us) {
  const auto mm = static_cast<std::uint64_t>(M);
  return on_one_switch(m, threshold,
                       {{send(1, out(0, mm))}, {recv(0, out(0, mm)), recv(2, out(0, mm))}, {send(1, out(0, mm))}},
                       notice_us);
}

TEST(Matching, ReadyWaitsForTheReceiversNoticeAboveTheThreshold) {
  const double M = 5e6, a = kO + 2 * kHop, N = 7e-6;
  // Dataflow: each message moves once its receive is posted: a + M/B, twice.
  EXPECT_NEAR(two_receives(Matching::dataflow, 0, M, 0).makespan_s, 2 * a + 2 * M / kBw, 1e-9);
  // Ready, M above the threshold: each receive's notice (o + ready_notice + 2 hops back) comes
  // first, then the data (a + M/B).
  EXPECT_NEAR(two_receives(Matching::ready, 0, M, 0).makespan_s, 4 * a + 2 * M / kBw, 1e-9);
  EXPECT_NEAR(two_receives(Matching::ready, 4999999, M, 7).makespan_s, 4 * a + 2 * N + 2 * M / kBw, 1e-9);
  // At the threshold both messages are eager: they leave at once and share h1's down link.
  EXPECT_NEAR(two_receives(Matching::ready, 5000000, M, 7).makespan_s, a + 2 * M / kBw, 1e-9);
  // Rendezvous and eager charge no notice (SimGrid's put/get has none).
  EXPECT_NEAR(two_receives(Matching::eager, 0, M, 7).makespan_s, 2 * a + 2 * M / kBw, 1e-9);
}

TEST(Matching, ReadyNoticeAheadOfTheSendCostsNothing) {
  // Rank 0 reduces M (M gamma) and then sends it; rank 1's receive is posted at once, so its
  // notice is on its way while rank 0 computes: max(M gamma, o + notice + 2 hops) + a + M/B.
  const double M = 4e6, a = kO + 2 * kHop, gamma = 1 / 2e9;  // 2 ms of reduce
  const auto mm = static_cast<std::uint64_t>(M);
  for (double notice_us : {5.0, 3000.0}) {
    const SimResult r = on_one_switch(
        Matching::ready, 64 << 10,
        {{make(OpKind::reduce, -1, out(0, mm), out(0, mm)), send(1, out(0, mm))}, {recv(0, out(0, mm))}}, notice_us, 2);
    const double notice = kO + notice_us * 1e-6 + 2 * kHop;
    EXPECT_NEAR(r.makespan_s, std::max(M * gamma, notice) + a + M / kBw, 1e-9) << notice_us;
  }
}

TEST(Matching, RingInLockstepIsTheSameUnderEverySemantics) {
  // One switch, unsegmented ring Allreduce: every rank posts step k's send and receive together,
  // so all semantics give 2(p-1)(o + 2 hops + n/p beta) (ready: plus one notice).
  const int p = 6;
  const std::uint64_t n = 6 << 20;
  TopoSpec ts;
  ts.kind = TopoKind::single_switch;
  ts.hosts = p;
  const Topology topo(ts);
  for (Matching m : {Matching::dataflow, Matching::rendezvous, Matching::eager, Matching::ready}) {
    for (std::uint64_t thr : {std::uint64_t{0}, n}) {
      SimOptions opt;
      opt.matching = m;
      opt.eager_threshold = thr;
      Simulator sim(topo, opt);
      JobSpec j;
      j.name = "ring";
      j.params.coll = Collective::allreduce;
      j.params.algo = coll::Algorithm::ring;
      j.params.nranks = p;
      j.params.count = n / 4;
      j.params.segment_bytes = n;
      for (int r = 0; r < p; ++r) j.hosts.push_back(r);
      sim.add_job(j);
      double want = 2 * (p - 1) * (kO + 2 * kHop + static_cast<double>(n) / p / kBw);
      // Ready above the threshold: one notice (o + 2 hops), the first step's; every later
      // receive of a ring is posted at the start, so its notice is there in time.
      if (m == Matching::ready && thr < n / p) want += kO + 2 * kHop;
      EXPECT_NEAR(sim.run().makespan_s, want, 1e-9) << name(m) << " threshold " << thr;
    }
  }
}

// ---- model contention --------------------------------------------------------------------------

TEST(ModelContention, RecursiveDoublingOnATwoToOneFatTree) {
  // 16 hosts on a 2:1 fat tree (radix 6: leaves of 4 hosts with 2 up-links, 2 spines), D-mod-k.
  // Recursive doubling exchanges n bytes with rank ^ 1, ^ 2 (inside a leaf: one message per link)
  // and ^ 4, ^ 8 (across leaves: a leaf's 4 messages on 2 up-links, destinations 0 1 0 1 mod 2:
  // 2 per up-link and per down-link). Bandwidth: (1 + 1 + 2 + 2) n beta instead of 4 n beta.
  TopoSpec ts;
  ts.kind = TopoKind::fat_tree2;
  ts.hosts = 16;
  ts.radix = 6;
  ts.oversubscription = 2;
  ts.routing = Routing::dmodk;
  const Topology topo(ts);
  const int p = 16;
  const std::uint64_t n = 16 << 20;
  coll::CollectiveParams cp;
  cp.coll = Collective::allreduce;
  cp.algo = coll::Algorithm::recursive_doubling;
  cp.nranks = p;
  cp.count = n / 4;
  std::vector<int> hosts;
  for (int r = 0; r < p; ++r) hosts.push_back(r);
  const double nb = static_cast<double>(n) / kBw;
  const Contention c = contention(build_program(cp), hosts, topo);
  EXPECT_NEAR(c.bandwidth_s, 6 * nb, 1e-12);
  EXPECT_EQ(c.worst_step_share, 2);
  // The simulator agrees: 2 rounds inside a leaf (2 hops), 2 across (4 hops), each o + hops + bw.
  Simulator sim(topo, SimOptions{});
  JobSpec j;
  j.name = "rd";
  j.params = cp;
  j.hosts = hosts;
  sim.add_job(j);
  const SimResult r = sim.run();
  const double want = 2 * (kO + 2 * kHop) + 2 * (kO + 4 * kHop) + 6 * nb;
  EXPECT_NEAR(r.makespan_s, want, 1e-9);
  EXPECT_NEAR(r.jobs[0].contended_bandwidth_s, 6 * nb, 1e-12);
  // The closed form alone assumes full bisection: 4 n beta.
  NetParams np;
  EXPECT_NEAR(collective_cost(Collective::allreduce, coll::Algorithm::recursive_doubling, p, n, np).bandwidth_s,
              4 * nb, 1e-12);
  // The ring on the same tree sends one message per link and step: no contention, the closed
  // form's 2(p-1)/p n beta.
  cp.algo = coll::Algorithm::ring;
  cp.segment_bytes = n;
  EXPECT_NEAR(contention(build_program(cp), hosts, topo).bandwidth_s, 2.0 * (p - 1) / p * nb, 1e-12);
}

// ---- symmetric schedules -----------------------------------------------------------------------

TEST(Program, RotationSymmetricBuildEqualsLinkingEveryRank) {
  for (int p : {3, 8, 12})
    for (Collective c : {Collective::allreduce, Collective::reduce_scatter, Collective::allgather}) {
      coll::CollectiveParams cp;
      cp.coll = c;
      cp.algo = coll::Algorithm::ring;
      cp.nranks = p;
      cp.count = static_cast<std::uint64_t>(p) * 48;
      cp.segment_bytes = 64;  // 3 segments per chunk
      ASSERT_TRUE(coll::rotation_symmetric(cp));
      std::vector<coll::RankSchedule> all;
      for (int r = 0; r < p; ++r) {
        cp.rank = r;
        all.push_back(coll::build_schedule(cp));
      }
      const Program fast = build_program(cp), full = link_program(all);
      ASSERT_EQ(fast.num_ops(), full.num_ops());
      for (std::size_t i = 0; i < fast.num_ops(); ++i) {
        EXPECT_EQ(fast.ops[i].kind, full.ops[i].kind) << i;
        EXPECT_EQ(fast.ops[i].peer, full.ops[i].peer) << i;
        EXPECT_EQ(fast.ops[i].bytes, full.ops[i].bytes) << i;
        EXPECT_EQ(fast.ops[i].forwards, full.ops[i].forwards) << i;
        EXPECT_EQ(fast.ndeps[i], full.ndeps[i]) << i;
        EXPECT_EQ(fast.match[i], full.match[i]) << i;
        EXPECT_EQ(fast.pair_seq[i], full.pair_seq[i]) << i;
      }
      EXPECT_TRUE(std::equal(fast.rank_begin.begin(), fast.rank_begin.end(), full.rank_begin.begin()));
      EXPECT_TRUE(std::equal(fast.succ_begin.begin(), fast.succ_begin.end(), full.succ_begin.begin()));
    }
}

TEST(Simulator, SymmetricJobsRunAsIfEveryRankWasBuilt) {
  // The one-schedule path (SimOptions::symmetric_schedules) against the full build: the same
  // events, flows, times, link bytes and model contention, on a fat tree with a scattered placement.
  TopoSpec ts;
  ts.kind = TopoKind::fat_tree2;
  ts.hosts = 16;
  ts.radix = 8;
  const Topology topo(ts);
  const std::vector<int> hosts = {3, 9, 14, 0, 6, 11, 1, 12, 5, 8, 15, 2};
  for (Collective c : {Collective::allreduce, Collective::reduce_scatter, Collective::allgather}) {
    SimResult r[2];
    for (int sym = 0; sym < 2; ++sym) {
      SimOptions opt;
      opt.symmetric_schedules = sym == 1;
      Simulator sim(topo, opt);
      JobSpec j;
      j.name = "ring";
      j.params.coll = c;
      j.params.algo = coll::Algorithm::ring;
      j.params.count = 12 * 4096;
      j.params.segment_bytes = 16 << 10;
      j.hosts = hosts;
      sim.add_job(j);
      r[sym] = sim.run();
    }
    EXPECT_EQ(r[0].events, r[1].events) << name(c);
    EXPECT_EQ(r[0].flows, r[1].flows) << name(c);
    EXPECT_EQ(r[0].makespan_s, r[1].makespan_s) << name(c);
    EXPECT_EQ(r[0].link_bytes, r[1].link_bytes) << name(c);
    EXPECT_EQ(r[0].jobs[0].messages, r[1].jobs[0].messages) << name(c);
    EXPECT_DOUBLE_EQ(r[0].jobs[0].contended_bandwidth_s, r[1].jobs[0].contended_bandwidth_s) << name(c);
    EXPECT_GT(r[0].jobs[0].contended_bandwidth_s, 0) << name(c);
  }
}

TEST(Config, ScenarioRoutingAndMatchingKeys) {
  const std::string base = "[topology]\nkind = \"fat_tree2\"\nhosts = 8\nradix = 4\n";
  const std::string job = "[[job]]\ncollective = \"allreduce\"\nalgorithm = \"ring\"\nranks = 8\nbytes = 1024\n";
  const Scenario s = parse_scenario(base + "routing = \"dmodk\"\n[sim]\nmatching = \"eager\"\neager_threshold = \"8KiB\"\n" + job, "s.toml");
  EXPECT_EQ(s.topo.routing, Routing::dmodk);
  EXPECT_EQ(s.opt.matching, Matching::eager);
  EXPECT_EQ(s.opt.eager_threshold, 8u << 10);
  const Scenario d = parse_scenario(base + job, "d.toml");
  EXPECT_EQ(d.topo.routing, Routing::ecmp);
  EXPECT_EQ(d.opt.matching, Matching::dataflow);
  try {
    parse_scenario(base + "routing = \"random\"\n" + job, "bad.toml");
    FAIL() << "routing = random accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.toml:5"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("routing"), std::string::npos) << e.what();
  }
}

// ---- concurrent collectives of one job (streams) ----------------------------------------------

// Reduce_scatter and Allgather of n bytes on the same 16 ranks, alone and at once (FSDP's
// overlap: layer k's gradients reduce while layer k+1's weights gather).
struct Overlap {
  double rs = 0, ag = 0, both = 0;
};
Overlap overlap(coll::Algorithm a, std::uint64_t n) {
  TopoSpec ts;
  ts.kind = TopoKind::fat_tree2;
  ts.hosts = 16;
  ts.radix = 8;
  const Topology topo(ts);
  auto spec = [&](Collective c) {
    JobSpec j;
    j.name = std::string(name(c));
    j.params.coll = c;
    j.params.algo = a;
    j.params.count = count_for_bytes(c, 16, n, DataType::f32);
    for (int r = 0; r < 16; ++r) j.hosts.push_back(r);
    return j;
  };
  Overlap o;
  for (int k = 0; k < 3; ++k) {
    Simulator sim(topo, SimOptions{});
    if (k != 1) sim.add_job(spec(Collective::reduce_scatter));
    if (k != 0) sim.add_job(spec(Collective::allgather));
    const double t = sim.run().makespan_s;
    (k == 0 ? o.rs : k == 1 ? o.ag : o.both) = t;
  }
  return o;
}

TEST(Streams, ScenarioStreamRunsOnItsJobsHosts) {
  const std::string top = "[topology]\nkind = \"fat_tree2\"\nhosts = 8\nradix = 4\n";
  const std::string a = "[[job]]\nname = \"a\"\ncollective = \"reduce_scatter\"\nranks = 4\nbytes = 4096\nplacement = \"random\"\n";
  const Scenario s = parse_scenario(top + a + "[[job]]\nname = \"b\"\ncollective = \"allgather\"\nranks = 4\nbytes = 4096\nstream_of = \"a\"\n" +
                                        "[[job]]\nname = \"c\"\nranks = 4\nbytes = 4096\n", "s.toml");
  const std::vector<JobSpec> j = place_jobs(s, Topology(s.topo));
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[1].hosts, j[0].hosts);  // the stream shares its job's hosts, c takes the other 4
  for (int h : j[2].hosts) EXPECT_EQ(std::count(j[0].hosts.begin(), j[0].hosts.end(), h), 0) << h;
  EXPECT_THROW(parse_scenario(top + a + "[[job]]\nname = \"b\"\nranks = 3\nbytes = 4096\nstream_of = \"a\"\n", "r.toml"), Error);
  EXPECT_THROW(parse_scenario(top + a + "[[job]]\nname = \"b\"\nranks = 4\nbytes = 4096\nstream_of = \"z\"\n", "z.toml"), Error);
}

TEST(Streams, ReduceScatterAndAllgatherOverlapOnCoreIncNotOnTheRing) {
  const std::uint64_t n = 256 << 20;
  const Overlap inc = overlap(coll::Algorithm::inc, n), ring = overlap(coll::Algorithm::ring, n);
  // Core-INC: Reduce_scatter sends n up each host link and receives n/p; Allgather the reverse.
  // Together each direction carries (1 + 1/p) n instead of 2 n one after the other: a speed-up
  // of 2p/(p + 1) = 1.88 at p = 16 (the paper's "up to 2x"), less the pipeline fill.
  const double s_inc = (inc.rs + inc.ag) / inc.both;
  EXPECT_GT(s_inc, 1.7) << inc.rs << " " << inc.ag << " " << inc.both;
  EXPECT_LT(s_inc, 2.0 * 16 / 17 + 1e-9);
  // The ring already fills both directions with each: no gain.
  const double s_ring = (ring.rs + ring.ag) / ring.both;
  EXPECT_NEAR(s_ring, 1.0, 0.05) << ring.rs << " " << ring.ag << " " << ring.both;
}

// ---- token-bucket links (the emulated testbed's shapers) ----------------------------------------

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
                                 {{send(1, out(0, M)), make(OpKind::reduce, -1, out(0, M), out(0, M)), send(1, out(0, M))},
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
    JobSpec j;
    j.name = std::string(coll::name(a));
    j.params.coll = Collective::allreduce;
    j.params.algo = a;
    j.params.count = (1 << 20) / 4;
    for (int h = 0; h < 8; ++h) j.hosts.push_back(h);
    sim.add_job(j);
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
                                {make(OpKind::reduce, -1, out(0, S), out(0, S)), send(2, out(0, S))},
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
    JobSpec j;
    j.name = "ring";
    j.params.coll = Collective::allreduce;
    j.params.algo = coll::Algorithm::ring;
    j.params.count = static_cast<std::uint64_t>(n / 4);
    for (int h = 0; h < 8; ++h) j.hosts.push_back(h);
    sim.add_job(j);
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
