#include "testbed/plan.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace inc::testbed {

namespace {

constexpr int kPrefixLen = 16;  // all addresses on 10.99.0.0/16
constexpr std::uint32_t kJobId = 1;

std::string host_addr(int i) { return fmt::format("10.99.{}.{}", 1 + i / 250, 1 + i % 250); }
std::string leaf_addr(int k) { return fmt::format("10.99.0.{}", 1 + k); }
const char* kSpineAddr = "10.99.0.254";
// The job's multicast group (--multicast): administratively scoped (RFC 2365); the testbed's
// namespaces are isolated from the machine's network, so one fixed group cannot clash.
const char* kGroupAddr = "239.255.0.1";

Argv ip(const std::string& ns, std::initializer_list<std::string> args) {
  Argv a = {"ip", "-n", ns};
  a.insert(a.end(), args);
  return a;
}

void add_shaping(std::vector<Argv>& out, const Spec& s, const Direction& d) {
  if (d.bps == 0) return;
  const std::string rate = fmt::format("{}bit", d.bps);
  const std::string burst = std::to_string(d.burst_bytes), limit = std::to_string(d.queue_bytes);
  if (s.shaper == Shaper::tbf) {
    out.push_back({"tc", "-n", d.ns, "qdisc", "add", "dev", d.dev, "root", "tbf", "rate", rate,
                   "burst", burst, "limit", limit});
    return;
  }
  // htb: one class at the rate (ceil = rate: no borrowing), its queue an explicit byte FIFO
  // (htb's default leaf queue would be txqueuelen packets, i.e. 1000 jumbo frames).
  out.push_back({"tc", "-n", d.ns, "qdisc", "add", "dev", d.dev, "root", "handle", "1:", "htb",
                 "default", "1"});
  out.push_back({"tc", "-n", d.ns, "class", "add", "dev", d.dev, "parent", "1:", "classid", "1:1",
                 "htb", "rate", rate, "ceil", rate, "burst", burst, "cburst", burst, "quantum",
                 std::to_string(s.frame_bytes())});
  out.push_back({"tc", "-n", d.ns, "qdisc", "add", "dev", d.dev, "parent", "1:1", "handle", "10:",
                 "bfifo", "limit", limit});
}

Direction direction(const Spec& s, std::string ns, std::string dev, std::string peer_ns,
                    std::string peer_dev, std::uint64_t bps) {
  Direction d{std::move(ns), std::move(dev), std::move(peer_ns), std::move(peer_dev), bps, 0, 0};
  d.queue_bytes = s.queue_bytes(bps);
  d.burst_bytes = s.burst_bytes(bps);
  return d;
}

}  // namespace

std::string state_dir(const Identity& id) { return fmt::format("{}/{}-{}", id.run_dir, id.prefix, id.pid); }
std::string namespace_name(const Identity& id, const std::string& role) {
  return fmt::format("{}-{}-{}", id.prefix, id.pid, role);
}
std::string namespace_path(const std::string& ns) { return "/run/netns/" + ns; }

std::string shell_join(const Argv& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    bool plain = !a.empty() && std::all_of(a.begin(), a.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("-_./:=,+@%").find(c) != std::string_view::npos;
    });
    if (plain) {
      out += a;
    } else {
      out += '\'';
      for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
      out += '\'';
    }
  }
  return out;
}

Plan make_plan(const Spec& spec, const Identity& id) {
  Plan p;
  p.spec = spec;
  p.id = id;
  const bool two = spec.two_level();
  const std::string mtu = std::to_string(spec.mtu);
  const std::string len = "/" + std::to_string(kPrefixLen);

  // Namespaces and addresses.
  int host = 0;
  for (std::size_t k = 0; k < spec.leaves.size(); ++k) {
    LeafPlan l;
    l.name = two ? fmt::format("leaf{}", k) : "switch";
    l.ns = namespace_name(id, two ? l.name : "sw");
    l.addr = leaf_addr(static_cast<int>(k));
    for (int i = 0; i < spec.leaves[k].hosts; ++i, ++host) {
      l.hosts.push_back(host);
      p.hosts.push_back({static_cast<int>(k), namespace_name(id, fmt::format("h{}", host)), host_addr(host)});
    }
    p.leaves.push_back(std::move(l));
  }
  if (two) {
    p.spine_ns = namespace_name(id, "spine");
    p.spine_addr = kSpineAddr;
  }
  for (const auto& h : p.hosts) p.namespaces.push_back(h.ns);
  for (const auto& l : p.leaves) p.namespaces.push_back(l.ns);
  if (two) p.namespaces.push_back(p.spine_ns);

  // Commands: namespaces, loopback, bridges, host links, uplinks, shaping.
  for (const auto& ns : p.namespaces) p.setup.push_back({"ip", "netns", "add", ns});
  if (id.ipv6)  // no IPv6 autoconfiguration chatter in the link counters
    for (const auto& ns : p.namespaces)
      p.setup.push_back({"ip", "netns", "exec", ns, "sysctl", "-q", "-w",
                         "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"});
  for (const auto& ns : p.namespaces) p.setup.push_back(ip(ns, {"link", "set", "lo", "up"}));
  auto bridge = [&](const std::string& ns, const std::string& addr) {
    if (spec.multicast)  // the group is flooded to every port: on one level every host holds
                         // members, so that is exactly the members (docs/TESTBED.md, "Multicast")
      p.setup.push_back(ip(ns, {"link", "add", "br0", "mtu", mtu, "type", "bridge", "mcast_snooping",
                                "0"}));
    else
      p.setup.push_back(ip(ns, {"link", "add", "br0", "mtu", mtu, "type", "bridge"}));
    p.setup.push_back(ip(ns, {"addr", "add", addr + len, "dev", "br0"}));
    p.setup.push_back(ip(ns, {"link", "set", "br0", "up"}));
  };
  for (const auto& l : p.leaves) bridge(l.ns, l.addr);
  if (two) bridge(p.spine_ns, p.spine_addr);
  for (std::size_t i = 0; i < p.hosts.size(); ++i) {
    const HostPlan& h = p.hosts[i];
    const LeafPlan& l = p.leaves[static_cast<std::size_t>(h.leaf)];
    const std::string port = fmt::format("h{}", i);
    p.setup.push_back(ip(h.ns, {"link", "add", "eth0", "mtu", mtu, "type", "veth", "peer", "name",
                                port, "mtu", mtu, "netns", l.ns}));
    p.setup.push_back(ip(h.ns, {"addr", "add", h.addr + len, "dev", "eth0"}));
    p.setup.push_back(ip(h.ns, {"link", "set", "eth0", "up"}));
    p.setup.push_back(ip(l.ns, {"link", "set", port, "master", "br0", "up"}));
    const std::uint64_t bps = spec.leaves[static_cast<std::size_t>(h.leaf)].link_bps;
    p.links.push_back({fmt::format("h{}", i), direction(spec, h.ns, "eth0", l.ns, port, bps),
                       direction(spec, l.ns, port, h.ns, "eth0", bps)});
  }
  if (two)
    for (std::size_t k = 0; k < p.leaves.size(); ++k) {
      const LeafPlan& l = p.leaves[k];
      p.setup.push_back(ip(l.ns, {"link", "add", "up0", "mtu", mtu, "type", "veth", "peer", "name",
                                  l.name, "mtu", mtu, "netns", p.spine_ns}));
      p.setup.push_back(ip(l.ns, {"link", "set", "up0", "master", "br0", "up"}));
      p.setup.push_back(ip(p.spine_ns, {"link", "set", l.name, "master", "br0", "up"}));
      const std::uint64_t bps = spec.leaves[k].uplink_bps;
      p.links.push_back({l.name + " uplink", direction(spec, l.ns, "up0", p.spine_ns, l.name, bps),
                         direction(spec, p.spine_ns, l.name, l.ns, "up0", bps)});
    }
  for (const auto& link : p.links) {
    add_shaping(p.setup, spec, link.up);
    add_shaping(p.setup, spec, link.down);
  }

  // Ranks: block placement, ranks_per_host consecutive ranks per host.
  for (int r = 0; r < spec.world_size(); ++r)
    p.ranks.push_back({r / spec.ranks_per_host, r % spec.ranks_per_host});
  p.store_ns = p.hosts.front().ns;
  p.store_addr = p.hosts.front().addr;
  p.rank_unset = {"INC_SWITCH", "INC_TOPOLOGY", "INC_SWITCH_JOB", "INC_KEY_FILE", "INC_HOST", "INC_IFACE"};

  // Switches.
  if (!spec.with_switch) return p;
  auto common = [&](SwitchPlan& s) {
    s.argv.push_back("--stats");
    if (spec.metrics_port > 0) {
      s.argv.insert(s.argv.end(), {"--metrics-port", std::to_string(spec.metrics_port),
                                   "--metrics-bind", s.addr});
    }
    s.argv.insert(s.argv.end(), spec.switch_args.begin(), spec.switch_args.end());
  };
  const std::string ep_port = std::to_string(spec.switch_port);
  // Every packet of the job is authenticated: write_state puts a fresh key there (mode 600).
  if (spec.auth) {
    p.key_path = state_dir(id) + "/keys";
    p.key_job = kJobId;
  }
  // --key-file and INC_KEY_FILE when keyed.
  auto keyed = [&](std::vector<std::string> argv) {
    if (spec.auth) argv.insert(argv.end(), {"--key-file", p.key_path});
    return argv;
  };
  if (!two) {
    SwitchPlan s{"switch", p.leaves[0].ns, p.leaves[0].addr, spec.switch_port, {}};
    s.argv = {id.inc_exe, "switch", "--bind", s.addr + ":" + ep_port, "--slot-elements",
              std::to_string(spec.slot_elements), "--job",
              fmt::format("{}:{}:{}", kJobId, spec.world_size(), spec.job_slots)};
    s.argv = keyed(s.argv);
    if (spec.multicast) {
      s.argv.insert(s.argv.end(), {"--multicast", fmt::format("{}={}", kJobId, kGroupAddr)});
      p.group = kGroupAddr;
    }
    common(s);
    p.switches.push_back(std::move(s));
    p.rank_env = {{"INC_SWITCH", p.leaves[0].addr + ":" + ep_port},
                  {"INC_SWITCH_JOB", std::to_string(kJobId)}};
    if (spec.auth) p.rank_env.emplace_back("INC_KEY_FILE", p.key_path);
    return p;
  }
  p.topology_path = state_dir(id) + "/topology";
  std::string& t = p.topology_text;
  t = fmt::format("# generated by inc testbed (pid {}); see docs/SWITCH.md for the format\n", id.pid);
  t += fmt::format("switch spine {}:{} slot-elements={}\n", p.spine_addr, ep_port, spec.slot_elements);
  for (const auto& l : p.leaves)
    t += fmt::format("switch {} {}:{} parent=spine slot-elements={}\n", l.name, l.addr, ep_port,
                     spec.slot_elements);
  t += fmt::format("job {} slots={}", kJobId, spec.job_slots);
  for (const auto& l : p.leaves) {
    const int first = l.hosts.front() * spec.ranks_per_host;
    const int last = (l.hosts.back() + 1) * spec.ranks_per_host - 1;
    t += fmt::format(" {}={}-{}", l.name, first, last);
  }
  t += "\n";
  auto topo_switch = [&](const std::string& name, const std::string& ns, const std::string& addr) {
    SwitchPlan s{name, ns, addr, spec.switch_port,
                 keyed({id.inc_exe, "switch", "--topology", p.topology_path, "--name", name})};
    common(s);
    p.switches.push_back(std::move(s));
  };
  topo_switch("spine", p.spine_ns, p.spine_addr);
  for (const auto& l : p.leaves) topo_switch(l.name, l.ns, l.addr);
  p.rank_env = {{"INC_TOPOLOGY", p.topology_path}, {"INC_SWITCH_JOB", std::to_string(kJobId)}};
  if (spec.auth) p.rank_env.emplace_back("INC_KEY_FILE", p.key_path);
  return p;
}

std::string describe_plan(const Plan& p, bool commands) {
  const Spec& s = p.spec;
  std::string o;
  const std::string pfx = namespace_name(p.id, "");
  o += fmt::format("testbed: {} host{} x {} rank{} = {} ranks, {}; MTU {}, shaper {}\n", s.hosts(),
                   s.hosts() == 1 ? "" : "s", s.ranks_per_host, s.ranks_per_host == 1 ? "" : "s",
                   s.world_size(),
                   s.two_level() ? fmt::format("two levels: {} leaves + spine", s.leaves.size())
                                 : std::string("one level: hosts on one bridge"),
                   s.mtu, name(s.shaper));
  o += fmt::format("namespaces: {}* ({}), state {}\n", pfx, p.namespaces.size(), state_dir(p.id));
  if (s.with_switch)
    o += s.auth ? fmt::format("switch job: keyed, every packet authenticated (a fresh key per run in {})\n", p.key_path)
                : std::string("switch job: unauthenticated (--no-auth)\n");
  if (s.with_switch && s.multicast)
    o += fmt::format("results: once per chunk to multicast group {}:{}, flooded by the bridge "
                     "to every host (all hold members)\n", p.group, s.switch_port);
  o += fmt::format("\n{:<14} {:<12} {:<22} {:>14} {:>10} {:>10}\n", "link", "address", "between",
                   "rate each way", "queue", "burst");
  for (std::size_t i = 0; i < p.links.size(); ++i) {
    const LinkPlan& l = p.links[i];
    const bool is_host = i < p.hosts.size();
    const std::string addr = is_host ? p.hosts[i].addr : "";
    const std::string between =
        is_host ? fmt::format("{} - {}", l.name, p.leaves[static_cast<std::size_t>(p.hosts[i].leaf)].name)
                : fmt::format("{} - spine", l.name.substr(0, l.name.find(' ')));
    const bool shaped = l.up.bps != 0;
    o += fmt::format("{:<14} {:<12} {:<22} {:>14} {:>10} {:>10}\n", l.name, addr, between,
                     format_rate(l.up.bps), shaped ? format_bytes(l.up.queue_bytes) : "-",
                     shaped ? format_bytes(l.up.burst_bytes) : "-");
  }
  if (s.two_level()) {
    for (std::size_t k = 0; k < s.leaves.size(); ++k) {
      const auto& l = s.leaves[k];
      if (l.uplink_bps && l.link_bps)
        o += fmt::format("leaf{}: {} host{} x {} under a {} uplink: oversubscription {:.3g}:1\n", k,
                         l.hosts, l.hosts == 1 ? "" : "s", format_rate(l.link_bps), format_rate(l.uplink_bps),
                         static_cast<double>(l.link_bps) * l.hosts / static_cast<double>(l.uplink_bps));
    }
  }
  o += "\n";
  if (p.switches.empty()) {
    o += "switches: none (--no-switch): collectives run on the hosts\n";
  } else {
    const int dgram = kUdpIpHeaderBytes + kSwitchHeaderBytes + 4 * s.slot_elements;
    o += fmt::format("switches: slot {} elements ({}), datagram {} B{}; job {} slots\n",
                     s.slot_elements, s.slot_elements_given ? "given" : "from the MTU", dgram,
                     dgram > s.mtu ? fmt::format(" > MTU {}: IP fragments!", s.mtu) : "",
                     s.job_slots);
    for (const auto& sw : p.switches) {
      o += fmt::format("  {:<7} {}:{} in {}\n          {}\n", sw.name, sw.addr, sw.port, sw.ns,
                       shell_join(sw.argv));
      if (s.metrics_port > 0)
        o += fmt::format("          metrics: ip netns exec {} curl -s http://{}:{}/metrics\n", sw.ns,
                         sw.addr, s.metrics_port);
    }
    if (!p.topology_text.empty()) o += fmt::format("topology file {}:\n{}", p.topology_path, p.topology_text);
  }
  o += fmt::format("\nranks: {} per host, block placement (rank r on host r / {}); store {} in {}\n",
                   s.ranks_per_host, s.ranks_per_host, p.store_addr, p.store_ns);
  std::string env;
  for (const auto& [k, v] : p.rank_env) env += fmt::format(" {}={}", k, v);
  o += fmt::format("rank environment: INC_RANK INC_WORLD_SIZE INC_LOCAL_RANK INC_LOCAL_SIZE "
                   "INC_STORE{}\n", env);
  if (commands) {
    o += "\ncommands:\n";
    for (const auto& c : p.setup) o += "  " + shell_join(c) + "\n";
  }
  return o;
}

}  // namespace inc::testbed
