#include "api/launcher.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>

#include "api/launcher_os.hpp"
#include "inc/types.hpp"
#include "transport/socket.hpp"
#include "transport/store.hpp"

extern char** environ;

namespace inc::api {

namespace {

using std::chrono::milliseconds;
using transport::Clock;
using transport::Deadline;
using transport::Fd;

constexpr std::size_t kMaxLineBytes = 64 * 1024;  // longer lines are forwarded in pieces
constexpr int kMaxRanks = 4096;

using detail::config_error;
using detail::find_program;
using detail::in_netns;
using detail::open_netns;
using detail::set_var;
using detail::signal_name;
using detail::SignalForwarding;
using detail::write_all_fd;

// ---- child processes ------------------------------------------------------------------------

struct Stream {
  Fd fd;
  std::string buf;
  bool is_err = false;
};

struct Child {
  ProcessExit status;
  std::string prefix;  // "[3] "
  bool is_rank = true;
  int netns_fd = -1;  // namespace to enter before exec (owned by the Launcher), -1: none
  bool reaped = false;
  Fd pidfd;  // -1 when the kernel lacks pidfd_open; exits are then noticed by a periodic tick
  Stream out, err;
};

class Launcher {
 public:
  explicit Launcher(const LaunchOptions& o) : o_(o) {}
  // If run() leaves by an exception, no child may outlive it.
  ~Launcher() {
    for (auto& c : children_) {
      if (c->reaped || c->status.pid <= 0) continue;
      ::kill(-c->status.pid, SIGKILL);
      ::kill(c->status.pid, SIGKILL);
      while (::waitpid(c->status.pid, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
  }
  LaunchResult run();

 private:
  void log(const std::string& msg) {
    if (!o_.quiet) write_all_fd(o_.stderr_fd, "[launch] " + msg + "\n");
  }
  std::vector<std::string> base_env() const;
  void spawn(Child& c, const std::string& path, const std::vector<std::string>& argv,
             const std::vector<std::string>& env);
  void pump(Child& c, Stream& s, bool eof_drain);
  void emit(const Child& c, const Stream& s, std::string_view line);
  void reap(Child& c);
  void on_exit(Child& c);
  void begin_stop(const std::string& why);
  void signal_all(int sig, bool ranks_only = false);
  bool all_ranks_reaped() const;
  bool all_reaped() const;
  void wait_sidecar_ready(Child& c, const SidecarSpec& spec);
  // A forwarded signal is waiting in the self-pipe: stop starting processes (the main loop
  // reads it and stops the job).
  bool signal_pending() const {
    if (signal_fd_ < 0) return false;
    pollfd p{signal_fd_, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
  }
  int signal_fd_ = -1;

  const LaunchOptions& o_;
  std::vector<Fd> netns_fds_;  // opened before anyone starts: a bad path fails the launch early
  std::unique_ptr<transport::StoreServer> store_;
  std::string store_addr_;
  std::vector<std::unique_ptr<Child>> children_;
  LaunchResult res_;
  bool stopping_ = false;
  bool ranks_done_stop_ = false;  // sidecars being stopped after a clean finish
  Deadline kill_at_{};
  bool killed_ = false;
  Fd devnull_;
};

const std::vector<std::string> kRemoved = {"OMPI_COMM_WORLD_RANK",
                                           "OMPI_COMM_WORLD_SIZE",
                                           "OMPI_COMM_WORLD_LOCAL_RANK",
                                           "OMPI_COMM_WORLD_LOCAL_SIZE",
                                           "PMI_RANK",
                                           "PMI_SIZE",
                                           "MPI_LOCALRANKID",
                                           "MPI_LOCALNRANKS",
                                           "RANK",
                                           "WORLD_SIZE",
                                           "LOCAL_RANK",
                                           "LOCAL_WORLD_SIZE",
                                           "GROUP_RANK",
                                           "TORCHELASTIC_RUN_ID",
                                           "INC_RANK",
                                           "INC_WORLD_SIZE",
                                           "INC_LOCAL_RANK",
                                           "INC_LOCAL_SIZE",
                                           "INC_STORE",
                                           "INC_STORE_HOST",
                                           "INC_LAUNCH_WORLD_SIZE"};

std::vector<std::string> Launcher::base_env() const {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    auto eq = kv.find('=');
    std::string name(kv.substr(0, eq));
    if (std::find(kRemoved.begin(), kRemoved.end(), name) != kRemoved.end()) continue;
    if (std::find(o_.unset_env.begin(), o_.unset_env.end(), name) != o_.unset_env.end()) continue;
    bool overridden = false;
    for (auto& [k, v] : o_.env) overridden = overridden || k == name;
    if (!overridden) env.emplace_back(kv);
  }
  for (auto& [k, v] : o_.env) env.push_back(k + "=" + v);
  env.push_back("INC_STORE=" + store_addr_);
  env.push_back("INC_STORE_HOST=0");
  env.push_back(fmt::format("INC_LAUNCH_WORLD_SIZE={}", o_.world_size));
  return env;
}

void Launcher::spawn(Child& c, const std::string& path, const std::vector<std::string>& argv,
                     const std::vector<std::string>& env) {
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls
  // (the store's thread exists in this process).
  std::vector<char*> cargv, cenv;
  for (auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (auto& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);

  int out[2], err[2], status[2];
  if (::pipe2(out, O_CLOEXEC) != 0)
    throw Error(Error::Kind::internal, fmt::format("pipe2: {}", std::strerror(errno)));
  Fd out_r(out[0]), out_w(out[1]);
  if (::pipe2(err, O_CLOEXEC) != 0)
    throw Error(Error::Kind::internal, fmt::format("pipe2: {}", std::strerror(errno)));
  Fd err_r(err[0]), err_w(err[1]);
  if (::pipe2(status, O_CLOEXEC) != 0)
    throw Error(Error::Kind::internal, fmt::format("pipe2: {}", std::strerror(errno)));
  Fd status_r(status[0]), status_w(status[1]);

  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) {
    // Child. Reset every handler (a forwarded signal must kill it) and the mask.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; ++s) ::sigaction(s, &dfl, nullptr);
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the launcher died before prctl took effect
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::dup2(devnull_.get(), 0);
    ::dup2(out_w.get(), 1);
    ::dup2(err_w.get(), 2);
    // The status pipe carries {stage, errno}: stage 1 = setns failed, 0 = execve failed.
    int st[2] = {1, 0};
    if (c.netns_fd < 0 || ::setns(c.netns_fd, CLONE_NEWNET) == 0) {
      st[0] = 0;
      ::execve(path.c_str(), cargv.data(), cenv.data());
    }
    st[1] = errno;
    [[maybe_unused]] ssize_t n = ::write(status_w.get(), st, sizeof st);
    ::_exit(127);
  }
  int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0)
    throw Error(Error::Kind::internal,
                fmt::format("launch: fork for {}: {}", c.status.name, std::strerror(fork_errno)));
  ::setpgid(pid, pid);  // also done by the child; whichever runs first wins the race
  c.status.pid = pid;
  out_w.reset();
  err_w.reset();
  status_w.reset();
  c.out.fd = std::move(out_r);
  c.err.fd = std::move(err_r);
  c.err.is_err = true;
  int pfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pfd >= 0) c.pidfd.reset(pfd);

  // The status pipe closes on exec (success) or carries {stage, errno} (failure).
  int e[2] = {0, 0};
  std::size_t got = 0;
  auto deadline = transport::deadline_after(milliseconds(30000));
  while (got < sizeof e) {
    pollfd p{status_r.get(), POLLIN, 0};
    int rc = ::poll(&p, 1, transport::ms_until(deadline));
    if (rc == 0) break;  // exec still pending after 30 s: treat as started
    if (rc < 0 && errno == EINTR) continue;
    ssize_t n = ::read(status_r.get(), reinterpret_cast<char*>(e) + got, sizeof e - got);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got == sizeof e) {
    c.status.started = false;
    if (!stopping_) {
      res_.failure =
          e[0] == 1 ? fmt::format("{}: cannot enter its network namespace: {}", c.status.name,
                                  std::strerror(e[1]))
                    : fmt::format("{}: cannot execute '{}': {}", c.status.name, path,
                                  std::strerror(e[1]));
      res_.exit_code = 127;
      log(res_.failure);
      begin_stop(res_.failure);
    }
  } else {
    c.status.started = true;
  }
}

void Launcher::emit(const Child& c, const Stream& s, std::string_view line) {
  std::string text;
  text.reserve(c.prefix.size() + line.size() + 1);
  if (o_.prefix_output) text += c.prefix;
  text += line;
  text += '\n';
  write_all_fd(s.is_err ? o_.stderr_fd : o_.stdout_fd, text);  // one write per line
}

void Launcher::pump(Child& c, Stream& s, bool eof_drain) {
  char buf[64 * 1024];
  for (;;) {
    ssize_t n = ::read(s.fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n > 0) {
      s.buf.append(buf, static_cast<std::size_t>(n));
      std::size_t start = 0;
      for (;;) {
        auto nl = s.buf.find('\n', start);
        if (nl == std::string::npos) break;
        emit(c, s, std::string_view(s.buf).substr(start, nl - start));
        start = nl + 1;
      }
      s.buf.erase(0, start);
      while (s.buf.size() >= kMaxLineBytes) {
        emit(c, s, std::string_view(s.buf).substr(0, kMaxLineBytes));
        s.buf.erase(0, kMaxLineBytes);
      }
      if (!eof_drain) return;  // one read per poll wake-up keeps streams fair
      continue;
    }
    if (n < 0 && errno == EAGAIN) return;
    // EOF or error: flush the unterminated last line.
    if (!s.buf.empty()) emit(c, s, s.buf);
    s.buf.clear();
    s.fd.reset();
    return;
  }
}

std::string describe_exit(const ProcessExit& p) { return p.describe(); }

void Launcher::reap(Child& c) {
  if (c.reaped) return;
  int st = 0;
  pid_t r = ::waitpid(c.status.pid, &st, WNOHANG);
  if (r == 0) return;
  if (r < 0) {
    if (errno == EINTR) return;
    // ECHILD: someone else reaped it (e.g. a SIGCHLD handler of the host program).
    c.status.exited = true;
    c.status.code = 255;
  } else if (WIFEXITED(st)) {
    c.status.exited = true;
    c.status.code = WEXITSTATUS(st);
  } else if (WIFSIGNALED(st)) {
    c.status.signal = WTERMSIG(st);
  } else {
    return;  // stopped/continued: not an exit
  }
  c.reaped = true;
  c.pidfd.reset();
  on_exit(c);
}

void Launcher::on_exit(Child& c) {
  if (!c.status.started) return;  // already reported as an exec failure
  if (c.is_rank) {
    bool failed = !(c.status.exited && c.status.code == 0);
    if (failed && !stopping_) {
      res_.failure = fmt::format("{} {}", c.status.name, c.status.describe());
      res_.exit_code = c.status.exited ? std::clamp(c.status.code, 1, 255)
                                       : std::min(128 + c.status.signal, 255);
      begin_stop(res_.failure);
    }
    return;
  }
  // A sidecar must outlive the ranks.
  if (!stopping_ && !ranks_done_stop_) {
    res_.failure =
        fmt::format("{} {} while the ranks were running", c.status.name, c.status.describe());
    res_.exit_code = c.status.exited && c.status.code != 0 ? std::min(c.status.code, 255)
                     : c.status.signal                     ? std::min(128 + c.status.signal, 255)
                                                           : 1;
    begin_stop(res_.failure);
  } else if (ranks_done_stop_ && res_.exit_code == 0) {
    // The ranks finished and the sidecar was told to stop: it must exit 0 or die of the SIGTERM
    // (or, after the grace period, the SIGKILL) it was sent. An error code or another signal --
    // a crash on the way out, a sanitizer's report at exit (a leak) -- fails the job; otherwise a
    // switch that breaks while stopping would go unnoticed by every test that launches one.
    const bool clean = c.status.exited ? c.status.code == 0
                                       : c.status.signal == SIGTERM || c.status.signal == SIGKILL;
    if (!clean) {
      res_.failure = fmt::format("{} {} when stopped after the ranks finished", c.status.name,
                                 c.status.describe());
      res_.exit_code = c.status.exited ? std::clamp(c.status.code, 1, 255)
                                       : std::min(128 + c.status.signal, 255);
    }
  }
}

void Launcher::signal_all(int sig, bool ranks_only) {
  for (auto& c : children_) {
    if (c->reaped || c->status.pid <= 0 || (ranks_only && !c->is_rank)) continue;
    // The child's own process group, so that whatever it started goes too. The group id is
    // safe to use: the child is not reaped, so its pid cannot have been reused.
    if (::kill(-c->status.pid, sig) != 0) ::kill(c->status.pid, sig);
    c->status.stopped_by_launcher = true;
  }
}

void Launcher::begin_stop(const std::string& why) {
  if (stopping_) return;
  stopping_ = true;
  std::size_t alive = 0;
  for (auto& c : children_) alive += c->reaped ? 0 : 1;
  if (alive)
    log(fmt::format("{}; stopping {} other process{}", why, alive, alive == 1 ? "" : "es"));
  signal_all(SIGTERM);
  kill_at_ = Clock::now() + o_.grace;
}

bool Launcher::all_ranks_reaped() const {
  return std::all_of(children_.begin(), children_.end(),
                     [](auto& c) { return !c->is_rank || c->reaped; });
}
bool Launcher::all_reaped() const {
  return std::all_of(children_.begin(), children_.end(), [](auto& c) { return c->reaped; });
}

void Launcher::wait_sidecar_ready(Child& c, const SidecarSpec& spec) {
  auto deadline = Clock::now() + spec.ready_timeout;
  auto ready = [&] {
    return (spec.ready_key.empty() || store_->peek(spec.ready_key)) &&
           (!spec.ready_probe || spec.ready_probe(c.status.pid));
  };
  while (!ready()) {
    // Keep its output flowing and notice if it dies while we wait.
    pollfd p[2] = {{c.out.fd.get(), POLLIN, 0}, {c.err.fd.get(), POLLIN, 0}};
    int rc = ::poll(p, 2, 10);  // short tick: readiness is a store key, not an fd event
    if (rc > 0) {
      if (p[0].revents && c.out.fd) pump(c, c.out, false);
      if (p[1].revents && c.err.fd) pump(c, c.err, false);
    }
    reap(c);
    if (signal_pending()) return;
    if (c.reaped || stopping_) {
      if (!stopping_)
        begin_stop(fmt::format("{} {} before it was ready", c.status.name, c.status.describe()));
      return;
    }
    if (Clock::now() >= deadline) {
      res_.failure =
          spec.ready_key.empty()
              ? fmt::format("{} was not ready within {} ms", c.status.name,
                            spec.ready_timeout.count())
              : fmt::format("{} did not set '{}' in the store within {} ms", c.status.name,
                            spec.ready_key, spec.ready_timeout.count());
      res_.exit_code = 1;
      begin_stop(res_.failure);
      return;
    }
  }
}

LaunchResult Launcher::run() {
  if (o_.world_size < 1 || o_.world_size > kMaxRanks)
    config_error(fmt::format("launch: world size {} outside 1..{}", o_.world_size, kMaxRanks));
  if (o_.argv.empty()) config_error("launch: no program given");
  if (o_.timeout.count() < 0 || o_.grace.count() < 0)
    config_error("launch: negative timeout or grace period");
  std::string path_env = "/usr/local/bin:/usr/bin:/bin";
  if (const char* p = std::getenv("PATH")) path_env = p;
  for (auto& [k, v] : o_.env)
    if (k == "PATH") path_env = v;
  for (auto& s : o_.sidecars)
    if (s.name.empty() || s.argv.empty())
      config_error("launch: a sidecar needs a name and a program");
  if (!o_.placement.empty() && o_.placement.size() != static_cast<std::size_t>(o_.world_size))
    config_error(fmt::format("launch: {} rank placements for {} ranks", o_.placement.size(),
                             o_.world_size));
  for (std::size_t r = 0; r < o_.placement.size(); ++r) {
    const auto& p = o_.placement[r];
    if ((p.local_rank >= 0) != (p.local_size >= 0) ||
        (p.local_size >= 0 && (p.local_size < 1 || p.local_rank >= p.local_size)))
      config_error(fmt::format("launch: rank {}: local rank {} of local size {}", r, p.local_rank,
                               p.local_size));
  }
  // Namespaces are opened before anything starts, so that a bad one fails the launch cleanly.
  std::vector<int> sidecar_ns(o_.sidecars.size(), -1), rank_ns(o_.placement.size(), -1);
  for (std::size_t i = 0; i < o_.sidecars.size(); ++i)
    if (!o_.sidecars[i].netns.empty()) {
      netns_fds_.push_back(open_netns(o_.sidecars[i].netns, o_.sidecars[i].name));
      sidecar_ns[i] = netns_fds_.back().get();
    }
  for (std::size_t r = 0; r < o_.placement.size(); ++r)
    if (!o_.placement[r].netns.empty()) {
      netns_fds_.push_back(open_netns(o_.placement[r].netns, fmt::format("rank {}", r)));
      rank_ns[r] = netns_fds_.back().get();
    }
  // A program that cannot be found is reported like one that cannot be executed: exit 127.
  std::string rank_path;
  std::vector<std::string> sidecar_paths;
  try {
    rank_path = find_program(o_.argv[0], path_env);
    for (auto& s : o_.sidecars) sidecar_paths.push_back(find_program(s.argv[0], path_env));
  } catch (const Error& e) {
    res_.failure = e.what();
    res_.exit_code = 127;
    log(res_.failure);
    return res_;
  }

  // Each child costs 2-3 descriptors here; lift the soft limit for large local jobs.
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }

  devnull_.reset(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!devnull_) throw Error(Error::Kind::internal, "launch: cannot open /dev/null");

  auto start_store = [&] {
    try {
      store_ = std::make_unique<transport::StoreServer>(o_.store_host, o_.store_port);
    } catch (const Error& e) {
      config_error(fmt::format("launch: cannot start the rendezvous store: {}", e.what()));
    }
  };
  if (o_.store_netns.empty())
    start_store();
  else
    in_netns(o_.store_netns, start_store);
  res_.store_port = store_->port();
  std::string connect_host =
      (o_.store_host.empty() || o_.store_host == "0.0.0.0") ? "127.0.0.1" : o_.store_host;
  store_addr_ = transport::format_host_port(connect_host, store_->port());

  SignalForwarding signals(o_.forward_signals);
  signal_fd_ = signals.fd();
  // A signal the caller caught just before the launch counts as if it arrived now.
  if (o_.forward_signals && o_.pending_signal)
    if (int sig = o_.pending_signal->load()) signals.inject(sig);
  // Writes to a closed stdout must not kill the launcher: block SIGPIPE in this thread (write
  // then fails with EPIPE) and discard any that became pending before unblocking.
  sigset_t pipe_set, old_mask;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask);

  auto env = base_env();
  for (std::size_t i = 0; i < o_.sidecars.size() && !stopping_ && !signal_pending(); ++i) {
    auto& spec = o_.sidecars[i];
    auto c = std::make_unique<Child>();
    c->is_rank = false;
    c->status.name = spec.name;
    c->prefix = fmt::format("[{}] ", spec.name);
    c->netns_fd = sidecar_ns[i];
    auto cenv = env;
    for (auto& [k, v] : spec.env) set_var(cenv, k, v);
    children_.push_back(std::move(c));
    spawn(*children_.back(), sidecar_paths[i], spec.argv, cenv);
    if ((!spec.ready_key.empty() || spec.ready_probe) && !stopping_) wait_sidecar_ready(*children_.back(), spec);
  }
  for (int r = 0; r < o_.world_size && !stopping_ && !signal_pending(); ++r) {
    auto c = std::make_unique<Child>();
    const RankPlacement* p =
        o_.placement.empty() ? nullptr : &o_.placement[static_cast<std::size_t>(r)];
    c->status.name = fmt::format("rank {}", r);
    c->prefix = p && !p->label.empty() ? fmt::format("[{}] ", p->label) : fmt::format("[{}] ", r);
    c->netns_fd = p ? rank_ns[static_cast<std::size_t>(r)] : -1;
    auto cenv = env;
    const bool local = p && p->local_size >= 0;
    set_var(cenv, "INC_RANK", std::to_string(r));
    set_var(cenv, "INC_WORLD_SIZE", std::to_string(o_.world_size));
    set_var(cenv, "INC_LOCAL_RANK", std::to_string(local ? p->local_rank : r));
    set_var(cenv, "INC_LOCAL_SIZE", std::to_string(local ? p->local_size : o_.world_size));
    if (p)
      for (auto& [k, v] : p->env) set_var(cenv, k, v);
    children_.push_back(std::move(c));
    spawn(*children_.back(), rank_path, o_.argv, cenv);
  }

  const bool has_deadline = o_.timeout.count() > 0;
  const Deadline job_deadline = Clock::now() + o_.timeout;
  std::vector<pollfd> pfds;
  struct Slot {
    Child* c;
    Stream* s;  // nullptr: the child's pidfd
  };
  std::vector<Slot> slots;
  while (!all_reaped()) {
    pfds.clear();
    slots.clear();
    bool have_all_pidfds = true;
    for (auto& c : children_) {
      for (Stream* s : {&c->out, &c->err})
        if (s->fd) {
          pfds.push_back({s->fd.get(), POLLIN, 0});
          slots.push_back({c.get(), s});
        }
      if (!c->reaped) {
        if (c->pidfd) {
          pfds.push_back({c->pidfd.get(), POLLIN, 0});
          slots.push_back({c.get(), nullptr});
        } else {
          have_all_pidfds = false;
        }
      }
    }
    if (signals.fd() >= 0) pfds.push_back({signals.fd(), POLLIN, 0});

    // Wake for I/O and exits; otherwise at the next deadline (grace, job timeout), or every
    // 50 ms to reap children when pidfds are unavailable.
    Deadline wake = Clock::now() + milliseconds(have_all_pidfds ? 1000 : 50);
    if (stopping_ && !killed_) wake = std::min(wake, kill_at_);
    if (has_deadline && !stopping_) wake = std::min(wake, job_deadline);
    int rc = ::poll(pfds.data(), pfds.size(), transport::ms_until(wake) + 1);
    if (rc < 0 && errno != EINTR)
      throw Error(Error::Kind::internal, fmt::format("launch: poll: {}", std::strerror(errno)));

    if (rc > 0) {
      for (std::size_t i = 0; i < slots.size(); ++i) {
        if (!pfds[i].revents) continue;
        if (slots[i].s) {
          if (slots[i].s->fd) pump(*slots[i].c, *slots[i].s, false);
        } else {
          reap(*slots[i].c);
        }
      }
      if (signals.fd() >= 0 && pfds.back().revents) {
        unsigned char sig = 0;
        while (::read(signals.fd(), &sig, 1) == 1) {
          if (!res_.interrupted_by) {
            res_.interrupted_by = sig;
            if (res_.failure.empty()) {
              res_.failure = fmt::format("interrupted by {}", signal_name(sig));
              res_.exit_code = 128 + sig;
            }
            log(fmt::format("received {}; forwarding it to the job", signal_name(sig)));
            signal_all(sig);
            if (!stopping_) {
              stopping_ = true;
              kill_at_ = Clock::now() + o_.grace;
            }
          } else if (!killed_) {
            log("second signal: killing the job");
            signal_all(SIGKILL);
            killed_ = true;
          }
        }
      }
    }
    for (auto& c : children_) reap(*c);

    if (!stopping_ && all_ranks_reaped()) {
      // Clean finish: the sidecars are no longer needed.
      ranks_done_stop_ = true;
      stopping_ = true;
      signal_all(SIGTERM);
      kill_at_ = Clock::now() + o_.grace;
    }
    if (has_deadline && !stopping_ && Clock::now() >= job_deadline) {
      res_.timed_out = true;
      std::string running;
      for (auto& c : children_)
        if (c->is_rank && !c->reaped) running += (running.empty() ? "" : ", ") + c->status.name;
      res_.failure =
          fmt::format("timed out after {} ms (still running: {})", o_.timeout.count(), running);
      res_.exit_code = 124;
      begin_stop(res_.failure);
    }
    if (stopping_ && !killed_ && Clock::now() >= kill_at_) {
      bool any = false;
      for (auto& c : children_) any = any || !c->reaped;
      if (any) {
        if (!ranks_done_stop_ || res_.exit_code) log("grace period over: sending SIGKILL");
        signal_all(SIGKILL);
      }
      killed_ = true;
    }
  }

  // A signal that came before any rank was started stopped the launch: report it.
  const bool any_rank = std::any_of(children_.begin(), children_.end(), [](auto& c) { return c->is_rank; });
  if (!any_rank && !res_.interrupted_by && signal_pending()) {
    unsigned char sig = 0;
    if (::read(signals.fd(), &sig, 1) == 1) {
      res_.interrupted_by = sig;
      res_.failure = fmt::format("interrupted by {} before the ranks were started", signal_name(sig));
      res_.exit_code = 128 + sig;
    }
  }
  // Everyone has exited; forward what is still buffered in the pipes. A stream held open by a
  // detached grandchild is abandoned once it has nothing to read.
  for (auto& c : children_)
    for (Stream* s : {&c->out, &c->err}) {
      if (!s->fd) continue;
      transport::set_nonblocking(s->fd.get());
      pump(*c, *s, true);
      if (s->fd && !s->buf.empty()) emit(*c, *s, s->buf);
    }

  timespec zero{0, 0};
  while (::sigtimedwait(&pipe_set, nullptr, &zero) > 0) {
  }
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);

  res_.abort_reason = store_->peek(std::string(transport::kAbortKey));
  for (auto& c : children_) (c->is_rank ? res_.ranks : res_.sidecars).push_back(c->status);
  if (res_.exit_code != 0) {
    log(fmt::format("job failed: {}", res_.failure));
    if (res_.abort_reason)
      log(fmt::format("abort reason published by the job: {}", *res_.abort_reason));
    for (auto& c : children_)
      if (c->status.started && !c->status.ok())
        log(fmt::format("  {}: {}{}", c->status.name, describe_exit(c->status),
                        c->status.stopped_by_launcher ? " (stopped by the launcher)" : ""));
  }
  return res_;
}

}  // namespace

std::string ProcessExit::describe() const {
  if (!started) return "could not be started";
  if (exited) return fmt::format("exited with code {}", code);
  if (signal) return fmt::format("was killed by {}", signal_name(signal));
  return "is still running";
}

const std::vector<std::string>& launcher_vars_removed_for_children() { return kRemoved; }

LaunchResult launch_ranks(const LaunchOptions& opts) { return Launcher(opts).run(); }

}  // namespace inc::api
