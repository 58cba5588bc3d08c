// Congestion control and loss recovery of the worker on the seeded simulated network with
// bottleneck links: drop-tail queue overflow, loss bursts, rate changes, two jobs sharing a
// link, members with different rates, a late member, a stall. Every case asserts exact results
// and completion, and deterministic bounds that are not timings (fractions of packets, window
// limits, progress shares). A failure prints the seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>

#include "tests/switch/sim_util.hpp"

namespace inc::sw {
namespace {

using namespace inc::sw::testing;

LinkParams link(double gbps, std::uint64_t queue_bytes, Nanos delay = 2'000) {
  LinkParams l;
  l.rate_bps = gbps * 1e9;
  l.queue_bytes = queue_bytes;
  l.delay = delay;
  return l;
}

// Workers with the default timers (what the runtime uses), except a long progress deadline.
WorkerConfig cc_worker(std::uint32_t job, std::uint16_t member, Endpoint sw) {
  WorkerConfig w;
  w.job = job;
  w.member = member;
  w.switch_ep = sw;
  w.progress_timeout = 100 * kSecond;
  w.join_timeout = 100 * kSecond;
  return w;
}

struct Star {
  std::unique_ptr<SimCluster> c;
  Endpoint sw;
  std::vector<Endpoint> eps;
  std::vector<std::pair<SimNetwork::LinkId, SimNetwork::LinkId>> links;
};

SimFaults quiet() {
  SimFaults f;
  f.delay = 2'000;
  f.jitter = 500;
  return f;
}

// One switch, `n` members of job 1 with `slots` slots, member m on links rates[m] both ways.
Star star(std::uint64_t seed, const SimFaults& f, std::uint16_t n, std::uint32_t slots,
          std::uint32_t elems, const std::vector<LinkParams>& per_member) {
  Star s;
  s.c = std::make_unique<SimCluster>(seed, f);
  SwitchConfig sc;
  sc.slots = 4096;
  sc.slot_elems = elems;
  sc.incarnation = seed * 2 + 1;
  s.sw = s.c->add_switch(sc);
  EXPECT_EQ(s.c->sw(0).admit({1, n, slots}, 0), proto::Reason::ok);
  for (std::uint16_t m = 0; m < n; ++m) {
    s.eps.push_back(s.c->add_worker(cc_worker(1, m, s.sw)));
    s.links.push_back(s.c->shape(s.eps.back(), per_member[m], per_member[m]));
  }
  return s;
}

struct Totals {
  std::uint64_t sent = 0, retx = 0, probes = 0, chunks = 0;  // retx: data sent again
};

// Every member submits `ops` i32 allreduces of `count` at once; runs to completion while
// checking the window stays within [1, cap] at every step; checks exact results.
std::string run_allreduces(Star& s, std::uint16_t n, std::uint64_t count, int ops, Totals& t,
                           Nanos limit = 200 * kSecond) {
  std::vector<std::vector<std::int32_t>> in(n, std::vector<std::int32_t>(count));
  std::vector<std::vector<std::vector<std::int32_t>>> out(
      n, std::vector<std::vector<std::int32_t>>(std::size_t(ops), std::vector<std::int32_t>(count)));
  for (std::uint16_t m = 0; m < n; ++m)
    for (std::uint64_t i = 0; i < count; ++i) in[m][i] = std::int32_t(i * 7 + m);
  for (std::uint16_t m = 0; m < n; ++m)
    for (int k = 0; k < ops; ++k)
      s.c->submit(m, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in[m]),
                                         wbytes(out[m][std::size_t(k)]), count, n));
  std::string bad;
  auto step_check = [&] {
    for (std::uint16_t m = 0; m < n; ++m) {
      auto cc = s.c->worker(m).cc_stats();
      if (cc.cwnd < 1 || cc.cwnd > cc.cap)
        bad = "member " + std::to_string(m) + " window " + std::to_string(cc.cwnd) + " outside [1, " +
              std::to_string(cc.cap) + "]";
    }
    for (std::uint16_t m = 0; m < n; ++m)
      if (s.c->worker(m).busy()) return !bad.empty();
    return true;
  };
  if (!s.c->run_until(step_check, limit)) return "did not finish";
  if (!bad.empty()) return bad;
  for (std::uint16_t m = 0; m < n; ++m) {
    auto& w = s.c->worker(m);
    if (w.failed()) return "member " + std::to_string(m) + ": " + w.error().message;
    for (int k = 0; k < ops; ++k)
      for (std::uint64_t i = 0; i < count; ++i) {
        std::int32_t e = 0;
        for (std::uint16_t q = 0; q < n; ++q) e += std::int32_t(i * 7 + q);
        if (out[m][std::size_t(k)][i] != e)
          return "member " + std::to_string(m) + " op " + std::to_string(k) + " element " +
                 std::to_string(i) + " wrong";
      }
    t.sent += w.report().packets_sent;
    t.retx += w.report().retransmissions;
    t.probes += w.report().probes;
    t.chunks += w.report().chunks;
  }
  return {};
}

// A window larger than the bottleneck's queue plus the path: drop-tail overflow. The
// controller finds the queue, backs off, and in a steady run retransmits well under 1% of the
// chunks; the window never leaves [1, slots].
TEST(CC, QueueOverflowOnShapedLinksStaysBelowOnePercentRetransmitted) {
  for (std::uint64_t seed : {1, 2, 3}) {
    const std::uint16_t n = 8;
    // 1 Gb/s, 64 KiB queue (~60 chunks), 512 slots: the cap is far above what the link holds.
    auto s = star(seed, quiet(), n, 512, 256, std::vector<LinkParams>(n, link(1, 64 * 1024)));
    Totals t;
    auto err = run_allreduces(s, n, 1 << 20, 1, t);  // 4 MiB each
    ASSERT_TRUE(err.empty()) << "seed " << seed << ": " << err;
    std::uint64_t drops = 0;
    for (auto [u, d] : s.links) drops += s.c->net().link_stats(u).queue_drops + s.c->net().link_stats(d).queue_drops;
    EXPECT_GT(drops, 0u) << "seed " << seed << ": the queue never overflowed (test too easy)";
    EXPECT_LT(double(t.retx), 0.01 * double(t.sent)) << "seed " << seed << ": " << t.retx << " of " << t.sent;
    for (std::uint16_t m = 0; m < n; ++m) {
      auto cc = s.c->worker(m).cc_stats();
      EXPECT_GT(cc.decreases, 0u) << "seed " << seed << " member " << m;
      EXPECT_LE(cc.cwnd, 512u);
    }
  }
}

// Loss bursts (Gilbert-Elliott: bad state of ~20 packets losing half of them) on every link.
TEST(CC, LossBurstsAreRepairedExactly) {
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    const std::uint16_t n = 5;
    LinkParams l = link(10, 1 << 20);
    l.p_good_bad = 0.002;
    l.p_bad_good = 0.05;
    l.loss_bad = 0.5;
    auto s = star(seed, quiet(), n, 64, 256, std::vector<LinkParams>(n, l));
    Totals t;
    auto err = run_allreduces(s, n, 200'000, 3, t);
    ASSERT_TRUE(err.empty()) << "seed " << seed << ": " << err;
    std::uint64_t burst = 0;
    for (auto [u, d] : s.links) burst += s.c->net().link_stats(u).burst_drops + s.c->net().link_stats(d).burst_drops;
    EXPECT_GT(burst, 0u) << "seed " << seed;
    // Repaired by retransmission, not luck: lost data by its data again, lost results by the
    // probes that ask for them.
    EXPECT_GT(t.retx, 0u) << "seed " << seed;
    EXPECT_GE(t.retx + t.probes, burst / 2) << "seed " << seed;
  }
}

// The link rate drops 10x mid-run and comes back; an outage of 2 ms in between. The stream
// adapts and completes exactly; the queue drops stay a small fraction of the traffic.
TEST(CC, RateChangesAndOutage) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    const std::uint16_t n = 4;
    auto s = star(seed, quiet(), n, 256, 256, std::vector<LinkParams>(n, link(2, 256 * 1024)));
    for (std::uint16_t m = 0; m < n; ++m)
      for (auto id : {s.links[m].first, s.links[m].second}) {
        s.c->net().change_link(id, 5 * kMillisecond, link(0.2, 128 * 1024));
        LinkParams dead = link(0.2, 128 * 1024);
        dead.loss_good = 1;  // an outage: everything lost
        if (m == 1) s.c->net().change_link(id, 30 * kMillisecond, dead);
        s.c->net().change_link(id, 32 * kMillisecond, link(0.2, 128 * 1024));
        s.c->net().change_link(id, 60 * kMillisecond, link(2, 256 * 1024));
      }
    Totals t;
    auto err = run_allreduces(s, n, 500'000, 4, t);
    ASSERT_TRUE(err.empty()) << "seed " << seed << ": " << err;
    EXPECT_GT(s.c->now(), 60 * kMillisecond) << "seed " << seed << ": ran past the changes";
    std::uint64_t drops = 0, pkts = 0;
    for (auto [u, d] : s.links) {
      drops += s.c->net().link_stats(u).queue_drops + s.c->net().link_stats(d).queue_drops;
      pkts += s.c->net().link_stats(u).packets + s.c->net().link_stats(d).packets;
    }
    EXPECT_LT(double(drops), 0.02 * double(pkts)) << "seed " << seed << ": " << drops << " drops";
  }
}

// Two jobs share member hosts' links (their member 0 and 1 sit on the same two hosts). Both
// progress all along (no starvation): at every check the slower job has at least a quarter
// of the faster one's completed chunks; both finish exactly.
TEST(CC, TwoJobsSharingABottleneckBothProgress) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    SimCluster c(seed, quiet());
    SwitchConfig sc;
    sc.slots = 4096;
    sc.slot_elems = 256;
    sc.incarnation = seed;
    Endpoint sw = c.add_switch(sc);
    ASSERT_EQ(c.sw(0).admit({1, 2, 256}, 0), proto::Reason::ok);
    ASSERT_EQ(c.sw(0).admit({2, 2, 256}, 0), proto::Reason::ok);
    // Two hosts, each with one 1 Gb/s link (64 KiB queue) shared by one member of each job.
    std::vector<std::pair<SimNetwork::LinkId, SimNetwork::LinkId>> host;
    for (int h = 0; h < 2; ++h)
      host.emplace_back(c.net().add_link(link(1, 64 * 1024)), c.net().add_link(link(1, 64 * 1024)));
    for (std::uint32_t job : {1u, 2u})
      for (std::uint16_t m = 0; m < 2; ++m) {
        Endpoint e = c.add_worker(cc_worker(job, m, sw));
        c.net().attach(e, host[m].first, host[m].second);
      }
    const std::uint64_t count = 1 << 20;
    std::vector<std::vector<std::int32_t>> in(4, std::vector<std::int32_t>(count)), out(4, std::vector<std::int32_t>(count));
    for (int w = 0; w < 4; ++w)
      for (std::uint64_t i = 0; i < count; ++i) in[std::size_t(w)][i] = std::int32_t(i + std::uint64_t(w) * 3);
    for (int w = 0; w < 4; ++w)
      c.submit(std::size_t(w), WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in[std::size_t(w)]),
                                                   wbytes(out[std::size_t(w)]), count, 2));
    double worst = 1;
    for (Nanos t = 5 * kMillisecond;; t += 5 * kMillisecond) {
      c.run_until([] { return false; }, t);
      const double a = double(c.worker(0).report().chunks), b = double(c.worker(2).report().chunks);
      const bool done_a = !c.worker(0).busy(), done_b = !c.worker(2).busy();
      if (done_a || done_b) break;
      if (a + b > 200) worst = std::min(worst, std::min(a, b) / std::max(a, b));
      if (std::getenv("CC_TEST_VERBOSE"))
        std::printf("seed %llu t=%lld ms: job 1 %.0f chunks (cwnd %u/%u), job 2 %.0f chunks (cwnd %u/%u)\n",
                    (unsigned long long)seed, (long long)(t / kMillisecond), a, c.worker(0).cc_stats().cwnd,
                    c.worker(1).cc_stats().cwnd, b, c.worker(2).cc_stats().cwnd, c.worker(3).cc_stats().cwnd);
    }
    EXPECT_GE(worst, 0.25) << "seed " << seed << ": one job starved the other";
    ASSERT_TRUE(c.run(200 * kSecond));
    for (int w = 0; w < 4; ++w) {
      ASSERT_TRUE(c.worker(std::size_t(w)).done()) << "seed " << seed << ": " << c.worker(std::size_t(w)).error().message;
      const int peer = w ^ 1;
      for (std::uint64_t i = 0; i < count; i += 997)
        ASSERT_EQ(out[std::size_t(w)][i], in[std::size_t(w)][i] + in[std::size_t(peer)][i]) << "seed " << seed;
    }
  }
}

// Members with different link rates (one at 100 Mb/s, the rest at 1 Gb/s): the job runs at
// the slow member's pace; once slow start is over (a first op), the fast members do not flood
// the switch with retransmissions while they wait for the slow one, nor does the slow one
// overflow its queue: under 2% of the packets of the following ops are retransmissions.
TEST(CC, MembersWithDifferentRates) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    const std::uint16_t n = 4;
    std::vector<LinkParams> l(n, link(1, 128 * 1024));
    l[2] = link(0.1, 64 * 1024);
    auto s = star(seed, quiet(), n, 256, 256, l);
    Totals warm, t;
    auto err = run_allreduces(s, n, 250'000, 1, warm);
    ASSERT_TRUE(err.empty()) << "seed " << seed << ": " << err;
    err = run_allreduces(s, n, 250'000, 2, t);
    ASSERT_TRUE(err.empty()) << "seed " << seed << ": " << err;
    // Totals are cumulative per worker report: the steady part is the difference.
    const double sent = double(t.sent - warm.sent), retx = double(t.retx - warm.retx);
    EXPECT_LT(retx, 0.02 * sent) << "seed " << seed << ": " << retx << " of " << sent;
  }
}

// One member arrives 50 ms late (simulated; thousands of round trips). The others' chunks wait
// at the switch: they learn it from `pending` and poll with back-off, so the wait costs a few
// packets per member, not a window's worth per round trip; their windows are not collapsed
// for good (the time-outs were spurious for their paths).
TEST(CC, LateMemberCostsFewPacketsAndKeepsWindows) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    const std::uint16_t n = 4;
    auto s = star(seed, quiet(), n, 128, 256, std::vector<LinkParams>(n, link(10, 1 << 20)));
    // Warm up: one op so that windows and estimates exist.
    Totals t;
    ASSERT_TRUE(run_allreduces(s, n, 100'000, 1, t).empty()) << "seed " << seed;
    std::vector<std::uint64_t> before(n);
    for (std::uint16_t m = 0; m < n; ++m) before[m] = s.c->worker(m).report().packets_sent;
    const std::uint64_t count = 100'000, chunks = (count + 255) / 256;
    std::vector<std::vector<std::int32_t>> in(n, std::vector<std::int32_t>(count, 1)), out(n, std::vector<std::int32_t>(count));
    for (std::uint16_t m = 0; m < n; ++m)
      if (m != 3) s.c->submit(m, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in[m]), wbytes(out[m]), count, n));
    s.c->run_until([] { return false; }, s.c->now() + 50 * kMillisecond);
    s.c->submit(3, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in[3]), wbytes(out[3]), count, n));
    ASSERT_TRUE(s.c->run(s.c->now() + 100 * kSecond));
    for (std::uint16_t m = 0; m < n; ++m) {
      auto& w = s.c->worker(m);
      ASSERT_TRUE(w.done()) << "seed " << seed << ": " << w.error().message;
      ASSERT_EQ(out[m], std::vector<std::int32_t>(count, n)) << "seed " << seed;
      // The op's own traffic is the report since start... counted since `before`:
      const std::uint64_t sent = w.report().packets_sent - before[m];
      if (m != 3) {
        auto cc = w.cc_stats();
        EXPECT_LE(sent, chunks + 64) << "seed " << seed << " member " << m << ": waiting cost too much"
                                     << " (polls " << cc.polls << " timeouts " << cc.timeouts << " probes " << cc.tail_probes
                                     << " fast " << cc.fast_retransmits << " needed " << cc.repairs_needed << "/" << cc.repairs_unneeded
                                     << " answered " << cc.retx_answered << "/" << cc.retx_unanswered << ")";
        EXPECT_GE(w.cc_stats().cwnd, 8u) << "seed " << seed << " member " << m;
      }
    }
  }
}

// Members arriving skewed: every op, member 3 submits 1.2 ms after the others (a slower rank;
// the path's round trip is 0.6 ms). The chunks sent into an empty stream wait at the switch
// for member 3: their round trips measure the skew, not the path, and must not become the
// timer's, which repairs every tail loss (a lost last result, a lost barrier answer): with them,
// every member's estimate grew to skew + path (1.8 ms) and its timer to several times that.
// Seeds 1-3 without loss: the early members' estimate stays at the path's round trip (a state
// of the controller, not a timing). Seeds 4-6 at 5% loss both ways: the early members' timers
// now fire while they wait; every op still completes exactly at every member.
TEST(CC, SkewedArrivalsDoNotStretchTheTimer) {
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    const std::uint16_t n = 4;
    SimFaults f = quiet();
    f.loss = seed > 3 ? 0.05 : 0;
    auto s = star(seed, f, n, 64, 256, std::vector<LinkParams>(n, link(10, 1 << 20, 300'000)));
    const std::uint64_t count = 16 * 256;  // one initial window of chunks
    std::vector<std::vector<std::int32_t>> in(n, std::vector<std::int32_t>(count)), out(n);
    for (std::uint16_t m = 0; m < n; ++m)
      for (std::uint64_t i = 0; i < count; ++i) in[m][i] = std::int32_t(i * 3 + m);
    for (int op = 0; op < 12; ++op) {
      for (std::uint16_t m = 0; m < n; ++m) out[m].assign(count, -1);
      auto submit = [&](std::uint16_t m) {
        s.c->submit(m, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in[m]),
                                           wbytes(out[m]), count, n));
      };
      for (std::uint16_t m = 0; m + 1 < n; ++m) submit(m);
      s.c->run_until([] { return false; }, s.c->now() + 1'200'000);
      submit(n - 1);
      ASSERT_TRUE(s.c->run(s.c->now() + 100 * kSecond)) << "seed " << seed << " op " << op;
      for (std::uint16_t m = 0; m < n; ++m) {
        auto& w = s.c->worker(m);
        ASSERT_FALSE(w.failed()) << "seed " << seed << " op " << op << ": " << w.error().message;
        for (std::uint64_t i = 0; i < count; ++i)
          ASSERT_EQ(out[m][i], std::int32_t(4 * i * 3 + 6)) << "seed " << seed << " op " << op
                                                              << " member " << m << " element " << i;
      }
    }
    if (f.loss > 0) continue;
    for (std::uint16_t m = 0; m + 1 < n; ++m) {
      auto cc = s.c->worker(m).cc_stats();
      EXPECT_LT(cc.srtt, kMillisecond) << "seed " << seed << " member " << m << ": srtt " << cc.srtt
                                       << " rttvar " << cc.rttvar << " rto " << cc.rto
                                       << ": the skew became the path's round trip";
    }
  }
}

// A join_ack read long after it arrived: the worker's thread ran late (a busy host, as over
// UDP under load), so the answer is read after the join's own timer expired, before that
// timer's tick. It counts at most the join's interval (rto_initial) as a round trip: one such
// read of 23 ms had set a member's timer to 70 ms on loopback. Driven by hand (sans-IO: the
// simulated network never reads late), then the member's barrier completes.
TEST(CC, JoinAnswerReadLateDoesNotSetTheTimer) {
  SwitchConfig sc;
  sc.slots = 64;
  sc.slot_elems = 256;
  sc.incarnation = 7;
  SwitchDataPlane sw(sc);
  ASSERT_EQ(sw.admit({1, 1, 64}, 0), proto::Reason::ok);
  const Endpoint swe = Endpoint::node(0), me = Endpoint::node(1);
  WorkerProtocol w(cc_worker(1, 0, swe));
  auto to_switch = [&](Nanos now) {
    TxPacket p;
    while (w.poll_tx(p)) {
      EXPECT_EQ(p.to, swe);
      sw.on_packet(p.bytes, me, now);
    }
  };
  auto to_worker = [&](Nanos now) {
    for (const auto& e : sw.outbox().entries()) w.on_packet(sw.outbox().bytes(e), swe, now);
    sw.outbox().clear();
  };
  w.submit(WorkerOp::barrier(), 0);
  to_switch(10'000);
  const Nanos late = 8 * w.config().rto_initial;  // read 8 join timers after it was sent
  to_worker(late);
  const auto cc = w.cc_stats();
  EXPECT_LE(cc.srtt, w.config().rto_initial) << "the late read became the path's round trip";
  EXPECT_LE(cc.rto, 3 * w.config().rto_initial) << "srtt " << cc.srtt << " rttvar " << cc.rttvar;
  Nanos now = late;
  for (int i = 0; i < 1000 && !w.idle(); ++i) {
    to_switch(now);
    now += 10'000;
    to_worker(now);
    if (now >= w.next_deadline()) w.on_tick(now);
  }
  ASSERT_FALSE(w.failed()) << w.error().message;
  WorkerCompletion c;
  EXPECT_TRUE(w.poll_completion(c)) << "the barrier did not complete";
}

// A stall: member 0's link delays everything by 5 ms for a while (as a descheduled process on
// a busy host would): its timers fire spuriously; F-RTO and `pending` undo the window
// reductions, so the window is not left collapsed.
TEST(CC, SpuriousTimeoutsAreUndone) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    const std::uint16_t n = 3;
    auto s = star(seed, quiet(), n, 128, 256, std::vector<LinkParams>(n, link(10, 1 << 20)));
    for (int k = 0; k < 5; ++k) {
      LinkParams slow = link(10, 1 << 20, 5 * kMillisecond);
      const Nanos at = Nanos(3 + 6 * k) * kMillisecond;
      s.c->net().change_link(s.links[0].second, at, slow);
      s.c->net().change_link(s.links[0].second, at + kMillisecond, link(10, 1 << 20));
    }
    Totals t;
    auto err = run_allreduces(s, n, 2'000'000, 1, t);
    ASSERT_TRUE(err.empty()) << "seed " << seed << ": " << err;
    auto cc = s.c->worker(0).cc_stats();
    EXPECT_GT(cc.timeouts + cc.tail_probes, 0u) << "seed " << seed << ": the stalls did not bite";
    EXPECT_GT(cc.spurious, 0u) << "seed " << seed;
    EXPECT_GE(cc.cwnd, 16u) << "seed " << seed << ": window left collapsed";
  }
}

// A fixed window (WorkerConfig::window = N) is exactly that: never more than N in flight.
TEST(CC, FixedWindowIsHonoured) {
  const std::uint16_t n = 3;
  SimCluster c(4, quiet());
  SwitchConfig sc;
  sc.slot_elems = 64;
  Endpoint sw = c.add_switch(sc);
  ASSERT_EQ(c.sw(0).admit({1, n, 64}, 0), proto::Reason::ok);
  for (std::uint16_t m = 0; m < n; ++m) {
    auto w = cc_worker(1, m, sw);
    w.window = 5;
    c.add_worker(w);
  }
  std::vector<std::vector<std::int32_t>> in(n, std::vector<std::int32_t>(10'000, 2)), out(n, std::vector<std::int32_t>(10'000));
  for (std::uint16_t m = 0; m < n; ++m)
    c.submit(m, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in[m]), wbytes(out[m]), 10'000, n));
  bool ok = true;
  ASSERT_TRUE(c.run_until([&] {
    for (std::uint16_t m = 0; m < n; ++m) {
      auto cc = c.worker(m).cc_stats();
      if (c.worker(m).joined()) ok &= cc.cwnd == 5 && cc.pipe <= 5;
    }
    for (std::uint16_t m = 0; m < n; ++m)
      if (c.worker(m).busy()) return false;
    return true;
  }, 10 * kSecond));
  EXPECT_TRUE(ok);
  for (std::uint16_t m = 0; m < n; ++m) EXPECT_EQ(out[m], std::vector<std::int32_t>(10'000, 6));
}

}  // namespace
}  // namespace inc::sw
