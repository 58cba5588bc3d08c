#include "testbed/testbed.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <random>

#include "api/launcher.hpp"
#include "inc/types.hpp"
#include "testbed/counters.hpp"
#include "testbed/system.hpp"

namespace inc::testbed {

namespace {

using Clock = std::chrono::steady_clock;

// Process-wide because a signal handler can reach nothing else: the first SIGINT/SIGTERM/SIGHUP
// received while the testbed is built or removed (the launcher forwards them while the job runs).
std::atomic<int> g_signal{0};
extern "C" void on_testbed_signal(int sig) {
  int expected = 0;
  g_signal.compare_exchange_strong(expected, sig);
  // A hang-up (terminal gone) stops the job like SIGTERM: while the job runs, the launcher
  // forwards SIGTERM (it does not watch SIGHUP).
  if (sig == SIGHUP) ::kill(::getpid(), SIGTERM);
}

class SignalGuard {
 public:
  SignalGuard() {
    g_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = on_testbed_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (std::size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &sa, &old_[i]);
    // Output to a closed pipe must not kill the testbed before it has removed its namespaces.
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    ::sigaction(SIGPIPE, &ign, &old_pipe_);
  }
  ~SignalGuard() {
    for (std::size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
    ::sigaction(SIGPIPE, &old_pipe_, nullptr);
  }
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;

 private:
  static constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGHUP};
  std::array<struct sigaction, 3> old_{};
  struct sigaction old_pipe_ {};
};

void write_all(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t n = ::write(fd, s.data(), s.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    s.remove_prefix(static_cast<std::size_t>(n));
  }
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

class Runner {
 public:
  Runner(const Plan& p, const RunOptions& o) : p_(p), o_(o) {}
  ~Runner() {
    if (state_written_) teardown();  // whatever happened, nothing is left behind
  }
  int run();

 private:
  void log(const std::string& msg) { write_all(o_.err_fd, "[testbed] " + msg + "\n"); }
  void info(const std::string& msg) {
    if (!o_.quiet) log(msg);
  }
  void remove_leftovers();
  bool build();
  int launch();
  bool teardown();
  void add_edge_engines(api::LaunchOptions& lo);

  const Plan& p_;
  const RunOptions& o_;
  bool state_written_ = false;
  bool torn_down_ = false;
};

void Runner::remove_leftovers() {
  for (const FoundTestbed& t : find_testbeds(p_.id.run_dir, p_.id.prefix)) {
    if (t.pid == p_.id.pid || t.owner_alive) continue;
    Removal r = remove_testbed(p_.id.run_dir, p_.id.prefix, t);
    log(fmt::format("removed the leftovers of testbed pid {} (no longer running): {} namespace{}, "
                    "{} process{}", t.pid, t.namespaces.size(), t.namespaces.size() == 1 ? "" : "s",
                    r.killed, r.killed == 1 ? "" : "es"));
    for (const auto& e : r.errors) log("  " + e);
  }
}

bool Runner::build() {
  const auto t0 = Clock::now();
  for (const Argv& cmd : p_.setup) {
    if (int sig = g_signal.load()) {
      log(fmt::format("interrupted by signal {} ({}) while building the testbed", sig, ::strsignal(sig)));
      return false;
    }
    CommandResult r = run_command(cmd);
    if (!r.ok()) {
      log(fmt::format("cannot build the testbed: `{}` {}", shell_join(cmd), r.describe()));
      return false;
    }
  }
  info(fmt::format("built {} namespaces and {} links ({} commands) in {:.2f} s", p_.namespaces.size(),
                   p_.links.size(), p_.setup.size(), seconds_since(t0)));
  return true;
}

int Runner::launch() {
  api::LaunchOptions lo;
  lo.world_size = p_.spec.world_size();
  lo.argv = o_.command;
  lo.env = p_.rank_env;
  lo.unset_env = p_.rank_unset;
  lo.store_host = p_.store_addr;
  lo.store_port = o_.store_port;
  lo.store_netns = namespace_path(p_.store_ns);
  lo.timeout = o_.timeout;
  lo.grace = o_.grace;
  lo.prefix_output = o_.prefix_output;
  lo.forward_signals = true;
  lo.pending_signal = &g_signal;  // a signal between the build and the launcher's handlers
  lo.stdout_fd = o_.out_fd;
  lo.stderr_fd = o_.err_fd;
  for (std::size_t r = 0; r < p_.ranks.size(); ++r) {
    const RankPlan& rp = p_.ranks[r];
    api::RankPlacement pl;
    pl.netns = namespace_path(p_.hosts[static_cast<std::size_t>(rp.host)].ns);
    pl.label = fmt::format("h{} r{}", rp.host, r);
    pl.local_rank = rp.local_rank;
    pl.local_size = p_.spec.ranks_per_host;
    lo.placement.push_back(std::move(pl));
  }
  const SwitchPlan& ctl = p_.controller;
  if (!ctl.argv.empty()) {  // first: the switches register with it
    api::SidecarSpec sc;
    sc.name = ctl.name;
    sc.argv = ctl.argv;
    sc.netns = namespace_path(ctl.ns);
    sc.ready_probe = [ns = sc.netns, addr = ctl.addr, port = ctl.port](pid_t pid) {
      return tcp_port_listening(pid, ns, addr, port);
    };
    lo.sidecars.push_back(std::move(sc));
  }
  if (o_.edge) add_edge_engines(lo);
  for (const SwitchPlan& s : p_.switches) {
    api::SidecarSpec sc;
    sc.name = s.name;
    sc.argv = s.argv;
    sc.netns = namespace_path(s.ns);
    sc.ready_probe = [this, ns = sc.netns, addr = s.addr, port = s.port, name = s.name](pid_t pid) {
      if (!udp_port_bound(pid, ns, addr, port)) return false;
      if (p_.controller.argv.empty()) return true;
      // With a controller: ready once the controller lists it registered and alive (else the
      // first communicators would find no tree).
      const SwitchPlan& c = p_.controller;
      CommandResult r = run_command({"ip", "netns", "exec", c.ns, p_.id.inc_exe, "controller", "status",
                                     "--controller", fmt::format("{}:{}", c.addr, c.port),
                                     "--control-key-file", p_.control_key_path, "--timeout", "2"},
                                    std::chrono::seconds(5));
      return r.ok() && r.out.find("\"name\":\"" + name + "\",\"registered\":true,\"alive\":true") !=
                           std::string::npos;
    };
    lo.sidecars.push_back(std::move(sc));
  }
  try {
    api::LaunchResult r = api::launch_ranks(lo);
    return r.exit_code;
  } catch (const Error& e) {
    log(fmt::format("cannot start the job: {}", e.what()));
    return 1;
  }
}

// One `inc edge` per host in its namespace (as a NIC per host); its socket in the state directory,
// removed with it. Each proxy listens where its rank would (the host's address) and the proxies
// mesh across the emulated links.
void Runner::add_edge_engines(api::LaunchOptions& lo) {
  std::random_device rd;
  std::string token;
  for (int i = 0; i < 8; ++i) token += fmt::format("{:08x}", rd());
  lo.env.emplace_back("INC_OFFLOAD", "edge");
  lo.env.emplace_back("INC_EDGE_TOKEN", token);
  for (std::size_t h = 0; h < p_.hosts.size(); ++h) {
    const std::string sock = fmt::format("{}/edge-h{}.sock", state_dir(p_.id), h);
    api::SidecarSpec sc;
    sc.name = fmt::format("edge-h{}", h);
    sc.argv = {p_.id.inc_exe, "edge", "--socket", sock};
    sc.netns = namespace_path(p_.hosts[h].ns);
    sc.ready_probe = [sock](pid_t) { return ::access(sock.c_str(), F_OK) == 0; };
    lo.sidecars.push_back(std::move(sc));
  }
  for (std::size_t r = 0; r < p_.ranks.size(); ++r)
    lo.placement[r].env.emplace_back("INC_EDGE", fmt::format("{}/edge-h{}.sock", state_dir(p_.id), p_.ranks[r].host));
  info(fmt::format("an edge engine per host ({} x `inc edge`, sockets in {})", p_.hosts.size(), state_dir(p_.id)));
}

bool Runner::teardown() {
  if (torn_down_) return true;
  torn_down_ = true;
  const auto t0 = Clock::now();
  bool ok = true;
  // Whatever a rank left running in the background (outside its process group) goes too.
  std::vector<std::string> errors;
  int stray = 0;
  // (After an interrupted build only some of the namespaces exist.)
  std::vector<std::string> existing;
  for (const auto& ns : p_.namespaces)
    if (std::filesystem::exists(namespace_path(ns))) existing.push_back(ns);
  for (const auto& ns : existing) stray += kill_processes_in(ns, errors);
  for (const auto& e : errors) log("cannot list the processes of a namespace: " + e);
  if (stray) log(fmt::format("killed {} process{} still running in the testbed's namespaces", stray, stray == 1 ? "" : "es"));
  // Hosts first, then leaves and the spine: deleting a namespace deletes its veth ends, and
  // with them their peers.
  for (const auto& ns : existing) {
    CommandResult r = run_command({"ip", "netns", "del", ns});
    if (!r.ok() && std::filesystem::exists(namespace_path(ns))) {
      log(fmt::format("cannot remove namespace {}: `ip netns del {}` {}", ns, ns, r.describe()));
      ok = false;
    }
  }
  remove_state(p_.id);
  for (const FoundTestbed& t : find_testbeds(p_.id.run_dir, p_.id.prefix))
    if (t.pid == p_.id.pid) {
      log(fmt::format("still present after removal: {} namespace(s){}; run `inc testbed cleanup "
                      "--force --prefix {}`", t.namespaces.size(),
                      t.has_state ? " and the state directory" : "", p_.id.prefix));
      ok = false;
    }
  info(fmt::format("removed {} namespaces in {:.2f} s", existing.size(), seconds_since(t0)));
  return ok;
}

int Runner::run() {
  SignalGuard signals;  // first: from here on a signal is noticed, never lost or fatal
  if (std::string why = privilege_problem(); !why.empty()) {
    write_all(o_.err_fd, "inc testbed: cannot build a testbed: " + why + "\n");
    return 1;
  }
  if (o_.command.empty()) {
    write_all(o_.err_fd, "inc testbed: no command to run\n");
    return 2;
  }
  if (!p_.spec.tcp_cc.empty())
    if (std::string why = tcp_cc_problem(p_.spec.tcp_cc); !why.empty()) {
      write_all(o_.err_fd, "inc testbed: --tcp-cc: " + why + "\n");
      return 2;
    }
  remove_leftovers();
  try {
    write_state(p_);
  } catch (const Error& e) {
    log(fmt::format("cannot record the testbed's state: {}", e.what()));
    remove_state(p_.id);
    return 1;
  }
  state_written_ = true;
  if (!o_.quiet) write_all(o_.err_fd, describe_plan(p_, false) + "\n");
  int code = 0;
  if (!build()) {
    const int sig = g_signal.load();
    code = sig ? 128 + sig : 1;
  } else {
    code = launch();
    if (o_.counters) {
      std::vector<std::string> errors;
      auto c = collect_counters(p_, errors);
      for (const auto& e : errors) log("cannot read counters: " + e);
      write_all(o_.err_fd, "\n[testbed] link counters (up = towards the switch/spine; q-drops: "
                           "shaper queue full; rx-drops: receiver)\n" + render_counters(c));
    }
  }
  if (!teardown() && code == 0) code = 1;
  return code;
}

}  // namespace

int run_testbed(const Plan& plan, const RunOptions& o) { return Runner(plan, o).run(); }

int cleanup_testbeds(const std::string& run_dir, const std::string& prefix, bool force, int out_fd,
                     int err_fd) {
  if (std::string why = privilege_problem(); !why.empty()) {
    write_all(err_fd, "inc testbed cleanup: " + why + "\n");
    return 1;
  }
  int removed = 0, kept = 0, failed = 0;
  for (const FoundTestbed& t : find_testbeds(run_dir, prefix)) {
    if (t.owner_alive && (!force || t.pid == ::getpid())) {
      write_all(out_fd, fmt::format("kept testbed pid {} ({} namespaces): it is still running "
                                    "(--force removes it anyway)\n", t.pid, t.namespaces.size()));
      ++kept;
      continue;
    }
    Removal r = remove_testbed(run_dir, prefix, t);
    for (const auto& e : r.errors) write_all(err_fd, "inc testbed cleanup: " + e + "\n");
    failed += r.errors.empty() ? 0 : 1;
    removed += r.errors.empty() ? 1 : 0;
    write_all(out_fd, fmt::format("removed testbed pid {}{}: {} namespace{}, {} process{}\n", t.pid,
                                  t.owner_alive ? " (still running)" : "", t.namespaces.size(),
                                  t.namespaces.size() == 1 ? "" : "s", r.killed,
                                  r.killed == 1 ? "" : "es"));
  }
  if (removed + kept + failed == 0)
    write_all(out_fd, fmt::format("no testbed with prefix '{}' found\n", prefix));
  return failed ? 1 : 0;
}

}  // namespace inc::testbed
