// switch_bench udp: end-to-end allreduce over UDP loopback (a SwitchLanes daemon core with
// --lanes L lane threads + worker threads) next to raw UDP loopback measured by the same harness
// (see switch_bench.cpp's header for the options).
#include <algorithm>
#include <optional>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>
#include <CLI/CLI.hpp>
#include "src/proto/gmac.hpp"
#include "src/switch/arith.hpp"
#include "src/switch/dataplane.hpp"
#include "src/switch/lanes.hpp"
#include "src/switch/udp.hpp"
#include "src/switch/worker.hpp"
#include "bench/switch_bench.hpp"

using namespace inc::sw;
namespace proto = inc::proto;

namespace inc_switch_bench {
namespace {

// ---- UDP loopback -----------------------------------------------------------------------------

const Endpoint kLo = Endpoint::ipv4(0x7F000001, 0);

struct UdpRun {
  double seconds = 0;
  double switch_cpu = 0;         // CPU seconds of the lane threads during the run
  std::uint64_t datagrams = 0;   // datagrams the switch received
  std::uint64_t recv_calls = 0;  // its recvmmsg calls
  std::uint64_t refused = 0;     // of the two probe datagrams after the run, counted unauthenticated
};

// Proof that a run was keyed or unkeyed as claimed, after its timed part: one unsealed
// contribution and one sealed under a key the job does not have, sent to lane 0 from a fresh
// socket. A keyed job refuses both (`unauthenticated`: the switch opened the forged one and
// found its tag wrong); an unkeyed one refuses only the sealed one. Waits (bounded) until the
// switch's published counters show both received; exits on anything else.
std::uint64_t check_keyed(SwitchLanes& sw, bool keyed, std::uint32_t E) {
  const auto unauth = [](const SwitchSnapshot& s) {
    return s.counters.drops_by_reason[static_cast<unsigned>(proto::Reason::unauthenticated)];
  };
  const auto before = sw.snapshot();
  const bool spec_keyed = !before.jobs.empty() && before.jobs.front().spec.key.has_value();
  UdpPort port(kLo, 1, UdpOffload::none());
  Outbox out;
  proto::Header h;
  h.type = proto::PacketType::data;
  h.elem = proto::ElemType::i32;
  h.op = proto::WireOp::sum;
  h.job = 1;
  h.member = 0;
  h.chunk = 1u << 30;  // far beyond the run's chunks
  h.count = std::uint16_t(std::min<std::uint32_t>(E, 16));
  const std::size_t n = proto::kHeaderBytes + std::size_t(h.count) * 4;
  std::vector<std::byte> p(n + proto::kAuthTrailerBytes, std::byte{1});
  proto::encode_header(h, p.data());
  std::memcpy(out.reserve(n), p.data(), n);
  out.commit(sw.local(0), n);
  proto::auth::Sealer forger(proto::auth::random_key(), proto::auth::random_instance(), 1);
  const std::size_t sealed = forger.seal(p.data(), n);
  std::memcpy(out.reserve(sealed), p.data(), sealed);
  out.commit(sw.local(0), sealed);
  port.send_all(out, nullptr, 0);
  SwitchSnapshot now = sw.snapshot();
  for (int i = 0; i < 200 && now.counters.packets_in < before.counters.packets_in + 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    now = sw.snapshot();
  }
  const std::uint64_t refused = unauth(now) - unauth(before);
  const std::uint64_t want = keyed ? 2 : 1;
  if (now.counters.packets_in < before.counters.packets_in + 2 || refused != want || spec_keyed != keyed) {
    std::fprintf(stderr,
                 "udp inc bench: the %s run is not what it claims: the switch's job has %s key, %llu of 2 probe "
                 "datagrams received, %llu refused as unauthenticated (expected %llu)\n",
                 keyed ? "keyed" : "unkeyed", spec_keyed ? "a" : "no",
                 (unsigned long long)(now.counters.packets_in - before.counters.packets_in),
                 (unsigned long long)refused, (unsigned long long)want);
    std::exit(1);
  }
  return refused;
}

// One worker's loop over the lanes: one socket, one WorkerProtocol per lane (each lane is a
// switch of its own), each allreducing its 1/L share of the vector. This is the work a striping
// worker does (per-lane windows, one socket), without depending on the worker side of lanes.
bool run_lane_worker(UdpPort& port, std::vector<std::unique_ptr<WorkerProtocol>>& lanes,
                     const std::vector<Endpoint>& eps, std::vector<WorkerOp> ops) {
  Nanos now = monotonic_now();
  for (std::size_t l = 0; l < lanes.size(); ++l) lanes[l]->start(std::move(ops[l]), now);
  auto busy = [&] {
    for (auto& p : lanes)
      if (p->busy()) return true;
    return false;
  };
  while (busy()) {
    now = monotonic_now();
    Nanos until = now + 50 * kMillisecond;
    for (auto& p : lanes) {
      port.send_all(p->outbox(), nullptr, now);
      until = std::min(until, p->next_deadline());
    }
    port.wait(until - now);
    for (int round = 0; round < 64; ++round) {
      std::size_t n = port.recv_batch();
      if (n == 0) break;
      now = monotonic_now();
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t l = 0; l < eps.size(); ++l)
          if (port.from(i) == eps[l]) {
            lanes[l]->on_packet(port.datagram(i), port.from(i), now);
            break;
          }
      for (auto& p : lanes) port.send_all(p->outbox(), nullptr, now);
    }
    now = monotonic_now();
    for (auto& p : lanes)
      if (now >= p->next_deadline()) p->on_tick(now);
  }
  for (auto& p : lanes)
    if (!p->done()) return false;
  return true;
}

// INC allreduce: W workers, `count` i32 each, L lanes with K slots each, slot size E; `keyed`:
// the job is keyed with g_key() (every packet sealed by its sender, checked by its receiver).
int g_batch = 64;
const proto::auth::Key& g_key() {
  static const proto::auth::Key k = proto::auth::random_key();
  return k;
}

UdpRun run_udp_inc(int W, std::uint64_t count, std::uint32_t E, int K, std::uint16_t L, UdpOffload off, bool keyed) {
  std::optional<proto::auth::Key> key;
  if (keyed) key = g_key();
  LanesConfig lc;
  lc.cfg.slots = std::uint32_t(K) * L;
  lc.cfg.slot_elems = E;
  lc.bind = kLo;
  lc.lanes = L;
  lc.batch = std::size_t(g_batch);
  lc.offload = off;
  SwitchLanes sw(lc);
  std::uint16_t refused = 0;
  if (sw.admit_static({1, std::uint16_t(W), std::uint32_t(K), proto::kNoMember, key}, 0, refused) != proto::Reason::ok) {
    std::fprintf(stderr, "udp inc bench: admission refused\n");
    std::exit(1);
  }
  std::atomic<bool> stop{false};
  std::thread st([&] { sw.run(stop); });
  std::vector<Endpoint> eps;
  for (std::uint16_t l = 0; l < L; ++l) eps.push_back(sw.local(l));
  std::vector<std::thread> ts;
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<double> t_end(static_cast<std::size_t>(W));
  std::atomic<int> failures{0};
  // Lane l allreduces elements [l * share, ...): whole slots per lane, the last lane the rest.
  const std::uint64_t share = (count / L + E - 1) / E * E;
  for (int r = 0; r < W; ++r)
    ts.emplace_back([&, r] {
      UdpPort port(kLo, std::size_t(g_batch), off);
      std::vector<std::unique_ptr<WorkerProtocol>> lanes;
      for (std::uint16_t l = 0; l < L; ++l) {
        WorkerConfig c;
        c.job = 1;
        c.member = std::uint16_t(r);
        c.switch_ep = eps[l];
        c.single_lane = true;  // this bench stripes over the lanes itself
        c.rto_initial = 20 * kMillisecond;
        c.progress_timeout = 30 * kSecond;
        if (key) {
          c.key = key;
          c.instance = proto::auth::random_instance();
          c.seq_base = 1;
        }
        lanes.push_back(std::make_unique<WorkerProtocol>(c));
      }
      std::vector<std::int32_t> in(count, r + 1), out(count);
      std::vector<WorkerOp> ops;
      for (std::uint16_t l = 0; l < L; ++l) ops.push_back(WorkerOp::barrier());
      if (!run_lane_worker(port, lanes, eps, std::move(ops))) ++failures;  // join + warm up
      ++ready;
      while (!go.load()) std::this_thread::yield();
      ops.clear();
      for (std::uint16_t l = 0; l < L; ++l) {
        const std::uint64_t lo = std::min(count, share * l), hi = l + 1 == L ? count : std::min(count, share * (l + 1));
        ops.push_back(WorkerOp::allreduce(NumKind::i32, ReduceKind::sum,
                                          std::as_bytes(std::span(in)).subspan(lo * 4, (hi - lo) * 4),
                                          std::as_writable_bytes(std::span(out)).subspan(lo * 4, (hi - lo) * 4),
                                          hi - lo, std::uint32_t(W)));
      }
      if (!run_lane_worker(port, lanes, eps, std::move(ops))) ++failures;
      t_end[std::size_t(r)] = now_s();
      if (out[0] != W * (W + 1) / 2 || out[count - 1] != W * (W + 1) / 2) ++failures;
    });
  while (ready.load() < W) std::this_thread::yield();
  // The lanes publish their counters and CPU time every 100 ms: let the warm-up be published.
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  const auto before = sw.snapshot();
  const double t0 = now_s();
  go.store(true);
  for (auto& t : ts) t.join();
  // Let the run's last counters and CPU time be published, then probe what the job is.
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  const auto after = sw.snapshot();
  const std::uint64_t probes_refused = failures ? 0 : check_keyed(sw, keyed, E);
  stop.store(true);
  st.join();
  if (failures) {
    std::fprintf(stderr, "udp inc bench: %d failures\n", failures.load());
    std::exit(1);
  }
  UdpRun u;
  u.refused = probes_refused;
  u.seconds = *std::max_element(t_end.begin(), t_end.end()) - t0;
  u.switch_cpu = after.cpu_seconds - before.cpu_seconds;
  u.datagrams = after.counters.packets_in - before.counters.packets_in;
  for (std::uint16_t l = 0; l < L; ++l) u.recv_calls += sw.lane(l).port().recv_calls;
  return u;
}

// Raw UDP with the same sockets, batching and event loop: L echo threads ("lanes") return every
// datagram to its sender; each worker keeps K datagrams of the same size in flight per lane and
// sends as many as the INC run did (count / E per worker), spread over the lanes. Timed-out
// datagrams are resent (loopback may drop).
UdpRun run_udp_echo(int W, std::uint64_t count, std::uint32_t E, int K, std::uint16_t L, UdpOffload off) {
  std::vector<std::unique_ptr<UdpPort>> sws;
  for (std::uint16_t l = 0; l < L; ++l) sws.push_back(std::make_unique<UdpPort>(kLo, std::size_t(g_batch), off));
  std::atomic<bool> stop{false};
  std::vector<double> cpu(L);
  std::vector<std::thread> echo;
  for (std::uint16_t l = 0; l < L; ++l)
    echo.emplace_back([&, l] {
      UdpPort& sw = *sws[l];
      Outbox out;
      while (!stop.load(std::memory_order_relaxed)) {
        sw.wait(50 * kMillisecond);
        for (int round = 0; round < 64; ++round) {
          std::size_t n = sw.recv_batch();
          if (n == 0) break;
          for (std::size_t i = 0; i < n; ++i) {
            auto d = sw.datagram(i);
            std::memcpy(out.reserve(d.size()), d.data(), d.size());
            out.commit(sw.from(i), d.size());
          }
          sw.send_all(out, nullptr, 0);
        }
      }
      timespec ts{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
      cpu[l] = double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
    });
  const std::uint64_t per_worker = (count + E - 1) / E;
  std::vector<std::thread> ts;
  std::vector<double> t_end(static_cast<std::size_t>(W));
  const double t0 = now_s();
  for (int r = 0; r < W; ++r)
    ts.emplace_back([&, r] {
      UdpPort p(kLo, std::size_t(g_batch), off);
      Outbox out;
      std::vector<std::byte> payload(proto::kHeaderBytes + E * 4, std::byte(r));
      std::uint64_t sent = 0, got = 0;
      std::uint16_t next_lane = 0;
      const std::uint64_t window = std::uint64_t(K) * L;
      Nanos last = monotonic_now();
      auto send = [&](std::uint64_t n) {
        for (std::uint64_t i = 0; i < n; ++i) {
          std::memcpy(out.reserve(payload.size()), payload.data(), payload.size());
          out.commit(sws[next_lane]->local(), payload.size());
          next_lane = std::uint16_t((next_lane + 1) % L);
        }
        p.send_all(out, nullptr, 0);
      };
      sent = std::min(window, per_worker);
      send(sent);
      while (got < per_worker) {
        p.wait(20 * kMillisecond);
        std::size_t n = p.recv_batch();
        if (n == 0 && monotonic_now() - last > 20 * kMillisecond) {
          send(std::min(sent - got, window));  // lost in the loopback
          last = monotonic_now();
          continue;
        }
        got += n;
        last = monotonic_now();
        std::uint64_t more = std::min<std::uint64_t>(n, per_worker - std::min(per_worker, sent));
        if (more) {
          send(more);
          sent += more;
        }
      }
      t_end[std::size_t(r)] = now_s();
    });
  for (auto& t : ts) t.join();
  stop.store(true);
  for (auto& s : sws) s->wake();
  for (auto& t : echo) t.join();
  UdpRun u;
  u.seconds = *std::max_element(t_end.begin(), t_end.end()) - t0;
  for (double c : cpu) u.switch_cpu += c;  // whole life of the echo threads (they idle before t0)
  for (auto& s : sws) {
    u.datagrams += s->recv_datagrams;
    u.recv_calls += s->recv_calls;
  }
  return u;
}

}  // namespace

// Every point of --elems x --lanes x --offload whose datagram fits: f(E, L, offload, its name).
template <class F>
void for_each_point(const Args& a, F f) {
  for (auto E : a.elems) {
    if (E * 4 + proto::kHeaderBytes + proto::kAuthTrailerBytes > proto::kMaxPacketBytes) continue;
    for (auto L : a.lanes)
      for (int o = 0; o < 2; ++o) {
        if ((o == 0 && a.offload == "off") || (o == 1 && a.offload == "on")) continue;
        f(E, L, o == 0 ? UdpOffload{} : UdpOffload::none(), o == 0 ? "gso+gro" : "none");
      }
  }
}

// --auth both: keyed and unkeyed rounds of the same allreduce on the same harness, alternated
// (keyed first in even rounds, unkeyed first in odd ones, so drift in the load hits both), for
// the switch's CPU per datagram, its goodput and its CPU seconds per second; per round the
// keyed/unkeyed ratio of the switch's throughput per CPU second (the same bytes, so the unkeyed
// run's switch CPU over the keyed one's): what a CPU-bound switch keeps with MACs.
static void bench_udp_both(const Args& a) {
  std::printf("\n# UDP loopback, keyed against unkeyed (GMAC %s), %d alternated rounds: %d workers x %llu i32 (%.1f MiB"
              " each), %d slots per lane; sw-in = payload into the switch per second of run (goodput); cpu = switch"
              " thread CPU seconds per second of run; ns/dgram = switch CPU per datagram received; k/u = keyed/unkeyed"
              " of the switch's payload per CPU second (its throughput when CPU-bound) per round: median [min, max];"
              " goodput k/u: the same of sw-in (wall clock: the load's noise); batch = datagrams per recvmmsg call\n",
              std::string(proto::gmac::name(proto::gmac::selected())).c_str(), a.runs, a.workers,
              (unsigned long long)a.count, double(a.count * 4) / (1 << 20), a.slots);
  std::printf("%6s %5s %8s | %11s %6s %8s %5s | %11s %6s %8s %5s | %24s %12s\n", "elems", "lanes", "offload",
              "unkeyed sw-in", "cpu", "ns/dgram", "batch", "keyed sw-in", "cpu", "ns/dgram", "batch", "k/u per CPU s",
              "goodput k/u");
  std::uint64_t refused = 0;
  int keyed_rounds = 0;
  for_each_point(a, [&](std::uint32_t E, std::uint16_t L, UdpOffload off, const char* offs) {
        std::vector<UdpRun> rk, ru;
        std::vector<double> ratio, good;
        for (int r = 0; r < a.runs; ++r) {
          for (int k = 0; k < 2; ++k) {
            const bool keyed = (k == 0) == (r % 2 == 0);
            (keyed ? rk : ru).push_back(run_udp_inc(a.workers, a.count, E, a.slots, L, off, keyed));
          }
          refused += rk.back().refused;
          ++keyed_rounds;
          ratio.push_back(ru.back().switch_cpu / rk.back().switch_cpu);
          good.push_back(ru.back().seconds / rk.back().seconds);
        }
        const double bytes = double(a.count) * 4 * a.workers;
        auto med = [](const std::vector<UdpRun>& v, auto f) {
          std::vector<double> x;
          for (const UdpRun& u : v) x.push_back(f(u));
          return median(x);
        };
        const auto sw_in = [&](const UdpRun& u) { return bytes / u.seconds / 1e9; };
        const auto cpu = [](const UdpRun& u) { return u.switch_cpu / u.seconds; };
        const auto ns = [](const UdpRun& u) { return u.datagrams ? u.switch_cpu / double(u.datagrams) * 1e9 : 0.0; };
        const auto batch = [](const UdpRun& u) { return u.recv_calls ? double(u.datagrams) / double(u.recv_calls) : 0.0; };
        const double rmed = median(ratio), rmin = *std::min_element(ratio.begin(), ratio.end()),
                     rmax = *std::max_element(ratio.begin(), ratio.end());
        std::printf("%6u %5u %8s | %6.3f GB/s %6.2f %8.0f %5.1f | %6.3f GB/s %6.2f %8.0f %5.1f | %6.2f [%5.2f, %5.2f] %12.2f\n",
                    E, unsigned(L), offs, med(ru, sw_in), med(ru, cpu), med(ru, ns), med(ru, batch), med(rk, sw_in),
                    med(rk, cpu), med(rk, ns), med(rk, batch), rmed, rmin, rmax, median(good));
        char buf[768];
        std::snprintf(buf, sizeof buf,
                      "{\"bench\":\"udp_auth\",\"gmac\":\"%s\",\"elems\":%u,\"lanes\":%u,\"offload\":\"%s\",\"workers\":%d,"
                      "\"count\":%llu,\"rounds\":%d,\"unkeyed_sw_in_GBps\":%.4f,\"keyed_sw_in_GBps\":%.4f,"
                      "\"unkeyed_cpu_per_s\":%.3f,\"keyed_cpu_per_s\":%.3f,\"unkeyed_ns_per_datagram\":%.1f,"
                      "\"keyed_ns_per_datagram\":%.1f,\"ratio_per_cpu\":%.3f,\"ratio_per_cpu_min\":%.3f,"
                      "\"ratio_per_cpu_max\":%.3f,\"ratio_goodput\":%.3f}",
                      std::string(proto::gmac::name(proto::gmac::selected())).c_str(), E, unsigned(L), offs, a.workers,
                      (unsigned long long)a.count, a.runs, med(ru, sw_in), med(rk, sw_in), med(ru, cpu), med(rk, cpu),
                      med(ru, ns), med(rk, ns), rmed, rmin, rmax, median(good));
        emit_json(buf);
      });
  std::printf("(checked after every round with two probe datagrams, an unsealed and a forged contribution: the %d"
              " keyed rounds' switches refused %llu of %d, the unkeyed rounds' took every unsealed one)\n",
              keyed_rounds, (unsigned long long)refused, 2 * keyed_rounds);
}

void bench_udp(const Args& a) {
  g_batch = a.batch;
  if (a.gmac.size() == 1)
    for (proto::gmac::Isa i : proto::gmac::kAllIsas)
      if (proto::gmac::name(i) == a.gmac.front() && proto::gmac::use(i) != i) {
        std::fprintf(stderr, "udp bench: GMAC %s does not run on this CPU\n", a.gmac.front().c_str());
        std::exit(1);
      }
  if (a.auth == "both") return bench_udp_both(a);
  const bool key = a.auth == "on";
  std::printf("\n# UDP loopback end to end%s: %d workers x %llu i32 (%.1f MiB each), %d slots per lane;"
              " algbw = bytes per worker / time; sw-in = W x bytes / time; cpu = switch (or echo)"
              " thread CPU seconds per second of run; dgram/call = datagrams per recvmmsg call\n",
              key ? " (keyed job: authenticated packets)" : "", a.workers, (unsigned long long)a.count,
              double(a.count * 4) / (1 << 20), a.slots);
  std::printf("%6s %5s %8s %14s %14s %8s %10s %8s %14s %8s %10s %8s %9s\n", "elems", "lanes", "offload",
              "inc algbw", "inc sw-in", "inc cpu", "dgram/call", "ns/dgram", "echo algbw", "echo cpu", "dgram/call",
              "ns/dgram", "inc/echo");
  for_each_point(a, [&](std::uint32_t E, std::uint16_t L, UdpOffload off, const char* offs) {
        std::vector<double> ti, te;
        std::vector<UdpRun> ri, re;
        for (int r = 0; r < a.runs; ++r) {
          ri.push_back(run_udp_inc(a.workers, a.count, E, a.slots, L, off, key));
          re.push_back(run_udp_echo(a.workers, a.count, E, a.slots, L, off));
          ti.push_back(ri.back().seconds);
          te.push_back(re.back().seconds);
        }
        // The run with the median time, for the CPU and call figures.
        auto pick = [](std::vector<UdpRun> v) {
          std::sort(v.begin(), v.end(), [](const UdpRun& x, const UdpRun& y) { return x.seconds < y.seconds; });
          return v[v.size() / 2];
        };
        const UdpRun mi = pick(ri), me = pick(re);
        const double bytes = double(a.count) * 4;
        const double inc_alg = bytes / mi.seconds / 1e9, echo_alg = bytes / me.seconds / 1e9;
        // Switch CPU per datagram received (each also leaves once: results, or the echo).
        const double inc_ns = mi.datagrams ? mi.switch_cpu / double(mi.datagrams) * 1e9 : 0;
        const double echo_ns = me.datagrams ? me.switch_cpu / double(me.datagrams) * 1e9 : 0;
        std::printf("%6u %5u %8s %9.3f GB/s %9.3f GB/s %8.2f %10.1f %8.0f %9.3f GB/s %8.2f %10.1f %8.0f %9.2f\n", E,
                    unsigned(L), offs, inc_alg, inc_alg * a.workers, mi.switch_cpu / mi.seconds,
                    mi.recv_calls ? double(mi.datagrams) / double(mi.recv_calls) : 0.0, inc_ns, echo_alg,
                    me.switch_cpu / me.seconds,
                    me.recv_calls ? double(me.datagrams) / double(me.recv_calls) : 0.0, echo_ns, inc_alg / echo_alg);
        char buf[768];
        std::snprintf(buf, sizeof buf,
                      "{\"bench\":\"udp\",\"auth\":%s,\"elems\":%u,\"lanes\":%u,\"offload\":\"%s\",\"workers\":%d,\"count\":%llu,"
                      "\"inc_algbw_GBps\":%.4f,\"echo_algbw_GBps\":%.4f,\"inc_seconds\":%.5f,\"echo_seconds\":%.5f,"
                      "\"inc_switch_cpu_per_s\":%.3f,\"inc_datagrams_per_recv\":%.2f,\"echo_datagrams_per_recv\":%.2f,"
                      "\"inc_switch_ns_per_datagram\":%.1f,\"echo_ns_per_datagram\":%.1f}",
                      key ? "true" : "false", E, unsigned(L), offs, a.workers, (unsigned long long)a.count, inc_alg, echo_alg, median(ti),
                      median(te), mi.switch_cpu / mi.seconds,
                      mi.recv_calls ? double(mi.datagrams) / double(mi.recv_calls) : 0.0,
                      me.recv_calls ? double(me.datagrams) / double(me.recv_calls) : 0.0, inc_ns, echo_ns);
        emit_json(buf);
      });
}

}  // namespace inc_switch_bench
