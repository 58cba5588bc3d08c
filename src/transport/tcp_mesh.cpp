#include "transport/tcp_mesh.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "numerics/events.hpp"
#include "numerics/reduce.hpp"

namespace inc::transport {

namespace {

constexpr std::size_t kRxBufferBytes = 256 * 1024;
// A payload remainder at least this large is read straight into its destination.
constexpr std::uint64_t kDirectReadBytes = 64 * 1024;
constexpr std::uint64_t kMaxAbortText = 64 * 1024;
constexpr int kMaxIov = 64;
// epoll data of a watched fd (TcpMesh::watch_fd); peers use their rank, below 2^32.
constexpr std::uint64_t kWatchTag = std::uint64_t{1} << 32;

[[noreturn]] void throw_errno(const std::string& what) {
  throw Error(Error::Kind::network, fmt::format("{}: {}", what, std::strerror(errno)));
}

void set_socket_options(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  int flags = ::fcntl(fd, F_GETFL, 0);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

struct SendItem {
  WireHeader h;
  const std::byte* data = nullptr;
  std::shared_ptr<const std::string> text;  // a refusal's or an abort's own payload (data points into it)
  std::uint64_t token = 0;
  std::uint64_t done = 0;  // bytes of header + payload written
  std::uint64_t total() const { return sizeof(WireHeader) + h.bytes; }
};

}  // namespace

struct TcpMesh::Peer {
  int fd = -1;
  bool alive = false;
  bool want_write = false;
  bool writing = false;  // re-entrancy guard for handle_writable
  std::deque<SendItem> sendq;
  std::vector<std::byte> rx;
  std::size_t rx_begin = 0, rx_end = 0;
  bool in_payload = false;
  WireHeader hdr;
  RecvTarget target;
  std::uint64_t payload_done = 0;
  std::string abort_text;
};

TcpMesh::TcpMesh(int rank, std::vector<int> fds) : rank_(rank) {
  epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epfd_ < 0) throw_errno("epoll_create1");
  peers_.resize(fds.size());
  for (std::size_t i = 0; i < fds.size(); ++i) {
    auto p = std::make_unique<Peer>();
    p->fd = fds[i];
    if (p->fd >= 0 && static_cast<int>(i) != rank) {
      set_socket_options(p->fd);
      p->alive = true;
      p->rx.resize(kRxBufferBytes);
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = i;
      if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, p->fd, &ev) != 0) throw_errno("epoll_ctl");
    }
    peers_[i] = std::move(p);
  }
}

TcpMesh::~TcpMesh() {
  for (auto& p : peers_)
    if (p->fd >= 0) ::close(p->fd);
  if (epfd_ >= 0) ::close(epfd_);
}

bool TcpMesh::peer_alive(int peer) const {
  return peer >= 0 && peer < size() && peers_[peer]->alive;
}

void TcpMesh::discard_incoming(int peer) {
  Peer& p = *peers_[peer];
  if (p.in_payload) p.target = RecvTarget{};
}

void TcpMesh::drop_sends() {
  for (auto& p : peers_) {
    // A message already partly written cannot be withdrawn without breaking the stream's
    // framing; the peer is told of the abort and stops reading this stream anyway.
    p->sendq.clear();
  }
}

TcpMesh::Peer& TcpMesh::live_peer(int peer) {
  if (peer < 0 || peer >= size() || peer == rank_)
    throw Error(Error::Kind::internal, fmt::format("send to invalid peer {}", peer));
  Peer& p = *peers_[peer];
  if (!p.alive)
    throw Error(Error::Kind::peer_failure,
                fmt::format("rank {} is not reachable (its connection is closed)", peer));
  return p;
}

void TcpMesh::send(int peer, const WireHeader& h, const void* data, std::uint64_t token) {
  Peer& p = live_peer(peer);
  SendItem item;
  item.h = h;
  item.data = static_cast<const std::byte*>(data);
  item.token = token;
  p.sendq.push_back(item);
  if (!p.writing) handle_writable(peer);
}

void TcpMesh::send_ready(int peer, WireHeader h) {
  Peer& p = live_peer(peer);
  SendItem item;
  item.h = h;
  item.h.kind = static_cast<std::uint16_t>(MsgKind::ready);
  item.h.bytes = 0;
  // Ahead of every queued message that has not started to leave: the peer's send waits for
  // this notice, the queued payloads do not.
  auto at = p.sendq.begin();
  while (at != p.sendq.end() && at->done > 0) ++at;
  p.sendq.insert(at, item);
  if (!p.writing) handle_writable(peer);
}

void TcpMesh::send_text(int peer, WireHeader h, MsgKind kind, const std::string& text) {
  Peer& p = live_peer(peer);
  SendItem item;
  item.text = std::make_shared<const std::string>(text.substr(0, kMaxAbortText));
  item.h = h;
  item.h.kind = static_cast<std::uint16_t>(kind);
  item.h.bytes = item.text->size();
  item.data = reinterpret_cast<const std::byte*>(item.text->data());
  p.sendq.push_back(std::move(item));
  if (!p.writing) handle_writable(peer);
}

void TcpMesh::send_refusal(int peer, WireHeader h, const std::string& reason) {
  send_text(peer, h, MsgKind::refuse, reason);
}

void TcpMesh::send_abort(int peer, const std::string& reason) { send_text(peer, WireHeader{}, MsgKind::abort, reason); }

void TcpMesh::update_interest(int peer) {
  Peer& p = *peers_[peer];
  bool want = p.alive && !p.sendq.empty();
  if (want == p.want_write) return;
  p.want_write = want;
  epoll_event ev{};
  ev.events = EPOLLIN | (want ? EPOLLOUT : 0u);
  ev.data.u64 = static_cast<std::uint64_t>(peer);
  ::epoll_ctl(epfd_, EPOLL_CTL_MOD, p.fd, &ev);
}

void TcpMesh::handle_writable(int peer) {
  Peer& p = *peers_[peer];
  p.writing = true;
  std::vector<std::uint64_t> completed;
  while (p.alive && !p.sendq.empty()) {
    iovec iov[kMaxIov];
    int n = 0;
    for (auto it = p.sendq.begin(); it != p.sendq.end() && n + 2 <= kMaxIov; ++it) {
      std::uint64_t off = it->done;
      if (off < sizeof(WireHeader)) {
        iov[n++] = {reinterpret_cast<std::byte*>(&it->h) + off, sizeof(WireHeader) - off};
        off = sizeof(WireHeader);
      }
      std::uint64_t poff = off - sizeof(WireHeader);
      if (poff < it->h.bytes)
        iov[n++] = {const_cast<std::byte*>(it->data) + poff, it->h.bytes - poff};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<std::size_t>(n);
    // MSG_NOSIGNAL: a peer that went away is an error to report, not a SIGPIPE to die of.
    ssize_t w = ::sendmsg(p.fd, &msg, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      fail_peer(peer, fmt::format("write to rank {} failed: {}", peer, std::strerror(errno)));
      break;
    }
    stats_.bytes_sent += static_cast<std::uint64_t>(w);
    auto left = static_cast<std::uint64_t>(w);
    while (left > 0 && !p.sendq.empty()) {
      SendItem& it = p.sendq.front();
      std::uint64_t take = std::min(left, it.total() - it.done);
      it.done += take;
      left -= take;
      if (it.done == it.total()) {
        stats_.payload_sent += it.h.bytes;
        ++stats_.messages_sent;
        if (it.h.kind == static_cast<std::uint16_t>(MsgKind::data)) completed.push_back(it.token);
        p.sendq.pop_front();
      }
    }
  }
  p.writing = false;
  update_interest(peer);
  for (auto t : completed)
    if (sink_) sink_->on_send_done(t);
}

// Deliver buffered bytes to the current message(s). Returns false when more bytes are needed.
bool TcpMesh::consume_rx(int peer, Peer& p) {
  for (;;) {
    std::size_t avail = p.rx_end - p.rx_begin;
    if (!p.in_payload) {
      if (avail < sizeof(WireHeader)) return false;
      std::memcpy(&p.hdr, p.rx.data() + p.rx_begin, sizeof(WireHeader));
      p.rx_begin += sizeof(WireHeader);
      ++stats_.messages_received;
      if (p.hdr.magic != WireHeader::kMagic || p.hdr.version != WireHeader::kVersion) {
        fail_peer(peer, fmt::format("rank {} sent a malformed message header (magic {:#x}, "
                                    "version {}); is it the same INC build?",
                                    peer, p.hdr.magic, p.hdr.version));
        return false;
      }
      if (p.hdr.kind == static_cast<std::uint16_t>(MsgKind::ready)) {
        if (p.hdr.bytes != 0) {
          fail_peer(peer, fmt::format("rank {} sent a ready notice with a {}-byte payload", peer, p.hdr.bytes));
          return false;
        }
        try {
          if (sink_) sink_->on_ready(peer, p.hdr);
        } catch (const Error& e) {
          if (sink_) sink_->on_error(peer, e);
        }
        continue;
      }
      p.in_payload = true;
      p.payload_done = 0;
      p.target = RecvTarget{};
      p.abort_text.clear();
      if (p.hdr.kind == static_cast<std::uint16_t>(MsgKind::abort) ||
          p.hdr.kind == static_cast<std::uint16_t>(MsgKind::refuse)) {
        if (p.hdr.bytes > kMaxAbortText) {
          fail_peer(peer, fmt::format("rank {} sent an oversized {} message", peer,
                                      p.hdr.kind == static_cast<std::uint16_t>(MsgKind::abort) ? "abort" : "refusal"));
          return false;
        }
      } else if (p.hdr.kind == static_cast<std::uint16_t>(MsgKind::data)) {
        try {
          if (sink_) p.target = sink_->on_header(peer, p.hdr);
        } catch (const Error& e) {
          p.target = RecvTarget{};
          if (sink_) sink_->on_error(peer, e);
        }
      } else {
        fail_peer(peer, fmt::format("rank {} sent unknown message kind {}", peer, p.hdr.kind));
        return false;
      }
    }
    // Payload bytes from the buffer.
    std::uint64_t remaining = p.hdr.bytes - p.payload_done;
    avail = p.rx_end - p.rx_begin;
    std::uint64_t n = std::min<std::uint64_t>(remaining, avail);
    const std::byte* src = p.rx.data() + p.rx_begin;
    const bool is_refusal = p.hdr.kind == static_cast<std::uint16_t>(MsgKind::refuse);
    const bool is_abort = is_refusal || p.hdr.kind == static_cast<std::uint16_t>(MsgKind::abort);  // text payloads
    if (is_abort) {
      p.abort_text.append(reinterpret_cast<const char*>(src), n);
    } else if (p.target.mode == RecvTarget::Mode::copy) {
      if (n) std::memcpy(p.target.dst + p.payload_done, src, n);  // dst may be null at 0 bytes
    } else if (p.target.mode == RecvTarget::Mode::reduce && n) {
      std::size_t esz = size_of(p.target.dtype);
      // The kernels read typed elements, so the operand must be aligned to one; after a message
      // of odd length in the same read it is not. Move the unread bytes to the front of the
      // buffer (allocated by operator new: aligned for any element); payload_done stays a
      // multiple of esz, so the rest of this message is then aligned too.
      if (reinterpret_cast<std::uintptr_t>(src) % unit_alignment(p.target.dtype) != 0) {  // MX blocks: 1
        std::memmove(p.rx.data(), src, avail);
        p.rx_begin = 0;
        p.rx_end = avail;
        src = p.rx.data();
      }
      n -= n % esz;  // whole elements only; the rest waits for more bytes
      const std::uint64_t ev =
          numerics::reduce_counted(p.target.dtype, p.target.op, p.target.dst + p.payload_done,
                                   p.target.operand + p.payload_done, src, n / esz);
      if (p.target.events) *p.target.events += ev;
    } else if (p.target.mode == RecvTarget::Mode::consumer && n) {
      // As for reduce: the consumer reads typed data, so move unread bytes to an aligned start.
      if (reinterpret_cast<std::uintptr_t>(src) % p.target.consumer->alignment() != 0) {
        std::memmove(p.rx.data(), src, avail);
        p.rx_begin = 0;
        p.rx_end = avail;
        src = p.rx.data();
      }
      try {
        n = p.target.consumer->consume(p.payload_done, src, n);
      } catch (const Error& e) {
        p.target = RecvTarget{};  // discard the rest of this payload
        if (sink_) sink_->on_error(peer, e);
      }
      if (n == 0 && p.payload_done + avail < p.hdr.bytes && p.rx_begin == 0 && p.rx_end == p.rx.size())
        p.rx.resize(p.rx.size() * 2);  // a consumer unit larger than the buffer: grow it
    }
    p.rx_begin += n;
    p.payload_done += n;
    if (p.payload_done == p.hdr.bytes) {
      p.in_payload = false;
      stats_.payload_received += p.hdr.bytes;
      if (is_refusal) {
        std::string text = std::move(p.abort_text);
        try {
          if (sink_) sink_->on_refused(peer, p.hdr, text);
        } catch (const Error& e) {
          if (sink_) sink_->on_error(peer, e);
        }
      } else if (is_abort) {
        std::string text = std::move(p.abort_text);
        if (sink_) sink_->on_abort(peer, text);
      } else if (sink_) {
        sink_->on_message(peer, p.hdr);
      }
      continue;
    }
    return false;
  }
}

void TcpMesh::handle_readable(int peer) {
  Peer& p = *peers_[peer];
  std::uint64_t budget = read_budget_;  // per call, so one busy peer cannot starve others
  while (p.alive && budget > 0) {
    consume_rx(peer, p);
    if (!p.alive) return;
    if (p.rx_begin == p.rx_end) p.rx_begin = p.rx_end = 0;
    // Large remainder of a copy target: read straight into place.
    if (p.in_payload && p.target.mode == RecvTarget::Mode::copy && p.rx_begin == p.rx_end &&
        p.hdr.bytes - p.payload_done >= kDirectReadBytes) {
      ssize_t r = ::read(p.fd, p.target.dst + p.payload_done, p.hdr.bytes - p.payload_done);
      if (r > 0) {
        stats_.bytes_received += static_cast<std::uint64_t>(r);
        p.payload_done += static_cast<std::uint64_t>(r);
        budget -= std::min<std::uint64_t>(budget, static_cast<std::uint64_t>(r));
        if (p.payload_done == p.hdr.bytes) consume_rx(peer, p);  // completes the message
        continue;
      }
      if (read_again(peer, r)) continue;
      return;
    }
    if (p.rx_begin > 0 && p.rx.size() - p.rx_end < sizeof(WireHeader) * 2) {
      std::memmove(p.rx.data(), p.rx.data() + p.rx_begin, p.rx_end - p.rx_begin);
      p.rx_end -= p.rx_begin;
      p.rx_begin = 0;
    }
    ssize_t r = ::read(p.fd, p.rx.data() + p.rx_end, p.rx.size() - p.rx_end);
    if (r > 0) {
      stats_.bytes_received += static_cast<std::uint64_t>(r);
      p.rx_end += static_cast<std::size_t>(r);
      budget -= std::min<std::uint64_t>(budget, static_cast<std::uint64_t>(r));
      continue;
    }
    if (read_again(peer, r)) continue;
    return;
  }
  // Out of budget: deliver what was read. The socket may now be empty, and epoll would not
  // report it again for bytes that already sit in our buffer.
  if (p.alive) consume_rx(peer, p);
}

bool TcpMesh::read_again(int peer, ssize_t r) {
  if (r == 0) {
    fail_peer(peer, fmt::format("rank {} closed its connection (did the process exit?)", peer));
    return false;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
  if (errno == EINTR) return true;
  fail_peer(peer, fmt::format("read from rank {} failed: {}", peer, std::strerror(errno)));
  return false;
}

void TcpMesh::fail_peer(int peer, const std::string& why) {
  Peer& p = *peers_[peer];
  if (!p.alive) return;
  p.alive = false;
  ::epoll_ctl(epfd_, EPOLL_CTL_DEL, p.fd, nullptr);
  p.sendq.clear();
  if (sink_) sink_->on_peer_failed(peer, why);
}

void TcpMesh::poll(int timeout_ms) {
  epoll_event evs[64];
  int n = ::epoll_wait(epfd_, evs, 64, timeout_ms);
  if (n < 0) {
    if (errno == EINTR) return;
    throw_errno("epoll_wait");
  }
  for (int i = 0; i < n; ++i) {
    if (evs[i].data.u64 & kWatchTag) {
      const auto w = static_cast<std::size_t>(evs[i].data.u64 & ~kWatchTag);
      // Copy: the callback may unwatch (and so reset) its own entry.
      if (w < watches_.size() && watches_[w].fd >= 0) {
        auto cb = watches_[w].on_readable;
        cb();
      }
      continue;
    }
    int peer = static_cast<int>(evs[i].data.u64);
    if (!peers_[peer]->alive) continue;
    if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) handle_readable(peer);
    if (peers_[peer]->alive && (evs[i].events & EPOLLOUT)) handle_writable(peer);
  }
}

void TcpMesh::watch_fd(int fd, std::function<void()> on_readable) {
  std::size_t w = 0;
  while (w < watches_.size() && watches_[w].fd >= 0) ++w;
  if (w == watches_.size()) watches_.emplace_back();
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWatchTag | w;
  if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0) throw_errno("epoll_ctl(watch)");
  watches_[w] = Watch{fd, std::move(on_readable)};
}

void TcpMesh::unwatch_fd(int fd) {
  for (auto& w : watches_)
    if (w.fd == fd) {
      ::epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);
      w = Watch{};
    }
}

void TcpMesh::broadcast_abort(const std::string& reason) {
  std::string text = reason.substr(0, kMaxAbortText);
  WireHeader h;
  h.kind = static_cast<std::uint16_t>(MsgKind::abort);
  h.bytes = text.size();
  for (int peer = 0; peer < size(); ++peer) {
    if (peer == rank_ || !peers_[peer]->alive) continue;
    peers_[peer]->sendq.push_back(SendItem{h, reinterpret_cast<const std::byte*>(text.data()), 0, 0});
    handle_writable(peer);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  auto pending = [&] {
    for (int peer = 0; peer < size(); ++peer)
      if (peer != rank_ && peers_[peer]->alive && !peers_[peer]->sendq.empty()) return true;
    return false;
  };
  while (pending() && std::chrono::steady_clock::now() < deadline) poll(10);
  // Drop whatever did not leave: it points into `text`.
  for (auto& p : peers_) p->sendq.clear();
}

// ---------------------------------------------------------------------------------------------
// Mesh establishment.

namespace {

struct Hello {
  std::uint64_t magic = 0x4f4c4c4548434e49ull;  // "INCHELLO"
  std::uint64_t job_tag = 0;
  std::int32_t rank = -1;
  std::int32_t world = 0;
};

bool split_host_port(const std::string& addr, std::string& host, std::string& port) {
  auto colon = addr.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == addr.size()) return false;
  host = addr.substr(0, colon);
  port = addr.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return true;
}

int wait_fd(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - std::chrono::steady_clock::now())
                  .count();
  if (left <= 0) return 0;
  pollfd pfd{fd, events, 0};
  int r = ::poll(&pfd, 1, static_cast<int>(left));
  return r;
}

void io_exact(int fd, void* buf, std::size_t n, bool write,
              std::chrono::steady_clock::time_point deadline, const std::string& what) {
  auto* b = static_cast<char*>(buf);
  std::size_t done = 0;
  while (done < n) {
    ssize_t r = write ? ::send(fd, b + done, n - done, MSG_NOSIGNAL) : ::recv(fd, b + done, n - done, 0);
    if (r > 0) {
      done += static_cast<std::size_t>(r);
      continue;
    }
    if (r == 0) throw Error(Error::Kind::network, what + ": connection closed");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) throw_errno(what);
    if (wait_fd(fd, write ? POLLOUT : POLLIN, deadline) <= 0)
      throw Error(Error::Kind::timeout, what + ": timed out");
  }
}

}  // namespace

std::vector<int> connect_mesh(int rank, int world, const std::string& listen_host,
                              MeshAddressBook& book, std::uint64_t job_tag, int timeout_ms) {
  using clock = std::chrono::steady_clock;
  auto deadline = clock::now() + std::chrono::milliseconds(timeout_ms);
  std::vector<int> fds(static_cast<std::size_t>(world), -1);
  if (world == 1) return fds;

  // Listen on an ephemeral port.
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(listen_host.c_str(), "0", &hints, &res); rc != 0)
    throw Error(Error::Kind::config,
                fmt::format("cannot resolve listen address '{}': {}", listen_host, gai_strerror(rc)));
  int lfd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (lfd < 0) {
    ::freeaddrinfo(res);
    throw_errno("socket");
  }
  int one = 1;
  ::setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(lfd, res->ai_addr, res->ai_addrlen) != 0 || ::listen(lfd, 1024) != 0) {
    ::freeaddrinfo(res);
    ::close(lfd);
    throw_errno(fmt::format("listen on {}", listen_host));
  }
  ::freeaddrinfo(res);
  sockaddr_storage ss{};
  socklen_t sl = sizeof ss;
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&ss), &sl);
  int port = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  std::string host = listen_host.find(':') != std::string::npos ? "[" + listen_host + "]" : listen_host;
  book.publish(rank, fmt::format("{}:{}", host, port));

  auto cleanup = [&] {
    ::close(lfd);
    for (int& fd : fds)
      if (fd >= 0) ::close(fd), fd = -1;
  };
  try {
    // Connect to every lower rank.
    for (int peer = 0; peer < rank; ++peer) {
      std::string addr = book.lookup(peer), h, p;
      if (!split_host_port(addr, h, p))
        throw Error(Error::Kind::config, fmt::format("rank {} published a bad address '{}'", peer, addr));
      int fd = -1;
      for (;;) {
        addrinfo ch{};
        ch.ai_family = AF_UNSPEC;
        ch.ai_socktype = SOCK_STREAM;
        addrinfo* r = nullptr;
        if (int rc = ::getaddrinfo(h.c_str(), p.c_str(), &ch, &r); rc != 0)
          throw Error(Error::Kind::network,
                      fmt::format("cannot resolve rank {} address '{}': {}", peer, addr, gai_strerror(rc)));
        fd = ::socket(r->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        int rc = ::connect(fd, r->ai_addr, r->ai_addrlen);
        ::freeaddrinfo(r);
        if (rc != 0 && errno == EINPROGRESS && wait_fd(fd, POLLOUT, deadline) > 0) {
          int err = 0;
          socklen_t el = sizeof err;
          ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
          rc = err == 0 ? 0 : -1;
          errno = err;
        }
        if (rc == 0) break;
        ::close(fd);
        fd = -1;
        if (clock::now() >= deadline)
          throw Error(Error::Kind::timeout,
                      fmt::format("rank {}: could not connect to rank {} at {} before the deadline",
                                  rank, peer, addr));
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      fds[peer] = fd;
      Hello hello;
      hello.job_tag = job_tag;
      hello.rank = rank;
      hello.world = world;
      io_exact(fd, &hello, sizeof hello, true, deadline, fmt::format("hello to rank {}", peer));
    }
    // Accept every higher rank.
    int expected = world - 1 - rank;
    while (expected > 0) {
      if (wait_fd(lfd, POLLIN, deadline) <= 0) {
        std::string missing;
        for (int peer = rank + 1; peer < world; ++peer)
          if (fds[peer] < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(peer);
        throw Error(Error::Kind::timeout,
                    fmt::format("rank {}: ranks {} did not connect before the deadline", rank, missing));
      }
      int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) continue;
      Hello hello;
      try {
        io_exact(fd, &hello, sizeof hello, false, deadline, "hello");
      } catch (const Error&) {
        ::close(fd);
        continue;
      }
      if (hello.magic != Hello{}.magic || hello.job_tag != job_tag || hello.world != world ||
          hello.rank <= rank || hello.rank >= world || fds[hello.rank] >= 0) {
        ::close(fd);  // foreign or duplicate connection: ignore it
        continue;
      }
      fds[hello.rank] = fd;
      --expected;
    }
  } catch (...) {
    cleanup();
    throw;
  }
  ::close(lfd);
  return fds;
}

}  // namespace inc::transport
