#include "api/launcher_os.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "inc/types.hpp"

namespace inc::api::detail {

using transport::Fd;

void config_error(std::string msg) { throw Error(Error::Kind::config, std::move(msg)); }

namespace {
// Signal forwarding: a process-wide self-pipe, because a signal handler can reach nothing else.

std::atomic<int> g_signal_pipe{-1};
std::atomic<bool> g_forwarding{false};

extern "C" void on_forwarded_signal(int sig) {
  int saved = errno;
  int fd = g_signal_pipe.load();
  if (fd >= 0) {
    unsigned char b = static_cast<unsigned char>(sig);
    [[maybe_unused]] ssize_t n = ::write(fd, &b, 1);
  }
  errno = saved;
}

}  // namespace

SignalForwarding::SignalForwarding(bool on) : on_(on) {
  if (!on_) return;
  if (g_forwarding.exchange(true))
    throw Error(Error::Kind::invalid_argument,
                "launch_ranks: another launch is already forwarding signals");
  int p[2];
  if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {
    g_forwarding = false;
    throw Error(Error::Kind::internal, fmt::format("pipe2: {}", std::strerror(errno)));
  }
  read_.reset(p[0]);
  write_.reset(p[1]);
  g_signal_pipe = p[1];
  struct sigaction sa {};
  sa.sa_handler = on_forwarded_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, &old_int_);
  ::sigaction(SIGTERM, &sa, &old_term_);
}

SignalForwarding::~SignalForwarding() {
  if (!on_) return;
  ::sigaction(SIGINT, &old_int_, nullptr);
  ::sigaction(SIGTERM, &old_term_, nullptr);
  g_signal_pipe = -1;
  g_forwarding = false;
}

void SignalForwarding::inject(int sig) {
  if (!on_) return;
  unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = ::write(write_.get(), &b, 1);
}

std::string signal_name(int sig) {
  const char* d = ::strsignal(sig);
  return fmt::format("signal {} ({})", sig, d ? d : "unknown");
}

void set_var(std::vector<std::string>& env, const std::string& name, const std::string& value) {
  for (auto& e : env)
    if (e.size() > name.size() && e[name.size()] == '=' && e.compare(0, name.size(), name) == 0) {
      e = name + "=" + value;
      return;
    }
  env.push_back(name + "=" + value);
}

Fd open_netns(const std::string& path, const std::string& who) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd)
    config_error(fmt::format("launch: {}: cannot open network namespace '{}': {}", who, path,
                             std::strerror(errno)));
  return fd;
}

void in_netns(const std::string& path, const std::function<void()>& fn) {
  Fd self(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!self)
    throw Error(Error::Kind::internal, fmt::format("cannot open /proc/thread-self/ns/net: {}",
                                                   std::strerror(errno)));
  Fd target = open_netns(path, "store");
  if (::setns(target.get(), CLONE_NEWNET) != 0)
    config_error(fmt::format("launch: cannot enter network namespace '{}': {}", path,
                             std::strerror(errno)));
  auto back = [&] {
    if (::setns(self.get(), CLONE_NEWNET) != 0)
      throw Error(Error::Kind::internal,
                  fmt::format("launch: cannot return to the launcher's network namespace: {}",
                              std::strerror(errno)));
  };
  try {
    fn();
  } catch (...) {
    back();
    throw;
  }
  back();
}

std::string find_program(const std::string& prog, const std::string& path_env) {
  if (prog.empty()) config_error("launch: empty program name");
  if (prog.find('/') != std::string::npos) {
    if (::access(prog.c_str(), X_OK) != 0)
      config_error(fmt::format("launch: cannot execute '{}': {}", prog, std::strerror(errno)));
    return prog;
  }
  std::size_t pos = 0;
  while (pos <= path_env.size()) {
    auto colon = path_env.find(':', pos);
    std::string_view dir = std::string_view(path_env).substr(
        pos, colon == std::string::npos ? std::string::npos : colon - pos);
    std::string cand = fmt::format("{}/{}", dir.empty() ? std::string_view(".") : dir, prog);
    if (::access(cand.c_str(), X_OK) == 0) return cand;
    if (colon == std::string::npos) break;
    pos = colon + 1;
  }
  config_error(fmt::format("launch: program '{}' not found in PATH ({})", prog, path_env));
}

void write_all_fd(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t n = ::write(fd, s.data(), s.size());
    if (n > 0) {
      s.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 1000);
      continue;
    }
    return;  // EPIPE etc.: the reader went away; output is dropped
  }
}

}  // namespace inc::api::detail
