#include "src/switch/udp.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <stdexcept>

namespace inc::sw {

Nanos monotonic_now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return Nanos(ts.tv_sec) * kSecond + ts.tv_nsec;
}

std::optional<Endpoint> parse_endpoint(std::string_view s) {
  std::string_view host = "0.0.0.0", port = s;
  if (auto c = s.rfind(':'); c != std::string_view::npos) {
    host = s.substr(0, c);
    port = s.substr(c + 1);
    if (host.empty()) host = "0.0.0.0";
  }
  if (host == "localhost") host = "127.0.0.1";
  if (port.empty() || port.size() > 5) return std::nullopt;
  std::uint32_t p = 0;
  for (char ch : port) {
    if (ch < '0' || ch > '9') return std::nullopt;
    p = p * 10 + std::uint32_t(ch - '0');
  }
  if (p > 65535) return std::nullopt;
  in_addr a;
  std::string h(host);
  if (inet_pton(AF_INET, h.c_str(), &a) != 1) return std::nullopt;
  return Endpoint::ipv4(ntohl(a.s_addr), std::uint16_t(p));
}

namespace {
sockaddr_in to_sockaddr(Endpoint e) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(e.ipv4_addr());
  sa.sin_port = htons(e.port());
  return sa;
}
Endpoint from_sockaddr(const sockaddr_in& sa) {
  return Endpoint::ipv4(ntohl(sa.sin_addr.s_addr), ntohs(sa.sin_port));
}
[[noreturn]] void sys_fail(const std::string& what) {
  throw std::runtime_error(what + ": " + std::strerror(errno));
}
}  // namespace

// ---- fault injector ---------------------------------------------------------------------------

void FaultInjector::submit(Endpoint to, std::span<const std::byte> bytes, Nanos now) {
  FaultTally t;
  datagram_fates(f_, [this] { return uniform(); }, now, t, [&](Nanos at) {
    q_.push(Held{at, seq_++, to, std::vector<std::byte>(bytes.begin(), bytes.end())});
  });
  lost += t.lost;
  duplicated += t.duplicated;
  reordered += t.reordered;
}

void FaultInjector::due(Nanos now, Outbox& out) {
  while (!q_.empty() && q_.top().at <= now) {
    const Held& h = q_.top();
    std::byte* p = out.reserve(h.bytes.size());
    std::memcpy(p, h.bytes.data(), h.bytes.size());
    out.commit(h.to, h.bytes.size());
    q_.pop();
  }
}

Nanos FaultInjector::next_due() const {
  return q_.empty() ? std::numeric_limits<Nanos>::max() : q_.top().at;
}

// ---- UdpPort ----------------------------------------------------------------------------------

namespace {
// Receive buffers hold a whole GRO aggregate (at most one IPv4 datagram's worth, < 64 KiB).
constexpr std::size_t kRecvBuf = 65536;
// Kernel limits of one UDP GSO send: 64 segments (UDP_MAX_SEGMENTS on older kernels) and one
// IPv4 datagram of payload.
constexpr std::size_t kGsoMaxSegments = 64;
constexpr std::size_t kGsoMaxBytes = 65507;
}  // namespace

UdpPort::UdpPort(Endpoint bind, std::size_t batch, UdpOffload offload)
    : batch_(std::max<std::size_t>(1, batch)) {
  fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) sys_fail("socket");
  // Deep buffers: a window of 16 KiB datagrams from every member arrives in one burst. The
  // *FORCE variants pass net.core.rmem_max when running as root; otherwise the capped request.
  int buf = 8 << 20;
  if (::setsockopt(fd_, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf) != 0)
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  if (::setsockopt(fd_, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf) != 0)
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  sockaddr_in sa = to_sockaddr(bind);
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    int e = errno;
    ::close(fd_);
    errno = e;
    sys_fail("bind " + bind.str());
  }
  socklen_t len = sizeof sa;
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len);
  local_ = from_sockaddr(sa);
  // Multicast sends (a switch's results to a job's group) leave by the interface of the bound
  // address, without a multicast route; TTL 1 (the default): groups stay on the link.
  if (bind.ipv4_addr() != 0) {
    ip_mreqn m{};
    m.imr_address.s_addr = htonl(bind.ipv4_addr());
    ::setsockopt(fd_, IPPROTO_IP, IP_MULTICAST_IF, &m, sizeof m);
  }
  // GSO needs no option (a cmsg per send); GRO is a socket option the kernel may not know.
  gso_ = offload.gso;
  int one = 1;
  gro_ = offload.gro && ::setsockopt(fd_, IPPROTO_UDP, UDP_GRO, &one, sizeof one) == 0;
  ep_ = ::epoll_create1(EPOLL_CLOEXEC);
  ev_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (ep_ < 0 || ev_ < 0) sys_fail("epoll/eventfd");
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.fd = fd_;
  ::epoll_ctl(ep_, EPOLL_CTL_ADD, fd_, &e);
  e.data.fd = ev_;
  ::epoll_ctl(ep_, EPOLL_CTL_ADD, ev_, &e);
  bufs_.resize(batch_ * kRecvBuf);
  msgs_.resize(batch_);
  iov_.resize(batch_);
  addrs_.resize(batch_);
  rx_cmsg_.resize(batch_);
  segs_.reserve(batch_ * 8);
  for (std::size_t i = 0; i < batch_; ++i) {
    iov_[i].iov_base = bufs_.data() + i * kRecvBuf;
    iov_[i].iov_len = kRecvBuf;
    std::memset(&msgs_[i], 0, sizeof(msgs_[i]));
    msgs_[i].msg_hdr.msg_iov = &iov_[i];
    msgs_[i].msg_hdr.msg_iovlen = 1;
    msgs_[i].msg_hdr.msg_name = &addrs_[i];
  }
}

UdpPort::~UdpPort() {
  if (gfd_ >= 0) ::close(gfd_);
  if (fd_ >= 0) ::close(fd_);
  if (ep_ >= 0) ::close(ep_);
  if (ev_ >= 0) ::close(ev_);
}

void UdpPort::join_group(Endpoint group, Endpoint toward) {
  if (group_ == group) return;
  if (gfd_ >= 0) throw std::runtime_error("this socket already receives group " + group_.str());
  if (!group.is_ipv4() || !proto::is_multicast_group(group.ipv4_addr()))
    throw std::runtime_error(group.str() + " is not an IPv4 multicast group (224.0.0.0/4)");
  // The interface: the one whose address the kernel picks as source toward the switch.
  in_addr iface{};
  {
    const int probe = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (probe < 0) sys_fail("socket");
    sockaddr_in sa = to_sockaddr(toward);
    socklen_t len = sizeof sa;
    const bool ok = ::connect(probe, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 &&
                    ::getsockname(probe, reinterpret_cast<sockaddr*>(&sa), &len) == 0;
    const int e = errno;
    ::close(probe);
    errno = e;
    if (!ok) sys_fail("no route to the switch " + toward.str() + " to join " + group.str() + " on");
    iface = sa.sin_addr;
  }
  const int g = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (g < 0) sys_fail("socket");
  auto fail = [&](const std::string& what) {
    const int e = errno;
    ::close(g);
    errno = e;
    sys_fail(what);
  };
  int one = 1, buf = 8 << 20;
  ::setsockopt(g, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::setsockopt(g, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf) != 0)
    ::setsockopt(g, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  // Bound to the group's address: only datagrams sent to the group reach this socket.
  sockaddr_in sa = to_sockaddr(group);
  if (::bind(g, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) fail("bind " + group.str());
  ip_mreqn m{};
  m.imr_multiaddr.s_addr = htonl(group.ipv4_addr());
  m.imr_address = iface;
  if (::setsockopt(g, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof m) != 0) {
    char a[INET_ADDRSTRLEN] = "?";
    ::inet_ntop(AF_INET, &iface, a, sizeof a);
    fail("IP_ADD_MEMBERSHIP " + group.str() + " on the interface of " + a);
  }
  if (gro_ && ::setsockopt(g, IPPROTO_UDP, UDP_GRO, &one, sizeof one) != 0) fail("UDP_GRO");
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.fd = g;
  if (::epoll_ctl(ep_, EPOLL_CTL_ADD, g, &e) != 0) fail("epoll_ctl");
  gfd_ = g;
  group_ = group;
}

void UdpPort::wait(Nanos timeout) {
  if (timeout < 0) timeout = 0;
  timespec ts{time_t(timeout / kSecond), long(timeout % kSecond)};
  epoll_event evs[3];
  int n = ::epoll_pwait2(ep_, evs, 3, &ts, nullptr);
  if (n < 0 && errno == ENOSYS)  // kernels before 5.11: millisecond resolution
    n = ::epoll_wait(ep_, evs, 3, int((timeout + kMillisecond - 1) / kMillisecond));
  for (int i = 0; i < n; ++i)
    if (evs[i].data.fd == ev_) {
      std::uint64_t v;
      [[maybe_unused]] auto r = ::read(ev_, &v, sizeof v);
    }
}

void UdpPort::wake() {
  std::uint64_t one = 1;
  [[maybe_unused]] auto r = ::write(ev_, &one, sizeof one);
}

std::size_t UdpPort::recv_batch() {
  segs_.clear();
  // The unicast socket first (answers to this member), then the group's with the buffers left.
  const std::size_t used = recv_into(fd_, 0);
  if (gfd_ >= 0 && used < batch_) recv_into(gfd_, used);
  recv_datagrams += segs_.size();
  return segs_.size();
}

std::size_t UdpPort::recv_into(int fd, std::size_t first) {
  for (std::size_t i = first; i < batch_; ++i) {
    msgs_[i].msg_hdr.msg_namelen = sizeof(sockaddr_in);
    msgs_[i].msg_hdr.msg_flags = 0;
    if (gro_) {
      msgs_[i].msg_hdr.msg_control = rx_cmsg_[i].b;
      msgs_[i].msg_hdr.msg_controllen = sizeof(rx_cmsg_[i].b);
    }
  }
  ++recv_calls;
  int n = ::recvmmsg(fd, msgs_.data() + first, unsigned(batch_ - first), MSG_DONTWAIT, nullptr);
  if (n <= 0) return first;
  for (std::size_t i = first; i < first + std::size_t(n); ++i) {
    const msghdr& h = msgs_[i].msg_hdr;
    const Endpoint from = from_sockaddr(addrs_[i]);
    const std::size_t base = i * kRecvBuf;
    std::size_t len = msgs_[i].msg_len;
    // A datagram longer than the buffer was truncated: hand over an empty one so that the
    // decoder refuses it (too_short) instead of reading a cut packet.
    if (h.msg_flags & MSG_TRUNC) len = 0;
    std::size_t seg = 0;
    if (gro_)
      for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(const_cast<msghdr*>(&h), c))
        if (c->cmsg_level == IPPROTO_UDP && c->cmsg_type == UDP_GRO) {
          int v = 0;
          std::memcpy(&v, CMSG_DATA(c), sizeof v);
          if (v > 0) seg = std::size_t(v);
        }
    if (seg == 0 || seg >= len) {
      segs_.push_back({base, std::uint32_t(len > proto::kMaxPacketBytes ? 0 : len), from});
      continue;
    }
    ++gro_receives;
    for (std::size_t off = 0; off < len; off += seg)
      segs_.push_back({base + off, std::uint32_t(std::min(seg, len - off)), from});
  }
  return first + std::size_t(n);
}

// Groups the outbox by destination (each destination's order kept) and sends runs of
// equal-size datagrams to one destination as one GSO entry.
void UdpPort::send_entries(const Outbox& out) {
  const auto& ents = out.entries();
  const std::size_t n = ents.size();
  if (n == 0) return;
  order_.resize(n);
  for (std::size_t i = 0; i < n; ++i) order_[i] = std::uint32_t(i);
  if (gso_ && n > 1)
    std::stable_sort(order_.begin(), order_.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return ents[a].to.id < ents[b].to.id; });
  std::size_t first = 0;
  while (first < n) {
    std::size_t resume = n;
    if (send_messages(out, first, resume)) break;
    first = resume;  // GSO refused: what is left goes out as plain datagrams
  }
}

bool UdpPort::send_messages(const Outbox& out, std::size_t first, std::size_t& resume_at) {
  const auto& ents = out.entries();
  const std::size_t n = ents.size();
  tx_msgs_.resize(n);
  tx_iov_.resize(3 * n);  // a head and, for a referencing entry, its payload and trailer
  tx_addrs_.resize(n);
  tx_cmsg_.resize(n);
  tx_first_.resize(n);
  tx_count_.resize(n);
  std::size_t m = 0, niov = 0;
  for (std::size_t i = first; i < n;) {
    const auto& e = ents[order_[i]];
    const std::size_t size = e.total();
    std::size_t k = 1;
    if (gso_ && size > 0 && size <= gso_max_size_) {
      const std::size_t max_seg = std::min(kGsoMaxSegments, kGsoMaxBytes / size);
      while (i + k < n && k < max_seg) {
        const auto& f = ents[order_[i + k]];
        if (f.to != e.to || f.total() > size) break;
        ++k;
        if (f.total() < size) break;  // a shorter datagram can only end a run
      }
    }
    // The kernel segments a GSO send by size over the concatenation of its iovecs, so a
    // datagram may be a header iovec and a payload iovec (the payload read where it lies).
    iovec* iov = &tx_iov_[niov];
    for (std::size_t j = 0; j < k; ++j) {
      const auto& f = ents[order_[i + j]];
      auto h = out.head(f);
      tx_iov_[niov].iov_base = const_cast<std::byte*>(h.data());
      tx_iov_[niov++].iov_len = h.size();
      if (f.ref_size) {
        tx_iov_[niov].iov_base = const_cast<std::byte*>(f.ref);
        tx_iov_[niov++].iov_len = f.ref_size;
      }
      if (f.tail_size) {  // the authentication trailer of a referencing datagram
        auto t = out.tail(f);
        tx_iov_[niov].iov_base = const_cast<std::byte*>(t.data());
        tx_iov_[niov++].iov_len = t.size();
      }
    }
    tx_addrs_[m] = to_sockaddr(e.to);
    mmsghdr& mh = tx_msgs_[m];
    // memset, not `mh = {}`: with the aggregate clear, GCC 12 at -O3 emitted the clear after the
    // field stores here (every datagram went out without address or iovec).
    std::memset(&mh, 0, sizeof(mh));
    mh.msg_hdr.msg_iov = iov;
    mh.msg_hdr.msg_iovlen = std::size_t(&tx_iov_[0] + niov - iov);
    mh.msg_hdr.msg_name = &tx_addrs_[m];
    mh.msg_hdr.msg_namelen = sizeof(sockaddr_in);
    if (k > 1) {
      mh.msg_hdr.msg_control = tx_cmsg_[m].b;
      mh.msg_hdr.msg_controllen = CMSG_SPACE(sizeof(std::uint16_t));
      cmsghdr* c = CMSG_FIRSTHDR(&mh.msg_hdr);
      c->cmsg_level = IPPROTO_UDP;
      c->cmsg_type = UDP_SEGMENT;
      c->cmsg_len = CMSG_LEN(sizeof(std::uint16_t));
      const auto seg = std::uint16_t(size);
      std::memcpy(CMSG_DATA(c), &seg, sizeof seg);
    }
    tx_first_[m] = std::uint32_t(i);
    tx_count_[m] = std::uint32_t(k);
    ++m;
    i += k;
  }
  std::size_t done = 0;
  while (done < m) {
    ++send_calls;
    int r = ::sendmmsg(fd_, tx_msgs_.data() + done, unsigned(std::min<std::size_t>(m - done, 1024)), 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      const std::size_t segs = tx_count_[done];
      if (segs > 1 && (errno == EIO || errno == EINVAL || errno == EMSGSIZE || errno == EOPNOTSUPP ||
                       errno == ENOPROTOOPT)) {
        // EMSGSIZE/EINVAL: segments larger than the path's MTU allows (they need IP
        // fragmentation, which GSO does not do): no GSO for this size and larger. Otherwise
        // this kernel or device cannot segment UDP (EIO: no checksum offload): plain datagrams
        // from now on.
        const std::size_t size = ents[order_[tx_first_[done]]].total();
        if ((errno == EINVAL || errno == EMSGSIZE) && size > 1) gso_max_size_ = size - 1;
        else gso_ = false;
        ++gso_refusals;
        resume_at = tx_first_[done];
        return false;
      }
      // Unreachable peer or full buffers: the datagram(s) are lost, as on any network.
      ++send_errors;
      ++done;
      continue;
    }
    for (int j = 0; j < r; ++j) {
      const std::size_t segs = tx_count_[done + std::size_t(j)];
      sent_datagrams += segs;
      if (segs > 1) ++gso_sends;
    }
    done += std::size_t(r);
  }
  return true;
}

void UdpPort::send_all(Outbox& out, FaultInjector* inj, Nanos now) {
  if (inj) {
    for (const auto& e : out.entries()) inj->submit(e.to, out.bytes(e), now);
    out.clear();
    send_due(*inj, now);
    return;
  }
  send_entries(out);
  out.clear();
}

void UdpPort::send_due(FaultInjector& inj, Nanos now) {
  inj.due(now, held_);
  send_entries(held_);
  held_.clear();
}

// ---- switch server ----------------------------------------------------------------------------

UdpSwitchServer::UdpSwitchServer(const SwitchConfig& cfg, Endpoint bind, const FaultConfig& faults,
                                 std::size_t batch, UdpOffload offload)
    : dp_(cfg), port_(bind, batch, offload) {
  if (faults.enabled()) inj_.emplace(faults);
  snap_ = dp_.snapshot();
}

void UdpSwitchServer::stop() {
  stop_.store(true);
  port_.wake();
}

SwitchSnapshot UdpSwitchServer::snapshot() const {
  std::lock_guard<std::mutex> g(snap_mu_);
  return snap_;
}

void UdpSwitchServer::post(Command cmd) {
  {
    std::lock_guard<std::mutex> g(cmd_mu_);
    cmds_.push_back(std::move(cmd));
  }
  cmd_pending_.store(true, std::memory_order_release);
  port_.wake();
}

void UdpSwitchServer::run_posted() {
  std::vector<Command> cmds;
  {
    std::lock_guard<std::mutex> g(cmd_mu_);
    cmds.swap(cmds_);
    cmd_pending_.store(false, std::memory_order_relaxed);
  }
  for (auto& c : cmds) c(dp_);
}

void UdpSwitchServer::publish() {
  auto s = dp_.snapshot();
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  s.cpu_seconds = double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
  if (inj_) {
    s.faults_enabled = true;
    s.faults_injected = {inj_->lost, inj_->duplicated, inj_->reordered};
  }
  std::lock_guard<std::mutex> g(snap_mu_);
  snap_ = std::move(s);
}

void UdpSwitchServer::run(const std::atomic<bool>* also_stop) {
  constexpr Nanos kPeriod = 100 * kMillisecond;
  Nanos next_period = monotonic_now() + kPeriod;
  FaultInjector* inj = inj_ ? &*inj_ : nullptr;
  auto& events = dp_.control_events();
  // The data plane's view of the wall clock (control packets' freshness), kept current below.
  auto wall_offset = [] { return std::int64_t(proto::auth::clock_seq_base()) - monotonic_now(); };
  dp_.set_wall_offset(wall_offset());
  while (!stop_.load(std::memory_order_relaxed) &&
         !(also_stop && also_stop->load(std::memory_order_relaxed))) {
    Nanos now = monotonic_now();
    Nanos until = next_period;
    if (inj) until = std::min(until, inj->next_due());
    port_.wait(until - now);
    // Drain what is readable, a bounded number of batches before looking at timers again.
    for (int round = 0; round < 64; ++round) {
      std::size_t n = port_.recv_batch();
      if (n == 0) break;
      now = monotonic_now();
      for (std::size_t i = 0; i < n; ++i) dp_.on_packet(port_.datagram(i), port_.from(i), now);
      port_.send_all(dp_.outbox(), inj, now);
    }
    if (!events.empty()) {
      for (auto& e : events)
        if (sink_) sink_(std::move(e));
      events.clear();
    }
    now = monotonic_now();
    if (cmd_pending_.load(std::memory_order_acquire)) {
      run_posted();
      port_.send_all(dp_.outbox(), inj, now);
    }
    if (inj) port_.send_due(*inj, now);
    if (now >= next_period) {
      dp_.set_wall_offset(wall_offset());
      dp_.on_tick(now);
      port_.send_all(dp_.outbox(), inj, now);
      publish();
      next_period = now + kPeriod;
    }
  }
  publish();
}

// ---- worker -----------------------------------------------------------------------------------

UdpWorker::UdpWorker(const WorkerConfig& cfg, Endpoint bind, const FaultConfig& faults,
                     UdpOffload offload)
    : proto_(cfg), port_(bind, 32, offload) {
  if (faults.enabled()) inj_.emplace(faults);
}

void UdpWorker::pump_io() {
  FaultInjector* inj = inj_ ? &*inj_ : nullptr;
  Nanos now = monotonic_now();
  port_.send_all(proto_.outbox(), inj, now);
  Nanos until = proto_.next_deadline();
  if (inj) until = std::min(until, inj->next_due());
  port_.wait(until - now);
  for (int round = 0; round < 64; ++round) {
    std::size_t n = port_.recv_batch();
    if (n == 0) break;
    now = monotonic_now();
    for (std::size_t i = 0; i < n; ++i) proto_.on_packet(port_.datagram(i), port_.from(i), now);
    follow_multicast(proto_, port_);
    port_.send_all(proto_.outbox(), inj, now);
  }
  now = monotonic_now();
  if (now >= proto_.next_deadline()) proto_.on_tick(now);
  if (inj) port_.send_due(*inj, now);
}

bool UdpWorker::run(WorkerOp op) {
  proto_.start(std::move(op), monotonic_now());
  while (proto_.busy()) pump_io();
  port_.send_all(proto_.outbox(), inj_ ? &*inj_ : nullptr, monotonic_now());
  return proto_.done();
}

void UdpWorker::leave() {
  proto_.leave(monotonic_now());
  port_.send_all(proto_.outbox(), nullptr, monotonic_now());
}

bool follow_multicast(WorkerProtocol& w, UdpPort& port) {
  const Endpoint g = w.multicast_group();
  if (!g.valid() || port.group() == g || w.failed()) return false;
  try {
    port.join_group(g, w.config().switch_ep);
  } catch (const std::exception& e) {
    w.multicast_unavailable(e.what());
    return false;
  }
  return true;
}

// ---- control client ---------------------------------------------------------------------------

namespace {
// One request, sealed under the control key by a fresh sender instance (a new sequence number,
// the wall clock, on every retransmission) with a random nonce in `chunk`; only an answer sealed
// under the key and echoing the nonce counts (docs/PROTOCOL.md "Control plane").
std::optional<proto::Reason> control_exchange(Endpoint sw, const proto::auth::Key& key,
                                              proto::Header h, std::span<const std::byte> payload,
                                              proto::PacketType ack, Nanos timeout) {
  const proto::auth::Instance inst = proto::auth::random_instance();
  const proto::auth::Mac mac(key, inst);
  h.chunk = proto::load_u32(reinterpret_cast<const std::byte*>(proto::auth::random_instance().data()));
  UdpPort port(Endpoint::ipv4(0, 0), 4);
  Outbox out;
  const std::size_t size = proto::kHeaderBytes + payload.size();
  std::uint64_t seq = 0;
  const Nanos deadline = monotonic_now() + timeout;
  Nanos rto = 20 * kMillisecond;
  while (monotonic_now() < deadline) {
    std::byte* p = out.reserve(size + proto::kAuthTrailerBytes);
    proto::encode(h, payload, std::span<std::byte>(p, size));
    seq = proto::auth::control_seq(seq);
    out.commit(sw, proto::auth::seal(mac, seq, p, size));
    port.send_all(out, nullptr, 0);
    const Nanos resend = std::min(deadline, monotonic_now() + rto);
    rto *= 2;
    while (monotonic_now() < resend) {
      port.wait(resend - monotonic_now());
      std::size_t n = port.recv_batch();
      for (std::size_t i = 0; i < n; ++i) {
        proto::PacketView v;
        const auto d = port.datagram(i);
        if (port.from(i) != sw || proto::decode(d, v) != proto::Reason::ok || !v.sealed ||
            v.h.job != h.job || v.h.chunk != h.chunk)
          continue;
        std::optional<proto::auth::Mac> cache;
        proto::auth::ReplayWindow window;
        if (proto::auth::open(key, cache, window, d) != proto::auth::Verdict::ok) continue;
        if (v.h.type == ack) return proto::Reason::ok;
        if (v.h.type == proto::PacketType::nack && proto::PacketType(v.h.aux & 0xFF) == h.type) return v.h.reason;
      }
    }
  }
  return std::nullopt;
}
}  // namespace

std::optional<proto::Reason> udp_admit(Endpoint sw, const proto::auth::Key& key, const JobSpec& spec,
                                       Nanos timeout) {
  proto::Header h;
  h.type = proto::PacketType::admit;
  h.elem = proto::ElemType::raw;
  h.count = proto::kAdmitInfoBytes;
  h.job = spec.job;
  proto::AdmitInfo a;
  a.slots = spec.slots;
  a.members = spec.members;
  a.parent_member = spec.parent_member;
  std::byte p[proto::kAdmitInfoBytes];
  proto::write_admit_info(a, p);
  return control_exchange(sw, key, h, p, proto::PacketType::admit_ack, timeout);
}

std::optional<proto::Reason> udp_release(Endpoint sw, const proto::auth::Key& key, std::uint32_t job,
                                         Nanos timeout) {
  proto::Header h;
  h.type = proto::PacketType::release;
  h.elem = proto::ElemType::raw;
  h.count = proto::kReleaseInfoBytes;
  h.job = job;
  std::byte p[proto::kReleaseInfoBytes] = {};
  return control_exchange(sw, key, h, p, proto::PacketType::release_ack, timeout);
}

}  // namespace inc::sw
