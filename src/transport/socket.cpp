#include "transport/socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

namespace inc::transport {

namespace {

using std::chrono::milliseconds;

[[noreturn]] void throw_errno(Error::Kind kind, const std::string& what, int err) {
  throw Error(kind, fmt::format("{}: {}", what, std::strerror(err)));
}

struct AddrInfoDeleter {
  void operator()(addrinfo* p) const noexcept { ::freeaddrinfo(p); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

// getaddrinfo wrapper; returns the gai error code (0 = ok).
int resolve(const std::string& host, int port, int flags, AddrInfoPtr& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  hints.ai_flags = flags;
  std::string service = std::to_string(port);
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
  out.reset(rc == 0 ? res : nullptr);
  return rc;
}

std::string sockaddr_to_string(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (sa->sa_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    ::inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf);
    return format_host_port(buf, ntohs(in->sin_port));
  }
  if (sa->sa_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf);
    return format_host_port(buf, ntohs(in6->sin6_port));
  }
  return "?";
}

std::string sockaddr_host(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = "";
  if (sa->sa_family == AF_INET)
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
  else if (sa->sa_family == AF_INET6)
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf);
  return buf;
}

// Waits for `events` on fd until the deadline. Returns revents, or 0 on timeout.
short poll_one(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, ms_until(deadline));
    if (rc > 0) return p.revents;
    if (rc == 0) {
      if (Clock::now() >= deadline) return 0;
      continue;  // ms_until rounds down; poll again for the remainder
    }
    if (errno == EINTR) continue;
    throw_errno(Error::Kind::network, "poll", errno);
  }
}

bool is_retryable_connect_error(int err) {
  switch (err) {
    case ECONNREFUSED:
    case ECONNRESET:
    case ECONNABORTED:
    case ETIMEDOUT:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EAGAIN:
    case EADDRNOTAVAIL:
    case EINTR:
      return true;
    default:
      return false;
  }
}

}  // namespace

int ms_until(Deadline d) noexcept {
  auto now = Clock::now();
  if (d <= now) return 0;
  auto ms = std::chrono::duration_cast<milliseconds>(d - now).count();
  return static_cast<int>(std::min<long long>(ms, INT_MAX / 2));
}

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

EnvLookup map_env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

void Fd::reset(int fd) noexcept {
  if (fd_ >= 0 && fd_ != fd) ::close(fd_);
  fd_ = fd;
}

std::string HostPort::to_string() const { return format_host_port(host, port); }

std::string format_host_port(std::string_view host, int port) {
  if (host.find(':') != std::string_view::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

int parse_port(std::string_view s, std::string_view what, bool allow_port_zero) {
  long long v = -1;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  bool ok = !s.empty() && ec == std::errc() && p == s.data() + s.size() && v >= 0 && v <= 65535 &&
            (allow_port_zero || v > 0);
  if (!ok)
    throw Error(Error::Kind::config,
                fmt::format("{}: invalid port '{}' (expected an integer in {}..65535)", what, s,
                            allow_port_zero ? 0 : 1));
  return static_cast<int>(v);
}

HostPort parse_host_port(std::string_view s, std::string_view what, bool allow_port_zero) {
  auto bad = [&](std::string_view why) {
    return Error(Error::Kind::config,
                 fmt::format("{}='{}': {} (expected host:port, e.g. 127.0.0.1:29500 or "
                             "[::1]:29500)",
                             what, s, why));
  };
  HostPort hp;
  std::string_view port_text;
  if (!s.empty() && s.front() == '[') {
    auto close = s.find(']');
    if (close == std::string_view::npos) throw bad("missing ']'");
    hp.host = std::string(s.substr(1, close - 1));
    if (close + 1 >= s.size() || s[close + 1] != ':') throw bad("missing ':port' after ']'");
    port_text = s.substr(close + 2);
    in6_addr a{};
    if (::inet_pton(AF_INET6, hp.host.c_str(), &a) != 1) throw bad("not an IPv6 address in []");
  } else {
    auto colon = s.rfind(':');
    if (colon == std::string_view::npos) throw bad("missing ':port'");
    if (s.find(':') != colon) throw bad("IPv6 addresses must be written in brackets");
    hp.host = std::string(s.substr(0, colon));
    port_text = s.substr(colon + 1);
  }
  if (hp.host.empty()) throw bad("empty host");
  for (char c : hp.host)
    if (c <= ' ' || c == '/' || c == '[' || c == ']' || static_cast<unsigned char>(c) >= 0x7f)
      throw bad("invalid character in host");
  if (hp.host.size() > 253) throw bad("host name too long");
  try {
    hp.port = parse_port(port_text, what, allow_port_zero);
  } catch (const Error&) {
    throw bad(fmt::format("invalid port '{}'", port_text));
  }
  return hp;
}

Listener listen_tcp(const std::string& host, int port, int backlog) {
  std::string bind_host = (host == "0.0.0.0") ? std::string() : host;
  AddrInfoPtr res;
  std::string where = format_host_port(host.empty() ? "0.0.0.0" : host, port);
  int rc = resolve(bind_host, port, AI_PASSIVE | (bind_host.empty() ? 0 : AI_NUMERICSERV), res);
  if (rc != 0)
    throw Error(Error::Kind::network,
                fmt::format("listen on {}: cannot resolve: {}", where, ::gai_strerror(rc)));
  // With no host, getaddrinfo lists the IPv4 wildcard first on Linux; take the first address
  // family that binds.
  int last_err = 0;
  for (addrinfo* ai = res.get(); ai; ai = ai->ai_next) {
    if (bind_host.empty() && ai->ai_family != AF_INET) continue;
    Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd) {
      last_err = errno;
      continue;
    }
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      last_err = errno;
      continue;
    }
    if (::listen(fd.get(), backlog) != 0) {
      last_err = errno;
      continue;
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len) != 0)
      throw_errno(Error::Kind::network, "getsockname", errno);
    int bound = ss.ss_family == AF_INET ? ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port)
                                        : ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
    return Listener{std::move(fd), bound};
  }
  throw_errno(Error::Kind::network, fmt::format("listen on {}", where),
              last_err ? last_err : EINVAL);
}

Fd connect_tcp(const std::string& host, int port, Deadline deadline) {
  const std::string where = format_host_port(host, port);
  auto start = Clock::now();
  milliseconds backoff{10};
  std::string last_error = "no attempt made";
  for (;;) {
    AddrInfoPtr res;
    int rc = resolve(host, port, AI_NUMERICSERV, res);
    if (rc == EAI_NONAME || rc == EAI_FAIL || rc == EAI_SERVICE || rc == EAI_FAMILY)
      throw Error(Error::Kind::network, fmt::format("connect to {}: cannot resolve host '{}': {}",
                                                    where, host, ::gai_strerror(rc)));
    if (rc != 0) {
      last_error = fmt::format("resolve: {}", ::gai_strerror(rc));
    } else {
      for (addrinfo* ai = res.get(); ai; ai = ai->ai_next) {
        Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                       ai->ai_protocol));
        if (!fd) {
          last_error = std::strerror(errno);
          continue;
        }
        int err = 0;
        if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
          err = errno;
          if (err == EINPROGRESS) {
            short ev = poll_one(fd.get(), POLLOUT, deadline);
            if (ev == 0) {
              last_error = "connection attempt timed out";
              continue;
            }
            socklen_t len = sizeof err;
            ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
          }
        }
        if (err == 0) {
          set_nonblocking(fd.get(), false);
          set_nodelay(fd.get());
          return fd;
        }
        last_error = std::strerror(err);
        if (!is_retryable_connect_error(err))
          throw Error(Error::Kind::network, fmt::format("connect to {}: {}", where, last_error));
      }
    }
    auto now = Clock::now();
    if (now >= deadline) break;
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, milliseconds(250));
  }
  auto waited = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
  throw Error(Error::Kind::timeout,
              fmt::format("connect to {}: no connection after {} ms (last error: {})", where,
                          waited, last_error));
}

Fd accept_tcp(int listen_fd, Deadline deadline, std::string* peer) {
  for (;;) {
    short ev = poll_one(listen_fd, POLLIN, deadline);
    if (ev == 0)
      throw Error(Error::Kind::timeout,
                  fmt::format("accept on {}: no connection before the deadline",
                              local_endpoint(listen_fd)));
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
      throw_errno(Error::Kind::network, fmt::format("accept on {}", local_endpoint(listen_fd)),
                  errno);
    }
    Fd out(fd);
    if (ss.ss_family == AF_INET || ss.ss_family == AF_INET6) set_nodelay(fd);
    if (peer) *peer = sockaddr_to_string(reinterpret_cast<sockaddr*>(&ss));
    return out;
  }
}

void set_nonblocking(int fd, bool on) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0) throw_errno(Error::Kind::network, "fcntl(F_GETFL)", errno);
  int want = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (want != flags && ::fcntl(fd, F_SETFL, want) != 0)
    throw_errno(Error::Kind::network, "fcntl(F_SETFL)", errno);
}

void set_nodelay(int fd, bool on) {
  int v = on ? 1 : 0;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, sizeof v) != 0)
    throw_errno(Error::Kind::network, "setsockopt(TCP_NODELAY)", errno);
}

void set_cloexec(int fd) {
  int flags = ::fcntl(fd, F_GETFD, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC) != 0)
    throw_errno(Error::Kind::network, "fcntl(FD_CLOEXEC)", errno);
}

void set_buffer_sizes(int fd, int send_bytes, int recv_bytes) {
  if (send_bytes < 0 || recv_bytes < 0)
    throw Error(
        Error::Kind::invalid_argument,
        fmt::format("set_buffer_sizes: negative size (send {}, recv {})", send_bytes, recv_bytes));
  if (send_bytes > 0 && ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &send_bytes, sizeof send_bytes))
    throw_errno(Error::Kind::network, fmt::format("setsockopt(SO_SNDBUF, {})", send_bytes), errno);
  if (recv_bytes > 0 && ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &recv_bytes, sizeof recv_bytes))
    throw_errno(Error::Kind::network, fmt::format("setsockopt(SO_RCVBUF, {})", recv_bytes), errno);
}

std::string local_endpoint(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  return sockaddr_to_string(reinterpret_cast<sockaddr*>(&ss));
}

std::string peer_endpoint(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  return sockaddr_to_string(reinterpret_cast<sockaddr*>(&ss));
}

void send_all(int fd, std::span<const std::byte> data, Deadline deadline, std::string_view what) {
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    int err = errno;
    if (n < 0 && (err == EAGAIN || err == EWOULDBLOCK || err == EINTR)) {
      if (err != EINTR && poll_one(fd, POLLOUT, deadline) == 0)
        throw Error(Error::Kind::timeout, fmt::format("{}: send timed out after {} of {} bytes",
                                                      what, done, data.size()));
      continue;
    }
    if (err == EPIPE || err == ECONNRESET)
      throw Error(Error::Kind::peer_failure,
                  fmt::format("{}: connection closed by peer after {} of {} bytes sent", what, done,
                              data.size()));
    throw_errno(Error::Kind::network, fmt::format("{}: send", what), err);
  }
}

void recv_all(int fd, std::span<std::byte> data, Deadline deadline, std::string_view what) {
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::recv(fd, data.data() + done, data.size() - done, MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0)
      throw Error(Error::Kind::peer_failure,
                  fmt::format("{}: connection closed by peer after {} of {} bytes received", what,
                              done, data.size()));
    int err = errno;
    if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR) {
      if (err != EINTR && poll_one(fd, POLLIN, deadline) == 0)
        throw Error(Error::Kind::timeout, fmt::format("{}: receive timed out after {} of {} bytes",
                                                      what, done, data.size()));
      continue;
    }
    if (err == ECONNRESET)
      throw Error(Error::Kind::peer_failure,
                  fmt::format("{}: connection reset by peer after {} of {} bytes received", what,
                              done, data.size()));
    throw_errno(Error::Kind::network, fmt::format("{}: recv", what), err);
  }
}

bool is_local_host(const std::string& host) {
  AddrInfoPtr res;
  if (resolve(host, 1, AI_NUMERICSERV, res) != 0) return false;
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) != 0) ifs = nullptr;
  std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> guard(ifs, [](ifaddrs* p) {
    if (p) ::freeifaddrs(p);
  });
  for (addrinfo* ai = res.get(); ai; ai = ai->ai_next) {
    std::string a = sockaddr_host(ai->ai_addr);
    if (a.rfind("127.", 0) == 0 || a == "::1") return true;
    for (ifaddrs* i = ifs; i; i = i->ifa_next)
      if (i->ifa_addr && i->ifa_addr->sa_family == ai->ai_family && sockaddr_host(i->ifa_addr) == a)
        return true;
  }
  return false;
}

std::string local_address_for_peers(const EnvLookup& env, const std::string& store_host,
                                    int store_port) {
  if (auto h = env("INC_HOST"); h && !h->empty()) return *h;
  if (auto iface = env("INC_IFACE"); iface && !iface->empty()) {
    ifaddrs* ifs = nullptr;
    if (::getifaddrs(&ifs) != 0) throw_errno(Error::Kind::network, "getifaddrs", errno);
    std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> guard(ifs, [](ifaddrs* p) { ::freeifaddrs(p); });
    std::string v4, v6;
    std::vector<std::string> names;
    for (ifaddrs* i = ifs; i; i = i->ifa_next) {
      if (std::find(names.begin(), names.end(), i->ifa_name) == names.end())
        names.emplace_back(i->ifa_name);
      if (!i->ifa_addr || *iface != i->ifa_name) continue;
      if (i->ifa_addr->sa_family == AF_INET && v4.empty()) v4 = sockaddr_host(i->ifa_addr);
      if (i->ifa_addr->sa_family == AF_INET6 && v6.empty()) {
        auto* in6 = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
        if (!IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr)) v6 = sockaddr_host(i->ifa_addr);
      }
    }
    if (!v4.empty()) return v4;
    if (!v6.empty()) return v6;
    std::string list;
    for (auto& n : names) list += (list.empty() ? "" : ", ") + n;
    throw Error(Error::Kind::config,
                fmt::format("INC_IFACE='{}': no such interface with an IPv4 or global IPv6 "
                            "address (interfaces: {})",
                            *iface, list));
  }
  if (!store_host.empty() && store_port > 0) {
    AddrInfoPtr res;
    if (resolve(store_host, store_port, AI_NUMERICSERV, res) == 0) {
      for (addrinfo* ai = res.get(); ai; ai = ai->ai_next) {
        Fd fd(::socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
        if (!fd) continue;
        // A connected UDP socket makes the kernel pick the source address; nothing is sent.
        if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) continue;
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) continue;
        std::string a = sockaddr_host(reinterpret_cast<sockaddr*>(&ss));
        if (!a.empty() && a != "0.0.0.0" && a != "::") return a;
      }
    }
  }
  return "127.0.0.1";
}

}  // namespace inc::transport
