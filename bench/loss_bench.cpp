// Loss recovery and congestion control of the Core-INC worker, measured (docs/PROTOCOL.md,
// "Measured"). Not a test: figures, no assertions.
//
//   loss_bench sim-loss     16 Ki-element f32 allreduce on the seeded simulated network with 10%
//                           duplication and reordering at 0/1/5/20/40% loss: median simulated
//                           time over seeds, ratio to the loss-free time; 50 x 1 MiB at 20%.
//   loss_bench sim-shaped   throughput on shaped host links (drop-tail queues) at 0.1-10 Gb/s,
//                           8 members: goodput / link rate, retransmitted fraction, window.
//   loss_bench udp          the same allreduce over real UDP on loopback (switch and workers as
//                           threads, seeded fault injector) at 0/1/5/20% loss: wall time;
//                           --stats: the loss-recovery counters and every repetition's time;
//                           --trace: every loss-recovery event of every member (stderr).
//
// Every worker uses the default WorkerConfig (congestion-controlled window, default timers)
// except its identity and a long progress deadline.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <iterator>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "src/switch/simnet.hpp"
#include "src/switch/udp.hpp"

namespace inc::sw {
namespace {

WorkerConfig worker_defaults(std::uint32_t job, std::uint16_t member, Endpoint sw) {
  WorkerConfig w;
  w.job = job;
  w.member = member;
  w.switch_ep = sw;
  w.progress_timeout = 600 * kSecond;
  w.join_timeout = 60 * kSecond;
  return w;
}

const char* trace_name(WorkerTraceEvent::Kind k) {
  static const char* names[] = {"done",    "lost",    "RTO",     "probe",   "poll",
                                "pending", "sample",  "suspect", "missing", "resend"};
  return std::size_t(k) < std::size(names) ? names[k] : "?";
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

struct SimNet {
  std::uint16_t members = 8;
  std::uint32_t slots = 64, slot_elems = 256;
  double rate_gbps = 10;       // host links, both directions; 0: unshaped
  std::uint64_t queue_bytes = 0;  // 0: max(64 KiB, 1 ms at the link rate)
  bool testbed_queue = false;     // inc testbed's default instead: max(4 ms, 32 x 9014 B)
  Nanos link_delay = 2'000;
  SimFaults faults;
};

std::uint64_t queue_for(const SimNet& n) {
  if (n.queue_bytes) return n.queue_bytes;
  if (n.testbed_queue)
    return std::max<std::uint64_t>(32 * 9014, std::uint64_t(n.rate_gbps * 1e9 / 8 * 4e-3));
  return std::max<std::uint64_t>(64 * 1024, std::uint64_t(n.rate_gbps * 1e9 / 8 * 1e-3));
}

std::unique_ptr<SimCluster> build(const SimNet& n, std::uint64_t seed) {
  auto c = std::make_unique<SimCluster>(seed, n.faults);
  SwitchConfig sc;
  sc.slots = std::max<std::uint32_t>(1024, n.slots);
  sc.slot_elems = n.slot_elems;
  sc.incarnation = seed * 2 + 1;
  Endpoint sw = c->add_switch(sc);
  c->sw(0).admit({1, n.members, n.slots}, 0);
  for (std::uint16_t m = 0; m < n.members; ++m) {
    Endpoint e = c->add_worker(worker_defaults(1, m, sw));
    if (std::getenv("LOSS_BENCH_TRACE"))
      c->worker(m).set_trace([m, rto = &c->worker(m)](const WorkerTraceEvent& ev) {
        std::fprintf(stderr, "%lld m%u %s c%llu %lld rto %lld\n", (long long)ev.now, m, trace_name(ev.kind),
                     (unsigned long long)ev.chunk, (long long)ev.value, (long long)rto->cc_stats().rto);
      });
    if (n.rate_gbps > 0) {
      LinkParams l;
      l.rate_bps = n.rate_gbps * 1e9;
      l.queue_bytes = queue_for(n);
      l.delay = n.link_delay;
      c->shape(e, l, l);
    }
  }
  return c;
}

// Runs `ops` allreduces of `count` f32 one after the other (each submitted when the previous
// finished everywhere, as a blocking caller would), after a joining barrier. Returns the
// simulated seconds from the first submit to the last completion; -1 if it did not finish.
double run_allreduces(SimCluster& c, std::uint16_t n, std::uint64_t count, int ops, bool queued,
                      OpReport* total = nullptr) {
  for (std::uint16_t m = 0; m < n; ++m) c.submit(m, WorkerOp::barrier());
  if (!c.run(c.now() + 600 * kSecond)) return -1;
  std::vector<std::vector<float>> in(n, std::vector<float>(count)), out(n, std::vector<float>(count));
  for (std::uint16_t m = 0; m < n; ++m)
    for (std::uint64_t i = 0; i < count; ++i) in[m][i] = float((i + m) % 1000);
  const Nanos t0 = c.now();
  for (int k = 0; k < ops; k += queued ? ops : 1) {
    for (int q = 0; q < (queued ? ops : 1); ++q)
      for (std::uint16_t m = 0; m < n; ++m)
        c.submit(m, WorkerOp::allreduce(NumKind::f32, ReduceKind::sum,
                                        std::as_bytes(std::span<const float>(in[m])),
                                        std::as_writable_bytes(std::span<float>(out[m])), count, n));
    if (!c.run(c.now() + 600 * kSecond)) return -1;
    if (std::getenv("LOSS_BENCH_DEBUG"))
      for (std::uint16_t m = 0; m < n; ++m) {
        auto cc = c.worker(m).cc_stats();
        std::printf("  t=%.6f member %u: cwnd %u ssthresh %u srtt %lld rttvar %lld min_rtt %lld rto %lld fast %llu "
                    "timeouts %llu probes %llu spurious %llu decreases %llu undos %llu samples %llu reo %u\n",
                    double(c.now()) / 1e9, m, cc.cwnd, cc.ssthresh, (long long)cc.srtt, (long long)cc.rttvar,
                    (long long)cc.min_rtt, (long long)cc.rto, (unsigned long long)cc.fast_retransmits,
                    (unsigned long long)cc.timeouts, (unsigned long long)cc.tail_probes,
                    (unsigned long long)cc.spurious, (unsigned long long)cc.decreases,
                    (unsigned long long)cc.undos, (unsigned long long)cc.rtt_samples,
                    cc.reorder_window_mult);
      }
    for (std::uint16_t m = 0; m < n; ++m)
      if (c.worker(m).failed()) {
        std::fprintf(stderr, "member %u failed: %s\n", m, c.worker(m).error().message.c_str());
        return -1;
      }
  }
  const double t = double(c.now() - t0) / 1e9;
  for (std::uint64_t i = 0; i < count; ++i) {
    float e = 0;
    for (std::uint16_t m = 0; m < n; ++m) e += float((i + m) % 1000);
    for (std::uint16_t m = 0; m < n; ++m)
      if (out[m][i] != e) {
        std::fprintf(stderr, "WRONG result at member %u element %llu\n", m, (unsigned long long)i);
        return -1;
      }
  }
  if (total) {
    *total = {};
    for (std::uint16_t m = 0; m < n; ++m) {
      WorkerCompletion comp;
      while (c.worker(m).poll_completion(comp)) {
        total->chunks += comp.report.chunks;
        total->packets_sent += comp.report.packets_sent;
        total->retransmissions += comp.report.retransmissions;
        total->probes += comp.report.probes;
        total->bytes_sent += comp.report.bytes_sent;
      }
    }
  }
  return t;
}

int sim_loss(SimNet net, int seeds, std::uint64_t count, const std::vector<double>& only,
             bool series, int first_seed) {
  net.faults.dup = 0.1;
  net.faults.reorder = 0.1;
  std::printf("sim-loss: %u members, %llu x f32 allreduce, %u slots x %u elements, host links %.1f Gb/s "
              "(queue %llu B, delay %lld ns), one-way delay %lld + jitter %lld ns, 10%% dup, 10%% "
              "reorder (up to %lld ns), median of %d seeds\n",
              net.members, (unsigned long long)count, net.slots, net.slot_elems, net.rate_gbps,
              (unsigned long long)queue_for(net), (long long)net.link_delay, (long long)net.faults.delay,
              (long long)net.faults.jitter, (long long)net.faults.reorder_delay, seeds);
  std::printf("%6s %12s %8s %8s %10s %10s %8s\n", "loss", "median_s", "ratio", "goal", "retx/sent",
              "probe/sent", "runs");
  double base = 0;
  const double goals[] = {1, 2, 4, 15, 0};
  const double losses[] = {0, 0.01, 0.05, 0.20, 0.40};
  for (int li = 0; li < 5; ++li) {
    if (!only.empty() && std::find(only.begin(), only.end(), losses[li] * 100) == only.end()) continue;
    std::vector<double> times;
    std::uint64_t retx = 0, probes = 0, sent = 0;
    for (int s = first_seed; s < first_seed + seeds; ++s) {
      SimNet n = net;
      n.faults.loss = losses[li];
      auto c = build(n, std::uint64_t(s) * 7919 + std::uint64_t(li));
      OpReport tot;
      double t = run_allreduces(*c, n.members, count, 1, false, &tot);
      if (t < 0) return 1;
      if (std::getenv("LOSS_BENCH_DEBUG")) std::printf("seed %d: %.4f s\n", s, t);
      times.push_back(t);
      retx += tot.retransmissions;
      probes += tot.probes;
      sent += tot.packets_sent;
    }
    const double med = median(times);
    if (std::getenv("LOSS_BENCH_DEBUG")) {
      std::sort(times.begin(), times.end());
      for (double x : times) std::printf(" %.4f", x);
      std::printf("\n");
    }
    if (li == 0) base = med;
    char goal[16] = "-";
    if (goals[li] > 0 && li > 0) std::snprintf(goal, sizeof goal, "<=%.0fx", goals[li]);
    std::printf("%5.0f%% %12.6f %7.2fx %8s %10.4f %10.4f %8d\n", losses[li] * 100, med, med / base,
                goal, sent ? double(retx) / double(sent) : 0.0, sent ? double(probes) / double(sent) : 0.0,
                seeds);
  }
  if (series) {
    SimNet n = net;
    n.faults.loss = 0.2;
    auto c = build(n, 4242);
    double t = run_allreduces(*c, n.members, 256 * 1024, 50, false);
    auto c0 = build(net, 4242);
    double t0 = run_allreduces(*c0, n.members, 256 * 1024, 50, false);
    std::printf("50 x 1 MiB one after the other: %.4f s at 20%% loss, %.4f s without: %.2fx\n", t,
                t0, t0 > 0 ? t / t0 : 0.0);
  }
  return 0;
}

int sim_shaped(SimNet net, const std::vector<double>& rates, std::uint64_t mib, std::uint64_t seed) {
  net.faults = SimFaults{};
  net.faults.delay = 2'000;
  net.faults.jitter = 500;
  std::printf("sim-shaped: %u members, %llu MiB f32 allreduce, %u slots x %u elements (%u B chunks), "
              "host links shaped both ways (drop-tail queue %s), switch unshaped\n",
              net.members, (unsigned long long)mib, net.slots, net.slot_elems, net.slot_elems * 4,
              net.queue_bytes ? "as given" : net.testbed_queue ? "max(4 ms, 32 x 9014 B)" : "max(64 KiB, 1 ms)");
  std::printf("%8s %10s %10s %9s %9s %10s %10s %8s %8s %10s\n", "Gb/s", "queue_B", "time_s", "goodput",
              "wire_max", "retx_frac", "probe_frac", "cwnd", "ssthr", "q_drops");
  for (double r : rates) {
    SimNet n = net;
    n.rate_gbps = r;
    auto c = build(n, seed);
    const std::uint64_t count = mib * 1024 * 1024 / 4;
    OpReport tot;
    const double t = run_allreduces(*c, n.members, count, 1, false, &tot);
    if (t < 0) return 1;
    // Each member moves the vector up once and down once: the link-rate bound is bytes / rate.
    const double goodput = double(count * 4) * 8 / t / (r * 1e9);
    const double chunk = n.slot_elems * 4.0;
    const double wire_max = chunk / (chunk + proto::kHeaderBytes + 42);
    std::uint64_t drops = 0;
    for (SimNetwork::LinkId l = 0; l < 2 * n.members; ++l) drops += c->net().link_stats(l).queue_drops;
    auto cc = c->worker(0).cc_stats();
    if (std::getenv("LOSS_BENCH_DEBUG"))
      std::printf("  member 0: srtt %lld rttvar %lld min_rtt %lld rto %lld fast %llu timeouts %llu probes %llu "
                  "spurious %llu decreases %llu undos %llu samples %llu reo %u\n",
                  (long long)cc.srtt, (long long)cc.rttvar, (long long)cc.min_rtt, (long long)cc.rto,
                  (unsigned long long)cc.fast_retransmits, (unsigned long long)cc.timeouts,
                  (unsigned long long)cc.tail_probes, (unsigned long long)cc.spurious,
                  (unsigned long long)cc.decreases, (unsigned long long)cc.undos,
                  (unsigned long long)cc.rtt_samples, cc.reorder_window_mult);
    std::printf("%8.1f %10llu %10.5f %8.1f%% %8.1f%% %10.5f %10.5f %8u %8u %10llu\n", r,
                (unsigned long long)queue_for(n), t, goodput * 100, wire_max * 100,
                double(tot.retransmissions) / double(tot.packets_sent),
                double(tot.probes) / double(tot.packets_sent), cc.cwnd, cc.ssthresh,
                (unsigned long long)drops);
  }
  return 0;
}

// --stats: where the time went, summed over the members (all repetitions): timer expiries,
// probes by kind, `missing` answers, polls, proven-spurious repairs, window decreases and undos,
// and the members' final timer and round-trip estimates; then every repetition's time.
void print_cc_totals(const std::vector<WorkerCcStats>& ccs, std::vector<double> times) {
  WorkerCcStats t;
  Nanos srtt = 0, rto = 0, min_rtt = 0;
  for (const auto& c : ccs) {
    t.timeouts += c.timeouts;
    t.tail_probes += c.tail_probes;
    t.gap_probes += c.gap_probes;
    t.probes_missing += c.probes_missing;
    t.polls += c.polls;
    t.spurious += c.spurious;
    t.decreases += c.decreases;
    t.undos += c.undos;
    t.fast_retransmits += c.fast_retransmits;
    srtt = std::max(srtt, c.srtt);
    rto = std::max(rto, c.rto);
    min_rtt = std::max(min_rtt, c.min_rtt);
  }
  std::printf("        timeouts %llu tail_probes %llu gap_probes %llu missing %llu polls %llu spurious %llu "
              "decreases %llu undos %llu | max srtt %lld min_rtt %lld rto %lld ns\n        times:",
              (unsigned long long)t.timeouts, (unsigned long long)t.tail_probes,
              (unsigned long long)t.gap_probes, (unsigned long long)t.probes_missing,
              (unsigned long long)t.polls, (unsigned long long)t.spurious, (unsigned long long)t.decreases,
              (unsigned long long)t.undos, (long long)srtt, (long long)min_rtt, (long long)rto);
  std::sort(times.begin(), times.end());
  for (double x : times) std::printf(" %.4f", x);
  std::printf("\n");
}

int udp_loss(std::uint16_t members, int reps, std::uint64_t count, std::uint32_t slots,
             std::uint32_t slot_elems, bool stats, bool trace, const std::vector<double>& only) {
  std::printf("udp: loopback, switch + %u workers as threads, %llu x f32 allreduce, %u slots x %u "
              "elements, fault injector on every sender: 10%% dup, 10%% reorder (up to 2 ms), "
              "median of %d\n",
              members, (unsigned long long)count, slots, slot_elems, reps);
  std::printf("%6s %12s %8s %8s %10s %10s\n", "loss", "median_s", "ratio", "goal", "retx/sent",
              "probe/sent");
  const double losses[] = {0, 0.01, 0.05, 0.20};
  const double goals[] = {1, 2, 4, 15};
  double base = 0;
  for (int li = 0; li < 4; ++li) {
    if (li > 0 && !only.empty() && std::find(only.begin(), only.end(), losses[li] * 100) == only.end())
      continue;  // (the loss-free row always runs: it is the baseline)
    FaultConfig f;
    f.loss = losses[li];
    f.dup = 0.1;
    f.reorder = 0.1;
    f.seed = 1000 + std::uint64_t(li);
    SwitchConfig sc;
    sc.slots = std::max<std::uint32_t>(1024, slots);
    sc.slot_elems = slot_elems;
    sc.incarnation = 5 + std::uint64_t(li);
    UdpSwitchServer srv(sc, Endpoint::ipv4(0x7F000001, 0), f);
    srv.dataplane().admit({1, members, slots}, 0);
    std::thread st([&] { srv.run(); });
    std::vector<double> times(std::size_t(reps), 0);
    std::vector<std::uint64_t> retx(members, 0), probes(members, 0), sent(members, 0);
    std::vector<std::thread> ts;
    std::vector<std::string> errs(members);
    std::vector<WorkerCcStats> ccs(members);
    for (std::uint16_t m = 0; m < members; ++m)
      ts.emplace_back([&, m] {
        FaultConfig wf = f;
        wf.seed = f.seed * 100 + m;
        UdpWorker w(worker_defaults(1, m, srv.local()), Endpoint::ipv4(0x7F000001, 0), wf);
        std::vector<float> in(count, float(m)), out(count);
        if (trace)  // (times: since this loss rate's switch started, in ms)
          w.protocol().set_trace([m, &w, t0 = monotonic_now()](const WorkerTraceEvent& ev) {
            std::fprintf(stderr, "%9.3f ms m%u %s c%llu %lld rto %lld\n", double(ev.now - t0) / 1e6, m,
                         trace_name(ev.kind), (unsigned long long)ev.chunk, (long long)ev.value,
                         (long long)w.protocol().cc_stats().rto);
          });
        for (int k = 0; k < reps; ++k) {
          if (!w.run(WorkerOp::barrier())) {
            errs[m] = w.protocol().error().message;
            return;
          }
          auto t0 = std::chrono::steady_clock::now();
          if (!w.run(WorkerOp::allreduce(NumKind::f32, ReduceKind::sum,
                                         std::as_bytes(std::span<const float>(in)),
                                         std::as_writable_bytes(std::span<float>(out)), count,
                                         members))) {
            errs[m] = w.protocol().error().message;
            return;
          }
          const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          if (m == 0) times[std::size_t(k)] = dt;
          retx[m] += w.protocol().report().retransmissions;
          probes[m] += w.protocol().report().probes;
          sent[m] += w.protocol().report().packets_sent;
          const float e = float(members) * float(members - 1) / 2;
          for (float x : out)
            if (x != e) {
              errs[m] = "WRONG result";
              return;
            }
        }
        ccs[m] = w.protocol().cc_stats();
      });
    for (auto& t : ts) t.join();
    srv.stop();
    st.join();
    for (auto& e : errs)
      if (!e.empty()) {
        std::fprintf(stderr, "udp loss %.2f: %s\n", losses[li], e.c_str());
        return 1;
      }
    const double med = median(times);
    if (li == 0) base = med;
    char goal[16] = "-";
    if (li > 0) std::snprintf(goal, sizeof goal, "<=%.0fx", goals[li]);
    const double rx = double(std::accumulate(retx.begin(), retx.end(), 0ull));
    const double sx = double(std::accumulate(sent.begin(), sent.end(), 0ull));
    const double px = double(std::accumulate(probes.begin(), probes.end(), 0ull));
    std::printf("%5.0f%% %12.6f %7.2fx %8s %10.4f %10.4f\n", losses[li] * 100, med, med / base, goal,
                sx > 0 ? rx / sx : 0.0, sx > 0 ? px / sx : 0.0);
    if (stats) print_cc_totals(ccs, times);
  }
  return 0;
}

std::vector<double> parse_list(const std::string& s) {
  std::vector<double> v;
  std::size_t p = 0;
  while (p < s.size()) {
    std::size_t q = s.find(',', p);
    if (q == std::string::npos) q = s.size();
    v.push_back(std::stod(s.substr(p, q - p)));
    p = q + 1;
  }
  return v;
}

}  // namespace
}  // namespace inc::sw

int main(int argc, char** argv) {
  using namespace inc::sw;
  CLI::App app{"Loss recovery and congestion control of the Core-INC worker (docs/PROTOCOL.md)",
               "loss_bench"};
  app.require_subcommand(1);
  SimNet net;
  int seeds = 9, reps = 9, first_seed = 1;
  std::uint64_t count = 16 * 1024, mib = 16;
  std::string rates = "0.1,1,2,5,10", losses;
  bool no_series = false;
  std::uint64_t shaped_seed = 99;
  auto add_net = [&](CLI::App* s) {
    s->add_option("--members", net.members, "members (workers)")->check(CLI::Range(1, 64));
    s->add_option("--slots", net.slots, "slots of the job")->check(CLI::Range(1, 4096));
    s->add_option("--slot-elems", net.slot_elems, "elements per slot (chunk)")->check(CLI::Range(1, 16358));
  };
  auto* loss = app.add_subcommand("sim-loss", "allreduce under loss on the simulated network");
  add_net(loss);
  loss->add_option("--seeds", seeds, "seeds per loss rate")->check(CLI::Range(1, 1000));
  loss->add_option("--count", count, "f32 elements");
  loss->add_option("--rate-gbps", net.rate_gbps, "host link rate (0: unshaped)");
  loss->add_option("--losses", losses, "only these loss rates (percent, comma-separated)");
  loss->add_flag("--no-series", no_series, "skip the 50 x 1 MiB series");
  loss->add_option("--first-seed", first_seed, "first seed");
  loss->add_option("--delay-ns", net.faults.delay, "one-way base delay of every datagram");
  loss->add_option("--jitter-ns", net.faults.jitter, "uniform extra delay of every datagram");
  loss->add_option("--reorder-ns", net.faults.reorder_delay,
                   "largest extra delay of a reordered datagram (udp: 2000000)");
  auto* shaped = app.add_subcommand("sim-shaped", "throughput on shaped links, simulated");
  add_net(shaped);
  shaped->add_option("--rates", rates, "host link rates in Gb/s, comma-separated");
  shaped->add_option("--mib", mib, "MiB per allreduce");
  shaped->add_option("--queue-bytes", net.queue_bytes, "drop-tail queue per link (0: max(64 KiB, 1 ms))");
  shaped->add_option("--seed", shaped_seed, "seed of the simulated network (jitter)");
  shaped->add_flag("--testbed-queue", net.testbed_queue,
                   "queues as inc testbed's default (4 ms at the rate, at least 32 x 9014 B)");
  auto* udp = app.add_subcommand("udp", "allreduce under loss over UDP on loopback");
  add_net(udp);
  udp->add_option("--reps", reps, "repetitions per loss rate")->check(CLI::Range(1, 1000));
  udp->add_option("--count", count, "f32 elements");
  udp->add_option("--losses", losses, "only these loss rates (percent, comma-separated; 0 always runs)");
  bool stats = false, trace = false;
  udp->add_flag("--trace", trace, "print every loss-recovery event of every member to stderr");
  udp->add_flag("--stats", stats, "print the loss-recovery counters and every repetition's time");
  CLI11_PARSE(app, argc, argv);
  if (*loss) return sim_loss(net, seeds, count, parse_list(losses), !no_series, first_seed);
  if (*shaped) {
    if (!shaped->count("--slots")) net.slots = 256;
    return sim_shaped(net, parse_list(rates), mib, shaped_seed);
  }
  return udp_loss(net.members, reps, count, net.slots, net.slot_elems, stats, trace, parse_list(losses));
}
