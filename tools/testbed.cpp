// `inc testbed`: an emulated cluster on this machine (network namespaces, veth links shaped with
// tc, one or two levels of switches), running a command in every rank (docs/TESTBED.md).
//   inc testbed [options] -- command...   build it, run the command, print counters, remove it
//   inc testbed show [options]            print the plan (no privileges needed)
//   inc testbed cleanup [--force]         remove what killed testbeds left behind
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "inc/types.hpp"
#include "testbed/plan.hpp"
#include "testbed/spec.hpp"
#include "testbed/system.hpp"
#include "testbed/testbed.hpp"
#include "tools/commands.hpp"

namespace inc::tools {

namespace {

constexpr const char* kFooter = R"(
Examples:
  inc testbed --hosts 8 --link 1gbit -- inc bench -c allreduce -a inc,ring -b 1M -e 64M
  inc testbed --hosts 8 --leaves 2 --oversubscription 2 --shaper htb -- ./my_program
  inc testbed --hosts 4 --edge --no-switch -- inc bench -c allreduce -b 1K -e 16M
  inc testbed -f examples/testbed/two-level.toml show
  inc testbed cleanup

A command named `inc` runs this inc binary. Ranks get INC_RANK, INC_WORLD_SIZE, INC_LOCAL_RANK,
INC_LOCAL_SIZE, INC_STORE and INC_SWITCH (one level) or INC_TOPOLOGY (two levels) with
INC_SWITCH_JOB. Exit code: the job's (as inc launch), 1 if the testbed cannot be built (e.g.
without root), 2 for usage errors. Everything created is removed at exit, on Ctrl-C, and after a
killed run at the next start. See docs/TESTBED.md.)";

std::string self_exe() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw Error(Error::Kind::internal, "cannot find the inc executable (/proc/self/exe)");
  return std::string(buf, static_cast<std::size_t>(n));
}

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

}  // namespace

int cmd_testbed(int argc, char** argv) {
  // Everything after the first "--" is the command the ranks run.
  std::vector<std::string> command;
  int split = argc;
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "--") {
      split = i;
      break;
    }
  for (int i = split + 1; i < argc; ++i) command.emplace_back(argv[i]);

  CLI::App app{"An emulated cluster on this machine: network namespaces as hosts, veth links "
               "shaped with tc, Core-INC switches as one or two levels of a tree.\n\n"
               "  inc testbed [options] -- command...   build it, run the command in every rank, "
               "print counters, remove it\n"
               "  inc testbed show [options]            print the plan (no privileges needed)\n"
               "  inc testbed cleanup [--force]         remove what killed testbeds left behind\n",
               "inc testbed"};
  app.footer(kFooter);
  testbed::SpecInput in;
  std::string file;
  int hosts = 0, rph = 0, leaves = 0, mtu = 0, switch_port = 0, metrics_port = 0, slot_elems = 0, job_slots = 0;
  std::string link, uplink, shaper, queue, burst, prefix = "inctb", tcp_cc;
  double over = 0, timeout_s = 0, grace_s = 3;
  int store_port = 0;
  std::vector<std::string> switch_args;
  bool no_switch = false, no_prefix = false, no_counters = false, quiet = false, dry_run = false;
  app.add_option("-f,--file", file, "topology file (TOML, docs/TESTBED.md); flags override its values");
  auto* o_hosts = app.add_option("--hosts", hosts, "hosts (network namespaces), 1..256 [4]");
  auto* o_rph = app.add_option("--ranks-per-host", rph, "ranks per host, 1..64 [1]");
  auto* o_leaves = app.add_option("--leaves", leaves, "leaf switches: 1 = one level, >= 2 = leaves + spine [1]");
  auto* o_link = app.add_option("--link", link, "host link rate, each direction: 1gbit, 500mbit, none [1gbit]");
  auto* o_uplink = app.add_option("--uplink", uplink, "leaf uplink rate, each direction [hosts per leaf x link]");
  auto* o_over = app.add_option("--oversubscription", over, "uplink = hosts per leaf x link / R (instead of --uplink)");
  auto* o_shaper = app.add_option("--shaper", shaper, "tbf or htb [tbf]")->check(CLI::IsMember({"tbf", "htb"}));
  auto* o_mtu = app.add_option("--mtu", mtu, "MTU of every link, 576..65535 [9000]");
  auto* o_queue = app.add_option("--queue", queue, "shaper queue per direction: bytes (512KiB), time at the rate (4ms) or auto [auto]");
  auto* o_burst = app.add_option("--burst", burst, "token bucket: bytes, time at the rate or auto [auto]");
  auto* o_tcpcc = app.add_option("--tcp-cc", tcp_cc, "TCP congestion control of every host namespace, or inherit "
                                                     "(the machine's) [reno]");
  auto* o_noswitch = app.add_flag("--no-switch", no_switch, "no switches: collectives run on the hosts");
  bool no_auth = false;
  auto* o_noauth = app.add_flag("--no-auth", no_auth, "the switch job without a key: packets unauthenticated "
                                                       "(default: a fresh key per run, docs/PROTOCOL.md)");
  bool multicast = false, no_multicast = false;
  auto* o_mcast = app.add_flag("--multicast", multicast, "results every rank gets alike go once per chunk to a "
                                                          "multicast group that the bridge replicates, one group per "
                                                          "leaf (the default with a switch; file: multicast = true)");
  auto* o_nomcast = app.add_flag("--no-multicast", no_multicast, "every result goes from the switch to each member "
                                                                  "(unicast; file: multicast = false)")->excludes(o_mcast);
  bool controller = false;
  auto* o_ctl = app.add_flag("--controller", controller, "start `inc controller` for the fabric: the switches register, "
                                                          "every communicator (world, split) gets its tree and key from "
                                                          "it (docs/CONTROLLER.md; file: controller = true)");
  auto* o_port = app.add_option("--switch-port", switch_port, "UDP port of every switch [7710]");
  auto* o_metrics = app.add_option("--metrics-port", metrics_port, "Prometheus port of every switch, 0 = none [9100]");
  auto* o_slot = app.add_option("--slot-elements", slot_elems, "elements per switch slot = per datagram [from the MTU]");
  auto* o_jslots = app.add_option("--job-slots", job_slots, "slots the job gets at each switch [32]");
  auto* o_sargs = app.add_option("--switch-args", switch_args,
                                 "extra `inc switch` arguments, e.g. --switch-args='--batch 64' (repeatable)");
  auto* o_prefix = app.add_option("--prefix", prefix, "namespace name prefix [inctb]");
  app.add_option("--timeout", timeout_s, "stop the job after S seconds (exit code 124) [no limit]");
  app.add_option("--grace", grace_s, "seconds between SIGTERM and SIGKILL when stopping [3]");
  app.add_option("--store-port", store_port, "port of the rendezvous store in host 0 [ephemeral]");
  app.add_flag("--no-prefix", no_prefix, "forward output without the \"[hH rR] \" prefix");
  app.add_flag("--no-counters", no_counters, "do not print the link counters at the end");
  app.add_flag("-q,--quiet", quiet, "no plan summary or progress messages");
  app.add_flag("--dry-run", dry_run, "print the plan and the commands, change nothing (= show)");
  bool edge = false;
  app.add_flag("--edge", edge, "one Edge-INC engine (`inc edge`) per host, in its namespace; the ranks post their "
                               "collectives to their host's engine (INC_OFFLOAD=edge; docs/EDGE.md)");
  auto* show = app.add_subcommand("show", "print the plan: namespaces, addresses, rates, queues, switch commands, ip/tc commands");
  show->fallthrough();
  bool force = false;
  auto* cleanup = app.add_subcommand("cleanup", "remove the namespaces and state of testbeds whose process is gone");
  cleanup->add_flag("--force", force, "also remove testbeds whose process still runs");
  cleanup->fallthrough();
  app.require_subcommand(0, 1);
  try {
    app.parse(split, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  auto usage = [](const std::string& msg) {
    std::fprintf(stderr, "inc testbed: %s\n(see inc testbed --help)\n", msg.c_str());
    return 2;
  };
  if (*cleanup) {
    if (!command.empty()) return usage("cleanup takes no command");
    return testbed::cleanup_testbeds(testbed::Identity{}.run_dir, prefix, force, 1, 2);
  }
  try {
    testbed::SpecInput flags;
    auto set = [&](CLI::Option* o, auto& dst, const auto& v, const char* key) {
      if (o->count() == 0) return;
      dst = v;
      flags.where[key] = o->get_name();
    };
    set(o_hosts, flags.hosts, hosts, "hosts");
    set(o_rph, flags.ranks_per_host, rph, "ranks_per_host");
    set(o_leaves, flags.leaves, leaves, "leaves");
    set(o_link, flags.link, link, "link");
    set(o_uplink, flags.uplink, uplink, "uplink");
    set(o_over, flags.oversubscription, over, "oversubscription");
    set(o_shaper, flags.shaper, shaper, "shaper");
    set(o_mtu, flags.mtu, mtu, "mtu");
    set(o_queue, flags.queue, queue, "queue");
    set(o_burst, flags.burst, burst, "burst");
    set(o_port, flags.switch_port, switch_port, "switch_port");
    set(o_metrics, flags.metrics_port, metrics_port, "metrics_port");
    set(o_slot, flags.slot_elements, slot_elems, "slot_elements");
    set(o_jslots, flags.job_slots, job_slots, "job_slots");
    set(o_prefix, flags.prefix, prefix, "prefix");
    set(o_tcpcc, flags.tcp_cc, tcp_cc, "tcp_cc");
    if (o_noswitch->count()) flags.with_switch = false;
    if (o_noauth->count()) flags.auth = false;
    if (o_mcast->count()) flags.multicast = true;
    if (o_nomcast->count()) {
      flags.multicast = false;
      flags.where["multicast"] = "--no-multicast";
    }
    if (o_ctl->count()) {
      flags.controller = true;
      flags.where["controller"] = "--controller";
    }
    if (o_sargs->count()) {
      std::vector<std::string> words;
      for (const auto& a : switch_args)
        for (auto& w : split_words(a)) words.push_back(w);
      flags.switch_args = words;
    }
    if (o_over->count() && !(over > 0)) return usage("--oversubscription must be > 0");
    if (!file.empty()) {
      in = testbed::load_spec_file(file);
      in.merge(flags);
    } else {
      in = flags;
    }
    testbed::Spec spec = testbed::build_spec(in);
    testbed::Identity id;
    id.prefix = spec.prefix;
    id.pid = ::getpid();
    id.inc_exe = self_exe();
    id.ipv6 = testbed::kernel_has_ipv6();
    testbed::Plan plan = testbed::make_plan(spec, id);
    if (*show || dry_run) {
      std::fputs(testbed::describe_plan(plan, true).c_str(), stdout);
      if (!command.empty())
        std::printf("\ncommand (every rank): %s\n", testbed::shell_join(command).c_str());
      return 0;
    }
    if (command.empty()) return usage("no command given: inc testbed [options] -- command...");
    if (timeout_s < 0 || grace_s < 0) return usage("--timeout and --grace must be >= 0");
    if (store_port < 0 || store_port > 65535) return usage("--store-port must be in 0..65535");
    testbed::RunOptions ro;
    ro.command = command;
    if (ro.command[0] == "inc") ro.command[0] = id.inc_exe;
    ro.timeout = std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
    ro.grace = std::chrono::milliseconds(static_cast<long long>(grace_s * 1000));
    ro.store_port = store_port;
    ro.prefix_output = !no_prefix;
    ro.counters = !no_counters;
    ro.quiet = quiet;
    ro.edge = edge;
    return testbed::run_testbed(plan, ro);
  } catch (const Error& e) {
    std::fprintf(stderr, "inc testbed: %s\n", e.what());
    return e.kind() == Error::Kind::config ? 2 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "inc testbed: %s\n", e.what());
    return 1;
  }
}

}  // namespace inc::tools
