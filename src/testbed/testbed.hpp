// `inc testbed`: builds the planned network, starts the switches, the store and the ranks (with
// the local launcher, src/api/launcher.hpp, entering each process's namespace), prints the link
// counters, and removes everything it created: on a normal exit, on SIGINT/SIGTERM/SIGHUP, when
// a rank fails, and (at the next start, or with `inc testbed cleanup`) after being killed.
#pragma once

#include <chrono>
#include <string>

#include "testbed/plan.hpp"

namespace inc::testbed {

struct RunOptions {
  Argv command;  // what every rank runs
  std::chrono::milliseconds timeout{0};  // whole job (0: none)
  std::chrono::milliseconds grace{std::chrono::seconds(3)};
  int store_port = 0;  // 0: ephemeral
  bool prefix_output = true;
  bool counters = true;
  bool quiet = false;  // no plan summary and progress messages
  // --edge: one Edge-INC engine (`inc edge`) per host, in the host's namespace, its socket in the
  // state directory; every rank posts its collectives to its host's engine (INC_OFFLOAD=edge,
  // INC_EDGE, a fresh INC_EDGE_TOKEN for the job). docs/TESTBED.md, "Edge-INC engines".
  bool edge = false;
  int out_fd = 1, err_fd = 2;
};

// Returns the exit code: the job's (as `inc launch`), or 1 if the testbed could not be built or
// removed, 128 + signal if interrupted while building it.
int run_testbed(const Plan& plan, const RunOptions& o);

// Removes testbeds with this prefix whose owner is gone (all of them with `force`). Returns 0,
// or 1 if something could not be removed.
int cleanup_testbeds(const std::string& run_dir, const std::string& prefix, bool force, int out_fd,
                     int err_fd);

}  // namespace inc::testbed
