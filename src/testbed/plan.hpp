// `inc testbed`: the plan of an emulated cluster, computed from a Spec without touching the
// system: namespaces and their names, addresses, veth links and their shaping, the exact `ip`
// and `tc` commands, the switch command lines and topology file, and where each rank runs.
// `inc testbed show` prints it; the runner (testbed.hpp) executes it.
//
// Layout (docs/TESTBED.md): every object lives in a namespace named PREFIX-PID-ROLE, so that
// deleting the namespaces removes everything.
//   one level:  hosts h0..hN-1 --veth--> namespace "sw" (bridge br0 + the switch on br0's address)
//   two levels: hosts --veth--> leafK (bridge + leaf switch) --uplink veth--> spine (bridge + root
//               switch). The spine bridges the uplinks, so all addresses share one subnet and
//               host-to-host traffic between leaves crosses both uplinks.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "testbed/spec.hpp"

namespace inc::testbed {

using Argv = std::vector<std::string>;

// Who runs the testbed: names and paths depend on it.
struct Identity {
  std::string prefix = "inctb";
  long pid = 0;
  std::string run_dir = "/run/inc-testbed";  // the state directory is RUN_DIR/PREFIX-PID
  std::string inc_exe = "inc";               // the `inc` binary the switches run
  bool ipv6 = true;                          // the kernel has IPv6 (it is disabled in the namespaces)
};

std::string state_dir(const Identity& id);
std::string namespace_name(const Identity& id, const std::string& role);
std::string namespace_path(const std::string& ns);  // /run/netns/NAME

// One shaped (or unshaped) direction of a link: the egress queue of `dev` in `ns`, delivering
// into `peer_dev` in `peer_ns`.
struct Direction {
  std::string ns, dev, peer_ns, peer_dev;
  std::uint64_t bps = 0;  // 0: unshaped
  std::uint64_t queue_bytes = 0, burst_bytes = 0;
};

struct LinkPlan {
  std::string name;  // "h3", "leaf1 uplink"
  Direction up;      // towards the switch / spine
  Direction down;    // towards the host / leaf
};

struct HostPlan {
  int leaf = 0;
  std::string ns, addr;
};

struct LeafPlan {
  std::string name;  // switch name: "switch" (one level) or "leafK"
  std::string ns, addr;
  std::vector<int> hosts;
  std::string group;  // multicast: this leaf's group for the job's results (empty: unicast);
                      // with the controller the range its jobs' groups come from (BASE/24)
};

struct SwitchPlan {
  std::string name, ns, addr;
  int port = 0;
  Argv argv;  // the full command line, starting with the inc binary
};

struct RankPlan {
  int host = 0;
  int local_rank = 0;
};

struct Plan {
  Spec spec;
  Identity id;
  std::vector<std::string> namespaces;  // in creation order
  std::vector<HostPlan> hosts;
  std::vector<LeafPlan> leaves;
  std::string spine_ns, spine_addr;  // two levels only
  std::vector<LinkPlan> links;       // hosts first, then uplinks
  std::vector<Argv> setup;           // every command that builds the network, in order
  std::vector<SwitchPlan> switches;  // in start order (the root first)
  // --controller: `inc controller` (started before the switches, in the root switch's
  // namespace, on its address), the fabric it reads and the control secret (both written by
  // write_state; the secret fresh per run, mode 600).
  SwitchPlan controller;  // argv empty: none
  std::string fabric_path, fabric_text, control_key_path;
  std::string topology_path, topology_text;  // two levels: the switches' topology file
  std::string key_path;        // with a switch: the job's key file (written by write_state)
  std::uint32_t key_job = 0;
  std::vector<RankPlan> ranks;
  std::string store_ns, store_addr;  // the rendezvous store runs in host 0
  std::vector<std::pair<std::string, std::string>> rank_env;  // INC_SWITCH / INC_TOPOLOGY, ...
  // Inherited variables that would point the ranks elsewhere; removed from their environment.
  std::vector<std::string> rank_unset;
};

Plan make_plan(const Spec& spec, const Identity& id);

// Human-readable plan; with `commands`, also every ip/tc command, one per line.
std::string describe_plan(const Plan& p, bool commands);

// A command line as a shell would need it typed (arguments quoted where necessary).
std::string shell_join(const Argv& argv);

}  // namespace inc::testbed
