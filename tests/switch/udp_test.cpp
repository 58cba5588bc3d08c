// The same protocol code on real UDP sockets over loopback: a switch thread (or a tree of
// them) and worker threads in one process, with the seeded fault injector in the transport.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <httplib.h>

#include <random>
#include <thread>

#include "src/switch/daemon.hpp"
#include "src/switch/lanes.hpp"
#include "src/switch/topology.hpp"
#include "src/switch/udp.hpp"
#include "tests/switch/sim_util.hpp"

namespace inc::sw {
namespace {

using namespace inc::sw::testing;

proto::auth::Key filled_key(std::uint8_t b) {
  proto::auth::Key k;
  k.fill(b);
  return k;
}
const proto::auth::Key kCtlKey = filled_key(0xC0), kBadKey = filled_key(0xBA);

const Endpoint kLoopback0 = Endpoint::ipv4(0x7F000001, 0);

WorkerConfig udp_worker_cfg(std::uint32_t job, std::uint16_t member, Endpoint sw) {
  WorkerConfig w;
  w.job = job;
  w.member = member;
  w.switch_ep = sw;
  w.rto_initial = 2 * kMillisecond;
  w.rto_max = 50 * kMillisecond;
  w.progress_timeout = 20 * kSecond;  // a deadline, not an assertion: only hit if broken
  w.join_timeout = 20 * kSecond;
  return w;
}

FaultConfig faults(std::uint64_t seed, double loss) {
  FaultConfig f;
  f.loss = loss;
  f.dup = loss / 2;
  f.reorder = loss;
  f.reorder_delay = 3 * kMillisecond;
  f.seed = seed;
  return f;
}

struct ServerThread {
  std::unique_ptr<UdpSwitchServer> s;
  std::thread t;
  ServerThread(const SwitchConfig& c, const FaultConfig& f = {}) : s(std::make_unique<UdpSwitchServer>(c, kLoopback0, f)) {}
  void start() { t = std::thread([this] { s->run(); }); }
  ~ServerThread() {
    s->stop();
    if (t.joinable()) t.join();
  }
};

// Runs `ops(rank)` on one thread per rank; each returns an error string (empty = ok).
void run_ranks(int n, const std::function<std::string(int)>& body) {
  std::vector<std::string> errs(static_cast<std::size_t>(n));
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r) ts.emplace_back([&, r] { errs[std::size_t(r)] = body(r); });
  for (auto& t : ts) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(errs[std::size_t(r)], "") << "rank " << r;
}

// Several collectives back to back on one worker; every result checked exactly.
std::string collectives(UdpWorker& w, int r, int n, std::uint64_t seed, std::uint32_t block) {
  std::mt19937_64 rng(seed);  // same sequence on every rank: inputs are recomputed per rank
  for (int round = 0; round < 3; ++round) {
    const std::uint64_t count = 1 + rng() % 5000;
    // i32 allreduce: rank r contributes (i * 7 + r * 13) wrapping.
    std::vector<std::int32_t> in(count), out(count, 0);
    for (std::uint64_t i = 0; i < count; ++i) in[i] = std::int32_t(std::uint32_t(i * 2654435761u + std::uint64_t(r) * 97));
    if (!w.run(WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in), wbytes(out), count, std::uint32_t(n))))
      return w.protocol().error().message;
    for (std::uint64_t i = 0; i < count; ++i) {
      std::uint32_t e = 0;
      for (int q = 0; q < n; ++q) e += std::uint32_t(i * 2654435761u + std::uint64_t(q) * 97);
      if (std::uint32_t(out[i]) != e) return "i32 allreduce element " + std::to_string(i);
    }
    // fx32 allreduce against the block reference.
    std::vector<std::vector<float>> fin(static_cast<std::size_t>(n), std::vector<float>(count));
    for (int q = 0; q < n; ++q)
      for (std::uint64_t i = 0; i < count; ++i) fin[std::size_t(q)][i] = std::sin(float(i) * 0.01f + float(q)) * float(1 + q);
    std::vector<float> fout(count);
    if (!w.run(WorkerOp::allreduce(NumKind::fx32, ReduceKind::sum, cbytes(fin[std::size_t(r)]), wbytes(fout), count, std::uint32_t(n))))
      return w.protocol().error().message;
    auto ref = fx32_reference(fin, 0, count, block, std::uint32_t(n));
    if (std::memcmp(ref.data(), fout.data(), count * 4) != 0) return "fx32 result differs from reference";
    // allgather of raw bytes.
    const std::uint64_t bytes = 1 + rng() % 3000;
    std::vector<std::uint8_t> gin(bytes), gout(bytes * std::uint64_t(n));
    for (std::uint64_t i = 0; i < bytes; ++i) gin[i] = std::uint8_t(i * 31 + std::uint64_t(r));
    if (!w.run(WorkerOp::allgather(cbytes(gin), wbytes(gout), bytes, std::uint32_t(n), std::uint32_t(r))))
      return w.protocol().error().message;
    for (int q = 0; q < n; ++q)
      for (std::uint64_t i = 0; i < bytes; ++i)
        if (gout[std::uint64_t(q) * bytes + i] != std::uint8_t(i * 31 + std::uint64_t(q))) return "allgather byte";
  }
  if (!w.run(WorkerOp::barrier())) return w.protocol().error().message;
  return "";
}

class UdpLoss : public ::testing::TestWithParam<double> {};

TEST_P(UdpLoss, FlatSwitchWithFaultInjection) {
  const double loss = GetParam();
  const int n = 4;
  SwitchConfig sc;
  sc.slots = 64;
  sc.slot_elems = 128;
  sc.incarnation = 11;
  ServerThread srv(sc, faults(77, loss));
  ASSERT_EQ(srv.s->dataplane().admit({3, n, 16}, 0), proto::Reason::ok);
  srv.start();
  const Endpoint sw = srv.s->local();
  std::printf("fault seed 77 (switch), 100+rank (workers), loss %.2f\n", loss);
  std::vector<OpReport> reps(n);
  run_ranks(n, [&](int r) {
    UdpWorker w(udp_worker_cfg(3, std::uint16_t(r), sw), kLoopback0, faults(100 + std::uint64_t(r), loss));
    auto e = collectives(w, r, n, 5, 128);
    reps[std::size_t(r)] = w.protocol().report();
    return e;
  });
  srv.s->stop();
  srv.t.join();
  auto s = srv.s->dataplane().snapshot();
  EXPECT_GT(s.counters.aggregations, 0u);
  if (loss > 0) {
    std::uint64_t retrans = 0;
    for (auto& r : reps) retrans += r.retransmissions;
    EXPECT_GT(s.counters.duplicates + retrans, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Loss, UdpLoss, ::testing::Values(0.0, 0.01, 0.05, 0.20));

TEST(Udp, HierarchyFromTopologyFile) {
  // Bind first (port 0), then describe the bound addresses in a topology file.
  SwitchConfig spine_cfg;
  spine_cfg.slots = 64;
  spine_cfg.slot_elems = 96;
  ServerThread spine(spine_cfg, faults(1, 0.02));
  SwitchConfig leaf_cfg = spine_cfg;
  leaf_cfg.slot_elems = 128;
  leaf_cfg.parent = spine.s->local();
  ServerThread leaf0(leaf_cfg, faults(2, 0.02)), leaf1(leaf_cfg, faults(3, 0.02));
  std::string text = "switch spine " + spine.s->local().str() + " slot-elements=96\n" +
                     "switch leaf0 " + leaf0.s->local().str() + " parent=spine\n" +
                     "switch leaf1 " + leaf1.s->local().str() + " parent=spine\n" +
                     "job 21 slots=8 leaf0=0,2 leaf1=1,3,4\n";
  std::string err;
  auto topo = parse_topology(text, err);
  ASSERT_TRUE(topo) << err;
  auto plan = plan_job(*topo, topo->jobs[0], err);
  ASSERT_TRUE(plan) << err;
  EXPECT_EQ(plan->root, "spine");
  ASSERT_EQ(plan->specs.size(), 3u);
  EXPECT_EQ(plan->specs["spine"].members, 2);
  EXPECT_EQ(plan->specs["leaf0"].parent_member, 0);
  EXPECT_EQ(plan->specs["leaf1"].parent_member, 1);
  EXPECT_EQ(plan->ranks[3].sw, "leaf1");
  EXPECT_EQ(plan->ranks[3].member, 1);
  ASSERT_EQ(spine.s->dataplane().admit(plan->specs["spine"], 0), proto::Reason::ok);
  ASSERT_EQ(leaf0.s->dataplane().admit(plan->specs["leaf0"], 0), proto::Reason::ok);
  ASSERT_EQ(leaf1.s->dataplane().admit(plan->specs["leaf1"], 0), proto::Reason::ok);
  spine.start();
  leaf0.start();
  leaf1.start();
  const int n = 5;
  run_ranks(n, [&](int r) {
    const auto& a = plan->ranks[std::size_t(r)];
    UdpWorker w(udp_worker_cfg(21, a.member, a.addr), kLoopback0, faults(200 + std::uint64_t(r), 0.02));
    auto e = collectives(w, r, n, 9, 96);  // the path minimum of the slot size is 96
    if (e.empty() && w.protocol().join_info().slot_elems != 96) e = "join_info.slot_elems != 96";
    return e;
  });
  spine.s->stop();
  spine.t.join();
  auto s = spine.s->dataplane().snapshot();
  ASSERT_EQ(s.jobs.size(), 1u);
  EXPECT_GT(s.counters.aggregations, 0u);
  // The spine only ever saw the two leaves, never the five workers.
  EXPECT_EQ(s.jobs[0].joined, 2);
}

TEST(Udp, ControlAdmitReleaseWithKey) {
  SwitchConfig sc;
  sc.slots = 32;
  sc.slot_elems = 64;
  sc.control_key = kCtlKey;
  ServerThread srv(sc);
  srv.start();
  const Endpoint sw = srv.s->local();
  EXPECT_FALSE(udp_admit(sw, kBadKey, {5, 2, 8}, 200 * kMillisecond).has_value());  // refused silently
  auto r = udp_admit(sw, kCtlKey, {5, 2, 8});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, proto::Reason::ok);
  r = udp_admit(sw, kCtlKey, {6, 2, 64});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, proto::Reason::no_slots);
  run_ranks(2, [&](int rank) {
    UdpWorker w(udp_worker_cfg(5, std::uint16_t(rank), sw));
    std::vector<std::int32_t> in(1000, rank + 1), out(1000);
    if (!w.run(WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in), wbytes(out), 1000, 2)))
      return w.protocol().error().message;
    return out == std::vector<std::int32_t>(1000, 3) ? std::string() : std::string("wrong sum");
  });
  r = udp_release(sw, kCtlKey, 5);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, proto::Reason::ok);
  srv.s->stop();
  srv.t.join();
  EXPECT_EQ(srv.s->dataplane().snapshot().slots_allocated, 0u);
}

TEST(Udp, SwitchRestartIsDetectedAndRetrySucceeds) {
  SwitchConfig sc;
  sc.slots = 16;
  sc.slot_elems = 32;
  sc.incarnation = 1;
  auto srv = std::make_unique<ServerThread>(sc);
  ASSERT_EQ(srv->s->dataplane().admit({4, 2, 4}, 0), proto::Reason::ok);
  srv->start();
  const Endpoint sw = srv->s->local();
  const std::uint64_t count = 200000;
  std::vector<std::vector<std::int32_t>> in(2, std::vector<std::int32_t>(count, 1));
  std::vector<std::vector<std::int32_t>> out(2, std::vector<std::int32_t>(count, 0));
  std::vector<std::unique_ptr<UdpWorker>> ws;
  for (int r = 0; r < 2; ++r) ws.push_back(std::make_unique<UdpWorker>(udp_worker_cfg(4, std::uint16_t(r), sw)));
  // Rank 0 starts alone: its chunks wait at the switch for rank 1, which has not started.
  std::thread t0([&] { ws[0]->run(WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in[0]), wbytes(out[0]), count, 2)); });
  for (int i = 0; i < 2000; ++i) {  // until the switch shows chunks in progress (bounded)
    auto snap = srv->s->snapshot();
    if (!snap.jobs.empty() && snap.jobs[0].busy_copies > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // Restart: same address, new incarnation, static job admitted again from configuration.
  srv.reset();
  sc.incarnation = 2;
  auto srv2 = std::make_unique<UdpSwitchServer>(sc, sw);
  ASSERT_EQ(srv2->dataplane().admit({4, 2, 4}, 0), proto::Reason::ok);
  std::thread ts([&] { srv2->run(); });
  t0.join();
  EXPECT_TRUE(ws[0]->protocol().failed());
  EXPECT_EQ(ws[0]->protocol().error().kind, WorkerErrorKind::switch_restarted) << ws[0]->protocol().error().message;
  // Both members retry from a fresh join: the collective completes exactly.
  run_ranks(2, [&](int r) {
    auto& w = *ws[std::size_t(r)];
    w.protocol().reset();
    if (!w.run(WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in[std::size_t(r)]), wbytes(out[std::size_t(r)]), count, 2)))
      return w.protocol().error().message;
    return out[std::size_t(r)] == std::vector<std::int32_t>(count, 2) ? std::string() : std::string("wrong");
  });
  srv2->stop();
  ts.join();
}

TEST(Udp, MalformedDatagramsAreCountedAndServiceContinues) {
  SwitchConfig sc;
  sc.slots = 16;
  sc.slot_elems = 32;
  ServerThread srv(sc);
  ASSERT_EQ(srv.s->dataplane().admit({8, 1, 4}, 0), proto::Reason::ok);
  srv.start();
  UdpPort junk(kLoopback0, 4);
  Outbox o;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 300; ++i) {
    std::size_t len = rng() % 200;
    std::byte* p = o.reserve(len);
    for (std::size_t k = 0; k < len; ++k) p[k] = std::byte(rng());
    if (len >= 5 && i % 2) {
      proto::store_u32(p, proto::kMagic);
      p[4] = std::byte(1);
    }
    o.commit(srv.s->local(), len);
  }
  junk.send_all(o, nullptr, 0);
  UdpWorker w(udp_worker_cfg(8, 0, srv.s->local()));
  std::vector<std::int32_t> in(100, 9), out(100);
  ASSERT_TRUE(w.run(WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in), wbytes(out), 100, 1)))
      << w.protocol().error().message;
  EXPECT_EQ(out, in);
  srv.s->stop();
  srv.t.join();
  EXPECT_GE(srv.s->dataplane().counters().drops, 250u);  // some junk may have been valid-ish joins
}

TEST(Daemon, MetricsEndpointAndStats) {
  SwitchDaemonOptions o;
  o.name = "t0";
  o.bind = kLoopback0;
  o.cfg.slots = 32;
  o.cfg.slot_elems = 64;
  o.jobs.push_back({12, 2, 8});
  o.lanes = 2;  // 16 slots per lane
  o.metrics_port = 0;
  o.stats = true;
  std::atomic<bool> stop{false};
  std::atomic<SwitchLanes*> server{nullptr};
  std::atomic<int> mport{-1};
  char* logbuf = nullptr;
  std::size_t loglen = 0;
  std::FILE* log = open_memstream(&logbuf, &loglen);
  std::thread d([&] {
    int rc = run_switch_daemon(o, stop, log, [&](SwitchLanes& s, int p) {
      mport.store(p);
      server.store(&s);
    });
    EXPECT_EQ(rc, 0);
  });
  while (!server.load()) std::this_thread::yield();
  const Endpoint sw = server.load()->local();
  run_ranks(2, [&](int r) {
    UdpWorker w(udp_worker_cfg(12, std::uint16_t(r), sw));
    std::vector<std::int32_t> in(640, 1), out(640);
    if (!w.run(WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in), wbytes(out), 640, 2)))
      return w.protocol().error().message;
    return std::string();
  });
  // The counters are published by the loop every 100 ms: poll (bounded) until they show up.
  std::string body;
  httplib::Client cli("127.0.0.1", mport.load());
  for (int i = 0; i < 100; ++i) {
    auto res = cli.Get("/metrics");
    ASSERT_TRUE(res) << "metrics endpoint unreachable";
    EXPECT_EQ(res->status, 200);
    body = res->body;
    if (body.find("inc_switch_aggregations_total{switch=\"t0\"} 10\n") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(body.find("inc_switch_aggregations_total{switch=\"t0\"} 10\n"), std::string::npos) << body;
  EXPECT_NE(body.find("inc_job_aggregations_total{switch=\"t0\",job=\"12\"} 10\n"), std::string::npos);
  EXPECT_NE(body.find("inc_switch_drops_total{switch=\"t0\",reason=\"bad_magic\"} 0\n"), std::string::npos);
  EXPECT_NE(body.find("# TYPE inc_switch_slots gauge"), std::string::npos);
  // The workers joined lane 0, learned the 2 lanes and striped the 10 chunks over both (chunk
  // c on lane c mod 2); the total is the sum.
  EXPECT_NE(body.find("inc_switch_lane_aggregations_total{switch=\"t0\",lane=\"0\"} 5\n"), std::string::npos);
  EXPECT_NE(body.find("inc_switch_lane_aggregations_total{switch=\"t0\",lane=\"1\"} 5\n"), std::string::npos);
  EXPECT_NE(body.find("inc_switch_lanes{switch=\"t0\"} 2\n"), std::string::npos);
  EXPECT_NE(body.find("inc_switch_slots{switch=\"t0\"} 32\n"), std::string::npos);
  EXPECT_NE(body.find("inc_switch_slots_allocated{switch=\"t0\"} 16\n"), std::string::npos);
  stop.store(true);
  d.join();
  std::fclose(log);
  std::string text(logbuf, loglen);
  std::free(logbuf);
  EXPECT_NE(text.find("serving 127.0.0.1:"), std::string::npos) << text;
  EXPECT_NE(text.find("aggregations 10"), std::string::npos) << text;
  EXPECT_NE(text.find("job 12: members 2"), std::string::npos) << text;
  EXPECT_NE(text.find(", 2 lanes (ports "), std::string::npos) << text;
  EXPECT_NE(text.find("  lane 1 127.0.0.1:"), std::string::npos) << text;
  EXPECT_NE(text.find("stopped"), std::string::npos) << text;
}

// GSO groups runs of equal-size datagrams per destination, GRO coalesces them on receive:
// whatever the kernel does, every datagram arrives whole, once, in its sender's order. With
// `refs`, some datagrams are a header in the outbox and a payload referenced elsewhere (two
// iovecs), mixed with whole ones in the same GSO runs.
TEST(UdpOffloads, DatagramsSurviveGroupingSegmentationAndCoalescing) {
  for (int variant = 0; variant < 4; ++variant) {
    const bool offload = variant % 2 == 0, refs = variant >= 2;
    const UdpOffload off = offload ? UdpOffload{} : UdpOffload::none();
    UdpPort tx(kLoopback0, 8, off), a(kLoopback0, 8, off), b(kLoopback0, 8, off);
    Outbox o;
    // Interleaved destinations, runs of equal sizes, a shorter datagram ending a run, one large.
    std::vector<std::vector<std::byte>> want_a, want_b;
    std::vector<std::vector<std::byte>> payloads;  // referenced: must outlive the send
    payloads.reserve(300);
    std::mt19937_64 rng(std::uint64_t(variant) + 1);
    for (int i = 0; i < 300; ++i) {
      const bool to_a = (i % 3) != 1;
      std::size_t len = (i % 50 == 49) ? 100 : (i % 97 == 0 ? 40000 : 1056);
      std::vector<std::byte> d(len);
      for (auto& x : d) x = std::byte(rng());
      if (refs && i % 4 != 3) {
        const std::size_t head = 32;
        std::memcpy(o.reserve(head), d.data(), head);
        payloads.emplace_back(d.begin() + head, d.end());
        o.commit_ref(to_a ? a.local() : b.local(), head, payloads.back(), std::uint64_t(i));
      } else {
        std::memcpy(o.reserve(len), d.data(), len);
        o.commit(to_a ? a.local() : b.local(), len);
      }
      (to_a ? want_a : want_b).push_back(std::move(d));
    }
    tx.send_all(o, nullptr, 0);
    EXPECT_EQ(tx.sent_datagrams, 300u);
    EXPECT_EQ(tx.send_errors, 0u);
    if (offload && tx.gso()) { EXPECT_GT(tx.gso_sends, 0u); }
    if (!offload) { EXPECT_EQ(tx.gso_sends, 0u); }
    for (auto* rx : {&a, &b}) {
      const auto& want = rx == &a ? want_a : want_b;
      std::size_t got = 0;
      for (int spins = 0; got < want.size() && spins < 2000; ++spins) {  // bounded, not timed
        rx->wait(10 * kMillisecond);
        std::size_t n = rx->recv_batch();
        for (std::size_t i = 0; i < n; ++i, ++got) {
          ASSERT_LT(got, want.size());
          auto d = rx->datagram(i);
          EXPECT_EQ(rx->from(i), tx.local());
          ASSERT_EQ(d.size(), want[got].size()) << "datagram " << got;
          EXPECT_EQ(std::memcmp(d.data(), want[got].data(), d.size()), 0) << "datagram " << got;
        }
      }
      EXPECT_EQ(got, want.size());
      if (!offload) { EXPECT_EQ(rx->gro_receives, 0u); }
      // Loopback hands a GSO send to a GRO socket whole: fewer receive buffers than datagrams.
      if (offload && tx.gso() && rx->gro()) { EXPECT_GT(rx->gro_receives, 0u); }
    }
  }
}

// ---- lanes ----------------------------------------------------------------------------------
// Until workers stripe over lanes (issue 7, worker side), each lane is driven by its own set of
// UdpWorkers, each of which sees its lane as a complete switch.

struct LanesThread {
  std::unique_ptr<SwitchLanes> l;
  std::atomic<bool> stop{false};
  std::thread t;
  explicit LanesThread(const LanesConfig& c) : l(std::make_unique<SwitchLanes>(c)) {}
  void start() { t = std::thread([this] { l->run(stop); }); }
  ~LanesThread() {
    stop.store(true);
    if (t.joinable()) t.join();
  }
};

LanesConfig lanes_cfg(std::uint16_t lanes, std::uint32_t slots, std::uint32_t slot_elems) {
  LanesConfig c;
  c.cfg.slots = slots;
  c.cfg.slot_elems = slot_elems;
  c.cfg.incarnation = 5;
  c.bind = kLoopback0;
  c.lanes = lanes;
  return c;
}

// Members x lanes workers; lane l's workers allreduce their own slice. Checks results and the
// JoinInfo each lane answered.
std::string run_on_lanes(SwitchLanes& sw, std::uint32_t job, int members, std::uint16_t use_lanes,
                         std::uint16_t expect_lanes, std::uint64_t count) {
  std::vector<std::string> errs(std::size_t(members) * use_lanes);
  std::vector<std::thread> ts;
  for (std::uint16_t l = 0; l < use_lanes; ++l)
    for (int m = 0; m < members; ++m)
      ts.emplace_back([&, l, m] {
        std::string& err = errs[std::size_t(l) * std::size_t(members) + std::size_t(m)];
        WorkerConfig wc = udp_worker_cfg(job, std::uint16_t(m), sw.local(l));
        wc.single_lane = true;  // each lane driven on its own
        UdpWorker w(wc);
        std::vector<std::int32_t> in(count), out(count);
        for (std::uint64_t i = 0; i < count; ++i) in[i] = std::int32_t(i * 3 + std::uint64_t(m) * 1000 + l);
        if (!w.run(WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in), wbytes(out), count,
                                       std::uint32_t(members)))) {
          err = w.protocol().error().message;
          return;
        }
        const auto& info = w.protocol().join_info();
        if (info.lanes != expect_lanes || info.lane != l)
          err = "lane " + std::to_string(l) + " answered lanes " + std::to_string(info.lanes) + " lane " +
                std::to_string(info.lane);
        for (std::uint64_t i = 0; i < count && err.empty(); ++i) {
          std::int64_t e = 0;
          for (int q = 0; q < members; ++q) e += std::int64_t(i * 3 + std::uint64_t(q) * 1000 + l);
          if (out[i] != std::int32_t(e)) err = "lane " + std::to_string(l) + " element " + std::to_string(i);
        }
        w.leave();
      });
  for (auto& t : ts) t.join();
  for (const auto& e : errs)
    if (!e.empty()) return e;
  return "";
}

TEST(Lanes, ConsecutivePortsOwnPoolsAndMergedCounters) {
  LanesThread sw(lanes_cfg(2, 33, 64));  // 16 slots per lane, one unused
  ASSERT_EQ(sw.l->lanes(), 2);
  EXPECT_EQ(sw.l->slots_per_lane(), 16u);
  EXPECT_EQ(sw.l->local(1).port(), sw.l->local(0).port() + 1);
  std::uint16_t refused = 0;
  ASSERT_EQ(sw.l->admit_static({9, 3, 16}, 0, refused), proto::Reason::ok);
  EXPECT_EQ(sw.l->admit_static({10, 3, 1}, 0, refused), proto::Reason::no_slots);  // a lane is full
  sw.start();
  EXPECT_EQ(run_on_lanes(*sw.l, 9, 3, 2, 2, 5000), "");
  sw.stop.store(true);
  sw.t.join();
  auto m = sw.l->snapshot();
  ASSERT_EQ(m.lanes.size(), 2u);
  const std::uint64_t chunks = (5000 + 63) / 64;
  EXPECT_EQ(m.lanes[0].counters.aggregations, chunks);
  EXPECT_EQ(m.lanes[1].counters.aggregations, chunks);
  EXPECT_EQ(m.counters.aggregations, 2 * chunks);  // totals are sums over lanes
  EXPECT_EQ(m.counters.packets_in, m.lanes[0].counters.packets_in + m.lanes[1].counters.packets_in);
  EXPECT_EQ(m.slots_total, 32u);
  EXPECT_EQ(m.slots_allocated, 32u);
  EXPECT_EQ(m.counters.jobs_admitted, 1u);  // the same admission on every lane, counted once
  ASSERT_EQ(m.jobs.size(), 1u);
  EXPECT_EQ(m.jobs[0].counters.aggregations, 2 * chunks);
  EXPECT_EQ(m.jobs[0].spec.slots, 16u);
  EXPECT_GT(m.lanes[0].cpu_seconds, 0.0);
  EXPECT_GT(m.lanes[1].cpu_seconds, 0.0);
  EXPECT_DOUBLE_EQ(m.cpu_seconds, m.lanes[0].cpu_seconds + m.lanes[1].cpu_seconds);
  const std::string prom = render_prometheus(m, "t");
  EXPECT_NE(prom.find("inc_switch_aggregations_total{switch=\"t\"} " + std::to_string(2 * chunks) + "\n"),
            std::string::npos) << prom;
  EXPECT_NE(prom.find("inc_switch_lane_aggregations_total{switch=\"t\",lane=\"1\"} " + std::to_string(chunks) + "\n"),
            std::string::npos) << prom;
  EXPECT_NE(prom.find("inc_switch_lane_cpu_seconds_total{switch=\"t\",lane=\"0\"} "), std::string::npos);
  EXPECT_NE(prom.find("inc_switch_lanes{switch=\"t\"} 2\n"), std::string::npos);
  const std::string stats = render_stats(m, "t");
  EXPECT_NE(stats.find("lane 1 " + sw.l->local(1).str() + ": packets in"), std::string::npos) << stats;
}

TEST(Lanes, HierarchyLaneLJoinsParentLaneLAndReportsTheMinimum) {
  LanesThread spine(lanes_cfg(2, 64, 96));
  LanesConfig lc = lanes_cfg(3, 96, 128);
  lc.cfg.parent = spine.l->local(0);
  LanesThread leaf(lc);
  std::uint16_t refused = 0;
  // Job 4: 2 workers on the leaf, the leaf is member 0 of the spine, 1 worker on the spine.
  ASSERT_EQ(spine.l->admit_static({4, 2, 8}, 0, refused), proto::Reason::ok);
  ASSERT_EQ(leaf.l->admit_static({4, 2, 8, 0}, 0, refused), proto::Reason::ok);
  spine.start();
  leaf.start();
  const std::uint64_t count = 3000;
  std::vector<std::string> errs(6);
  std::vector<std::thread> ts;
  for (std::uint16_t l = 0; l < 2; ++l)
    for (int r = 0; r < 3; ++r)  // ranks 0, 1 at the leaf, rank 2 at the spine (member 1)
      ts.emplace_back([&, l, r] {
        std::string& err = errs[std::size_t(l) * 3 + std::size_t(r)];
        const Endpoint at = r < 2 ? leaf.l->local(l) : spine.l->local(l);
        WorkerConfig wc = udp_worker_cfg(4, std::uint16_t(r < 2 ? r : 1), at);
        wc.single_lane = true;  // each lane driven on its own
        UdpWorker w(wc);
        std::vector<std::int32_t> in(count, (r + 1) * (l + 1)), out(count);
        if (!w.run(WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in), wbytes(out), count, 3))) {
          err = w.protocol().error().message;
          return;
        }
        const auto& info = w.protocol().join_info();
        if (info.lanes != 2 || info.lane != l) err = "lanes " + std::to_string(info.lanes);
        if (info.slot_elems != 96) err = "slot_elems " + std::to_string(info.slot_elems);
        if (out != std::vector<std::int32_t>(count, 6 * (l + 1))) err = "wrong sum on lane " + std::to_string(l);
      });
  for (auto& t : ts) t.join();
  for (std::size_t i = 0; i < errs.size(); ++i) EXPECT_EQ(errs[i], "") << "worker " << i;
  spine.stop.store(true);
  spine.t.join();
  auto s = spine.l->snapshot();
  ASSERT_EQ(s.lanes.size(), 2u);
  // Each spine lane saw its own leaf lane (member 0) and its own worker: nothing crossed lanes.
  const std::uint64_t chunks = (count + 95) / 96;
  EXPECT_EQ(s.lanes[0].counters.aggregations, chunks);
  EXPECT_EQ(s.lanes[1].counters.aggregations, chunks);
}

TEST(Lanes, ControlAdmitReleaseApplyToEveryLane) {
  LanesConfig c = lanes_cfg(2, 64, 64);
  c.cfg.control_key = kCtlKey;
  LanesThread sw(c);
  sw.start();
  EXPECT_FALSE(udp_admit(sw.l->local(0), kBadKey, {5, 2, 8}, 200 * kMillisecond).has_value());
  auto r = udp_admit(sw.l->local(0), kCtlKey, {5, 2, 8}, 10 * kSecond);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, proto::Reason::ok);
  r = udp_admit(sw.l->local(1), kCtlKey, {6, 2, 30}, 10 * kSecond);  // any lane takes control packets
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, proto::Reason::no_slots);  // 32 per lane, 8 used
  r = udp_admit(sw.l->local(0), kCtlKey, {6, 2, 24}, 10 * kSecond);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, proto::Reason::ok);
  r = udp_admit(sw.l->local(0), kCtlKey, {6, 3, 24}, 10 * kSecond);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, proto::Reason::job_exists);
  r = udp_release(sw.l->local(0), kCtlKey, 6, 10 * kSecond);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, proto::Reason::ok);
  // Admitted before the ack: every lane has job 5.
  EXPECT_EQ(run_on_lanes(*sw.l, 5, 2, 2, 2, 2000), "");
  // Job 5: every member left every lane (run_on_lanes leaves): released on every lane by the
  // daemon. The lanes publish every 100 ms: poll (bounded) until both show it.
  SwitchSnapshot m;
  for (int i = 0; i < 200; ++i) {
    m = sw.l->snapshot();
    if (m.lanes.size() == 2 && m.lanes[0].slots_allocated == 0 && m.lanes[1].slots_allocated == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  sw.stop.store(true);
  sw.t.join();
  m = sw.l->snapshot();
  EXPECT_EQ(m.lanes[0].slots_allocated, 0u);
  EXPECT_EQ(m.lanes[1].slots_allocated, 0u);
  EXPECT_TRUE(m.jobs.empty());
  EXPECT_EQ(m.counters.jobs_admitted, 2u);
  EXPECT_EQ(m.counters.jobs_released, 2u);
}

// inc switch --multicast-groups BASE/LEN: a job admitted at run time (by the controller's agent
// or an admit packet) gets the group BASE + (job mod span) at lane 0's port; a static job keeps
// what its configuration says (none here). On loopback the members join the group and read
// every result from it (docs/PROTOCOL.md, "Multicast results").
TEST(Lanes, JobsAdmittedAtRunTimeGetAGroupOfTheRange) {
  LanesConfig c = lanes_cfg(2, 64, 64);
  c.cfg.control_key = kCtlKey;
  c.group_base = 0xEF010200;  // 239.1.2.0/24
  c.group_span = 256;
  LanesThread sw(c);
  std::uint16_t refused = 0;
  ASSERT_EQ(sw.l->admit_static({9, 2, 4}, 0, refused), proto::Reason::ok);
  sw.start();
  ASSERT_EQ(sw.l->admit_on_every_lane({256 + 5, 2, 4}), proto::Reason::ok);  // the controller's path
  auto r = udp_admit(sw.l->local(0), kCtlKey, {7, 2, 4}, 10 * kSecond);      // an admit packet
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, proto::Reason::ok);
  EXPECT_EQ(run_on_lanes(*sw.l, 256 + 5, 2, 2, 2, 3000), "");
  EXPECT_EQ(run_on_lanes(*sw.l, 9, 2, 2, 2, 3000), "");
  SwitchSnapshot m;
  for (int i = 0; i < 200; ++i) {  // the lanes publish every 100 ms
    m = sw.l->snapshot();
    if (m.counters.results_multicast > 0 && m.counters.results > m.counters.results_multicast) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  std::map<std::uint32_t, JobSnapshot> jobs;
  for (const auto& j : m.jobs) jobs[j.spec.job] = j;
  const std::uint16_t port0 = sw.l->local(0).port();
  ASSERT_TRUE(jobs.count(7));
  EXPECT_EQ(jobs[7].spec.multicast, Endpoint::ipv4(0xEF010207, port0));
  EXPECT_FALSE(jobs[9].spec.multicast.valid());
  // The controller's job stays until released (its members left): it ran with 239.1.2.5.
  ASSERT_TRUE(jobs.count(256 + 5));
  EXPECT_EQ(jobs[256 + 5].spec.multicast, Endpoint::ipv4(0xEF010205, port0));
  EXPECT_GT(m.counters.results_multicast, 0u);
  EXPECT_GT(m.counters.results, m.counters.results_multicast);  // job 9's went to each member
}

TEST(Lanes, IdleDynamicJobsExpireOnEveryLane) {
  LanesConfig c = lanes_cfg(3, 30, 16);
  c.cfg.control_key = kCtlKey;
  c.cfg.idle_timeout = 50 * kMillisecond;
  LanesThread sw(c);
  sw.start();
  auto r = udp_admit(sw.l->local(2), kCtlKey, {8, 1, 4}, 10 * kSecond);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, proto::Reason::ok);
  SwitchSnapshot m;
  for (int i = 0; i < 400; ++i) {  // expiry runs every second: bounded poll
    m = sw.l->snapshot();
    if (m.counters.jobs_expired == 1 && m.slots_allocated == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  EXPECT_EQ(m.counters.jobs_expired, 1u);
  EXPECT_EQ(m.slots_allocated, 0u);
  for (const auto& l : m.lanes) EXPECT_EQ(l.counters.jobs_expired, 1u) << "lane " << l.lane;
}

TEST(Lanes, EphemeralBindFindsConsecutivePortsAndTakenPortsFail) {
  // Occupy a port, then ask for lanes that would need it.
  UdpPort taken(kLoopback0, 1);
  const std::uint16_t p = taken.local().port();
  LanesConfig c = lanes_cfg(2, 8, 8);
  c.bind = Endpoint::ipv4(0x7F000001, std::uint16_t(p - 1));
  try {
    SwitchLanes l(c);
    // p - 1 may have been taken too (then lane 0 fails); either way a clear error is required.
    FAIL() << "bound lane 1 on a taken port " << p;
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("lane "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("in use"), std::string::npos) << e.what();
  }
  for (int i = 0; i < 5; ++i) {
    SwitchLanes l(lanes_cfg(4, 8, 8));
    for (std::uint16_t k = 1; k < 4; ++k) EXPECT_EQ(l.local(k).port(), l.local(0).port() + k);
  }
  c.bind = Endpoint::ipv4(0x7F000001, 65535);
  EXPECT_THROW(SwitchLanes{c}, std::runtime_error);
  c = lanes_cfg(3, 2, 8);  // two slots over three lanes
  EXPECT_THROW(SwitchLanes{c}, std::runtime_error);
}

}  // namespace
}  // namespace inc::sw
