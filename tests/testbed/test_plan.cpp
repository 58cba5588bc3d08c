// inc testbed without root: the plan (names, addresses, links, shaping commands, switches,
// topology file, rank placement) and the parsing of `tc -j` / `ip -j` counters.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "inc/types.hpp"
#include "src/switch/topology.hpp"
#include "testbed/counters.hpp"
#include "testbed/plan.hpp"

using namespace inc::testbed;

namespace {

Identity test_id() {
  Identity id;
  id.pid = 4242;
  id.inc_exe = "/opt/inc";
  return id;
}

Plan plan_for(int hosts, int leaves, int rph, Shaper shaper = Shaper::tbf, bool with_switch = true) {
  SpecInput in;
  in.hosts = hosts;
  in.leaves = leaves;
  in.ranks_per_host = rph;
  in.shaper = shaper == Shaper::tbf ? "tbf" : "htb";
  in.with_switch = with_switch;
  if (leaves > 1) in.oversubscription = 2.0;
  return make_plan(build_spec(in), test_id());
}

// Commands whose argv starts with these words.
std::size_t count_commands(const Plan& p, std::initializer_list<std::string> head) {
  return static_cast<std::size_t>(std::count_if(p.setup.begin(), p.setup.end(), [&](const Argv& a) {
    return std::equal(head.begin(), head.end(), a.begin(), a.begin() + std::min(a.size(), head.size()));
  }));
}

std::size_t count_qdisc_roots(const Plan& p, const std::string& ns, const std::string& dev) {
  return static_cast<std::size_t>(std::count_if(p.setup.begin(), p.setup.end(), [&](const Argv& a) {
    return a.size() > 8 && a[0] == "tc" && a[2] == ns && a[3] == "qdisc" && a[6] == dev && a[7] == "root";
  }));
}

}  // namespace

TEST(TestbedPlan, OneLevel) {
  Plan p = plan_for(3, 1, 2);
  ASSERT_EQ(p.hosts.size(), 3u);
  ASSERT_EQ(p.leaves.size(), 1u);
  EXPECT_EQ(p.namespaces, (std::vector<std::string>{"inctb-4242-h0", "inctb-4242-h1", "inctb-4242-h2", "inctb-4242-sw"}));
  EXPECT_EQ(count_commands(p, {"ip", "netns", "add"}), 4u);
  // Every host link is shaped in both directions; the switch has no link of its own.
  ASSERT_EQ(p.links.size(), 3u);
  for (const auto& l : p.links) {
    EXPECT_EQ(l.up.bps, 1'000'000'000u);
    EXPECT_EQ(l.down.bps, 1'000'000'000u);
    EXPECT_EQ(count_qdisc_roots(p, l.up.ns, l.up.dev), 1u) << l.name;
    EXPECT_EQ(count_qdisc_roots(p, l.down.ns, l.down.dev), 1u) << l.name;
    EXPECT_EQ(l.up.peer_ns, l.down.ns);
    EXPECT_EQ(l.up.peer_dev, l.down.dev);
  }
  // Ranks: block placement, two per host.
  ASSERT_EQ(p.ranks.size(), 6u);
  EXPECT_EQ(p.ranks[3].host, 1);
  EXPECT_EQ(p.ranks[3].local_rank, 1);
  EXPECT_EQ(p.store_ns, "inctb-4242-h0");
  EXPECT_EQ(p.store_addr, "10.99.1.1");
  // One switch with --bind/--job for all 6 ranks, slot size from the MTU.
  ASSERT_EQ(p.switches.size(), 1u);
  const auto& sw = p.switches[0];
  EXPECT_EQ(sw.ns, "inctb-4242-sw");
  EXPECT_EQ(shell_join(sw.argv),
            "/opt/inc switch --bind 10.99.0.1:7710 --slot-elements 2048 --job 1:6:32 --key-file "
            "/run/inc-testbed/inctb-4242/keys --multicast 1=239.255.0.1 --stats --metrics-port 9100 "
            "--metrics-bind 10.99.0.1");
  // The job is keyed: the switch and the ranks read one key file (written per run, mode 600).
  EXPECT_EQ(p.rank_env, (std::vector<std::pair<std::string, std::string>>{
                            {"INC_SWITCH", "10.99.0.1:7710"},
                            {"INC_SWITCH_JOB", "1"},
                            {"INC_KEY_FILE", "/run/inc-testbed/inctb-4242/keys"}}));
  EXPECT_TRUE(p.topology_text.empty());
}

TEST(TestbedPlan, AddressesAndNamesAreUnique) {
  Plan p = plan_for(256, 8, 1, Shaper::tbf, true);
  std::set<std::string> addrs, names(p.namespaces.begin(), p.namespaces.end());
  for (const auto& h : p.hosts) addrs.insert(h.addr);
  for (const auto& l : p.leaves) addrs.insert(l.addr);
  addrs.insert(p.spine_addr);
  EXPECT_EQ(addrs.size(), 256u + 8 + 1);
  EXPECT_EQ(names.size(), p.namespaces.size());
  EXPECT_EQ(p.namespaces.size(), 256u + 8 + 1);
}

TEST(TestbedPlan, TwoLevelsTopologyMatchesTheHosts) {
  Plan p = plan_for(5, 2, 2, Shaper::htb);
  ASSERT_EQ(p.leaves.size(), 2u);
  EXPECT_EQ(p.spine_ns, "inctb-4242-spine");
  // Host links and uplinks, both directions, htb: root + class + bfifo per direction.
  ASSERT_EQ(p.links.size(), 5u + 2);
  // + per leaf the uplink's multicast filter (clsact and its bpf filter).
  EXPECT_EQ(count_commands(p, {"tc"}), 3u * 2 * 7 + 2 * 2);
  EXPECT_EQ(p.links[5].name, "leaf0 uplink");
  EXPECT_EQ(p.links[5].up.ns, p.leaves[0].ns);
  EXPECT_EQ(p.links[5].up.peer_ns, p.spine_ns);
  // leaf0 has 2 hosts at 1 Gbit/s, oversubscribed 2:1.
  EXPECT_EQ(p.links[5].up.bps, 1'000'000'000u);
  // Switches start root first; every one reads the generated topology file.
  ASSERT_EQ(p.switches.size(), 3u);
  EXPECT_EQ(p.switches[0].name, "spine");
  EXPECT_EQ(p.topology_path, "/run/inc-testbed/inctb-4242/topology");
  for (const auto& s : p.switches) {
    EXPECT_NE(std::find(s.argv.begin(), s.argv.end(), p.topology_path), s.argv.end());
    EXPECT_NE(std::find(s.argv.begin(), s.argv.end(), s.name), s.argv.end());
  }
  EXPECT_EQ(p.rank_env[0], (std::pair<std::string, std::string>{"INC_TOPOLOGY", p.topology_path}));
  // The topology file is valid, and each rank attaches to the leaf of its host.
  std::string err;
  auto topo = inc::sw::parse_topology(p.topology_text, err);
  ASSERT_TRUE(topo) << err << "\n" << p.topology_text;
  ASSERT_EQ(topo->jobs.size(), 1u);
  auto jp = inc::sw::plan_job(*topo, topo->jobs[0], err);
  ASSERT_TRUE(jp) << err;
  EXPECT_EQ(jp->root, "spine");
  ASSERT_EQ(jp->ranks.size(), p.ranks.size());
  for (std::size_t r = 0; r < p.ranks.size(); ++r) {
    const auto& host = p.hosts[static_cast<std::size_t>(p.ranks[r].host)];
    EXPECT_EQ(jp->ranks[r].sw, p.leaves[static_cast<std::size_t>(host.leaf)].name) << "rank " << r;
  }
  for (const auto& s : topo->switches) EXPECT_EQ(s.slot_elems, 2048u);
}

TEST(TestbedPlan, NoSwitchAndUnshaped) {
  SpecInput in;
  in.hosts = 2;
  in.with_switch = false;
  in.link = "none";
  Plan p = make_plan(build_spec(in), test_id());
  EXPECT_TRUE(p.switches.empty());
  EXPECT_TRUE(p.rank_env.empty());
  EXPECT_EQ(count_commands(p, {"tc"}), 0u);
  // Inherited switch variables would point the ranks at a switch that does not exist.
  EXPECT_NE(std::find(p.rank_unset.begin(), p.rank_unset.end(), "INC_SWITCH"), p.rank_unset.end());
  std::string d = describe_plan(p, true);
  EXPECT_NE(d.find("switches: none"), std::string::npos) << d;
  EXPECT_NE(d.find("unshaped"), std::string::npos) << d;
}

TEST(TestbedPlan, KeyedByDefaultAndNoAuthOnRequest) {
  for (int leaves : {1, 2}) {
    SpecInput in;
    in.hosts = 4;
    in.leaves = leaves;
    if (leaves > 1) in.oversubscription = 2.0;
    Plan keyed = make_plan(build_spec(in), test_id());
    for (const auto& sw : keyed.switches)
      EXPECT_NE(shell_join(sw.argv).find("--key-file " + keyed.key_path), std::string::npos) << sw.name;
    EXPECT_EQ(keyed.rank_env.back(), (std::pair<std::string, std::string>{"INC_KEY_FILE", keyed.key_path}));
    EXPECT_NE(describe_plan(keyed, false).find("switch job: keyed"), std::string::npos);
    in.auth = false;
    Plan plain = make_plan(build_spec(in), test_id());
    EXPECT_TRUE(plain.key_path.empty());
    for (const auto& sw : plain.switches) EXPECT_EQ(shell_join(sw.argv).find("--key-file"), std::string::npos);
    for (const auto& [k, v] : plain.rank_env) EXPECT_NE(k, "INC_KEY_FILE");
    EXPECT_NE(describe_plan(plain, false).find("unauthenticated (--no-auth)"), std::string::npos);
  }
}

TEST(TestbedPlan, MulticastByDefaultGivesTheJobAGroupAndTheBridgeFloods) {
  SpecInput in;
  in.hosts = 3;
  Plan p = make_plan(build_spec(in), test_id());  // the default: multicast results
  ASSERT_EQ(p.switches.size(), 1u);
  EXPECT_NE(shell_join(p.switches[0].argv).find("--multicast 1=239.255.0.1"), std::string::npos);
  EXPECT_EQ(p.leaves[0].group, "239.255.0.1");
  bool flood = false;
  for (const auto& c : p.setup)
    flood |= shell_join(c).find("type bridge mcast_snooping 0") != std::string::npos;
  EXPECT_TRUE(flood) << "the bridge must flood the group to every host";
  EXPECT_NE(describe_plan(p, false).find("multicast group 239.255.0.1:7710"), std::string::npos);
  // Off on request (--no-multicast, file: multicast = false): no group, the default bridge.
  in.multicast = false;
  Plan uni = make_plan(build_spec(in), test_id());
  EXPECT_EQ(shell_join(uni.switches[0].argv).find("--multicast"), std::string::npos);
  EXPECT_TRUE(uni.leaves[0].group.empty());
  for (const auto& c : uni.setup) EXPECT_EQ(shell_join(c).find("mcast_snooping"), std::string::npos);
  EXPECT_NE(describe_plan(uni, false).find("results: unicast"), std::string::npos);
  // Without a switch there is nothing to replicate: off by default, refused when asked for.
  in.multicast.reset();
  in.with_switch = false;
  EXPECT_FALSE(build_spec(in).multicast);
  in.multicast = true;
  EXPECT_THROW(build_spec(in), inc::Error);
}

TEST(TestbedPlan, TwoLevelsGiveEachLeafItsGroupAndKeepItOffTheUplink) {
  SpecInput in;
  in.hosts = 5;
  in.leaves = 3;
  in.oversubscription = 2.0;
  Plan p = make_plan(build_spec(in), test_id());
  ASSERT_EQ(p.switches.size(), 4u);
  EXPECT_EQ(p.switches[0].name, "spine");
  EXPECT_EQ(shell_join(p.switches[0].argv).find("--multicast"), std::string::npos)
      << "the spine's members are switches: unicast";
  std::set<std::string> groups;
  for (std::size_t k = 0; k < 3; ++k) {
    const auto& l = p.leaves[k];
    EXPECT_EQ(l.group, "239.255.0." + std::to_string(k + 1));
    groups.insert(l.group);
    EXPECT_NE(shell_join(p.switches[k + 1].argv).find("--name " + l.name), std::string::npos);
    EXPECT_NE(shell_join(p.switches[k + 1].argv).find("--multicast 1=" + l.group), std::string::npos);
    // The uplink's egress drops IPv4 multicast before the shaper (the bridge floods its own).
    bool clsact = false, filter = false;
    for (const auto& c : p.setup) {
      const std::string j = shell_join(c);
      clsact |= j == "tc -n " + l.ns + " qdisc add dev up0 clsact";
      filter |= j.starts_with("tc -n " + l.ns + " filter add dev up0 egress bpf da bytecode") &&
                j.find("21 0 1 224,6 0 0 2,") != std::string::npos;
    }
    EXPECT_TRUE(clsact && filter) << l.name;
  }
  EXPECT_EQ(groups.size(), 3u);
  // The switches accept the plan: each leaf's group is for a job whose members are hosts.
  std::string err;
  auto topo = inc::sw::parse_topology(p.topology_text, err);
  ASSERT_TRUE(topo) << err;
  EXPECT_NE(describe_plan(p, false).find("each leaf's multicast group (239.255.0.1:7710 ... 239.255.0.3:7710)"),
            std::string::npos) << describe_plan(p, false);
  in.multicast = false;
  for (const auto& c : make_plan(build_spec(in), test_id()).setup)
    EXPECT_EQ(shell_join(c).find("clsact"), std::string::npos);
}

TEST(TestbedPlan, ControllerFabricMatchesThePlan) {
  SpecInput in;
  in.hosts = 4;
  in.leaves = 2;
  in.ranks_per_host = 2;
  in.link = "1gbit";
  in.oversubscription = 2.0;
  in.controller = true;
  Plan p = make_plan(build_spec(in), test_id());
  // The controller: beside the spine, on its address, reading the plan's fabric and secret.
  EXPECT_EQ(p.controller.ns, p.spine_ns);
  EXPECT_EQ(p.controller.addr, p.spine_addr);
  const std::string ctl = p.spine_addr + ":7700";
  EXPECT_EQ(shell_join(p.controller.argv),
            "/opt/inc controller serve --fabric " + p.fabric_path + " --control-key-file " + p.control_key_path +
                " --listen " + ctl + " --default-slots 32 --metrics-port 9101");
  std::string err;
  auto fab = inc::sw::parse_topology(p.fabric_text, err);
  ASSERT_TRUE(fab) << err << "\n" << p.fabric_text;
  ASSERT_EQ(fab->switches.size(), p.switches.size());
  for (const auto& s : p.switches) {
    const auto* f = fab->find(s.name);
    ASSERT_TRUE(f) << s.name;
    EXPECT_EQ(f->addr.str(), s.addr + ":7710");
    EXPECT_EQ(f->parent, s.name == "spine" ? "" : "spine");
    EXPECT_EQ(f->uplink_gbps, s.name == "spine" ? 0.0 : 1.0);  // 2 hosts x 1 Gbit/s / 2
    const std::string argv = shell_join(s.argv);
    EXPECT_NE(argv.find("--name " + s.name + " --bind " + s.addr + ":7710"), std::string::npos) << argv;
    EXPECT_NE(argv.find("--controller " + ctl + " --control-key-file " + p.control_key_path), std::string::npos);
    EXPECT_EQ(argv.find("--job"), std::string::npos) << argv;
    EXPECT_EQ(argv.find("--key-file"), std::string::npos) << argv;
    // Multicast by default: each leaf gives the jobs it admits a group of its own range; the
    // spine, whose members are the leaves, none.
    if (s.name == "spine") EXPECT_EQ(argv.find("--multicast-groups"), std::string::npos) << argv;
    else EXPECT_NE(argv.find("--multicast-groups 239.254." + s.name.substr(4) + ".0/24 --controller"), std::string::npos) << argv;
  }
  // ... and the uplinks keep the leaves' groups under them.
  EXPECT_EQ(count_commands(p, {"tc", "-n", p.leaves[1].ns, "filter", "add", "dev", "up0", "egress"}), 1u);
  EXPECT_NE(describe_plan(p, false).find("a multicast group per job at each leaf (239.254.0.0/24 ... 239.254.1.0/24"),
            std::string::npos) << describe_plan(p, false);
  SpecInput uni = in;
  uni.multicast = false;
  for (const auto& s : make_plan(build_spec(uni), test_id()).switches)
    EXPECT_EQ(shell_join(s.argv).find("--multicast"), std::string::npos);
  // One host per rank, on its host's leaf.
  ASSERT_EQ(fab->hosts.size(), p.ranks.size());
  for (std::size_t r = 0; r < p.ranks.size(); ++r) {
    const auto* h = fab->find_host("r" + std::to_string(r));
    ASSERT_TRUE(h) << r;
    EXPECT_EQ(h->leaf, p.leaves[static_cast<std::size_t>(p.hosts[static_cast<std::size_t>(p.ranks[r].host)].leaf)].name);
  }
  EXPECT_EQ(fab->find_host("r7")->leaf, "leaf1");
  auto env = [&](const std::string& k) {
    for (const auto& [key, v] : p.rank_env)
      if (key == k) return v;
    return std::string("(unset)");
  };
  EXPECT_EQ(env("INC_CONTROLLER"), ctl);
  EXPECT_EQ(env("INC_CONTROL_KEY_FILE"), p.control_key_path);
  EXPECT_EQ(env("INC_CONTROL_HOST"), "r{rank}");
  EXPECT_EQ(env("INC_SWITCH"), "(unset)");
  EXPECT_EQ(env("INC_KEY_FILE"), "(unset)");
  EXPECT_NE(std::find(p.rank_unset.begin(), p.rank_unset.end(), "INC_CONTROLLER"), p.rank_unset.end());
  EXPECT_NE(describe_plan(p, false).find("controller fabric " + p.fabric_path), std::string::npos);
  // One level: the controller beside the single switch, which gives its jobs groups; no
  // controller without a switch or a key for every job.
  in.leaves = 1;
  in.hosts = 3;
  in.oversubscription.reset();
  Plan one = make_plan(build_spec(in), test_id());
  EXPECT_EQ(one.controller.addr, one.switches[0].addr);
  ASSERT_TRUE(inc::sw::parse_topology(one.fabric_text, err)) << err;
  EXPECT_EQ(one.fabric_text.find("parent="), std::string::npos);
  EXPECT_NE(shell_join(one.switches[0].argv).find("--multicast-groups 239.254.0.0/24"), std::string::npos);
  for (auto set : {+[](SpecInput& x) { x.with_switch = false; }, +[](SpecInput& x) { x.auth = false; }}) {
    SpecInput bad = in;
    set(bad);
    EXPECT_THROW(build_spec(bad), inc::Error);
  }
}

TEST(TestbedPlan, TbfCommandCarriesRateBurstAndLimit) {
  Plan p = plan_for(1, 1, 1);
  const Argv* tbf = nullptr;
  for (const auto& a : p.setup)
    if (a.size() > 8 && a[0] == "tc" && a[8] == "tbf") tbf = &a;
  ASSERT_NE(tbf, nullptr);
  EXPECT_EQ(shell_join(*tbf).substr(shell_join(*tbf).find("root")),
            "root tbf rate 1000000000bit burst 125000 limit 500000");
  std::string d = describe_plan(p, true);
  EXPECT_NE(d.find("tc -n inctb-4242-h0 qdisc add dev eth0 root tbf"), std::string::npos) << d;
  EXPECT_NE(d.find("ip netns exec inctb-4242-sw curl -s http://10.99.0.1:9100/metrics"), std::string::npos) << d;
}

TEST(TestbedPlan, ShellJoinQuotes) {
  EXPECT_EQ(shell_join({"a", "b c", "it's", ""}), "a 'b c' 'it'\\''s' ''");
}

TEST(TestbedCounters, ParsesTcAndIpJson) {
  auto q = parse_tc_json(
      R"([{"kind":"noqueue","handle":"0:","dev":"h0","root":true,"bytes":0,"packets":0,"drops":0,"overlimits":0},
          {"kind":"htb","handle":"1:","dev":"eth0","root":true,"bytes":1000,"packets":10,"drops":3,"overlimits":7},
          {"kind":"bfifo","handle":"10:","dev":"eth0","parent":"1:1","bytes":999,"packets":9,"drops":3}])");
  ASSERT_EQ(q.size(), 2u);
  EXPECT_EQ(q["eth0"].kind, "htb");
  EXPECT_EQ(q["eth0"].bytes, 1000u);
  EXPECT_EQ(q["eth0"].drops, 3u);
  EXPECT_EQ(q["eth0"].overlimits, 7u);
  auto l = parse_link_json(
      R"([{"ifname":"eth0","stats64":{"rx":{"bytes":5,"packets":1,"dropped":2},"tx":{"bytes":70,"packets":7,"dropped":1}}},
          {"ifname":"lo"}])");
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l["eth0"].tx_bytes, 70u);
  EXPECT_EQ(l["eth0"].tx_packets, 7u);
  EXPECT_EQ(l["eth0"].tx_dropped, 1u);
  EXPECT_EQ(l["eth0"].rx_dropped, 2u);
  EXPECT_THROW(parse_tc_json("not json"), inc::Error);
  std::string t = render_counters({{"h0", "up", 1'000'000'000, 1000, 10, 3, 7, 2}});
  EXPECT_NE(t.find("drops: 3 at senders (shaper queue full), 2 at receivers"), std::string::npos) << t;
  EXPECT_EQ(t.find("multicast kept off"), std::string::npos) << t;
  // A leaf's uplink: the clsact's drops are what its egress filter kept off the link.
  q = parse_tc_json(
      R"([{"kind":"tbf","handle":"8001:","dev":"up0","root":true,"bytes":500,"packets":5,"drops":0,"overlimits":1},
          {"kind":"clsact","handle":"ffff:","dev":"up0","parent":"ffff:fff1","bytes":9000,"packets":90,"drops":85}])");
  EXPECT_EQ(q["up0"].kind, "tbf");
  EXPECT_EQ(q["up0"].bytes, 500u);
  EXPECT_EQ(q["up0"].drops, 0u);
  EXPECT_EQ(q["up0"].filtered, 85u);
  t = render_counters({{"leaf0 uplink", "up", 1'000'000'000, 500, 5, 0, 1, 0, 85}});
  EXPECT_NE(t.find("multicast kept off the uplinks by their filters: 85 packets (leaf0 uplink up 85;"),
            std::string::npos) << t;
}

TEST(TestbedPlan, HostsGetTheTcpCongestionControl) {
  // Every host namespace (and only those: the switches speak UDP) sets it before any link is up.
  Plan p = plan_for(4, 2, 1);
  EXPECT_EQ(count_commands(p, {"ip", "netns", "exec"}) - (p.id.ipv6 ? p.namespaces.size() : 0), 4u);
  for (const auto& h : p.hosts) {
    Argv want = {"ip", "netns", "exec", h.ns, "sysctl", "-q", "-w", "net.ipv4.tcp_congestion_control=reno"};
    EXPECT_NE(std::find(p.setup.begin(), p.setup.end(), want), p.setup.end()) << h.ns;
  }
  EXPECT_NE(describe_plan(p, false).find("host TCP: congestion control reno"), std::string::npos);
  SpecInput in;
  in.hosts = 2;
  in.tcp_cc = "inherit";
  Plan q = make_plan(build_spec(in), test_id());
  for (const auto& a : q.setup)
    for (const auto& w : a) EXPECT_EQ(w.find("tcp_congestion_control"), std::string::npos) << shell_join(a);
  EXPECT_NE(describe_plan(q, false).find("the machine's congestion control"), std::string::npos);
}
