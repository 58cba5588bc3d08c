// Starts a local job: a rendezvous store in this process, optional sidecar processes (e.g. a
// switch daemon), and N ranks of a program with the INC_* environment. Forwards each process's
// output line by line with a prefix, stops everybody when one rank fails, and reports who
// failed and how. Used by `inc launch`, `inc demo` and the multi-process tests.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace inc::api {

using EnvVars = std::vector<std::pair<std::string, std::string>>;

// A process started next to the ranks. It gets INC_STORE, INC_STORE_HOST=0 and
// INC_LAUNCH_WORLD_SIZE (the number of ranks), but no INC_RANK / INC_WORLD_SIZE (so
// detect_bootstrap sees a one-process "single" job with the job's store), plus `env`. It is
// started before the ranks and stopped (SIGTERM, then SIGKILL after the grace period) once they
// have all exited; exiting before that counts as a job failure.
struct SidecarSpec {
  std::string name;               // output prefix and messages, e.g. "switch"
  std::vector<std::string> argv;  // program (searched in PATH) and arguments
  EnvVars env;
  // If set, the ranks start only once the sidecar has stored this key in the store (it is
  // ready), failing the launch if that takes longer than `ready_timeout`.
  std::string ready_key;
  // Another readiness test, polled about every 10 ms with the sidecar's pid (e.g. "its UDP port
  // is bound"); the ranks start once it returns true. With `ready_key` both must hold.
  std::function<bool(pid_t)> ready_probe;
  std::chrono::milliseconds ready_timeout{std::chrono::seconds(30)};
  // Network namespace to run in: a namespace file such as /run/netns/NAME, entered (setns)
  // between fork and exec. Empty: the launcher's own.
  std::string netns;
};

// Where and how one rank runs (LaunchOptions::placement). Every field is optional.
struct RankPlacement {
  std::string netns;    // network namespace file the rank enters before exec (as SidecarSpec)
  std::string label;    // output prefix "[label] " instead of "[rank] "
  int local_rank = -1;  // INC_LOCAL_RANK (default: the rank)
  int local_size = -1;  // INC_LOCAL_SIZE (default: the world size)
  EnvVars env;          // extra variables for this rank; they override LaunchOptions::env
};

struct LaunchOptions {
  int world_size = 1;
  std::vector<std::string> argv;  // program (searched in PATH) and arguments, for every rank
  EnvVars env;                    // extra variables for ranks and sidecars
  std::vector<std::string> unset_env;  // inherited variables to remove from the children's env
  std::vector<SidecarSpec> sidecars;
  // Per rank: namespace, label, local rank and size, variables. Empty, or world_size entries.
  std::vector<RankPlacement> placement;
  std::string store_host = "127.0.0.1";  // where the store listens
  int store_port = 0;                    // 0 = ephemeral
  // Network namespace (a namespace file) the store's socket is created in; store_host must be
  // an address there. Empty: the launcher's own.
  std::string store_netns;
  // Whole-job limit (0 = none: a launcher, like mpirun, may legitimately run for days; the
  // ranks bound their own waits).
  std::chrono::milliseconds timeout{0};
  std::chrono::milliseconds grace{std::chrono::seconds(3)};  // SIGTERM -> SIGKILL
  bool prefix_output = true;  // "[3] " / "[switch] " before every forwarded line
  // Install SIGINT/SIGTERM handlers for the duration and forward the signals to the children
  // (a second SIGINT kills them). Only one launch may forward signals at a time.
  bool forward_signals = false;
  // With forward_signals: a signal the caller's own handler caught before the launch installed
  // its handlers (e.g. while the caller was preparing); if set (non-zero) then, the launch
  // behaves as if that signal arrived at once: nothing more is started and the job is stopped.
  const std::atomic<int>* pending_signal = nullptr;
  int stdout_fd = 1;   // where the children's stdout lines go
  int stderr_fd = 2;   // where their stderr lines and the launcher's messages go
  bool quiet = false;  // no "[launch] ..." messages
};

struct ProcessExit {
  std::string name;  // "rank 3" or the sidecar name
  pid_t pid = -1;
  bool started = false;  // false: could not be executed (see LaunchResult::failure)
  bool exited = false;   // normal exit with `code`
  int code = 0;
  int signal = 0;                    // killed by this signal
  bool stopped_by_launcher = false;  // we sent it SIGTERM/SIGKILL
  // "exited with code 3", "killed by signal 11 (Segmentation fault)", ...
  std::string describe() const;
  bool ok() const { return started && exited && code == 0; }
};

struct LaunchResult {
  int exit_code = 0;    // 0 if every rank exited 0; else what `inc launch` returns
  std::string failure;  // first failure: "rank 2 exited with code 3", "timed out after 5 s", ...
  bool timed_out = false;
  int interrupted_by = 0;                   // signal forwarded to the job, if any
  std::optional<std::string> abort_reason;  // the store's `abort` key, if a rank published one
  std::vector<ProcessExit> ranks;
  std::vector<ProcessExit> sidecars;
  int store_port = 0;
};

// Runs the job to completion. Throws inc::Error (config) for bad options, a network namespace
// that cannot be opened, or a store that cannot bind; everything else (a program that cannot be found or executed: exit_code 127;
// failures, timeouts, signals) is reported in the result. Children run in their own process groups
// and die with the launching thread (PR_SET_PDEATHSIG), so the calling thread must stay alive until
// this returns.
LaunchResult launch_ranks(const LaunchOptions& opts);

// Variables of other launchers that `launch_ranks` removes from the children's environment so
// that a job started from inside an mpirun/torchrun process is not mistaken for part of it.
const std::vector<std::string>& launcher_vars_removed_for_children();

}  // namespace inc::api
