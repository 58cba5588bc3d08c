// `inc testbed`: what it asks of the system. Runs `ip`/`tc` commands (each checked; a failure
// names the command and its stderr), checks privileges, records the owner of a testbed so that
// leftovers of a killed one can be told apart from a running one, and finds and removes them.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "testbed/plan.hpp"

namespace inc::testbed {

struct CommandResult {
  int exit_code = -1;  // -1: did not exit normally
  int signal = 0;
  bool timed_out = false;
  std::string spawn_error;  // the program could not be started
  std::string out, err;
  bool ok() const { return spawn_error.empty() && !timed_out && exit_code == 0; }
  // "exited with code 2: RTNETLINK answers: File exists"
  std::string describe() const;
};

// Runs argv (searched in PATH) with stdin from /dev/null, capturing stdout and stderr, in its own
// process group (a Ctrl-C at the terminal does not reach it: teardown must finish). Killed
// after `timeout`.
CommandResult run_command(const Argv& argv,
                          std::chrono::milliseconds timeout = std::chrono::seconds(30));
// Same, but throws inc::Error(network) "`ip -n x ...` exited with code 2: <stderr>" on failure.
// Returns stdout.
std::string check_command(const Argv& argv,
                          std::chrono::milliseconds timeout = std::chrono::seconds(30));

// Empty if this process may create namespaces, veths and qdiscs; else what is missing and why.
std::string privilege_problem();

// /proc/PID/stat start time (clock ticks since boot), nullopt if there is no such process.
std::optional<unsigned long long> process_start_time(long pid);

// Creates the state directory with the owner record (pid and start time) and the topology file.
// Throws inc::Error naming the path.
void write_state(const Plan& p);
void remove_state(const Identity& id);

// A testbed found on the system (this process's own, or one left by a killed run).
struct FoundTestbed {
  long pid = 0;
  std::vector<std::string> namespaces;  // names under /run/netns
  bool has_state = false;
  bool owner_alive = false;  // its owner process still runs (pid and start time match)
};
std::vector<FoundTestbed> find_testbeds(const std::string& run_dir, const std::string& prefix);

// Sends SIGKILL to every process still in namespace `ns` (e.g. a rank's background child that
// outlived it). Returns how many there were; failures are appended to `errors`.
int kill_processes_in(const std::string& ns, std::vector<std::string>& errors);

// Kills what still runs in the namespaces, deletes them and the state directory.
struct Removal {
  int killed = 0;                   // processes that were still running inside
  std::vector<std::string> errors;  // one message per failure
};
Removal remove_testbed(const std::string& run_dir, const std::string& prefix, const FoundTestbed& t);

// Whether process `pid`, already in the namespace `ns_path`, has a UDP socket bound to
// addr:port (the switch is ready to receive).
bool udp_port_bound(pid_t pid, const std::string& ns_path, const std::string& addr, int port);
// The same for a TCP socket listening on addr:port (the controller is ready to accept).
bool tcp_port_listening(pid_t pid, const std::string& ns_path, const std::string& addr, int port);
bool port_bound(pid_t pid, const std::string& ns_path, const std::string& addr, int port, bool tcp_listen);

// Whether the kernel has IPv6 (then the namespaces disable it, to keep counters quiet).
bool kernel_has_ipv6();
// Why a host namespace cannot select the congestion control `cc` (not built in, or outside the
// machine's net.ipv4.tcp_allowed_congestion_control, the only ones a namespace other than the
// machine's own may choose); empty if it can or the lists cannot be read.
std::string tcp_cc_problem(const std::string& cc);

}  // namespace inc::testbed
