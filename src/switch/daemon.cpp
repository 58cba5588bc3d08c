#include "src/switch/daemon.hpp"

#include <httplib.h>

#include <chrono>
#include <cinttypes>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>

#include "src/switch/topology.hpp"

namespace inc::sw {

const char* switch_usage() {
  return R"(usage: inc switch [options]

A software Core-INC aggregation switch over UDP (docs/SWITCH.md, docs/PROTOCOL.md).

  --bind ADDR:PORT         UDP address to serve (default 127.0.0.1:7710)
  --slots N                slots in the aggregator pool (default 1024)
  --slot-elements N        4-byte cells per slot = elements per packet (default 256, max 16368)
  --types LIST             element types the switch adds: i32,f32 (default both; raw
                           replication is always available)
  --parent ADDR:PORT       parent switch (this switch is a leaf of a hierarchy)
  --topology FILE --name NAME
                           take address, parent, pool and static jobs of switch NAME from a
                           topology file (not combinable with --bind/--parent/--slots/...)
  --job ID:MEMBERS:SLOTS[:PARENT_MEMBER]
                           admit a job at start-up (repeatable)
  --control-key KEY        accept admit/release control packets carrying this key (hex 0x.. or
                           decimal, non-zero); without it control packets are refused
  --idle-timeout SEC       release jobs admitted by control packets after SEC idle (default 300)
  --incarnation N          identity of this start (default: random); workers detect a restart
                           by the change
  --metrics-port N         serve Prometheus text on http://METRICS-BIND:N/metrics (0: any port)
  --metrics-bind ADDR      address of the metrics endpoint (default 127.0.0.1)
  --stats                  print counters on exit
  --stats-interval SEC     also print them every SEC seconds (implies --stats)
  --batch N                datagrams per recvmmsg/sendmmsg batch (default 32)
  --fault-loss P --fault-dup P --fault-reorder P --fault-delay-us N --fault-jitter-us N
  --fault-seed N           inject seeded faults into the datagrams this switch sends (testing)
  --help
)";
}

namespace {
bool parse_uint(const std::string& s, std::uint64_t& v, std::uint64_t max) {
  if (s.empty()) return false;
  std::uint64_t x = 0;
  std::size_t i = 0;
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    i = 2;
  }
  if (i >= s.size() || s.size() - i > (base == 16 ? 16u : 20u)) return false;
  for (; i < s.size(); ++i) {
    char c = s[i];
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (base == 16 && c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (base == 16 && c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return false;
    if (x > (UINT64_MAX - std::uint64_t(d)) / std::uint64_t(base)) return false;
    x = x * std::uint64_t(base) + std::uint64_t(d);
  }
  if (x > max) return false;
  v = x;
  return true;
}
bool parse_double(const std::string& s, double& v, double lo, double hi) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  double x = std::strtod(s.c_str(), &end);
  if (errno || end != s.c_str() + s.size() || !(x >= lo && x <= hi)) return false;
  v = x;
  return true;
}
std::uint64_t random_incarnation() {
  std::random_device rd;
  std::uint64_t x = (std::uint64_t(rd()) << 32) ^ rd() ^
                    std::uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  return x ? x : 1;
}
}  // namespace

std::string parse_switch_args(int argc, char** argv, SwitchDaemonOptions& o, bool& help) {
  help = false;
  std::string topo_path, name;
  bool manual = false;  // flags that conflict with --topology
  bool stats_interval = false;
  o.cfg.idle_timeout = 300 * kSecond;
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    if (f == "--help" || f == "-h") {
      help = true;
      return "";
    }
    if (f == "--stats") {
      o.stats = true;
      continue;
    }
    if (i + 1 >= argc) return f.rfind("--", 0) == 0 ? "missing value for " + f : "unexpected argument '" + f + "'";
    std::string v = argv[++i];
    auto bad = [&](const std::string& why) { return "invalid value for " + f + ": '" + v + "' (" + why + ")"; };
    std::uint64_t u = 0;
    double d = 0;
    if (f == "--bind") {
      auto e = parse_endpoint(v);
      if (!e) return bad("want ADDR:PORT, IPv4");
      o.bind = *e;
      manual = true;
    } else if (f == "--slots") {
      if (!parse_uint(v, u, 1u << 20) || u == 0) return bad("1..1048576");
      o.cfg.slots = std::uint32_t(u);
      manual = true;
    } else if (f == "--slot-elements") {
      if (!parse_uint(v, u, proto::kMaxPayloadBytes / 4) || u == 0) return bad("1..16368");
      o.cfg.slot_elems = std::uint32_t(u);
      manual = true;
    } else if (f == "--types") {
      auto c = parse_types(v);
      if (!c) return bad("a comma-separated list of i32, f32");
      o.cfg.caps = *c;
      manual = true;
    } else if (f == "--parent") {
      auto e = parse_endpoint(v);
      if (!e || e->port() == 0 || e->ipv4_addr() == 0) return bad("want ADDR:PORT of the parent switch");
      o.cfg.parent = *e;
      manual = true;
    } else if (f == "--topology") {
      topo_path = v;
    } else if (f == "--name") {
      name = v;
    } else if (f == "--job") {
      // ID:MEMBERS:SLOTS[:PARENT_MEMBER]
      std::vector<std::string> parts;
      std::size_t p = 0;
      for (;;) {
        auto c = v.find(':', p);
        parts.push_back(v.substr(p, c == std::string::npos ? std::string::npos : c - p));
        if (c == std::string::npos) break;
        p = c + 1;
      }
      std::uint64_t id, m, s, pm = proto::kNoMember;
      if ((parts.size() != 3 && parts.size() != 4) || !parse_uint(parts[0], id, 0xFFFFFFFFu) ||
          !parse_uint(parts[1], m, proto::kMaxMembers) || m == 0 ||
          !parse_uint(parts[2], s, 0xFFFF) || s == 0 ||
          (parts.size() == 4 && !parse_uint(parts[3], pm, proto::kMaxMembers - 1)))
        return bad("want ID:MEMBERS(1..64):SLOTS(1..65535)[:PARENT_MEMBER]");
      o.jobs.push_back({std::uint32_t(id), std::uint16_t(m), std::uint32_t(s), std::uint16_t(pm)});
      manual = true;
    } else if (f == "--control-key") {
      if (!parse_uint(v, u, UINT64_MAX) || u == 0) return bad("a non-zero 64-bit number");
      o.cfg.control_key = u;
    } else if (f == "--idle-timeout") {
      if (!parse_double(v, d, 0.001, 1e7)) return bad("seconds > 0");
      o.cfg.idle_timeout = Nanos(d * 1e9);
    } else if (f == "--incarnation") {
      if (!parse_uint(v, u, UINT64_MAX) || u == 0) return bad("a non-zero 64-bit number");
      o.cfg.incarnation = u;
      o.incarnation_given = true;
    } else if (f == "--metrics-port") {
      if (!parse_uint(v, u, 65535)) return bad("0..65535");
      o.metrics_port = int(u);
    } else if (f == "--metrics-bind") {
      auto e = parse_endpoint(v + ":0");
      if (!e) return bad("an IPv4 address");
      o.metrics_bind = v;
    } else if (f == "--stats-interval") {
      if (!parse_double(v, d, 0.01, 1e6)) return bad("seconds >= 0.01");
      o.stats_interval = d;
      stats_interval = true;
    } else if (f == "--batch") {
      if (!parse_uint(v, u, 1024) || u == 0) return bad("1..1024");
      o.batch = std::size_t(u);
    } else if (f == "--fault-loss" || f == "--fault-dup" || f == "--fault-reorder") {
      if (!parse_double(v, d, 0, 1)) return bad("a probability in [0, 1]");
      (f == "--fault-loss" ? o.faults.loss : f == "--fault-dup" ? o.faults.dup : o.faults.reorder) = d;
    } else if (f == "--fault-delay-us" || f == "--fault-jitter-us") {
      if (!parse_uint(v, u, 10'000'000)) return bad("0..10000000 microseconds");
      (f == "--fault-delay-us" ? o.faults.delay : o.faults.jitter) = Nanos(u) * 1000;
    } else if (f == "--fault-seed") {
      if (!parse_uint(v, u, UINT64_MAX)) return bad("a 64-bit number");
      o.faults.seed = u;
    } else {
      return "unknown option " + f + " (see inc switch --help)";
    }
  }
  if (stats_interval) o.stats = true;
  if (topo_path.empty() != name.empty()) return "--topology and --name go together";
  if (!topo_path.empty()) {
    if (manual)
      return "--topology takes the address, parent, pool and jobs from the file; do not combine "
             "it with --bind/--parent/--slots/--slot-elements/--types/--job";
    std::string err;
    auto t = load_topology(topo_path, err);
    if (!t) return err;
    const TopoSwitch* s = t->find(name);
    if (!s) return "switch '" + name + "' is not in " + topo_path;
    auto idle = o.cfg.idle_timeout;
    auto key = o.cfg.control_key;
    auto inc = o.cfg.incarnation;
    o.cfg = switch_config(*t, *s);
    o.cfg.idle_timeout = idle;
    o.cfg.control_key = key;
    o.cfg.incarnation = inc;
    o.bind = s->addr;
    o.name = name;
    for (const auto& j : t->jobs) {
      auto plan = plan_job(*t, j, err);
      if (!plan) return topo_path + ": " + err;
      if (auto it = plan->specs.find(name); it != plan->specs.end()) o.jobs.push_back(it->second);
    }
  }
  for (const auto& j : o.jobs)
    if (j.parent_member != proto::kNoMember && !o.cfg.parent.valid())
      return "--job " + std::to_string(j.job) + " names a parent member but no --parent is given";
  return "";
}

namespace {
void counter(std::string& out, const char* metric, const char* help, const std::string& labels,
             std::uint64_t v, bool gauge = false) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "# HELP %s %s\n# TYPE %s %s\n%s{%s} %" PRIu64 "\n", metric, help,
                metric, gauge ? "gauge" : "counter", metric, labels.c_str(), v);
  out += buf;
}
void sample(std::string& out, const char* metric, const std::string& labels, std::uint64_t v) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "%s{%s} %" PRIu64 "\n", metric, labels.c_str(), v);
  out += buf;
}
std::string escape(const std::string& s) {
  std::string r;
  for (char c : s) {
    if (c == '\\' || c == '"') r += '\\';
    if (c == '\n') {
      r += "\\n";
      continue;
    }
    r += c;
  }
  return r;
}
}  // namespace

std::string render_prometheus(const SwitchSnapshot& s, const std::string& switch_name) {
  std::string out;
  const std::string sw = "switch=\"" + escape(switch_name) + "\"";
  const auto& c = s.counters;
  counter(out, "inc_switch_packets_in_total", "Datagrams received.", sw, c.packets_in);
  counter(out, "inc_switch_packets_out_total", "Datagrams sent.", sw, c.packets_out);
  counter(out, "inc_switch_bytes_in_total", "Bytes received.", sw, c.bytes_in);
  counter(out, "inc_switch_bytes_out_total", "Bytes sent.", sw, c.bytes_out);
  counter(out, "inc_switch_aggregations_total", "Chunks whose members all contributed here.", sw, c.aggregations);
  counter(out, "inc_switch_results_total", "Chunks completed (root) or whose parent result arrived.", sw, c.results);
  counter(out, "inc_switch_retransmissions_total", "Packets flagged as retransmissions.", sw, c.retransmissions);
  counter(out, "inc_switch_duplicates_total", "Contributions already counted (never added twice).", sw, c.duplicates);
  counter(out, "inc_switch_results_resent_total", "Results sent again to members that missed them.", sw, c.results_resent);
  counter(out, "inc_switch_upstream_resent_total", "Partial aggregates sent to the parent again.", sw, c.upstream_resent);
  out += "# HELP inc_switch_drops_total Packets dropped, by reason.\n# TYPE inc_switch_drops_total counter\n";
  for (int r = 1; r < proto::kNumReasons; ++r)
    sample(out, "inc_switch_drops_total",
           sw + ",reason=\"" + std::string(proto::name(proto::Reason(r))) + "\"",
           c.drops_by_reason[std::size_t(r)]);
  counter(out, "inc_switch_jobs_admitted_total", "Jobs admitted.", sw, c.jobs_admitted);
  counter(out, "inc_switch_jobs_released_total", "Jobs released.", sw, c.jobs_released);
  counter(out, "inc_switch_jobs_expired_total", "Jobs released after idling.", sw, c.jobs_expired);
  counter(out, "inc_switch_jobs_failed_total", "Jobs failed (parent lost its state).", sw, c.jobs_failed);
  counter(out, "inc_switch_slots", "Slots in the aggregator pool.", sw, s.slots_total, true);
  counter(out, "inc_switch_slots_allocated", "Slots allocated to jobs.", sw, s.slots_allocated, true);
  counter(out, "inc_switch_slot_elements", "4-byte cells per slot copy.", sw, s.slot_elems, true);
  counter(out, "inc_switch_jobs", "Jobs admitted now.", sw, s.jobs.size(), true);
  struct Col {
    const char* metric;
    const char* help;
    std::uint64_t TrafficCounters::*f;
  };
  static const Col cols[] = {
      {"inc_job_packets_in_total", "Datagrams of the job received.", &TrafficCounters::packets_in},
      {"inc_job_packets_out_total", "Datagrams of the job sent.", &TrafficCounters::packets_out},
      {"inc_job_bytes_in_total", "Bytes of the job received.", &TrafficCounters::bytes_in},
      {"inc_job_bytes_out_total", "Bytes of the job sent.", &TrafficCounters::bytes_out},
      {"inc_job_aggregations_total", "Chunks of the job aggregated here.", &TrafficCounters::aggregations},
      {"inc_job_retransmissions_total", "Retransmissions of the job seen.", &TrafficCounters::retransmissions},
      {"inc_job_duplicates_total", "Duplicate contributions of the job.", &TrafficCounters::duplicates},
      {"inc_job_drops_total", "Packets of the job dropped.", &TrafficCounters::drops},
  };
  for (const auto& col : cols) {
    if (s.jobs.empty()) break;
    out += std::string("# HELP ") + col.metric + " " + col.help + "\n# TYPE " + col.metric + " counter\n";
    for (const auto& j : s.jobs)
      sample(out, col.metric, sw + ",job=\"" + std::to_string(j.spec.job) + "\"", j.counters.*(col.f));
  }
  if (!s.jobs.empty()) {
    out += "# HELP inc_job_slots Slots owned by the job.\n# TYPE inc_job_slots gauge\n";
    for (const auto& j : s.jobs)
      sample(out, "inc_job_slots", sw + ",job=\"" + std::to_string(j.spec.job) + "\"", j.spec.slots);
    out += "# HELP inc_job_busy_copies Slot copies holding an aggregation in progress.\n# TYPE inc_job_busy_copies gauge\n";
    for (const auto& j : s.jobs)
      sample(out, "inc_job_busy_copies", sw + ",job=\"" + std::to_string(j.spec.job) + "\"", j.busy_copies);
    out += "# HELP inc_job_members_joined Members currently joined.\n# TYPE inc_job_members_joined gauge\n";
    for (const auto& j : s.jobs)
      sample(out, "inc_job_members_joined", sw + ",job=\"" + std::to_string(j.spec.job) + "\"", j.joined);
    out += "# HELP inc_job_failed 1 if the job failed upstream.\n# TYPE inc_job_failed gauge\n";
    for (const auto& j : s.jobs)
      sample(out, "inc_job_failed", sw + ",job=\"" + std::to_string(j.spec.job) + "\"", j.failed);
  }
  return out;
}

std::string render_stats(const SwitchSnapshot& s, const std::string& switch_name) {
  std::string out;
  char b[512];
  const auto& c = s.counters;
  std::snprintf(b, sizeof b,
                "switch %s: packets in %" PRIu64 " out %" PRIu64 ", bytes in %" PRIu64 " out %" PRIu64
                ", aggregations %" PRIu64 ", results %" PRIu64 ", retransmissions %" PRIu64
                ", duplicates %" PRIu64 ", results resent %" PRIu64 ", drops %" PRIu64
                ", slots %u/%u allocated\n",
                switch_name.c_str(), c.packets_in, c.packets_out, c.bytes_in, c.bytes_out,
                c.aggregations, c.results, c.retransmissions, c.duplicates, c.results_resent,
                c.drops, s.slots_allocated, s.slots_total);
  out += b;
  for (int r = 1; r < proto::kNumReasons; ++r)
    if (c.drops_by_reason[std::size_t(r)]) {
      std::snprintf(b, sizeof b, "  drops %-16s %" PRIu64 "\n",
                    std::string(proto::name(proto::Reason(r))).c_str(), c.drops_by_reason[std::size_t(r)]);
      out += b;
    }
  for (const auto& j : s.jobs) {
    std::snprintf(b, sizeof b,
                  "  job %u: members %u (joined %u)%s, slots %u at %u (busy copies %u), in %" PRIu64
                  " out %" PRIu64 ", aggregations %" PRIu64 ", retransmissions %" PRIu64
                  ", duplicates %" PRIu64 ", drops %" PRIu64 "%s\n",
                  j.spec.job, j.spec.members, j.joined,
                  j.spec.parent_member == proto::kNoMember ? " root" : " leaf", j.spec.slots,
                  j.slot_base, j.busy_copies, j.counters.packets_in, j.counters.packets_out,
                  j.counters.aggregations, j.counters.retransmissions, j.counters.duplicates,
                  j.counters.drops, j.failed ? " FAILED" : "");
    out += b;
  }
  return out;
}

int run_switch_daemon(const SwitchDaemonOptions& o, const std::atomic<bool>& stop, std::FILE* log,
                      const std::function<void(UdpSwitchServer&, int)>& on_ready) {
  SwitchConfig cfg = o.cfg;
  if (!o.incarnation_given) cfg.incarnation = random_incarnation();
  std::unique_ptr<UdpSwitchServer> server;
  try {
    server = std::make_unique<UdpSwitchServer>(cfg, o.bind, o.faults, o.batch);
  } catch (const std::exception& e) {
    std::fprintf(log, "inc switch: %s\n", e.what());
    return 1;
  }
  for (const auto& j : o.jobs) {
    auto r = server->dataplane().admit(j, monotonic_now());
    if (r != proto::Reason::ok) {
      std::fprintf(log, "inc switch: cannot admit job %u (%u members, %u slots): %s\n", j.job,
                   j.members, j.slots, std::string(proto::name(r)).c_str());
      return 1;
    }
  }
  httplib::Server http;
  std::thread http_thread;
  int metrics_port = -1;
  if (o.metrics_port >= 0) {
    http.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
      res.set_content(render_prometheus(server->snapshot(), o.name), "text/plain; version=0.0.4");
    });
    metrics_port = o.metrics_port == 0 ? http.bind_to_any_port(o.metrics_bind)
                                       : (http.bind_to_port(o.metrics_bind, o.metrics_port) ? o.metrics_port : -1);
    if (metrics_port < 0) {
      std::fprintf(log, "inc switch: cannot serve metrics on %s:%d\n", o.metrics_bind.c_str(), o.metrics_port);
      return 1;
    }
    http_thread = std::thread([&] { http.listen_after_bind(); });
  }
  std::fprintf(log,
               "inc switch %s: serving %s, %u slots x %u elements, types%s%s, incarnation %016" PRIx64
               "%s%s, %zu static job(s)",
               o.name.c_str(), server->local().str().c_str(), cfg.slots, cfg.slot_elems,
               (cfg.caps & proto::cap::i32_sum) ? " i32" : "", (cfg.caps & proto::cap::f32_sum) ? " f32" : "",
               cfg.incarnation, cfg.parent.valid() ? ", parent " : "",
               cfg.parent.valid() ? cfg.parent.str().c_str() : "", o.jobs.size());
  if (metrics_port >= 0) std::fprintf(log, ", metrics http://%s:%d/metrics", o.metrics_bind.c_str(), metrics_port);
  std::fprintf(log, "\n");
  std::fflush(log);
  std::atomic<bool> stats_stop{false};
  std::thread stats_thread;
  if (o.stats_interval > 0)
    stats_thread = std::thread([&] {
      auto next = std::chrono::steady_clock::now();
      while (!stats_stop.load()) {
        next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double>(o.stats_interval));
        while (!stats_stop.load() && std::chrono::steady_clock::now() < next)
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (stats_stop.load()) break;
        std::fputs(render_stats(server->snapshot(), o.name).c_str(), log);
        std::fflush(log);
      }
    });
  if (on_ready) on_ready(*server, metrics_port);
  server->run(&stop);
  stats_stop.store(true);
  if (stats_thread.joinable()) stats_thread.join();
  if (http_thread.joinable()) {
    http.stop();
    http_thread.join();
  }
  if (o.stats) std::fputs(render_stats(server->snapshot(), o.name).c_str(), log);
  std::fprintf(log, "inc switch %s: stopped\n", o.name.c_str());
  std::fflush(log);
  return 0;
}

}  // namespace inc::sw
