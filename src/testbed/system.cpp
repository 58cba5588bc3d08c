#include "testbed/system.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "inc/types.hpp"
#include "src/proto/auth.hpp"
#include "transport/socket.hpp"

extern char** environ;

namespace inc::testbed {

namespace fs = std::filesystem;
using transport::Fd;

namespace {

std::string read_fd(int fd) {
  std::string s;
  char buf[4096];
  for (off_t off = 0;;) {
    ssize_t n = ::pread(fd, buf, sizeof buf, off);
    if (n <= 0) break;
    s.append(buf, static_cast<std::size_t>(n));
    off += n;
  }
  return s;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A whole string as an unsigned number in `base` (the kernel's files are trusted to be well
// formed, but a surprise must not become an exception deep inside a readiness probe).
std::optional<unsigned long long> to_u64(std::string_view s, int base = 10) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n')) s.remove_suffix(1);
  unsigned long long v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// Parses "PREFIX-PID" (a state directory) or "PREFIX-PID-ROLE" (a namespace); 0 if no match.
long owner_pid(const std::string& name, const std::string& prefix, bool with_role) {
  if (name.size() <= prefix.size() + 1 || name.compare(0, prefix.size(), prefix) != 0 ||
      name[prefix.size()] != '-')
    return 0;
  std::size_t i = prefix.size() + 1, j = i;
  while (j < name.size() && std::isdigit(static_cast<unsigned char>(name[j]))) ++j;
  if (j == i || j - i > 9) return 0;
  if (with_role ? (j + 1 >= name.size() || name[j] != '-') : j != name.size()) return 0;
  return static_cast<long>(to_u64(std::string_view(name).substr(i, j - i)).value_or(0));
}

}  // namespace

std::string CommandResult::describe() const {
  std::string what;
  if (!spawn_error.empty()) return "could not be started: " + spawn_error;
  if (timed_out) what = "did not finish in time and was killed";
  else if (exit_code >= 0) what = fmt::format("exited with code {}", exit_code);
  else what = fmt::format("was killed by signal {} ({})", signal, ::strsignal(signal));
  std::string e = trim(err);
  if (e.empty()) e = trim(out);
  return e.empty() ? what : what + ": " + e;
}

CommandResult run_command(const Argv& argv, std::chrono::milliseconds timeout) {
  CommandResult r;
  if (argv.empty()) {
    r.spawn_error = "empty command";
    return r;
  }
  Fd out(::memfd_create("inc-testbed-out", MFD_CLOEXEC)), err(::memfd_create("inc-testbed-err", MFD_CLOEXEC));
  if (!out || !err) {
    r.spawn_error = fmt::format("memfd_create: {}", std::strerror(errno));
    return r;
  }
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out.get(), 1);
  posix_spawn_file_actions_adddup2(&fa, err.get(), 2);
  posix_spawnattr_init(&attr);
  sigset_t none, dfl;
  sigemptyset(&none);
  sigemptyset(&dfl);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) sigaddset(&dfl, s);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &dfl);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, argv[0].c_str(), &fa, &attr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    r.spawn_error = fmt::format("{}: {}", argv[0], std::strerror(rc));
    return r;
  }
  // Wait with a deadline: the pidfd becomes readable when the child exits.
  Fd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  for (;;) {
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) {
      r.spawn_error = fmt::format("waitpid: {}", std::strerror(errno));
      return r;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      r.timed_out = true;
      break;
    }
    if (pidfd) {
      pollfd p{pidfd.get(), POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    } else {
      ::usleep(1000);  // no pidfd_open: poll the exit
    }
  }
  if (!r.timed_out) {
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  }
  r.out = read_fd(out.get());
  r.err = read_fd(err.get());
  return r;
}

std::string check_command(const Argv& argv, std::chrono::milliseconds timeout) {
  CommandResult r = run_command(argv, timeout);
  if (!r.ok())
    throw Error(Error::Kind::network, fmt::format("`{}` {}", shell_join(argv), r.describe()));
  return r.out;
}

std::string privilege_problem() {
  // CapEff: the effective capability set, hex. CAP_NET_ADMIN = 12, CAP_SYS_ADMIN = 21.
  std::istringstream in(read_file("/proc/self/status"));
  unsigned long long eff = 0;
  bool found = false;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("CapEff:", 0) == 0)
      if (auto v = to_u64(std::string_view(line).substr(7), 16)) {
        eff = *v;
        found = true;
      }
  if (!found) return "cannot read the capabilities of this process (/proc/self/status)";
  std::string missing;
  if (!(eff & (1ull << 12))) missing = "CAP_NET_ADMIN";
  if (!(eff & (1ull << 21))) missing += missing.empty() ? "CAP_SYS_ADMIN" : " and CAP_SYS_ADMIN";
  if (missing.empty()) return "";
  return fmt::format("this process (uid {}) lacks {}: creating network namespaces, veth links "
                     "and tc qdiscs needs root (e.g. sudo inc testbed ...)",
                     ::geteuid(), missing);
}

std::optional<unsigned long long> process_start_time(long pid) {
  std::string s = read_file(fmt::format("/proc/{}/stat", pid));
  auto close = s.rfind(')');  // the command name may contain spaces and parentheses
  if (s.empty() || close == std::string::npos) return std::nullopt;
  std::istringstream in(s.substr(close + 2));
  std::string field;
  // Fields after the name start at field 3 (state); the start time is field 22.
  for (int i = 3; i <= 22 && (in >> field); ++i)
    if (i == 22) return to_u64(field);
  return std::nullopt;
}

void write_state(const Plan& p) {
  const std::string dir = state_dir(p.id);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(Error::Kind::config, fmt::format("cannot create {}: {}", dir, ec.message()));
  auto start = process_start_time(p.id.pid);
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream f(dir + "/" + name, std::ios::trunc);
    f << text;
    f.close();
    if (!f) throw Error(Error::Kind::config, fmt::format("cannot write {}/{}", dir, name));
  };
  write("owner", fmt::format("{} {}\n", p.id.pid, start ? *start : 0));
  write("plan", describe_plan(p, true));
  if (!p.topology_text.empty()) write("topology", p.topology_text);
  if (!p.fabric_text.empty()) write("fabric", p.fabric_text);
  if (!p.control_key_path.empty()) {  // the controller's secret: fresh per run, root only
    std::string err;
    if (!proto::auth::write_key_file(p.control_key_path, 1, proto::auth::random_key(), err))
      throw Error(Error::Kind::config, "cannot write the control secret: " + err);
  }
  if (!p.key_path.empty()) {
    // A fresh key per run, readable by root only (the switches and ranks run as root).
    std::string err;
    if (!proto::auth::write_key_file(p.key_path, p.key_job, proto::auth::random_key(), err))
      throw Error(Error::Kind::config, "cannot write the job's key: " + err);
  }
}

void remove_state(const Identity& id) {
  std::error_code ec;
  fs::remove_all(state_dir(id), ec);
}

std::vector<FoundTestbed> find_testbeds(const std::string& run_dir, const std::string& prefix) {
  std::map<long, FoundTestbed> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/run/netns", ec)) {
    const std::string n = e.path().filename().string();
    if (long pid = owner_pid(n, prefix, true)) {
      found[pid].pid = pid;
      found[pid].namespaces.push_back(n);
    }
  }
  for (const auto& e : fs::directory_iterator(run_dir, ec)) {
    if (long pid = owner_pid(e.path().filename().string(), prefix, false)) {
      found[pid].pid = pid;
      found[pid].has_state = true;
    }
  }
  std::vector<FoundTestbed> out;
  for (auto& [pid, t] : found) {
    auto now = process_start_time(pid);
    if (t.has_state) {
      // The owner record says which process made it; a reused pid has another start time.
      std::istringstream in(read_file(fmt::format("{}/{}-{}/owner", run_dir, prefix, pid)));
      long p = 0;
      unsigned long long start = 0;
      bool parsed = static_cast<bool>(in >> p >> start);
      t.owner_alive = now && (!parsed || start == 0 || *now == start);
    } else {
      t.owner_alive = now.has_value();  // no record: alive if the pid exists (conservative)
    }
    out.push_back(std::move(t));
  }
  return out;
}

int kill_processes_in(const std::string& ns, std::vector<std::string>& errors) {
  CommandResult r = run_command({"ip", "netns", "pids", ns});
  if (!r.ok()) {
    errors.push_back(fmt::format("`ip netns pids {}` {}", ns, r.describe()));
    return 0;
  }
  int n = 0;
  std::istringstream in(r.out);
  for (long pid; in >> pid;)
    if (pid > 1 && pid != ::getpid() && ::kill(static_cast<pid_t>(pid), SIGKILL) == 0) ++n;
  return n;
}

Removal remove_testbed(const std::string& run_dir, const std::string& prefix, const FoundTestbed& t) {
  Removal res;
  std::vector<std::string>& errors = res.errors;
  for (const auto& ns : t.namespaces) res.killed += kill_processes_in(ns, errors);
  for (const auto& ns : t.namespaces) {
    CommandResult r = run_command({"ip", "netns", "del", ns});
    if (!r.ok() && fs::exists(namespace_path(ns)))
      errors.push_back(fmt::format("`ip netns del {}` {}", ns, r.describe()));
  }
  std::error_code ec;
  fs::remove_all(fmt::format("{}/{}-{}", run_dir, prefix, t.pid), ec);
  if (ec) errors.push_back(fmt::format("cannot remove {}/{}-{}: {}", run_dir, prefix, t.pid, ec.message()));
  return res;
}

bool udp_port_bound(pid_t pid, const std::string& ns_path, const std::string& addr, int port) {
  return port_bound(pid, ns_path, addr, port, false);
}

bool tcp_port_listening(pid_t pid, const std::string& ns_path, const std::string& addr, int port) {
  return port_bound(pid, ns_path, addr, port, true);
}

bool port_bound(pid_t pid, const std::string& ns_path, const std::string& addr, int port, bool tcp_listen) {
  struct stat want {}, have {};
  if (::stat(ns_path.c_str(), &want) != 0 ||
      ::stat(fmt::format("/proc/{}/ns/net", pid).c_str(), &have) != 0 ||
      want.st_ino != have.st_ino || want.st_dev != have.st_dev)
    return false;  // not (yet) in its namespace
  in_addr a{};
  if (::inet_pton(AF_INET, addr.c_str(), &a) != 1) return false;
  std::istringstream in(read_file(fmt::format("/proc/{}/net/{}", pid, tcp_listen ? "tcp" : "udp")));
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string slot, local, remote, state;
    if (!(f >> slot >> local >> remote >> state)) continue;
    if (tcp_listen && state != "0A") continue;  // TCP_LISTEN
    auto colon = local.find(':');
    if (colon == std::string::npos) continue;
    // The address is the raw (network order) 32-bit value printed as a host integer.
    auto ip = to_u64(std::string_view(local).substr(0, colon), 16);
    auto p = to_u64(std::string_view(local).substr(colon + 1), 16);
    if (ip && p && static_cast<int>(*p) == port &&
        (static_cast<std::uint32_t>(*ip) == a.s_addr || *ip == 0))
      return true;
  }
  return false;
}

bool kernel_has_ipv6() { return fs::exists("/proc/sys/net/ipv6/conf/all/disable_ipv6"); }

std::string tcp_cc_problem(const std::string& cc) {
  auto words = [](const char* path, std::string& text) {
    std::ifstream f(path);
    std::getline(f, text);
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string w; in >> w;) out.push_back(w);
    return out;
  };
  std::string available_text, allowed_text;
  const auto available = words("/proc/sys/net/ipv4/tcp_available_congestion_control", available_text);
  const auto allowed = words("/proc/sys/net/ipv4/tcp_allowed_congestion_control", allowed_text);
  auto has = [&](const std::vector<std::string>& v) { return std::find(v.begin(), v.end(), cc) != v.end(); };
  if (!available.empty() && !has(available))
    return fmt::format("this kernel has no TCP congestion control '{}' (available: {})", cc, available_text);
  if (!allowed.empty() && !has(allowed))
    return fmt::format("a network namespace may only select a congestion control listed in the machine's "
                       "net.ipv4.tcp_allowed_congestion_control ({}); '{}' is not (add it there, or choose one "
                       "of those, or inherit)", allowed_text, cc);
  return {};
}

}  // namespace inc::testbed
