// `inc switch` options: CLI11 reads the command line (unknown options, missing values, stray
// arguments, --help); the values are then checked here, each error naming the flag, the value
// and what is accepted, so that a bad configuration stops the daemon at start-up (exit 2).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "src/switch/daemon.hpp"
#include "src/switch/topology.hpp"

namespace inc::sw {

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

// Every option is read as text by CLI11 and checked by check_values (one message per flag).
struct RawArgs {
  std::string bind, slots, slot_elems, types, parent, topology, name, control_key, idle_timeout,
      incarnation, key_file, controller, control_key_file, metrics_port, metrics_bind, stats_interval, batch, lanes, offload, fault_loss, fault_dup,
      fault_reorder, fault_delay, fault_jitter, fault_seed, multicast_groups;
  std::vector<std::string> jobs, multicast;
  bool stats = false;
};

void define(CLI::App& app, RawArgs& r) {
  app.description(
      "A software Core-INC aggregation switch over UDP (docs/SWITCH.md, docs/PROTOCOL.md).\n"
      "Runs LANES data-plane threads; lane l serves ADDR:(PORT + l) with its own socket, its own\n"
      "share of the slot pool and its own job table. Workers join lane 0 and learn the lanes.");
  app.set_help_flag("-h,--help", "print this help and exit");
  app.add_option("--bind", r.bind, "ADDR:PORT of lane 0 (default 127.0.0.1:7710); lane l uses PORT + l; "
                                   "port 0: any LANES consecutive free ports")->type_name("ADDR:PORT");
  app.add_option("--lanes", r.lanes, "data-plane lanes (threads, ports); default: the CPUs this process "
                                     "may run on (sched_getaffinity)")->type_name("N");
  app.add_option("--slots", r.slots, "slots in the whole aggregator pool (default 1024), split evenly over "
                                     "the lanes (each lane gets slots / lanes; the remainder is unused)")->type_name("N");
  app.add_option("--slot-elements", r.slot_elems, "4-byte cells per slot = elements per packet (default 256, "
                                                  "max 16358)")->type_name("N");
  app.add_option("--types", r.types, "element types the switch adds: i32,f32,f16,bf16,i8,u8,e4m3,e5m2,i4,mx (mx: the MX blocks mxfp8, mxint8, mxfp4, mxfp6; default all; raw replication "
                                     "is always available)")->type_name("LIST");
  app.add_option("--parent", r.parent, "ADDR:PORT of the parent switch's lane 0 (this switch is a leaf; "
                                       "lane l's parent is PORT + l)")->type_name("ADDR:PORT");
  app.add_option("--topology", r.topology, "take address, lanes, parent, pool and static jobs of switch "
                                           "--name from a topology file (not combinable with "
                                           "--bind/--lanes/--parent/--slots/--slot-elements/--types/--job)")->type_name("FILE");
  app.add_option("--name", r.name, "this switch's name in the topology file")->type_name("NAME");
  app.add_option("--job", r.jobs, "ID:MEMBERS:SLOTS[:PARENT_MEMBER]: admit a job on every lane at start-up "
                                  "(repeatable); SLOTS is per lane, so the job's window is lanes x SLOTS")->type_name("ID:MEMBERS:SLOTS[:PM]")->allow_extra_args(false);
  app.add_option("--multicast", r.multicast, "JOB=GROUP: send the results of static job JOB that every member "
                                            "gets alike once, to the IPv4 multicast GROUP (224.0.0.0/4) at "
                                            "lane 0's port, which its members join (docs/PROTOCOL.md, "
                                            "\"Multicast results\"); needs a --bind address; with --topology only for jobs whose "
                                            "members here are hosts, not switches (repeatable)")->type_name("JOB=GROUP")->allow_extra_args(false);
  app.add_option("--multicast-groups", r.multicast_groups, "BASE/LEN: every job admitted at run time (by the "
                                                          "controller or an admit packet) gets the IPv4 multicast group "
                                                          "BASE + (job mod 2^(32-LEN)) for the results every member gets "
                                                          "alike; only for a switch whose members are hosts, never "
                                                          "switches (docs/PROTOCOL.md, \"Multicast results\"); needs a "
                                                          "--bind address")->type_name("BASE/LEN");
  app.add_option("--control-key", r.control_key, "gone: control packets no longer carry a key in clear; "
                                                  "use --control-key-file")->type_name("KEY");
  app.add_option("--key-file", r.key_file, "keys of the static jobs: lines 'JOB HEX64' (mode 600); every "
                                           "packet of a keyed job is authenticated (docs/PROTOCOL.md)")->type_name("FILE");
  app.add_option("--controller", r.controller, "register with `inc controller` at ADDR:PORT, heart-beat and "
                                               "take its admissions and releases (docs/CONTROLLER.md); needs "
                                               "--control-key-file")->type_name("ADDR:PORT");
  app.add_option("--control-key-file", r.control_key_file, "the cluster's control secret (a key file, mode "
                                                           "600) sealing the controller's connection; without "
                                                           "--controller: accept admit/release packets sealed "
                                                           "under it (docs/PROTOCOL.md, \"Control plane\")")->type_name("FILE");
  app.add_option("--idle-timeout", r.idle_timeout, "release jobs admitted by control packets after SEC idle on "
                                                   "every lane (default 300)")->type_name("SEC");
  app.add_option("--incarnation", r.incarnation, "identity of this start (default: random); workers detect "
                                                 "a restart by the change")->type_name("N");
  app.add_option("--metrics-port", r.metrics_port, "serve Prometheus text on http://METRICS-BIND:N/metrics "
                                                   "(0: any port)")->type_name("N");
  app.add_option("--metrics-bind", r.metrics_bind, "address of the metrics endpoint (default 127.0.0.1)")->type_name("ADDR");
  app.add_flag("--stats", r.stats, "print counters (per lane, with CPU time) on exit");
  app.add_option("--stats-interval", r.stats_interval, "also print them every SEC seconds (implies --stats)")->type_name("SEC");
  app.add_option("--batch", r.batch, "datagrams per recvmmsg/sendmmsg batch (default 32)")->type_name("N");
  app.add_option("--offload", r.offload, "kernel offloads on the lanes' sockets: gso,gro (default), gso, gro "
                                         "or none (docs/SWITCH.md, per-datagram cost)")->type_name("LIST");
  app.add_option("--fault-loss", r.fault_loss, "testing: loss probability of the datagrams this switch sends")->type_name("P");
  app.add_option("--fault-dup", r.fault_dup, "testing: duplication probability")->type_name("P");
  app.add_option("--fault-reorder", r.fault_reorder, "testing: reordering probability")->type_name("P");
  app.add_option("--fault-delay-us", r.fault_delay, "testing: delay of every datagram, microseconds")->type_name("N");
  app.add_option("--fault-jitter-us", r.fault_jitter, "testing: uniform extra delay, microseconds")->type_name("N");
  app.add_option("--fault-seed", r.fault_seed, "testing: seed of the fault injector (lane l uses seed + l)")->type_name("N");
}

std::string check_values(const CLI::App& app, RawArgs& r, SwitchDaemonOptions& o) {
  auto given = [&](const char* f) { return app.count(f) > 0; };
  std::string flag, value;
  auto bad = [&](const std::string& why) {
    return "invalid value for " + flag + ": '" + value + "' (" + why + ")";
  };
  auto at = [&](const char* f, const std::string& v) {
    flag = f;
    value = v;
    return given(f);
  };
  std::uint64_t u = 0;
  double d = 0;
  o.cfg.idle_timeout = 300 * kSecond;
  if (at("--bind", r.bind)) {
    auto e = parse_endpoint(r.bind);
    if (!e) return bad("want ADDR:PORT, IPv4");
    o.bind = *e;
  }
  bool lanes_given = false;
  // Topology jobs in which this switch has child switches as members (they join no group).
  std::map<std::uint32_t, std::string> child_switch;
  if (at("--lanes", r.lanes)) {
    if (!parse_uint(r.lanes, u, proto::kMaxLanes) || u == 0)
      return bad("1.." + std::to_string(proto::kMaxLanes));
    o.lanes = std::uint16_t(u);
    lanes_given = true;
  } else {
    o.lanes = default_lanes();
  }
  if (at("--slots", r.slots)) {
    if (!parse_uint(r.slots, u, 1u << 20) || u == 0) return bad("1..1048576");
    o.cfg.slots = std::uint32_t(u);
  }
  if (at("--slot-elements", r.slot_elems)) {
    if (!parse_uint(r.slot_elems, u, proto::kMaxPayloadBytes / 4) || u == 0) return bad("1..16358");
    o.cfg.slot_elems = std::uint32_t(u);
  }
  if (at("--types", r.types)) {
    auto c = parse_types(r.types);
    if (!c) return bad("a comma-separated list of i32, f32, f16, bf16, i8, u8, e4m3, e5m2, i4, mx");
    o.cfg.caps = *c;
  }
  if (at("--parent", r.parent)) {
    auto e = parse_endpoint(r.parent);
    if (!e || e->port() == 0 || e->ipv4_addr() == 0) return bad("want ADDR:PORT of the parent switch");
    o.cfg.parent = *e;
  }
  for (const auto& v : r.jobs) {  // ID:MEMBERS:SLOTS[:PARENT_MEMBER]
    flag = "--job";
    value = v;
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
        !parse_uint(parts[1], m, proto::kMaxMembers) || m == 0 || !parse_uint(parts[2], s, 0xFFFF) ||
        s == 0 || (parts.size() == 4 && !parse_uint(parts[3], pm, proto::kMaxMembers - 1)))
      return bad("want ID:MEMBERS(1.." + std::to_string(proto::kMaxMembers) + "):SLOTS(1..65535, per lane)[:PARENT_MEMBER]");
    o.jobs.push_back({std::uint32_t(id), std::uint16_t(m), std::uint32_t(s), std::uint16_t(pm), std::nullopt});
  }
  if (at("--control-key", r.control_key))
    return "--control-key is gone: admit/release packets no longer carry a key in clear; they are "
           "sealed under the secret of --control-key-file FILE (a key file, mode 600; docs/SWITCH.md)";
  if (at("--idle-timeout", r.idle_timeout)) {
    if (!parse_double(r.idle_timeout, d, 0.001, 1e7)) return bad("seconds > 0");
    o.cfg.idle_timeout = Nanos(d * 1e9);
  }
  if (at("--incarnation", r.incarnation)) {
    if (!parse_uint(r.incarnation, u, UINT64_MAX) || u == 0) return bad("a non-zero 64-bit number");
    o.cfg.incarnation = u;
    o.incarnation_given = true;
  }
  if (at("--metrics-port", r.metrics_port)) {
    if (!parse_uint(r.metrics_port, u, 65535)) return bad("0..65535");
    o.metrics_port = int(u);
  }
  if (at("--metrics-bind", r.metrics_bind)) {
    if (!parse_endpoint(r.metrics_bind + ":0")) return bad("an IPv4 address");
    o.metrics_bind = r.metrics_bind;
  }
  o.stats = r.stats;
  if (at("--stats-interval", r.stats_interval)) {
    if (!parse_double(r.stats_interval, d, 0.01, 1e6)) return bad("seconds >= 0.01");
    o.stats_interval = d;
    o.stats = true;
  }
  if (at("--batch", r.batch)) {
    if (!parse_uint(r.batch, u, 1024) || u == 0) return bad("1..1024");
    o.batch = std::size_t(u);
  }
  if (at("--offload", r.offload)) {
    UdpOffload off = UdpOffload::none();
    std::string_view list = r.offload;
    bool ok = !list.empty();
    while (ok && !list.empty()) {
      auto c = list.find(',');
      std::string_view item = list.substr(0, c);
      if (item == "gso") off.gso = true;
      else if (item == "gro") off.gro = true;
      else if (item == "none" && r.offload == "none") {}
      else ok = false;
      if (c == std::string_view::npos) break;
      list.remove_prefix(c + 1);
    }
    if (!ok) return bad("gso,gro, gso, gro or none");
    o.offload = off;
  }
  struct Prob {
    const char* f;
    std::string* v;
    double* out;
  } probs[] = {{"--fault-loss", &r.fault_loss, &o.faults.loss},
               {"--fault-dup", &r.fault_dup, &o.faults.dup},
               {"--fault-reorder", &r.fault_reorder, &o.faults.reorder}};
  for (auto& p : probs)
    if (at(p.f, *p.v)) {
      if (!parse_double(*p.v, d, 0, 1)) return bad("a probability in [0, 1]");
      *p.out = d;
    }
  struct Micros {
    const char* f;
    std::string* v;
    Nanos* out;
  } micros[] = {{"--fault-delay-us", &r.fault_delay, &o.faults.delay},
                {"--fault-jitter-us", &r.fault_jitter, &o.faults.jitter}};
  for (auto& m : micros)
    if (at(m.f, *m.v)) {
      if (!parse_uint(*m.v, u, 10'000'000)) return bad("0..10000000 microseconds");
      *m.out = Nanos(u) * 1000;
    }
  if (at("--fault-seed", r.fault_seed)) {
    if (!parse_uint(r.fault_seed, u, UINT64_MAX)) return bad("a 64-bit number");
    o.faults.seed = u;
  }

  // --name also names the switch in a controller's fabric (--controller).
  if (r.topology.empty() ? (!r.name.empty() && r.controller.empty()) : r.name.empty())
    return "--topology and --name go together (or --name and --controller)";
  if (!r.name.empty()) o.name = r.name;
  if (!r.topology.empty()) {
    for (const char* f : {"--bind", "--lanes", "--parent", "--slots", "--slot-elements", "--types", "--job"})
      if (given(f))
        return "--topology takes the address, lanes, parent, pool and jobs from the file; do not "
               "combine it with --bind/--lanes/--parent/--slots/--slot-elements/--types/--job";
    std::string err;
    auto t = load_topology(r.topology, err);
    if (!t) return err;
    const TopoSwitch* s = t->find(r.name);
    if (!s) return "switch '" + r.name + "' is not in " + r.topology;
    SwitchConfig c = switch_config(*t, *s);
    c.idle_timeout = o.cfg.idle_timeout;
    c.control_key = o.cfg.control_key;
    c.incarnation = o.cfg.incarnation;
    o.cfg = c;
    o.lanes = s->lanes;
    lanes_given = true;
    o.bind = s->addr;
    o.name = r.name;
    for (const auto& j : t->jobs) {
      auto plan = plan_job(*t, j, err);
      if (!plan) return r.topology + ": " + err;
      if (auto it = plan->specs.find(r.name); it != plan->specs.end()) o.jobs.push_back(it->second);
      for (const auto& [name, _] : plan->specs)
        if (const TopoSwitch* c = t->find(name); c && c->parent == r.name) child_switch.emplace(j.id, name);
    }
  }
  // Where the lanes go and how the pool splits, checked now rather than at the first packet.
  if (!lanes_given) {
    // The default (one lane per CPU) gives way to the configuration: fewer lanes when the pool
    // is too small for one slot per lane or for the static jobs' slots per lane.
    std::uint32_t need = 1;
    for (const auto& j : o.jobs) need = std::max(need, j.slots);
    o.lanes = std::uint16_t(std::clamp<std::uint32_t>(std::min<std::uint32_t>(o.lanes, o.cfg.slots / need), 1,
                                                      o.lanes));
  }
  if (o.cfg.slots < o.lanes)
    return "--slots " + std::to_string(o.cfg.slots) + " cannot be split over " + std::to_string(o.lanes) +
           " lanes (each lane needs at least one slot)";
  if (std::uint32_t(o.bind.port()) + o.lanes - 1 > 65535)
    return "--lanes " + std::to_string(o.lanes) + " from port " + std::to_string(o.bind.port()) +
           " go beyond port 65535 (lane l serves port + l)";
  if (given("--key-file")) {
    std::string err;
    auto keys = proto::auth::load_key_file(r.key_file, err);
    if (!keys) return "--key-file " + err;
    for (const auto& k : *keys) {
      auto it = std::find_if(o.jobs.begin(), o.jobs.end(), [&](const JobSpec& j) { return j.job == k.job; });
      if (it == o.jobs.end())
        return "--key-file " + r.key_file + " has a key for job " + std::to_string(k.job) +
               ", which is not a static job of this switch (--job or the topology)";
      it->key = k.key;
    }
  }
  for (const auto& v : r.multicast) {  // JOB=GROUP
    const auto eq = v.find('=');
    std::uint64_t id = 0;
    bool ok_id = eq != std::string::npos && eq > 0 && eq <= 10;
    for (std::size_t i = 0; ok_id && i < eq; ++i) {
      ok_id = v[i] >= '0' && v[i] <= '9';
      id = id * 10 + std::uint64_t(v[i] - '0');
    }
    if (!ok_id || id > 0xFFFFFFFFull)
      return "--multicast '" + v + "': write JOB=GROUP, e.g. 1=239.1.1.1";
    const auto g = eq + 1 < v.size() ? parse_endpoint(v.substr(eq + 1) + ":0") : std::nullopt;
    if (!g || !proto::is_multicast_group(g->ipv4_addr()))
      return "--multicast '" + v + "': '" + v.substr(eq + 1) +
             "' is not an IPv4 multicast group (224.0.0.0 to 239.255.255.255)";
    auto it = std::find_if(o.jobs.begin(), o.jobs.end(), [&](const JobSpec& j) { return j.job == id; });
    if (it == o.jobs.end())
      return "--multicast '" + v + "': job " + std::to_string(id) +
             " is not a static job of this switch (--job or the topology)";
    if (it->multicast.valid()) return "--multicast: job " + std::to_string(id) + " given twice";
    if (auto c = child_switch.find(std::uint32_t(id)); c != child_switch.end())
      return "--multicast '" + v + "': switch '" + r.name + "' has switch '" + c->second +
             "' as a member of job " + std::to_string(id) +
             ", and switches do not join groups (give the groups to the switches whose members are hosts)";
    if (o.bind.ipv4_addr() == 0)
      return "--multicast needs --bind with an address (the group's datagrams leave by its "
             "interface), not " + o.bind.str();
    it->multicast = *g;  // port 0: lane 0's, filled in when the lanes are bound
  }
  if (at("--multicast-groups", r.multicast_groups)) {  // BASE/LEN
    const auto slash = r.multicast_groups.find('/');
    std::uint64_t len = 0;
    const auto g = slash != std::string::npos ? parse_endpoint(r.multicast_groups.substr(0, slash) + ":0") : std::nullopt;
    if (!g || !parse_uint(r.multicast_groups.substr(slash + 1), len, 32) || len < 4)
      return bad("write BASE/LEN, e.g. 239.255.0.0/16, LEN 4..32");
    const std::uint32_t span_bits = 32 - std::uint32_t(len);
    const std::uint32_t base = g->ipv4_addr() & ~((std::uint32_t(1) << span_bits) - 1);  // span_bits <= 28
    if (!proto::is_multicast_group(base) || base != g->ipv4_addr())
      return bad("BASE must be the first address of a range inside 224.0.0.0/4, e.g. 239.255.0.0/16");
    if (o.bind.ipv4_addr() == 0)
      return "--multicast-groups needs --bind with an address (the group's datagrams leave by its "
             "interface), not " + o.bind.str();
    o.group_base = base;
    o.group_span = std::uint32_t(1) << span_bits;
  }
  if (given("--controller") && !given("--control-key-file"))
    return "--controller needs --control-key-file (the control connection is sealed)";
  if (given("--control-key-file")) {
    std::string err;
    auto keys = proto::auth::load_key_file(r.control_key_file, err);
    if (!keys) return "--control-key-file " + err;
    if (keys->empty()) return "--control-key-file " + r.control_key_file + " has no key";
    if (given("--controller")) {  // the controller owns admissions: no UDP admit/release
      auto ep = parse_endpoint(r.controller);
      if (!ep || ep->port() == 0) return "--controller '" + r.controller + "' is not an IPv4 ADDR:PORT";
      o.controller = r.controller;
      o.controller_key = keys->front().key;
    } else {
      o.cfg.control_key = keys->front().key;
    }
  }
  const std::uint32_t per_lane = slots_per_lane(o.cfg.slots, o.lanes);
  for (const auto& j : o.jobs) {
    if (j.parent_member != proto::kNoMember && !o.cfg.parent.valid())
      return "--job " + std::to_string(j.job) + " names a parent member but no --parent is given";
    if (j.slots > per_lane)
      return "--job " + std::to_string(j.job) + " needs " + std::to_string(j.slots) +
             " slots per lane, but each of the " + std::to_string(o.lanes) + " lanes has " +
             std::to_string(per_lane) + " (--slots " + std::to_string(o.cfg.slots) + " over " +
             std::to_string(o.lanes) + " lanes)";
  }
  return "";
}

}  // namespace

std::string switch_usage() {
  CLI::App app{"", "inc switch"};
  RawArgs r;
  define(app, r);
  return app.help();
}

std::string parse_switch_args(int argc, char** argv, SwitchDaemonOptions& o, bool& help) {
  help = false;
  CLI::App app{"", "inc switch"};
  RawArgs r;
  define(app, r);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    help = true;
    return "";
  } catch (const CLI::ParseError& e) {
    return std::string(e.what()) + " (see inc switch --help)";
  }
  return check_values(app, r, o);
}

}  // namespace inc::sw
