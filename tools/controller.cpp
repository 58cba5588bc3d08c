// `inc controller`: builds switch trees on demand for every communicator and shares switch
// memory among jobs (docs/CONTROLLER.md). `serve` runs it (src/control/server.*); `status`
// asks a running one for its state over the sealed control connection.
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <unistd.h>

#include "src/control/conn.hpp"
#include "src/control/server.hpp"
#include "src/switch/udp.hpp"
#include "tools/commands.hpp"

namespace {
std::atomic<bool> g_stop{false};  // process-wide: a signal handler can reach nothing else
extern "C" void on_controller_signal(int) { g_stop.store(true); }
}  // namespace

namespace inc::tools {

namespace {

int serve(control::ServerOptions& o, const std::string& fabric, const std::string& key_file,
          const std::string& policy, double lease) {
  std::string err;
  auto topo = sw::load_topology(fabric, err);
  if (!topo) {
    std::fprintf(stderr, "inc controller: --fabric %s\n", err.c_str());
    return 2;
  }
  o.core.fabric = *topo;
  if (policy == "fair") o.core.policy = control::Policy::fair_share;
  else if (policy == "static") o.core.policy = control::Policy::static_partition;
  else if (policy == "first-come") o.core.policy = control::Policy::first_come;
  else {
    std::fprintf(stderr, "inc controller: --policy '%s' must be fair, static or first-come\n", policy.c_str());
    return 2;
  }
  if (o.core.partitions == 0 || o.core.fair_jobs == 0 || o.core.min_slots == 0 || o.core.default_slots == 0 || o.core.default_slots > 0xFFFF) {
    std::fprintf(stderr, "inc controller: --partitions, --fair-jobs, --min-slots and --default-slots (<= 65535) must be positive\n");
    return 2;
  }
  if (!(lease >= 0.1 && lease <= 86400)) {
    std::fprintf(stderr, "inc controller: --lease %g must be 0.1 .. 86400 seconds\n", lease);
    return 2;
  }
  o.core.lease = sw::Nanos(lease * 1e9);
  o.core.seed = std::uint64_t(sw::monotonic_now()) ^ std::uint64_t(::getpid()) << 32;
  try {
    o.secret = control::load_control_key(key_file);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "inc controller: --control-key-file: %s\n", e.what());
    return 2;
  }
  struct sigaction sa {};
  sa.sa_handler = on_controller_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  return control::run_controller(o, g_stop, stderr);
}

int status(const std::string& addr, const std::string& key_file, double timeout) {
  try {
    auto key = control::load_control_key(key_file);
    const auto t = std::chrono::milliseconds(static_cast<long long>(timeout * 1000));
    control::Client c(addr, key, proto::ctl::Role::admin, t);
    auto m = c.call(proto::ctl::StatusRequest{}, t);
    auto* r = std::get_if<proto::ctl::StatusReply>(&m);
    if (!r) throw std::runtime_error("unexpected answer");
    std::printf("%s\n", r->text.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "inc controller status: %s\n", e.what());
    return 1;
  }
}

}  // namespace

int cmd_controller(int argc, char** argv) {
  CLI::App app{"Builds switch trees on demand for every communicator and shares switch memory among jobs "
               "(docs/CONTROLLER.md).",
               "inc controller"};
  app.require_subcommand(1);
  control::ServerOptions o;
  std::string fabric, key_file, policy = "fair";
  double lease = 10;
  auto* sv = app.add_subcommand("serve", "run the controller");
  sv->add_option("--fabric", fabric, "topology file: switches, hosts (host NAME leaf=SW), links")->required()->type_name("FILE");
  sv->add_option("--control-key-file", key_file, "the cluster's control secret (key file, mode 600)")->required()->type_name("FILE");
  sv->add_option("--listen", o.listen, "ADDR:PORT to serve (default 127.0.0.1:7700; port 0: any)");
  sv->add_option("--policy", policy, "switch memory among jobs: fair (default), static, first-come");
  sv->add_option("--partitions", o.core.partitions, "static: parts of each switch's pool (default 4)");
  sv->add_option("--fair-jobs", o.core.fair_jobs, "fair: shares as if at least N jobs were active (headroom for "
                                                 "jobs to come: running jobs are never shrunk; default 1)");
  sv->add_option("--max-jobs", o.core.max_jobs, "first-come: jobs per switch (default: no limit)");
  sv->add_option("--max-job-slots", o.core.max_job_slots, "first-come: slots per job (default: no limit)");
  sv->add_option("--min-slots", o.core.min_slots, "fewer slots than this: no tree, the job runs on the hosts (default 1)");
  sv->add_option("--default-slots", o.core.default_slots, "slots for a job that does not say (default 16)");
  sv->add_option("--lease", lease, "seconds a job keeps its tree without renewing (default 10)");
  sv->add_option("--metrics-port", o.metrics_port, "serve Prometheus text on http://127.0.0.1:N/metrics (0: any)");
  std::string addr;
  double timeout = 10;
  auto* st = app.add_subcommand("status", "print a running controller's switches, jobs and counters (JSON)");
  st->add_option("--controller", addr, "ADDR:PORT")->required();
  st->add_option("--control-key-file", key_file, "the cluster's control secret")->required();
  st->add_option("--timeout", timeout, "seconds (default 10)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (sv->parsed()) return serve(o, fabric, key_file, policy, lease);
  return status(addr, key_file, timeout);
}

}  // namespace inc::tools
