// Operating-system helpers of the local launcher (src/api/launcher.cpp): signal forwarding
// through a self-pipe, program lookup in PATH, environment layering, network namespaces.
// Internal to inc_api.
#pragma once

#include <signal.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "transport/socket.hpp"

namespace inc::api::detail {

[[noreturn]] void config_error(std::string msg);

// "signal 11 (Segmentation fault)".
std::string signal_name(int sig);

// Installs SIGINT/SIGTERM handlers that write the signal number to a pipe (fd()) for the
// lifetime of the object and restores the previous handlers afterwards. Only one may be active
// in a process; `on == false` makes it inert (fd() is -1).
class SignalForwarding {
 public:
  explicit SignalForwarding(bool on);
  ~SignalForwarding();
  SignalForwarding(const SignalForwarding&) = delete;
  SignalForwarding& operator=(const SignalForwarding&) = delete;
  int fd() const { return read_.get(); }
  // Queues `sig` as if it had been received.
  void inject(int sig);

 private:
  bool on_;
  transport::Fd read_, write_;
  struct sigaction old_int_ {
  }, old_term_{};
};

// Full path of `prog` (as is if it contains a '/'); config error if not found or executable.
std::string find_program(const std::string& prog, const std::string& path_env);

// Writes everything (retrying on EINTR/EAGAIN); gives up silently if the reader went away.
void write_all_fd(int fd, std::string_view s);

// Sets NAME=value in an environment block, replacing an earlier NAME (later layers win).
void set_var(std::vector<std::string>& env, const std::string& name, const std::string& value);

// A network namespace file (e.g. /run/netns/NAME) opened for setns(); a config error names
// `who` and the file.
transport::Fd open_netns(const std::string& path, const std::string& who);

// Runs `fn` with the calling thread in the network namespace `path` (sockets it creates stay
// there), then returns the thread to its own namespace, also when `fn` throws.
void in_netns(const std::string& path, const std::function<void()>& fn);

}  // namespace inc::api::detail
