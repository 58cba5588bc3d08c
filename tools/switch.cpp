// `inc switch`: the software Core-INC aggregation switch daemon. The daemon itself lives in
// src/switch/daemon.* (tested in-process); this file adds the process concerns: signals.
#include <csignal>
#include <cstdio>

#include "src/switch/daemon.hpp"
#include "tools/commands.hpp"

namespace {
// Process-wide because a signal handler can reach nothing else; the event loop polls it.
std::atomic<bool> g_stop{false};
extern "C" void on_signal(int) { g_stop.store(true); }
}  // namespace

namespace inc::tools {

int cmd_switch(int argc, char** argv) {
  sw::SwitchDaemonOptions opts;
  bool help = false;
  std::string err = sw::parse_switch_args(argc, argv, opts, help);
  if (help) {
    std::fputs(sw::switch_usage().c_str(), stdout);
    return 0;
  }
  if (!err.empty()) {
    std::fprintf(stderr, "inc switch: %s\n", err.c_str());
    return 2;
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  return sw::run_switch_daemon(opts, g_stop, stderr);
}

}  // namespace inc::tools
