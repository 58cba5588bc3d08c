// `inc switch`: options (daemon_cli.cpp, CLI11), Prometheus/--stats rendering (metrics.cpp) and
// the daemon's main loop (daemon.cpp) around its lanes (lanes.hpp), as a library so that tests
// run it in-process (tools/switch.cpp only adds signal handling).
#pragma once

#include <atomic>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "src/switch/dataplane.hpp"
#include "src/switch/lanes.hpp"
#include "src/switch/udp.hpp"

namespace inc::sw {

struct SwitchDaemonOptions {
  std::string name = "switch";
  Endpoint bind = Endpoint::ipv4(0x7F000001, 7710);  // lane l serves port + l
  SwitchConfig cfg;           // cfg.slots: the whole pool, split evenly over the lanes
  std::uint16_t lanes = 1;    // parse_switch_args: --lanes, the topology's lanes=, or default_lanes()
  bool incarnation_given = false;
  std::vector<JobSpec> jobs;  // admitted on every lane at start-up (slots: per lane)
  int metrics_port = -1;      // -1: no HTTP endpoint; 0: any free port
  std::string metrics_bind = "127.0.0.1";
  bool stats = false;         // print counters at exit
  double stats_interval = 0;  // and every N seconds
  FaultConfig faults;
  std::size_t batch = 32;
  UdpOffload offload;         // --offload: UDP GSO/GRO on the lanes' sockets
  std::string controller;     // --controller: register with `inc controller` (src/control)
  std::optional<proto::auth::Key> controller_key;  // --control-key-file
  // --multicast-groups BASE/LEN: the groups of jobs admitted at run time (LanesConfig).
  std::uint32_t group_base = 0, group_span = 0;
};

std::string switch_usage();
// Parses argv (argv[0] is the subcommand name). Returns "" on success, else a message that
// names the offending flag and value. Sets `help` for --help.
std::string parse_switch_args(int argc, char** argv, SwitchDaemonOptions& o, bool& help);

std::string render_prometheus(const SwitchSnapshot& s, const std::string& switch_name);
std::string render_stats(const SwitchSnapshot& s, const std::string& switch_name);

// Runs until `stop` becomes true. Logs to `log`. Returns the process exit code.
// `on_ready(lanes, metrics_port)` is called once every lane's socket (and the metrics endpoint)
// are up.
int run_switch_daemon(const SwitchDaemonOptions& o, const std::atomic<bool>& stop, std::FILE* log,
                      const std::function<void(SwitchLanes&, int)>& on_ready = {});

}  // namespace inc::sw
