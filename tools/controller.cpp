// `inc controller`: builds switch trees on demand for every communicator and shares switch
// memory among jobs (docs/CONTROLLER.md). `serve` runs it (src/control/server.*); `status`
// asks a running one for its state over the sealed control connection.
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
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

// `admit` / `release`: a job on one switch without a controller, by UDP control packets sealed
// under the control key (docs/PROTOCOL.md "Control plane"; the switch runs with
// --control-key-file and no --controller).
int udp_control(bool admit, const std::string& sw_addr, const std::string& key_file,
                const std::string& job, double timeout) {
  const char* what = admit ? "admit" : "release";
  auto ep = sw::parse_endpoint(sw_addr);
  if (!ep || ep->port() == 0) {
    std::fprintf(stderr, "inc controller %s: --switch '%s' is not an IPv4 ADDR:PORT\n", what, sw_addr.c_str());
    return 2;
  }
  std::vector<std::uint64_t> f;
  for (std::size_t p = 0;;) {
    const auto c = job.find(':', p);
    const std::string part = job.substr(p, c == std::string::npos ? std::string::npos : c - p);
    char* end = nullptr;
    const unsigned long long v = std::strtoull(part.c_str(), &end, 10);
    if (part.empty() || part[0] == '-' || *end != '\0') f.clear();
    else f.push_back(v);
    if (part.empty() || *end != '\0' || c == std::string::npos) break;
    p = c + 1;
  }
  const bool ok = admit ? (f.size() == 3 || f.size() == 4) && f[0] >= 1 && f[0] <= 0xFFFFFFFFull &&
                              f[1] >= 1 && f[1] <= proto::kMaxMembers && f[2] >= 1 && f[2] <= 0xFFFF &&
                              (f.size() == 3 || f[3] < proto::kMaxMembers)
                        : f.size() == 1 && f[0] >= 1 && f[0] <= 0xFFFFFFFFull;
  if (!ok) {
    std::fprintf(stderr, "inc controller %s: --job '%s': want %s\n", what, job.c_str(),
                 admit ? ("ID:MEMBERS(1.." + std::to_string(proto::kMaxMembers) + "):SLOTS(1..65535)[:PARENT_MEMBER]").c_str() : "ID");
    return 2;
  }
  if (!(timeout > 0 && timeout <= 3600)) {
    std::fprintf(stderr, "inc controller %s: --timeout %g must be 0 .. 3600 seconds\n", what, timeout);
    return 2;
  }
  try {
    const auto key = control::load_control_key(key_file);
    const auto t = sw::Nanos(timeout * 1e9);
    const auto id = std::uint32_t(f[0]);
    auto r = admit ? sw::udp_admit(*ep, key,
                                   {id, std::uint16_t(f[1]), std::uint32_t(f[2]),
                                    std::uint16_t(f.size() == 4 ? f[3] : proto::kNoMember), std::nullopt},
                                   t)
                   : sw::udp_release(*ep, key, id, t);
    if (!r) {
      std::fprintf(stderr, "inc controller %s: no authentic answer from %s within %g s\n", what, sw_addr.c_str(), timeout);
      return 1;
    }
    if (*r != proto::Reason::ok) {
      std::fprintf(stderr, "inc controller %s: switch %s refused job %u: %s\n", what, sw_addr.c_str(), id,
                   std::string(proto::name(*r)).c_str());
      return 1;
    }
    std::printf("%s job %u at %s\n", admit ? "admitted" : "released", id, sw_addr.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "inc controller %s: %s\n", what, e.what());
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
                                                 "jobs to come; default 1)");
  bool no_rebalance = false;
  sv->add_flag("--no-rebalance", no_rebalance, "fair: shares at admission only (running jobs are not resized "
                                               "as jobs come and go)");
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
  std::string sw_addr, job;
  auto* ad = app.add_subcommand("admit", "admit a job on a switch without a controller (sealed UDP control packet)");
  auto* rl = app.add_subcommand("release", "release a job admitted with `admit`");
  for (auto* sc : {ad, rl}) {
    sc->add_option("--switch", sw_addr, "ADDR:PORT of the switch (any lane)")->required();
    sc->add_option("--control-key-file", key_file, "the switch's control secret (its --control-key-file)")->required();
    sc->add_option("--timeout", timeout, "seconds to wait for its answer (default 10)");
  }
  ad->add_option("--job", job, "ID:MEMBERS:SLOTS[:PARENT_MEMBER] (SLOTS per lane)")->required();
  rl->add_option("--job", job, "ID")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  o.core.rebalance = !no_rebalance;
  if (sv->parsed()) return serve(o, fabric, key_file, policy, lease);
  if (ad->parsed() || rl->parsed()) return udp_control(ad->parsed(), sw_addr, key_file, job, timeout);
  return status(addr, key_file, timeout);
}

}  // namespace inc::tools
