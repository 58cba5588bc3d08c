// Small RAII and blocking-with-deadline socket utilities shared by the rendezvous store, the
// bootstrap and the TCP mesh. Everything that can wait takes a Deadline; every failure is an
// inc::Error naming the address and what was being done.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "inc/types.hpp"

namespace inc::transport {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

inline Deadline deadline_after(std::chrono::milliseconds d) { return Clock::now() + d; }
// Milliseconds left until `d` (0 if it has passed), clamped to what poll() accepts.
int ms_until(Deadline d) noexcept;

// Environment lookup, injectable so tests can feed fake environments. Returns nullopt for an
// unset variable; an empty value is reported as set-but-empty (callers decide).
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
EnvLookup process_env();                                     // ::getenv
EnvLookup map_env(std::map<std::string, std::string> vars);  // for tests

// Owning file descriptor: closes on destruction, move-only.
class Fd {
 public:
  Fd() noexcept = default;
  explicit Fd(int fd) noexcept : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  explicit operator bool() const noexcept { return valid(); }
  int release() noexcept {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset(int fd = -1) noexcept;

 private:
  int fd_ = -1;
};

struct HostPort {
  std::string host;  // name, IPv4 literal or IPv6 literal (without brackets)
  int port = 0;
  // "host:port", or "[v6]:port" for IPv6 literals.
  std::string to_string() const;
};

// Parses "host:port", "1.2.3.4:port" or "[::1]:port". Port must be 1..65535 (0 too when
// allow_port_zero). `what` names the source in errors (e.g. "INC_STORE"); errors are
// Error::Kind::config.
HostPort parse_host_port(std::string_view s, std::string_view what, bool allow_port_zero = false);
// Parses a decimal port 1..65535 (or 0 when allowed); Error::Kind::config naming `what`.
int parse_port(std::string_view s, std::string_view what, bool allow_port_zero = false);
// "host:port" with brackets around IPv6 literals.
std::string format_host_port(std::string_view host, int port);

struct Listener {
  Fd fd;
  int port = 0;  // the bound port (the ephemeral one when asked for port 0)
};
// Binds and listens (SO_REUSEADDR, close-on-exec, blocking). host "" or "0.0.0.0" = all IPv4
// interfaces, "::" = all interfaces. Throws Error::Kind::network.
Listener listen_tcp(const std::string& host, int port = 0, int backlog = 128);

// Connects, retrying refused/unreachable attempts with backoff until `deadline` (the peer may
// not be listening yet). Returns a blocking socket with TCP_NODELAY. Throws
// Error::Kind::timeout (naming the address and the last error) or Error::Kind::network for
// unresolvable names.
Fd connect_tcp(const std::string& host, int port, Deadline deadline);

// Accepts one connection on a listening socket, waiting until `deadline`. `peer` receives the
// remote "host:port". Throws Error::Kind::timeout / network.
Fd accept_tcp(int listen_fd, Deadline deadline, std::string* peer = nullptr);

void set_nonblocking(int fd, bool on = true);
void set_nodelay(int fd, bool on = true);
void set_cloexec(int fd);
// Requests kernel buffer sizes in bytes (0 leaves one unchanged). The kernel may clamp them.
void set_buffer_sizes(int fd, int send_bytes, int recv_bytes);
// Local / remote "host:port" of a connected or bound socket ("?" if unknown).
std::string local_endpoint(int fd);
std::string peer_endpoint(int fd);

// Blocking-style transfers with a deadline, built on poll() so they work on blocking and
// non-blocking sockets alike (never SIGPIPE). `what` names the transfer in errors, e.g.
// "store get('x') reply from 10.0.0.1:29500".
//  - timeout: Error::Kind::timeout with bytes done / total;
//  - peer closed (recv EOF, EPIPE, ECONNRESET): Error::Kind::peer_failure;
//  - other errors: Error::Kind::network.
void send_all(int fd, std::span<const std::byte> data, Deadline deadline, std::string_view what);
void recv_all(int fd, std::span<std::byte> data, Deadline deadline, std::string_view what);
inline void send_all(int fd, std::string_view data, Deadline deadline, std::string_view what) {
  send_all(fd, std::as_bytes(std::span(data.data(), data.size())), deadline, what);
}

// Resolves `host` and returns true if it names this machine (loopback, or an address of one of
// its interfaces). Unresolvable names return false.
bool is_local_host(const std::string& host);

// The address other ranks should use to reach this process:
//   1. INC_HOST if set (used verbatim, e.g. a name or an address on the fast network);
//   2. INC_IFACE if set: the first IPv4 (else IPv6) address of that interface, or a config
//      error listing the interfaces that exist;
//   3. the local address the kernel would use to reach the store (`store_host`:`store_port`),
//      found with a connected UDP socket (no packet is sent);
//   4. 127.0.0.1.
std::string local_address_for_peers(const EnvLookup& env, const std::string& store_host = {},
                                    int store_port = 0);

}  // namespace inc::transport
