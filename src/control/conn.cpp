#include "src/control/conn.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "src/switch/udp.hpp"

namespace inc::control {

namespace ctl = proto::ctl;
using Clock = std::chrono::steady_clock;

proto::auth::Key load_control_key(const std::string& path) {
  std::string err;
  auto keys = proto::auth::load_key_file(path, err);
  if (!keys) throw std::runtime_error("control key file " + err);
  if (keys->empty()) throw std::runtime_error("control key file " + path + " has no key");
  return keys->front().key;
}

Session::Session(const proto::auth::Key& secret, bool client, ctl::Role role)
    : secret_(secret), client_(client), role_(role) {
  const auto inst = proto::auth::random_instance();  // 16 random bytes from the kernel
  std::copy(inst.begin(), inst.end(), mine_.begin());
  const auto h = ctl::encode_hello({ctl::kVersion, role_, mine_});
  out_.assign(h.begin(), h.end());
}

bool Session::fail(std::string why) {
  why_ = std::move(why);
  return false;
}

bool Session::in(std::span<const std::byte> bytes) {
  buf_.insert(buf_.end(), bytes.begin(), bytes.end());
  std::size_t pos = 0;
  if (!rx_) {
    if (buf_.size() < ctl::kHelloBytes) return true;
    std::string why;
    auto h = ctl::decode_hello(std::span(buf_).first(ctl::kHelloBytes), why);
    if (!h) return fail(why);
    peer_role_ = h->role;
    const ctl::Nonce& c = client_ ? mine_ : h->nonce;
    const ctl::Nonce& s = client_ ? h->nonce : mine_;
    tx_.emplace(secret_, c, s, client_);
    rx_.emplace(secret_, c, s, !client_);
    pos = ctl::kHelloBytes;
    for (const auto& m : queued_) send(m);
    queued_.clear();
  }
  while (buf_.size() - pos >= 4) {
    std::uint32_t len = 0;
    for (int i = 0; i < 4; ++i) len |= std::uint32_t(buf_[pos + std::size_t(i)]) << (8 * i);
    if (len < ctl::kTagBytes || len > ctl::kMaxFrameBytes)
      return fail("control frame of " + std::to_string(len) + " bytes (bad length)");
    if (buf_.size() - pos - 4 < len) break;
    auto plain = rx_->open(std::span(buf_).subspan(pos + 4, len));
    if (!plain)
      return fail("a control message failed authentication (wrong control key, altered, replayed or forged)");
    std::string why;
    auto m = ctl::decode(*plain, why);
    if (!m) return fail("bad control message: " + why);
    inbox_.push_back(std::move(*m));
    pos += 4 + len;
  }
  buf_.erase(buf_.begin(), buf_.begin() + std::ptrdiff_t(pos));
  return true;
}

std::optional<ctl::Message> Session::take() {
  if (inbox_.empty()) return std::nullopt;
  ctl::Message m = std::move(inbox_.front());
  inbox_.erase(inbox_.begin());
  return m;
}

void Session::send(const ctl::Message& m) {
  if (!tx_) {
    queued_.push_back(m);
    return;
  }
  auto f = tx_->seal(ctl::encode(m));
  out_.insert(out_.end(), f.begin(), f.end());
}

namespace {
int ms_left(Clock::time_point deadline) {
  auto d = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return d < 0 ? 0 : d > 1000000 ? 1000000 : int(d);
}
}  // namespace

Client::Client(const std::string& addr, const proto::auth::Key& secret, ctl::Role role,
               std::chrono::milliseconds timeout)
    : addr_(addr), s_(secret, true, role) {
  const auto deadline = Clock::now() + timeout;
  auto ep = sw::parse_endpoint(addr);
  if (!ep || ep->port() == 0) throw std::runtime_error("controller address '" + addr + "' is not an IPv4 host:port");
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(ep->port());
  sa.sin_addr.s_addr = htonl(ep->ipv4_addr());
  auto fail = [&](const std::string& why) {
    ::close(fd_);
    fd_ = -1;
    throw std::runtime_error("controller " + addr + ": " + why);
  };
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 && errno != EINPROGRESS)
    fail(std::strerror(errno));
  pollfd p{fd_, POLLOUT, 0};
  if (::poll(&p, 1, ms_left(deadline)) <= 0) fail("no connection within the time-out");
  int err = 0;
  socklen_t len = sizeof err;
  ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err) fail(std::strerror(err));
  try {
    flush(deadline);
    while (!s_.established()) {
      pollfd q{fd_, POLLIN, 0};
      const int r = ::poll(&q, 1, ms_left(deadline));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) throw std::runtime_error("controller " + addr + ": no answer to the hello within the time-out");
      std::byte buf[4096];
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) throw std::runtime_error("controller " + addr + ": connection closed during the hello");
      if (!s_.in(std::span(buf, std::size_t(n)))) throw std::runtime_error("controller " + addr + ": " + s_.why());
    }
    flush(deadline);
  } catch (const std::runtime_error&) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

Client::~Client() {
  if (fd_ >= 0) ::close(fd_);
}

void Client::flush(Clock::time_point deadline) {
  auto& out = s_.out();
  std::size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::send(fd_, out.data() + done, out.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += std::size_t(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd_, POLLOUT, 0};
      if (::poll(&p, 1, ms_left(deadline)) <= 0)
        throw std::runtime_error("controller " + addr_ + ": cannot send within the time-out");
      continue;
    }
    throw std::runtime_error("controller " + addr_ + ": connection lost (" + std::strerror(errno) + ")");
  }
  out.clear();
}

void Client::send(const ctl::Message& m, std::chrono::milliseconds timeout) {
  s_.send(m);
  flush(Clock::now() + timeout);
}

std::optional<ctl::Message> Client::recv(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (auto m = s_.take()) return m;
    pollfd p{fd_, POLLIN, 0};
    int r = ::poll(&p, 1, ms_left(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return std::nullopt;
    std::byte buf[65536];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) throw std::runtime_error("controller " + addr_ + ": connection closed");
    if (!s_.in(std::span(buf, std::size_t(n)))) throw std::runtime_error("controller " + addr_ + ": " + s_.why());
    if (!s_.out().empty()) flush(deadline);
  }
}

ctl::Message Client::call(const ctl::Message& m, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  send(m, timeout);
  auto r = recv(std::chrono::milliseconds(ms_left(deadline)));
  if (!r) throw std::runtime_error("controller " + addr_ + ": no answer within the time-out");
  return std::move(*r);
}

}  // namespace inc::control
