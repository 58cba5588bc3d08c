// `inc edge`: the Edge-INC offload engine of this host (src/edge/engine.hpp): ranks started
// with INC_OFFLOAD=edge post their collectives to it through shared memory.
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>

#include "edge/engine.hpp"
#include "tools/commands.hpp"

namespace {
// Process-wide because a signal handler can reach nothing else; the accept loop polls it.
std::atomic<bool> g_stop{false};
extern "C" void on_edge_signal(int) { g_stop.store(true); }
}  // namespace

namespace inc::tools {

int cmd_edge(int argc, char** argv) {
  CLI::App app{"the Edge-INC offload engine of this host: runs collectives for the ranks that "
               "post them (INC_OFFLOAD=edge), one engine per host for every job on it",
               "inc edge"};
  edge::EngineConfig cfg;
  double hello_s = 10;
  bool list_handlers = false;
  auto* socket = app.add_option("--socket", cfg.socket_path, "Unix socket the ranks connect to (their INC_EDGE)");
  app.add_flag("--list-handlers", list_handlers,
               "print the packet handlers (a job names its conversion handler with INC_EDGE_HANDLER) and exit");
  app.add_option("--hello-timeout", hello_s, "seconds a new connection has to say hello")
      ->check(CLI::Range(0.001, 3600.0));
  app.add_flag("-v,--verbose", cfg.verbose, "one line per attached/detached rank and refusal");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (list_handlers) {
    const auto reg = edge::HandlerRegistry::with_builtins();
    for (const auto& n : reg.names()) {
      const auto& h = reg.get(n);
      std::printf("%-8s %-8s %s\n", n.c_str(), h.role() == edge::Handler::Role::convert ? "convert" : "apply",
                  std::string(h.summary()).c_str());
    }
    return 0;
  }
  if (!*socket) {
    std::fprintf(stderr, "inc edge: --socket is required\n");
    return 2;
  }
  cfg.hello_timeout = std::chrono::milliseconds(static_cast<long long>(hello_s * 1000));
  struct sigaction sa {};
  sa.sa_handler = on_edge_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  try {
    edge::EdgeEngine engine(cfg);
    std::fprintf(stderr, "inc edge: serving %s\n", cfg.socket_path.c_str());
    engine.run(g_stop);
    auto s = engine.stats();
    std::fprintf(stderr,
                 "inc edge: stopped: %llu ranks attached, %llu refused, %llu collectives (%llu failed), "
                 "%llu protocol errors; handlers: %llu headers, %llu payload chunks, %llu completions, "
                 "%llu messages converted, %llu deposited without a handler; %llu bytes received, %llu sent\n",
                 (unsigned long long)s.connections, (unsigned long long)s.refused,
                 (unsigned long long)s.collectives, (unsigned long long)s.failed,
                 (unsigned long long)s.protocol_errors, (unsigned long long)s.handler_headers,
                 (unsigned long long)s.handler_payloads, (unsigned long long)s.handler_completions,
                 (unsigned long long)s.converted_messages, (unsigned long long)s.deposited,
                 (unsigned long long)s.bytes_received, (unsigned long long)s.bytes_sent);
  } catch (const Error& e) {
    std::fprintf(stderr, "inc edge: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace inc::tools
