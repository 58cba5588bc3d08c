// Core-INC switch benchmarks (issue 3):
//   switch_bench dataplane  in-process data-plane aggregation throughput per core (GB/s of
//                           contributed payload), next to memcpy of the same payload bytes and
//                           to the bare add kernel, on the same buffers;
//   switch_bench udp        end-to-end allreduce over UDP loopback (switch thread + worker
//                           threads), next to raw UDP loopback measured by the same harness: an
//                           echo switch on the same event loop that returns every datagram to
//                           its sender (same packet count and size as the INC run);
//   switch_bench all        both. Medians of --runs runs; this machine is shared and noisy.
// Options: --members M --runs R --seconds S --workers W --count N --elems E --slots K --json FILE
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "src/switch/arith.hpp"
#include "src/switch/dataplane.hpp"
#include "src/switch/udp.hpp"
#include "src/switch/worker.hpp"

using namespace inc::sw;
namespace proto = inc::proto;

namespace {

struct Args {
  std::string mode = "all";
  int members = 8, runs = 5, workers = 4, slots = 64;
  double seconds = 0.3;
  std::uint64_t count = 1 << 20;
  std::vector<std::uint32_t> elems = {64, 256, 1024, 4096};
  std::string json;
};

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string json_out = "[\n";
void emit_json(const std::string& obj) {
  if (json_out.size() > 2) json_out += ",\n";
  json_out += "  " + obj;
}

// ---- in-process data plane --------------------------------------------------------------------

// Packets of M members for 2K consecutive chunks, encoded once; chunk ids are patched per round.
struct Stream {
  std::vector<std::vector<std::byte>> pkts;  // [pos * M + m]
};

double run_dataplane(proto::ElemType t, std::uint32_t E, int M, int K, double seconds,
                     std::uint64_t& bytes_out) {
  SwitchConfig cfg;
  cfg.slots = std::uint32_t(K);
  cfg.slot_elems = E;
  SwitchDataPlane sw(cfg);
  sw.admit({1, std::uint16_t(M), std::uint32_t(K)}, 0);
  for (int m = 0; m < M; ++m) {
    std::byte b[proto::kHeaderBytes];
    proto::Header h;
    h.type = proto::PacketType::join;
    h.job = 1;
    h.member = std::uint16_t(m);
    proto::encode_header(h, b);
    sw.on_packet(b, Endpoint::node(std::uint32_t(m)), 0);
  }
  sw.outbox().clear();
  const std::uint32_t epoch = sw.job_epoch(1);
  Stream s;
  for (int pos = 0; pos < 2 * K; ++pos)
    for (int m = 0; m < M; ++m) {
      proto::Header h;
      h.type = proto::PacketType::data;
      h.flags = proto::flag::want_result;
      h.elem = t;
      h.op = proto::WireOp::sum;
      h.member = std::uint16_t(m);
      h.job = 1;
      h.epoch = epoch;
      h.chunk = std::uint32_t(pos);
      h.slot = std::uint16_t(pos % K);
      h.count = std::uint16_t(E);
      std::vector<std::byte> p(proto::kHeaderBytes + E * 4);
      proto::encode_header(h, p.data());
      for (std::uint32_t i = 0; i < E; ++i) {
        float f = float((i + std::uint32_t(m)) % 7);
        std::int32_t v = std::int32_t(i * 3 + std::uint32_t(m));
        std::memcpy(p.data() + proto::kHeaderBytes + 4 * i, t == proto::ElemType::f32 ? (void*)&f : (void*)&v, 4);
      }
      s.pkts.push_back(std::move(p));
    }
  std::uint64_t chunks = 0;
  const double t0 = now_s();
  double t1 = t0;
  std::uint32_t round = 0;
  while (t1 - t0 < seconds) {
    for (int pos = 0; pos < 2 * K; ++pos) {
      const std::uint32_t chunk = round * 2 * std::uint32_t(K) + std::uint32_t(pos);
      for (int m = 0; m < M; ++m) {
        auto& p = s.pkts[std::size_t(pos * M + m)];
        proto::store_u32(p.data() + 20, chunk);
        sw.on_packet(p, Endpoint::node(std::uint32_t(m)), 0);
      }
      sw.outbox().clear();  // the driver would hand these M results to sendmmsg
    }
    chunks += 2 * std::uint64_t(K);
    ++round;
    t1 = now_s();
  }
  if (sw.counters().aggregations != chunks) {
    std::fprintf(stderr, "data plane bench: %llu aggregations for %llu chunks\n",
                 (unsigned long long)sw.counters().aggregations, (unsigned long long)chunks);
    std::exit(1);
  }
  bytes_out = chunks * std::uint64_t(M) * E * 4;
  return double(bytes_out) / (t1 - t0) / 1e9;
}

// memcpy of the same payload bytes from the same packet buffers into a slot-sized buffer, and
// the add kernel alone (what the data plane does at least once per packet).
double run_copy(std::uint32_t E, int M, int K, double seconds, bool add) {
  std::vector<std::vector<std::byte>> pkts(std::size_t(2 * K * M), std::vector<std::byte>(proto::kHeaderBytes + E * 4, std::byte(1)));
  std::vector<std::int32_t> slot(E);
  std::uint64_t bytes = 0;
  const double t0 = now_s();
  double t1 = t0;
  while (t1 - t0 < seconds) {
    for (auto& p : pkts) {
      if (add) add_i32_wrap(slot.data(), p.data() + proto::kHeaderBytes, E);
      else std::memcpy(slot.data(), p.data() + proto::kHeaderBytes, E * 4);
      asm volatile("" : : "r"(slot.data()) : "memory");
    }
    bytes += pkts.size() * std::uint64_t(E) * 4;
    t1 = now_s();
  }
  return double(bytes) / (t1 - t0) / 1e9;
}

void bench_dataplane(const Args& a) {
  std::printf("\n# data plane, in-process, one core: %d members, %d slots; GB/s of contributed payload\n", a.members, a.slots);
  std::printf("%-6s %8s %12s %12s %12s %12s %10s\n", "type", "elems", "dataplane", "memcpy", "add-kernel", "Mpkt/s", "dp/memcpy");
  for (auto t : {proto::ElemType::i32, proto::ElemType::f32}) {
    for (auto E : a.elems) {
      std::vector<double> dp, mc, ad;
      std::uint64_t bytes = 0;
      for (int r = 0; r < a.runs; ++r) {
        dp.push_back(run_dataplane(t, E, a.members, a.slots, a.seconds, bytes));
        mc.push_back(run_copy(E, a.members, a.slots, a.seconds, false));
        ad.push_back(run_copy(E, a.members, a.slots, a.seconds, true));
      }
      double d = median(dp), m = median(mc), k = median(ad);
      double mpps = d * 1e9 / (E * 4.0) / 1e6;
      std::printf("%-6s %8u %12.2f %12.2f %12.2f %12.2f %10.2f\n", std::string(proto::name(t)).c_str(), E, d, m, k, mpps, d / m);
      char buf[512];
      std::snprintf(buf, sizeof buf,
                    "{\"bench\":\"dataplane\",\"type\":\"%s\",\"elems\":%u,\"members\":%d,\"dataplane_GBps\":%.3f,"
                    "\"memcpy_GBps\":%.3f,\"add_kernel_GBps\":%.3f,\"Mpkts\":%.3f}",
                    std::string(proto::name(t)).c_str(), E, a.members, d, m, k, mpps);
      emit_json(buf);
    }
  }
}

// ---- UDP loopback -----------------------------------------------------------------------------

const Endpoint kLo = Endpoint::ipv4(0x7F000001, 0);

// INC allreduce: W workers, `count` i32 each, slot size E; returns seconds per allreduce.
double run_udp_inc(int W, std::uint64_t count, std::uint32_t E, int K, std::uint64_t& pkts) {
  SwitchConfig cfg;
  cfg.slots = std::uint32_t(K);
  cfg.slot_elems = E;
  UdpSwitchServer srv(cfg, kLo, {}, 64);
  srv.dataplane().admit({1, std::uint16_t(W), std::uint32_t(K)}, 0);
  std::thread st([&] { srv.run(); });
  std::vector<std::thread> ts;
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<double> t_end(static_cast<std::size_t>(W));
  std::atomic<int> failures{0};
  double t0 = 0;
  for (int r = 0; r < W; ++r)
    ts.emplace_back([&, r] {
      WorkerConfig c;
      c.job = 1;
      c.member = std::uint16_t(r);
      c.switch_ep = srv.local();
      c.rto_initial = 20 * kMillisecond;
      c.progress_timeout = 30 * kSecond;
      UdpWorker w(c, kLo);
      std::vector<std::int32_t> in(count, r + 1), out(count);
      // Join (and warm up) with a barrier, then the timed allreduce.
      if (!w.run(WorkerOp::barrier())) ++failures;
      ++ready;
      while (!go.load()) std::this_thread::yield();
      if (!w.run(WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, std::as_bytes(std::span(in)),
                                     std::as_writable_bytes(std::span(out)), count, std::uint32_t(W))))
        ++failures;
      t_end[std::size_t(r)] = now_s();
      if (out[count - 1] != W * (W + 1) / 2) ++failures;
    });
  while (ready.load() < W) std::this_thread::yield();
  t0 = now_s();
  go.store(true);
  for (auto& t : ts) t.join();
  srv.stop();
  st.join();
  if (failures) {
    std::fprintf(stderr, "udp inc bench: %d failures\n", failures.load());
    std::exit(1);
  }
  pkts = srv.dataplane().counters().packets_in;
  return *std::max_element(t_end.begin(), t_end.end()) - t0;
}

// Raw UDP with the same sockets, batching and event loop: an echo "switch" returns every
// datagram; each worker keeps K datagrams of the same size in flight and sends as many as the
// INC run did (count / E per worker). Timed-out datagrams are resent (loopback may drop).
double run_udp_echo(int W, std::uint64_t count, std::uint32_t E, int K) {
  UdpPort sw(kLo, 64);
  std::atomic<bool> stop{false};
  std::thread st([&] {
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
  });
  const std::uint64_t per_worker = (count + E - 1) / E;
  std::vector<std::thread> ts;
  std::vector<double> t_end(static_cast<std::size_t>(W));
  const double t0 = now_s();
  for (int r = 0; r < W; ++r)
    ts.emplace_back([&, r] {
      UdpPort p(kLo, 64);
      Outbox out;
      std::vector<std::byte> payload(proto::kHeaderBytes + E * 4, std::byte(r));
      std::uint64_t sent = 0, got = 0;
      Nanos last = monotonic_now();
      auto send = [&](std::uint64_t n) {
        for (std::uint64_t i = 0; i < n; ++i) {
          std::memcpy(out.reserve(payload.size()), payload.data(), payload.size());
          out.commit(sw.local(), payload.size());
        }
        p.send_all(out, nullptr, 0);
      };
      send(std::min<std::uint64_t>(std::uint64_t(K), per_worker));
      sent = std::min<std::uint64_t>(std::uint64_t(K), per_worker);
      while (got < per_worker) {
        p.wait(20 * kMillisecond);
        std::size_t n = p.recv_batch();
        if (n == 0 && monotonic_now() - last > 20 * kMillisecond) {
          send(std::min<std::uint64_t>(sent - got, std::uint64_t(K)));  // lost in the loopback
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
  sw.wake();
  st.join();
  return *std::max_element(t_end.begin(), t_end.end()) - t0;
}

void bench_udp(const Args& a) {
  std::printf("\n# UDP loopback end to end: %d workers x %llu i32 (%.1f MiB each), %d slots;"
              " algbw = bytes per worker / time; switch in = W x bytes / time\n",
              a.workers, (unsigned long long)a.count, double(a.count * 4) / (1 << 20), a.slots);
  std::printf("%8s %14s %14s %14s %14s %12s\n", "elems", "inc algbw", "inc sw-in", "echo algbw", "echo sw-in", "inc/echo");
  for (auto E : a.elems) {
    if (E * 4 + proto::kHeaderBytes > 9000 && E > 4096) continue;
    std::vector<double> ti, te;
    std::uint64_t pkts = 0;
    for (int r = 0; r < a.runs; ++r) {
      ti.push_back(run_udp_inc(a.workers, a.count, E, a.slots, pkts));
      te.push_back(run_udp_echo(a.workers, a.count, E, a.slots));
    }
    const double bytes = double(a.count) * 4;
    double inc_alg = bytes / median(ti) / 1e9, echo_alg = bytes / median(te) / 1e9;
    std::printf("%8u %11.3f GB/s %11.3f GB/s %11.3f GB/s %11.3f GB/s %12.2f\n", E, inc_alg, inc_alg * a.workers,
                echo_alg, echo_alg * a.workers, inc_alg / echo_alg);
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "{\"bench\":\"udp\",\"elems\":%u,\"workers\":%d,\"count\":%llu,\"inc_algbw_GBps\":%.4f,"
                  "\"echo_algbw_GBps\":%.4f,\"inc_seconds\":%.5f,\"echo_seconds\":%.5f}",
                  E, a.workers, (unsigned long long)a.count, inc_alg, echo_alg, median(ti), median(te));
    emit_json(buf);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  int i = 1;
  if (argc > 1 && argv[1][0] != '-') a.mode = argv[i++];
  for (; i < argc; ++i) {
    std::string f = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "missing value for %s\n", f.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (f == "--members") a.members = std::atoi(next());
    else if (f == "--runs") a.runs = std::max(1, std::atoi(next()));
    else if (f == "--seconds") a.seconds = std::atof(next());
    else if (f == "--workers") a.workers = std::atoi(next());
    else if (f == "--count") a.count = std::strtoull(next(), nullptr, 10);
    else if (f == "--slots") a.slots = std::atoi(next());
    else if (f == "--elems") a.elems = {std::uint32_t(std::atoi(next()))};
    else if (f == "--json") a.json = next();
    else {
      std::fprintf(stderr, "usage: switch_bench [dataplane|udp|all] [--members M] [--runs R] [--seconds S] "
                           "[--workers W] [--count N] [--elems E] [--slots K] [--json FILE]\n");
      return 2;
    }
  }
  if (a.members < 1 || a.members > 64 || a.workers < 1 || a.workers > 64 || a.slots < 1 || a.count == 0) {
    std::fprintf(stderr, "switch_bench: members/workers 1..64, slots >= 1, count >= 1\n");
    return 2;
  }
  if (a.mode == "dataplane" || a.mode == "all") bench_dataplane(a);
  if (a.mode == "udp" || a.mode == "all") bench_udp(a);
  if (!a.json.empty()) {
    std::FILE* f = std::fopen(a.json.c_str(), "w");
    if (!f) return 1;
    std::fprintf(f, "%s\n]\n", json_out.c_str());
    std::fclose(f);
  }
  return 0;
}
